"""`python -m diffusers_patched selftest`'s refusals: nothing to test is not a pass. Its flows themselves run in
tests/test_gpu_check.py (an installed wheel in a fresh virtualenv) and, as scenarios, in the demo tests."""

import os
import subprocess
import sys

import pytest
import torch


def selftest(*args, patched=True):
    env_switch = {"DIFFUSERS_PATCHED": "1" if patched else "0"}
    return subprocess.run(
        [sys.executable, "-m", "diffusers_patched", "selftest", *args],
        env={**os.environ, **env_switch},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_refuses_with_the_patches_off():
    result = selftest("--device", "cpu", patched=False)
    assert result.returncode == 2, result
    assert "the patches are not in effect (inactive: switched off by DIFFUSERS_PATCHED=0)" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="asserts the refusal on a machine without CUDA")
def test_refuses_cuda_without_a_gpu():
    result = selftest("--device", "cuda")
    assert result.returncode == 2, result
    assert "--device cuda, but torch" in result.stderr and "sees no CUDA device" in result.stderr


def test_status_names_it():
    status = subprocess.run(
        [sys.executable, "-m", "diffusers_patched", "status"], capture_output=True, text=True, check=True
    )
    assert "`python -m diffusers_patched selftest`" in status.stdout
