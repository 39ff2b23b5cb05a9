"""Every patch carries the upstream-style test it is submitted with; those tests pass patched and fail upstream."""

import re

import pytest
from conftest import REPO_ROOT

from tests.support.carried_tests import run_carried_tests, write_carried_tests
from tools.series import Project


@pytest.fixture(scope="module")
def upstream_tests(tmp_path_factory):
    """(directory, {patch: [test file]}): the primary's carried tests, as in upstream's repository."""
    project = Project(REPO_ROOT)
    directory = tmp_path_factory.mktemp("upstream-tests")
    return directory, write_carried_tests(project, project.read_base()["version"], directory)


def test_every_patch_carries_an_upstream_test(upstream_tests):
    _, tests = upstream_tests
    assert all(tests.values()), {name: files for name, files in tests.items() if not files}


def test_upstream_tests_pass_with_the_patches(upstream_tests, python):
    directory, _ = upstream_tests
    result = run_carried_tests(directory, python, patched=True)
    assert result.returncode == 0, result.stdout[-5000:]


def test_each_patch_upstream_test_fails_without_the_patches(upstream_tests, python):
    directory, tests = upstream_tests
    result = run_carried_tests(directory, python, patched=False)
    failing_files = set(
        re.findall(r"^(?:FAILED|ERROR|SUBFAILED\(.*?\)) (tests/[^:\s]+\.py)", result.stdout, re.MULTILINE)
    )
    assert result.returncode != 0
    for name, files in tests.items():
        assert failing_files & set(files), f"{name}: its tests {files} all pass on upstream\n{result.stdout[-5000:]}"
