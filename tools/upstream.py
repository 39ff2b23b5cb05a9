"""Pristine upstream: the released sdists of diffusers, downloaded with pip, verified against the recorded sha256,
cached, and as git repositories of one commit each."""

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from packaging.version import Version

from . import ToolError
from .git import borrow_objects, git


UPSTREAM = "diffusers"
UPSTREAM_SOURCE_DIR = "src/"


def version_key(version):
    # PEP 440 order: a release candidate sorts before its release.
    return Version(version)


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
                raise ToolError(
                    f"could not download the sdist of {UPSTREAM}=={version}: is it a released version? "
                    f"(`pip index versions {UPSTREAM}` lists them)\npip said: {result.stderr.strip()[-2000:]}"
                )
            downloaded.rename(sdist)
    found = sha256_of(sdist)
    if expected_sha256 is not None and found != expected_sha256:
        raise ToolError(
            f"{sdist} has sha256 {found}, but patches/ records {expected_sha256} for {UPSTREAM} {version} "
            f"(base.json or releases.json). Delete {sdist} so that it is downloaded again; if upstream really "
            f"re-published {version}, review the change and update the record."
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
    extract_sdist(sdist, f"{UPSTREAM}-{version}/", staging)
    git(staging, "init", "--quiet", "--initial-branch=upstream")
    git(staging, "add", "--all", "--force")
    git(staging, "commit", "--quiet", "--no-verify", "-m", f"{UPSTREAM} {version} (pristine sdist)")
    staging.rename(repo)
    return repo


def extract_sdist(sdist, prefix, dest):
    """Extract the regular files under `prefix` of the tarball `sdist` into `dest`, without `prefix`."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        for member in members:
            member.name = member.name[len(prefix) :]
            path = PurePosixPath(member.name)
            if path.is_absolute() or ".." in path.parts:
                raise ToolError(f"{sdist}: member {prefix}{member.name} would be extracted outside {dest}.")
        # The "data" filter (Python >= 3.10.12 / 3.11.4 only) also drops special permission bits.
        tar.extractall(dest, members=members, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))


def clone_pristine(version, sdist_sha256, dest, primary=None, keep_primary=False):
    """`dest`: a fresh clone of pristine `version` (tag `pristine`), not checked out yet: the replay onto it
    (tools/replays.py) checks out pristine, or the cached commit it starts from. `primary`: a repository whose HEAD
    (the series as written) is tag `primary` too, for the blobs that 3-way merges of the series' patches need. Its
    objects are borrowed (a git alternate), so `dest` must not outlive `primary`; `keep_primary` fetches them instead
    (for another release, that is its whole tree: seconds)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(
        dest.parent,
        "clone",
        "--quiet",
        "--shared",
        "--no-checkout",
        str(pristine_repo(version, sdist_sha256)),
        str(dest),
    )
    git(dest, "tag", "pristine")
    if primary is not None and keep_primary:
        git(dest, "fetch", "--quiet", "--no-tags", str(primary), "HEAD")
        git(dest, "tag", "primary", "FETCH_HEAD")
    elif primary is not None:
        borrow_objects(dest, primary)
        git(dest, "tag", "primary", git(primary, "rev-parse", "HEAD").stdout.strip())
