"""A fresh interpreter running a piece of code, with the patches on or off (tools/stacks.py, tools/carried_tests.py,
the tests)."""

import os
import subprocess
import sys
import textwrap


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
