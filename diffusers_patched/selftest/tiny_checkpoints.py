"""Tiny models and single-file checkpoints (original key names; safetensors and GGUF) for the single-file scenarios.

Everything is local and small: a 2-layer Wan of width 64 builds and saves in well under a second on CPU. diffusers is
imported lazily, so this can be imported before it is decided whether the patches are on.
"""

import json
import os
import struct
from contextlib import contextmanager


# --------------------------------------------------------------------------------------------------------------
# Wan
# --------------------------------------------------------------------------------------------------------------

# Width 64 (2 heads x 32) so that every Linear input dimension is a multiple of the Q8_0 block size (32).
WAN_TINY = {
    "patch_size": [1, 2, 2],
    "num_attention_heads": 2,
    "attention_head_dim": 32,
    "in_channels": 4,
    "out_channels": 4,
    "text_dim": 32,
    "freq_dim": 256,
    "ffn_dim": 128,
    "num_layers": 2,
    "cross_attn_norm": True,
    "qk_norm": "rms_norm_across_heads",
    "eps": 1e-6,
    "image_dim": None,
    "added_kv_proj_dim": None,
    "rope_max_seq_len": 32,
}

WAN_VARIANTS = {
    # Wan2.1-T2V-like
    "t2v": {},
    # Wan2.1-I2V-like: CLIP image embedder + per-block add_k_proj/add_v_proj/norm_added_k
    "wan2.1-i2v": {"in_channels": 12, "image_dim": 32, "added_kv_proj_dim": 64},
    # Wan2.2-I2V-A14B-like: same input channels as 2.1-I2V, no image embedding at all
    "wan2.2-i2v": {"in_channels": 12},
    # Wan2.2-TI2V-5B-like: more latent channels in and out
    "wan2.2-ti2v": {"in_channels": 8, "out_channels": 8},
}


def wan_config(variant="t2v", **overrides):
    config = dict(WAN_TINY)
    config.update(WAN_VARIANTS[variant])
    config.update(overrides)
    return config


def _perturb_(model, seed, scale=0.05):
    """Make every parameter differ from its structural init (zero biases, unit norms), reproducibly."""
    import torch

    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _, param in sorted(model.named_parameters()):
            param.add_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * scale)
    return model


def build_wan(config, seed=0):
    import torch
    from diffusers import WanTransformer3DModel

    torch.manual_seed(seed)
    return _perturb_(WanTransformer3DModel(**config), seed).eval()


# diffusers name fragment -> original Wan name fragment, applied in this order. The inverse of
# `convert_wan_transformer_to_diffusers` for the plain (T2V / I2V) transformer; `wan_original_state_dict` checks
# every key round-trips through the real converter.
_WAN_TO_ORIGINAL = [
    ("condition_embedder.time_embedder.linear_1", "time_embedding.0"),
    ("condition_embedder.time_embedder.linear_2", "time_embedding.2"),
    ("condition_embedder.text_embedder.linear_1", "text_embedding.0"),
    ("condition_embedder.text_embedder.linear_2", "text_embedding.2"),
    ("condition_embedder.time_proj", "time_projection.1"),
    ("condition_embedder.image_embedder.norm1", "img_emb.proj.0"),
    ("condition_embedder.image_embedder.ff.net.0.proj", "img_emb.proj.1"),
    ("condition_embedder.image_embedder.ff.net.2", "img_emb.proj.3"),
    ("condition_embedder.image_embedder.norm2", "img_emb.proj.4"),
    ("condition_embedder.image_embedder.pos_embed", "img_emb.emb_pos"),
    ("attn1", "self_attn"),
    ("attn2", "cross_attn"),
    (".to_out.0.", ".o."),
    (".to_q.", ".q."),
    (".to_k.", ".k."),
    (".to_v.", ".v."),
    (".add_k_proj.", ".k_img."),
    (".add_v_proj.", ".v_img."),
    (".norm_added_k.", ".norm_k_img."),
    ("ffn.net.0.proj", "ffn.0"),
    ("ffn.net.2", "ffn.2"),
    ("proj_out", "head.head"),
]


def load_wan_single_file(path, config_dir, compute_dtype=None, **kwargs):
    """`WanTransformer3DModel.from_single_file` of a local file; a `.gguf` one loads quantized, computing in
    `compute_dtype` (float32 unless given)."""
    import torch
    from diffusers import GGUFQuantizationConfig, WanTransformer3DModel

    if str(path).endswith(".gguf"):
        kwargs["quantization_config"] = GGUFQuantizationConfig(compute_dtype=compute_dtype or torch.float32)
    return WanTransformer3DModel.from_single_file(str(path), config=str(config_dir), local_files_only=True, **kwargs)


def flux_transformer_pipeline(transformer):
    """A `FluxPipeline` of its transformer only (no tokenizers, text encoders or VAE): enough to load LoRAs and
    offload."""
    from diffusers import FlowMatchEulerDiscreteScheduler, FluxPipeline

    return FluxPipeline(
        scheduler=FlowMatchEulerDiscreteScheduler(),
        vae=None,
        text_encoder=None,
        tokenizer=None,
        text_encoder_2=None,
        tokenizer_2=None,
        transformer=transformer,
    )


def wan_transformer_pipeline(transformer, transformer_2=None):
    """A `WanPipeline` of its transformers only (no tokenizer, text encoder or VAE): enough to load and fuse LoRAs.
    With `transformer_2`, a Wan2.2-style pair of experts."""
    from diffusers import FlowMatchEulerDiscreteScheduler, WanPipeline

    experts = {"transformer_2": transformer_2, "boundary_ratio": 0.875} if transformer_2 is not None else {}
    return WanPipeline(
        tokenizer=None,
        text_encoder=None,
        vae=None,
        scheduler=FlowMatchEulerDiscreteScheduler(),
        transformer=transformer,
        **experts,
    )


def _wan_key_to_original(key):
    if key == "scale_shift_table":
        return "head.modulation"
    for old, new in _WAN_TO_ORIGINAL:
        key = key.replace(old, new)
    key = key.replace(".scale_shift_table", ".modulation")
    # diffusers norm2 (cross-attention norm) is the original norm3 and vice versa
    key = key.replace(".norm2.", ".norm__tmp.").replace(".norm3.", ".norm2.").replace(".norm__tmp.", ".norm3.")
    return key


def wan_original_state_dict(model_or_state_dict, prefix="model.diffusion_model.", check=True):
    """Original Wan / ComfyUI key names for a diffusers `WanTransformer3DModel` state dict (cloned tensors)."""
    state_dict = model_or_state_dict
    if hasattr(state_dict, "state_dict"):
        state_dict = state_dict.state_dict()
    original = {prefix + _wan_key_to_original(k): v.detach().clone().contiguous() for k, v in state_dict.items()}
    if check:
        from diffusers.loaders.single_file_utils import convert_wan_transformer_to_diffusers

        back = convert_wan_transformer_to_diffusers(dict(original))
        assert sorted(back) == sorted(state_dict), sorted(set(back) ^ set(state_dict))
    return original


def wan_lightx2v_lora(config, rank=4, seed=1):
    """A LoRA for every attention and feed-forward Linear of the transformer blocks, in the original Wan key names
    with `alpha` and `diff_b` (bias) entries, as lightx2v's distillation LoRAs are; diffusers converts them."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    inner_dim = config["num_attention_heads"] * config["attention_head_dim"]
    layers = {f"{attn}.{o}": (inner_dim, inner_dim) for attn in ("self_attn", "cross_attn") for o in "qkvo"}
    layers.update({"ffn.0": (inner_dim, config["ffn_dim"]), "ffn.2": (config["ffn_dim"], inner_dim)})
    lora = {}
    for block in range(config["num_layers"]):
        for layer, (in_features, out_features) in layers.items():
            prefix = f"diffusion_model.blocks.{block}.{layer}"
            lora[f"{prefix}.lora_down.weight"] = 0.1 * torch.randn(rank, in_features, generator=generator)
            lora[f"{prefix}.lora_up.weight"] = 0.1 * torch.randn(out_features, rank, generator=generator)
            lora[f"{prefix}.alpha"] = torch.tensor(2.0 * rank)
            lora[f"{prefix}.diff_b"] = 0.01 * torch.randn(out_features, generator=generator)
    return lora


def wan_inputs(config, seed=0, batch_size=1, num_frames=2, height=4, width=4, text_len=6):
    import torch

    generator = torch.Generator().manual_seed(seed)
    inputs = {
        "hidden_states": torch.randn(
            batch_size, config["in_channels"], num_frames, height, width, generator=generator
        ),
        "encoder_hidden_states": torch.randn(batch_size, text_len, config["text_dim"], generator=generator),
        "timestep": torch.tensor([500] * batch_size),
        "return_dict": False,
    }
    if config.get("image_dim"):
        inputs["encoder_hidden_states_image"] = torch.randn(batch_size, 5, config["image_dim"], generator=generator)
    return inputs


# Key names and shapes `infer_diffusers_model_type` reads for the real checkpoints (meta tensors: no memory).
# Sources: Wan-Video/Wan2.2 wan/configs/*.py (dim, in_dim), diffusers scripts/convert_wan_to_diffusers.py
# (diffusers configs), ComfyUI comfy/model_detection.py (i2v iff img_emb.proj.0.bias, in_dim from
# patch_embedding.weight.shape[1], out_dim from head.head.weight.shape[0] // 4).
WAN_REAL = {
    # name: (dim, in_dim, out_dim, image embedder, extra keys)
    "wan2.1-t2v-1.3B": (1536, 16, 16, False, ()),
    "wan2.1-t2v-14B": (5120, 16, 16, False, ()),
    "wan2.2-t2v-A14B": (5120, 16, 16, False, ()),
    "wan2.1-i2v-14B": (5120, 36, 16, True, ()),
    "wan2.1-flf2v-14B": (5120, 36, 16, True, ("img_emb.emb_pos",)),
    "wan2.2-i2v-A14B": (5120, 36, 16, False, ()),
    "wan2.2-ti2v-5B": (3072, 48, 48, False, ()),
    # variants detection must not guess (Wan2.1 Fun InP 1.3B, Fun Control 14B, a made-up width)
    "wan2.1-fun-inp-1.3B": (1536, 36, 16, True, ()),
    "wan2.1-fun-control-14B": (5120, 48, 16, True, ()),
    "unknown-width": (2048, 16, 16, False, ()),
}


def wan_detection_checkpoint(name, prefix="model.diffusion_model."):
    import torch

    dim, in_dim, out_dim, image, extra = WAN_REAL[name]
    shapes = {
        "patch_embedding.weight": (dim, in_dim, 1, 2, 2),
        "patch_embedding.bias": (dim,),
        "head.modulation": (1, 2, dim),
        "head.head.weight": (out_dim * 4, dim),
        "blocks.0.ffn.0.weight": (13824 if dim == 5120 else 8960, dim),
    }
    if image:
        shapes.update({"img_emb.proj.0.weight": (1280,), "img_emb.proj.0.bias": (1280,)})
        shapes["blocks.0.cross_attn.k_img.weight"] = (dim, dim)
    for key in extra:
        shapes[key] = (1, 514, 1280)
    return {prefix + k: torch.empty(s, device="meta") for k, s in shapes.items()}


# --------------------------------------------------------------------------------------------------------------
# LTX-2
# --------------------------------------------------------------------------------------------------------------

# Tiny LTX-2.3-like components (the sizes of upstream's tests/pipelines/ltx2). LTX-2.3 differs from 2.0 by gated
# attention, cross-attention AdaLN with the prompt AdaLN (original `prompt_adaln_single`), no caption projection,
# and a video VAE decoder with four up blocks (original `up_blocks.0` .. `up_blocks.8`).
LTX23_TRANSFORMER = {
    "in_channels": 4,
    "out_channels": 4,
    "num_attention_heads": 2,
    "attention_head_dim": 8,
    "cross_attention_dim": 16,
    "audio_in_channels": 4,
    "audio_out_channels": 4,
    "audio_num_attention_heads": 2,
    "audio_attention_head_dim": 4,
    "audio_cross_attention_dim": 8,
    "num_layers": 2,
    "caption_channels": 16,
    "rope_double_precision": False,
    "rope_type": "split",
    "gated_attn": True,
    "cross_attn_mod": True,
    "audio_gated_attn": True,
    "audio_cross_attn_mod": True,
    "use_prompt_embeddings": False,
    "perturbed_attn": True,
}
LTX23_VAE = {
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 4,
    "block_out_channels": (8, 8, 8, 8),
    "decoder_block_out_channels": (8, 8, 8, 8),
    "layers_per_block": (1, 1, 1, 1, 1),
    "decoder_layers_per_block": (1, 1, 1, 1, 1),
    "spatio_temporal_scaling": (True, True, True, True),
    "decoder_spatio_temporal_scaling": (True, True, True, True),
    "decoder_inject_noise": (False, False, False, False, False),
    "downsample_type": ("spatial", "temporal", "spatiotemporal", "spatiotemporal"),
    "upsample_type": ("spatiotemporal", "spatiotemporal", "temporal", "spatial"),
    "upsample_residual": (False, False, False, False),
    "upsample_factor": (1, 1, 1, 1),
    "timestep_conditioning": False,
    "patch_size": 1,
    "patch_size_t": 1,
    "encoder_causal": True,
    "decoder_causal": False,
}
LTX2_AUDIO_VAE = {
    "base_channels": 4,
    "output_channels": 2,
    "ch_mult": (1,),
    "num_res_blocks": 1,
    "attn_resolutions": None,
    "in_channels": 2,
    "resolution": 32,
    "latent_channels": 2,
    "norm_type": "pixel",
    "causality_axis": "height",
    "dropout": 0.0,
    "mid_block_add_attention": False,
    "sample_rate": 16000,
    "mel_hop_length": 160,
    "is_causal": True,
    "mel_bins": 8,
}

# diffusers -> original transformer key names (the inverse of `convert_ltx2_transformer_to_diffusers`). Original
# names: Lightricks' ltx-core, ltx_core/model/transformer/model.py (`patchify_proj`, `adaln_single`,
# `prompt_adaln_single`, `audio_prompt_adaln_single`, `av_ca_*_adaln_single`), transformer.py
# (`scale_shift_table_a2v_ca_*`, `prompt_scale_shift_table`), attention.py (`q_norm`, `k_norm`, `to_gate_logits`).
_LTX2_TRANSFORMER_TO_ORIGINAL = [
    (r"^proj_in\.", "patchify_proj."),
    (r"^audio_proj_in\.", "audio_patchify_proj."),
    (r"^time_embed\.", "adaln_single."),
    (r"^audio_time_embed\.", "audio_adaln_single."),
    (r"^prompt_adaln\.", "prompt_adaln_single."),
    (r"^audio_prompt_adaln\.", "audio_prompt_adaln_single."),
    (r"^av_cross_attn_video_scale_shift\.", "av_ca_video_scale_shift_adaln_single."),
    (r"^av_cross_attn_video_a2v_gate\.", "av_ca_a2v_gate_adaln_single."),
    (r"^av_cross_attn_audio_scale_shift\.", "av_ca_audio_scale_shift_adaln_single."),
    (r"^av_cross_attn_audio_v2a_gate\.", "av_ca_v2a_gate_adaln_single."),
    (r"\.video_a2v_cross_attn_scale_shift_table$", ".scale_shift_table_a2v_ca_video"),
    (r"\.audio_a2v_cross_attn_scale_shift_table$", ".scale_shift_table_a2v_ca_audio"),
    (r"\.norm_q\.", ".q_norm."),
    (r"\.norm_k\.", ".k_norm."),
]


def _ltx2_vae_key_to_original(key, num_blocks):
    """ltx-core's video VAE (ltx_core/model/video_vae): flat `down_blocks` / `up_blocks` lists alternating res blocks
    and resamplers, `res_blocks`, `per_channel_statistics`."""
    import re

    key = key.replace("resnets", "res_blocks").replace("latents_mean", "per_channel_statistics.mean-of-means")
    key = key.replace("latents_std", "per_channel_statistics.std-of-means")
    key = key.replace("encoder.mid_block.", f"encoder.down_blocks.#{2 * num_blocks}.")
    key = re.sub(
        r"encoder\.down_blocks\.(\d+)\.downsamplers\.0\.", lambda m: f"encoder.down_blocks.#{2 * int(m[1]) + 1}.", key
    )
    key = re.sub(r"encoder\.down_blocks\.(\d+)\.", lambda m: f"encoder.down_blocks.#{2 * int(m[1])}.", key)
    key = key.replace("decoder.mid_block.", "decoder.up_blocks.#0.")
    key = re.sub(
        r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.", lambda m: f"decoder.up_blocks.#{2 * int(m[1]) + 1}.", key
    )
    key = re.sub(r"decoder\.up_blocks\.(\d+)\.", lambda m: f"decoder.up_blocks.#{2 * int(m[1]) + 2}.", key)
    return key.replace("#", "")


def ltx2_original_checkpoint(transformer, vae, audio_vae):
    """One combined checkpoint with the original LTX-2 key names (cloned tensors): `model.diffusion_model.*`, `vae.*`,
    `audio_vae.*`, the prefixes ltx-core's loaders read (ltx_core/model/*/model_configurator.py)."""
    import re

    import torch

    checkpoint = {}
    for key, value in transformer.state_dict().items():
        for pattern, replacement in _LTX2_TRANSFORMER_TO_ORIGINAL:
            key = re.sub(pattern, replacement, key)
        checkpoint[f"model.diffusion_model.{key}"] = value
    num_blocks = len(vae.config.block_out_channels)
    checkpoint.update({f"vae.{_ltx2_vae_key_to_original(k, num_blocks)}": v for k, v in vae.state_dict().items()})
    # Statistics the original VAE carries and diffusers drops.
    checkpoint["vae.per_channel_statistics.channel"] = torch.arange(vae.config.latent_channels, dtype=torch.float32)
    checkpoint["vae.per_channel_statistics.mean-of-stds"] = torch.ones(vae.config.latent_channels)
    for key, value in audio_vae.state_dict().items():
        key = key.replace("latents_mean", "per_channel_statistics.mean-of-means")
        checkpoint[f"audio_vae.{key.replace('latents_std', 'per_channel_statistics.std-of-means')}"] = value
    return {key: value.detach().clone().contiguous() for key, value in checkpoint.items()}


def save_ltx23_pipeline(directory, seed=0):
    """A tiny LTX-2.3-like `LTX2Pipeline` saved in diffusers format (no text encoder, no tokenizer), every weight and
    statistic random, so that a weight left at its default cannot compare equal. Returns its components."""
    import torch
    from diffusers import (
        AutoencoderKLLTX2Audio,
        AutoencoderKLLTX2Video,
        FlowMatchEulerDiscreteScheduler,
        LTX2Pipeline,
        LTX2VideoTransformer3DModel,
    )
    from diffusers.pipelines.ltx2 import LTX2TextConnectors, LTX2Vocoder

    components = {
        "transformer": LTX2VideoTransformer3DModel(**LTX23_TRANSFORMER),
        "vae": AutoencoderKLLTX2Video(**LTX23_VAE),
        "audio_vae": AutoencoderKLLTX2Audio(**LTX2_AUDIO_VAE),
        "connectors": LTX2TextConnectors(
            caption_channels=16,
            text_proj_in_factor=2,
            video_connector_num_attention_heads=4,
            video_connector_attention_head_dim=4,
            video_connector_num_layers=1,
            video_connector_num_learnable_registers=None,
            audio_connector_num_attention_heads=4,
            audio_connector_attention_head_dim=2,
            audio_connector_num_layers=1,
            audio_connector_num_learnable_registers=None,
            connector_rope_base_seq_len=32,
            rope_type="split",
        ),
        "vocoder": LTX2Vocoder(
            in_channels=16,
            hidden_channels=32,
            out_channels=2,
            upsample_kernel_sizes=[4, 4],
            upsample_factors=[2, 2],
            resnet_kernel_sizes=[3],
            resnet_dilations=[[1, 3, 5]],
            output_sampling_rate=16000,
        ),
    }
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, model in sorted(components.items()):
            for _, tensor in sorted(model.state_dict().items()):
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.1)
            model.eval()
    pipe = LTX2Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(), text_encoder=None, tokenizer=None, **components)
    pipe.save_pretrained(directory)
    return components


def ltx23_transformer_inputs():
    import torch

    config = LTX23_TRANSFORMER
    generator = torch.Generator().manual_seed(0)
    return {
        "hidden_states": torch.randn(1, 2 * 4 * 4, config["in_channels"], generator=generator),
        "audio_hidden_states": torch.randn(1, 5, config["audio_in_channels"], generator=generator),
        "encoder_hidden_states": torch.randn(1, 8, 16, generator=generator),
        "audio_encoder_hidden_states": torch.randn(1, 8, 8, generator=generator),
        "timestep": torch.tensor([500.0]),
        "sigma": torch.tensor([0.5]),
        "encoder_attention_mask": torch.ones(1, 8, dtype=torch.bool),
        "num_frames": 2,
        "height": 4,
        "width": 4,
        "audio_num_frames": 5,
        "fps": 25.0,
        "return_dict": False,
    }


# --------------------------------------------------------------------------------------------------------------
# Flux
# --------------------------------------------------------------------------------------------------------------

# A tiny FLUX.1-dev (`guidance_in` in the file, 16 input channels: inferred as flux-dev), two double blocks and one
# single block: Flex.1-alpha's shape (8 double blocks where FLUX.1-dev has 19) scaled down.
FLEX_CONFIG = {
    "patch_size": 1,
    "in_channels": 16,
    "num_layers": 2,
    "num_single_layers": 1,
    "attention_head_dim": 16,
    "num_attention_heads": 2,
    "joint_attention_dim": 32,
    "pooled_projection_dim": 16,
    "guidance_embeds": True,
    "axes_dims_rope": [4, 6, 6],
}
# What the hub repo inferred for it would hold: the same sizes, deeper.
FLUX_DEV_CONFIG = {**FLEX_CONFIG, "num_layers": 3, "num_single_layers": 2}

# diffusers -> BFL key fragments: the inverse of `convert_flux_transformer_checkpoint_to_diffusers` but for the fused
# projections, which `flux_original_state_dict` concatenates.
_FLUX_TO_ORIGINAL = [
    ("time_text_embed.timestep_embedder.linear_1", "time_in.in_layer"),
    ("time_text_embed.timestep_embedder.linear_2", "time_in.out_layer"),
    ("time_text_embed.text_embedder.linear_1", "vector_in.in_layer"),
    ("time_text_embed.text_embedder.linear_2", "vector_in.out_layer"),
    ("time_text_embed.guidance_embedder.linear_1", "guidance_in.in_layer"),
    ("time_text_embed.guidance_embedder.linear_2", "guidance_in.out_layer"),
    ("context_embedder", "txt_in"),
    ("x_embedder", "img_in"),
    ("single_transformer_blocks.", "single_blocks."),
    ("transformer_blocks.", "double_blocks."),
    (".norm1.linear", ".img_mod.lin"),
    (".norm1_context.linear", ".txt_mod.lin"),
    (".attn.norm_q.weight", ".img_attn.norm.query_norm.scale"),
    (".attn.norm_k.weight", ".img_attn.norm.key_norm.scale"),
    (".attn.norm_added_q.weight", ".txt_attn.norm.query_norm.scale"),
    (".attn.norm_added_k.weight", ".txt_attn.norm.key_norm.scale"),
    (".attn.to_out.0", ".img_attn.proj"),
    (".attn.to_add_out", ".txt_attn.proj"),
    (".ff.net.0.proj", ".img_mlp.0"),
    (".ff.net.2", ".img_mlp.2"),
    (".ff_context.net.0.proj", ".txt_mlp.0"),
    (".ff_context.net.2", ".txt_mlp.2"),
    (".norm.linear", ".modulation.lin"),
    (".proj_out", ".linear2"),
    ("proj_out", "final_layer.linear"),
]


def build_flux(config, seed=0):
    import torch
    from diffusers import FluxTransformer2DModel

    torch.manual_seed(seed)
    return _perturb_(FluxTransformer2DModel(**config), seed).eval()


def flux_original_state_dict(model):
    """The BFL checkpoint layout of a diffusers FluxTransformer2DModel (fused qkv, swapped final modulation)."""
    import torch

    state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
    original = {}
    for i in range(len(model.transformer_blocks)):
        attn = f"transformer_blocks.{i}.attn."
        for name in ("weight", "bias"):
            original[f"double_blocks.{i}.img_attn.qkv.{name}"] = torch.cat(
                [state_dict.pop(f"{attn}to_{p}.{name}") for p in "qkv"]
            )
            original[f"double_blocks.{i}.txt_attn.qkv.{name}"] = torch.cat(
                [state_dict.pop(f"{attn}add_{p}_proj.{name}") for p in "qkv"]
            )
    for i in range(len(model.single_transformer_blocks)):
        block = f"single_transformer_blocks.{i}."
        for name in ("weight", "bias"):
            original[f"single_blocks.{i}.linear1.{name}"] = torch.cat(
                [state_dict.pop(f"{block}attn.to_{p}.{name}") for p in "qkv"]
                + [state_dict.pop(f"{block}proj_mlp.{name}")]
            )
    for name in ("weight", "bias"):
        shift, scale = state_dict.pop(f"norm_out.linear.{name}").chunk(2, dim=0)
        original[f"final_layer.adaLN_modulation.1.{name}"] = torch.cat([scale, shift], dim=0)
    for key, value in state_dict.items():
        if key.startswith("single_transformer_blocks."):
            key = key.replace(".attn.norm_q.weight", ".norm.query_norm.scale")
            key = key.replace(".attn.norm_k.weight", ".norm.key_norm.scale")
        for old, new in _FLUX_TO_ORIGINAL:
            key = key.replace(old, new)
        original[key] = value
    return {k: v.contiguous() for k, v in original.items()}


def flux_inputs(config, seed=0):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return {
        "hidden_states": torch.randn(1, 16, config["in_channels"], generator=generator),
        "encoder_hidden_states": torch.randn(1, 4, config["joint_attention_dim"], generator=generator),
        "pooled_projections": torch.randn(1, config["pooled_projection_dim"], generator=generator),
        "timestep": torch.tensor([0.5]),
        "img_ids": torch.zeros(16, 3),
        "txt_ids": torch.zeros(4, 3),
        "guidance": torch.tensor([3.5]),
        "return_dict": False,
    }


@contextmanager
def hub_cache_with_config(cache_dir, repo_id, class_name, config, subfolder="transformer"):
    """A Hugging Face cache holding only `repo_id`'s `subfolder/config.json`, in use while the context is open: what
    `from_single_file` without `config` reads (offline) for the model it infers."""
    from huggingface_hub import constants

    repo_dir = os.path.join(cache_dir, "models--" + repo_id.replace("/", "--"))
    commit = "0" * 40
    os.makedirs(os.path.join(repo_dir, "refs"), exist_ok=True)
    with open(os.path.join(repo_dir, "refs", "main"), "w") as f:
        f.write(commit)
    write_config_dir(class_name, config, os.path.join(repo_dir, "snapshots", commit, subfolder))
    previous = constants.HF_HUB_CACHE
    constants.HF_HUB_CACHE = cache_dir
    try:
        yield
    finally:
        constants.HF_HUB_CACHE = previous


# Writers
# --------------------------------------------------------------------------------------------------------------


def write_config_dir(class_name, config, directory):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({"_class_name": class_name, "_diffusers_version": "0.42.1", **config}, f, indent=2)
    return directory


def write_safetensors(state_dict, path):
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in state_dict.items()}, path)
    return path


def write_gguf(state_dict, path, arch="wan", quantize_min_params=1024):
    """city96/ComfyUI-GGUF style: prefix stripped; 1-D, small, `.modulation` and `time_embedding.` tensors F32
    (diffusers keeps the time embedder in fp32 anyway); other 2-D weights Q8_0.

    Q8_0 needs the last dimension to be a multiple of 32; anything else stays F32. 5-D tensors (Wan's
    patch_embedding) are written as they are: gguf-py 0.19's writer and reader handle them.
    """
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(path, arch=arch)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for key, tensor in state_dict.items():
        key = key.replace("model.diffusion_model.", "")
        data = tensor.detach().float().numpy()
        qtype = gguf.GGMLQuantizationType.F32
        if (
            data.ndim == 2
            and data.size > quantize_min_params
            and data.shape[-1] % 32 == 0
            and ".modulation" not in key
            and "time_embedding." not in key
        ):
            qtype = gguf.GGMLQuantizationType.Q8_0
        writer.add_tensor(key, gguf.quants.quantize(np.ascontiguousarray(data), qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def truncate_file(path, keep_fraction=0.5):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(int(size * keep_fraction))
    return path


def corrupt_gguf_header(path):
    """Keep the magic, scramble the version and the tensor / kv counts."""
    with open(path, "r+b") as f:
        f.seek(4)
        f.write(struct.pack("<I", 0xDEADBEEF))
        f.write(struct.pack("<Q", 2**62))
        f.write(struct.pack("<Q", 2**62))
    return path


def meta_tensors(model):
    return [n for n, t in list(model.named_parameters()) + list(model.named_buffers()) if t.device.type == "meta"]


def constructor_valued(build_model, model, names):
    """How many of the tensors `names` of `model` hold what the constructor (`build_model`) gives them: the value two
    constructions agree on (unit norm weights, zero norm biases, constants) exactly, or for weights drawn at random, a
    draw from the same distribution (not zero, within the constructions' range, of their spread)."""
    import torch

    torch.manual_seed(1)
    first = build_model().state_dict()
    torch.manual_seed(2)
    second = build_model().state_dict()
    loaded = model.state_dict()
    count = 0
    for name in names:
        value, a, b = loaded[name].float().cpu(), first[name].float(), second[name].float()
        if torch.equal(a, b):
            count += torch.equal(value, a)
            continue
        bound = torch.maximum(a.abs().max(), b.abs().max()).item()
        spread_ok = value.numel() < 256 or abs(value.std().item() - a.std().item()) <= 0.2 * a.std().item()
        count += bool(value.abs().max().item() <= 1.05 * bound and value.ne(0).any() and spread_ok)
    return count
