"""Every patch carries the upstream-style test it is submitted with; those tests pass patched and fail upstream."""

import re
import shutil
import subprocess

import pytest
from conftest import REPO_ROOT

from tools.series import Project, pristine_repo


@pytest.fixture(scope="module")
def upstream_tests(tmp_path_factory):
    """{patch: [test file]}, written out beside upstream's tests/testing_utils.py, as in upstream's repository."""
    project = Project(REPO_ROOT)
    base = project.read_base()
    directory = tmp_path_factory.mktemp("upstream-tests")
    subprocess.run(["git", "init", "--quiet", str(directory)], check=True)
    tests = {}
    for name in project.read_series():
        patch = project.patches_dir / name
        tests[name] = re.findall(r"^\+\+\+ b/(tests/\S+\.py)$", patch.read_text(), re.MULTILINE)
        subprocess.run(["git", "-C", str(directory), "apply", "--include=tests/*", str(patch)], check=True)
    shutil.copyfile(
        pristine_repo(base["version"], base["sdist_sha256"]) / "tests" / "testing_utils.py",
        directory / "tests" / "testing_utils.py",
    )
    # Upstream's test directories are packages (`from ..testing_utils import ...`); the sdist leaves their
    # `__init__.py` files out.
    for package in [directory / "tests", *(path for path in (directory / "tests").rglob("*") if path.is_dir())]:
        (package / "__init__.py").touch()
    return directory, tests


def _run_pytest(directory, python, patched):
    code = "import sys, pytest; sys.exit(pytest.main(['-q', '-rA', '-p', 'no:cacheprovider', '--continue-on-collection-errors', 'tests']))"
    return python(code, patched=patched, cwd=directory)


def test_every_patch_carries_an_upstream_test(upstream_tests):
    _, tests = upstream_tests
    assert all(tests.values()), {name: files for name, files in tests.items() if not files}


def test_upstream_tests_pass_with_the_patches(upstream_tests, python):
    directory, _ = upstream_tests
    result = _run_pytest(directory, python, patched=True)
    assert result.returncode == 0, result.stdout[-5000:]


def test_each_patch_upstream_test_fails_without_the_patches(upstream_tests, python):
    directory, tests = upstream_tests
    result = _run_pytest(directory, python, patched=False)
    failing_files = set(
        re.findall(r"^(?:FAILED|ERROR|SUBFAILED\(.*?\)) (tests/[^:\s]+\.py)", result.stdout, re.MULTILINE)
    )
    assert result.returncode != 0
    for name, files in tests.items():
        assert failing_files & set(files), f"{name}: its tests {files} all pass on upstream\n{result.stdout[-5000:]}"
