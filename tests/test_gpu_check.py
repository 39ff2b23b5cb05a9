"""`bash tools/gpu_check.sh --dry-run`, the GPU check's offline path, on a machine without a GPU.

What a lent GPU machine has (a Python with torch, transformers, accelerate, huggingface_hub, safetensors, peft and
pytest; no diffusers, bitsandbytes, gguf or Pillow) is made here in a fresh virtualenv that sees those packages and
their requirements, as installed for this suite with the CPU torch, and nothing else; the bundle is built for this
Python, and the check installs from it with no index and runs the selftest on the CPU.
"""

import importlib.metadata
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import REPO_ROOT
from tools import gpu_bundle


GPU_MACHINE_PACKAGES = ["torch", "transformers", "accelerate", "huggingface_hub", "safetensors", "peft", "pytest"]


def link_installed_distributions(names, directory):
    """Link the installed distributions `names` and what they require into `directory`: a site directory with only
    those (an install of torch from the index would be the same files, at a minute's cost)."""
    installed = {canonicalize_name(dist.metadata["Name"]): dist for dist in importlib.metadata.distributions()}
    pending, linked = [canonicalize_name(name) for name in names], set()
    while pending:
        name = pending.pop()
        if name in linked:
            continue
        linked.add(name)
        dist = installed[name]
        for requirement in map(Requirement, dist.requires or []):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(canonicalize_name(requirement.name))
        site = dist.locate_file("")
        for top_level in {file.parts[0] for file in dist.files if file.parts[0] not in ("..", "__pycache__")}:
            if not (directory / top_level).exists():
                (directory / top_level).symlink_to(site / top_level)


def test_dry_run_installs_offline_and_the_patches_hold(tmp_path):
    bundle = tmp_path / "gpu-bundle"
    gpu_bundle.build_bundle(bundle, f"{sys.version_info.major}.{sys.version_info.minor}")
    assert sum(path.stat().st_size for path in bundle.iterdir()) < 40 * 2**20

    env_dir = tmp_path / "gpu-machine"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # The packages below bring their own setuptools, which the venv's older one would shadow.
    subprocess.run([python, "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"], check=True)
    machine_site = tmp_path / "gpu-machine-packages"
    machine_site.mkdir()
    link_installed_distributions(GPU_MACHINE_PACKAGES, machine_site)
    env_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, text=True
    ).stdout.strip()
    Path(env_site, "gpu-machine-packages.pth").write_text(f"{machine_site}\n")
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
        if flow["patched"]["verdict"] == "not covered":
            # Flows of the optional backends (optimum-quanto, torchao), which the bundle does not bring.
            assert flow["patched"]["figure"].startswith("needs `pip install"), flow
            continue
        assert flow["patched"]["verdict"] == "right", flow
        assert flow["upstream"]["verdict"] in ("fails", "wrong"), flow
    assert (out / "install.log").exists() and (out / "environment.txt").exists()
