"""What the scenario tests assert with: the upstream errors users read, and checks on scenario outcomes."""

import copy

import torch


# What upstream raises when enable_sequential_cpu_offload(device="cpu") moves weights to "cpu:0"
# (sequential-offload-keeps-the-user-device).
CPU_DEVICE_ERROR = "new() received an invalid combination of arguments - got (Tensor, requires_grad=bool)"
CAST_ERROR = "You cannot cast a bitsandbytes model in a new `dtype`"
META_COPY_ERROR = "Cannot copy out of meta tensor; no data!"
META_ITEM_ERROR = "Tensor.item() cannot be called on meta tensors"


def result_of(outcome):
    """A copy of what the scenario returned: the outcomes are shared by the session (test_releases compares each
    release's with them), so a test that takes a result apart must not change them."""
    assert outcome.ok, outcome.error
    return copy.deepcopy(outcome.result)


def assert_raised(outcome, error_type, message):
    assert not outcome.ok, outcome.result
    assert outcome.error["type"] == error_type, outcome.error
    assert message in outcome.error["message"], outcome.error


def assert_all_zero(diffs, count):
    torch.testing.assert_close(diffs, [0.0] * count, rtol=0, atol=0)
