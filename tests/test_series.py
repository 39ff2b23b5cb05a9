"""The maintainer tooling of diffusers_patched.series, driven with real git on copies of the project.

Every test works on a copy of `patches/` and `diffusers_patched/_vendor/` in a temporary project root, and on a
session-wide temporary cache (DIFFUSERS_PATCHED_CACHE) that holds the real pristine sdist plus synthetic upstream
releases built from it, so the real checkout and the user's cache are never written to.
"""

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO_ROOT

from tools import series


def run_git(repo, *args):
    """Plain git, independent of series.git, with an isolated configuration."""
    result = subprocess.run(
        ["git", "-C", str(repo), *args], env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    assert result.returncode == 0, f"git {' '.join(args)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


BASE = json.loads((REPO_ROOT / "patches" / "base.json").read_text())
SERIES = [
    line.split("#", 1)[0].strip()
    for line in (REPO_ROOT / "patches" / "series").read_text().splitlines()
    if line.split("#", 1)[0].strip()
]
FIRST_PATCH = SERIES[0]
PATCHED_FILE = "src/diffusers/pipelines/pipeline_loading_utils.py"
VENDORED_FILE = "diffusers/pipelines/pipeline_loading_utils.py"
IMPORT_LINE = "from .. import __version__\n"
INSERTED_ABOVE = "#\n# Synthetic upstream change: these comment lines were inserted above the patched region.\n#\n"
CONFLICTING_IMPORT = "from .. import __version__  # synthetic upstream change on the patched lines\n"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Maintainer",
    "GIT_AUTHOR_EMAIL": "maintainer@example.com",
    "GIT_AUTHOR_DATE": "2001-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "Test Maintainer",
    "GIT_COMMITTER_EMAIL": "maintainer@example.com",
    "GIT_COMMITTER_DATE": "2001-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "LC_ALL": "C",
}


def snapshot(root):
    """{relative path: bytes} of everything the tooling may write in a project root, but build/."""
    root = Path(root)
    return {
        str(path.relative_to(root)): path.read_bytes()
        for directory in ("patches", "diffusers_patched/_vendor")
        for path in sorted((root / directory).rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def vendor_tree(root):
    return {
        path[len("diffusers_patched/_vendor/") :]: content
        for path, content in snapshot(root).items()
        if path.startswith("diffusers_patched/_vendor/")
    }


def pristine_member(sdist, path):
    with tarfile.open(sdist) as tar:
        return tar.extractfile(f"{tar.getnames()[0].split('/')[0]}/{path}").read()


def make_release(source_sdist, dest_dir, version, changes):
    """Write `diffusers-<version>.tar.gz`: `source_sdist` re-rooted at `diffusers-<version>/`, with `changes`."""
    changes = dict(changes)
    dest = Path(dest_dir) / f"diffusers-{version}.tar.gz"
    with tarfile.open(source_sdist) as source, tarfile.open(dest, "w:gz", compresslevel=1) as out:
        for member in source.getmembers():
            data = source.extractfile(member).read() if member.isfile() else None
            relative = member.name.split("/", 1)[1] if "/" in member.name else ""
            member.name = f"diffusers-{version}/{relative}".rstrip("/")
            if relative in changes:
                data = changes.pop(relative)
                member.size = len(data)
            out.addfile(member, io.BytesIO(data) if data is not None else None)
        for relative, data in changes.items():
            member = tarfile.TarInfo(f"diffusers-{version}/{relative}")
            member.size = len(data)
            member.mode = 0o644
            out.addfile(member, io.BytesIO(data))
    return dest


@pytest.fixture(scope="session")
def releases(tmp_path_factory):
    """A cache with the real pristine sdist and synthetic upstream releases 0.42.2 (lines inserted above the
    patched region), 0.42.3 (the patched lines changed) and 0.42.4 (the first patch already applied)."""
    real_sdist = series.fetch_sdist(BASE["version"], BASE["sdist_sha256"])  # the user's cache, read only
    cache = tmp_path_factory.mktemp("cache")
    sdists = cache / "sdists"
    sdists.mkdir()
    shutil.copyfile(real_sdist, sdists / real_sdist.name)
    pristine = pristine_member(real_sdist, PATCHED_FILE).decode()
    assert pristine.count(IMPORT_LINE) == 1
    header_end = pristine.index("\nimport importlib\n") + 1
    make_release(
        real_sdist,
        sdists,
        "0.42.2",
        {PATCHED_FILE: (pristine[:header_end] + INSERTED_ABOVE + pristine[header_end:]).encode()},
    )
    make_release(
        real_sdist, sdists, "0.42.3", {PATCHED_FILE: pristine.replace(IMPORT_LINE, CONFLICTING_IMPORT).encode()}
    )
    # 0.42.4: the first patch applied to the release's own source with git apply.
    applied = tmp_path_factory.mktemp("applied")
    (applied / PATCHED_FILE).parent.mkdir(parents=True)
    (applied / PATCHED_FILE).write_text(pristine)
    run_git(applied, "init", "--quiet")
    run_git(applied, "apply", str(REPO_ROOT / "patches" / FIRST_PATCH))
    patched = {
        str(path.relative_to(applied)): path.read_bytes()
        for path in applied.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(applied).parts
    }
    assert len(patched) == 2  # the changed module and the test file the patch adds
    make_release(real_sdist, sdists, "0.42.4", patched)
    return {"cache": cache, "sdist": real_sdist}


@pytest.fixture(autouse=True)
def cache(releases, monkeypatch):
    monkeypatch.setenv("DIFFUSERS_PATCHED_CACHE", str(releases["cache"]))
    return releases["cache"]


@pytest.fixture
def project(tmp_path):
    """A copy of the project's series and vendored tree in a temporary root."""
    root = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "patches", root / "patches")
    shutil.copytree(
        REPO_ROOT / "diffusers_patched" / "_vendor",
        root / "diffusers_patched" / "_vendor",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    assert snapshot(root) == snapshot(REPO_ROOT)
    return series.Project(root)


@pytest.fixture
def first_patch_project(tmp_path, releases):
    """A project whose series is the first patch alone: the synthetic releases are built around its hunks, so the
    rebase tests do not depend on which other patches the series carries."""
    root = tmp_path / "first-patch-project"
    (root / "patches").mkdir(parents=True)
    shutil.copyfile(REPO_ROOT / "patches" / FIRST_PATCH, root / "patches" / FIRST_PATCH)
    project = series.Project(root)
    project.write_series([FIRST_PATCH])
    project.write_base({**BASE, "files": {PATCHED_FILE: BASE["files"][PATCHED_FILE]}})
    series.vendor(project)
    return project


def series_error(function, *args):
    with pytest.raises(series.SeriesError) as error:
        function(*args)
    return str(error.value)


def rewrite_patch(project, name, transform):
    path = project.patches_dir / name
    path.write_text(transform(path.read_text()))


# The committed series.


def test_check_passes_on_the_committed_series(project):
    assert series.check(project) == SERIES


def test_cli_check_reports_success_and_exit_code_zero(project):
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "check", "--root", str(project.root)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert f"series OK: {len(SERIES)} patch(es)" in result.stdout


def test_reexport_of_every_patch_is_byte_identical(project, tmp_path):
    repo = tmp_path / "work"
    entries = series.scratch_checkout(project, repo)
    commits = series.series_commits(repo)
    assert entries == SERIES and len(commits) == len(SERIES)
    for name, commit in zip(entries, commits):
        assert series.export_commit(repo, commit) == (REPO_ROOT / "patches" / name).read_bytes(), name


def test_changed_files_pass_upstream_ruff(project, tmp_path):
    repo = tmp_path / "work"
    series.scratch_checkout(project, repo)
    assert (repo / "pyproject.toml").exists()  # upstream's own ruff configuration
    assert series.lint_style(repo) == []


def test_exported_patches_git_am_onto_the_pristine_sdist_giving_the_vendored_files(project, tmp_path, releases):
    out = tmp_path / "out"
    paths = series.export_patches(project, out)
    assert [path.name for path in paths] == SERIES
    assert (out / "series").read_text().split() == SERIES
    # A fresh repository from the pristine sdist, made without series.py.
    fresh = tmp_path / "fresh"
    with tarfile.open(releases["sdist"]) as tar:
        tar.extractall(tmp_path / "extracted", filter="data")
    (tmp_path / "extracted" / f"diffusers-{BASE['version']}").rename(fresh)
    run_git(fresh, "init", "--quiet")
    run_git(fresh, "add", "--all", "--force")
    run_git(fresh, "commit", "--quiet", "-m", "pristine")
    for path in paths:
        run_git(fresh, "am", "--quiet", str(path))
    assert run_git(fresh, "rev-list", "--count", "HEAD").strip() == str(1 + len(SERIES))
    vendored = {path: content for path, content in vendor_tree(REPO_ROOT).items() if path.startswith("diffusers/")}
    changed = run_git(fresh, "diff", "--name-only", "HEAD~" + str(len(SERIES)), "HEAD", "--", "src/").split()
    assert {path[len("src/") :] for path in changed if path.endswith(".py")} == set(vendored)
    for path in vendored:
        assert (fresh / "src" / path).read_bytes() == vendored[path], path
    assert vendor_tree(REPO_ROOT)["LICENSE"] == (fresh / "LICENSE").read_bytes()


def test_vendor_regenerates_the_identical_tree(project):
    shutil.rmtree(project.vendor_dir)
    assert series.vendor(project) == SERIES
    assert vendor_tree(project.root) == vendor_tree(REPO_ROOT)
    assert snapshot(project.root) == snapshot(REPO_ROOT)


# Bad input: each message names the thing and the fix.


def test_truncated_patch_is_reported_as_corrupt(project):
    rewrite_patch(project, FIRST_PATCH, lambda text: text[: text.index("+def _get_bitsandbytes_quantization_method")])
    message = series_error(series.check, project)
    assert FIRST_PATCH in message
    assert "corrupt or truncated" in message
    assert f"git checkout -- patches/{FIRST_PATCH}" in message


def test_garbage_patch_is_reported_as_corrupt(project):
    (project.patches_dir / FIRST_PATCH).write_text("this is not a patch\n")
    message = series_error(series.check, project)
    assert FIRST_PATCH in message and "not a valid patch" in message


def test_series_naming_a_missing_patch(project):
    (project.patches_dir / FIRST_PATCH).unlink()
    message = series_error(series.check, project)
    assert f"{FIRST_PATCH} does not exist" in message
    assert "restore the file or remove the line" in message
    assert str(project.series_file) in message


def test_unlisted_patch_file(project):
    shutil.copyfile(project.patches_dir / FIRST_PATCH, project.patches_dir / "0099-stray.patch")
    message = series_error(series.check, project)
    assert "0099-stray.patch" in message and "not listed" in message
    assert "add it to the series or delete it" in message


def test_duplicate_series_entry(project):
    with project.series_file.open("a") as f:
        f.write(f"{FIRST_PATCH}\n")
    message = series_error(series.check, project)
    assert f"{FIRST_PATCH} is listed twice" in message
    assert "remove the duplicate line" in message


@pytest.mark.parametrize(
    "stray", ["patches/0001-x.patch.orig", "diffusers_patched/_vendor/diffusers/pipelines/a.py.rej"]
)
def test_stray_orig_or_rej_file(project, stray):
    (project.root / stray).write_text("left over\n")
    message = series_error(series.check, project)
    assert stray in message and "delete them" in message


def shift_hunk(project, number, lines):
    """Move hunk `number` of PATCHED_FILE in the first patch by `lines`; returns the new hunk header."""
    path = project.patches_dir / FIRST_PATCH
    text = path.read_text()
    header = series._patch_hunks(text)[PATCHED_FILE][number - 1][0]
    old, new = map(int, re.match(r"@@ -(\d+),\d+ \+(\d+)", header).groups())
    shifted = header.replace(f"-{old},", f"-{old + lines},").replace(f"+{new},", f"+{new + lines},")
    path.write_text(text.replace(header, shifted))
    return shifted


def test_patch_needing_an_offset_names_patch_file_and_hunk(project):
    header = shift_hunk(project, 2, -3)
    message = series_error(series.check, project)
    assert f"{FIRST_PATCH}: {PATCHED_FILE}: hunk #2 ({header})" in message
    assert "offset of 3 lines" in message
    assert "make edit" in message and "make refresh" in message


def test_patch_needing_an_offset_is_rewritten_by_edit_and_refresh(project):
    shift_hunk(project, 3, 5)
    assert "offset of -5 lines" in series_error(series.check, project)
    assert series.edit(project) == SERIES  # the remedy the message names must work
    assert series.refresh(project) == SERIES
    assert snapshot(project.root) == snapshot(REPO_ROOT)
    assert series.check(project) == SERIES


def test_patch_with_wrong_context_names_patch_file_and_hunk(project):
    rewrite_patch(
        project,
        FIRST_PATCH,
        lambda text: text.replace("\n from packaging import version\n", "\n from packaging import versions\n"),
    )
    message = series_error(series.check, project)
    header = series._patch_hunks((REPO_ROOT / "patches" / FIRST_PATCH).read_text())[PATCHED_FILE][0][0]
    assert f"{FIRST_PATCH}: {PATCHED_FILE}: hunk #1 ({header}) does not apply" in message
    assert "make edit" in message


def test_pristine_sdist_with_the_wrong_hash(project, tmp_path, monkeypatch, releases):
    cache = tmp_path / "bad-cache"
    (cache / "sdists").mkdir(parents=True)
    sdist = cache / "sdists" / f"diffusers-{BASE['version']}.tar.gz"
    make_release(releases["sdist"], cache / "sdists", BASE["version"], {"README.md": b"tampered\n"})
    monkeypatch.setenv("DIFFUSERS_PATCHED_CACHE", str(cache))
    message = series_error(series.check, project)
    assert str(sdist) in message
    assert series.sha256_of(sdist) in message and BASE["sdist_sha256"] in message
    assert f"Delete {sdist} so that it is downloaded again" in message
    assert snapshot(project.root) == snapshot(REPO_ROOT)


def test_hand_edited_vendored_file(project):
    vendored = project.vendor_dir / VENDORED_FILE
    vendored.write_text(vendored.read_text() + "# edited by hand\n")
    message = series_error(series.check, project)
    assert f"diffusers_patched/_vendor/{VENDORED_FILE} is edited" in message
    assert "make vendor" in message and "make edit" in message and "make refresh" in message


def test_cli_check_fails_with_exit_code_and_message_on_hand_edited_vendored_file(project):
    vendored = project.vendor_dir / VENDORED_FILE
    vendored.write_text(vendored.read_text() + "# edited by hand\n")
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "check", "--root", str(project.root)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: ")
    assert f"diffusers_patched/_vendor/{VENDORED_FILE} is edited" in result.stderr
    assert "Traceback" not in result.stderr


def test_hand_edited_patch_file_is_reported_by_the_reexport(project):
    rewrite_patch(project, FIRST_PATCH, lambda text: text.replace("Forwarded: no\n", "Forwarded: no\n\n\n", 1))
    message = series_error(series.check, project)
    assert f"{FIRST_PATCH}: a re-export differs from the committed file" in message
    assert "make refresh" in message


def test_rebase_to_a_version_that_does_not_exist(project, tmp_path, monkeypatch):
    monkeypatch.setenv("DIFFUSERS_PATCHED_CACHE", str(tmp_path / "empty-cache"))
    # pip really runs, but against an empty local index, so the test is fast and needs no network.
    (tmp_path / "no-packages").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-packages"))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    message = series_error(series.rebase, project, "0.0.999")
    assert "could not download the sdist of diffusers==0.0.999" in message
    assert "is it a released version?" in message and "pip index versions diffusers" in message
    assert snapshot(project.root) == snapshot(REPO_ROOT)
    assert not (project.root / "build").exists()


# Rebase onto synthetic upstream releases.


def test_rebase_onto_release_with_lines_inserted_above_the_patch(first_patch_project, cache):
    project = first_patch_project
    old = (project.vendor_dir / VENDORED_FILE).read_text()
    names, dropped = series.rebase(project, "0.42.2")
    assert names == [FIRST_PATCH] and dropped == []
    sdist = cache / "sdists" / "diffusers-0.42.2.tar.gz"
    new_pristine = pristine_member(sdist, PATCHED_FILE)
    base = project.read_base()
    assert base == {
        "version": "0.42.2",
        "sdist_sha256": series.sha256_of(sdist),
        "files": {PATCHED_FILE: series.hashlib.sha256(new_pristine).hexdigest()},
    }
    # The vendored module is the old patched one with upstream's new lines: new pristine + series.
    at = old.index("\nimport importlib\n") + 1
    assert (project.vendor_dir / VENDORED_FILE).read_text() == old[:at] + INSERTED_ABOVE + old[at:]
    assert "UPSTREAM_VERSION = '0.42.2'" in (project.vendor_dir / "__init__.py").read_text()
    assert not project.rebase_dir.exists()
    assert series.check(project) == [FIRST_PATCH]


def test_rebase_conflict_leaves_project_unchanged_and_continues_after_resolution(first_patch_project):
    project = first_patch_project
    old = (project.vendor_dir / VENDORED_FILE).read_text()
    before = snapshot(project.root)
    message = series_error(series.rebase, project, "0.42.3")
    header = series._patch_hunks((REPO_ROOT / "patches" / FIRST_PATCH).read_text())[PATCHED_FILE][0][0]
    assert f"{FIRST_PATCH} conflicts with diffusers 0.42.3" in message
    assert f"{PATCHED_FILE}: conflict at line" in message and header in message
    assert "make rebase-continue" in message
    assert snapshot(project.root) == before
    conflicted = (project.rebase_dir / PATCHED_FILE).read_text()
    assert "<<<<<<< " in conflicted and "=======" in conflicted and ">>>>>>> " in conflicted
    # A second rebase refuses while this one is in progress.
    assert "already in progress" in series_error(series.rebase, project, "0.42.3")
    # Resolve: upstream's changed line, plus the patch's change.
    resolved = old.replace(IMPORT_LINE, CONFLICTING_IMPORT)
    (project.rebase_dir / PATCHED_FILE).write_text(resolved)
    run_git(project.rebase_dir, "add", PATCHED_FILE)
    names, dropped = series.rebase_continue(project)
    assert names == [FIRST_PATCH] and dropped == []
    assert project.read_base()["version"] == "0.42.3"
    assert (project.vendor_dir / VENDORED_FILE).read_text() == resolved
    assert not project.rebase_dir.exists()
    assert series.check(project) == [FIRST_PATCH]


def test_rebase_drops_a_patch_applied_upstream(first_patch_project):
    project = first_patch_project
    names, dropped = series.rebase(project, "0.42.4")
    assert dropped == [FIRST_PATCH]
    assert names == []
    assert not (project.patches_dir / FIRST_PATCH).exists()
    assert project.read_series() == names
    assert project.read_base()["version"] == "0.42.4"
    assert not (project.vendor_dir / VENDORED_FILE).exists()
    assert series.check(project) == []


def test_cli_rebase_reports_the_dropped_patch(first_patch_project):
    project = first_patch_project
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "rebase", "0.42.4", "--root", str(project.root)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "series rebased onto diffusers 0.42.4" in result.stdout
    assert f"{FIRST_PATCH}: applied upstream, dropped from the series" in result.stdout


def test_rebase_continue_without_a_rebase(project):
    message = series_error(series.rebase_continue, project)
    assert "no rebase in progress" in message and "make rebase UPSTREAM=X.Y.Z" in message


# Edit + refresh.


def commit_change(repo, path, text, subject):
    with (repo / path).open("a") as f:
        f.write(text)
    run_git(repo, "commit", "--quiet", "-am", subject)


def test_refresh_adds_a_new_commit_as_a_new_patch(project):
    assert series.edit(project) == SERIES
    repo = project.work_dir
    commit_change(
        repo,
        "src/diffusers/utils/doc_utils.py",
        "\n\n# A small synthetic change.\n",
        "Add a synthetic note to doc_utils",
    )
    names = series.refresh(project)
    new_patch = f"{len(SERIES) + 1:04d}-add-a-synthetic-note-to-doc-utils.patch"
    assert names == SERIES + [new_patch]
    assert project.read_series() == names
    for name in SERIES:  # the existing patches keep their names and bytes
        assert (project.patches_dir / name).read_bytes() == (REPO_ROOT / "patches" / name).read_bytes()
    assert "Subject: Add a synthetic note to doc_utils" in (project.patches_dir / new_patch).read_text()
    vendored = project.vendor_dir / "diffusers" / "utils" / "doc_utils.py"
    assert vendored.read_bytes() == (repo / "src/diffusers/utils/doc_utils.py").read_bytes()
    assert "'diffusers.utils.doc_utils'" in (project.vendor_dir / "__init__.py").read_text()
    assert "src/diffusers/utils/doc_utils.py" in project.read_base()["files"]
    assert series.check(project) == names


def test_refresh_refuses_uncommitted_changes(project):
    series.edit(project)
    with (project.work_dir / "src/diffusers/utils/doc_utils.py").open("a") as f:
        f.write("# not committed\n")
    before = snapshot(project.root)
    message = series_error(series.refresh, project)
    assert str(project.work_dir) in message and "uncommitted changes" in message and "commit them first" in message
    assert snapshot(project.root) == before


def test_edit_refuses_to_discard_commits_not_yet_refreshed(project):
    series.edit(project)
    (project.work_dir / "NEW_FILE").write_text("work in progress\n")
    series.git(project.work_dir, "add", "NEW_FILE")
    series.git(project.work_dir, "commit", "--quiet", "-m", "Work in progress")
    message = series_error(series.edit, project)
    assert "holds work that is not in patches/ yet" in message and "make refresh" in message
    assert (project.work_dir / "NEW_FILE").exists()


def test_refresh_without_edit(project):
    message = series_error(series.refresh, project)
    assert "does not exist" in message and "make edit" in message


def test_check_rejects_a_change_that_fails_upstream_ruff(project):
    series.edit(project)
    commit_change(project.work_dir, "src/diffusers/utils/doc_utils.py", "import os\n", "Add an unused import")
    series.refresh(project)
    message = series_error(series.check, project)
    assert "ruff check (upstream's config) fails" in message and "F401" in message
