"""git, and the other tools the series runs (ruff, upstream's scripts), in an isolated environment."""

import os
import subprocess
import sys
from pathlib import Path

from . import ToolError


# Pristine and scratch commits get fixed identities and dates so their ids never churn; no user or system
# configuration (hooks, trailer or diff settings) and a fixed locale, so results do not depend on the machine.
_ISOLATED_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "LC_ALL": "C",
    "GIT_AUTHOR_NAME": "diffusers-patched",
    "GIT_AUTHOR_EMAIL": "diffusers-patched@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "diffusers-patched",
    "GIT_COMMITTER_EMAIL": "diffusers-patched@localhost",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


def run_isolated(command, cwd, check=True, input=None, binary=False, env=None):
    """Run a tool (git, ruff, upstream's scripts) in `cwd` with the isolated environment.

    Output is text unless `binary`: patch files and pristine blobs are compared and hashed byte for byte.
    """
    result = subprocess.run(
        command,
        cwd=cwd,
        # The tools installed with this Python come first: upstream's scripts call `ruff` by name.
        env={
            **os.environ,
            **_ISOLATED_ENV,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)]),
            **(env or {}),
        },
        input=input,
        capture_output=True,
        check=False,
        **({} if binary else {"encoding": "utf-8", "errors": "replace"}),
    )
    if check and result.returncode != 0:
        stderr = result.stderr.decode(errors="replace") if binary else result.stderr
        raise ToolError(f"{' '.join(map(str, command))} failed in {cwd}:\n{stderr}")
    return result


def git(repo, *args, **kwargs):
    return run_isolated(["git", *args], repo, **kwargs)


def borrow_objects(repo, other):
    """Let `repo` read the objects of the repository `other` (a git alternate), instead of copying them: `repo` must
    not outlive `other`."""
    with (_objects_dir(repo) / "info" / "alternates").open("a") as alternates:
        alternates.write(f"{_objects_dir(other).resolve()}\n")


def _objects_dir(repo):
    """The object directory of a repository with a working tree, or of a bare one."""
    repo = Path(repo)
    return repo / ".git" / "objects" if (repo / ".git").is_dir() else repo / "objects"
