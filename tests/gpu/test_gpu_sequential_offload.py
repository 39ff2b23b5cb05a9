"""`enable_sequential_cpu_offload()` on CUDA with bitsandbytes text encoder and unet (quantized by transformers and by
diffusers' own quantizer, which needs a GPU): three passes, `save_pretrained` while offloaded and a reload, a LoRA
loaded while offloaded, then `enable_model_cpu_offload()`; with the default device and with `device="cuda"`.

First run on an H100 (torch 2.11.0+cu130, 2026-11-26, `bash tools/gpu_check.sh`): every comparison 0. Every comparison
is of outputs, GPU against GPU with the same weights: within the tolerance (diffusers_patched/selftest/judges.py),
cuBLAS choosing its kernels by alignment and workspace.
"""

import pytest

from diffusers_patched.selftest.gpu_scenarios import BNB_4BIT_KINDS, MODEL_OFFLOAD_AFTER_SEQUENTIAL_8BIT_ERROR
from tests.conftest import requires_cuda
from tests.support.assertions import META_COPY_ERROR, assert_close_to_reference, result_of


pytestmark = [pytest.mark.gpu, requires_cuda]
upstream = pytest.mark.upstream

RUNS_4BIT = [f"{kind} {device}" for kind in BNB_4BIT_KINDS for device in (None, "cuda")]
RUNS_8BIT = ["8bit None", "8bit cuda"]


def _assert_every_step_right(steps, model_offload=True):
    if model_offload:
        assert steps["failed_at"] is None, steps["error"]
    for step in ("offload", "lora"):
        # Where the user asked (the default accelerator or "cuda": GPU 0), also after the LoRA loader re-applied it.
        assert steps[step]["offload_device"] == "cuda:0", step
        assert steps[step]["hook_devices"] == ["cuda:0"], step
    for step in ("offload", "lora", "model_offload") if model_offload else ("offload", "lora"):
        assert_close_to_reference(steps[step]["text_encoder"], 3)
        assert_close_to_reference(steps[step]["unet"], 3)
    save = steps["save"]
    assert_close_to_reference(save["reloaded_text_encoder"] + save["reloaded_unet"], 2)
    assert_close_to_reference(save["still_offloaded"]["text_encoder"] + save["still_offloaded"]["unet"], 6)


@upstream
def test_gpu_sequential_offload_bnb_4bit_upstream(gpu_upstream_outcomes):
    # The hooks move each 4-bit weight to meta with its quantization statistics; the first pass cannot bring them back.
    runs = result_of(gpu_upstream_outcomes["gpu-sequential-offload-bnb-4bit"])["runs"]
    assert sorted(runs) == sorted(RUNS_4BIT)
    for run, steps in runs.items():
        assert steps["failed_at"] == "offload", (run, steps)
        assert steps["error"]["type"] == "NotImplementedError", (run, steps["error"])
        assert META_COPY_ERROR in steps["error"]["message"], (run, steps["error"])


def test_gpu_sequential_offload_bnb_4bit(gpu_patched_outcomes):
    runs = result_of(gpu_patched_outcomes["gpu-sequential-offload-bnb-4bit"])["runs"]
    assert sorted(runs) == sorted(RUNS_4BIT)
    for run, steps in runs.items():
        try:
            _assert_every_step_right(steps)
        except AssertionError as e:
            raise AssertionError(f"{run}: {e}") from e


@upstream
def test_gpu_sequential_offload_bnb_8bit_upstream(gpu_upstream_outcomes):
    # As read from accelerate 1.15 and confirmed on the H100: the passes run (its hooks give 8-bit weights their `SCB`
    # back from the weights map on CUDA); saving writes the meta placeholders of the offloaded weights.
    runs = result_of(gpu_upstream_outcomes["gpu-sequential-offload-bnb-8bit"])["runs"]
    assert sorted(runs) == sorted(RUNS_8BIT)
    for run, steps in runs.items():
        assert steps["failed_at"] == "save", (run, steps)
        assert META_COPY_ERROR in steps["error"]["message"], (run, steps["error"])


def test_gpu_sequential_offload_bnb_8bit(gpu_patched_outcomes):
    """Offload, save and LoRA as for 4-bit. Then `enable_model_cpu_offload()` fails as it does on upstream (found on the
    H100, on both sides, also straight after `enable_sequential_cpu_offload()`): not fixed by the series; asserted, so
    that the day it works this test says so."""
    runs = result_of(gpu_patched_outcomes["gpu-sequential-offload-bnb-8bit"])["runs"]
    assert sorted(runs) == sorted(RUNS_8BIT)
    for run, steps in runs.items():
        try:
            _assert_every_step_right(steps, model_offload=False)
            assert steps["failed_at"] == "model_offload", steps["failed_at"]
            assert MODEL_OFFLOAD_AFTER_SEQUENTIAL_8BIT_ERROR in steps["error"]["message"], steps["error"]
        except AssertionError as e:
            raise AssertionError(f"{run}: {e}") from e
