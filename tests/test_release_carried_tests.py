"""The upstream-style tests the patches carry, on every supported release but the primary, from the run's wheels
(`sites` in conftest.py). The release's other checks are in tests/test_releases.py; these are a file of their own so
that `make test`'s two workers run them beside those (tests/conftest.py)."""

import pytest

from tests.conftest import REPO_ROOT
from tests.release_expectations import CARRIED_TESTS_FAILING
from tests.support.forked_scenarios import ForkedScenarioRunner
from tools import patches
from tools.carried_tests import (
    failed_tests,
    passed_tests,
    run_carried_tests,
    skipped_tests,
    write_carried_tests,
)


PROJECT = patches.Project(REPO_ROOT)
OLDER = PROJECT.supported_releases()[1:]


@pytest.fixture(scope="module")
def runners(sites, scenario_runner):
    """{release: the forked runner of its stack}: the run's own for releases on the verified stack, one server for each
    set of other pins (0.37.1 to 0.41.0 pin the same huggingface_hub), on the first such release's site."""
    by_pins = {(): scenario_runner}
    servers = []
    for version in OLDER:
        pins = tuple(PROJECT.release_record(version).get("stack", []))
        if pins not in by_pins:
            by_pins[pins] = ForkedScenarioRunner(stack_site=sites[version])
            servers.append(by_pins[pins])
    yield {version: by_pins[tuple(PROJECT.release_record(version).get("stack", []))] for version in OLDER}
    for server in servers:
        server.close()


@pytest.mark.parametrize("version", OLDER)
def test_carried_upstream_tests_pass_on_the_release(version, sites, runners, tmp_path):
    """The upstream-style tests the patches carry (a backport's own where the release has one) pass on its build, but
    those tests/release_expectations.py records as not applicable to the release (node id or prefix -> why)."""
    write_carried_tests(PROJECT, version, tmp_path)
    recorded = CARRIED_TESTS_FAILING.get(version, {})
    result = run_carried_tests(
        tmp_path, runners[version].python, patched=True, env={"PYTHONPATH": str(sites[version])}
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
