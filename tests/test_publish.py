"""`make publish` to a real package index: pypiserver on 127.0.0.1, then pip installing from it as a production image
would, pinned builds, newest build and `--require-hashes`; and each refusal (tools/publish.py).

pip runs `--isolated` (no configured index): the local index serves diffusers-patched, and a find-links directory
stands in for the usual indexes with diffusers' own wheel; the rest of the stack is what is installed here.
"""

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import REPO_ROOT
from tools import patches, publish, upstream, wheels
from tools.git import git


PROJECT = patches.Project(REPO_ROOT)
PRIMARY = PROJECT.read_base()["version"]
POST = PROJECT.read_releases()["post"]
PINNED = "0.40.0"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def index(tmp_path):
    """A pypiserver on a free port of 127.0.0.1, uploads without authentication; its upload URL and packages dir."""
    packages = tmp_path / "index-packages"
    packages.mkdir()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "pypiserver", "run", "--host", "127.0.0.1", "--port", str(port),
         "--authenticate", ".", "--passwords", ".", "--hash-algo", "sha256", str(packages)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "simple/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"pypiserver did not start: {server.stderr.read().decode()[-2000:]}")
        yield url, packages
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def checked_clone(tmp_path_factory):
    """This commit, cloned, with the per-release checks recorded as passed on it (`make test-releases` records that on a
    clean checkout; here it is the precondition, the index is under test)."""
    clone = tmp_path_factory.mktemp("clone") / "repo"
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True)
    commit = git(clone, "rev-parse", "HEAD").stdout.strip()
    stamp = clone / publish.RELEASE_CHECKS_STAMP
    stamp.parent.mkdir(parents=True)
    stamp.write_text(json.dumps({"commit": commit}))
    yield patches.Project(clone)


@pytest.fixture
def credentials(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TWINE_USERNAME", "maintainer")
    monkeypatch.setenv("TWINE_PASSWORD", "unused-by-this-index")


def pip_choice(tmp_path, index_url, *requirements, options=()):
    """{name: version} pip would install from the index (and diffusers' wheel as the usual index would serve it)."""
    find_links = tmp_path / "usual-index"
    find_links.mkdir(exist_ok=True)
    for path in wheels.release_wheels(PROJECT, PINNED):
        shutil.copy(path, find_links)
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--quiet", "--index-url", index_url,
         "--find-links", str(find_links), "--report", str(report), *options, *requirements],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return {
        item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(report.read_text())["install"]
    }


def test_publish_then_install_from_the_index_as_a_production_image(dist, index, checked_clone, credentials, tmp_path):
    url, _ = index
    done = publish.publish(checked_clone, dist, url)
    assert sorted((name, state) for name, _, state in done) == sorted(
        (f"diffusers_patched-{version}.post{POST}-py3-none-any.whl", "uploaded")
        for version in PROJECT.supported_releases()
    )
    assert all(sha256 == upstream.sha256_of(dist / name) for name, sha256, _ in done)

    index_url = url + "simple/"
    pinned = pip_choice(tmp_path, index_url, f"diffusers=={PINNED}", "diffusers-patched")
    assert (pinned["diffusers"], pinned["diffusers-patched"]) == (PINNED, f"{PINNED}.post{POST}")
    newest = pip_choice(tmp_path, index_url, "diffusers-patched", options=["--no-deps", "--ignore-installed"])
    assert newest == {"diffusers-patched": f"{PRIMARY}.post{POST}"}

    (requirements,) = [path for path in publish.write_requirements(PROJECT, dist) if PINNED in path.name]
    assert "--hash=sha256:" in requirements.read_text()
    hashed = pip_choice(tmp_path, index_url, "-r", str(requirements), options=["--require-hashes", "--no-deps"])
    assert hashed == {"diffusers": PINNED, "diffusers-patched": f"{PINNED}.post{POST}"}

    # Publishing the same version again uploads nothing.
    again = publish.publish(checked_clone, dist, url)
    assert {state for _, _, state in again} == {"already on the index"}


def test_publish_refuses_a_version_the_index_holds_with_other_bytes(dist, index, checked_clone, credentials):
    url, packages = index
    name = f"diffusers_patched-{PRIMARY}.post{POST}-py3-none-any.whl"
    (packages / name).write_bytes((dist / name).read_bytes() + b"\0")
    with pytest.raises(publish.PublishError, match=f"{name} already on .* with other bytes.*Nothing was uploaded"):
        publish.publish(checked_clone, dist, url)
    assert sorted(path.name for path in packages.iterdir()) == [name]


def test_publish_refuses_without_credentials(dist, checked_clone, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for variable in ("TWINE_USERNAME", "TWINE_PASSWORD"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(publish.PublishError, match="no credentials for http://127.0.0.1:9/.*TWINE_USERNAME"):
        publish.publish(checked_clone, dist, "http://127.0.0.1:9/")


def test_publish_refuses_an_unreachable_index(dist, checked_clone, credentials):
    with pytest.raises(publish.PublishError, match="cannot reach the index at http://127.0.0.1:9/simple/"):
        publish.publish(checked_clone, dist, "http://127.0.0.1:9/")


def test_publish_refuses_a_commit_whose_release_checks_did_not_pass(dist, checked_clone, credentials):
    stamp = checked_clone.root / publish.RELEASE_CHECKS_STAMP
    recorded = stamp.read_text()
    stamp.write_text(json.dumps({"commit": "0" * 40}))
    try:
        with pytest.raises(publish.PublishError, match="per-release checks have not passed on this commit"):
            publish.publish(checked_clone, dist, "http://127.0.0.1:9/")
    finally:
        stamp.write_text(recorded)


def test_publish_refuses_wheels_this_commit_does_not_build(dist, index, checked_clone, credentials, tmp_path):
    url, packages = index
    stale = tmp_path / "stale-dist"
    shutil.copytree(dist, stale)
    wheel = stale / f"diffusers_patched-{PRIMARY}.post{POST}-py3-none-any.whl"
    wheel.write_bytes(wheel.read_bytes() + b"\0")
    with pytest.raises(publish.PublishError, match=f"{wheel} is not what this commit builds.*make wheels"):
        publish.publish(checked_clone, stale, url)
    assert list(packages.iterdir()) == []


def test_pypirc_credentials_are_found_for_their_repository(tmp_path, monkeypatch):
    for variable in ("TWINE_USERNAME", "TWINE_PASSWORD"):
        monkeypatch.delenv(variable, raising=False)
    pypirc = tmp_path / ".pypirc"
    pypirc.write_text("[local]\nrepository = http://127.0.0.1:8080/\nusername = me\npassword = secret\n")
    assert publish.has_credentials("http://127.0.0.1:8080", pypirc)
    assert not publish.has_credentials("http://127.0.0.1:9090/", pypirc)
