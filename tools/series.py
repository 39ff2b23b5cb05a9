"""The patch series: pristine upstream + `patches/series` -> vendored tree, with check, export and rebase.

Every operation drives real git in a scratch repository whose first commit is the pristine upstream
sdist and whose following commits are the series, one commit per patch (`git am`). Exports use
fixed `git format-patch` flags and an isolated git configuration, so a re-export is byte-identical.
"""

import hashlib
import json
import os
import pprint
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path


UPSTREAM = "diffusers"
UPSTREAM_SOURCE_DIR = "src/"
FORMAT_PATCH_FLAGS = [
    "--keep-subject",
    "--no-stat",
    "--no-signature",
    "--zero-commit",
    "--full-index",
    "--no-renames",
    "--stdout",
]
# Pristine and scratch commits get fixed identities and dates so their ids never churn.
_GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "diffusers-patched",
    "GIT_AUTHOR_EMAIL": "diffusers-patched@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "diffusers-patched",
    "GIT_COMMITTER_EMAIL": "diffusers-patched@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}
SERIES_HEADER = "# diffusers-patched series: applied in order onto pristine diffusers (see base.json).\n"
_TRAILER_RE = re.compile(r"^(Fixes|Forwarded|Applied-Upstream|Bug|Origin):? +(.+)$", re.MULTILINE)
_HUNK_RE = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@.*$", re.MULTILINE)


class SeriesError(Exception):
    """A problem with the series, the pristine upstream or the vendored tree, with its remedy."""


class Project:
    """Paths of a diffusers-patched checkout (or of a copy of one, in tests)."""

    def __init__(self, root):
        self.root = Path(root).resolve()
        self.patches_dir = self.root / "patches"
        self.series_file = self.patches_dir / "series"
        self.base_file = self.patches_dir / "base.json"
        self.vendor_dir = self.root / "diffusers_patched" / "_vendor"
        self.work_dir = self.root / "build" / "series"
        self.rebase_dir = self.root / "build" / "rebase"

    def read_base(self):
        try:
            return json.loads(self.base_file.read_text())
        except FileNotFoundError:
            raise SeriesError(f"{self.base_file} is missing: it records the upstream release the series is based on.")

    def write_base(self, base):
        self.base_file.write_text(json.dumps(base, indent=2, sort_keys=True) + "\n")

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


def git(repo, *args, check=True, input=None):
    """Run git with no user or system configuration, so results do not depend on the machine."""
    env = {
        **os.environ,
        **_GIT_IDENTITY,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "LC_ALL": "C",
    }
    result = subprocess.run(["git", "-C", str(repo), *args], env=env, input=input, capture_output=True, check=False)
    if check and result.returncode != 0:
        raise SeriesError(f"git {' '.join(args)} failed in {repo}:\n{result.stderr.decode(errors='replace')}")
    return result


def sha256_of(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def cache_dir():
    return Path(os.environ.get("DIFFUSERS_PATCHED_CACHE", Path.home() / ".cache" / "diffusers-patched"))


def fetch_sdist(version, expected_sha256=None):
    """The upstream sdist for `version`, from the cache or downloaded with pip, verified when a hash is known."""
    sdist = cache_dir() / "sdists" / f"{UPSTREAM}-{version}.tar.gz"
    if not sdist.exists():
        sdist.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=sdist.parent) as download_dir:
            result = subprocess.run(
                [sys.executable, "-m", "pip", "download", f"{UPSTREAM}=={version}", "--no-deps", "--no-binary",
                 ":all:", "--no-build-isolation", "--quiet", "-d", download_dir],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            downloaded = Path(download_dir) / sdist.name
            if result.returncode != 0 or not downloaded.exists():
                raise SeriesError(
                    f"could not download the sdist of {UPSTREAM}=={version}: is it a released version? "
                    f"(`pip index versions {UPSTREAM}` lists them)\npip said: {result.stderr.strip()[-2000:]}"
                )
            downloaded.rename(sdist)
    found = sha256_of(sdist)
    if expected_sha256 is not None and found != expected_sha256:
        raise SeriesError(
            f"{sdist} has sha256 {found}, but patches/base.json records {expected_sha256} for {UPSTREAM} {version}. "
            f"Delete {sdist} so that it is downloaded again; if upstream really re-published {version}, "
            "review the change and update patches/base.json."
        )
    return sdist


def pristine_repo(version, expected_sha256=None):
    """A cached git repository with one commit: the pristine upstream sdist for `version`."""
    sdist = fetch_sdist(version, expected_sha256)
    repo = cache_dir() / "pristine" / f"{UPSTREAM}-{version}-{sha256_of(sdist)[:16]}"
    if repo.exists():
        return repo
    repo.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=repo.parent))
    with tarfile.open(sdist) as tar:
        prefix = f"{UPSTREAM}-{version}/"
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        for member in members:
            member.name = member.name[len(prefix) :]
        tar.extractall(staging, members=members, filter="data")
    git(staging, "init", "--quiet", "--initial-branch=upstream")
    git(staging, "add", "--all", "--force")
    git(staging, "commit", "--quiet", "--no-verify", "-m", f"{UPSTREAM} {version} (pristine sdist)")
    staging.rename(repo)
    return repo


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


def _apply_error(name, patch_text, git_output):
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
                f"{hunk.group(3)} lines; the series must apply with zero offset. Rebuild the patch with "
                "`make edit` + `make refresh`."
            )
        if failed and failed.group(1):
            header = _hunk_containing(hunks.get(failed.group(1), []), int(failed.group(2)))
            return (
                f"{name}: {failed.group(1)}: hunk {header} does not apply to the pristine upstream (context "
                "differs; no fuzz is allowed). Rebuild the patch with `make edit` + `make refresh`, or "
                "`make rebase` if upstream moved."
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


def apply_series(project, repo, entries, three_way=False):
    """`git am` each patch in order onto `repo`, with zero fuzz and zero offset unless `three_way`."""
    for name in entries:
        patch = project.patches_dir / name
        patch_text = patch.read_text(errors="replace")
        if not three_way:
            check = git(repo, "apply", "--check", "--verbose", str(patch), check=False)
            output = check.stdout.decode(errors="replace") + check.stderr.decode(errors="replace")
            if check.returncode != 0 or "(offset " in output:
                raise SeriesError(_apply_error(name, patch_text, output))
        result = git(repo, "am", "--quiet", *(["--3way"] if three_way else []), str(patch), check=False)
        if result.returncode != 0:
            git(repo, "am", "--abort", check=False)
            raise SeriesError(f"{name} could not be applied with git am: {result.stderr.decode(errors='replace')}")


def scratch_checkout(project, dest, base=None, three_way=False):
    """A fresh clone of the pristine base in `dest` with the series applied as commits; returns the series entries."""
    base = base or project.read_base()
    entries = project.read_series()
    repo = pristine_repo(base["version"], base["sdist_sha256"])
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", "--shared", str(repo), str(dest)], check=True, capture_output=True)
    git(dest, "tag", "pristine")
    apply_series(project, dest, entries, three_way)
    return entries


def series_commits(repo):
    return git(repo, "rev-list", "--reverse", "pristine..HEAD").stdout.decode().split()


def export_commit(repo, commit):
    return git(repo, "format-patch", *FORMAT_PATCH_FLAGS, "-1", commit).stdout


def parse_patch_header(patch_text):
    """Subject and DEP-3 style trailers of one exported patch."""
    subject = re.search(r"^Subject: (.+(?:\n .+)*)", patch_text, re.MULTILINE)
    message = patch_text.split("\n---\n", 1)[0]
    trailers = dict(_TRAILER_RE.findall(message))
    return {
        "subject": " ".join(subject.group(1).split()) if subject else "",
        "fixes": trailers.get("Fixes"),
        "forwarded": trailers.get("Forwarded", "no"),
        "applied_upstream": trailers.get("Applied-Upstream"),
    }


def vendored_files(repo):
    """{path under src/: content} for every upstream module the series changes or adds."""
    changed = git(repo, "diff", "--name-only", "--no-renames", "pristine", "HEAD", "--", UPSTREAM_SOURCE_DIR)
    files = {}
    for path in changed.stdout.decode().split():
        if path.endswith(".py") and (repo / path).exists():
            files[path[len(UPSTREAM_SOURCE_DIR) :]] = (repo / path).read_bytes()
    return files


def module_name(vendored_path):
    name = vendored_path[: -len(".py")].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def render_manifest(base, files, patches):
    """The generated `_vendor/__init__.py`: what activation and `status` need, with no I/O at start-up."""
    modules = {
        module_name(path): {"path": path, "pristine_sha256": base["files"].get(UPSTREAM_SOURCE_DIR + path)}
        for path in sorted(files)
    }
    return (
        "# Generated by `make vendor` from patches/base.json and patches/series. Do not edit.\n"
        f"UPSTREAM_VERSION = {base['version']!r}\n"
        f"MODULES = {pprint.pformat(modules, width=110)}\n"
        f"PATCHES = {pprint.pformat(patches, width=110, sort_dicts=False)}\n"
    )


def build_vendor(project, repo, entries):
    """{relative path under _vendor: bytes} for pristine + series in `repo`."""
    base = project.read_base()
    files = vendored_files(repo)
    patches = [{"file": name, **parse_patch_header((project.patches_dir / name).read_text())} for name in entries]
    tree = dict(files)
    tree["__init__.py"] = render_manifest(base, files, patches).encode()
    # Apache-2.0 section 4: ship upstream's license, and say which files were changed and how.
    tree["LICENSE"] = (repo / "LICENSE").read_bytes()
    tree["NOTICE"] = render_notice(base, files, patches).encode()
    return tree


def render_notice(base, files, patches):
    return (
        f"The Python files in this directory are from {UPSTREAM} {base['version']} (https://github.com/huggingface/"
        f"{UPSTREAM}),\nCopyright The HuggingFace Team, licensed under the Apache License 2.0 (LICENSE here).\n\n"
        "diffusers-patched modified them with these patches, in this order (their text is in patches/ of the "
        "diffusers-patched\nsource distribution and repository):\n"
        + "".join(f"  {patch['file']}: {patch['subject']}\n" for patch in patches)
        + "\nModified files:\n"
        + "".join(f"  {path}\n" for path in sorted(files))
    )


def current_vendor(project):
    return {
        str(p.relative_to(project.vendor_dir)): p.read_bytes()
        for p in sorted(project.vendor_dir.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def write_vendor(project, tree):
    if project.vendor_dir.exists():
        shutil.rmtree(project.vendor_dir)
    for path, content in tree.items():
        target = project.vendor_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def vendor(project):
    """Regenerate the vendored tree from pristine + series."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "work"
        entries = scratch_checkout(project, repo)
        write_vendor(project, build_vendor(project, repo, entries))
    return entries


def check(project):
    """Lint the series, apply it exactly, and require vendored tree and patch files to be regenerable as is."""
    base = project.read_base()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "work"
        entries = scratch_checkout(project, repo, base)
        problems = []
        if pristine_hashes(repo) != base["files"]:
            problems.append(
                "patches/base.json does not list the pristine sha256 of exactly the files the series touches; "
                "run `make refresh` after `make edit` to rewrite it."
            )
        expected = build_vendor(project, repo, entries)
        found = current_vendor(project)
        for path in sorted(set(expected) | set(found)):
            if expected.get(path) != found.get(path):
                state = "missing" if path not in found else "unexpected" if path not in expected else "edited"
                problems.append(
                    f"vendored file diffusers_patched/_vendor/{path} is {state}: the vendored tree must be exactly "
                    "pristine + series. Run `make vendor`; to change the code, edit it with `make edit` and "
                    "`make refresh`."
                )
        for name, commit in zip(entries, series_commits(repo)):
            if export_commit(repo, commit) != (project.patches_dir / name).read_bytes():
                problems.append(
                    f"{name}: a re-export differs from the committed file (hand-edited or made with other "
                    "flags); run `make refresh` to rewrite it canonically."
                )
        problems.extend(lint_style(repo))
    if problems:
        raise SeriesError("\n".join(problems))
    return entries


def lint_style(repo):
    """Upstream's own ruff rules (its pyproject.toml) on every Python file the series changes."""
    changed = git(repo, "diff", "--name-only", "--diff-filter=AM", "pristine", "HEAD").stdout.decode().split()
    python_files = [path for path in changed if path.endswith(".py")]
    if not python_files:
        return []
    problems = []
    for command in (["check"], ["format", "--check"]):
        result = subprocess.run(
            [sys.executable, "-m", "ruff", *command, *python_files], cwd=repo, capture_output=True, text=True
        )
        if result.returncode != 0:
            problems.append(f"ruff {' '.join(command)} (upstream's config) fails:\n{result.stdout}{result.stderr}")
    return problems


def export_patches(project, out_dir):
    """Write one mbox patch per series entry into `out_dir`, checked to `git am` onto pristine upstream."""
    entries = check(project)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in entries:
        shutil.copyfile(project.patches_dir / name, out_dir / name)
    (out_dir / "series").write_text("".join(f"{name}\n" for name in entries))
    return [out_dir / name for name in entries]


def _write_from_repo(project, repo, base, entries_by_commit):
    """Rewrite patches, series, base record and vendored tree from the commits in `repo`."""
    commits = series_commits(repo)
    names = []
    for number, commit in enumerate(commits, 1):
        name = entries_by_commit.get(commit) or _patch_name(number, git(repo, "log", "-1", "--format=%s", commit))
        names.append(name)
    for old in project.patches_dir.glob("*.patch"):
        old.unlink()
    for name, commit in zip(names, commits):
        (project.patches_dir / name).write_bytes(export_commit(repo, commit))
    project.write_series(names)
    base["files"] = pristine_hashes(repo)
    project.write_base(base)
    write_vendor(project, build_vendor(project, repo, names))
    return names


def pristine_hashes(repo):
    """{path: sha256} of the pristine version of every file the series touches and upstream has."""
    touched = git(repo, "diff", "--name-only", "--no-renames", "pristine", "HEAD").stdout.decode().split()
    hashes = {}
    for path in touched:
        blob = git(repo, "show", f"pristine:{path}", check=False)
        if blob.returncode == 0:
            hashes[path] = hashlib.sha256(blob.stdout).hexdigest()
    return hashes


def _patch_name(number, log_result):
    slug = re.sub(r"[^a-z0-9]+", "-", log_result.stdout.decode().strip().lower()).strip("-")
    if len(slug) > 52:
        slug = slug[:53].rsplit("-", 1)[0]  # whole words only
    return f"{number:04d}-{slug}.patch"


def edit(project):
    """Make `build/series`: pristine + series as commits, to change with ordinary git.

    Patches that apply only at an offset or with a 3-way merge are accepted here, so that `refresh` can rewrite them.
    """
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
    exported = [export_commit(repo, commit) for commit in series_commits(repo)]
    return exported != [(project.patches_dir / name).read_bytes() for name in project.read_series()]


def refresh(project):
    """Rewrite patches and vendored tree from the commits in `build/series`."""
    repo = project.work_dir
    if not (repo / ".git").exists():
        raise SeriesError(f"{repo} does not exist; run `make edit` first, then commit your change there.")
    if git(repo, "status", "--porcelain").stdout.strip():
        raise SeriesError(
            f"{repo} has uncommitted changes; commit them first (`git commit --fixup` for an existing patch, "
            "then `git rebase -i --autosquash pristine`, or a new commit for a new patch)."
        )
    old_entries = project.read_series()
    commits = series_commits(repo)
    # A commit keeps its patch file name while its subject is unchanged.
    subjects = {parse_patch_header((project.patches_dir / n).read_text())["subject"]: n for n in old_entries}
    by_commit = {}
    for commit in commits:
        subject = git(repo, "log", "-1", "--format=%s", commit).stdout.decode().strip()
        if subject in subjects:
            by_commit[commit] = subjects[subject]
    return _write_from_repo(project, repo, project.read_base(), by_commit)


def rebase(project, new_version):
    """Replay the series onto upstream `new_version` with 3-way merges, in `build/rebase`."""
    base = project.read_base()
    if project.rebase_dir.exists():
        raise SeriesError(
            f"a rebase is already in progress in {project.rebase_dir}; finish it with `make rebase-continue` or "
            f"delete {project.rebase_dir} to start over."
        )
    new_sdist = fetch_sdist(new_version)
    new_repo = pristine_repo(new_version, sha256_of(new_sdist))
    repo = project.rebase_dir
    try:
        entries = scratch_checkout(project, repo, base)
        git(repo, "fetch", "--quiet", str(new_repo), "upstream")
        git(repo, "tag", "new-pristine", "FETCH_HEAD")
    except BaseException:
        shutil.rmtree(repo, ignore_errors=True)
        raise
    subjects = [git(repo, "log", "-1", "--format=%s", c).stdout.decode().strip() for c in series_commits(repo)]
    rebase_state = {
        "version": new_version,
        "sdist_sha256": sha256_of(new_sdist),
        "entries": dict(zip(subjects, entries)),
    }
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
    kept = {}
    for commit in series_commits(repo):
        subject = git(repo, "log", "-1", "--format=%s", commit).stdout.decode().strip()
        kept[commit] = state["entries"].get(subject)
    dropped = sorted(set(state["entries"].values()) - set(kept.values()))
    base = {"version": state["version"], "sdist_sha256": state["sdist_sha256"], "files": {}}
    names = _write_from_repo(project, repo, base, kept)
    shutil.rmtree(repo)
    return names, dropped


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
    subject = git(repo, "log", "-1", "--format=%s", "REBASE_HEAD", check=False).stdout.decode().strip()
    name = state["entries"].get(subject, subject)
    patch_text = (project.patches_dir / name).read_text() if (project.patches_dir / name).exists() else ""
    hunks = _patch_hunks(patch_text)
    lines = [f"{name} conflicts with {UPSTREAM} {state['version']}:"]
    for path in git(repo, "diff", "--name-only", "--diff-filter=U").stdout.decode().split():
        for start, theirs in _conflict_regions((repo / path).read_text(errors="replace")):
            # The conflicting hunk is the one whose lines fill the patch's side of the conflict.
            overlap = [
                (len(theirs & body), number, header) for number, (header, body) in enumerate(hunks.get(path, []), 1)
            ]
            best = max(overlap, default=(0, None, None))
            hunk = f"hunk #{best[1]} ({best[2]})" if best[0] else "no single hunk of the patch"
            lines.append(f"  {path}: conflict at line {start}, {hunk}")
    lines.append(
        f"Nothing in {project.root} was changed. Resolve the conflicts in {repo} (edit, then `git add`), then run "
        f"`make rebase-continue`; or delete {repo} to abandon the rebase."
    )
    return "\n".join(lines)
