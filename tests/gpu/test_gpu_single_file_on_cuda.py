"""Single-file Wan checkpoints on CUDA: keys missing (safetensors, GGUF Q8_0), and `ACCELERATE_INIT_INCLUDE_BUFFERS=1`;
the model moved to the GPU and run there.

First run on an H100 (torch 2.11.0+cu130, 2026-11-26): as expected on both sides. Upstream fails while loading,
before any GPU work.
"""

import pytest

from tests.conftest import requires_cuda
from tests.support.assertions import META_COPY_ERROR, assert_close_to_reference, assert_raised, result_of


pytestmark = [pytest.mark.gpu, requires_cuda]
upstream = pytest.mark.upstream


@upstream
@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
def test_gpu_single_file_wan22_i2v_as_wan21_upstream(gpu_upstream_outcomes, fmt):
    outcome = gpu_upstream_outcomes[f"gpu-single-file-wan22-i2v-as-wan21-{fmt}"]
    assert_raised(outcome, "NotImplementedError", META_COPY_ERROR)


@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
def test_gpu_single_file_wan22_i2v_as_wan21(gpu_patched_outcomes, fmt):
    result = result_of(gpu_patched_outcomes[f"gpu-single-file-wan22-i2v-as-wan21-{fmt}"])
    assert result["meta_tensors"] == 0
    assert result["devices"] == ["cuda"]
    assert result["missing_keys_as_constructed"] == result["missing_keys"] > 0
    assert result["output_finite"]
    (warning,) = result["warnings"]
    assert f"{result['missing_keys']} keys" in warning


@upstream
def test_gpu_single_file_include_buffers_upstream(gpu_upstream_outcomes):
    assert_raised(gpu_upstream_outcomes["gpu-single-file-include-buffers"], "NotImplementedError", META_COPY_ERROR)


def test_gpu_single_file_include_buffers(gpu_patched_outcomes):
    result = result_of(gpu_patched_outcomes["gpu-single-file-include-buffers"])
    assert result["meta_tensors"] == 0 and result["rope_device"] == "cuda"
    # The RoPE buffers bit for bit (the same constructor made them); the output within the tolerance.
    assert result["rope_equal"]
    assert_close_to_reference([result["output_diff"]], 1)
