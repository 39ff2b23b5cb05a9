"""The judges (diffusers_patched/selftest/judges.py): outputs of computations within a stated tolerance, bit for bit
only where identity is the claim, and both shown to hold on any machine."""

import math

import pytest
import torch

from diffusers_patched.selftest.judges import RIGHT, TOLERANCE, WRONG, close, identical, within_tolerance
from diffusers_patched.selftest.nudged import NUDGED_SCENARIOS
from tests.support.assertions import META_COPY_ERROR, assert_clearly_wrong, assert_raised, result_of


def one_ulp_diff():
    """The max abs diff of tensors of order one that differ by one ulp in one element."""
    reference = torch.linspace(-1, 1, 11)
    nudged = reference.clone()
    nudged[3] = torch.nextafter(nudged[3], torch.tensor(math.inf))
    return (nudged - reference).abs().max().item()


def test_close_judges_float32_rounding_right_and_wrong_numbers_wrong():
    assert close([1e-7]) == (RIGHT, "max abs diff to the reference 1e-07 (tolerance 1e-05)")
    assert close([0.0, one_ulp_diff()])[0] == RIGHT
    assert close([1e-2]) == (WRONG, "max abs diff to the reference 0.01 (tolerance 1e-05)")
    assert close([1e-7, math.nan, 1e-7], what="video max abs diff") == (
        WRONG,
        "video max abs diff nan over 3 comparisons (tolerance 1e-05)",
    )
    assert close([])[0] == WRONG


def test_close_is_relative_to_outputs_larger_than_one():
    assert close([3e-5], scale=10.0) == (RIGHT, "max abs diff to the reference 3e-05 (tolerance 0.0001)")
    assert close([3e-5], scale=0.1)[0] == WRONG
    assert within_tolerance(TOLERANCE) and not within_tolerance(TOLERANCE * 1.01)
    assert not within_tolerance(math.nan)


def test_identical_takes_one_ulp_for_a_difference():
    assert identical([0.0, 0.0], what="statistics max abs diff") == (
        RIGHT,
        "statistics max abs diff 0 over 2 comparisons (bit for bit)",
    )
    diff = one_ulp_diff()
    assert 0 < diff < TOLERANCE
    assert identical([diff]) == (WRONG, f"max abs diff to the reference {diff:.2g} (bit for bit)")
    assert identical([math.nan])[0] == WRONG


GLM = "group-offload-glm-image to disk, nudged reference"
HUNYUAN = "group-offload-hunyuan-dit to disk, nudged reference"
LTX = "ltx-video-vae-without-timestep-scale-multiplier, nudged reference"


def run_nudged(runner, patched):
    return runner.run(list(NUDGED_SCENARIOS), patched=patched, module="diffusers_patched.selftest.nudged")


def test_right_results_read_right_against_a_reference_nudged_by_one_ulp(scenario_runner):
    outcomes = run_nudged(scenario_runner, patched=True)
    verdicts = {name: outcome.verdict(NUDGED_SCENARIOS[name]) for name, outcome in outcomes.items()}
    assert {name: verdict for name, verdict in verdicts.items() if verdict[0] != RIGHT} == {}
    # The nudge moves the outputs by float32 rounding, as another kernel path does: never 0, always within tolerance.
    diffs = [*result_of(outcomes[GLM])["diffs"], *result_of(outcomes[HUNYUAN])["diffs"]]
    diffs.append(result_of(outcomes[LTX])["video_diff"])
    assert all(0 < diff <= TOLERANCE for diff in diffs), diffs
    # What a load that zero-fills the missing multiplier computes still reads wrong, by MARGIN times the tolerance.
    assert_clearly_wrong([result_of(outcomes[LTX])["zero_multiplier_video_diff"]])


@pytest.mark.upstream
def test_wrong_results_read_wrong_against_a_reference_nudged_by_one_ulp(scenario_runner):
    outcomes = run_nudged(scenario_runner, patched=False)
    # Upstream's leaf groups write T5's tied embedding to disk after emptying it.
    assert outcomes[GLM].verdict(NUDGED_SCENARIOS[GLM])[0] == WRONG
    assert_clearly_wrong(result_of(outcomes[GLM])["diffs"])
    assert_raised(outcomes[HUNYUAN], "ValueError", "HunyuanDiT2DModel does not support group offloading.")
    assert_raised(outcomes[LTX], "NotImplementedError", META_COPY_ERROR)
