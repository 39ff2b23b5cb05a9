import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from diffusers_patched.selftest.gpu_scenarios import GPU_SCENARIOS
from diffusers_patched.selftest.scenarios import SCENARIOS, run_each_apart, run_scenarios


REPO_ROOT = Path(__file__).resolve().parents[1]

# The tests under tests/gpu/ (marker `gpu`): skipped, saying why, wherever torch sees no CUDA device. `make test-gpu`
# runs them on a machine with one.
requires_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason=f"needs a CUDA GPU: torch {torch.__version__} sees none (torch.cuda.is_available() is False); "
    "`make test-gpu` runs these on a machine with one",
)


# A directory for the whole run, shared by its processes (the tools the tests run as subprocesses inherit the
# environment): the replay cache (tools/replays.py).
RUN_DIR_ENV = "DIFFUSERS_PATCHED_TEST_RUN_DIR"


def pytest_configure(config):
    from tools import replays

    if RUN_DIR_ENV not in os.environ:
        directory = tempfile.mkdtemp(prefix="diffusers-patched-test-run-")
        os.environ[RUN_DIR_ENV] = directory
        os.environ.setdefault(replays.CACHE_ENV, os.path.join(directory, "replays"))
        config.add_cleanup(lambda: shutil.rmtree(directory, ignore_errors=True))


def run_python(code, *, patched=True, env=None, cwd=None, timeout=600):
    """Run `code` in a fresh interpreter, with the patches on (as installed) or off (DIFFUSERS_PATCHED=0)."""
    full_env = {**os.environ, "DIFFUSERS_PATCHED": "1" if patched else "0", "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def python():
    return run_python


@pytest.fixture
def project(tmp_path):
    """A copy (tests/test_series.py, tests/test_upstream_prs.py) of the project's series and vendored tree in a temporary root."""
    from tools import series

    root = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "patches", root / "patches")
    shutil.copytree(
        REPO_ROOT / "diffusers_patched" / "_vendor",
        root / "diffusers_patched" / "_vendor",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return series.Project(root)


@pytest.fixture(scope="session")
def dist(tmp_path_factory):
    """`make wheels` into a scratch dist/ (tests/test_releases.py, tests/test_publish.py)."""
    from tools import series, wheels

    out = tmp_path_factory.mktemp("dist")
    wheels.build_wheels(series.Project(REPO_ROOT), out)
    return out


# One interpreter per side runs every scenario; a session that only asks for one side (`make test-fast`) runs only it.
@pytest.fixture(scope="session")
def upstream_outcomes():
    """Every registered scenario, run on upstream (DIFFUSERS_PATCHED=0): `{name: Outcome}`."""
    return run_scenarios(list(SCENARIOS), patched=False)


@pytest.fixture(scope="session")
def patched_outcomes():
    """Every registered scenario, run with the patches: `{name: Outcome}`."""
    return run_scenarios(list(SCENARIOS), patched=True)


def _gpu_outcomes(patched):
    """Every GPU scenario on one side, each in an interpreter of its own with CUDA; the outcomes (figures, peak GPU
    memory) with their verdicts are also written to build/gpu-scenarios-{patched,upstream}.json for the notes, and
    each interpreter's stderr to build/gpu-scenarios-stderr/."""
    build = REPO_ROOT / "build"
    (build / "gpu-scenarios-stderr").mkdir(parents=True, exist_ok=True)
    outcomes = run_each_apart(
        list(GPU_SCENARIOS),
        patched=patched,
        module="diffusers_patched.selftest.gpu_scenarios",
        cuda=True,
        log_dir=build / "gpu-scenarios-stderr",
    )
    report = {
        name: {**asdict(outcome), "verdict": outcome.verdict(GPU_SCENARIOS[name])}
        for name, outcome in outcomes.items()
    }
    path = build / f"gpu-scenarios-{'patched' if patched else 'upstream'}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return outcomes


@pytest.fixture(scope="session")
def gpu_upstream_outcomes():
    return _gpu_outcomes(patched=False)


@pytest.fixture(scope="session")
def gpu_patched_outcomes():
    return _gpu_outcomes(patched=True)


def pytest_sessionfinish(session, exitstatus):
    """Record the commit on which every per-release check (tests/test_releases.py) passed, unselected by nothing and
    with nothing uncommitted: `make publish` uploads only a commit so checked (tools/publish.py)."""
    from tools import publish
    from tools.git import git

    options = session.config.option
    ran_releases = any(item.path.name == "test_releases.py" for item in session.items)
    if exitstatus != 0 or not ran_releases or options.keyword or options.markexpr or options.deselect:
        return
    if git(REPO_ROOT, "status", "--porcelain", "--untracked-files=no").stdout.strip():
        return
    stamp = REPO_ROOT / publish.RELEASE_CHECKS_STAMP
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps({"commit": git(REPO_ROOT, "rev-parse", "HEAD").stdout.strip()}) + "\n")
