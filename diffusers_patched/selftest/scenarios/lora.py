"""LoRAs loaded, fused and saved where quantization, offloading or layerwise casting hold the weights."""

from ..judges import REFUSED, RIGHT, WRONG, close
from ..tiny_pipelines import bnb_text_encoder_config, load_tiny_sd_pipeline, save_tiny_sd_pipeline
from .common import _accelerate_hooks, _diffs, _encode, _judge_diffs, _text_encoder_lora, _unet_output, quanto_flux
from .offload import _judge_offloaded_to_cpu
from .registry import scenario


@scenario(
    "bnb-4bit-lora-while-sequentially-offloaded",
    patch="local-bnb-4bit-statistics-survive-offload-hooks.patch",
    summary="load_lora_weights into an nf4 text encoder while sequentially offloaded on the CPU, vs. no offload",
    text="offload device {offload_device}; max abs diff per pass {diffs}",
    judge=_judge_offloaded_to_cpu,
)
def bnb_4bit_lora_while_sequentially_offloaded(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    config = bnb_text_encoder_config("nf4", double_quant=True)
    reference = load_tiny_sd_pipeline(path, quantization_config=config)
    reference.load_lora_weights(_text_encoder_lora(reference.text_encoder))
    expected = _encode(reference.text_encoder)
    pipe = load_tiny_sd_pipeline(path, quantization_config=config)
    pipe.enable_sequential_cpu_offload(device="cpu")
    _encode(pipe.text_encoder)
    pipe.load_lora_weights(_text_encoder_lora(pipe.text_encoder))
    return {"offload_device": str(pipe._offload_device), "diffs": _diffs(pipe.text_encoder, expected)}


def _judge_lora_into_bnb_text_encoder(result):
    if result["adapters"] and result["is_quantized"]:
        return RIGHT, f"adapters {result['adapters']} on the quantized text encoder"
    return WRONG, f"adapters {result['adapters']}, quantized: {result['is_quantized']}"


@scenario(
    "lora-into-bnb-text-encoder",
    patch="lora-keep-quantized-text-encoder-dtype.patch",
    summary="load_lora_weights into an fp4 text encoder (no offloading)",
    text="adapters {adapters} on a quantized text encoder: {is_quantized}",
    judge=_judge_lora_into_bnb_text_encoder,
)
def lora_into_bnb_text_encoder(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    pipe = load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config("fp4"))
    pipe.load_lora_weights(_text_encoder_lora(pipe.text_encoder))
    return {"adapters": sorted(pipe.text_encoder.peft_config), "is_quantized": pipe.text_encoder.is_quantized}


def _judge_bnb_8bit_sequential_offload_and_lora(result):
    return close(result["diffs"] + result["diffs_with_lora"])


@scenario(
    "bnb-8bit-sequential-offload-and-lora",
    patch="sequential-offload-keeps-the-user-device.patch",
    summary="8-bit text encoder under enable_sequential_cpu_offload(device='cpu'), then load_lora_weights, vs. no offload",
    text="max abs diff per pass {diffs}; with the LoRA loaded while offloaded {diffs_with_lora}",
    judge=_judge_bnb_8bit_sequential_offload_and_lora,
)
def bnb_8bit_sequential_offload_and_lora(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    config = bnb_text_encoder_config("8bit")
    reference = load_tiny_sd_pipeline(path, quantization_config=config)
    pipe = load_tiny_sd_pipeline(path, quantization_config=config)
    pipe.enable_sequential_cpu_offload(device="cpu")
    diffs = _diffs(pipe.text_encoder, _encode(reference.text_encoder))
    pipe.load_lora_weights(_text_encoder_lora(pipe.text_encoder))
    reference.load_lora_weights(_text_encoder_lora(reference.text_encoder))
    return {"diffs": diffs, "diffs_with_lora": _diffs(pipe.text_encoder, _encode(reference.text_encoder))}


def _judge_lora_keeps_user_accelerate_hooks(result):
    for placement, kept in result["placements"].items():
        if kept["hooks_changed"]:
            return WRONG, f"{placement}: {kept['hooks_changed']} hooked modules lost or changed their hooks"
        if kept["lora_layers_off_their_device"]:
            return (
                WRONG,
                f"{placement}: {kept['lora_layers_off_their_device']} LoRA layers run elsewhere than their base",
            )
    return close(diff for kept in result["placements"].values() for diff in kept["diffs"])


@scenario(
    "lora-keeps-user-accelerate-hooks",
    patch="restore-the-accelerate-hooks-the-loaders-remove.patch",
    summary=(
        "load_lora_weights after the user's accelerate.cpu_offload(unet / text encoder, cpu), and after "
        "dispatch_model(unet) with a disk offload map, vs. the same LoRA without hooks"
    ),
    text=(
        "hooked modules that lost or changed their hooks: cpu_offload {placements[cpu_offload][hooks_changed]}, "
        "dispatch_model {placements[dispatch_model][hooks_changed]}; max abs diff per pass cpu_offload "
        "{placements[cpu_offload][diffs]}, dispatch_model {placements[dispatch_model][diffs]}"
    ),
    judge=_judge_lora_keeps_user_accelerate_hooks,
)
def lora_keeps_user_accelerate_hooks(workdir):
    """diffusers #7539: the loaders removed the user's hooks and applied `enable_sequential_cpu_offload()` instead."""
    import torch
    from accelerate import cpu_offload, dispatch_model

    path = save_tiny_sd_pipeline(workdir / "pipe")
    reference = load_tiny_sd_pipeline(path)
    lora = {
        **_text_encoder_lora(reference.text_encoder),
        **_text_encoder_lora(reference.unet, prefix="unet", targets=(".to_q", ".to_v")),
    }
    reference.load_lora_weights(lora)
    expected = {"unet": _unet_output(reference.unet), "text_encoder": _encode(reference.text_encoder)}

    placements = {}
    for placement in ("cpu_offload", "dispatch_model"):
        pipe = load_tiny_sd_pipeline(path)
        if placement == "cpu_offload":
            models = {"unet": pipe.unet, "text_encoder": pipe.text_encoder}
            for model in models.values():
                cpu_offload(model, torch.device("cpu"))
        else:
            models = {"unet": pipe.unet}
            # The down and up blocks (with their attention layers) on disk, the rest on the CPU.
            device_map = {
                name: "disk" if name.endswith("_blocks") else "cpu" for name, _ in pipe.unet.named_children()
            }
            dispatch_model(pipe.unet, device_map=device_map, offload_dir=str(workdir / "offload"))
        hooks = {name: _accelerate_hooks(model) for name, model in models.items()}
        pipe.load_lora_weights(lora)

        changed = 0
        off_device = 0
        for name, model in models.items():
            after = _accelerate_hooks(model)
            changed += sum(after.get(module) != hook for module, hook in hooks[name].items())
            for module in model.modules():
                if hasattr(module, "lora_A"):
                    base = getattr(module.base_layer._hf_hook, "execution_device", None)
                    for lora_module in (*module.lora_A.values(), *module.lora_B.values()):
                        off_device += getattr(getattr(lora_module, "_hf_hook", None), "execution_device", None) != base
        diffs = [
            (output(models[name]) - expected[name]).abs().max().item()
            for _ in range(2)
            for name, output in (("unet", _unet_output), ("text_encoder", _encode))
            if name in models
        ]
        placements[placement] = {"hooks_changed": changed, "lora_layers_off_their_device": off_device, "diffs": diffs}
    return {"placements": placements}


def _sd_lora(pipe):
    """A LoRA for the text encoder and the unet of a tiny SD pipeline, for `load_lora_weights`. The unet's is scaled
    down to a LoRA's usual size next to the weights: fusing then unfusing one as large as the weights leaves rounding
    of their size in them (2e-4 at the output), which would blur what these scenarios compare."""
    unet_lora = _text_encoder_lora(pipe.unet, prefix="unet", targets=(".to_q", ".to_v"))
    return {
        **_text_encoder_lora(pipe.text_encoder),
        **{key: value * 0.01 if key.endswith("lora_B.weight") else value for key, value in unet_lora.items()},
    }


def _sd_outputs(pipe):
    return [_encode(pipe.text_encoder), _unet_output(pipe.unet)]


def _output_diffs(pipe, expected):
    return [(output - e).abs().max().item() for output, e in zip(_sd_outputs(pipe), expected)]


def _lora_fused_and_unfused_outputs(path):
    """The text encoder's and the unet's outputs with the LoRA, fused, then unfused, without offloading."""
    pipe = load_tiny_sd_pipeline(path)
    pipe.load_lora_weights(_sd_lora(pipe))
    with_lora = _sd_outputs(pipe)
    pipe.fuse_lora(components=["text_encoder", "unet"])
    fused = _sd_outputs(pipe)
    pipe.unfuse_lora(components=["text_encoder", "unet"])
    return with_lora, fused, _sd_outputs(pipe)


def _judge_fuse_lora_under_offload_hooks(result):
    if result["weights_off_meta"]:
        return WRONG, f"{result['weights_off_meta']} weights left off the meta device: no longer offloaded"
    return close(result["fused_diffs"] + result["unfused_diffs"], what="output max abs diff to fusing unoffloaded")


@scenario(
    "fuse-lora-under-offload-hooks",
    patch="fuse-lora-into-offloaded-weights.patch",
    summary=(
        "text encoder and unet with a LoRA under accelerate.cpu_offload (the hooks of enable_sequential_cpu_offload): "
        "pipe.fuse_lora(), pipe.unfuse_lora(), vs. the same without offloading"
    ),
    text=(
        "fused: max abs diff {fused_diffs} (the LoRA moves the outputs by {lora_effects}), {weights_off_meta} weights "
        "left off meta; unfused: {unfused_diffs}"
    ),
    judge=_judge_fuse_lora_under_offload_hooks,
)
def fuse_lora_under_offload_hooks(workdir):
    import torch
    from accelerate import cpu_offload

    path = save_tiny_sd_pipeline(workdir / "pipe")
    _, expected_fused, expected_unfused = _lora_fused_and_unfused_outputs(path)
    pipe = load_tiny_sd_pipeline(path)
    without_lora = _sd_outputs(pipe)
    pipe.load_lora_weights(_sd_lora(pipe))
    for model in (pipe.text_encoder, pipe.unet):
        cpu_offload(model, torch.device("cpu"))

    pipe.fuse_lora(components=["text_encoder", "unet"])
    weights_off_meta = sum(
        not param.is_meta for model in (pipe.text_encoder, pipe.unet) for param in model.parameters()
    )
    fused_diffs = _output_diffs(pipe, expected_fused)
    pipe.unfuse_lora(components=["text_encoder", "unet"])
    return {
        "fused_diffs": fused_diffs,
        "lora_effects": [(e - w).abs().max().item() for e, w in zip(expected_fused, without_lora)],
        "weights_off_meta": weights_off_meta,
        "unfused_diffs": _output_diffs(pipe, expected_unfused),
    }


@scenario(
    "fuse-lora-group-offloaded-to-disk",
    patch="fuse-lora-into-offloaded-weights.patch",
    summary=(
        "unet with a LoRA, leaf-level group offloading to disk: pipe.fuse_lora(), pipe.unfuse_lora(), vs. the same "
        "without offloading"
    ),
    text="fused: max abs diff {fused_diffs} (the LoRA moves the output by {lora_effects}); unfused: {unfused_diffs}",
    judge=lambda result: close(
        result["fused_diffs"] + result["unfused_diffs"], what="output max abs diff to fusing unoffloaded"
    ),
)
def fuse_lora_group_offloaded_to_disk(workdir):
    import torch

    path = save_tiny_sd_pipeline(workdir / "pipe")
    _, expected_fused, expected_unfused = _lora_fused_and_unfused_outputs(path)
    pipe = load_tiny_sd_pipeline(path)
    without_lora = _unet_output(pipe.unet)
    pipe.load_lora_weights(_sd_lora(pipe))
    pipe.unet.enable_group_offload(
        torch.device("cpu"), offload_type="leaf_level", offload_to_disk_path=str(workdir / "offload")
    )
    pipe.fuse_lora(components=["unet"])
    fused_diffs = [(_unet_output(pipe.unet) - expected_fused[1]).abs().max().item()]
    pipe.unfuse_lora(components=["unet"])
    return {
        "fused_diffs": fused_diffs,
        "lora_effects": [(expected_fused[1] - without_lora).abs().max().item()],
        "unfused_diffs": [(_unet_output(pipe.unet) - expected_unfused[1]).abs().max().item()],
    }


@scenario(
    "save-pipeline-with-text-encoder-lora",
    patch="refuse-to-save-pipelines-whose-transformers-components-hold-lora-adapters.patch",
    summary="tiny SD pipeline with a LoRA loaded into its text encoder and unet: save_pretrained, from_pretrained",
    text="refused: {refused} / saved and loaded back",
    judge=lambda result: (REFUSED, result["refused"].split(":")[0]) if result["refused"] else (RIGHT, "loaded back"),
)
def save_pipeline_with_text_encoder_lora(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    pipe = load_tiny_sd_pipeline(path)
    pipe.load_lora_weights(_sd_lora(pipe))
    try:
        pipe.save_pretrained(workdir / "saved")
    except ValueError as e:
        return {"refused": str(e)}
    # Upstream: the text encoder's folder holds its adapter alone, which from_pretrained cannot load as the model.
    load_tiny_sd_pipeline(workdir / "saved")
    return {"refused": None}


def _judge_save_model_with_lora_injected(result):
    verdict, figure = close([result["output_diff"]], what="output max abs diff to the unet without the LoRA")
    return (
        WRONG if result["meta_tensors"] else verdict
    ), f"reloaded with {result['meta_tensors']} tensors on meta, {figure}"


@scenario(
    "save-model-with-lora-injected",
    patch="save-models-with-lora-adapters-under-their-own-keys.patch",
    summary="UNet with a LoRA fused then unfused (adapters still injected): save_pretrained, from_pretrained",
    text="reloaded with {meta_tensors} tensors on meta, output max abs diff to the unet without the LoRA {output_diff}",
    judge=_judge_save_model_with_lora_injected,
)
def save_model_with_lora_injected(workdir):
    import torch
    from diffusers import UNet2DConditionModel
    from peft import LoraConfig

    from ..tiny_checkpoints import meta_tensors

    path = save_tiny_sd_pipeline(workdir / "pipe")
    unet = UNet2DConditionModel.from_pretrained(path, subfolder="unet")
    unet.add_adapter(LoraConfig(r=4, lora_alpha=4, target_modules=["to_q", "to_k", "to_v"], init_lora_weights=False))
    unet.fuse_lora()
    unet.unfuse_lora()
    # As upstream's training examples save an adapted model: the model's weights, which the LoRA is not fused into.
    unet.save_pretrained(workdir / "saved")
    # Upstream saved PEFT's wrapped keys; from_pretrained leaves the weights it does not find there on meta, silently.
    loaded = UNet2DConditionModel.from_pretrained(workdir / "saved")
    without_lora = UNet2DConditionModel.from_pretrained(path, subfolder="unet")
    generator = torch.Generator().manual_seed(0)
    inputs = (
        torch.randn(1, unet.config.in_channels, 16, 16, generator=generator),
        10,
        torch.randn(1, 4, unet.config.cross_attention_dim, generator=generator),
    )
    with torch.no_grad():
        output_diff = (loaded(*inputs).sample - without_lora(*inputs).sample).abs().max().item()
    return {"meta_tensors": len(meta_tensors(loaded)), "output_diff": output_diff}


def _judge_lora_after_layerwise_casting(result):
    return close([result["diff"]], what="output max abs diff", scale=result["scale"])


@scenario(
    "lora-after-layerwise-casting",
    patch="upcast-the-lora-layers-loaded-after-enable-layerwise.patch",
    summary="unet.enable_layerwise_casting(storage_dtype=float8_e4m3fn, compute_dtype=float32), then a LoRA "
    "(load_lora_adapter, as load_lora_weights calls it), vs. the uncast model holding the float8 weights with the same "
    "LoRA",
    text="LoRA layers in {lora_dtypes}; max abs diff to the reference {diff:.2g} (output magnitude {scale:.2g}, the "
    "LoRA moves it by {lora_effect:.2g})",
    judge=_judge_lora_after_layerwise_casting,
)
def lora_after_layerwise_casting(workdir):
    import torch

    from ..tiny_pipelines import tiny_unet

    unet = tiny_unet()
    unet.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=torch.float32)
    # The reference holds the values the cast model stores, in float32, with no hook: what the casting computes.
    reference = tiny_unet()
    reference.load_state_dict({name: tensor.float() for name, tensor in unet.state_dict().items()})
    without_lora = _unet_output(reference)
    lora = _text_encoder_lora(unet, prefix="unet", targets=(".to_q", ".to_v"))
    reference.load_lora_adapter(dict(lora), prefix="unet")
    expected = _unet_output(reference)
    unet.load_lora_adapter(dict(lora), prefix="unet")
    lora_dtypes = sorted({str(param.dtype) for name, param in unet.named_parameters() if "lora_" in name})
    return {
        "lora_dtypes": lora_dtypes,
        "diff": (_unet_output(unet) - expected).abs().max().item(),
        "scale": expected.abs().max().item(),
        "lora_effect": (expected - without_lora).abs().max().item(),
    }


@scenario(
    "flux-lora-into-quanto-transformer",
    patch="load-flux-loras-into-quanto-quantized-transformers.patch",
    summary="FluxPipeline.load_lora_weights into a quanto float8 transformer, vs. the unquantized transformer holding "
    "the values it computes with, with the same LoRA",
    text="max abs diff to the reference {diffs} (the LoRA moves the output by {lora_effect:.2g})",
    judge=_judge_diffs,
)
def flux_lora_into_quanto_transformer(workdir):
    import torch

    from ..tiny_checkpoints import flux_transformer_pipeline

    quantized, reference, lora, inputs = quanto_flux(workdir)
    with torch.no_grad():
        without_lora = reference(**inputs)[0]
        reference.load_lora_adapter(lora, prefix="transformer")
        expected = reference(**inputs)[0]
        pipe = flux_transformer_pipeline(quantized)
        pipe.load_lora_weights(lora)
        return {
            "diffs": [(pipe.transformer(**inputs)[0] - expected).abs().max().item()],
            "lora_effect": (expected - without_lora).abs().max().item(),
        }


def _judge_fuse_lora_into_quanto_weights(result):
    if not result["restored"]:
        return WRONG, "unfuse_lora did not put back the quantized weights"
    return close(result["diffs"])


@scenario(
    "fuse-lora-into-quanto-weights",
    patch="fuse-lora-into-quanto-quantized-weights.patch",
    summary="quanto float8 Flux transformer with a LoRA: fuse_lora(), unfuse_lora(), fuse_lora() + unload_lora(), vs. "
    "the unquantized model holding the same values with the LoRA fused, then quantized",
    text="max abs diff fused {diffs[0]:.2g}, unfused {diffs[1]:.2g}, fused then unloaded {diffs[2]:.2g} (the LoRA moves "
    "the output by {lora_effect:.2g}); quantized weights put back by unfuse_lora: {restored}",
    judge=_judge_fuse_lora_into_quanto_weights,
)
def fuse_lora_into_quanto_weights(workdir):
    import torch
    from diffusers import FluxTransformer2DModel, QuantoConfig

    quantized, reference, lora, inputs = quanto_flux(workdir)
    with torch.no_grad():
        without_lora = reference(**inputs)[0]
        reference.load_lora_adapter(lora, prefix="transformer")
        unfused = reference(**inputs)[0]
        # Fusing into quantized weights quantizes the fused weights: the reference is the fused model, quantized.
        reference.fuse_lora()
        reference.unload_lora()
        reference.save_pretrained(workdir / "fused")
        fused_reference = FluxTransformer2DModel.from_pretrained(
            workdir / "fused", quantization_config=QuantoConfig(weights_dtype="float8")
        )
        fused = fused_reference(**inputs)[0]

        # The model's own loader: FluxPipeline.load_lora_weights fails on quanto weights upstream (another patch).
        quantized.load_lora_adapter(lora, prefix="transformer")
        quantized_weight = quantized.transformer_blocks[0].attn.to_q.base_layer.weight
        quantized.fuse_lora()
        diffs = [(quantized(**inputs)[0] - fused).abs().max().item()]
        quantized.unfuse_lora()
        restored = quantized.transformer_blocks[0].attn.to_q.base_layer.weight is quantized_weight
        diffs.append((quantized(**inputs)[0] - unfused).abs().max().item())
        quantized.fuse_lora()
        quantized.unload_lora()
        diffs.append((quantized(**inputs)[0] - fused).abs().max().item())
    return {"diffs": diffs, "lora_effect": (unfused - without_lora).abs().max().item(), "restored": restored}
