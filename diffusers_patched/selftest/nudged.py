"""The tolerance at work on every machine: comparisons rerun against a reference whose weights were nudged by one ulp.

Where the BLAS takes the same path for an output and its reference, the two can be equal bit for bit; on another
machine (MKL choosing its kernels by alignment, cuBLAS by workspace) they differ in their last bits. Moving every weight
of the reference by one ulp (`tiny_pipelines.nudge_weights`) makes such a difference on every machine:
tests/test_judges.py shows that right results read right against it, and wrong results still wrong.
"""

import sys

from .judges import WRONG, close
from .scenarios.from_pretrained import save_ltx_repos_with_and_without_multiplier
from .scenarios.registry import _main, scenario
from .tiny_pipelines import offload_diff


NUDGED_SCENARIOS = {}


def _nudged_group_offload(pipeline, modes):
    def run(workdir):
        return {"diffs": [offload_diff(pipeline, mode, nudge_reference=True) for mode in modes]}

    return run


for _pipeline, _modes in [("glm-image", ("group-leaf",)), ("hunyuan-dit", ("group-leaf", "group-block"))]:
    scenario(
        f"group-offload-{_pipeline} to disk, nudged reference",
        patch=None,
        summary=f"{_pipeline} (tiny) group offloaded to disk ({', '.join(_modes)}) vs. the un-offloaded pipeline with "
        "its weights moved by one ulp",
        text="max abs diff to the nudged un-offloaded output per level {diffs}",
        judge=lambda result: close(result["diffs"], what="max abs diff to the nudged un-offloaded output"),
        registry=NUDGED_SCENARIOS,
    )(_nudged_group_offload(_pipeline, _modes))


def _judge_ltx_video_nudged(result):
    verdict, figure = close([result["video_diff"]], what="video max abs diff to the nudged complete repo's")
    if verdict == WRONG:
        return verdict, figure
    # The positive control: the constructor's 1000.0 zero-filled, as a load that fills missing weights with zeros
    # gives it, must still read wrong against the nudged reference.
    control, control_figure = close([result["zero_multiplier_video_diff"]], what="with the multiplier zero-filled")
    if control != WRONG:
        return WRONG, control_figure
    return verdict, f"{figure}; {control_figure}"


@scenario(
    "ltx-video-vae-without-timestep-scale-multiplier, nudged reference",
    patch=None,
    summary="the LTX-Video VAE checkpoint without its timestep_scale_multiplier vs. the complete repo with its weights "
    "moved by one ulp; and with the multiplier zero-filled",
    text="video max abs diff to the nudged complete repo's {video_diff}; with the multiplier zero-filled "
    "{zero_multiplier_video_diff}",
    judge=_judge_ltx_video_nudged,
    registry=NUDGED_SCENARIOS,
)
def ltx_video_nudged(workdir):
    import torch
    from diffusers import LTXPipeline

    from .tiny_pipelines import ltx_video, nudge_weights, tiny_ltx_video

    complete, without_multiplier = save_ltx_repos_with_and_without_multiplier(workdir)
    reference = LTXPipeline.from_pretrained(complete, text_encoder=None, tokenizer=None)
    nudge_weights(reference.transformer)
    nudge_weights(reference.vae)
    expected = ltx_video(reference)
    pipe, video = tiny_ltx_video(without_multiplier)
    with torch.no_grad():
        pipe.vae.decoder.timestep_scale_multiplier.zero_()
    return {
        "video_diff": (video - expected).abs().max().item(),
        "zero_multiplier_video_diff": (ltx_video(pipe) - expected).abs().max().item(),
    }


if __name__ == "__main__":
    _main(NUDGED_SCENARIOS, *sys.argv[1:])
