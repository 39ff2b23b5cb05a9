"""The maintainer tooling of tools/series.py, driven with real git on copies of the project and on small projects.

The tests of the committed series work on a copy of `patches/` and `diffusers_patched/_vendor/` in a temporary project
root, with the real pristine sdists; the tests of the mechanism (edit, refresh, rebase, backports, messages) on small
projects whose upstream releases are the real sdist cut down to the few files their patches touch, where a replay
costs milliseconds instead of a checkout of diffusers. Both use session-wide temporary caches
(DIFFUSERS_PATCHED_CACHE), so the real checkout and the user's cache are never written to.
"""

import hashlib
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

from tests.conftest import REPO_ROOT
from tests.support.series_without import replay_without
from tools import ToolError, patches, replays, series, upstream, vendoring
from tools.git import git
from tools.releases import (
    UPSTREAM_FIX,
    add_release,
    backport_users,
    edit_release,
    refresh_release,
    refresh_releases,
    release_checkout,
    release_plan,
)


def run_git(repo, *args):
    """Plain git, independent of git, with an isolated configuration."""
    result = subprocess.run(
        ["git", "-C", str(repo), *args], env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    assert result.returncode == 0, f"git {' '.join(args)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


BASE = json.loads((REPO_ROOT / "patches" / "base.json").read_text())
RELEASES = json.loads((REPO_ROOT / "patches" / "releases.json").read_text())
OLDER = sorted(RELEASES["releases"], key=upstream.version_key, reverse=True)
SERIES = [
    line.split("#", 1)[0].strip()
    for line in (REPO_ROOT / "patches" / "series").read_text().splitlines()
    if line.split("#", 1)[0].strip()
]
# Local-only policy patches: last in the series, left out of exports.
LOCAL_ONLY_PATCHES = [name for name in SERIES if "Forwarded: not-needed" in (REPO_ROOT / "patches" / name).read_text()]
# The small projects' series: a patch of the real series that changes one hunk of one module, the first to change it.
SAMPLE_PATCH = "sequential-offload-keeps-the-user-device.patch"
PATCHED_FILE = "src/diffusers/pipelines/pipeline_utils.py"
VENDORED_FILE = "diffusers/pipelines/pipeline_utils.py"
# The line above which a release inserts lines, above the patched region.
HEADER_LINE = "\nlogger = logging.get_logger(__name__)\n"
PATCHED_CONTEXT = '        self._offload_device = device\n\n        if self.device.type != "cpu":\n'
INSERTED_ABOVE = "#\n# Synthetic upstream change: these comment lines were inserted above the patched region.\n#\n"
CONFLICTING_CONTEXT = (
    '        self._offload_device = device  # synthetic upstream change\n\n        if self.device.type != "cpu":\n'
)
NOTE_FILE = "src/diffusers/utils/doc_utils.py"
CONSTANTS_FILE = "src/diffusers/utils/constants.py"
# What the small projects' upstream keeps of the real sdist: the files their patches touch, upstream's ruff
# configuration and its license (vendored with the patched files).
SMALL_MEMBERS = (PATCHED_FILE, NOTE_FILE, CONSTANTS_FILE, "pyproject.toml", "LICENSE")
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


def make_release(source_sdist, dest_dir, version, changes, keep=None):
    """Write `diffusers-<version>.tar.gz`: `source_sdist` re-rooted at `diffusers-<version>/`, with `changes`; with
    `keep`, only those of its files."""
    changes = dict(changes)
    dest = Path(dest_dir) / f"diffusers-{version}.tar.gz"
    with tarfile.open(source_sdist) as source, tarfile.open(dest, "w:gz", compresslevel=1) as out:
        for member in source.getmembers():
            relative = member.name.split("/", 1)[1] if "/" in member.name else ""
            if keep is not None and relative not in keep:
                continue
            data = source.extractfile(member).read() if member.isfile() else None
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
    """A cache with the real sdists of every supported release, for the tests of the committed series."""
    real_sdist = upstream.fetch_sdist(BASE["version"], BASE["sdist_sha256"])  # the user's cache, read only
    cache = tmp_path_factory.mktemp("cache")
    sdists = cache / "sdists"
    sdists.mkdir()
    shutil.copyfile(real_sdist, sdists / real_sdist.name)
    # The real sdists of the other supported releases, which `check` replays the series onto.
    for version in OLDER:
        sdist = upstream.fetch_sdist(version, RELEASES["releases"][version]["sdist_sha256"])
        shutil.copyfile(sdist, sdists / sdist.name)
    return {"cache": cache, "sdist": real_sdist}


@pytest.fixture(autouse=True)
def cache(releases, monkeypatch):
    monkeypatch.setenv("DIFFUSERS_PATCHED_CACHE", str(releases["cache"]))
    return releases["cache"]


# The small projects' releases: SMALL_BASE (the base version, SMALL_MEMBERS of its sdist) and, made from it, newer
# ones to rebase onto and older ones to replay onto.
INSERTED_ABOVE_RELEASES = ("0.42.2", "0.40.2")  # lines inserted above the sample patch's region
CONFLICTING_RELEASES = ("0.42.3", "0.40.1")  # the lines it changes changed
APPLIED_RELEASE = "0.42.4"  # the sample patch already applied
LACKING_RELEASE = "0.40.3"  # without the file it changes


@pytest.fixture(scope="session")
def small_releases(tmp_path_factory, releases):
    """A cache of the small releases; {"cache": its directory, "sha256": the small base's sdist's}."""
    cache = tmp_path_factory.mktemp("small-cache")
    sdists = cache / "sdists"
    sdists.mkdir()
    base = make_release(releases["sdist"], sdists, BASE["version"], {}, keep=SMALL_MEMBERS)
    pristine = pristine_member(base, PATCHED_FILE).decode()
    assert pristine.count(PATCHED_CONTEXT) == 1
    header_end = pristine.index(HEADER_LINE) + 1
    inserted_above = pristine[:header_end] + INSERTED_ABOVE + pristine[header_end:]
    for version in INSERTED_ABOVE_RELEASES:
        make_release(base, sdists, version, {PATCHED_FILE: inserted_above.encode()})
    for version in CONFLICTING_RELEASES:
        make_release(
            base, sdists, version, {PATCHED_FILE: pristine.replace(PATCHED_CONTEXT, CONFLICTING_CONTEXT).encode()}
        )
    make_release(base, sdists, LACKING_RELEASE, {}, keep=set(SMALL_MEMBERS) - {PATCHED_FILE})
    # The sample patch applied to the release's own source with git apply.
    applied = tmp_path_factory.mktemp("applied")
    (applied / PATCHED_FILE).parent.mkdir(parents=True)
    (applied / PATCHED_FILE).write_text(pristine)
    run_git(applied, "init", "--quiet")
    run_git(applied, "apply", str(REPO_ROOT / "patches" / SAMPLE_PATCH))
    patched = {
        str(path.relative_to(applied)): path.read_bytes()
        for path in applied.rglob("*")
        if path.is_file() and ".git" not in path.relative_to(applied).parts
    }
    assert len(patched) == 2  # the changed module and its test file
    make_release(base, sdists, APPLIED_RELEASE, patched)
    return {"cache": cache, "sha256": upstream.sha256_of(base)}


@pytest.fixture
def small_cache(cache, small_releases, monkeypatch):
    """The small releases' cache, in place of the real one."""
    monkeypatch.setenv("DIFFUSERS_PATCHED_CACHE", str(small_releases["cache"]))
    return small_releases["cache"]


def small_project(root, small_releases, names=(), files=None):
    """A project on the small base release whose series is `names`, patches of the real series touching `files`."""
    (root / "patches").mkdir(parents=True)
    for name in names:
        shutil.copyfile(REPO_ROOT / "patches" / name, root / "patches" / name)
    project = patches.Project(root)
    project.write_series(list(names))
    files = {path: BASE["files"][path] for path in files or ()}
    project.write_base({**BASE, "sdist_sha256": small_releases["sha256"], "files": files})
    vendoring.vendor(project)
    return project


def test_a_copied_project_is_the_project(project):
    assert snapshot(project.root) == snapshot(REPO_ROOT)


@pytest.fixture
def sample_patch_project(tmp_path, small_cache, small_releases):
    """A small project whose series is the sample patch alone: the small releases are built around its hunks."""
    return small_project(tmp_path / "sample-patch-project", small_releases, [SAMPLE_PATCH], [PATCHED_FILE])


def series_error(function, *args):
    with pytest.raises(ToolError) as error:
        function(*args)
    return str(error.value)


def rewrite_patch(project, name, transform):
    path = project.patches_dir / name
    path.write_text(transform(path.read_text()))


# The committed series.


def test_reexport_of_every_patch_is_byte_identical(project, tmp_path):
    repo = tmp_path / "work"
    entries = patches.scratch_checkout(project, repo)
    commits = patches.series_commits(repo)
    assert entries == SERIES and len(commits) == len(SERIES)
    for name, commit in zip(entries, commits):
        assert patches.export_commit(repo, commit) == (REPO_ROOT / "patches" / name).read_bytes(), name


def test_changed_files_pass_upstream_ruff(project, tmp_path):
    repo = tmp_path / "work"
    patches.scratch_checkout(project, repo)
    assert (repo / "pyproject.toml").exists()  # upstream's own ruff configuration
    assert patches.lint_style(repo) == []


def test_exported_patches_git_am_onto_the_pristine_sdist_giving_the_vendored_files(project, tmp_path, releases):
    out = tmp_path / "out"
    paths, left_out = series.export_patches(project, out)
    assert list(left_out) == LOCAL_ONLY_PATCHES and SERIES[len(paths) :] == LOCAL_ONLY_PATCHES
    assert [path.name for path in paths] == (out / "series").read_text().split() == SERIES[: len(paths)]
    # A fresh repository from the pristine sdist, made without series.py.
    fresh = tmp_path / "fresh"
    upstream.extract_sdist(releases["sdist"], f"diffusers-{BASE['version']}/", fresh)
    run_git(fresh, "init", "--quiet")
    run_git(fresh, "add", "--all", "--force")
    run_git(fresh, "commit", "--quiet", "-m", "pristine")
    # What upstream gets, then the local-only patches: together the vendored tree.
    for path in [*paths, *(REPO_ROOT / "patches" / name for name in LOCAL_ONLY_PATCHES)]:
        run_git(fresh, "am", "--quiet", str(path))
    assert run_git(fresh, "rev-list", "--count", "HEAD").strip() == str(1 + len(SERIES))
    vendored = {path: content for path, content in vendor_tree(REPO_ROOT).items() if path.startswith("diffusers/")}
    changed = run_git(fresh, "diff", "--name-only", "HEAD~" + str(len(SERIES)), "HEAD", "--", "src/").split()
    assert {path[len("src/") :] for path in changed if path.endswith(".py")} == set(vendored)
    for path in vendored:
        assert (fresh / "src" / path).read_bytes() == vendored[path], path
    assert vendor_tree(REPO_ROOT)["LICENSE"] == (fresh / "LICENSE").read_bytes()


def test_vendor_regenerates_the_identical_tree(project, monkeypatch):
    monkeypatch.delenv(
        replays.CACHE_ENV
    )  # git replays the whole series: the reproducibility proof of the replay cache
    shutil.rmtree(project.vendor_dir)
    assert vendoring.vendor(project) == SERIES
    assert vendor_tree(project.root) == vendor_tree(REPO_ROOT)
    assert snapshot(project.root) == snapshot(REPO_ROOT)


# Bad input: each message names the thing and the fix.


def test_truncated_patch_is_reported_as_corrupt(project):
    rewrite_patch(
        project,
        SAMPLE_PATCH,
        lambda text: text[: text.index('+        if device_type == "cpu":')],
    )
    message = series_error(series.check, project)
    assert SAMPLE_PATCH in message
    assert "corrupt or truncated" in message
    assert f"git checkout -- patches/{SAMPLE_PATCH}" in message


def test_garbage_patch_is_reported_as_corrupt(project):
    (project.patches_dir / SAMPLE_PATCH).write_text("this is not a patch\n")
    message = series_error(series.check, project)
    assert SAMPLE_PATCH in message and "not a valid patch" in message


def test_series_naming_a_missing_patch(project):
    (project.patches_dir / SAMPLE_PATCH).unlink()
    message = series_error(series.check, project)
    assert f"{SAMPLE_PATCH} does not exist" in message
    assert "restore the file or remove the line" in message
    assert str(project.series_file) in message


def test_unlisted_patch_file(project):
    shutil.copyfile(project.patches_dir / SAMPLE_PATCH, project.patches_dir / "0099-stray.patch")
    message = series_error(series.check, project)
    assert "0099-stray.patch" in message and "not listed" in message
    assert "add it to the series or delete it" in message


def test_duplicate_series_entry(project):
    with project.series_file.open("a") as f:
        f.write(f"{SAMPLE_PATCH}\n")
    message = series_error(series.check, project)
    assert f"{SAMPLE_PATCH} is listed twice" in message
    assert "remove the duplicate line" in message


@pytest.mark.parametrize(
    "stray", ["patches/0001-x.patch.orig", "diffusers_patched/_vendor/diffusers/pipelines/a.py.rej"]
)
def test_stray_orig_or_rej_file(project, stray):
    (project.root / stray).write_text("left over\n")
    message = series_error(series.check, project)
    assert stray in message and "delete them" in message


def shift_hunk(project, number, lines):
    """Move hunk `number` of PATCHED_FILE in the sample patch by `lines`; returns the new hunk header."""
    path = project.patches_dir / SAMPLE_PATCH
    text = path.read_text()
    header = patches.patch_hunks(text)[PATCHED_FILE][number - 1][0]
    old, new = map(int, re.match(r"@@ -(\d+),\d+ \+(\d+)", header).groups())
    shifted = header.replace(f"-{old},", f"-{old + lines},").replace(f"+{new},", f"+{new + lines},")
    path.write_text(text.replace(header, shifted))
    return shifted


def test_patch_needing_an_offset_names_patch_file_and_hunk(project):
    header = shift_hunk(project, 1, -3)
    message = series_error(series.check, project)
    assert f"{SAMPLE_PATCH}: {PATCHED_FILE}: hunk #1 ({header})" in message
    assert "offset of 3 lines" in message
    assert "make edit" in message and "make refresh" in message


def test_patch_needing_an_offset_is_rewritten_by_edit_and_refresh(sample_patch_project):
    project = sample_patch_project
    before = snapshot(project.root)
    shift_hunk(project, 1, 5)
    assert "offset of -5 lines" in series_error(series.check, project)
    assert series.edit(project) == [SAMPLE_PATCH]  # the remedy the message names must work
    # The replay cache holds the commit edit made with a 3-way merge; it does not stand in for an exact application.
    assert "offset of -5 lines" in series_error(series.check, project)
    assert series.refresh(project) == [SAMPLE_PATCH]
    assert snapshot(project.root) == before
    assert series.check(project) == [SAMPLE_PATCH]


def test_patch_with_wrong_context_names_patch_file_and_hunk(project):
    rewrite_patch(
        project,
        SAMPLE_PATCH,
        lambda text: text.replace(
            "         device_type = torch_device.type\n", "         device_type = torch_device.kind\n", 1
        ),
    )
    message = series_error(series.check, project)
    header = patches.patch_hunks((REPO_ROOT / "patches" / SAMPLE_PATCH).read_text())[PATCHED_FILE][0][0]
    assert f"{SAMPLE_PATCH}: {PATCHED_FILE}: hunk #1 ({header}) does not apply" in message
    assert "make edit" in message


def test_pristine_sdist_with_the_wrong_hash(project, tmp_path, monkeypatch, releases):
    cache = tmp_path / "bad-cache"
    (cache / "sdists").mkdir(parents=True)
    sdist = cache / "sdists" / f"diffusers-{BASE['version']}.tar.gz"
    make_release(releases["sdist"], cache / "sdists", BASE["version"], {"README.md": b"tampered\n"})
    monkeypatch.setenv("DIFFUSERS_PATCHED_CACHE", str(cache))
    message = series_error(series.check, project)
    assert str(sdist) in message
    assert upstream.sha256_of(sdist) in message and BASE["sdist_sha256"] in message
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


def test_hand_edited_patch_file_is_reported_by_the_reexport(sample_patch_project):
    project = sample_patch_project
    rewrite_patch(project, SAMPLE_PATCH, lambda text: text.replace("Forwarded: no\n", "Forwarded: no\n\n\n", 1))
    message = series_error(series.check, project)
    assert f"{SAMPLE_PATCH}: a re-export differs from the committed file" in message
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


def test_rebase_onto_release_with_lines_inserted_above_the_patch(sample_patch_project, small_cache):
    project = sample_patch_project
    old = (project.vendor_dir / VENDORED_FILE).read_text()
    names, dropped, releases = series.rebase(project, "0.42.2")
    assert names == [SAMPLE_PATCH] and dropped == []
    # The release the primary leaves stays supported: the series replays onto it.
    assert releases == {BASE["version"]: []}
    assert project.supported_releases() == ["0.42.2", BASE["version"]]
    sdist = small_cache / "sdists" / "diffusers-0.42.2.tar.gz"
    new_pristine = pristine_member(sdist, PATCHED_FILE)
    base = project.read_base()
    assert base == {
        "version": "0.42.2",
        "sdist_sha256": upstream.sha256_of(sdist),
        "files": {PATCHED_FILE: hashlib.sha256(new_pristine).hexdigest()},
    }
    # The vendored module is the old patched one with upstream's new lines: new pristine + series.
    at = old.index(HEADER_LINE) + 1
    assert (project.vendor_dir / VENDORED_FILE).read_text() == old[:at] + INSERTED_ABOVE + old[at:]
    assert "UPSTREAM_VERSION = '0.42.2'" in (project.vendor_dir / "__init__.py").read_text()
    assert not project.rebase_dir.exists()
    assert series.check(project) == [SAMPLE_PATCH]


def test_rebase_conflict_leaves_project_unchanged_and_continues_after_resolution(sample_patch_project):
    project = sample_patch_project
    old = (project.vendor_dir / VENDORED_FILE).read_text()
    before = snapshot(project.root)
    message = series_error(series.rebase, project, "0.42.3")
    header = patches.patch_hunks((REPO_ROOT / "patches" / SAMPLE_PATCH).read_text())[PATCHED_FILE][0][0]
    assert f"{SAMPLE_PATCH} conflicts with diffusers 0.42.3" in message
    assert f"{PATCHED_FILE}: conflict at line" in message and header in message
    assert "make rebase-continue" in message
    assert snapshot(project.root) == before
    conflicted = (project.rebase_dir / PATCHED_FILE).read_text()
    assert "<<<<<<< " in conflicted and "=======" in conflicted and ">>>>>>> " in conflicted
    # A second rebase refuses while this one is in progress.
    assert "already in progress" in series_error(series.rebase, project, "0.42.3")
    # Resolve: upstream's changed line, plus the patch's change.
    resolved = old.replace(PATCHED_CONTEXT, CONFLICTING_CONTEXT)
    (project.rebase_dir / PATCHED_FILE).write_text(resolved)
    run_git(project.rebase_dir, "add", PATCHED_FILE)
    names, dropped, releases = series.rebase_continue(project)
    assert names == [SAMPLE_PATCH] and dropped == []
    assert project.read_base()["version"] == "0.42.3"
    assert (project.vendor_dir / VENDORED_FILE).read_text() == resolved
    assert not project.rebase_dir.exists()
    # The patch as rebased no longer replays onto the release the primary left: the report and check say so, and
    # the backport loop fixes it.
    (problem,) = releases[BASE["version"]]
    assert f"patches/{SAMPLE_PATCH} does not replay onto diffusers {BASE['version']}" in problem
    assert f"make edit RELEASE={BASE['version']}" in series_error(series.check, project)
    series_error(edit_release, project, BASE["version"])
    repo = project.release_work_dir(BASE["version"])
    (repo / PATCHED_FILE).write_text(old)
    run_git(repo, "add", PATCHED_FILE)
    assert refresh_release(project, BASE["version"]) == ([SAMPLE_PATCH], [SAMPLE_PATCH])
    assert project.backport_path(BASE["version"], SAMPLE_PATCH).exists()
    assert series.check(project) == [SAMPLE_PATCH]


def test_rebase_drops_a_patch_applied_upstream(sample_patch_project):
    project = sample_patch_project
    names, dropped, _ = series.rebase(project, "0.42.4")
    assert dropped == [SAMPLE_PATCH]
    assert names == []
    assert not (project.patches_dir / SAMPLE_PATCH).exists()
    assert project.read_series() == names
    assert project.read_base()["version"] == "0.42.4"
    assert not (project.vendor_dir / VENDORED_FILE).exists()
    assert series.check(project) == []


def test_cli_rebase_reports_the_dropped_patch(sample_patch_project):
    project = sample_patch_project
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "rebase", "0.42.4", "--root", str(project.root)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "series rebased onto diffusers 0.42.4" in result.stdout
    assert f"{SAMPLE_PATCH}: applied upstream, dropped from the series" in result.stdout


def test_rebase_continue_without_a_rebase(project):
    message = series_error(series.rebase_continue, project)
    assert "no rebase in progress" in message and "make rebase UPSTREAM=X.Y.Z" in message


# Edit + refresh.


def commit_change(repo, path, text, message):
    with (repo / path).open("a") as f:
        f.write(text)
    run_git(repo, "commit", "--quiet", "-am", message)


def move_last_commit_before_local_only_patches(repo, local_only):
    """What a maintainer does with `git rebase -i pristine`: the `local_only` patches stay at the end of the series."""
    new_commit = run_git(repo, "rev-parse", "HEAD").strip()
    local_commits = run_git(repo, "rev-list", "--reverse", f"HEAD~{local_only + 1}..HEAD~1").split()
    run_git(repo, "reset", "--quiet", "--hard", f"HEAD~{local_only + 1}")
    for commit in [new_commit, *local_commits]:
        run_git(repo, "cherry-pick", "--quiet", commit)


def test_refresh_adds_a_new_commit_as_a_new_patch(backported_project):
    project = backported_project
    first, local_only = project.read_series()
    before = {name: (project.patches_dir / name).read_bytes() for name in (first, local_only)}
    assert series.edit(project) == [first, local_only]
    repo = project.work_dir
    commit_change(
        repo,
        NOTE_FILE,
        "\n\n# A small synthetic change.\n",
        message("Add a synthetic note to doc_utils", *GOOD_TRAILERS),
    )
    move_last_commit_before_local_only_patches(repo, 1)
    names = series.refresh(project)
    new_patch = "add-a-synthetic-note-to-doc-utils.patch"
    assert names == [first, new_patch, local_only]
    assert project.read_series() == names
    for name, content in before.items():  # the existing patches keep their names and bytes
        assert (project.patches_dir / name).read_bytes() == content
    assert "Subject: Add a synthetic note to doc_utils" in (project.patches_dir / new_patch).read_text()
    vendored = project.vendor_dir / "diffusers" / "utils" / "doc_utils.py"
    assert vendored.read_bytes() == (repo / NOTE_FILE).read_bytes()
    assert "'diffusers.utils.doc_utils'" in (project.vendor_dir / "__init__.py").read_text()
    assert NOTE_FILE in project.read_base()["files"]
    # The new patch touches a new file: every other release's record follows it.
    assert "make refresh-releases" in series_error(series.check, project)
    older = project.supported_releases()[1:]
    assert refresh_releases(project) == {version: [] for version in older}
    for version in older:
        assert NOTE_FILE in project.release_record(version)["files"]
    assert series.check(project) == names


def test_refresh_refuses_uncommitted_changes(project):
    series.edit(project)
    with (project.work_dir / NOTE_FILE).open("a") as f:
        f.write("# not committed\n")
    before = snapshot(project.root)
    message = series_error(series.refresh, project)
    assert str(project.work_dir) in message and "uncommitted changes" in message and "commit them first" in message
    assert snapshot(project.root) == before


def test_edit_refuses_to_discard_commits_not_yet_refreshed(project):
    series.edit(project)
    (project.work_dir / "NEW_FILE").write_text("work in progress\n")
    git(project.work_dir, "add", "NEW_FILE")
    git(project.work_dir, "commit", "--quiet", "-m", "Work in progress")
    message = series_error(series.edit, project)
    assert "holds work that is not in patches/ yet" in message and "make refresh" in message
    assert (project.work_dir / "NEW_FILE").exists()


def test_refresh_without_edit(project):
    message = series_error(series.refresh, project)
    assert "does not exist" in message and "make edit" in message


def test_check_rejects_a_change_that_fails_upstream_ruff(empty_project):
    project = empty_project
    add_patch(project, message("Add an unused import", *GOOD_TRAILERS), text="import os\n")
    error = series_error(series.check, project)
    assert "ruff check (upstream's config) fails" in error and "F401" in error


# Patch file names: carried by a Patch-Filename trailer through build/series, never written into patch files.

BODY = "A synthetic change: the tests need a patch whose message passes the metadata lint."


def message(subject, *trailers, body=BODY):
    return "\n\n".join([subject, *([body] if body else []), *(["\n".join(trailers)] if trailers else [])]) + "\n"


GOOD_TRAILERS = ("Bug: https://github.com/huggingface/diffusers/issues/1", "Forwarded: no")


@pytest.fixture
def empty_project(tmp_path, small_cache, small_releases):
    """A small project with an empty series, for synthetic patches."""
    return small_project(tmp_path / "empty-project", small_releases)


def add_patch(project, commit_message, text="\n\n# A synthetic note.\n", path=NOTE_FILE):
    """`make edit`, commit a change with `commit_message` on top of the series, `make refresh`."""
    series.edit(project)
    commit_change(project.work_dir, path, text, commit_message)
    return series.refresh(project)


def manifest(project):
    namespace = {}
    exec((project.vendor_dir / "__init__.py").read_text(), namespace)
    return namespace["PATCHES"]


def reword_head(repo, transform):
    """Amend the message of HEAD with `transform(message)`, as `git commit --amend` in an editor would."""
    old = run_git(repo, "log", "-1", "--format=%B")[: -len("\n")]
    (repo / ".git" / "NEW_MESSAGE").write_text(transform(old))
    run_git(repo, "commit", "--quiet", "--amend", "--cleanup=verbatim", "-F", ".git/NEW_MESSAGE")


def test_edit_names_each_commit_by_a_trailer_that_patch_files_never_contain(project):
    series.edit(project)
    repo = project.work_dir
    names = run_git(repo, "log", "--reverse", "--format=%(trailers:key=Patch-Filename,valueonly)", "pristine..HEAD")
    assert names.split() == SERIES
    assert not any("Patch-Filename" in (project.patches_dir / name).read_text() for name in SERIES)
    assert all(not re.match(r"\d{4}-", name) for name in SERIES)  # the order lives in patches/series only


def test_upstream_style_subject_survives_edit_refresh_and_check(empty_project):
    project = empty_project
    names = add_patch(project, message("[LoRA] Add a synthetic note", *GOOD_TRAILERS))
    assert names == ["lora-add-a-synthetic-note.patch"]
    text = (project.patches_dir / names[0]).read_text()
    assert "\nSubject: [LoRA] Add a synthetic note\n" in text and "Patch-Filename" not in text
    before = snapshot(project.root)
    assert series.edit(project) == names  # git am --keep-non-patch keeps "[LoRA] "
    assert run_git(project.work_dir, "log", "-1", "--format=%s").strip() == "[LoRA] Add a synthetic note"
    assert series.refresh(project) == names
    assert snapshot(project.root) == before
    assert series.check(project) == names
    assert manifest(project)[0]["subject"] == "[LoRA] Add a synthetic note"


def test_rewording_a_subject_keeps_the_patch_file_name(project):
    series.edit(project)
    reword_head(project.work_dir, lambda text: "Reworded: " + text)
    assert series.refresh(project) == SERIES
    assert "\nSubject: Reworded: " in (project.patches_dir / SERIES[-1]).read_text()
    for name in SERIES[:-1]:
        assert (project.patches_dir / name).read_bytes() == (REPO_ROOT / "patches" / name).read_bytes()


def test_a_patch_inserted_mid_series_renames_no_other_patch(empty_project):
    project = empty_project
    add_patch(project, message("Add a first note", *GOOD_TRAILERS))
    first_two = add_patch(project, message("Add a second note", *GOOD_TRAILERS), text="# Second.\n")
    before = {name: (project.patches_dir / name).read_bytes() for name in first_two}
    series.edit(project)
    repo = project.work_dir
    second = run_git(repo, "rev-parse", "HEAD").strip()
    run_git(repo, "reset", "--quiet", "--hard", "HEAD~1")
    commit_change(repo, CONSTANTS_FILE, "\n\n# Inserted.\n", message("Add a note", *GOOD_TRAILERS))
    run_git(repo, "cherry-pick", second)
    names = series.refresh(project)
    assert names == [first_two[0], "add-a-note.patch", first_two[1]]
    assert project.read_series() == names
    assert {name: (project.patches_dir / name).read_bytes() for name in first_two} == before
    assert series.check(project) == names


def test_new_patch_whose_subject_names_an_existing_patch_is_refused(empty_project):
    project = empty_project
    [name] = add_patch(project, message("Add a synthetic note", *GOOD_TRAILERS))
    series.edit(project)
    commit_change(project.work_dir, NOTE_FILE, "# Another.\n", message("Add a synthetic note", *GOOD_TRAILERS))
    before = snapshot(project.root)
    error = series_error(series.refresh, project)
    assert f"would be named {name}, which another patch already has" in error
    assert "reword its subject" in error and "--trailer 'Patch-Filename: <name>.patch'" in error
    assert snapshot(project.root) == before
    # The remedy the message names works.
    run_git(
        project.work_dir, "commit", "--quiet", "--amend", "--no-edit", "--trailer", "Patch-Filename: another.patch"
    )
    assert series.refresh(project) == [name, "another.patch"]
    assert "Patch-Filename" not in (project.patches_dir / "another.patch").read_text()


def test_refresh_of_a_build_made_by_the_old_tooling_names_patches_by_their_subjects(project):
    # The old tooling applied the patches with plain git am: no Patch-Filename trailers.
    repo = project.work_dir
    series.edit(project)
    run_git(repo, "reset", "--quiet", "--hard", "pristine")
    for name in SERIES:
        run_git(repo, "am", "--quiet", str(project.patches_dir / name))
    subjects = run_git(repo, "log", "--reverse", "--format=%s", "pristine..HEAD").splitlines()
    names = series.refresh(project)
    assert names == [patches._patch_name(subject) for subject in subjects]
    for old, new in zip(SERIES, names):
        assert (project.patches_dir / new).read_bytes() == (REPO_ROOT / "patches" / old).read_bytes()
    assert sorted(p.name for p in project.patches_dir.glob("*.patch")) == sorted(names)


def test_rebase_keeps_a_reworded_patch_under_its_name(sample_patch_project):
    project = sample_patch_project
    series.edit(project)
    reword_head(project.work_dir, lambda text: "Reworded: " + text)
    series.refresh(project)
    names, dropped, _ = series.rebase(project, "0.42.2")
    assert names == [SAMPLE_PATCH] and dropped == []
    assert "\nSubject: Reworded: " in (project.patches_dir / SAMPLE_PATCH).read_text()


# DEP-3 metadata, parsed with git interpret-trailers.


def test_several_bug_trailers_are_kept_in_the_vendored_manifest(empty_project):
    project = empty_project
    bugs = ["https://github.com/huggingface/diffusers/issues/1", "https://github.com/huggingface/diffusers/issues/2"]
    [name] = add_patch(project, message("Add a synthetic note", f"Bug: {bugs[0]}", f"Bug: {bugs[1]}", "Forwarded: no"))
    assert manifest(project) == [
        {
            "file": name,
            "subject": "Add a synthetic note",
            "bugs": bugs,
            "origin": None,
            "forwarded": "no",
            "applied_upstream": None,
            "backport": False,  # the primary's tree: no backports
        }
    ]
    assert series.check(project) == [name]


@pytest.mark.parametrize(
    "commit_message, missing",
    [
        (message("Add a synthetic note", *GOOD_TRAILERS, body=None), "no body"),
        (message("Add a synthetic note", GOOD_TRAILERS[0]), "no `Forwarded:` trailer"),
        (message("Add a synthetic note", GOOD_TRAILERS[1]), "no `Bug:` or `Origin:` trailer"),
        # Not a trailer: with it, git sees no trailer block, so neither field is there.
        (message("Add a synthetic note", "Fixes #1", *GOOD_TRAILERS), "git finds no trailer block"),
    ],
)
def test_check_names_the_patch_and_the_missing_metadata(empty_project, commit_message, missing):
    project = empty_project
    [name] = add_patch(project, commit_message)
    error = series_error(series.check, project)
    assert f"{name}: {missing}" in error
    assert error.count(f"{name}: ") == (3 if missing == "git finds no trailer block" else 1)


def test_origin_stands_in_for_bug(empty_project):
    project = empty_project
    names = add_patch(
        project, message("Add a synthetic note", "Origin: upstream, https://example.com/pr/1", "Forwarded: no")
    )
    assert series.check(project) == names
    assert manifest(project)[0]["origin"] == "upstream, https://example.com/pr/1"


# Export: upstream-ready patches only, verified as upstream would apply them.

LOCAL_ONLY = message("Keep a local policy note", "Origin: diffusers-patched", "Forwarded: not-needed")


def test_export_leaves_out_local_only_patches_and_says_why(empty_project, tmp_path, monkeypatch):
    project = empty_project
    # A PR names the diffusers issue it fixes (or the draft of the issue to open first).
    add_patch(project, message("Add a synthetic note", *GOOD_TRAILERS, body=f"{BODY}\n\nFixes #1"))
    names = add_patch(project, LOCAL_ONLY, text="\n\n# Local policy.\n", path=CONSTANTS_FILE)
    out = tmp_path / "out"
    paths, left_out = series.export_patches(project, out)
    assert [path.name for path in paths] == names[:1]
    assert left_out == {names[1]: "Forwarded: not-needed (a local-only policy patch)"}
    assert sorted(p.name for p in out.iterdir()) == sorted([names[0], "series"])
    exported = {p.name: p.read_bytes() for p in out.iterdir()}
    assert series.export_patches(project, out) == (paths, left_out)  # a re-run is byte-identical
    assert {p.name: p.read_bytes() for p in out.iterdir()} == exported
    # The command also writes the upstream PRs, which patches/prs.json groups (tests/test_upstream_prs.py).
    grouping = [{"name": "synthetic-note", "title": "Add a synthetic note", "patches": names[:1], "depends_on": {}}]
    (project.patches_dir / "prs.json").write_text(json.dumps(grouping))
    # The PRs' commits are the maintainer's (tools/upstream_prs.py `submitter`).
    monkeypatch.setenv("GIT_AUTHOR_NAME", "A Maintainer")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "maintainer@example.com")
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "export", "--out", str(out), "--root", str(project.root)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert f"left out {names[1]}: Forwarded: not-needed" in result.stdout


def test_check_refuses_a_local_only_patch_before_an_upstream_one(empty_project):
    project = empty_project
    add_patch(project, LOCAL_ONLY, text="\n\n# Local policy.\n", path=CONSTANTS_FILE)
    names = add_patch(project, message("Add a synthetic note", *GOOD_TRAILERS))
    error = series_error(series.check, project)
    assert f"{names[1]} follows the local-only (`Forwarded: not-needed`) patch {names[0]}" in error


def fake_upstream(tmp_path, script):
    """A git repository with `utils/check_copies.py` = `script` at tag v<base version>."""
    repo = tmp_path / "upstream"
    (repo / "utils").mkdir(parents=True)
    (repo / "utils" / "check_copies.py").write_text(script)
    run_git(repo, "init", "--quiet")
    run_git(repo, "add", "utils")
    run_git(repo, "commit", "--quiet", "-m", "upstream")
    run_git(repo, "tag", f"v{BASE['version']}")
    return repo


def test_export_runs_upstreams_check_copies_on_the_patched_tree(empty_project, tmp_path):
    project = empty_project
    names = add_patch(project, message("Add a synthetic note", *GOOD_TRAILERS))
    # Upstream's script runs from the root of the patched tree, where it finds the patched file.
    upstream = fake_upstream(
        tmp_path,
        "import sys\n"
        "if '# A synthetic note.' in open('src/diffusers/utils/doc_utils.py').read():\n"
        "    sys.exit('Found the following copy inconsistencies: doc_utils.py')\n",
    )
    error = series_error(series.export_patches, project, tmp_path / "out", upstream)
    assert f"upstream's utils/check_copies.py (from v{BASE['version']}) fails on the patched tree" in error
    assert "copy inconsistencies: doc_utils.py" in error
    (upstream / "utils" / "check_copies.py").write_text("import os\nassert os.path.isdir('src/diffusers')\n")
    run_git(upstream, "commit", "--quiet", "-am", "passes")
    run_git(upstream, "tag", "--force", f"v{BASE['version']}")
    paths, _ = series.export_patches(project, tmp_path / "out", upstream)
    assert [path.name for path in paths] == names
    assert not (project.root / "utils").exists()


# The isolated wrapper and extraction on every supported Python.


def test_every_git_and_ruff_call_goes_through_the_isolated_wrapper(empty_project, monkeypatch):
    project = empty_project
    add_patch(project, message("Add a synthetic note", *GOOD_TRAILERS))
    calls = []
    real_run = subprocess.run

    def recording_run(command, **kwargs):
        calls.append((command, kwargs.get("env") or {}))
        return real_run(command, **kwargs)

    monkeypatch.setattr(subprocess, "run", recording_run)
    series.check(project)
    series.edit(project)
    assert {command[0] for command, _ in calls} == {"git", sys.executable}
    assert any(command[1:3] == ["-m", "ruff"] for command, _ in calls)
    assert any(command[1] == "clone" for command, _ in calls if command[0] == "git")
    for command, env in calls:
        assert env.get("GIT_CONFIG_GLOBAL") == os.devnull and env.get("GIT_CONFIG_NOSYSTEM") == "1", command


def sdist_with(tmp_path, names):
    sdist = tmp_path / "sdist.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name in names:
            member = tarfile.TarInfo(name)
            member.size = 3
            tar.addfile(member, io.BytesIO(b"ok\n"))
    return sdist


@pytest.mark.parametrize("filters", ["with extraction filters", "without them (Python < 3.10.12 / 3.11.4)"])
def test_sdist_extraction_refuses_members_outside_the_tree(tmp_path, monkeypatch, filters):
    if filters.startswith("without"):
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    good = sdist_with(tmp_path, ["diffusers-9.9.9/src/a.py"])
    upstream.extract_sdist(good, "diffusers-9.9.9/", tmp_path / "good")
    assert (tmp_path / "good" / "src" / "a.py").read_bytes() == b"ok\n"
    bad = sdist_with(tmp_path, ["diffusers-9.9.9/../../escaped.py"])
    with pytest.raises(ToolError, match="would be extracted outside"):
        upstream.extract_sdist(bad, "diffusers-9.9.9/", tmp_path / "bad" / "tree")
    assert not (tmp_path / "escaped.py").exists() and not (tmp_path / "bad" / "escaped.py").exists()


# Older releases: the series replayed with git onto each, backports where it conflicts.


# Older releases, on a small project: the series replayed with git onto each, backports where it conflicts.

SMALL_BACKPORTED, SMALL_REPLAYING = CONFLICTING_RELEASES[1], INSERTED_ABOVE_RELEASES[1]


def resolve_sample_patch_conflict(project, repo):
    """What the maintainer writes where the lines the sample patch changes changed upstream: upstream's line, with the
    patch's change."""
    resolved = (project.vendor_dir / VENDORED_FILE).read_text().replace(PATCHED_CONTEXT, CONFLICTING_CONTEXT)
    (repo / PATCHED_FILE).write_text(resolved)
    run_git(repo, "add", PATCHED_FILE)


@pytest.fixture(scope="session")
def backported_template(tmp_path_factory, small_releases):
    """A small project whose series is the sample patch and a local-only patch, supporting SMALL_REPLAYING (the series
    replays with git) and SMALL_BACKPORTED (the sample patch through its backport), made with the tooling."""
    root = tmp_path_factory.mktemp("backported") / "project"
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("DIFFUSERS_PATCHED_CACHE", str(small_releases["cache"]))
        project = small_project(root, small_releases, [SAMPLE_PATCH], [PATCHED_FILE])
        add_patch(project, LOCAL_ONLY, text="\n\n# Local policy.\n", path=CONSTANTS_FILE)
        for version in (SMALL_REPLAYING, SMALL_BACKPORTED):
            add_release(project, version)
        series_error(edit_release, project, SMALL_BACKPORTED)
        resolve_sample_patch_conflict(project, project.release_work_dir(SMALL_BACKPORTED))
        assert refresh_release(project, SMALL_BACKPORTED)[1] == [SAMPLE_PATCH]
        assert refresh_releases(project) == {SMALL_BACKPORTED: [], SMALL_REPLAYING: []}
        series.check(project)
    shutil.rmtree(project.root / "build")
    return root


@pytest.fixture
def backported_project(backported_template, small_cache, tmp_path):
    shutil.copytree(backported_template, tmp_path / "backported-project")
    return patches.Project(tmp_path / "backported-project")


def test_release_without_its_backport_names_patch_file_hunk_and_command_and_edit_refresh_writes_it(backported_project):
    project = backported_project
    before = snapshot(project.root)
    project.backport_path(SMALL_BACKPORTED, SAMPLE_PATCH).unlink()
    message = series_error(series.check, project)
    assert f"patches/{SAMPLE_PATCH} does not replay onto diffusers {SMALL_BACKPORTED}:" in message
    hunk = re.search(r"  (src/\S+): conflict at line \d+, hunk #(\d+) \((@@ [^)]*)\)", message)
    assert hunk, message
    assert hunk.group(1) == PATCHED_FILE and hunk.group(3) in (project.patches_dir / SAMPLE_PATCH).read_text()
    assert (
        f"`make edit RELEASE={SMALL_BACKPORTED}`" in message
        and f"`make refresh RELEASE={SMALL_BACKPORTED}`" in message
    )
    # The remedy: edit stops at the conflict, the maintainer resolves it, refresh writes the backport.
    message = series_error(edit_release, project, SMALL_BACKPORTED)
    assert f"make refresh RELEASE={SMALL_BACKPORTED}" in message
    resolve_sample_patch_conflict(project, project.release_work_dir(SMALL_BACKPORTED))
    names, backported = refresh_release(project, SMALL_BACKPORTED)
    assert backported == [SAMPLE_PATCH] and names == project.read_series()
    assert snapshot(project.root) == before


def test_release_lacking_a_file_the_patch_changes_names_the_file(sample_patch_project):
    project = sample_patch_project
    add_release(project, LACKING_RELEASE)
    message = series_error(series.check, project)
    assert f"patches/{SAMPLE_PATCH} does not replay onto diffusers {LACKING_RELEASE}:" in message
    assert f"  {PATCHED_FILE}: the patch changes this file, which this release does not have" in message


def test_backport_that_no_longer_applies_names_it_and_the_command(backported_project):
    project = backported_project
    backport = project.backport_path(SMALL_BACKPORTED, SAMPLE_PATCH)
    text = backport.read_text()
    # A context line of the first hunk (the diffstat above the diffs is indented too).
    start = text.index("\n@@ ")
    context = next(line for line in text[start:].splitlines() if line.startswith(" ") and line.strip())
    backport.write_text(text[:start] + text[start:].replace(context + "\n", context + "  # changed context\n", 1))
    message = series_error(series.check, project)
    assert f"patches/backports/{SMALL_BACKPORTED}/{SAMPLE_PATCH} no longer applies exactly" in message
    assert f"make edit RELEASE={SMALL_BACKPORTED}" in message


def test_unnecessary_backport_is_reported(backported_project, tmp_path):
    project = backported_project
    patches.scratch_checkout(project, tmp_path / "primary")
    plan = release_checkout(project, tmp_path / "primary", tmp_path / "release", SMALL_REPLAYING)
    name = plan[0][0]
    backport = project.backport_path(SMALL_REPLAYING, name)
    backport.parent.mkdir(parents=True)
    backport.write_bytes(patches.export_commit(tmp_path / "release", patches.series_commits(tmp_path / "release")[0]))
    message = series_error(series.check, project)
    assert f"patches/backports/{SMALL_REPLAYING}/{name} is unnecessary" in message
    assert f"make refresh RELEASE={SMALL_REPLAYING}" in message


def test_release_sdist_with_the_wrong_hash(backported_project):
    project = backported_project
    releases = project.read_releases()
    releases["releases"][SMALL_REPLAYING]["sdist_sha256"] = "0" * 64
    project.write_releases(releases)
    message = series_error(series.check, project)
    assert f"diffusers-{SMALL_REPLAYING}.tar.gz has sha256" in message and "0" * 64 in message
    assert "so that it is downloaded again" in message


def test_skipped_patch_needs_a_reason_and_is_left_out_of_the_release(backported_project):
    project = backported_project
    entries = project.read_series()
    releases = project.read_releases()
    releases["releases"][SMALL_REPLAYING]["skipped"] = {SAMPLE_PATCH: ""}
    project.write_releases(releases)
    record = project.release_record(SMALL_REPLAYING)
    message = series_error(release_plan, project, SMALL_REPLAYING, record, entries)
    assert f"{SMALL_REPLAYING} skips {SAMPLE_PATCH} without a reason" in message
    record["skipped"] = {SAMPLE_PATCH: "upstream's enable_sequential_cpu_offload differs on this release"}
    assert [name for name, _, _ in release_plan(project, SMALL_REPLAYING, record, entries)] == entries[1:]


@pytest.mark.parametrize("command", ["edit", "refresh", "wheels", "demo"])
def test_unsupported_release_names_the_supported_ones(project, command, tmp_path):
    if command == "demo":
        result = subprocess.run(
            [sys.executable, "-m", "tools.demo", "--release", "0.30.0"], cwd=REPO_ROOT, capture_output=True, text=True
        )
        assert result.returncode != 0
        message = result.stderr
    elif command == "wheels":
        from tools import wheels

        message = series_error(wheels.build_wheels, project, tmp_path / "dist", ["0.30.0"])
        assert not (tmp_path / "dist").exists()
    else:
        message = series_error({"edit": edit_release, "refresh": refresh_release}[command], project, "0.30.0")
    assert "diffusers 0.30.0 is not a supported release; supported: " + ", ".join([BASE["version"], *OLDER]) in message


# Backports stored once, checked against the patch they backport; upstream's fixes a release lacks.


def test_a_backport_is_stored_once_and_the_other_releases_it_fits_record_it():
    records = RELEASES["releases"]
    shared = {
        (version, name): other for version in OLDER for name, other in records[version].get("backports", {}).items()
    }
    assert shared, "no release shares a backport"
    for (version, name), other in shared.items():
        assert (REPO_ROOT / "patches" / "backports" / other / name).exists()
        assert not (REPO_ROOT / "patches" / "backports" / version / name).exists()


def test_the_change_of_a_patch_is_its_changed_lines_not_its_context_or_position():
    patch = (REPO_ROOT / "patches" / SERIES[0]).read_text()
    moved = re.sub(r"^@@ -(\d+)", lambda m: f"@@ -{int(m.group(1)) + 7}", patch, flags=re.M)
    moved = re.sub(r"^index \w+\.\.\w+", "index 0000000..1111111", moved, flags=re.M)
    assert patches.changed_lines_digest(moved) == patches.changed_lines_digest(patch)
    added = next(line for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++"))
    changed = patch.replace(added, added + "  # changed", 1)
    assert patches.changed_lines_digest(changed) != patches.changed_lines_digest(patch)


def test_backport_written_for_an_earlier_state_of_its_patch_names_the_releases_to_edit(backported_project):
    project = backported_project
    releases = project.read_releases()
    key = f"{SMALL_BACKPORTED}/{SAMPLE_PATCH}"
    assert releases["backport_of"][key] == patches.changed_lines_digest(
        (project.patches_dir / SAMPLE_PATCH).read_text()
    )
    # As if the series' patch had changed its lines after the backport was written.
    releases["backport_of"][key] = "0" * 64
    project.write_releases(releases)
    message = series_error(series.check, project)
    assert f"patches/backports/{key} backports {SAMPLE_PATCH} as it was" in message
    for version in backport_users(project, SMALL_BACKPORTED, SAMPLE_PATCH):
        assert f"`make edit RELEASE={version}` + `make refresh RELEASE={version}`" in message


def test_upstream_fix_a_release_lacks_is_applied_before_the_series_and_never_exported(project, tmp_path):
    version, fix = next(
        (version, fixes[0]) for version in OLDER if (fixes := RELEASES["releases"][version].get("upstream_fixes"))
    )
    record = project.release_record(version)
    plan = release_plan(project, version, record, SERIES)
    assert plan[0] == (fix, project.upstream_fixes_dir / fix, UPSTREAM_FIX)
    paths, _ = series.export_patches(project, tmp_path / "out")
    assert fix not in {path.name for path in paths}
    (project.upstream_fixes_dir / fix).unlink()
    message = series_error(release_plan, project, version, record, SERIES)
    assert f"{version} needs upstream's fix {fix}, which is not in patches/upstream/" in message


# The replay cache (tools/replays.py): the suite's replays come from it, so it must make the commits git makes.


@pytest.fixture
def git_am_runs(monkeypatch):
    """The `git am` commands run from now on."""
    runs = []
    real_run = subprocess.run

    def recording_run(command, **kwargs):
        if command[:2] == ["git", "am"]:
            runs.append(command)
        return real_run(command, **kwargs)

    monkeypatch.setattr(subprocess, "run", recording_run)
    return runs


# A release of the committed series that applies a backport.
BACKPORTED_RELEASE = next(version for version in OLDER if (REPO_ROOT / "patches" / "backports" / version).is_dir())


def test_a_cached_replay_makes_the_commits_git_makes(project, tmp_path, monkeypatch, git_am_runs):
    def replay(directory):
        """HEAD of the primary's replay and of a release's with backports, and how many patches git applied."""
        git_am_runs.clear()
        patches.scratch_checkout(project, directory / "primary")
        release_checkout(project, directory / "primary", directory / BACKPORTED_RELEASE, BACKPORTED_RELEASE)
        for repo in ("primary", BACKPORTED_RELEASE):
            assert git(directory / repo, "status", "--porcelain").stdout == "", repo
        heads = [git(directory / repo, "rev-parse", "HEAD").stdout for repo in ("primary", BACKPORTED_RELEASE)]
        return heads, len(git_am_runs)

    replay(tmp_path / "filled")  # from the cache or into it
    cached, applied = replay(tmp_path / "cached")
    assert applied == 0
    monkeypatch.delenv(replays.CACHE_ENV)
    fresh, applied = replay(tmp_path / "fresh")
    assert applied == len(SERIES) + len(
        release_plan(project, BACKPORTED_RELEASE, project.release_record(BACKPORTED_RELEASE), SERIES)
    )
    assert cached == fresh


def test_a_replay_leaving_a_patch_out_starts_from_the_primarys_commits(project, tmp_path, monkeypatch, git_am_runs):
    monkeypatch.setenv(replays.CACHE_ENV, str(tmp_path / "cache"))  # holding no replay without a patch yet
    patches.scratch_checkout(project, tmp_path / "primary")
    git_am_runs.clear()
    left_out = replay_without(project, [SERIES[-2]], tmp_path / "primary", tmp_path / "without")
    assert left_out == [SERIES[-2]]
    assert len(git_am_runs) == 1  # the last patch, with a 3-way merge: the others are the primary's exact commits
    assert "--3way" in git_am_runs[0]
    # Applied after the patch left out, it is not named (tests/support/series_without.py): its subject tells it.
    assert (
        git(tmp_path / "without", "log", "-1", "--format=%s").stdout
        == git(tmp_path / "primary", "log", "-1", "--format=%s").stdout
    )
    assert (
        git(tmp_path / "without", "rev-parse", "HEAD~1").stdout
        == git(tmp_path / "primary", "rev-parse", "HEAD~2").stdout
    )


def test_a_release_candidate_sorts_before_its_release():
    assert sorted(["0.43.0", "0.43.0rc1", "0.42.1"], key=upstream.version_key) == ["0.42.1", "0.43.0rc1", "0.43.0"]


# Last in this file, so that `make test` finds the releases' replays cached (tools/replays.py) by the wheels the other
# worker builds meanwhile (`dist` in conftest.py): `check` replays the series onto every release again.
def test_cli_check_passes_on_the_committed_series_with_exit_code_zero(project):
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "check", "--root", str(project.root)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert f"series OK: {len(SERIES)} patch(es)" in result.stdout
