#!/usr/bin/env bash
# The GPU check, whole, in one command on a CUDA machine without network: `bash tools/gpu_check.sh`, run from the
# repository root with gpu-bundle/ (`make gpu-bundle`) beside it.
#
#   1. preflight: the interpreter that holds torch, the GPU and CUDA it sees, the versions (exit 3 without a GPU);
#   2. install from gpu-bundle/ into that interpreter, no index, no build (its sha256s checked first; exit 4 if the
#      install fails, 5 if the patched modules are not what a fresh interpreter then serves);
#   3. `python -m diffusers_patched selftest --device cuda --upstream`;
#   4. tests/gpu (both sides of every GPU flow), each test under a timeout, the whole under a hard one.
#
# Results go to $OUT when it is set (the device tool returns it), else build/gpu-check/: environment.txt,
# install.log, selftest.txt and selftest.json, selftest-stderr/ (each flow interpreter's stderr), pytest.log,
# junit.xml, gpu-scenarios-*.json and .stderr. Exit status: 0 when the selftest and the tests passed, else the first
# failing part's. Budget: 6 minutes in all, each part cut by `timeout` to fit.
#
# --dry-run: the same path on a machine without a GPU (CI, tests/test_gpu_check.py): preflight may find no GPU, the
# selftest runs on the CPU, tests/gpu is not run.
set -u
cd "$(dirname "$0")/.."

dry_run=0
[ "${1:-}" = "--dry-run" ] && dry_run=1
bundle=${GPU_BUNDLE:-gpu-bundle}
out=${OUT:-build/gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
status=0

# 1. Preflight.
python=""
for candidate in ${PYTHON:-} python3 python; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "import torch" 2>/dev/null; then
        python=$(command -v "$candidate")
        break
    fi
done
if [ -z "$python" ]; then
    echo "gpu_check: no Python on PATH imports torch (set PYTHON=/path/to/python)." | tee "$out/environment.txt" >&2
    exit 3
fi
{
    echo "python: $python ($("$python" -V 2>&1))"
    "$python" - <<'EOF'
import importlib.metadata as metadata

import torch

for name in ("torch", "transformers", "accelerate", "huggingface_hub", "safetensors", "peft", "pytest"):
    try:
        print(f"{name}: {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        print(f"{name}: not installed")
print(f"torch.version.cuda: {torch.version.cuda}; cuda available: {torch.cuda.is_available()}")
for index in range(torch.cuda.device_count()):
    properties = torch.cuda.get_device_properties(index)
    print(f"GPU {index}: {properties.name}, {properties.total_memory / 2**30:.1f} GiB, capability {properties.major}.{properties.minor}")
EOF
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
} >"$out/environment.txt" 2>&1
cat "$out/environment.txt"
if ! "$python" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    if [ "$dry_run" = 0 ]; then
        echo "gpu_check: torch sees no CUDA device (above); this check needs one. --dry-run runs it without." >&2
        exit 3
    fi
    echo "gpu_check: no CUDA device (dry run: the selftest runs on the CPU)"
fi

# 2. Offline install into that interpreter: its site-packages, so that the .pth file is processed.
if [ ! -f "$bundle/MANIFEST" ]; then
    echo "gpu_check: $bundle/MANIFEST is missing: run \`make gpu-bundle\` where there is network, and carry gpu-bundle/." >&2
    exit 4
fi
{
    (cd "$bundle" && sha256sum -c MANIFEST) &&
        PIP_BREAK_SYSTEM_PACKAGES=1 "$python" -m pip install --no-index --find-links "$bundle" --no-deps \
            "$bundle"/diffusers_patched-*.whl &&
        PIP_BREAK_SYSTEM_PACKAGES=1 "$python" -m pip install --no-index --find-links "$bundle" \
            $(cd "$bundle" && ls diffusers-*.whl gguf-*.whl bitsandbytes-*.whl | sed 's/^\([^-]*\)-\([^-]*\)-.*/\1==\2/')
} >"$out/install.log" 2>&1
if [ $? != 0 ]; then
    tail -20 "$out/install.log" >&2
    echo "gpu_check: the offline install failed ($out/install.log)." >&2
    exit 4
fi
# A fresh interpreter, away from the checkout, must serve the vendored modules: the proof that the .pth works.
(cd / && "$python" -c "
import diffusers.pipelines.pipeline_utils as module, sys
sys.exit(0 if '/diffusers_patched/_vendor/' in module.__file__ else 'diffusers.pipelines.pipeline_utils is ' + module.__file__)
") >>"$out/install.log" 2>&1 || {
    tail -5 "$out/install.log" >&2
    echo "gpu_check: installed, but the patches are not active in a fresh interpreter ($out/install.log)." >&2
    exit 5
}
echo "installed; the patched modules are served"

# 3. The selftest, both sides.
device=cuda
[ "$dry_run" = 1 ] && device=cpu
(cd / && timeout 120 "$python" -m diffusers_patched selftest --device "$device" --upstream \
    --json "$out/selftest.json" --log-dir "$out/selftest-stderr") 2>&1 | tee "$out/selftest.txt"
selftest_status=${PIPESTATUS[0]}
[ "$selftest_status" != 0 ] && status=$selftest_status

# 4. tests/gpu.
if [ "$dry_run" = 0 ]; then
    per_test=()
    "$python" -c "import pytest_timeout" 2>/dev/null && per_test=(--timeout 150)
    timeout 200 "$python" -m pytest -p no:cacheprovider -rs -v "${per_test[@]}" --junitxml "$out/junit.xml" tests/gpu \
        >"$out/pytest.log" 2>&1
    pytest_status=$?
    tail -40 "$out/pytest.log"
    cp -r build/gpu-scenarios-* "$out/" 2>/dev/null
    [ "$status" = 0 ] && status=$pytest_status
fi
echo "gpu_check: exit status $status; results in $out"
exit "$status"
