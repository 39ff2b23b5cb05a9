"""The upstream-style tests the patches carry, on every supported release but the primary, from the run's wheels
(`sites` in conftest.py). The release's other checks are in tests/test_releases.py; these are a file of their own so
that `make test`'s two workers run them beside those (tests/conftest.py).

`make test` runs, on each release that applies backports, the backports' own tests: code written for that release
alone, which no run on the primary reaches. The patches applied as the primary has them run their scenarios on the
release's patched side in tests/test_releases.py; their carried tests are the other half (`make test-releases`)."""

import pytest

from tests.conftest import REPO_ROOT
from tests.release_expectations import CARRIED_TESTS_FAILING
from tests.support.forked_scenarios import ForkedScenarioRunner, stack_pins
from tools import patches
from tools.carried_tests import (
    failed_tests,
    passed_tests,
    run_carried_tests,
    skipped_tests,
    write_carried_tests,
)
from tools.releases import backported_patches


PROJECT = patches.Project(REPO_ROOT)
OLDER = PROJECT.supported_releases()[1:]


@pytest.fixture(scope="module")
def runners(sites, scenario_runner):
    """{release: the forked runner of its stack}: the run's own for releases on the verified stack, one server for each
    set of other pins (0.37.1 to 0.41.0 pin the same huggingface_hub), on the first such release's site."""
    by_pins = {(): scenario_runner}
    servers = []
    for version in OLDER:
        pins = stack_pins(PROJECT, version)
        if pins not in by_pins:
            by_pins[pins] = ForkedScenarioRunner(stack_site=sites[version])
            servers.append(by_pins[pins])
    yield {version: by_pins[stack_pins(PROJECT, version)] for version in OLDER}
    for server in servers:
        server.close()


def carried_test_modules(tests, of_patches=None):
    """The test modules of `tests` ({patch: [file]}), of the patches `of_patches` only if given: not the helper modules
    some patches add."""
    return {
        path
        for name, files in tests.items()
        if of_patches is None or name in of_patches
        for path in files
        if path.rsplit("/", 1)[-1].startswith("test_")
    }


BACKPORTING = [version for version in OLDER if backported_patches(PROJECT, version)]


def check_carried_tests(version, sites, runners, directory, keep):
    """Write the carried tests of `version` into `directory` and run the test files `keep(tests)` selects of them
    patched (the others stay importable: some tests import another's module); they pass but those
    tests/release_expectations.py records as not applicable to the release (node id or prefix -> why). Returns how many
    files ran."""
    tests = write_carried_tests(PROJECT, version, directory)
    kept = keep(tests)
    recorded = {
        prefix: why for prefix, why in CARRIED_TESTS_FAILING.get(version, {}).items() if prefix.split("::")[0] in kept
    }
    result = run_carried_tests(
        directory, runners[version].python, patched=True, env={"PYTHONPATH": str(sites[version])}, paths=kept
    )

    def is_recorded(node_id):
        return any(node_id.startswith(prefix) for prefix in recorded)

    failed = failed_tests(result.stdout)
    assert sorted(node_id for node_id in failed if not is_recorded(node_id)) == [], result.stdout[-5000:]
    assert result.returncode == (1 if failed else 0), result.stdout[-5000:]
    assert skipped_tests(result.stdout) == [], f"{version}: skipped carried tests ran nothing"
    # Every recorded test still exists and still fails there: a record that no longer holds is stale data.
    passed = sorted(node_id for node_id in passed_tests(result.stdout) if is_recorded(node_id))
    assert passed == [], f"{version}: recorded, but pass: {passed}\n{result.stdout[-3000:]}"
    assert [prefix for prefix in recorded if not any(node_id.startswith(prefix) for node_id in failed)] == []
    return len(kept)


@pytest.mark.parametrize("version", BACKPORTING)
def test_the_backports_carried_tests_pass_on_the_release(version, sites, runners, tmp_path):
    """The tests of the patches `version` applies as a backport pass on its build."""
    assert check_carried_tests(
        version,
        sites,
        runners,
        tmp_path,
        lambda tests: carried_test_modules(tests, backported_patches(PROJECT, version)),
    )


@pytest.mark.release_check
@pytest.mark.parametrize("version", OLDER)
def test_the_other_carried_tests_pass_on_the_release(version, sites, runners, tmp_path):
    """The rest of the carried tests pass on `version`'s build: together with the test above, all of them."""

    def others(tests):
        return carried_test_modules(tests) - carried_test_modules(tests, backported_patches(PROJECT, version))

    assert check_carried_tests(version, sites, runners, tmp_path, others)
