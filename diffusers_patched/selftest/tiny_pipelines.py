"""Tiny Stable Diffusion pipelines built locally, and helpers to plan and place them with a device map.

Dimensions are multiples of 64: bitsandbytes' CPU 4-bit path needs that. diffusers is imported lazily, so this can be
imported before it is decided whether the patches are on.
"""

import functools
import json
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
    """The pipeline in `path` and its video (`ltx_video`)."""
    from diffusers import LTXPipeline

    pipe = LTXPipeline.from_pretrained(path, text_encoder=None, tokenizer=None)
    pipe.to("cpu")
    return pipe, ltx_video(pipe)


def ltx_video(pipe):
    """The tiny LTX pipeline's video, decoded at timestep 0.05 with noise scale 0.025 as LTX-Video's docs do."""
    import torch

    prompt_embeds = torch.randn(1, 4, 32, generator=torch.Generator().manual_seed(0))
    return pipe(
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


def planned_sizes(load, *args, **kwargs):
    """The size `from_pretrained(device_map="balanced")` plans for each component, in bytes: `load(*args, **kwargs)` runs
    until the planner has sized them (no weight is loaded)."""
    from diffusers.pipelines import pipeline_loading_utils

    captured = {}

    class _Sized(Exception):
        pass

    def spy(module_sizes, *_args, **_kwargs):
        captured.update(module_sizes)
        raise _Sized

    with mock.patch.object(pipeline_loading_utils, "_assign_components_to_devices", spy):
        try:
            load(*args, device_map="balanced", max_memory={0: "1GB", "cpu": "1GB"}, **kwargs)
        except _Sized:
            pass
    return captured


def _stored_tensors(tensor):
    if not hasattr(tensor, "__tensor_flatten__"):
        return [tensor]
    return [stored for name in tensor.__tensor_flatten__()[0] for stored in _stored_tensors(getattr(tensor, name))]


def loaded_size(model):
    """Bytes of the parameters and buffers of `model`, with the quantization statistics bitsandbytes keeps and the
    inner tensors (data, scales, zero points) a quanto or torchao weight is stored in."""
    tensors = {}
    for tensor in [*model.parameters(), *model.buffers()]:
        tensors.update({id(t): t for t in _stored_tensors(tensor)})
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


# Pipelines whose offload tests upstream skips, of tiny random components, each with the inputs of one call that
# skips their text encoders (prompt embeddings given). Each returns (pipeline, run): `run(pipeline)` is its output.


def tiny_hunyuan_dit_pipeline(num_layers=2, num_attention_heads=3, attention_head_dim=8):
    """HunyuanDiT: its transformer's attention pooling passes its projections' weights to
    `F.multi_head_attention_forward`; `HunyuanDiT2DModel` declares `_supports_group_offloading = False`. The bench
    builds larger ones."""
    import torch
    from diffusers import AutoencoderKL, DDPMScheduler, HunyuanDiT2DModel, HunyuanDiTPipeline

    torch.manual_seed(0)
    transformer = HunyuanDiT2DModel(
        sample_size=16,
        num_layers=num_layers,
        patch_size=2,
        attention_head_dim=attention_head_dim,
        num_attention_heads=num_attention_heads,
        in_channels=4,
        cross_attention_dim=32,
        cross_attention_dim_t5=32,
        pooled_projection_dim=16,
        hidden_size=num_attention_heads * attention_head_dim,
        activation_fn="gelu-approximate",
    )
    vae = AutoencoderKL(block_out_channels=(8,), norm_num_groups=8, latent_channels=4)
    pipe = HunyuanDiTPipeline(
        transformer=transformer.eval(),
        vae=vae.eval(),
        scheduler=DDPMScheduler(),
        text_encoder=None,
        tokenizer=None,
        text_encoder_2=None,
        tokenizer_2=None,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    generator = torch.Generator().manual_seed(0)
    inputs = {
        "prompt_embeds": torch.randn(1, 77, 32, generator=generator),
        "prompt_attention_mask": torch.ones(1, 77, dtype=torch.long),
        "prompt_embeds_2": torch.randn(1, 256, 32, generator=generator),
        "prompt_attention_mask_2": torch.ones(1, 256, dtype=torch.long),
        "guidance_scale": 1.0,
        "num_inference_steps": 2,
        "height": 16,
        "width": 16,
        "use_resolution_binning": False,
        "output_type": "pt",
    }
    return pipe, lambda pipe: pipe(**inputs, generator=torch.Generator().manual_seed(0)).images


def tiny_stable_audio_pipeline():
    """Stable Audio: its VAE (`AutoencoderOobleck`) has `weight_norm` convolutions and declares
    `_supports_group_offloading = False`. EDM DPM-Solver instead of the cosine one, which needs torchsde."""
    import torch
    from diffusers import AutoencoderOobleck, EDMDPMSolverMultistepScheduler, StableAudioDiTModel, StableAudioPipeline
    from diffusers.pipelines.stable_audio import StableAudioProjectionModel

    torch.manual_seed(0)
    transformer = StableAudioDiTModel(
        sample_size=4,
        in_channels=3,
        num_layers=2,
        attention_head_dim=4,
        num_key_value_attention_heads=2,
        out_channels=3,
        cross_attention_dim=4,
        time_proj_dim=8,
        global_states_input_dim=8,
        cross_attention_input_dim=4,
    )
    vae = AutoencoderOobleck(
        encoder_hidden_size=6,
        downsampling_ratios=[1, 2],
        decoder_channels=3,
        decoder_input_channels=3,
        audio_channels=2,
        channel_multiples=[2, 4],
        sampling_rate=4,
    )
    projection_model = StableAudioProjectionModel(text_encoder_dim=8, conditioning_dim=4, min_value=0, max_value=32)
    pipe = StableAudioPipeline(
        vae=vae.eval(),
        text_encoder=None,
        projection_model=projection_model.eval(),
        tokenizer=None,
        transformer=transformer.eval(),
        scheduler=EDMDPMSolverMultistepScheduler(solver_order=2, prediction_type="v_prediction", sigma_data=1.0),
    )
    prompt_embeds = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(0))
    inputs = {"prompt_embeds": prompt_embeds, "num_inference_steps": 2, "guidance_scale": 1.0, "output_type": "pt"}
    return pipe, lambda pipe: pipe(**inputs, generator=torch.Generator().manual_seed(0)).audios


def tiny_stable_audio_3_audio_to_audio_pipeline():
    """Stable Audio 3's audio-to-audio (it encodes its reference audio): its VAE (`AutoencoderSAME`) has `weight_norm`
    convolutions, encodes through its bottleneck's `encode` method, and declares `_supports_group_offloading = False`.
    """
    import torch
    from diffusers import AutoencoderSAME, FlowMatchEulerDiscreteScheduler, StableAudio3DiTModel
    from diffusers.pipelines.stable_audio_3 import StableAudio3AudioToAudioPipeline, StableAudio3DurationEmbedder

    torch.manual_seed(0)
    transformer = StableAudio3DiTModel(
        io_channels=8,
        patch_size=1,
        embed_dim=32,
        depth=2,
        num_heads=4,
        cond_token_dim=16,
        global_cond_dim=16,
        local_add_cond_dim=5,
        timestep_features_dim=16,
        ff_mult=2,
        num_memory_tokens=3,
        use_differential_attention=False,
    )
    vae = AutoencoderSAME(
        audio_channels=2,
        patch_size=2,
        encoder_channels=8,
        encoder_c_mults=(2,),
        encoder_strides=(2,),
        encoder_transformer_depths=(1,),
        latent_dim=8,
        use_differential_attention=False,
        dim_heads=4,
        ff_mult=2,
        sampling_rate=16,
    )
    pipe = StableAudio3AudioToAudioPipeline(
        vae=vae.eval(),
        text_encoder=None,
        tokenizer=None,
        duration_embedder=StableAudio3DurationEmbedder(output_dim=16, fourier_dim=16).eval(),
        transformer=transformer.eval(),
        scheduler=FlowMatchEulerDiscreteScheduler(num_train_timesteps=1, shift=1.0, stochastic_sampling=False),
    )
    generator = torch.Generator().manual_seed(0)
    inputs = {
        "prompt_embeds": torch.randn(1, 5, 16, generator=generator),
        "encoder_attention_mask": torch.ones(1, 5, dtype=torch.long),
        "audio": torch.randn(1, 2, 16, generator=generator),
        "duration": 1.0,
        "num_inference_steps": 2,
        "output_type": "pt",
    }
    return pipe, lambda pipe: pipe(**inputs, generator=torch.Generator().manual_seed(0)).audios


def tiny_framepack_image_encoder_pipeline():
    """HunyuanVideo Framepack's image encoding: a SigLIP vision model, whose pooling head calls an
    `nn.MultiheadAttention` (it reads `out_proj.weight` without calling `out_proj`). The other components are left out:
    `encode_image` uses only these two."""
    import torch
    from diffusers import HunyuanVideoFramepackPipeline
    from transformers import SiglipImageProcessor, SiglipVisionConfig, SiglipVisionModel

    torch.manual_seed(0)
    config = SiglipVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=8,
        patch_size=4,
        vision_use_head=True,
    )
    feature_extractor = SiglipImageProcessor(size={"height": 8, "width": 8})
    pipe = HunyuanVideoFramepackPipeline(
        text_encoder=None,
        tokenizer=None,
        transformer=None,
        vae=None,
        scheduler=None,
        text_encoder_2=None,
        tokenizer_2=None,
        image_encoder=SiglipVisionModel(config).eval(),
        feature_extractor=feature_extractor,
    )
    image = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(0)) * 2 - 1
    return pipe, lambda pipe: pipe.encode_image(image)


# The words of the tiny pipelines' prompts, for the tokenizers built here.
PROMPT_WORDS = [
    "a",
    "beautiful",
    "piano",
    "piece",
    "photo",
    "of",
    "cat",
    "verse",
    "soft",
    "notes",
    "in",
    "the",
    "morning",
]


def tiny_word_tokenizer(special_tokens, words=(), append_eos=None, **token_names):
    """A fast word-level tokenizer built here, standing in for a pipeline's tokenizer on the Hub: ids for
    `special_tokens`, then for `words` (any other word is `<unk>`, which `special_tokens` must hold); `append_eos` ends
    every sequence with that token, as T5's tokenizer does; `token_names` names the special tokens (`pad_token=...`)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate([*special_tokens, *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    tokenizer.add_special_tokens(list(special_tokens))
    if append_eos:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"$A {append_eos}", special_tokens=[(append_eos, vocab[append_eos])]
        )
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", **token_names)


def tiny_ace_step_pipeline():
    """ACE-Step with upstream's test configs (a tokenizer built here for its Qwen3 one on the Hub): the pipeline reads
    its condition encoder's `null_condition_emb` and `silence_latent` and decodes audio codes with its audio
    tokenizer's `quantizer.get_output_from_indices`, none of them in a `forward`; its VAE (`AutoencoderOobleck`) has
    `weight_norm` convolutions and declares `_supports_group_offloading = False`."""
    import torch
    from diffusers import AutoencoderOobleck, FlowMatchEulerDiscreteScheduler
    from diffusers.models.transformers.ace_step_transformer import AceStepTransformer1DModel
    from diffusers.pipelines.ace_step import (
        AceStepAudioTokenDetokenizer,
        AceStepAudioTokenizer,
        AceStepConditionEncoder,
        AceStepPipeline,
    )
    from transformers import Qwen3Config, Qwen3Model

    tokenizer = tiny_word_tokenizer(["<pad>", "<unk>"], PROMPT_WORDS, pad_token="<pad>")
    attention = {"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "rope_theta": 10000.0}
    attention["sliding_window"] = 16
    torch.manual_seed(0)
    transformer = AceStepTransformer1DModel(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        in_channels=24,
        audio_acoustic_hidden_dim=8,
        patch_size=2,
        **attention,
    )
    torch.manual_seed(0)
    text_encoder = Qwen3Model(
        Qwen3Config(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            vocab_size=len(tokenizer),
            max_position_embeddings=256,
        )
    )
    torch.manual_seed(0)
    condition_encoder = AceStepConditionEncoder(
        hidden_size=32,
        intermediate_size=64,
        text_hidden_dim=32,
        timbre_hidden_dim=8,
        num_lyric_encoder_hidden_layers=2,
        num_timbre_encoder_hidden_layers=2,
        **attention,
    )
    # The converter stores the encoded silence here; the constructor's zeros would hide a wrong one.
    condition_encoder.silence_latent.normal_(generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    audio_tokenizer = AceStepAudioTokenizer(
        hidden_size=32,
        intermediate_size=64,
        audio_acoustic_hidden_dim=8,
        pool_window_size=2,
        fsq_dim=32,
        fsq_input_levels=[4, 4, 4],
        fsq_input_num_quantizers=1,
        num_attention_pooler_hidden_layers=1,
        **attention,
    )
    torch.manual_seed(0)
    audio_token_detokenizer = AceStepAudioTokenDetokenizer(
        hidden_size=32,
        intermediate_size=64,
        audio_acoustic_hidden_dim=8,
        pool_window_size=2,
        num_attention_pooler_hidden_layers=1,
        **attention,
    )
    torch.manual_seed(0)
    vae = AutoencoderOobleck(
        encoder_hidden_size=6,
        downsampling_ratios=[1, 2],
        decoder_channels=3,
        decoder_input_channels=8,
        audio_channels=2,
        channel_multiples=[2, 4],
        sampling_rate=4,
    )
    pipe = AceStepPipeline(
        transformer=transformer.eval(),
        condition_encoder=condition_encoder.eval(),
        vae=vae.eval(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        scheduler=FlowMatchEulerDiscreteScheduler(num_train_timesteps=1, shift=1.0),
        audio_tokenizer=audio_tokenizer.eval(),
        audio_token_detokenizer=audio_token_detokenizer.eval(),
    )
    inputs = {
        "prompt": "A beautiful piano piece",
        "lyrics": "[verse]\nSoft notes in the morning",
        "audio_duration": 0.4,
        "num_inference_steps": 2,
        "max_text_length": 32,
        # Cover conditioning on audio codes: decoded with `audio_tokenizer.quantizer.get_output_from_indices`.
        "audio_codes": "<|audio_code_5|><|audio_code_17|><|audio_code_3|>",
    }
    return pipe, lambda pipe: pipe(**inputs, generator=torch.Generator().manual_seed(0)).audios


def tiny_glm_image_pipeline():
    """GLM-Image with upstream's test configs, its tokenizers and processor built here (upstream's test downloads
    them): text-to-image, the autoregressive model generating the prior tokens."""
    import torch
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, GlmImagePipeline, GlmImageTransformer2DModel
    from transformers import (
        GlmImageConfig,
        GlmImageForConditionalGeneration,
        GlmImageImageProcessorPil,
        GlmImageProcessor,
        T5Config,
        T5EncoderModel,
    )

    # The glyph encoder's tokenizer, a T5 one; the prior's, whose special tokens the processor reads.
    tokenizer = tiny_word_tokenizer(
        ["<pad>", "</s>", "<unk>"], PROMPT_WORDS, append_eos="</s>", pad_token="<pad>", eos_token="</s>"
    )
    prior_special_tokens = ["<|endoftext|>", "<unk>", "[gMASK]", "<sop>", "<eop>", "<|image|>"]
    prior_special_tokens += ["<|begin_of_image|>", "<|end_of_image|>", "<|user|>", "<|assistant|>"]
    prior_tokenizer = tiny_word_tokenizer(
        prior_special_tokens,
        [*PROMPT_WORDS, *map(str, range(64))],
        pad_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        bos_token="<|begin_of_image|>",
        extra_special_tokens={"image_token": "<|image|>", "grid_bos_token": "<sop>", "grid_eos_token": "<eop>"},
        padding_side="left",
    )
    chat_template = (
        "[gMASK]{% for message in messages %}<|{{ message['role'] }}|>"
        "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
        "{% for item in message['content'] %}"
        "{% if item['type'] == 'image' %}<|begin_of_image|><|image|><|end_of_image|>"
        "{% elif item['type'] == 'text' %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}{% endfor %}"
    )
    image_processor = GlmImageImageProcessorPil(
        size={"shortest_edge": 32 * 32, "longest_edge": 64 * 64}, patch_size=8, temporal_patch_size=1, merge_size=1
    )
    processor = GlmImageProcessor(
        image_processor=image_processor, tokenizer=prior_tokenizer, chat_template=chat_template
    )

    torch.manual_seed(0)
    text_encoder = T5EncoderModel(
        T5Config(
            vocab_size=len(tokenizer),
            d_model=32,
            d_kv=8,
            d_ff=37,
            num_layers=2,
            num_heads=4,
            relative_attention_num_buckets=8,
            dropout_rate=0.0,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        )
    )
    torch.manual_seed(0)
    vision_language_encoder = GlmImageForConditionalGeneration(
        GlmImageConfig(
            text_config={
                "vocab_size": 168064,
                "hidden_size": 32,
                "intermediate_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "max_position_embeddings": 512,
                "vision_vocab_size": 128,
                "rope_parameters": {"mrope_section": (4, 2, 2)},
            },
            vision_config={
                "depth": 2,
                "hidden_size": 32,
                "num_heads": 2,
                "image_size": 32,
                "patch_size": 8,
                "intermediate_size": 32,
            },
            vq_config={"embed_dim": 32, "num_embeddings": 128, "latent_channels": 32},
        )
    )
    torch.manual_seed(0)
    transformer = GlmImageTransformer2DModel(
        patch_size=2,
        in_channels=4,
        out_channels=4,
        num_layers=2,
        attention_head_dim=8,
        num_attention_heads=2,
        text_embed_dim=32,
        time_embed_dim=16,
        condition_dim=8,
        prior_vq_quantizer_codebook_size=128,
    )
    torch.manual_seed(0)
    vae = AutoencoderKL(
        block_out_channels=(4, 8, 16, 16),
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"] * 4,
        up_block_types=["UpDecoderBlock2D"] * 4,
        latent_channels=4,
        norm_num_groups=4,
        sample_size=128,
        latents_mean=[0.0] * 4,
        latents_std=[1.0] * 4,
    )
    pipe = GlmImagePipeline(
        tokenizer=tokenizer,
        processor=processor,
        text_encoder=text_encoder.eval(),
        vision_language_encoder=vision_language_encoder.eval(),
        vae=vae.eval(),
        transformer=transformer.eval(),
        scheduler=FlowMatchEulerDiscreteScheduler(),
    )
    inputs = {
        "prompt": "A photo of a cat",
        "num_inference_steps": 2,
        "guidance_scale": 1.5,
        "height": 32,
        "width": 32,
        "max_sequence_length": 16,
        "output_type": "pt",
    }
    return pipe, lambda pipe: pipe(**inputs, generator=torch.Generator().manual_seed(0)).images


def tiny_joyimage_edit_pipeline():
    """JoyImage edit with upstream's test configs; its Qwen3-VL processor, tokenizer and text encoder (downloaded by
    upstream's test) built here: a byte-level BPE tokenizer trained on the pipeline's prompt template with Qwen's
    special tokens, Qwen3-VL's image processor settings, and no video processor (transformers cannot build one without
    torchvision; the pipeline passes no video)."""
    import torch
    from diffusers import (
        AutoencoderKLWan,
        FlowMatchEulerDiscreteScheduler,
        JoyImageEditPipeline,
        JoyImageEditTransformer3DModel,
    )
    from PIL import Image
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import (
        Qwen2Tokenizer,
        Qwen2VLImageProcessorPil,
        Qwen3VLConfig,
        Qwen3VLForConditionalGeneration,
        Qwen3VLProcessor,
    )

    special_tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>"]
    special_tokens += ["<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>"]
    special_tokens += ["<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
    # Qwen2's pre-tokenization.
    split = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    bpe = Tokenizer(models.BPE())
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    template = (
        "system\n \\nDescribe the image by detailing the color, shape, size, texture, quantity, text, spatial "
        "relationships of the objects and background:"
    )
    bpe.train_from_iterator(
        [template, "user\n", "assistant\n", "a cat sitting on a bench"],
        trainers.BpeTrainer(
            vocab_size=400,
            min_frequency=1,
            special_tokens=special_tokens,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    trained = json.loads(bpe.to_str())["model"]
    merges = [tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge) for merge in trained["merges"]]
    tokenizer = Qwen2Tokenizer(vocab=trained["vocab"], merges=merges, extra_special_tokens=special_tokens[1:])
    tokenizer.add_tokens(special_tokens, special_tokens=True)

    class Qwen3VLImageProcessor(Qwen3VLProcessor):
        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    image_processor = Qwen2VLImageProcessorPil(
        patch_size=16,
        temporal_patch_size=2,
        merge_size=2,
        min_pixels=4 * 28 * 28,
        max_pixels=4 * 28 * 28,
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
    )
    processor = Qwen3VLImageProcessor(image_processor=image_processor, tokenizer=tokenizer)

    token_id = tokenizer.convert_tokens_to_ids
    torch.manual_seed(0)
    text_encoder = Qwen3VLForConditionalGeneration(
        Qwen3VLConfig(
            text_config={
                "vocab_size": len(tokenizer),
                "hidden_size": 16,
                "intermediate_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 8,
                "max_position_embeddings": 512,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 10000.0,
                    "mrope_section": [2, 1, 1],
                    "mrope_interleaved": True,
                },
                "pad_token_id": token_id("<|endoftext|>"),
            },
            vision_config={
                "depth": 2,
                "hidden_size": 16,
                "intermediate_size": 32,
                "num_heads": 2,
                "in_channels": 3,
                "patch_size": 16,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "out_hidden_size": 16,
                "num_position_embeddings": 16,
                "deepstack_visual_indexes": [0],
            },
            image_token_id=token_id("<|image_pad|>"),
            video_token_id=token_id("<|video_pad|>"),
            vision_start_token_id=token_id("<|vision_start|>"),
            vision_end_token_id=token_id("<|vision_end|>"),
        )
    )
    torch.manual_seed(0)
    transformer = JoyImageEditTransformer3DModel(
        patch_size=[1, 2, 2],
        in_channels=16,
        hidden_size=32,
        num_attention_heads=2,
        text_dim=16,
        num_layers=1,
        rope_dim_list=[4, 6, 6],
        theta=256,
    )
    torch.manual_seed(0)
    vae = AutoencoderKLWan(
        base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True]
    )
    pipe = JoyImageEditPipeline(
        transformer=transformer.eval(),
        vae=vae.eval(),
        scheduler=FlowMatchEulerDiscreteScheduler(),
        text_encoder=text_encoder.eval(),
        tokenizer=tokenizer,
        processor=processor,
    )
    inputs = {
        "prompt": "a cat sitting on a bench",
        "image": Image.new("RGB", (32, 32)),
        "num_inference_steps": 2,
        "guidance_scale": 1.0,
        "height": 32,
        "width": 32,
        "max_sequence_length": 16,
        "output_type": "pt",
    }

    def run(pipe):
        # The VAE's latent sample draws from the global generator; upstream's test fixes the bucket as here.
        torch.manual_seed(0)
        with mock.patch("diffusers.pipelines.joyimage.image_processor.find_best_bucket", return_value=(32, 32)):
            return pipe(**inputs, generator=torch.Generator().manual_seed(0)).images

    return pipe, run


def tiny_dit_pipeline(opting_out_of_group_offloading=False):
    """DiT with upstream's test configs: its transformer's output layer calls the first block's timestep and label
    embedding after the blocks, and `DiTTransformer2DModel` declares `_supports_group_offloading = False`. With
    `opting_out_of_group_offloading`, the transformer is of a subclass that declares it, as a model of another library
    can."""
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, DiTPipeline, DiTTransformer2DModel

    class DiTTransformer2DModelOptingOut(DiTTransformer2DModel):
        _supports_group_offloading = False

    transformer_class = DiTTransformer2DModelOptingOut if opting_out_of_group_offloading else DiTTransformer2DModel
    torch.manual_seed(0)
    transformer = transformer_class(
        sample_size=16,
        num_layers=2,
        patch_size=4,
        attention_head_dim=8,
        num_attention_heads=2,
        in_channels=4,
        out_channels=8,
        attention_bias=True,
        activation_fn="gelu-approximate",
        num_embeds_ada_norm=1000,
        norm_type="ada_norm_zero",
        norm_elementwise_affine=False,
    )
    vae = AutoencoderKL(block_out_channels=(8,), norm_num_groups=8, latent_channels=4)
    pipe = DiTPipeline(transformer=transformer.eval(), vae=vae.eval(), scheduler=DDIMScheduler())
    inputs = {"class_labels": [1], "num_inference_steps": 2, "output_type": "pt"}
    return pipe, lambda pipe: pipe(**inputs, generator=torch.Generator().manual_seed(0)).images


def tiny_audio_vae_pipeline(model_class_name, config, audio_shape):
    """One of the audio autoencoders that declared `_supports_group_offloading = False`, alone in a pipeline; the run
    encodes audio and decodes the latents."""
    import diffusers
    import torch

    class AudioVaePipeline(diffusers.DiffusionPipeline):
        model_cpu_offload_seq = "vae"

        def __init__(self, vae):
            super().__init__()
            self.register_modules(vae=vae)

    def encode_decode(pipe):
        encoded = pipe.vae.encode(audio)
        latents = encoded.latents if hasattr(encoded, "latents") else encoded.latent_dist.mode()
        decoded = pipe.vae.decode(latents)
        return decoded if torch.is_tensor(decoded) else decoded.sample

    torch.manual_seed(0)
    pipe = AudioVaePipeline(getattr(diffusers, model_class_name)(**config).eval())
    audio = torch.randn(audio_shape, generator=torch.Generator().manual_seed(0))
    return pipe, encode_decode


# name -> model class, tiny config and the shape of the audio it encodes
TINY_AUDIO_VAES = {
    "longcat-audio-vae": (
        "LongCatAudioDiTVae",
        {"channels": 8, "c_mults": [1, 2], "strides": [2, 2], "latent_dim": 4, "encoder_latent_dim": 8},
        (1, 1, 64),
    ),
    "minimax-h3-audio-vae": (
        "AutoencoderKLMiniMaxH3Audio",
        {
            "encoder_dim": 4,
            "encoder_rates": (2, 2),
            "latent_dim": 16,
            "latent_channels": 4,
            "num_attention_heads": 2,
            "decoder_dim": 16,
            "decoder_rates": (2, 2),
            "decoder_kernel_sizes": (4, 4),
            "resblock_kernel_sizes": (3,),
            "resblock_dilation_sizes": ((1,),),
        },
        (1, 1, 64),
    ),
    "kvae-audio-vae": (
        "AutoencoderKLKVAEAudio",
        {
            "encoder_dim": 4,
            "encoder_rates": [2, 2],
            "latent_dim": 16,
            "codebook_dim": 4,
            "decoder_dim": 16,
            "decoder_rates": [2, 2],
            "attn_num_heads": 2,
        },
        (1, 1, 64),
    ),
    "cosmos3-audio-vae": (
        "Cosmos3AVAEAudioTokenizer",
        {
            "vocoder_input_dim": 4,
            "dec_dim": 4,
            "dec_c_mults": (1, 2),
            "dec_strides": (2, 2),
            "enc_dim": 4,
            "enc_num_blocks": 1,
            "enc_n_fft": 16,
            "enc_hop_length": 4,
            "enc_latent_dim": 8,
            "enc_c_mults": (1, 2),
            "enc_strides": (2, 2),
        },
        (1, 2, 256),
    ),
}


def tiny_decoder_vae_pipeline(model_class_name, config, latents_shape, decode_kwargs):
    """VQModel or ConsistencyDecoderVAE, which declared `_supports_group_offloading = False`, alone in a pipeline; the
    run decodes latents, with a generator of seed 0 where `decode` draws noise (`decode_kwargs` names one)."""
    import diffusers
    import torch

    class DecoderVaePipeline(diffusers.DiffusionPipeline):
        model_cpu_offload_seq = "vae"

        def __init__(self, vae):
            super().__init__()
            self.register_modules(vae=vae)

    torch.manual_seed(0)
    pipe = DecoderVaePipeline(getattr(diffusers, model_class_name)(**config).eval())
    latents = torch.randn(latents_shape, generator=torch.Generator().manual_seed(0))

    def decode(pipe):
        kwargs = {**decode_kwargs}
        if "generator" in kwargs:
            kwargs["generator"] = torch.Generator().manual_seed(0)
        return pipe.vae.decode(latents, **kwargs).sample

    return pipe, decode


# name -> model class, tiny config, the shape of the latents it decodes and the arguments of `decode`
TINY_DECODER_VAES = {
    "vq-vae": (
        "VQModel",
        {"block_out_channels": (8,), "norm_num_groups": 8, "latent_channels": 3, "num_vq_embeddings": 8},
        (1, 3, 8, 8),
        {},
    ),
    "consistency-decoder-vae": (
        "ConsistencyDecoderVAE",
        {
            "encoder_block_out_channels": [2, 4],
            "encoder_down_block_types": ["DownEncoderBlock2D"] * 2,
            "encoder_norm_num_groups": 2,
            "decoder_add_attention": False,
            "decoder_block_out_channels": [2, 4],
            "decoder_down_block_types": ["ResnetDownsampleBlock2D"] * 2,
            "decoder_downsample_padding": 1,
            "decoder_in_channels": 7,
            "decoder_layers_per_block": 1,
            "decoder_norm_num_groups": 2,
            "decoder_num_train_timesteps": 1024,
            "decoder_out_channels": 6,
            "decoder_time_embedding_type": "learned",
            "decoder_up_block_types": ["ResnetUpsampleBlock2D"] * 2,
            "scaling_factor": 1,
            "latent_channels": 4,
        },
        (1, 4, 8, 8),
        {"num_inference_steps": 2, "generator": None},
    ),
}


def tiny_model_pipeline(build, make_inputs, call):
    """A model alone in a pipeline (its `model`), built by `build()` with seed 0; the run calls `call(model, inputs)`
    on inputs `make_inputs(generator)` drew with seed 0."""
    import diffusers
    import torch

    class ModelPipeline(diffusers.DiffusionPipeline):
        model_cpu_offload_seq = "model"

        def __init__(self, model):
            super().__init__()
            self.register_modules(model=model)

    torch.manual_seed(0)
    model = build().eval()
    with torch.no_grad():
        # A controlnet's zero-initialized output layers would make its output zero whatever its other weights hold.
        for param in model.parameters():
            if not param.any():
                param.normal_(std=0.1)
    pipe = ModelPipeline(model)
    inputs = make_inputs(torch.Generator().manual_seed(0))
    return pipe, lambda pipe: call(pipe.model, inputs)


def _hunyuan_dit_controlnet():
    from diffusers import HunyuanDiT2DControlNetModel

    return HunyuanDiT2DControlNetModel(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, patch_size=2, sample_size=16, hidden_size=16,
        transformer_num_layers=4, cross_attention_dim=32, cross_attention_dim_t5=32, pooled_projection_dim=16,
        text_len=8, text_len_t5=8,
    )  # fmt: skip


def _hunyuan_dit_controlnet_inputs(generator):
    import torch

    return {
        "hidden_states": torch.randn(1, 4, 16, 16, generator=generator),
        "timestep": torch.tensor([1.0]),
        "controlnet_cond": torch.randn(1, 4, 16, 16, generator=generator),
        "encoder_hidden_states": torch.randn(1, 8, 32, generator=generator),
        "text_embedding_mask": torch.ones(1, 8),
        "encoder_hidden_states_t5": torch.randn(1, 8, 32, generator=generator),
        "text_embedding_mask_t5": torch.ones(1, 8),
        "image_meta_size": torch.zeros(1, 6),
        "style": torch.zeros(1, dtype=torch.long),
        "image_rotary_emb": (torch.ones(64, 8), torch.zeros(64, 8)),
    }


def _paella_vq_model():
    try:
        from diffusers.pipelines.deprecated.wuerstchen.modeling_paella_vq_model import PaellaVQModel
    except ImportError:  # before 0.38.0
        from diffusers.pipelines.wuerstchen.modeling_paella_vq_model import PaellaVQModel

    return PaellaVQModel(levels=2, bottleneck_blocks=1, embed_dim=8, latent_channels=4, num_vq_embeddings=16)


def _shap_e_params_proj_model():
    from diffusers.pipelines.shap_e.renderer import ShapEParamsProjModel

    return ShapEParamsProjModel(param_names=("nerstf.mlp.0.weight",), param_shapes=((8, 4),), d_latent=4)


def _controlnet_union():
    from diffusers import ControlNetUnionModel

    return ControlNetUnionModel(
        block_out_channels=(8, 16), down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), layers_per_block=1,
        norm_num_groups=4, cross_attention_dim=8, attention_head_dim=2, addition_embed_type="text_time",
        addition_time_embed_dim=4, projection_class_embeddings_input_dim=4 * 6 + 8,
        conditioning_embedding_out_channels=(4, 8), num_trans_channel=8, num_trans_head=2, num_proj_channel=8,
    )  # fmt: skip


def _controlnet_union_inputs(generator):
    import torch

    return {
        "sample": torch.randn(1, 4, 8, 8, generator=generator),
        "timestep": torch.tensor([1]),
        "encoder_hidden_states": torch.randn(1, 4, 8, generator=generator),
        "controlnet_cond": [torch.randn(1, 3, 16, 16, generator=generator)] + [torch.zeros(1, 3, 16, 16)] * 5,
        "control_type": torch.tensor([[1, 0, 0, 0, 0, 0]]),
        "control_type_idx": [0],
        "added_cond_kwargs": {
            "text_embeds": torch.randn(1, 8, generator=generator),
            "time_ids": torch.randn(1, 6, generator=generator),
        },
    }


# Models holding a module that offloading loads with its children (`_preload_submodules`, `nn.MultiheadAttention`),
# beside the pipelines of TINY_OFFLOAD_PIPELINES that hold one: name -> factory
TINY_PRELOADING_MODELS = {
    "hunyuan-dit-controlnet": functools.partial(
        tiny_model_pipeline,
        _hunyuan_dit_controlnet,
        _hunyuan_dit_controlnet_inputs,
        lambda model, inputs: model(**inputs, return_dict=False)[0][0],
    ),
    "paella-vq-model": functools.partial(
        tiny_model_pipeline,
        _paella_vq_model,
        lambda generator: __import__("torch").randn(1, 4, 8, 8, generator=generator),
        lambda model, latents: model.decode(latents, force_not_quantize=False).sample,
    ),
    "shap-e-params-proj": functools.partial(
        tiny_model_pipeline,
        _shap_e_params_proj_model,
        lambda generator: __import__("torch").randn(1, 8, 4, generator=generator),
        lambda model, latents: model(latents)["nerstf.mlp.0.weight"],
    ),
    "controlnet-union": functools.partial(
        tiny_model_pipeline,
        _controlnet_union,
        _controlnet_union_inputs,
        lambda model, inputs: model(**inputs, return_dict=False)[1],
    ),
}


# Group offloading only, not in docs/offloading.md's table of every mode: a DiT made to opt out of group offloading,
# for the pipeline-level fallback.
TINY_GROUP_OFFLOAD_PIPELINES = {
    "dit-opting-out": functools.partial(tiny_dit_pipeline, opting_out_of_group_offloading=True),
}


TINY_OFFLOAD_PIPELINES = {
    "hunyuan-dit": tiny_hunyuan_dit_pipeline,
    "stable-audio": tiny_stable_audio_pipeline,
    "stable-audio-3-audio-to-audio": tiny_stable_audio_3_audio_to_audio_pipeline,
    "framepack-image-encoder": tiny_framepack_image_encoder_pipeline,
    "ace-step": tiny_ace_step_pipeline,
    "glm-image": tiny_glm_image_pipeline,
    "joyimage-edit": tiny_joyimage_edit_pipeline,
    "dit": tiny_dit_pipeline,
    **{name: functools.partial(tiny_audio_vae_pipeline, *vae) for name, vae in TINY_AUDIO_VAES.items()},
    **{name: functools.partial(tiny_decoder_vae_pipeline, *vae) for name, vae in TINY_DECODER_VAES.items()},
}
OFFLOAD_MODES = ("sequential", "group-leaf", "group-block", "model")


def nudge_weights(model):
    """Move every floating-point weight of `model` one ulp towards +inf (`torch.nextafter`): its outputs then differ by
    float32 rounding from the model's, on every machine, as they do where a kernel takes another path for the same
    weights at another alignment."""
    import torch

    with torch.no_grad():
        for param in model.parameters():
            if param.is_floating_point():
                param.copy_(torch.nextafter(param, torch.tensor(float("inf"), dtype=param.dtype)))


def apply_offload_mode(pipe, mode, offload_dir):
    """Offload `pipe` on the CPU in `mode` (OFFLOAD_MODES), the group modes to disk in `offload_dir` (in memory when it
    is None)."""
    import torch

    if mode == "sequential":
        pipe.enable_sequential_cpu_offload(device="cpu")
    elif mode == "model":
        pipe.enable_model_cpu_offload(device="cpu")
    else:
        pipe.enable_group_offload(
            onload_device=torch.device("cpu"),
            offload_type={"group-leaf": "leaf_level", "group-block": "block_level"}[mode],
            num_blocks_per_group=1,
            offload_to_disk_path=None if offload_dir is None else str(offload_dir),
        )


def offload_diff(pipeline, mode, nudge_reference=False):
    """Max abs diff of the tiny `pipeline`'s output offloaded in `mode` (on the CPU) to its output without offloading.

    The group modes offload to disk: on a CPU, offloading to memory moves nothing, while a weight offloaded to disk
    holds no data until it is onloaded, as one offloaded from an accelerator is elsewhere. `nudge_reference`: compare
    with the reference's weights moved by one ulp (`nudge_weights`)."""
    import tempfile

    import torch

    make = {**TINY_OFFLOAD_PIPELINES, **TINY_GROUP_OFFLOAD_PIPELINES, **TINY_PRELOADING_MODELS}[pipeline]
    reference, run = make()
    reference.set_progress_bar_config(disable=True)
    if nudge_reference:
        for component in reference.components.values():
            if isinstance(component, torch.nn.Module):
                nudge_weights(component)
    with torch.no_grad():
        expected = run(reference)
    pipe, run = make()
    pipe.set_progress_bar_config(disable=True)
    with tempfile.TemporaryDirectory() as offload_dir:
        apply_offload_mode(pipe, mode, offload_dir)
        with torch.no_grad():
            output = run(pipe)
    return (output - expected).abs().max().item()
