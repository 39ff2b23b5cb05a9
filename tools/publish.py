"""`make publish` and `make requirements`: the wheels of every supported release on a package index, with hashes.

`make publish` uploads `dist/`'s wheels with twine to `REPOSITORY_URL` (default: PyPI), one file at a time, and checks
each on the index (`INDEX_URL`, its PEP 503 simple index) afterwards. Credentials are twine's: `TWINE_USERNAME` and
`TWINE_PASSWORD` in the environment, or `~/.pypirc`; never this repository. Before anything is uploaded it refuses:
wheels that are not what this commit builds (rebuilt and compared byte for byte), a commit whose per-release checks
did not pass (`tests/test_releases.py` records the commit it passed on), an unreachable index, missing credentials,
and a file the index already holds with other bytes (one with the same bytes is left as it is).

`make requirements` writes `dist/requirements-<release>.txt`: that release's diffusers and diffusers-patched, pinned
with `--hash=sha256:` lines, for `pip install --require-hashes`.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from configparser import ConfigParser
from pathlib import Path

from . import ToolError, upstream, wheels
from .git import git


PYPI_UPLOAD_URL = "https://upload.pypi.org/legacy/"
PYPI_INDEX_URL = "https://pypi.org/simple/"
PROJECT_NAME = "diffusers-patched"
# Written by tests/conftest.py (`pytest_sessionfinish`) when every per-release check passed in an unfiltered run: the
# commit they passed on.
RELEASE_CHECKS_STAMP = Path("build") / "release-checks-passed.json"
_SHA256_LINK_RE = re.compile(r'href="[^"#]*/([^"/#]+)#sha256=([0-9a-f]{64})"')


class PublishError(ToolError):
    pass


def index_url_for(repository_url):
    """The simple index that lists what `repository_url` accepted: PyPI's, or `<repository>/simple/` (pypiserver,
    devpi and Artifactory serve both from one root)."""
    if repository_url == PYPI_UPLOAD_URL:
        return PYPI_INDEX_URL
    return repository_url.rstrip("/") + "/simple/"


def files_on_index(index_url):
    """{file name: sha256} of diffusers-patched on the index; an unreachable index is an error, an unknown project
    an empty dict."""
    url = f"{index_url.rstrip('/')}/{PROJECT_NAME}/"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            page = response.read().decode()
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return {}
        raise PublishError(f"the index at {index_url} answered {e.code} for {url}; check INDEX_URL.") from e
    except (urllib.error.URLError, OSError) as e:
        raise PublishError(
            f"cannot reach the index at {index_url} ({e}); check REPOSITORY_URL / INDEX_URL and the network. "
            "Nothing was uploaded."
        ) from e
    return dict(_SHA256_LINK_RE.findall(page))


def has_credentials(repository_url, pypirc=None):
    """Whether twine will find credentials for `repository_url`: the environment, or a `~/.pypirc` section whose
    `repository` is that URL (or `[pypi]` for PyPI) with a password."""
    if os.environ.get("TWINE_USERNAME") and os.environ.get("TWINE_PASSWORD"):
        return True
    config = ConfigParser()
    config.read(pypirc or Path.home() / ".pypirc")
    for section in config.sections():
        repository = config[section].get("repository", PYPI_UPLOAD_URL if section == "pypi" else "")
        if repository.rstrip("/") == repository_url.rstrip("/") and config[section].get("password"):
            return True
    return False


def check_release_checks_passed(project):
    """The per-release checks passed on this commit, with nothing uncommitted; returns the commit."""
    commit = git(project.root, "rev-parse", "HEAD").stdout.strip()
    dirty = git(project.root, "status", "--porcelain", "--untracked-files=no").stdout.strip()
    stamp = project.root / RELEASE_CHECKS_STAMP
    passed_on = json.loads(stamp.read_text())["commit"] if stamp.exists() else None
    if dirty or passed_on != commit:
        state = "uncommitted changes" if dirty else f"they last passed on {passed_on or 'no commit'}"
        raise PublishError(
            f"the per-release checks have not passed on this commit {commit[:12]} ({state}); run `make test` "
            "and `make test-releases` (the per-release checks whole) on a clean checkout, then `make publish`."
        )
    return commit


def check_wheels_are_this_commits(project, dist, commit):
    """Every supported release's wheel is in `dist`, byte-identical to what `commit` builds (built once per commit
    into build/publish/<commit>: the tree is clean, and builds are reproducible); returns the paths."""
    rebuilt = project.root / "build" / "publish" / commit
    if not rebuilt.is_dir():
        partial = rebuilt.parent / f"{commit}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        wheels.build_wheels(project, partial)
        partial.rename(rebuilt)
    paths = []
    for fresh in sorted(rebuilt.glob("*.whl")):
        built = Path(dist) / fresh.name
        if not built.exists():
            raise PublishError(f"{built} is missing: run `make wheels` (one wheel per supported release).")
        if built.read_bytes() != fresh.read_bytes():
            raise PublishError(
                f"{built} is not what this commit builds (an older series or package?): run `make wheels`."
            )
        paths.append(built)
    return paths


def upload(path, repository_url):
    """twine upload of one file; twine's own message on failure."""
    result = subprocess.run(
        [sys.executable, "-m", "twine", "upload", "--non-interactive", "--disable-progress-bar",
         "--repository-url", repository_url, str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise PublishError(
            f"uploading {path.name} to {repository_url} failed:\n{(result.stdout + result.stderr)[-2000:]}"
        )


def publish(project, dist, repository_url=PYPI_UPLOAD_URL, index_url=None):
    """Upload the verified wheels in `dist`; returns [(file, sha256, "uploaded" or "already on the index")].

    A failure midway names what was uploaded before it: an index cannot take a file back."""
    index_url = index_url or index_url_for(repository_url)
    if not has_credentials(repository_url):
        raise PublishError(
            f"no credentials for {repository_url}: set TWINE_USERNAME and TWINE_PASSWORD (for PyPI `__token__` and an "
            "API token), or add a ~/.pypirc section with that `repository` and a password. Nothing was uploaded."
        )
    commit = check_release_checks_passed(project)
    present = files_on_index(index_url)
    paths = check_wheels_are_this_commits(project, dist, commit)
    hashes = {path: upstream.sha256_of(path) for path in paths}
    clashes = [path.name for path in paths if path.name in present and present[path.name] != hashes[path]]
    if clashes:
        raise PublishError(
            f"{', '.join(clashes)} already on {index_url} with other bytes; a published version cannot be replaced: "
            "raise `post` in patches/releases.json, `make wheels`, and publish again. Nothing was uploaded."
        )
    done = []
    for path in paths:
        if path.name in present:
            done.append((path.name, hashes[path], "already on the index"))
            continue
        try:
            upload(path, repository_url)
        except PublishError as e:
            uploaded = ", ".join(name for name, _, state in done if state == "uploaded") or "nothing"
            raise PublishError(f"{e}\nUploaded before the failure: {uploaded}.") from e
        if files_on_index(index_url).get(path.name) != hashes[path]:
            raise PublishError(
                f"{path.name} was uploaded but {index_url} does not list it with sha256 {hashes[path]}."
            )
        done.append((path.name, hashes[path], "uploaded"))
    return done


def write_requirements(project, dist):
    """`requirements-<release>.txt` in `dist` for every release whose wheel is there: diffusers and diffusers-patched
    pinned with their sha256 (diffusers' wheel as the registry serves it). Returns the paths."""
    written = []
    for version in project.supported_releases():
        found = sorted(Path(dist).glob(f"diffusers_patched-{version}.post*-py3-none-any.whl"))
        if not found:
            continue
        wheel = found[-1]
        patched_version = wheel.name.split("-")[1]
        upstream_wheel = wheels.cached_wheel(f"{upstream.UPSTREAM}=={version}")
        lines = [
            f"{upstream.UPSTREAM}=={version} --hash=sha256:{upstream.sha256_of(upstream_wheel)}",
            f"{PROJECT_NAME}=={patched_version} --hash=sha256:{upstream.sha256_of(wheel)}",
        ]
        path = Path(dist) / f"requirements-{version}.txt"
        path.write_text("\n".join(lines) + "\n")
        written.append(path)
    return written
