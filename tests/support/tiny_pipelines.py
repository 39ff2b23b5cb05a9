"""Tiny Stable Diffusion pipelines built locally, and helpers to plan and place them with a device map.

Dimensions are multiples of 64: bitsandbytes' CPU 4-bit path needs that. diffusers is imported lazily, so this can be
imported before it is decided whether the patches are on.
"""

from contextlib import contextmanager
from pathlib import Path
from unittest import mock


def tiny_text_encoder(hidden_size=64, intermediate_size=128, num_hidden_layers=2, vocab_size=1000, seed=0):
    """A CLIP text encoder; wider ones are dominated by their Linear weights, so 4-bit quantization matters."""
    import torch
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(seed)
    config = CLIPTextConfig(
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_attention_heads=4,
        num_hidden_layers=num_hidden_layers,
        vocab_size=vocab_size,
        projection_dim=64,
        bos_token_id=0,
        eos_token_id=2,
        pad_token_id=1,
    )
    return CLIPTextModel(config)


def tiny_unet(block_out_channels=(32, 64), cross_attention_dim=256):
    import torch
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    return UNet2DConditionModel(
        block_out_channels=block_out_channels,
        layers_per_block=1,
        sample_size=16,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=cross_attention_dim,
        norm_num_groups=32,
    )


def tiny_vae():
    import torch
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    return AutoencoderKL(
        block_out_channels=[32],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D"],
        latent_channels=4,
        norm_num_groups=32,
    )


def save_tiny_sd_pipeline(path, unet_channels=(32, 64), text_encoder_kwargs=None):
    """A StableDiffusionPipeline of tiny random components, saved with `tokenizer=None`."""
    from diffusers import DDIMScheduler, StableDiffusionPipeline

    text_encoder = tiny_text_encoder(**(text_encoder_kwargs or {}))
    pipe = StableDiffusionPipeline(
        unet=tiny_unet(unet_channels, cross_attention_dim=text_encoder.config.hidden_size),
        vae=tiny_vae(),
        scheduler=DDIMScheduler(),
        text_encoder=text_encoder,
        tokenizer=None,
        safety_checker=None,
        feature_extractor=None,
        image_encoder=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(path)
    return Path(path)


def load_tiny_sd_pipeline(path, **kwargs):
    from diffusers import StableDiffusionPipeline

    return StableDiffusionPipeline.from_pretrained(
        path, tokenizer=None, safety_checker=None, feature_extractor=None, image_encoder=None, **kwargs
    )


def ltx_video_vae(block_out_channels, layers_per_block, **config):
    """An LTX-Video VAE with timestep conditioning (LTX-Video 0.9.5 and later: the decoder's constant
    `timestep_scale_multiplier`), the same blocks in encoder and decoder, the decoder not causal."""
    from diffusers import AutoencoderKLLTXVideo

    return AutoencoderKLLTXVideo(
        block_out_channels=block_out_channels,
        decoder_block_out_channels=block_out_channels,
        layers_per_block=(layers_per_block,) * 5,
        decoder_layers_per_block=(layers_per_block,) * 5,
        decoder_inject_noise=(False,) * 5,
        upsample_residual=(False,) * 4,
        upsample_factor=(1,) * 4,
        timestep_conditioning=True,
        decoder_causal=False,
        **config,
    )


def save_tiny_ltx_pipeline(path):
    """An LTXPipeline of tiny random components whose VAE has timestep conditioning (LTX-Video 0.9.5 and later), saved
    without text encoder and tokenizer: it runs on `prompt_embeds`."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler, LTXPipeline, LTXVideoTransformer3DModel

    torch.manual_seed(0)
    transformer = LTXVideoTransformer3DModel(
        in_channels=8,
        out_channels=8,
        patch_size=1,
        patch_size_t=1,
        num_attention_heads=4,
        attention_head_dim=8,
        cross_attention_dim=32,
        num_layers=1,
        caption_channels=32,
    )
    vae = ltx_video_vae(
        (8, 8, 8, 8),
        layers_per_block=1,
        latent_channels=8,
        spatio_temporal_scaling=(True, True, False, False),
        decoder_spatio_temporal_scaling=(True, True, False, False),
    )
    with torch.no_grad():
        for param in vae.parameters():
            param.add_(torch.randn_like(param) * 0.05)
        vae.decoder.timestep_scale_multiplier.fill_(1000.0)
    LTXPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=vae,
        text_encoder=None,
        tokenizer=None,
        transformer=transformer,
    ).save_pretrained(path)
    return Path(path)


def tiny_ltx_video(path):
    """The video of the pipeline in `path`, decoded at timestep 0.05 with noise scale 0.025 as LTX-Video's docs do."""
    import torch
    from diffusers import LTXPipeline

    pipe = LTXPipeline.from_pretrained(path, text_encoder=None, tokenizer=None)
    pipe.to("cpu")
    prompt_embeds = torch.randn(1, 4, 32, generator=torch.Generator().manual_seed(0))
    return pipe, pipe(
        prompt_embeds=prompt_embeds,
        prompt_attention_mask=torch.ones(1, 4, dtype=torch.long),
        guidance_scale=1.0,
        height=32,
        width=32,
        num_frames=9,
        num_inference_steps=2,
        decode_timestep=0.05,
        decode_noise_scale=0.025,
        generator=torch.Generator().manual_seed(0),
        output_type="pt",
    ).frames


def bnb_text_encoder_config(kind="nf4", double_quant=False, components=("text_encoder",), **extra):
    """PipelineQuantizationConfig quantizing the (transformers) text encoder: "nf4", "fp4" or "8bit".

    `components=("text_encoder", "unet")` also quantizes the unet, with diffusers' own quantizer: that needs a GPU.
    """
    from diffusers.quantizers import PipelineQuantizationConfig

    if kind == "8bit":
        return PipelineQuantizationConfig(
            quant_backend="bitsandbytes_8bit",
            quant_kwargs={"load_in_8bit": True, **extra},
            components_to_quantize=list(components),
        )
    return PipelineQuantizationConfig(
        quant_backend="bitsandbytes_4bit",
        quant_kwargs={
            "load_in_4bit": True,
            "bnb_4bit_quant_type": kind,
            "bnb_4bit_use_double_quant": double_quant,
            **extra,
        },
        components_to_quantize=list(components),
    )


def plan_with_budget(path, gpu_budget, cpu_budget="1GB", quantization_config=None, **kwargs):
    """The plan `from_pretrained(device_map="balanced")` computes for `max_memory={0: gpu, "cpu": cpu}`.

    On a CPU-only machine loading then fails (GPU 0 does not exist); we stop right after planning by wrapping the
    planner, so no weight is loaded. Returns the plan, or raises what planning raised.
    """
    from diffusers.pipelines import pipeline_utils

    captured = {}
    real = pipeline_utils._get_final_device_map

    class _Planned(Exception):
        pass

    def spy(*args, **kw):
        captured["plan"] = real(*args, **kw)
        raise _Planned

    with mock.patch.object(pipeline_utils, "_get_final_device_map", spy):
        try:
            load_tiny_sd_pipeline(
                path,
                device_map="balanced",
                max_memory={0: gpu_budget, "cpu": cpu_budget},
                quantization_config=quantization_config,
                **kwargs,
            )
        except _Planned:
            pass
    return captured["plan"]


def load_with_plan(path, plan, quantization_config=None, **kwargs):
    """Load the pipeline as `from_pretrained(device_map="balanced")` would with `plan` as its device map.

    On a CPU-only machine, call it with the part of a real plan that can run here (e.g. {"text_encoder": "cpu"}):
    `load_sub_model` then places every component as the patched (or upstream) code does.
    """
    from diffusers.pipelines import pipeline_utils

    with mock.patch.object(pipeline_utils, "_get_final_device_map", lambda *args, **kw: dict(plan)):
        return load_tiny_sd_pipeline(path, device_map="balanced", quantization_config=quantization_config, **kwargs)


def loaded_size(model):
    """Bytes of the parameters and buffers of `model`, with the quantization statistics bitsandbytes keeps."""
    tensors = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        tensors[id(tensor)] = tensor
        quant_state = getattr(tensor, "quant_state", None)
        if quant_state is not None:
            extra = [quant_state.absmax, quant_state.code]
            if quant_state.nested:
                extra += [quant_state.offset, quant_state.state2.absmax, quant_state.state2.code]
            tensors.update({id(t): t for t in extra})
        if getattr(tensor, "SCB", None) is not None:
            tensors[id(tensor.SCB)] = tensor.SCB
    return sum(t.numel() * t.element_size() for t in tensors.values())


@contextmanager
def recording_weight_reads():
    """The paths of the safetensors files read inside the block (planning must not read any weight)."""
    import safetensors
    import safetensors.torch

    reads = []
    real_safe_open, real_load_file = safetensors.safe_open, safetensors.torch.load_file

    def safe_open(filename, *args, **kwargs):
        reads.append(str(filename))
        return real_safe_open(filename, *args, **kwargs)

    def load_file(filename, *args, **kwargs):
        reads.append(str(filename))
        return real_load_file(filename, *args, **kwargs)

    with (
        mock.patch.object(safetensors, "safe_open", safe_open),
        mock.patch.object(safetensors.torch, "load_file", load_file),
    ):
        yield reads


def fixed_text_input(pipe_device="cpu", batch=1, length=16, seed=0):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, 1000, (batch, length), generator=generator).to(pipe_device)
