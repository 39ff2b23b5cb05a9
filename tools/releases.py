"""Older releases. The series is written against the primary (base.json); every release in releases.json is derived
from it by replaying it with git onto that release's pristine sdist: first upstream's own fixes the release lacks and
a flow of this package needs (`upstream_fixes`, patches/upstream/), then each patch of the series with a 3-way merge
(`git am -3`), or, where that conflicts, a backport applied exactly (zero fuzz; git finds offsets). A backport is
stored once, under the release it was written for (patches/backports/<release>/<name>.patch); another release whose
tree it fits records it in `backports` instead of a copy. Patches a release does not need are skipped with their
reason."""

import json
import tempfile
from pathlib import Path

from . import ToolError, patches, replays, upstream, vendoring
from .git import git


def refresh_releases(project):
    """Replay the series onto every other supported release and rewrite their records (the files the series touches
    there), e.g. after a new patch; returns {release: problems} (see `update_releases`)."""
    with tempfile.TemporaryDirectory() as tmp:
        patches.scratch_checkout(project, Path(tmp) / "primary")
        return update_releases(project, Path(tmp) / "primary")


def update_releases(project, primary_repo):
    """{release: problems} after the series or the primary changed: each release's record follows the replay; a
    release that no longer replays, or whose backports became stale or unnecessary, has its problems listed (`make
    check-patches` fails on them until they are fixed or the release is removed from releases.json)."""
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        for version in project.supported_releases()[1:]:
            repo = Path(tmp) / version
            try:
                release_checkout(project, primary_repo, repo, version)
            except ToolError as e:
                report[version] = [str(e)]
                continue
            releases = project.read_releases()
            releases["releases"][version]["files"] = patches.pristine_hashes(repo)
            project.write_releases(releases)
            report[version] = check_release(project, primary_repo, repo, version)
    return report


_EDIT_STATE = "diffusers-patched-edit.json"


def _backport_remedy(version):
    return (
        f"Write the backport: `make edit RELEASE={version}`, resolve the conflict in build/series-{version} (edit, "
        f"`git add`), then `make refresh RELEASE={version}`."
    )


def backport_of(project, version, record, name):
    """The backport of `name` that release `version` applies: its own, or the one it records of another release."""
    own = project.backport_path(version, name)
    if own.exists():
        return own
    if name in record.get("backports", {}):
        return project.backport_path(record["backports"][name], name)
    return None


# How a release applies each entry of its plan: upstream's own fix it lacks and a backport exactly, the series' patch
# with a 3-way merge.
UPSTREAM_FIX, BACKPORT, SERIES_PATCH = "upstream fix", "backport", "series patch"


def release_plan(project, version, record, entries):
    """[(name, patch file, UPSTREAM_FIX / BACKPORT / SERIES_PATCH)] that make release `version`: upstream's fixes it
    lacks, then the series in order, each patch as its backport where it has one; after checking its data."""
    problems = []
    for name, reason in record["skipped"].items():
        if name not in entries:
            problems.append(f"releases.json: {version} skips {name}, which is not in patches/series; remove it.")
        elif not reason.strip():
            problems.append(f"releases.json: {version} skips {name} without a reason; say why it does not need it.")
    backports = project.backports_dir / version
    for path in sorted(backports.iterdir()) if backports.is_dir() else []:
        if path.name not in entries or path.name in record["skipped"]:
            problems.append(
                f"{path.relative_to(project.root)} is the backport of no patch that {version} applies; delete it."
            )
    for name, other in record.get("backports", {}).items():
        if name not in entries or name in record["skipped"]:
            problems.append(f"releases.json: {version} records a backport of {name}, which it does not apply.")
        elif project.backport_path(version, name).exists():
            problems.append(
                f"releases.json: {version} has its own backport of {name} and records {other}'s too; keep one."
            )
        elif not project.backport_path(other, name).exists():
            problems.append(f"releases.json: {version} records the backport of {name} of {other}, which has none.")
    fixes = record.get("upstream_fixes", [])
    problems.extend(
        f"releases.json: {version} needs upstream's fix {fix}, which is not in patches/upstream/."
        for fix in fixes
        if not (project.upstream_fixes_dir / fix).exists()
    )
    if problems:
        raise ToolError("\n".join(problems))
    plan = [(fix, project.upstream_fixes_dir / fix, UPSTREAM_FIX) for fix in fixes]
    for name in entries:
        if name not in record["skipped"]:
            backport = backport_of(project, version, record, name)
            plan.append((name, backport, BACKPORT) if backport else (name, project.patches_dir / name, SERIES_PATCH))
    return plan


def backported_patches(project, version):
    """The patches `version` applies as a backport: code written for that release alone."""
    plan = release_plan(project, version, project.release_record(version), project.read_series())
    return {name for name, _, kind in plan if kind == BACKPORT}


def release_checkout(project, primary_repo, repo, version, editing=False):
    """`repo`: pristine `version` (tag `pristine`) with the series replayed as commits; returns the plan.

    The primary's series commits (from `primary_repo`) are tag `primary`: the 3-way merges need their blobs, and they
    show the maintainer what a backport is of. `editing` stops at a conflict for `refresh`, and keeps `repo` working
    after `primary_repo` is gone.
    """
    record = project.release_record(version)
    plan = release_plan(project, version, record, project.read_series())
    upstream.clone_pristine(version, record["sdist_sha256"], repo, primary_repo, keep_primary=editing)
    replay(project, repo, version, plan, editing, record["sdist_sha256"])
    return plan


def replay(project, repo, version, plan, editing, sdist_sha256=None):
    """Apply `plan` onto `repo`: backports exactly (unless `editing`), the series' patches with 3-way merges.
    `sdist_sha256`: `repo` is the pristine release of that sdist, so the replay may come from the cache
    (tools/replays.py); None when `repo` holds other commits already."""
    with replays.Replay(repo, sdist_sha256) as replayed:
        for index, (name, patch, kind) in enumerate(plan):
            if kind != SERIES_PATCH and not editing:
                where = patch.relative_to(project.root)
                remedy = f"{where} no longer applies exactly onto {version} (an earlier patch changed?). "
                replayed.apply(
                    name,
                    patch,
                    replays.WITH_OFFSETS,
                    lambda: patches.apply_patch(
                        repo, name, patch, three_way=False, remedy=remedy + _backport_remedy(version), offsets=True
                    ),
                )
            else:
                replayed.apply(
                    name, patch, replays.THREE_WAY, lambda: _merge(project, repo, version, plan, index, editing)
                )


def _merge(project, repo, version, plan, index, editing):
    """`git am --3way` of step `index` of `plan`; on a conflict, an error naming the file and hunk, and with `editing`
    the state `refresh` resumes from."""
    name, patch, _ = plan[index]
    result = git(repo, "am", *patches.AM_FLAGS, "--3way", str(patch), check=False)
    if result.returncode == 0:
        patches.name_commit(repo, name)
        return
    where = patch.relative_to(project.root)
    lines = [f"{where} does not replay onto {upstream.UPSTREAM} {version}:", *patches.conflict_lines(repo, patch)]
    if len(lines) == 1:
        lines.append(result.stderr.strip())
    if editing:
        remaining = [[name, str(patch), kind] for name, patch, kind in plan[index + 1 :]]
        (repo / ".git" / _EDIT_STATE).write_text(json.dumps({"current": name, "remaining": remaining}))
        lines.append(
            f"Resolve the conflicts in {repo} (edit, then `git add`), then run `make refresh RELEASE={version}`; "
            f"or, if {version} does not need {name}, record why in patches/releases.json (`skipped`) and run "
            f"`make edit RELEASE={version}` again."
        )
    else:
        git(repo, "am", "--abort", check=False)
        lines.append(f"{version} has no backport of {name}. {_backport_remedy(version)}")
    raise ToolError("\n".join(lines))


def replays_cleanly(repo, commit, patch, three_way=True):
    """Whether `patch` replays with git (3-way, or exactly) onto the parent of `commit`, giving exactly `commit`'s
    tree."""
    with tempfile.TemporaryDirectory() as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "read-tree", f"{commit}^", env=index)
        merge = ["--3way"] if three_way else []
        if git(repo, "apply", *merge, "--cached", str(patch), check=False, env=index).returncode != 0:
            return False
        tree = git(repo, "write-tree", env=index).stdout.strip()
    return tree == git(repo, "rev-parse", f"{commit}^{{tree}}").stdout.strip()


def check_release(project, primary_repo, repo, version):
    """Problems of release `version`, replayed in `repo`: its record, its backports (exact, needed, canonical)."""
    record = project.release_record(version)
    plan = release_checkout(project, primary_repo, repo, version)
    remedy = f"run `make edit RELEASE={version}` then `make refresh RELEASE={version}` to rewrite it"
    problems = []
    if patches.pristine_hashes(repo) != record["files"]:
        problems.append(
            f"patches/releases.json: the pristine sha256 recorded for {version} are not those of exactly the files "
            "its series touches (a patch was added or changed?); run `make refresh-releases`."
        )
    for (name, patch, kind), commit in zip(plan, patches.series_commits(repo)):
        if kind != BACKPORT:
            continue
        where = patch.relative_to(project.root)
        if patch.parent.name == version and patches.export_commit(repo, commit) != patch.read_bytes():
            problems.append(f"{where}: a re-export differs from the committed file; {remedy}.")
        elif replays_cleanly(repo, commit, project.patches_dir / name):
            problems.append(
                f"{where} is unnecessary: the series' own {name} replays onto {version} with git; {remedy} "
                "(refresh deletes it)."
            )
    problems.extend(f"{version}: {problem}" for problem in patches.lint_style(repo))
    return problems


def check_releases(project, primary_repo, scratch):
    """Problems of every supported release but the primary, and of backports kept for no supported release."""
    supported = project.supported_releases()
    problems = [
        f"{directory.relative_to(project.root)} holds backports for {directory.name}, which is not a supported "
        "release; delete it, or support the release (`python -m tools.cli add-release`)."
        for directory in (sorted(project.backports_dir.iterdir()) if project.backports_dir.is_dir() else [])
        if directory.name not in supported
    ]
    problems.extend(stale_backports(project))
    for version in supported[1:]:
        try:
            problems.extend(check_release(project, primary_repo, scratch / version, version))
        except ToolError as e:
            problems.append(str(e))
    return problems


def backport_users(project, stored_for, name):
    """The releases that apply the backport of `name` stored for release `stored_for`."""
    records = project.read_releases()["releases"]
    return [
        version
        for version in project.supported_releases()[1:]
        if version == stored_for or records[version].get("backports", {}).get(name) == stored_for
    ]


def stale_backports(project):
    """Backports written for an earlier state of their patch: the series' patch changed the lines it adds or removes
    since (releases.json `backport_of` records them when the backport is written), so the backport may no longer make
    the same change."""
    recorded = project.read_releases().get("backport_of", {})
    problems = []
    for path in sorted(project.backports_dir.glob("*/*.patch")):
        key = f"{path.parent.name}/{path.name}"
        primary = project.patches_dir / path.name
        if primary.exists() and recorded.get(key) != patches.changed_lines_digest(primary.read_text()):
            users = backport_users(project, path.parent.name, path.name)
            problems.append(
                f"{path.relative_to(project.root)} backports {path.name} as it was: the series' {path.name} changed "
                "the lines it adds or removes since, so the backport may no longer make the same change. Rewrite "
                "it for " + ", ".join(f"`make edit RELEASE={v}` + `make refresh RELEASE={v}`" for v in users) + "."
            )
    return problems


def edit_release(project, version):
    """`build/series-<version>`: the release's pristine sdist and its series as commits, stopping at a conflict."""
    project.release_record(version)  # refuses an unsupported release
    repo = project.release_work_dir(version)
    if (repo / ".git").exists() and (
        (repo / ".git" / _EDIT_STATE).exists() or git(repo, "status", "--porcelain").stdout.strip()
    ):
        raise ToolError(
            f"{repo} holds work that is not in patches/ yet; run `make refresh RELEASE={version}` to keep it, or "
            f"delete {repo} to start over."
        )
    with tempfile.TemporaryDirectory() as tmp:
        patches.scratch_checkout(project, Path(tmp) / "primary")
        return release_checkout(project, Path(tmp) / "primary", repo, version, editing=True)


def refresh_release(project, version):
    """Finish the replay in `build/series-<version>` and rewrite the release's backports and record from it.

    A commit gets a backport file exactly when the series' own patch does not replay onto its parent as it stands.
    Returns (names applied, names backported).
    """
    record = project.release_record(version)
    repo = project.release_work_dir(version)
    if not (repo / ".git").exists():
        raise ToolError(f"{repo} does not exist; run `make edit RELEASE={version}` first.")
    state_file = repo / ".git" / _EDIT_STATE
    if state_file.exists():
        unmerged = git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split()
        if unmerged:
            raise ToolError(f"{repo} still has conflicts in {', '.join(unmerged)}: resolve them, `git add`.")
        state = json.loads(state_file.read_text())
        if (repo / ".git" / "rebase-apply").exists():
            result = git(repo, "-c", "core.editor=true", "am", "--continue", check=False)
            if result.returncode != 0:
                raise ToolError(f"`git am --continue` failed in {repo}:\n{result.stdout}{result.stderr}")
        patches.name_commit(repo, state["current"])
        state_file.unlink()
        replay(project, repo, version, [(n, Path(p), kind) for n, p, kind in state["remaining"]], editing=True)
    if git(repo, "status", "--porcelain").stdout.strip():
        raise ToolError(f"{repo} has uncommitted changes; commit them first.")
    names = patches.series_names(repo)
    fixes = record.get("upstream_fixes", [])
    expected = [*fixes, *(name for name in project.read_series() if name not in record["skipped"])]
    if names != expected:
        raise ToolError(
            f"the commits in {repo} must be upstream's fixes {version} records, then the series' patches in order, "
            f"less those {version} skips (releases.json); found {', '.join(names) or 'none'}. To skip a patch on "
            f"{version}, record why in patches/releases.json (`skipped`) and run `make edit RELEASE={version}` again."
        )
    releases = project.read_releases()
    shared, written = {}, {}
    for name, commit in zip(names[len(fixes) :], patches.series_commits(repo)[len(fixes) :]):
        own = project.backport_path(version, name)
        if replays_cleanly(repo, commit, project.patches_dir / name):
            own.unlink(missing_ok=True)
            continue
        other = _fitting_backport(project, repo, version, name, commit)
        if other:
            own.unlink(missing_ok=True)
            shared[name] = other
            continue
        own.parent.mkdir(parents=True, exist_ok=True)
        own.write_bytes(patches.export_commit(repo, commit))
        written[f"{version}/{name}"] = patches.changed_lines_digest((project.patches_dir / name).read_text())
    directory = project.backports_dir / version
    if directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
    releases["releases"][version]["files"] = patches.pristine_hashes(repo)
    releases["releases"][version]["backports"] = shared
    stored = {f"{path.parent.name}/{path.name}" for path in project.backports_dir.glob("*/*.patch")}
    digests = {**releases.get("backport_of", {}), **written}
    releases["backport_of"] = {key: digest for key, digest in digests.items() if key in stored}
    project.write_releases(releases)
    return names, [*shared, *(key.split("/", 1)[1] for key in written)]


def _fitting_backport(project, repo, version, name, commit):
    """Another release whose stored backport of `name` applies exactly onto `commit`'s parent in `repo`, giving its
    tree (none while `version`'s own backport is one that other releases apply)."""
    if len(backport_users(project, version, name)) > 1:
        return None
    for other in project.supported_releases()[1:]:
        path = project.backport_path(other, name)
        if other != version and path.exists() and replays_cleanly(repo, commit, path, three_way=False):
            return other
    return None


def add_release(project, version):
    """Record `version` as supported (its sdist's sha256; files and backports follow from the replay)."""
    if version in project.supported_releases():
        raise ToolError(f"diffusers {version} is already supported.")
    sdist = upstream.fetch_sdist(version)
    releases = project.read_releases()
    releases["releases"][version] = {"sdist_sha256": upstream.sha256_of(sdist), "files": {}, "skipped": {}}
    project.write_releases(releases)
    vendoring.vendor(project)  # the manifest lists the supported releases


def release_vendor(project, version, primary=None):
    """{relative path under _vendor: bytes} of the vendored tree for supported release `version`, from pristine +
    series (for the primary that is the committed tree, which `check` keeps identical). `primary`: a scratch
    checkout of the primary to reuse (`scratch_checkout`), for several releases in a row."""
    record = project.release_record(version)
    with tempfile.TemporaryDirectory() as tmp:
        if primary is None:
            primary = Path(tmp) / "primary"
            patches.scratch_checkout(project, primary)
        if version == project.read_base()["version"]:
            return vendoring.build_vendor(project, primary, project.read_series())
        plan = release_checkout(project, primary, Path(tmp) / version, version)
        names = [name for name, _, _ in plan]
        backported = [name for name, _, kind in plan if kind == BACKPORT]
        return vendoring.build_vendor(project, Path(tmp) / version, names, record, backported)
