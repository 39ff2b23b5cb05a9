"""Every patch carries the upstream-style test it is submitted with; that test passes patched and fails upstream."""

import subprocess

import pytest
from conftest import REPO_ROOT

from diffusers_patched.series import Project


def _patches_with_tests():
    project = Project(REPO_ROOT)
    return [name for name in project.read_series() if "+++ b/tests/" in (project.patches_dir / name).read_text()]


@pytest.fixture(scope="module", params=_patches_with_tests())
def upstream_test_dir(request, tmp_path_factory):
    """The test files a patch adds, written out on their own (they are new files, so they apply to an empty tree)."""
    directory = tmp_path_factory.mktemp(request.param.split("-")[0])
    subprocess.run(["git", "init", "--quiet", str(directory)], check=True)
    subprocess.run(
        ["git", "-C", str(directory), "apply", "--include=tests/*", str(REPO_ROOT / "patches" / request.param)],
        check=True,
    )
    return directory


def _pytest(directory, python, patched):
    code = f"import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', {str(directory / 'tests')!r}]))"
    return python(code, patched=patched, cwd=directory)


def test_upstream_test_passes_with_the_patch(upstream_test_dir, python):
    result = _pytest(upstream_test_dir, python, patched=True)
    assert result.returncode == 0, result.stdout[-3000:]


def test_upstream_test_fails_without_the_patch(upstream_test_dir, python):
    result = _pytest(upstream_test_dir, python, patched=False)
    assert result.returncode != 0, result.stdout[-3000:]
    assert "failed" in result.stdout or "error" in result.stdout, result.stdout[-3000:]
