"""The patch series: pristine upstream + `patches/series`, with check, export, edit, refresh and rebase.

Every operation drives real git in a scratch repository whose first commit is the pristine upstream
sdist and whose following commits are the series, one commit per patch (`git am`). Exports use
fixed `git format-patch` flags and an isolated git configuration, so a re-export is byte-identical.

The order of the series lives only in `patches/series`; a patch's file name is carried through the
scratch commits by a `Patch-Filename:` trailer (as Electron's patch tooling does), added when a patch
is applied and stripped when it is exported, so patch files never contain it.
"""

import hashlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

from . import SeriesError, releases, replays, upstream, vendoring
from .git import git, run_isolated


FORMAT_PATCH_FLAGS = [
    "--keep-subject",
    "--no-stat",
    "--no-signature",
    "--zero-commit",
    "--full-index",
    "--no-renames",
    "--stdout",
]
# `git am` flags: keep "[LoRA] ..."-style subject prefixes (format-patch --keep-subject writes them as they are)
# while still dropping a "[PATCH]" prefix, e.g. of a patch downloaded from a pull request.
AM_FLAGS = ["--quiet", "--keep-non-patch"]
PATCH_FILENAME = "Patch-Filename"
_PATCH_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*\.patch")
SERIES_HEADER = "# diffusers-patched series: applied in order onto pristine diffusers (see base.json).\n"
_PRIMARY_REMEDY = "Rebuild the patch with `make edit` + `make refresh` (or `make rebase` if upstream moved)."
_HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@.*$", re.MULTILINE)


class Project:
    """Paths of a diffusers-patched checkout (or of a copy of one, in tests)."""

    def __init__(self, root):
        self.root = Path(root).resolve()
        self.patches_dir = self.root / "patches"
        self.series_file = self.patches_dir / "series"
        self.base_file = self.patches_dir / "base.json"
        self.vendor_dir = self.root / "diffusers_patched" / "_vendor"
        self.releases_file = self.patches_dir / "releases.json"
        self.backports_dir = self.patches_dir / "backports"
        self.upstream_fixes_dir = self.patches_dir / "upstream"
        self.work_dir = self.root / "build" / "series"
        self.rebase_dir = self.root / "build" / "rebase"

    def release_work_dir(self, version):
        return self.root / "build" / f"series-{version}"

    def read_base(self):
        try:
            return json.loads(self.base_file.read_text())
        except FileNotFoundError:
            raise SeriesError(f"{self.base_file} is missing: it records the upstream release the series is based on.")

    def write_base(self, base):
        self.base_file.write_text(json.dumps(base, indent=2, sort_keys=True) + "\n")

    def read_releases(self):
        """patches/releases.json: the post-release number of the builds, and every supported release but the primary
        (base.json), each with its sdist sha256, the pristine sha256 of the files its series touches, and the patches
        it skips with the reason."""
        if not self.releases_file.exists():
            return {"post": 1, "releases": {}}
        return json.loads(self.releases_file.read_text())

    def write_releases(self, releases):
        self.releases_file.write_text(json.dumps(releases, indent=2, sort_keys=True) + "\n")

    def supported_releases(self):
        """The primary first, then the older releases, newest first."""
        older = sorted(self.read_releases()["releases"], key=upstream.version_key, reverse=True)
        return [self.read_base()["version"], *older]

    def release_record(self, version):
        """{version, sdist_sha256, files, skipped} of a supported release; the primary's is base.json."""
        base = self.read_base()
        if version == base["version"]:
            return {**base, "skipped": {}}
        releases = self.read_releases()["releases"]
        if version not in releases:
            raise SeriesError(
                f"diffusers {version} is not a supported release; supported: {', '.join(self.supported_releases())}. "
                f"To support it, `python -m tools.cli add-release {version}`."
            )
        return {"version": version, "skipped": {}, **releases[version]}

    def backport_path(self, version, name):
        return self.backports_dir / version / name

    def read_series(self):
        """The series entries, after checking for missing, duplicate and unlisted patches and stray files."""
        if not self.series_file.exists():
            raise SeriesError(f"{self.series_file} is missing; create it with one patch file name per line.")
        entries = []
        for number, line in enumerate(self.series_file.read_text().splitlines(), 1):
            name = line.split("#", 1)[0].strip()
            if not name:
                continue
            if name in entries:
                raise SeriesError(f"{self.series_file}:{number}: {name} is listed twice; remove the duplicate line.")
            if not (self.patches_dir / name).is_file():
                raise SeriesError(
                    f"{self.series_file}:{number}: {name} does not exist in {self.patches_dir}; "
                    "restore the file or remove the line."
                )
            entries.append(name)
        unlisted = sorted(p.name for p in self.patches_dir.glob("*.patch") if p.name not in entries)
        if unlisted:
            raise SeriesError(
                f"{', '.join(unlisted)} in {self.patches_dir} not listed in {self.series_file}; "
                "add it to the series or delete it."
            )
        stray = sorted(
            str(p.relative_to(self.root))
            for directory in (self.patches_dir, self.vendor_dir)
            for pattern in ("*.orig", "*.rej")
            for p in directory.rglob(pattern)
        )
        if stray:
            raise SeriesError(f"stray files left by a failed patch: {', '.join(stray)}; delete them.")
        return entries

    def write_series(self, entries):
        self.series_file.write_text(SERIES_HEADER + "".join(f"{name}\n" for name in entries))


def _patch_hunks(patch_text):
    """{file: [(hunk header, lines the hunk adds or keeps), ...]} of a patch in git format."""
    hunks = {}
    current = None
    for line in patch_text.splitlines():
        if line.startswith("diff --git "):
            current = hunks.setdefault(line.split(" b/", 1)[1], [])
        elif current is not None and _HUNK_RE.match(line):
            current.append((line, set()))
        elif current and line[:1] in ("+", " "):
            current[-1][1].add(line[1:])
    return hunks


def changed_lines_digest(patch_text):
    """sha256 of the lines a patch removes and adds, per file, in order: the change itself, without its context, hunk
    positions or index lines (which differ between releases)."""
    changed = []
    for line in patch_text.splitlines():
        if line.startswith("diff --git "):
            changed.append(line.split(" b/", 1)[1])
        elif changed and line[:1] in ("+", "-") and not line.startswith(("+++ ", "--- ")):
            changed.append(line)
    return hashlib.sha256("\n".join(changed).encode()).hexdigest()


def _apply_error(name, patch_text, git_output, remedy):
    """Name the patch, the file and the hunk from `git apply -v` output."""
    hunks = _patch_hunks(patch_text)
    file_name = None
    for line in git_output.splitlines():
        checking = re.match(r"Checking patch (.+)\.\.\.$", line)
        if checking:
            file_name = checking.group(1)
        hunk = re.match(r"Hunk #(\d+) succeeded at (\d+) \(offset (-?\d+) lines?\)", line)
        failed = re.match(r"error: while searching for:|error: patch failed: (.+):(\d+)", line)
        if hunk:
            number = int(hunk.group(1))
            return (
                f"{name}: {file_name}: hunk #{number} ({hunks[file_name][number - 1][0]}) applies only at an offset of "
                f"{hunk.group(3)} lines; the series must apply with zero offset. {remedy}"
            )
        if failed and failed.group(1):
            header = _hunk_containing(hunks.get(failed.group(1), []), int(failed.group(2)))
            return (
                f"{name}: {failed.group(1)}: hunk {header} does not apply to the pristine upstream (context "
                f"differs; no fuzz is allowed). {remedy}"
            )
    return (
        f"{name} is not a valid patch (corrupt or truncated?): restore it with `git checkout -- patches/{name}`, "
        f"and change patches only with `make edit` + `make refresh`. git said:\n{git_output.strip()}"
    )


def _hunk_containing(hunks, line):
    for number, (header, _) in enumerate(hunks, 1):
        if int(re.match(r"@@ -(\d+)", header).group(1)) == line:
            return f"#{number} ({header})"
    return f"at line {line}"


def apply_series(project, repo, entries, sdist_sha256, three_way=False):
    """`git am` each patch in order onto `repo`, a fresh clone of the pristine sdist whose sha256 is `sdist_sha256`,
    with zero fuzz and zero offset unless `three_way`; through the replay cache (tools/replays.py)."""
    how = replays.THREE_WAY if three_way else replays.EXACTLY
    with replays.Replay(repo, sdist_sha256) as replayed:
        for name in entries:
            patch = project.patches_dir / name
            replayed.apply(name, patch, how, lambda: apply_patch(repo, name, patch, three_way))


def apply_patch(repo, name, patch, three_way, remedy=_PRIMARY_REMEDY, offsets=False):
    """`git am` one patch file, exactly (zero fuzz, and zero offset unless `offsets`) unless `three_way`, as the
    series commit `name`.

    The commit gets a `Patch-Filename:` trailer naming its patch file, which `refresh` and `rebase` keep the name by.
    """
    if not three_way:
        check = git(repo, "apply", "--check", "--verbose", str(patch), check=False)
        output = check.stdout + check.stderr
        if check.returncode != 0 or ("(offset " in output and not offsets):
            raise SeriesError(_apply_error(name, patch.read_text(errors="replace"), output, remedy))
    result = git(repo, "am", *AM_FLAGS, *(["--3way"] if three_way else []), str(patch), check=False)
    if result.returncode != 0:
        git(repo, "am", "--abort", check=False)
        raise SeriesError(f"{name} could not be applied with git am: {result.stderr}")
    name_commit(repo, name)


def name_commit(repo, name):
    # git places the trailer as `git commit --trailer` would: in the DEP-3 trailer block if there is one.
    git(repo, "-c", "trailer.ifexists=replace", "commit", "--quiet", "--amend", "--no-edit", "--no-verify",
        "--cleanup=verbatim", "--trailer", f"{PATCH_FILENAME}: {name}")  # fmt: skip


def scratch_checkout(project, dest, base=None, three_way=False):
    """A fresh clone of the pristine base in `dest` with the series applied as commits; returns the series entries."""
    base = base or project.read_base()
    entries = project.read_series()
    upstream.clone_pristine(base["version"], base["sdist_sha256"], dest)
    apply_series(project, dest, entries, base["sdist_sha256"], three_way)
    return entries


def replay_without(project, removed, primary, dest):
    """`dest`: a clone of the pristine base with the series less the patches `removed` applied as commits, each with a
    3-way merge (the blobs it needs borrowed from `primary`, a `scratch_checkout`). A later patch that no longer
    applies without them is left out too. Returns the names left out, in series order. With the replay cache, the
    patches before the first one removed are the primary's commits (tools/replays.py)."""
    base = project.read_base()
    upstream.clone_pristine(base["version"], base["sdist_sha256"], dest, primary)
    left_out = []
    with replays.Replay(dest, base["sdist_sha256"]) as replayed:
        for name in project.read_series():
            patch = project.patches_dir / name
            if name in removed:
                left_out.append(name)
                continue
            try:
                replayed.apply(name, patch, replays.THREE_WAY, lambda: apply_patch(dest, name, patch, three_way=True))
            except SeriesError:
                left_out.append(name)
    return left_out


def series_commits(repo):
    return git(repo, "rev-list", "--reverse", "pristine..HEAD").stdout.split()


def export_commit(repo, commit):
    """The patch file of `commit`: `git format-patch` with fixed flags, without the `Patch-Filename:` trailer."""
    mail = git(repo, "format-patch", *FORMAT_PATCH_FLAGS, "-1", commit, binary=True).stdout
    body_start = mail.index(b"\n\n") + 2  # after the mail headers
    body_end = body_start + re.search(rb"^diff --git ", mail[body_start:], re.MULTILINE).start()
    body = _strip_name_trailer(mail[body_start:body_end].decode()).encode()
    return mail[:body_start] + body + mail[body_end:]


def _strip_name_trailer(message):
    """`message` without its `Patch-Filename:` line, as it was before `apply_series` added the trailer."""
    lines = message.splitlines(keepends=True)
    kept = []
    for number, line in enumerate(lines):
        if line.startswith(f"{PATCH_FILENAME}:"):
            # Alone in its paragraph (the message had no trailer block): git put a blank line before it too.
            if kept and kept[-1] == "\n" and lines[number + 1 : number + 2] in ([], ["\n"]):
                kept.pop()
            continue
        kept.append(line)
    return "".join(kept)


def message_trailers(repo, message):
    """[(key, value), ...] of the trailer block of a commit message, as git itself parses it."""
    parsed = git(repo, "interpret-trailers", "--parse", "--no-divider", input=message).stdout
    return [tuple(part.strip() for part in line.split(":", 1)) for line in parsed.splitlines()]


def commit_name(repo, commit):
    """The patch file name a commit's `Patch-Filename:` trailer gives, or None."""
    message = git(repo, "log", "-1", "--format=%B", commit).stdout
    names = [value for key, value in message_trailers(repo, message) if key == PATCH_FILENAME]
    return names[-1] if names else None


def patch_metadata(repo, commit):
    """Subject, body and DEP-3 fields of the patch a series commit exports to."""
    subject = git(repo, "log", "-1", "--format=%s", commit).stdout.strip()
    message = _strip_name_trailer(git(repo, "log", "-1", "--format=%B", commit).stdout)
    trailers = message_trailers(repo, message)
    body = message.strip().partition("\n\n")[2]
    if trailers:  # git's trailer block is the last paragraph of the message; the body is what precedes it
        body = body.rpartition("\n\n")[0]
    fields = {}
    for key, value in trailers:
        fields.setdefault(key, []).append(value)
    return {
        "subject": subject,
        "body": body.strip(),
        "trailers": trailers,
        "bugs": fields.get("Bug", []),
        "origin": fields.get("Origin", [None])[-1],
        "forwarded": fields.get("Forwarded", [None])[-1],
        "applied_upstream": fields.get("Applied-Upstream", [None])[-1],
    }


def lint_metadata(name, metadata):
    """The DEP-3 fields every patch needs to be reviewed, forwarded or dropped: problems, each naming the patch."""
    problems = []
    if not metadata["body"]:
        problems.append("no body: say what goes wrong upstream and what the patch changes, below the subject")
    if metadata["forwarded"] is None:
        problems.append("no `Forwarded:` trailer: `no`, `not-needed` (local policy) or the upstream PR address")
    if not metadata["bugs"] and metadata["origin"] is None:
        problems.append("no `Bug:` or `Origin:` trailer: the upstream issue it fixes, or where the change comes from")
    if problems and not metadata["trailers"]:
        # E.g. a "Fixes #123" line among the trailers: then git sees no trailer block at all.
        problems.append("git finds no trailer block: the last paragraph must hold `Key: value` lines only")
    return [
        f"{name}: {problem} (reword it with `make edit`, `git rebase -i pristine`, `make refresh`)"
        for problem in problems
    ]


def check(project):
    """Lint the series, apply it exactly, and require vendored tree and patch files to be regenerable as is; then
    replay it onto every other supported release (see `check_release`)."""
    with tempfile.TemporaryDirectory() as tmp:
        entries, _ = _check_in(project, Path(tmp) / "work")
        problems = releases.check_releases(project, Path(tmp) / "work", Path(tmp) / "releases")
    if problems:
        raise SeriesError("\n".join(problems))
    return entries


def _check_in(project, repo):
    """`check`, with the series applied in `repo`; returns the entries and the local-only (`not-needed`) ones."""
    base = project.read_base()
    entries = scratch_checkout(project, repo, base)
    problems = []
    if pristine_hashes(repo) != base["files"]:
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
    for name, commit in zip(entries, series_commits(repo)):
        if export_commit(repo, commit) != (project.patches_dir / name).read_bytes():
            problems.append(
                f"{name}: a re-export differs from the committed file (hand-edited or made with other "
                "flags); run `make refresh` to rewrite it canonically."
            )
        metadata = patch_metadata(repo, commit)
        problems.extend(lint_metadata(name, metadata))
        if metadata["forwarded"] == "not-needed":
            local_only.append(name)
        elif local_only:
            problems.append(
                f"{name} follows the local-only (`Forwarded: not-needed`) patch {local_only[0]}: local-only "
                "patches go at the end of the series, so that the others can be exported without them."
            )
    problems.extend(lint_style(repo))
    if problems:
        raise SeriesError("\n".join(problems))
    return entries, local_only


def lint_style(repo, since="pristine"):
    """Upstream's own ruff rules (its pyproject.toml) on every Python file changed since `since` (the series, or one
    upstream PR on top of its dependencies)."""
    changed = git(repo, "diff", "--name-only", "--diff-filter=AM", since, "HEAD").stdout.split()
    python_files = [path for path in changed if path.endswith(".py")]
    if not python_files:
        return []
    problems = []
    for command in (["check"], ["format", "--check"]):
        result = run_isolated([sys.executable, "-m", "ruff", *command, *python_files], repo, check=False)
        if result.returncode != 0:
            problems.append(f"ruff {' '.join(command)} (upstream's config) fails:\n{result.stdout}{result.stderr}")
    return problems


def export_patches(project, out_dir, upstream_repo=None):
    """Write the upstream-ready patches (all but `Forwarded: not-needed` ones) into `out_dir`, verified.

    Returns (written paths, {left-out name: why}). The written files must `git am` onto the pristine release and pass
    upstream's ruff and, given an upstream git repository (the sdist lacks utils/), its `utils/check_copies.py`.
    """
    base = project.read_base()
    out_dir = Path(out_dir)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "work"
        entries, local_only = _check_in(project, repo)
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
            result = git(repo, "am", *AM_FLAGS, str(out_dir / name), check=False)
            if result.returncode != 0:
                raise SeriesError(f"exported {name} does not `git am` onto pristine {upstream.UPSTREAM} {base['version']} "
                                  f"without the patches left out ({', '.join(local_only)}):\n{result.stderr}")  # fmt: skip
        problems = lint_style(repo)
        if upstream_repo is not None:
            problems.extend(check_copies(repo, Path(upstream_repo), base["version"]))
    if problems:
        raise SeriesError("\n".join(problems))
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


def series_names(repo):
    """The patch file name of each series commit: its `Patch-Filename:` trailer, or for a new commit (or one made by
    older tooling) a slug of its subject, which must not be taken by another patch."""
    commits = series_commits(repo)
    named = {commit: commit_name(repo, commit) for commit in commits}
    problems = [
        f"commit {commit[:12]}: `{PATCH_FILENAME}: {name}` is not a patch file name (lower-case letters, digits, "
        "'.', '-', '_', ending in .patch)"
        for commit, name in named.items()
        if name is not None and not _PATCH_NAME_RE.fullmatch(name)
    ]
    names = []
    for commit in commits:
        name = named[commit]
        if name is None:
            subject = git(repo, "log", "-1", "--format=%s", commit).stdout.strip()
            name = _patch_name(subject)
            if name in named.values() or name in names:
                problems.append(
                    f'commit {commit[:12]} ("{subject}") would be named {name}, which another patch already has; '
                    f"reword its subject, or name it with `git commit --amend --trailer '{PATCH_FILENAME}: "
                    "<name>.patch'`."
                )
        elif name in names:
            problems.append(f"two commits are named {name} by their `{PATCH_FILENAME}:` trailer; rename one.")
        names.append(name)
    if problems:
        raise SeriesError("\n".join(problems))
    return names


def _write_from_repo(project, repo, base, names):
    """Rewrite patches, series, base record and vendored tree from the commits in `repo`, named `names`."""
    for old in project.patches_dir.glob("*.patch"):
        old.unlink()
    for name, commit in zip(names, series_commits(repo)):
        (project.patches_dir / name).write_bytes(export_commit(repo, commit))
    project.write_series(names)
    base["files"] = pristine_hashes(repo)
    project.write_base(base)
    vendoring.write_vendor(project, vendoring.build_vendor(project, repo, names))
    return names


def pristine_hashes(repo):
    """{path: sha256} of the pristine version of every file the series touches and upstream has."""
    touched = git(repo, "diff", "--name-only", "--no-renames", "pristine", "HEAD").stdout.split()
    hashes = {}
    for path in touched:
        blob = git(repo, "show", f"pristine:{path}", check=False, binary=True)
        if blob.returncode == 0:
            hashes[path] = hashlib.sha256(blob.stdout).hexdigest()
    return hashes


def _patch_name(subject):
    """`<slug of the subject>.patch`; no number: the order lives in patches/series only."""
    slug = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")
    if len(slug) > 52:
        slug = slug[:53].rsplit("-", 1)[0]  # whole words only
    return f"{slug}.patch"


def edit(project, version=None):
    """Make `build/series`: pristine + series as commits, to change with ordinary git.

    Patches that apply only at an offset or with a 3-way merge are accepted here, so that `refresh` can rewrite them.
    With another supported release, `build/series-<version>` (see `edit_release`).
    """
    if version not in (None, project.read_base()["version"]):
        return releases.edit_release(project, version)
    repo = project.work_dir
    if (repo / ".git").exists() and _unrefreshed_work(project, repo):
        raise SeriesError(
            f"{repo} holds work that is not in patches/ yet; run `make refresh` to keep it, or delete {repo} to "
            "start over."
        )
    return scratch_checkout(project, repo, three_way=True)


def _unrefreshed_work(project, repo):
    if git(repo, "status", "--porcelain").stdout.strip():
        return True
    try:
        names = series_names(repo)
    except SeriesError:  # commits that refresh would refuse are not in patches/ either
        return True
    exported = [(name, export_commit(repo, commit)) for name, commit in zip(names, series_commits(repo))]
    return exported != [(name, (project.patches_dir / name).read_bytes()) for name in project.read_series()]


def refresh(project, version=None):
    """Rewrite patches and vendored tree from the commits in `build/series` (another release: `refresh_release`)."""
    if version not in (None, project.read_base()["version"]):
        return releases.refresh_release(project, version)
    repo = project.work_dir
    if not (repo / ".git").exists():
        raise SeriesError(f"{repo} does not exist; run `make edit` first, then commit your change there.")
    if git(repo, "status", "--porcelain").stdout.strip():
        raise SeriesError(
            f"{repo} has uncommitted changes; commit them first (`git commit --fixup` for an existing patch, "
            "then `git rebase -i --autosquash pristine`, or a new commit for a new patch)."
        )
    project.read_series()  # refuses a broken series before anything is rewritten
    return _write_from_repo(project, repo, project.read_base(), series_names(repo))


def rebase(project, new_version):
    """Replay the series onto upstream `new_version` with 3-way merges, in `build/rebase`."""
    base = project.read_base()
    if project.rebase_dir.exists():
        raise SeriesError(
            f"a rebase is already in progress in {project.rebase_dir}; finish it with `make rebase-continue` or "
            f"delete {project.rebase_dir} to start over."
        )
    new_sdist = upstream.fetch_sdist(new_version)
    new_repo = upstream.pristine_repo(new_version, upstream.sha256_of(new_sdist))
    repo = project.rebase_dir
    try:
        entries = scratch_checkout(project, repo, base)
        git(repo, "fetch", "--quiet", str(new_repo), "upstream")
        git(repo, "tag", "new-pristine", "FETCH_HEAD")
    except BaseException:
        shutil.rmtree(repo, ignore_errors=True)
        raise
    rebase_state = {"version": new_version, "sdist_sha256": upstream.sha256_of(new_sdist), "entries": entries}
    (repo / ".git" / "diffusers-patched-rebase.json").write_text(json.dumps(rebase_state))
    result = git(repo, "rebase", "--empty=drop", "--onto", "new-pristine", "pristine", check=False)
    if result.returncode != 0:
        raise SeriesError(_conflict_report(project, repo))
    return _finish_rebase(project, repo)


def rebase_continue(project):
    repo = project.rebase_dir
    if not (repo / ".git").exists():
        raise SeriesError(
            f"no rebase in progress ({repo} does not exist); start one with `make rebase UPSTREAM=X.Y.Z`."
        )
    if (repo / ".git" / "rebase-merge").exists():
        result = git(repo, "-c", "core.editor=true", "rebase", "--continue", check=False)
        if result.returncode != 0:
            raise SeriesError(_conflict_report(project, repo))
    return _finish_rebase(project, repo)


def _finish_rebase(project, repo):
    state = json.loads((repo / ".git" / "diffusers-patched-rebase.json").read_text())
    git(repo, "tag", "--force", "pristine", "new-pristine")
    names = series_names(repo)  # the commits' trailers keep their names
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


def _conflict_regions(text):
    """(line of the `<<<<<<<` marker, lines on the patch's side) for each conflict in a merged file."""
    regions = []
    side = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("<<<<<<< "):
            regions.append((number, set()))
            side = "upstream"
        elif line.startswith("=======") and side == "upstream":
            side = "patch"
        elif line.startswith(">>>>>>> "):
            side = None
        elif side == "patch":
            regions[-1][1].add(line)
    return regions


def _conflict_report(project, repo):
    state = json.loads((repo / ".git" / "diffusers-patched-rebase.json").read_text())
    name = commit_name(repo, "REBASE_HEAD")
    patch = project.patches_dir / name
    lines = [f"{name} conflicts with {upstream.UPSTREAM} {state['version']}:", *conflict_lines(repo, patch)]
    lines.append(
        f"Nothing in {project.root} was changed. Resolve the conflicts in {repo} (edit, then `git add`), then run "
        f"`make rebase-continue`; or delete {repo} to abandon the rebase."
    )
    return "\n".join(lines)


def conflict_lines(repo, patch):
    """One line per conflict git left in `repo`'s working tree: the file, the line and the hunk of `patch`."""
    hunks = _patch_hunks(patch.read_text(errors="replace") if patch.exists() else "")
    lines = []
    for path in git(repo, "diff", "--name-only", "--diff-filter=U").stdout.split():
        if git(repo, "cat-file", "-e", f"HEAD:{path}", check=False).returncode != 0:
            # A modify/delete conflict: git leaves the patch's version of the file, without conflict markers.
            lines.append(f"  {path}: the patch changes this file, which this release does not have")
            continue
        for start, theirs in _conflict_regions((repo / path).read_text(errors="replace")):
            # The conflicting hunk is the one whose lines fill the patch's side of the conflict.
            overlap = [
                (len(theirs & body), number, header) for number, (header, body) in enumerate(hunks.get(path, []), 1)
            ]
            best = max(overlap, default=(0, None, None))
            hunk = f"hunk #{best[1]} ({best[2]})" if best[0] else "no single hunk of the patch"
            lines.append(f"  {path}: conflict at line {start}, {hunk}")
    return lines
