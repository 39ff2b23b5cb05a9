"""`from_pretrained` of checkpoints that lack weights."""

import logging

from ..judges import RIGHT, WRONG, close
from .common import diffusers_log_messages
from .registry import scenario
from .single_file import _judge_missing_keys_as_constructed


def _judge_from_pretrained_missing_keys(result):
    verdict = _judge_missing_keys_as_constructed(result)
    if verdict[0] != RIGHT:
        return verdict
    return close(
        [result["output_diff"]], what="output max abs diff to the checkpoint's weights plus constructor values"
    )


@scenario(
    "from-pretrained-missing-keys",
    patch="from-pretrained-materializes-missing-weights.patch",
    summary="Wan folder loaded with from_pretrained and a config that adds layers (#11279): keys missing",
    text=(
        "{meta_tensors} meta tensors left; {missing_keys_as_constructed}/{missing_keys} missing keys hold their "
        "constructor values ({missing_keys_zero} all zero); output max abs diff to the checkpoint's weights plus those "
        "values {output_diff}; warned: {warning}; strict=True: {strict_error}"
    ),
    judge=_judge_from_pretrained_missing_keys,
)
def from_pretrained_missing_keys(workdir):
    import torch
    from diffusers import WanTransformer3DModel

    from ..tiny_checkpoints import build_wan, constructor_valued, meta_tensors, wan_config, wan_inputs

    checkpoint_model = build_wan(wan_config("wan2.2-i2v"))
    checkpoint_model.save_pretrained(workdir / "wan22")
    added_layers = {"image_dim": 32, "added_kv_proj_dim": 64}

    try:
        WanTransformer3DModel.from_pretrained(workdir / "wan22", strict=True, **added_layers)
        strict_error = None
    except ValueError as e:
        strict_error = str(e)
    with diffusers_log_messages(logging.WARNING, "were not initialized") as warnings:
        model = WanTransformer3DModel.from_pretrained(workdir / "wan22", **added_layers)
    inputs = wan_inputs(wan_config("wan2.1-i2v"))
    with torch.no_grad():
        output = model(**inputs)[0]
    saved = checkpoint_model.state_dict()
    missing = sorted(set(model.state_dict()) - set(saved))
    # The reference: the saved weights, and the loaded model's values where the checkpoint has nothing (checked to be
    # the constructor's): everything else must have come from the checkpoint.
    reference = build_wan(wan_config("wan2.1-i2v"))
    reference.load_state_dict({**model.state_dict(), **saved})
    with torch.no_grad():
        output_diff = (output - reference(**inputs)[0]).abs().max().item()
    # Only the start of the messages: the keys come in set order, which differs from one interpreter to the next.
    return {
        "meta_tensors": len(meta_tensors(model)),
        "missing_keys": len(missing),
        "missing_keys_as_constructed": constructor_valued(
            lambda: WanTransformer3DModel(**wan_config("wan2.1-i2v")), model, missing
        ),
        "missing_keys_zero": sum(bool((model.get_parameter(name) == 0).all()) for name in missing),
        "output_diff": output_diff,
        "warnings": len(warnings),
        "warning": warnings[0].split(" keys: ")[0] + " keys" if warnings else None,
        "constructor_values_said": any("hold the values the model's constructor gives them" in w for w in warnings),
        "strict_error": strict_error and strict_error.split(": \n")[0],
    }


def save_ltx_repos_with_and_without_multiplier(workdir):
    """The tiny LTX pipeline saved complete, and as LTX-Video 0.9.5's VAE checkpoint has it: timestep conditioning on,
    its 1000.0 multiplier not saved."""
    import shutil

    from safetensors.torch import load_file, save_file

    from ..tiny_pipelines import save_tiny_ltx_pipeline

    complete = save_tiny_ltx_pipeline(workdir / "complete")
    without_multiplier = shutil.copytree(complete, workdir / "without_multiplier")
    path = without_multiplier / "vae" / "diffusion_pytorch_model.safetensors"
    state_dict = load_file(path)
    del state_dict["decoder.timestep_scale_multiplier"]
    save_file(state_dict, path)
    return complete, without_multiplier


def _judge_ltx_video_vae_without_timestep_scale_multiplier(result):
    if result["multiplier"] != 1000.0:
        return WRONG, f"multiplier {result['multiplier']} where the constructor gives 1000.0"
    return close([result["video_diff"]], what="video max abs diff to the complete repo's")


@scenario(
    "ltx-video-vae-without-timestep-scale-multiplier",
    patch="from-pretrained-materializes-missing-weights.patch",
    summary="LTX-Video pipeline whose VAE checkpoint lacks the constant decoder.timestep_scale_multiplier (#10968)",
    text="multiplier loaded as {multiplier}; video max abs diff to the complete repo's {video_diff}",
    judge=_judge_ltx_video_vae_without_timestep_scale_multiplier,
)
def ltx_video_vae_without_timestep_scale_multiplier(workdir):
    from ..tiny_pipelines import tiny_ltx_video

    complete, without_multiplier = save_ltx_repos_with_and_without_multiplier(workdir)
    _, expected = tiny_ltx_video(complete)
    pipe, video = tiny_ltx_video(without_multiplier)
    return {
        "multiplier": pipe.vae.decoder.timestep_scale_multiplier.item(),
        "video_diff": (video - expected).abs().max().item(),
    }
