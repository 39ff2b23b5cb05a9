"""The mechanics of the patch series: its files (`Project`), applying patches with git, exporting commits back to
patch files, their DEP-3 metadata, and the replays other modules build on.

Every operation drives real git in a scratch repository whose first commit is the pristine upstream sdist (tag
`pristine`) and whose following commits are the series, one commit per patch (`git am`). Exports use fixed
`git format-patch` flags and an isolated git configuration, so a re-export is byte-identical.

The order of the series lives only in `patches/series`; a patch's file name is carried through the scratch commits by
a `Patch-Filename:` trailer (as Electron's patch tooling does), added when a patch is applied and stripped when it is
exported, so patch files never contain it.

The flows built on these (check, export, edit, refresh, rebase) are in tools/series.py, the other releases in
tools/releases.py.
"""

import hashlib
import json
import re
import sys
from pathlib import Path

from . import ToolError, replays, upstream
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
        self.standalone_dir = self.patches_dir / "standalone"
        self.work_dir = self.root / "build" / "series"
        self.rebase_dir = self.root / "build" / "rebase"

    def release_work_dir(self, version):
        return self.root / "build" / f"series-{version}"

    def pr_work_dir(self, name):
        return self.root / "build" / f"pr-{name}"

    def read_base(self):
        try:
            return json.loads(self.base_file.read_text())
        except FileNotFoundError:
            raise ToolError(f"{self.base_file} is missing: it records the upstream release the series is based on.")

    def write_base(self, base):
        self.base_file.write_text(json.dumps(base, indent=2, sort_keys=True) + "\n")

    def read_releases(self):
        """patches/releases.json: the post-release number of the builds, every supported release but the primary
        (base.json), each with its sdist sha256, the pristine sha256 of the files its series touches, the patches it
        skips with the reason and the scenarios it shows otherwise with a reason's key, and those reasons (`reasons`,
        written once for every release they apply to)."""
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
        """{version, sdist_sha256, files, skipped, ...} of a supported release, its scenarios' reasons written out; the
        primary's is base.json."""
        base = self.read_base()
        if version == base["version"]:
            return {**base, "skipped": {}}
        records = self.read_releases()
        releases = records["releases"]
        if version not in releases:
            raise ToolError(
                f"diffusers {version} is not a supported release; supported: {', '.join(self.supported_releases())}. "
                f"To support it, `python -m tools.cli add-release {version}`."
            )
        record = {"version": version, "skipped": {}, **releases[version]}
        reasons = records.get("reasons", {})
        unknown = sorted(
            {key for sides in record.get("scenarios", {}).values() for key in sides.values()} - set(reasons)
        )
        if unknown:
            raise ToolError(
                f"releases.json: {version}'s scenarios give reasons {unknown} that `reasons` does not hold."
            )
        record["scenarios"] = {
            name: {side: reasons[key].format(release=version) for side, key in sides.items()}
            for name, sides in record.get("scenarios", {}).items()
        }
        return record

    def backport_path(self, version, name):
        return self.backports_dir / version / name

    def read_series(self):
        """The series entries, after checking for missing, duplicate and unlisted patches and stray files."""
        if not self.series_file.exists():
            raise ToolError(f"{self.series_file} is missing; create it with one patch file name per line.")
        entries = []
        for number, line in enumerate(self.series_file.read_text().splitlines(), 1):
            name = line.split("#", 1)[0].strip()
            if not name:
                continue
            if name in entries:
                raise ToolError(f"{self.series_file}:{number}: {name} is listed twice; remove the duplicate line.")
            if not (self.patches_dir / name).is_file():
                raise ToolError(
                    f"{self.series_file}:{number}: {name} does not exist in {self.patches_dir}; "
                    "restore the file or remove the line."
                )
            entries.append(name)
        unlisted = sorted(p.name for p in self.patches_dir.glob("*.patch") if p.name not in entries)
        if unlisted:
            raise ToolError(
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
            raise ToolError(f"stray files left by a failed patch: {', '.join(stray)}; delete them.")
        return entries

    def write_series(self, entries):
        self.series_file.write_text(SERIES_HEADER + "".join(f"{name}\n" for name in entries))


def patch_hunks(patch_text):
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
    hunks = patch_hunks(patch_text)
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
            raise ToolError(_apply_error(name, patch.read_text(errors="replace"), output, remedy))
    result = git(repo, "am", *AM_FLAGS, *(["--3way"] if three_way else []), str(patch), check=False)
    if result.returncode != 0:
        git(repo, "am", "--abort", check=False)
        raise ToolError(f"{name} could not be applied with git am: {result.stderr}")
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
        raise ToolError("\n".join(problems))
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


def conflict_lines(repo, patch):
    """One line per conflict git left in `repo`'s working tree: the file, the line and the hunk of `patch`."""
    hunks = patch_hunks(patch.read_text(errors="replace") if patch.exists() else "")
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
