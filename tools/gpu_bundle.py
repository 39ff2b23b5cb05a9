"""`make gpu-bundle`: the wheels a lent GPU machine lacks, for `bash tools/gpu_check.sh` to install there offline.

Those machines have Python 3.12 with a CUDA 13 build of torch, transformers, accelerate, huggingface_hub,
safetensors, peft, pytest and pytest-timeout; no diffusers, bitsandbytes or gguf, and no network. What one command
carries, the tree included, is at most 64 MiB. The bundle holds the primary release's diffusers-patched wheel, the
pinned diffusers, gguf and bitsandbytes wheels (constraints.txt), and the dependencies of those that such a machine
may lack (Pillow, importlib_metadata, requests, ...), for the target's Python. bitsandbytes ships a library per CUDA, ROCm and
XPU version (43 MB); the bundle's copy keeps its CPU and CUDA 13 libraries. `MANIFEST` lists every file with its
sha256; gpu_check.sh verifies it before installing.
"""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name

from . import ToolError, patches, upstream, vendoring, wheels


ROOT = Path(__file__).resolve().parents[1]
# diffusers and gguf come with the dependencies pip resolves for them; bitsandbytes alone (its own are torch, numpy and
# packaging).
WITH_DEPENDENCIES = ("diffusers", "gguf")
# What transformers and huggingface_hub require, so a machine with them has it; the rest (small) travels.
ALREADY_THERE = {
    "filelock", "fsspec", "hf-xet", "huggingface-hub", "numpy", "packaging", "pyyaml", "regex", "safetensors",
    "tqdm", "typing-extensions",
}  # fmt: skip
BNB_LIBRARIES_KEPT = re.compile(r"bitsandbytes/libbitsandbytes_(cpu|cuda13\d)\.so")
# The tags pip may pick for the target: the pure-Python wheels, Pillow's manylinux_2_28 and bitsandbytes' 2_24.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_24_x86_64", "manylinux2014_x86_64")


def download(requirements, dest, python_version, dependencies):
    platforms = [argument for platform in PLATFORMS for argument in ("--platform", platform)]
    result = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", *([] if dependencies else ["--no-deps"]),
         "--only-binary", ":all:", "--python-version", python_version, "--implementation", "cp", *platforms,
         "--dest", str(dest), *requirements],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise ToolError(f"pip could not download {', '.join(requirements)}:\n{result.stderr[-3000:]}")


def reduce_bitsandbytes(wheel):
    """Rewrite bitsandbytes' wheel in place without the libraries the target cannot load; its RECORD follows."""
    reduced = wheel.with_suffix(".reduced")
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(reduced, "w", zipfile.ZIP_DEFLATED) as target:
        dropped = {
            info.filename
            for info in source.infolist()
            if info.filename.startswith("bitsandbytes/libbitsandbytes_")
            and not BNB_LIBRARIES_KEPT.fullmatch(info.filename)
        }
        for info in source.infolist():
            if info.filename in dropped:
                continue
            data = source.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if line.split(",", 1)[0] not in dropped).encode()
            target.writestr(info, data)
    reduced.replace(wheel)
    return sorted(dropped)


def build_bundle(out, python_version):
    """`out`: the primary's diffusers-patched wheel, the other wheels and `MANIFEST`; returns the manifest's text."""
    project = patches.Project(ROOT)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    # The committed vendored tree is the primary's (`make check-patches` proves it is upstream + series).
    wheels.build_wheel(project, project.read_base()["version"], out, vendor=vendoring.current_vendor(project))
    pins = wheels.read_pins(ROOT / "constraints.txt")
    with tempfile.TemporaryDirectory() as tmp:
        download([f"{name}=={pins[name]}" for name in WITH_DEPENDENCIES], tmp, python_version, dependencies=True)
        download([f"bitsandbytes=={pins['bitsandbytes']}"], tmp, python_version, dependencies=False)
        for wheel in Path(tmp).glob("*.whl"):
            if canonicalize_name(wheel.name.split("-")[0]) not in ALREADY_THERE:
                shutil.move(wheel, out / wheel.name)
    (bnb,) = out.glob("bitsandbytes-*.whl")
    reduce_bitsandbytes(bnb)
    manifest = "".join(f"{upstream.sha256_of(path)}  {path.name}\n" for path in sorted(out.glob("*.whl")))
    (out / "MANIFEST").write_text(manifest)
    return manifest


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "gpu-bundle")
    parser.add_argument("--python-version", default="3.12", help="the target's Python (default: the GPU machines')")
    args = parser.parse_args(argv)
    manifest = build_bundle(args.out, args.python_version)
    total = sum(path.stat().st_size for path in args.out.iterdir())
    print(manifest, end="")
    print(f"{args.out}: {len(manifest.splitlines())} wheels, {total / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
