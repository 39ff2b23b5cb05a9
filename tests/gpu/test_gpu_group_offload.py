"""Group offloading onto CUDA from the CPU of a model that refused it (HunyuanDiT: its attention pooling uses its
projections' weights), at leaf and block level, with and without `use_stream=True`.

First run on an H100 (torch 2.11.0+cu130, 2026-11-26): upstream refuses, patched images equal the pipeline's on cuda
(0 in all four runs). Outputs: within the tolerance (diffusers_patched/selftest/judges.py).
"""

import pytest

from tests.conftest import requires_cuda
from tests.support.assertions import assert_close_to_reference, assert_raised, result_of


pytestmark = [pytest.mark.gpu, requires_cuda]

SCENARIO = "gpu-group-offload-hunyuan-dit"


@pytest.mark.upstream
def test_gpu_group_offload_hunyuan_dit_upstream(gpu_upstream_outcomes):
    assert_raised(gpu_upstream_outcomes[SCENARIO], "ValueError", "does not support group offloading")


def test_gpu_group_offload_hunyuan_dit(gpu_patched_outcomes):
    diffs = result_of(gpu_patched_outcomes[SCENARIO])["diffs"]
    assert sorted(diffs) == ["block_level", "block_level, use_stream", "leaf_level", "leaf_level, use_stream"]
    assert_close_to_reference(list(diffs.values()), 4)
