"""Replays of the series, cached by what determines them.

A replay (tools/patches.py, tools/releases.py) is a clone of a pristine sdist with patches applied one by one by git,
each as a commit with fixed identities and dates (tools/git.py). The commit a patch makes is therefore a function of
its parent, its name (the commit's `Patch-Filename:` trailer) and its bytes, with git's version. How it is applied
(exactly, with offsets allowed, or with a 3-way merge) decides only whether it applies: `git am --3way` merges only
where the patch does not apply as it stands, and then the merge too depends on the patch's bytes alone (its `index`
lines name the blobs). So the commit after n patches has a key chaining git's version, the sdist's sha256 and each
patch's name and bytes.

With DIFFUSERS_PATCHED_REPLAY_CACHE naming a directory, replays keep their commits there (a bare repository per sdist,
borrowing the pristine repository's objects, and a file per key naming the commit and how its patch was applied), and
a replay starts from the longest prefix found there, checked out with `git reset --hard`: the commits, and so their
ids and trees, that git applying each patch again makes. A commit made with a stricter application serves a looser
one (exactly < with offsets < 3-way), not the other way round, so a patch that must apply exactly is checked exactly.
Unset (the default), every replay runs git from the start. The test suite sets it for its run (tests/conftest.py);
tests/test_series.py compares cached replays with fresh ones.
"""

import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from .git import borrow_objects, git


CACHE_ENV = "DIFFUSERS_PATCHED_REPLAY_CACHE"
EXACTLY, WITH_OFFSETS, THREE_WAY = "exactly", "with-offsets", "3-way"
_STRICTNESS = {EXACTLY: 0, WITH_OFFSETS: 1, THREE_WAY: 2}


@functools.cache
def _git_version():
    return git(Path.cwd(), "--version").stdout.strip()


def _digest(*parts):
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class Replay:
    """Patches applied as commits onto `repo`, a fresh clone of the pristine sdist whose sha256 is `sdist_sha256`
    (tag `pristine`, not checked out yet: `upstream.clone_pristine`), through the cache if there is one.
    `sdist_sha256=None`: `repo` holds other commits already (a replay resumed after a conflict was resolved by hand),
    so nothing is looked up or kept.

    Use as a context manager: on leaving, `repo` is at the last commit, applied or cached, and what was applied is
    kept in the cache (also when a patch failed: the commits before it).
    """

    def __init__(self, repo, sdist_sha256):
        self.repo = Path(repo)
        root = os.environ.get(CACHE_ENV)
        self.store = None
        if root and sdist_sha256 is not None:
            self.store = _store(Path(root), sdist_sha256, self.repo)
            borrow_objects(self.repo, self.store)
            self.key = _digest("diffusers-patched replay", _git_version(), sdist_sha256)
        # The commit to check out before the next patch is applied, or on leaving: pristine, or a cached commit.
        self.pending = None if sdist_sha256 is None else "pristine"
        self.applied = 0  # commits on top of pristine, applied or cached
        self.made = []  # (number of the commit, key, how) of those applied here

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._check_out_pending()
        if self.made:
            _keep(self.store, self.repo, self.made)

    def apply(self, name, patch, how, apply):
        """`apply()` applies `patch` (named `name`) onto `repo` `how` (EXACTLY, WITH_OFFSETS or THREE_WAY) as a commit,
        or raises; unless the cache holds the commit it makes."""
        if self.store is None:
            self._check_out_pending()
            apply()
            return
        key = _digest(self.key, name, hashlib.sha256(Path(patch).read_bytes()).hexdigest())
        entry = self.store / "keys" / key
        if entry.exists():
            commit, made_how = entry.read_text().split()
            if _STRICTNESS[made_how] <= _STRICTNESS[how]:
                self.pending, self.key = commit, key
                self.applied += 1
                return
        self._check_out_pending()
        apply()
        self.key = key
        self.applied += 1
        self.made.append((self.applied, key, how))

    def _check_out_pending(self):
        if self.pending is not None:
            git(self.repo, "reset", "--quiet", "--hard", self.pending)
            self.pending = None


def _store(root, sdist_sha256, repo):
    """The bare repository keeping the replays of one sdist, borrowing the objects of `repo`'s pristine repository (a
    `git clone --shared` of it), so that only the commits of the series are stored."""
    store = root / f"{sdist_sha256}.git"
    if not store.exists():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root))
        git(staging, "init", "--quiet", "--bare")
        (staging / "keys").mkdir()
        borrow_objects(staging, git(repo, "remote", "get-url", "origin").stdout.strip())
        try:
            staging.rename(store)
        except OSError:  # another process made it first
            shutil.rmtree(staging)
    return store


def _keep(store, repo, made):
    """Push the commits `made` into `store` (one ref, at the last: it reaches the others), then name each by its key.
    Best effort: a replay of the same patches at the same time in another process may hold the ref's lock."""
    commits = git(repo, "rev-list", "--reverse", "pristine..HEAD").stdout.split()
    number, key, _ = made[-1]
    pushed = git(repo, "push", "--quiet", "--no-verify", str(store), f"{commits[number - 1]}:refs/replays/{key}",
                 check=False)  # fmt: skip
    if pushed.returncode != 0:
        return
    for number, key, how in made:
        staging = store / "keys" / f".{key}.{os.getpid()}"
        staging.write_text(f"{commits[number - 1]} {how}\n")
        os.replace(staging, store / "keys" / key)
