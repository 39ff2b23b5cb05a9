"""The flows of the patch series, for the primary release: check, export, edit, refresh and rebase (the mechanics
they drive: tools/patches.py; the other supported releases: tools/releases.py)."""

import json
import shutil
import sys
import tempfile
from pathlib import Path

from . import ToolError, patches, releases, upstream, vendoring
from .git import git, run_isolated


def check(project):
    """Lint the series, apply it exactly, and require vendored tree and patch files to be regenerable as is; then
    replay it onto every other supported release (see `check_release`)."""
    with tempfile.TemporaryDirectory() as tmp:
        entries, _ = _apply_and_check(project, Path(tmp) / "work")
        problems = releases.check_releases(project, Path(tmp) / "work", Path(tmp) / "releases")
    if problems:
        raise ToolError("\n".join(problems))
    return entries


def _apply_and_check(project, repo):
    """`check`, with the series applied in `repo`; returns the entries and the local-only (`not-needed`) ones."""
    base = project.read_base()
    entries = patches.scratch_checkout(project, repo, base)
    problems = []
    if patches.pristine_hashes(repo) != base["files"]:
        problems.append(
            "patches/base.json does not list the pristine sha256 of exactly the files the series touches; "
            "run `make refresh` after `make edit` to rewrite it."
        )
    expected = vendoring.build_vendor(project, repo, entries)
    found = vendoring.current_vendor(project)
    for path in sorted(set(expected) | set(found)):
        if expected.get(path) != found.get(path):
            state = "missing" if path not in found else "unexpected" if path not in expected else "edited"
            problems.append(
                f"vendored file diffusers_patched/_vendor/{path} is {state}: the vendored tree must be exactly "
                "pristine + series. Run `make vendor`; to change the code, edit it with `make edit` and "
                "`make refresh`."
            )
    local_only = []
    for name, commit in zip(entries, patches.series_commits(repo)):
        if patches.export_commit(repo, commit) != (project.patches_dir / name).read_bytes():
            problems.append(
                f"{name}: a re-export differs from the committed file (hand-edited or made with other "
                "flags); run `make refresh` to rewrite it canonically."
            )
        metadata = patches.patch_metadata(repo, commit)
        problems.extend(patches.lint_metadata(name, metadata))
        if metadata["forwarded"] == "not-needed":
            local_only.append(name)
        elif local_only:
            problems.append(
                f"{name} follows the local-only (`Forwarded: not-needed`) patch {local_only[0]}: local-only "
                "patches go at the end of the series, so that the others can be exported without them."
            )
    problems.extend(patches.lint_style(repo))
    if problems:
        raise ToolError("\n".join(problems))
    return entries, local_only


def export_patches(project, out_dir, upstream_repo=None):
    """Write the upstream-ready patches (all but `Forwarded: not-needed` ones) into `out_dir`, verified.

    Returns (written paths, {left-out name: why}). The written files must `git am` onto the pristine release and pass
    upstream's ruff and, given an upstream git repository (the sdist lacks utils/), its `utils/check_copies.py`.
    """
    base = project.read_base()
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "work"
        entries, local_only = _apply_and_check(project, repo)
        exported = [name for name in entries if name not in local_only]
        out_dir.mkdir(parents=True, exist_ok=True)
        for stale in [*out_dir.glob("*.patch"), out_dir / "series"]:
            stale.unlink(missing_ok=True)
        for name in exported:
            shutil.copyfile(project.patches_dir / name, out_dir / name)
        (out_dir / "series").write_text("".join(f"{name}\n" for name in exported))
        # What upstream gets is verified as upstream would apply it: the files themselves, with plain `git am`.
        git(repo, "reset", "--quiet", "--hard", "pristine")
        for name in exported:
            result = git(repo, "am", *patches.AM_FLAGS, str(out_dir / name), check=False)
            if result.returncode != 0:
                raise ToolError(f"exported {name} does not `git am` onto pristine {upstream.UPSTREAM} {base['version']} "
                                  f"without the patches left out ({', '.join(local_only)}):\n{result.stderr}")  # fmt: skip
        problems = patches.lint_style(repo)
        if upstream_repo is not None:
            problems.extend(check_copies(repo, Path(upstream_repo), base["version"]))
    if problems:
        raise ToolError("\n".join(problems))
    left_out = {name: "Forwarded: not-needed (a local-only policy patch)" for name in local_only}
    return [out_dir / name for name in exported], left_out


def check_copies(repo, upstream_repo, version):
    """Upstream's `utils/check_copies.py` ("# Copied from" blocks stay in sync) run on the patched tree in `repo`.

    The script comes from the release's tag in `upstream_repo`, or its HEAD without one, into the scratch tree only.
    """
    ref = f"v{version}"
    if git(upstream_repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False).returncode != 0:
        ref = "HEAD"
    script = git(upstream_repo, "show", f"{ref}:utils/check_copies.py", check=False)
    if script.returncode != 0:
        return [f"{upstream_repo} has no utils/check_copies.py at {ref}: is it a diffusers git repository?"]
    (repo / "utils").mkdir(exist_ok=True)
    (repo / "utils" / "check_copies.py").write_text(script.stdout)
    result = run_isolated([sys.executable, "utils/check_copies.py"], repo, check=False)
    if result.returncode != 0:
        return [f"upstream's utils/check_copies.py (from {ref}) fails on the patched tree:\n{result.stderr[-4000:]}"]
    return []


def _write_from_repo(project, repo, base, names):
    """Rewrite patches, series, base record and vendored tree from the commits in `repo`, named `names`."""
    for old in project.patches_dir.glob("*.patch"):
        old.unlink()
    for name, commit in zip(names, patches.series_commits(repo)):
        (project.patches_dir / name).write_bytes(patches.export_commit(repo, commit))
    project.write_series(names)
    base["files"] = patches.pristine_hashes(repo)
    project.write_base(base)
    vendoring.write_vendor(project, vendoring.build_vendor(project, repo, names))
    return names


def edit(project):
    """Make `build/series`: pristine + series as commits, to change with ordinary git (another supported release:
    `releases.edit_release`).

    Patches that apply only at an offset or with a 3-way merge are accepted here, so that `refresh` can rewrite them.
    """
    repo = project.work_dir
    if (repo / ".git").exists() and _unrefreshed_work(project, repo):
        raise ToolError(
            f"{repo} holds work that is not in patches/ yet; run `make refresh` to keep it, or delete {repo} to "
            "start over."
        )
    return patches.scratch_checkout(project, repo, three_way=True)


def _unrefreshed_work(project, repo):
    if git(repo, "status", "--porcelain").stdout.strip():
        return True
    try:
        names = patches.series_names(repo)
    except ToolError:  # commits that refresh would refuse are not in patches/ either
        return True
    exported = [
        (name, patches.export_commit(repo, commit)) for name, commit in zip(names, patches.series_commits(repo))
    ]
    return exported != [(name, (project.patches_dir / name).read_bytes()) for name in project.read_series()]


def refresh(project):
    """Rewrite patches and vendored tree from the commits in `build/series` (another release:
    `releases.refresh_release`)."""
    repo = project.work_dir
    if not (repo / ".git").exists():
        raise ToolError(f"{repo} does not exist; run `make edit` first, then commit your change there.")
    if git(repo, "status", "--porcelain").stdout.strip():
        raise ToolError(
            f"{repo} has uncommitted changes; commit them first (`git commit --fixup` for an existing patch, "
            "then `git rebase -i --autosquash pristine`, or a new commit for a new patch)."
        )
    project.read_series()  # refuses a broken series before anything is rewritten
    return _write_from_repo(project, repo, project.read_base(), patches.series_names(repo))


def rebase(project, new_version):
    """Replay the series onto upstream `new_version` with 3-way merges, in `build/rebase`."""
    base = project.read_base()
    if project.rebase_dir.exists():
        raise ToolError(
            f"a rebase is already in progress in {project.rebase_dir}; finish it with `make rebase-continue` or "
            f"delete {project.rebase_dir} to start over."
        )
    new_sdist = upstream.fetch_sdist(new_version)
    new_repo = upstream.pristine_repo(new_version, upstream.sha256_of(new_sdist))
    repo = project.rebase_dir
    try:
        entries = patches.scratch_checkout(project, repo, base)
        git(repo, "fetch", "--quiet", str(new_repo), "upstream")
        git(repo, "tag", "new-pristine", "FETCH_HEAD")
    except BaseException:
        shutil.rmtree(repo, ignore_errors=True)
        raise
    rebase_state = {"version": new_version, "sdist_sha256": upstream.sha256_of(new_sdist), "entries": entries}
    (repo / ".git" / "diffusers-patched-rebase.json").write_text(json.dumps(rebase_state))
    result = git(repo, "rebase", "--empty=drop", "--onto", "new-pristine", "pristine", check=False)
    if result.returncode != 0:
        raise ToolError(_conflict_report(project, repo))
    return _finish_rebase(project, repo)


def rebase_continue(project):
    repo = project.rebase_dir
    if not (repo / ".git").exists():
        raise ToolError(f"no rebase in progress ({repo} does not exist); start one with `make rebase UPSTREAM=X.Y.Z`.")
    if (repo / ".git" / "rebase-merge").exists():
        result = git(repo, "-c", "core.editor=true", "rebase", "--continue", check=False)
        if result.returncode != 0:
            raise ToolError(_conflict_report(project, repo))
    return _finish_rebase(project, repo)


def _finish_rebase(project, repo):
    state = json.loads((repo / ".git" / "diffusers-patched-rebase.json").read_text())
    git(repo, "tag", "--force", "pristine", "new-pristine")
    names = patches.series_names(repo)  # the commits' trailers keep their names
    dropped = [name for name in state["entries"] if name not in names]
    old = project.read_base()
    if upstream.version_key(old["version"]) < upstream.version_key(state["version"]):
        # The release the series leaves stays a supported target, derived from the series like the others.
        records = project.read_releases()
        records["releases"].setdefault(old["version"], {"sdist_sha256": old["sdist_sha256"], "files": {}})
        project.write_releases(records)
    base = {"version": state["version"], "sdist_sha256": state["sdist_sha256"], "files": {}}
    _write_from_repo(project, repo, base, names)
    report = releases.update_releases(project, repo)
    shutil.rmtree(repo)
    return names, dropped, report


def _conflict_report(project, repo):
    state = json.loads((repo / ".git" / "diffusers-patched-rebase.json").read_text())
    name = patches.commit_name(repo, "REBASE_HEAD")
    patch = project.patches_dir / name
    lines = [f"{name} conflicts with {upstream.UPSTREAM} {state['version']}:", *patches.conflict_lines(repo, patch)]
    lines.append(
        f"Nothing in {project.root} was changed. Resolve the conflicts in {repo} (edit, then `git add`), then run "
        f"`make rebase-continue`; or delete {repo} to abandon the rebase."
    )
    return "\n".join(lines)
