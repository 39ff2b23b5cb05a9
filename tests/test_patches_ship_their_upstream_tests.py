"""Every patch carries the upstream-style test it is submitted with; those tests pass patched and fail upstream."""

import re

import pytest

from tests.conftest import REPO_ROOT
from tools.carried_tests import run_carried_tests, skipped_tests, superseded_tests, write_carried_tests
from tools.patches import Project


@pytest.fixture(scope="module")
def upstream_tests(tmp_path_factory):
    """(directory, {patch: [test file]}): the primary's carried tests, as in upstream's repository."""
    project = Project(REPO_ROOT)
    directory = tmp_path_factory.mktemp("upstream-tests")
    return directory, write_carried_tests(project, project.read_base()["version"], directory)


def test_every_patch_carries_an_upstream_test(upstream_tests):
    _, tests = upstream_tests
    assert all(tests.values()), {name: files for name, files in tests.items() if not files}


def test_upstream_tests_pass_with_the_patches(upstream_tests, scenario_runner):
    directory, _ = upstream_tests
    result = run_carried_tests(directory, scenario_runner.python, patched=True)
    assert result.returncode == 0, result.stdout[-5000:]
    assert skipped_tests(result.stdout) == [], "skipped carried tests ran nothing"
    # The tests of refusals that local patches lift are left out, and each of them names tests that exist.
    deselected = re.search(r"(\d+) deselected", result.stdout)
    assert int(deselected.group(1) if deselected else 0) >= len(superseded_tests(directory)) > 0


def test_a_skipped_carried_test_is_reported(tmp_path, scenario_runner):
    # The positive control of the check above: a test skipped for a missing library, as upstream's `require_*`
    # decorators skip, is found in the report.
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_needs_a_library.py").write_text(
        "import pytest\n\n\n"
        "@pytest.mark.skipif(True, reason='test requires PEFT backend')\n"
        "def test_with_the_library():\n"
        "    pass\n"
    )
    result = run_carried_tests(tmp_path, scenario_runner.python, patched=True)
    assert result.returncode == 0, result.stdout
    (skipped,) = skipped_tests(result.stdout)
    assert skipped.startswith("tests/test_needs_a_library.py:") and skipped.endswith(": test requires PEFT backend")


def test_each_patch_upstream_test_fails_without_the_patches(upstream_tests, scenario_runner):
    directory, tests = upstream_tests
    result = run_carried_tests(directory, scenario_runner.python, patched=False)
    failing_files = set(
        re.findall(r"^(?:FAILED|ERROR|SUBFAILED\(.*?\)) (tests/[^:\s]+\.py)", result.stdout, re.MULTILINE)
    )
    assert result.returncode != 0
    for name, files in tests.items():
        assert failing_files & set(files), f"{name}: its tests {files} all pass on upstream\n{result.stdout[-5000:]}"
