import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.scenarios import SCENARIOS, run_scenarios


REPO_ROOT = Path(__file__).resolve().parents[1]


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


# One interpreter per side runs every scenario; a session that only asks for one side (`make test-fast`) runs only it.
@pytest.fixture(scope="session")
def upstream_outcomes():
    """Every registered scenario, run on upstream (DIFFUSERS_PATCHED=0): `{name: Outcome}`."""
    return run_scenarios(list(SCENARIOS), patched=False)


@pytest.fixture(scope="session")
def patched_outcomes():
    """Every registered scenario, run with the patches: `{name: Outcome}`."""
    return run_scenarios(list(SCENARIOS), patched=True)
