"""`bash tools/gpu_check.sh --dry-run`, the GPU check's offline path, on a machine without a GPU.

What a lent GPU machine has (a Python with torch, transformers, accelerate, huggingface_hub, safetensors, peft and
pytest; no diffusers, bitsandbytes, gguf or Pillow) is made here in a fresh virtualenv with the CPU torch; the bundle
is built for this Python, and the check installs from it with no index and runs the selftest on the CPU.
"""

import json
import os
import subprocess
import sys
import venv

from tests.conftest import REPO_ROOT
from tools import gpu_bundle


GPU_MACHINE_PACKAGES = ["torch", "transformers", "accelerate", "huggingface_hub", "safetensors", "peft", "pytest"]


def test_dry_run_installs_offline_and_the_patches_hold(tmp_path):
    bundle = tmp_path / "gpu-bundle"
    gpu_bundle.build_bundle(bundle, f"{sys.version_info.major}.{sys.version_info.minor}")
    assert sum(path.stat().st_size for path in bundle.iterdir()) < 40 * 2**20

    env_dir = tmp_path / "gpu-machine"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "-c", REPO_ROOT / "constraints.txt", *GPU_MACHINE_PACKAGES],
        check=True,
    )
    missing = subprocess.run(
        [python, "-c", "import importlib.util as u; print([n for n in ('diffusers', 'bitsandbytes', 'gguf', 'PIL') "
         "if u.find_spec(n)])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert missing.stdout.strip() == "[]", "the simulated GPU machine must lack what the bundle brings"

    out = tmp_path / "out"
    check = subprocess.run(
        ["bash", "tools/gpu_check.sh", "--dry-run"],
        cwd=REPO_ROOT,
        env={**os.environ, "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}", "PYTHON": str(python),
             "GPU_BUNDLE": str(bundle), "OUT": str(out), "PIP_NO_INDEX": "1", "VIRTUAL_ENV": str(env_dir)},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    print(check.stdout[-6000:], check.stderr[-3000:])
    assert check.returncode == 0, (check.stdout[-3000:], check.stderr[-3000:])
    assert "installed; the patched modules are served" in check.stdout
    report = json.loads((out / "selftest.json").read_text())
    assert report["ok"] and report["environment"]["activation"] == "active"
    for flow in report["flows"]:
        assert flow["patched"]["verdict"] == "right", flow
        assert flow["upstream"]["verdict"] in ("fails", "wrong"), flow
    assert (out / "install.log").exists() and (out / "environment.txt").exists()
