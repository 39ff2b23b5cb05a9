"""Single-file checkpoints: missing keys, block counts, model detection, bad files."""

import copy
import logging
import os
from unittest import mock

from ..judges import REFUSED, RIGHT, WRONG, close
from .common import diffusers_log_messages
from .registry import error_of, scenario


def _wan22_typed_as_wan21(workdir, fmt):
    from diffusers import WanTransformer3DModel

    from ..tiny_checkpoints import (
        build_wan,
        constructor_valued,
        load_wan_single_file,
        meta_tensors,
        wan_config,
        wan_original_state_dict,
        write_config_dir,
        write_gguf,
        write_safetensors,
    )

    checkpoint_model = build_wan(wan_config("wan2.2-i2v"))
    state_dict = wan_original_state_dict(checkpoint_model)
    path = str(workdir / f"wan22_i2v.{fmt}")
    (write_safetensors if fmt == "safetensors" else write_gguf)(state_dict, path)
    config = write_config_dir("WanTransformer3DModel", wan_config("wan2.1-i2v"), str(workdir / "wan21_i2v"))
    with diffusers_log_messages(logging.WARNING, "not found in the checkpoint") as warnings:
        model = load_wan_single_file(path, config)
    missing = sorted(set(model.state_dict()) - set(checkpoint_model.state_dict()))
    return {
        "meta_tensors": len(meta_tensors(model)),
        "missing_keys": len(missing),
        "missing_keys_as_constructed": constructor_valued(
            lambda: WanTransformer3DModel(**wan_config("wan2.1-i2v")), model, missing
        ),
        "missing_keys_zero": sum(bool((model.get_parameter(name) == 0).all()) for name in missing),
        "warnings": warnings,
    }


_WAN22_TYPED_AS_WAN21_TEXT = (
    "{meta_tensors} meta tensors left; {missing_keys_as_constructed}/{missing_keys} missing keys hold their constructor "
    "values ({missing_keys_zero} all zero); warned: {warnings}"
)


def _judge_missing_keys_as_constructed(result):
    # Bit for bit: a constructor's constant (a norm weight, a 1000.0 multiplier) is not computed from anything loaded;
    # weights drawn at random are judged by their distribution (tiny_checkpoints.constructor_valued).
    if result["meta_tensors"]:
        return WRONG, f"{result['meta_tensors']} tensors left on meta"
    if result["missing_keys_as_constructed"] != result["missing_keys"]:
        return WRONG, (
            f"{result['missing_keys'] - result['missing_keys_as_constructed']}/{result['missing_keys']} missing keys "
            "hold values the model's constructor does not give"
        )
    return RIGHT, f"{result['missing_keys']}/{result['missing_keys']} missing keys hold their constructor values"


@scenario(
    "single-file-wan22-i2v-as-wan21-safetensors",
    patch="materialize-tensors-left-on-meta-in-from-single-file.patch",
    summary="Wan2.2-I2V-like single file (safetensors) loaded with a Wan2.1-I2V config: keys missing",
    text=_WAN22_TYPED_AS_WAN21_TEXT,
    judge=_judge_missing_keys_as_constructed,
)
def wan22_typed_as_wan21_safetensors(workdir):
    return _wan22_typed_as_wan21(workdir, "safetensors")


@scenario(
    "single-file-wan22-i2v-as-wan21-gguf",
    patch="materialize-tensors-left-on-meta-in-from-single-file.patch",
    summary="Wan2.2-I2V-like single file (GGUF Q8_0) loaded with a Wan2.1-I2V config: keys missing",
    text=_WAN22_TYPED_AS_WAN21_TEXT,
    judge=_judge_missing_keys_as_constructed,
)
def wan22_typed_as_wan21_gguf(workdir):
    return _wan22_typed_as_wan21(workdir, "gguf")


def _judge_single_file_include_buffers(result):
    # The RoPE buffers as the constructor makes them (bit for bit); the output equal up to float32 rounding.
    if result["meta_tensors"] or not result["rope_equal"]:
        return WRONG, f"{result['meta_tensors']} tensors on meta, RoPE equal: {result['rope_equal']}"
    return close([result["output_diff"]])


@scenario(
    "single-file-include-buffers",
    patch="materialize-tensors-left-on-meta-in-from-single-file.patch",
    summary="single-file Wan with ACCELERATE_INIT_INCLUDE_BUFFERS=1: RoPE buffers created on meta",
    text="{meta_tensors} meta tensors left; RoPE equal: {rope_equal}; output max abs diff {output_diff}",
    judge=_judge_single_file_include_buffers,
)
def include_buffers(workdir):
    import torch

    from ..tiny_checkpoints import (
        build_wan,
        load_wan_single_file,
        meta_tensors,
        wan_config,
        wan_inputs,
        wan_original_state_dict,
        write_config_dir,
        write_safetensors,
    )

    reference = build_wan(wan_config("t2v"))
    path = write_safetensors(wan_original_state_dict(reference), str(workdir / "wan.safetensors"))
    config = write_config_dir("WanTransformer3DModel", wan_config("t2v"), str(workdir / "cfg"))
    with mock.patch.dict(os.environ, {"ACCELERATE_INIT_INCLUDE_BUFFERS": "1"}):
        model = load_wan_single_file(path, config)
    inputs = wan_inputs(wan_config("t2v"))
    with torch.no_grad():
        output_diff = (model(**inputs)[0] - reference(**inputs)[0]).abs().max().item()
    return {
        "meta_tensors": len(meta_tensors(model)),
        "rope_equal": all(
            torch.equal(getattr(model.rope, name), getattr(reference.rope, name))
            for name in ("freqs_cos", "freqs_sin")
        ),
        "output_diff": output_diff,
    }


def _judge_single_file_bad_files(result):
    errors = result["errors"].values()
    if all(e["type"] is not None and e["path"] in e["message"] and "meta" not in e["message"] for e in errors):
        return REFUSED, "both broken files refused, the error naming the file"
    return WRONG, "a broken file loaded, or its error does not name it"


@scenario(
    "single-file-bad-files",
    patch="materialize-tensors-left-on-meta-in-from-single-file.patch",
    summary="truncated safetensors, GGUF with a corrupt header: the error names the file (upstream's does too)",
    text=(
        "safetensors: {errors[safetensors][type]}: {errors[safetensors][message]}; "
        "gguf: {errors[gguf][type]}: {errors[gguf][message]}"
    ),
    judge=_judge_single_file_bad_files,
    guard=True,
)
def single_file_bad_files(workdir):
    """Not an upstream failure: shows that materializing meta tensors does not hide what is wrong with the file."""

    from ..tiny_checkpoints import (
        build_wan,
        corrupt_gguf_header,
        load_wan_single_file,
        truncate_file,
        wan_config,
        wan_original_state_dict,
        write_config_dir,
        write_gguf,
        write_safetensors,
    )

    state_dict = wan_original_state_dict(build_wan(wan_config("t2v")))
    config = write_config_dir("WanTransformer3DModel", wan_config("t2v"), str(workdir / "cfg"))
    broken = {
        "safetensors": truncate_file(write_safetensors(state_dict, str(workdir / "wan.safetensors"))),
        "gguf": corrupt_gguf_header(write_gguf(state_dict, str(workdir / "wan.gguf"))),
    }
    errors = {}
    for fmt, path in broken.items():
        try:
            load_wan_single_file(path, config)
        except Exception as e:
            errors[fmt] = {"path": path, **error_of(e)}
        else:
            errors[fmt] = {"path": path, "type": None, "message": "loaded"}
    return {"errors": errors}


def _judge_single_file_t5_text_encoder(result):
    if result["meta_tensors"] or not result["tied"]:
        return WRONG, f"{result['meta_tensors']} tensors on meta, embeddings tied: {result['tied']}"
    return close(result["diffs"])


@scenario(
    "single-file-t5-text-encoder",
    patch="single-file-t5-ties-input-embeddings.patch",
    summary="T5 text encoder of an SD3-style single file (shared.weight only), as from_single_file builds it",
    text="{meta_tensors} meta tensors left; embeddings tied: {tied}; max abs diff to from_pretrained per pass {diffs}",
    judge=_judge_single_file_t5_text_encoder,
)
def single_file_t5_text_encoder(workdir):
    import torch
    from diffusers.loaders.single_file_utils import create_diffusers_t5_model_from_checkpoint
    from transformers import T5Config, T5EncoderModel

    from ..tiny_checkpoints import meta_tensors

    torch.manual_seed(0)
    T5EncoderModel(T5Config(d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16, vocab_size=100)).save_pretrained(
        workdir / "t5"
    )
    reference = T5EncoderModel.from_pretrained(workdir / "t5")
    # SD3's single files hold T5's weights under this prefix, the input embeddings only as `shared.weight`.
    checkpoint = {
        f"text_encoders.t5xxl.transformer.{key}": value
        for key, value in reference.state_dict().items()
        if key != "encoder.embed_tokens.weight"
    }
    model = create_diffusers_t5_model_from_checkpoint(
        T5EncoderModel, checkpoint, config=str(workdir / "t5"), local_files_only=True
    )
    input_ids = torch.tensor([[1, 5, 7, 2]])
    with torch.no_grad():
        diffs = [(model(input_ids)[0] - reference(input_ids)[0]).abs().max().item() for _ in range(3)]
    return {
        "meta_tensors": len(meta_tensors(model)),
        "tied": model.encoder.embed_tokens.weight is model.shared.weight,
        "diffs": diffs,
    }


def _judge_single_file_flex_gguf_without_config(result):
    if result["blocks"] != [2, 1] or result["meta_tensors"] or result["gap_error"] is None:
        return WRONG, f"built with {result['blocks']} blocks, {result['meta_tensors']} on meta"
    return close([result["output_diff"]], what="the file's 2 / 1 blocks; max abs diff to the right config's")


@scenario(
    "single-file-flex-gguf-without-config",
    patch="single-file-block-counts-come-from-the-checkpoint.patch",
    summary="Flex.1-shaped GGUF (2 double blocks; the inferred FLUX.1-dev config has 3) loaded without config= (#10674)",
    text=(
        "built with {blocks[0]} double / {blocks[1]} single blocks (the file's: 2 / 1); {meta_tensors} meta tensors; "
        "output max abs diff to the load with the right config {output_diff}; a file with a gap: {gap_error}"
    ),
    judge=_judge_single_file_flex_gguf_without_config,
)
def single_file_flex_gguf_without_config(workdir):
    import torch
    from diffusers import FluxTransformer2DModel, GGUFQuantizationConfig

    from ..tiny_checkpoints import (
        FLEX_CONFIG,
        FLUX_DEV_CONFIG,
        build_flux,
        flux_inputs,
        flux_original_state_dict,
        hub_cache_with_config,
        meta_tensors,
        write_config_dir,
        write_gguf,
    )

    state_dict = flux_original_state_dict(build_flux(FLEX_CONFIG))
    path = write_gguf(state_dict, str(workdir / "flex_q8_0.gguf"), arch="flux")
    quantization_config = GGUFQuantizationConfig(compute_dtype=torch.float32)
    right_config = write_config_dir("FluxTransformer2DModel", FLEX_CONFIG, str(workdir / "flex"))
    expected_model = FluxTransformer2DModel.from_single_file(
        path, config=right_config, quantization_config=quantization_config, local_files_only=True
    )
    with hub_cache_with_config(
        str(workdir / "hub"), "black-forest-labs/FLUX.1-dev", "FluxTransformer2DModel", FLUX_DEV_CONFIG
    ):
        model = FluxTransformer2DModel.from_single_file(
            path, quantization_config=quantization_config, local_files_only=True
        )
        # No number of blocks describes a file whose double blocks are 0 and 2.
        gap = write_gguf(
            {
                k: v
                for k, v in flux_original_state_dict(build_flux(FLUX_DEV_CONFIG)).items()
                if not k.startswith("double_blocks.1.")
            },
            str(workdir / "flux_without_block_1.gguf"),
            arch="flux",
        )
        try:
            FluxTransformer2DModel.from_single_file(
                gap, quantization_config=quantization_config, local_files_only=True
            )
            gap_error = None
        except ValueError as e:
            gap_error = str(e).split(" \n ")[0].split(": ", 1)[1]
    inputs = flux_inputs(FLEX_CONFIG)
    with torch.no_grad():
        output_diff = (model(**inputs)[0] - expected_model(**inputs)[0]).abs().max().item()
    return {
        "blocks": [len(model.transformer_blocks), len(model.single_transformer_blocks)],
        "meta_tensors": len(meta_tensors(model)),
        "output_diff": output_diff,
        "gap_error": gap_error,
    }


def _judge_single_file_wan22_detection(result):
    picked = result["picked"]
    wrong = {name: picked[name] for name in ("wan2.2-i2v-A14B", "wan2.2-ti2v-5B") if "Wan2.2" not in str(picked[name])}
    if wrong:
        return WRONG, f"typed as {', '.join(sorted(set(wrong.values())))}"
    return RIGHT, "Wan2.2-I2V-A14B and TI2V-5B get their own configs"


@scenario(
    "single-file-wan22-detection",
    patch="tell-wan2-2-single-file-checkpoints-apart-from-wan2-1.patch",
    summary="config picked for Wan2.1 / Wan2.2 single files and variants it cannot tell (shapes only)",
    text="Wan2.2-I2V-A14B -> {picked[wan2.2-i2v-A14B]}, Wan2.2-TI2V-5B -> {picked[wan2.2-ti2v-5B]}",
    judge=_judge_single_file_wan22_detection,
)
def wan22_detection(workdir):
    from diffusers.loaders.single_file_utils import fetch_diffusers_config

    from ..tiny_checkpoints import WAN_REAL, wan_detection_checkpoint

    picked = {}
    for name in WAN_REAL:
        try:
            picked[name] = fetch_diffusers_config(wan_detection_checkpoint(name))["pretrained_model_name_or_path"]
        except ValueError as e:
            picked[name] = error_of(e)
    return {"picked": picked}


def _judge_ltx2_3_single_file(result):
    # The loaded tensors must be the file's bit for bit (counted in `equal`); the outputs equal up to float32 rounding.
    unequal = [name for name, equal in result["equal"].items() if len(set(equal.split("/"))) != 1]
    if result["meta_tensors"] or unequal or not result["from_single_file"]["audio_vae"]:
        return WRONG, f"{result['meta_tensors']} on meta; differ from the file's: {unequal}"
    return close(
        [result["transformer_diff"], result["vae_diff"]],
        what="transformer and VAE forward max abs diff to the folder's",
    )


@scenario(
    "ltx2-3-single-file",
    patch="ltx2-single-file-map-ltx-2-3-keys.patch",
    summary="LTX2Pipeline.from_single_file of a combined LTX-2.3 checkpoint (original key names), vs. a diffusers folder",
    text=(
        "{meta_tensors} meta tensors left; tensors equal to the file's (connectors, vocoder: the folder's, whose other "
        "weights differ from the file's): {equal}; forward max abs diff transformer {transformer_diff}, vae {vae_diff}; loaded from the single file: {from_single_file}"
    ),
    judge=_judge_ltx2_3_single_file,
)
def ltx2_3_single_file(workdir):
    """Also shows ltx2-single-file-converters-take-only-their-own-weights (the VAE still finds its weights) and
    ltx2-audio-vae-loads-from-a-single-file (the audio VAE comes from the file, not from `config`)."""
    import torch
    from diffusers import FromOriginalModelMixin, LTX2Pipeline

    from ..tiny_checkpoints import (
        ltx2_original_checkpoint,
        ltx23_transformer_inputs,
        meta_tensors,
        save_ltx23_pipeline,
        write_safetensors,
    )

    folder = workdir / "diffusers"
    reference = save_ltx23_pipeline(folder)
    checkpoint = ltx2_original_checkpoint(reference["transformer"], reference["vae"], reference["audio_vae"])
    path = write_safetensors(checkpoint, str(workdir / "ltx-2.3.safetensors"))
    # The folder passed as `config` holds other weights for the components the file has: one taken from the folder
    # instead of the file cannot compare equal to the file's.
    for name in ("transformer", "vae", "audio_vae"):
        other = copy.deepcopy(reference[name])
        with torch.no_grad():
            for param in other.parameters():
                param.add_(0.01)
        other.save_pretrained(folder / name)
    pipe = LTX2Pipeline.from_single_file(
        path, config=str(folder), local_files_only=True, text_encoder=None, tokenizer=None
    )
    equal, from_single_file, meta = {}, {}, 0
    for name in reference:
        model = getattr(pipe, name)
        state_dict, expected_state_dict = model.state_dict(), reference[name].state_dict()
        same = sum(
            key in state_dict and state_dict[key].device.type != "meta" and torch.equal(state_dict[key], tensor)
            for key, tensor in expected_state_dict.items()
        )
        equal[name] = f"{same}/{len(expected_state_dict)}"
        # Components without `from_single_file` (connectors, vocoder) come from `config`.
        from_single_file[name] = isinstance(model, FromOriginalModelMixin)
        meta += len(meta_tensors(model))
    sample = torch.randn(1, 3, 9, 16, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        transformer_diff = (
            pipe.transformer(**ltx23_transformer_inputs())[0]
            - reference["transformer"](**ltx23_transformer_inputs())[0]
        )
        vae_diff = pipe.vae(sample, return_dict=False)[0] - reference["vae"](sample, return_dict=False)[0]
    return {
        "meta_tensors": meta,
        "equal": equal,
        "from_single_file": from_single_file,
        "transformer_diff": transformer_diff.abs().max().item(),
        "vae_diff": vae_diff.abs().max().item(),
    }


def _comfyui_scaled_fp8_checkpoint(model, comfy_quant):
    """A ComfyUI "fp8 scaled" checkpoint of a Wan transformer (original key names), and the model with the weights it
    encodes: each block's linear weights stored as float8 values with a scale per tensor, either as a `scale_weight`
    and a `scaled_fp8` marker key or as a `weight_scale` and `comfy_quant` metadata (its format as JSON bytes)."""
    import json

    import torch

    from ..tiny_checkpoints import _wan_key_to_original, wan_original_state_dict

    fp8_max = torch.finfo(torch.float8_e4m3fn).max
    reference = copy.deepcopy(model)
    checkpoint = {}
    with torch.no_grad():
        for name, module in reference.named_modules():
            if not (name.startswith("blocks.") and isinstance(module, torch.nn.Linear)):
                continue
            scale = module.weight.abs().amax() / fp8_max
            stored = (module.weight / scale).to(torch.float8_e4m3fn)
            module.weight.copy_(stored.float() * scale)
            original = "model.diffusion_model." + _wan_key_to_original(name)
            checkpoint[f"{original}.weight"] = stored
            if comfy_quant:
                checkpoint[f"{original}.weight_scale"] = scale
                checkpoint[f"{original}.comfy_quant"] = torch.tensor(
                    list(json.dumps({"format": "float8_e4m3fn"}).encode()), dtype=torch.uint8
                )
            else:
                checkpoint[f"{original}.scale_weight"] = scale
    for key, value in wan_original_state_dict(reference, check=False).items():
        checkpoint.setdefault(key, value)
    if not comfy_quant:
        checkpoint["model.diffusion_model.scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    return checkpoint, reference


def _judge_comfyui_fp8_scaled(result):
    return close(
        [result["scale_weight_file_diff"], result["comfy_quant_file_diff"]],
        what="forward max abs diff to the model with the weights the file encodes",
        scale=result["output_magnitude"],
    )


@scenario(
    "single-file-comfyui-fp8-scaled",
    patch="dequantize-scaled-weights-of-single-files.patch",
    summary="ComfyUI fp8 scaled single files of a Wan transformer (`scale_weight` + `scaled_fp8`; `comfy_quant`)",
    text=(
        "forward max abs diff to the model with the weights each file encodes (stored value x scale): "
        "`scale_weight` file {scale_weight_file_diff}, `comfy_quant` file {comfy_quant_file_diff}; output magnitude "
        "{output_magnitude}"
    ),
    judge=_judge_comfyui_fp8_scaled,
)
def comfyui_fp8_scaled(workdir):
    import torch

    from ..tiny_checkpoints import (
        build_wan,
        load_wan_single_file,
        wan_config,
        wan_inputs,
        write_config_dir,
        write_safetensors,
    )

    config = write_config_dir("WanTransformer3DModel", wan_config(), str(workdir / "config"))
    model = build_wan(wan_config())
    inputs = wan_inputs(wan_config())
    result = {}
    for fmt in ("scale_weight", "comfy_quant"):
        checkpoint, reference = _comfyui_scaled_fp8_checkpoint(model, comfy_quant=fmt == "comfy_quant")
        path = write_safetensors(checkpoint, str(workdir / f"wan_fp8_{fmt}.safetensors"))
        loaded = load_wan_single_file(path, config)
        with torch.no_grad():
            expected = reference(**inputs)[0]
            result[f"{fmt}_file_diff"] = (loaded(**inputs)[0] - expected).abs().max().item()
    return {**result, "output_magnitude": expected.abs().max().item()}
