"""`make test-gpu`'s first step: a CUDA build of the pinned torch, and a CUDA device it can see.

The torch already installed is kept when it is a CUDA build (`torch.version.cuda` is set). Otherwise (this project
installs the CPU wheel, `+cpu`), the version constraints.txt pins is installed again from TORCH_CUDA_INDEX_URL: by
default PyPI, whose Linux x86_64 torch wheels are CUDA builds that pull their `nvidia-*` libraries; or PyTorch's own
index for one CUDA version, e.g. https://download.pytorch.org/whl/cu128. On a machine without a package registry,
TORCH_CUDA_WHEELS names a folder holding the torch wheel and its `nvidia-*` wheels (installed with `--no-index`).
On a machine that shows no NVIDIA GPU (no `nvidia-smi`, no /dev/nvidiactl) torch is left alone; either way the step
fails, saying why, unless torch ends up seeing a CUDA device.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import REPO_ROOT


DEFAULT_INDEX_URL = "https://pypi.org/simple"


def pinned_torch():
    """The torch requirement of constraints.txt, e.g. "torch==2.13.0"."""
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if re.match(r"torch\s*==", line):
            return line.split("#")[0].strip()
    raise SystemExit("constraints.txt pins no torch version (a line `torch==X.Y.Z`)")


def _torch_build():
    """(version, CUDA version or None, CUDA devices seen), from a fresh interpreter: torch may just have changed."""
    code = "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.device_count())"
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if process.returncode != 0:
        return None, None, 0
    version, cuda, devices = process.stdout.split()
    return version, None if cuda == "None" else cuda, int(devices)


def _nvidia_gpu_present():
    return shutil.which("nvidia-smi") is not None or Path("/dev/nvidiactl").exists()


def _install(requirement):
    wheels = os.environ.get("TORCH_CUDA_WHEELS")
    if wheels:
        source = ["--no-index", "--find-links", wheels]
    else:
        source = ["--index-url", os.environ.get("TORCH_CUDA_INDEX_URL", DEFAULT_INDEX_URL)]
    print(f"installing the CUDA build of {requirement} from {wheels or source[-1]}", flush=True)
    pip = [sys.executable, "-m", "pip", "install", *source, "-c", str(REPO_ROOT / "constraints.txt")]
    # torch alone first: the installed build stays if the download fails. Then its own dependencies (nvidia-*), which
    # pip adds to an installed requirement; the rest of the stack is left as it is.
    subprocess.run([*pip, "--force-reinstall", "--no-deps", requirement], check=True)
    subprocess.run([*pip, requirement], check=True)


def main():
    requirement = pinned_torch()
    version, cuda, _ = _torch_build()
    if cuda is None:
        if not _nvidia_gpu_present():
            raise SystemExit(
                f"torch {version} is not a CUDA build and this machine shows no NVIDIA GPU (no nvidia-smi, no "
                "/dev/nvidiactl): torch left as it is. `make test-gpu` needs a machine with an NVIDIA GPU and its driver"
            )
        print(f"torch {version} is not a CUDA build", flush=True)
        _install(requirement)
        version, cuda, _ = _torch_build()
        if cuda is None:
            raise SystemExit(f"the torch installed for {requirement} ({version}) is still not a CUDA build")
    version, cuda, devices = _torch_build()
    if devices == 0:
        raise SystemExit(
            f"torch {version} (CUDA {cuda}) sees no CUDA device: `make test-gpu` needs a machine with an NVIDIA GPU "
            "and its driver (check `nvidia-smi` and CUDA_VISIBLE_DEVICES)"
        )
    print(f"torch {version}, CUDA {cuda}, {devices} CUDA device(s)", flush=True)


if __name__ == "__main__":
    main()
