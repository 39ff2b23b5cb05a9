"""Sequential and model offloading, with bitsandbytes models among the offloaded, and saving what is offloaded."""

from ..judges import REFUSED, RIGHT, WRONG, close
from ..tiny_pipelines import bnb_text_encoder_config, load_tiny_sd_pipeline, offload_diff, save_tiny_sd_pipeline
from .common import (
    LLAMA_CPU_DISK_MAP,
    _bnb_cpu_repacking,
    _clip_text_modules,
    _diffs,
    _encode,
    _equal_tensors,
    _judge_diffs,
    _make_bnb_offload_safe,
    _meta_statistics,
    _quant_statistics,
    _state_dict_copy,
    _unet_output,
    llama_logits,
    load_tiny_llama_4bit,
    quanto_flux,
    save_tiny_llama_with_adapter,
)
from .registry import scenario


def _judge_offloaded_to_cpu(result):
    if result["offload_device"] != "cpu":
        return WRONG, f"offloaded to {result['offload_device']}"
    return close(result["diffs"])


@scenario(
    "sequential-cpu-offload-on-cpu",
    patch="sequential-offload-keeps-the-user-device.patch",
    summary="unquantized pipeline, enable_sequential_cpu_offload(device='cpu'), 3 text encoder passes",
    text="offload device {offload_device}; max abs diff per pass {diffs}",
    judge=_judge_offloaded_to_cpu,
)
def sequential_cpu_offload_on_cpu(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    expected = _encode(load_tiny_sd_pipeline(path).text_encoder)
    pipe = load_tiny_sd_pipeline(path)
    pipe.enable_sequential_cpu_offload(device="cpu")
    return {"offload_device": str(pipe._offload_device), "diffs": _diffs(pipe.text_encoder, expected)}


def _judge_bnb_4bit_sequential_cpu_offload(result):
    # The quantization statistics are restored, not recomputed: bit for bit. The passes' outputs up to float32 rounding.
    if result["statistics_on_meta"] or result["statistics_equal"] != result["statistics"]:
        return WRONG, f"{result['statistics_on_meta']} quantization statistics on meta"
    return close(result["diffs"])


@scenario(
    "bnb-4bit-sequential-cpu-offload",
    patch="local-bnb-4bit-statistics-survive-offload-hooks.patch",
    summary="nf4 double-quant text encoder under enable_sequential_cpu_offload(device='cpu'), 3 passes + state_dict",
    text=(
        "max abs diff per pass {diffs}; {statistics_on_meta} statistics on meta; "
        "{statistics_equal}/{statistics} state_dict statistics equal"
    ),
    judge=_judge_bnb_4bit_sequential_cpu_offload,
)
def bnb_4bit_sequential_cpu_offload(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    config = bnb_text_encoder_config("nf4", double_quant=True)
    reference = load_tiny_sd_pipeline(path, quantization_config=config).text_encoder
    expected_statistics = _quant_statistics(reference.state_dict())
    expected = _encode(reference)
    pipe = load_tiny_sd_pipeline(path, quantization_config=config)
    pipe.enable_sequential_cpu_offload(device="cpu")
    diffs = _diffs(pipe.text_encoder, expected)
    state = pipe.text_encoder.state_dict()  # raises "Tensor.item() cannot be called on meta tensors" upstream
    return {
        "diffs": diffs,
        "statistics_on_meta": len(_meta_statistics(pipe.text_encoder)),
        "statistics_equal": _equal_tensors(state, expected_statistics),
        "statistics": len(expected_statistics),
    }


def _judge_bnb_4bit_cpu_offload_hooks(result):
    # As _judge_bnb_4bit_sequential_cpu_offload: statistics bit for bit, outputs up to float32 rounding.
    kinds = result["kinds"]
    lost = [kind for kind, k in kinds.items() if k["statistics_equal"] != k["statistics"]]
    if lost:
        return WRONG, f"quantization statistics changed: {', '.join(lost)}"
    return close(diff for k in kinds.values() for diff in k["diffs"])


@scenario(
    "bnb-4bit-cpu-offload-hooks",
    patch="local-bnb-4bit-statistics-survive-offload-hooks.patch",
    summary="nf4 / fp4 text encoders, with and without double quant, under accelerate's cpu_offload: 3 passes each",
    text=(
        "max abs diff per pass nf4 {kinds[nf4][diffs]}, fp4 {kinds[fp4][diffs]}, nf4-dq {kinds[nf4-dq][diffs]}, "
        "fp4-dq {kinds[fp4-dq][diffs]}; statistics equal nf4 {kinds[nf4][statistics_equal]}/"
        "{kinds[nf4][statistics]}, nf4-dq {kinds[nf4-dq][statistics_equal]}/{kinds[nf4-dq][statistics]}"
    ),
    judge=_judge_bnb_4bit_cpu_offload_hooks,
)
def bnb_4bit_cpu_offload_hooks(workdir):
    """accelerate's own hooks on a plain CPU device: the meta-tensor failure itself, without sequential-offload-keeps-the-user-device's device."""
    import torch
    from accelerate import cpu_offload

    path = save_tiny_sd_pipeline(workdir / "pipe")
    make_bnb_offload_safe = _make_bnb_offload_safe()
    kinds = {}
    for kind, double_quant in (("nf4", False), ("fp4", False), ("nf4-dq", True), ("fp4-dq", True)):
        config = bnb_text_encoder_config(kind.split("-")[0], double_quant=double_quant)
        reference = load_tiny_sd_pipeline(path, quantization_config=config).text_encoder
        expected_statistics = _quant_statistics(reference.state_dict())
        expected = _encode(reference)
        text_encoder = load_tiny_sd_pipeline(path, quantization_config=config).text_encoder
        covered = make_bnb_offload_safe(text_encoder) if make_bnb_offload_safe else None
        cpu_offload(text_encoder, torch.device("cpu"))
        diffs = _diffs(text_encoder, expected)
        kinds[kind] = {
            "covered": covered,
            "diffs": diffs,
            "statistics_equal": _equal_tensors(text_encoder.state_dict(), expected_statistics),
            "statistics": len(expected_statistics),
        }
    return {"kinds": kinds}


@scenario(
    "bnb-4bit-offload-twice-then-model-offload",
    patch="local-bnb-4bit-statistics-survive-offload-hooks.patch",
    summary="nf4 text encoder: enable_sequential_cpu_offload twice, then enable_model_cpu_offload, passes after each",
    text="max abs diff per pass {diffs}",
    judge=_judge_diffs,
)
def bnb_4bit_offload_twice_then_model_offload(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    config = bnb_text_encoder_config("nf4", double_quant=True)
    expected = _encode(load_tiny_sd_pipeline(path, quantization_config=config).text_encoder)
    pipe = load_tiny_sd_pipeline(path, quantization_config=config)
    diffs = []
    for enable_offload in (pipe.enable_sequential_cpu_offload, pipe.enable_sequential_cpu_offload):
        enable_offload(device="cpu")
        diffs += _diffs(pipe.text_encoder, expected, passes=2)
    pipe.enable_model_cpu_offload(device="cpu")
    diffs += _diffs(pipe.text_encoder, expected, passes=2)
    return {"diffs": diffs}


def _judge_save_offloaded_pipeline(result):
    # The saved tensors are the model's bit for bit; the reloaded and the offloaded outputs up to float32 rounding.
    for kind, k in result["kinds"].items():
        if k["text_encoder_equal"] != k["text_encoder_tensors"] or k["unet_equal"] != k["unet_tensors"]:
            return WRONG, f"{kind}: saved tensors differ from the model's"
    return close(diff for k in result["kinds"].values() for diff in k["saved_diffs"] + k["offloaded_diffs"])


@scenario(
    "save-offloaded-pipeline",
    patch="save-offloaded-weights-not-meta-placeholders.patch",
    summary="pipeline with an 8-bit, then an nf4 text encoder, offloaded by accelerate's hooks: save_pretrained, reload",
    text=(
        "8-bit: {kinds[8-bit][text_encoder_equal]}/{kinds[8-bit][text_encoder_tensors]} text encoder and "
        "{kinds[8-bit][unet_equal]}/{kinds[8-bit][unet_tensors]} unet tensors equal, max abs diff "
        "{kinds[8-bit][saved_diffs]}, left offloaded on {kinds[8-bit][offloaded_device]}; "
        "nf4-dq: {kinds[nf4-dq][text_encoder_equal]}/{kinds[nf4-dq][text_encoder_tensors]} text encoder and "
        "{kinds[nf4-dq][unet_equal]}/{kinds[nf4-dq][unet_tensors]} unet tensors equal, max abs diff "
        "{kinds[nf4-dq][saved_diffs]}, left offloaded on {kinds[nf4-dq][offloaded_device]}"
    ),
    judge=_judge_save_offloaded_pipeline,
)
def save_offloaded_pipeline(workdir):
    import torch
    from accelerate import cpu_offload

    path = save_tiny_sd_pipeline(workdir / "pipe")
    make_bnb_offload_safe = _make_bnb_offload_safe()
    kinds = {}
    for kind, config in (("8-bit", bnb_text_encoder_config("8bit")), ("nf4-dq", bnb_text_encoder_config("nf4", True))):
        reference = load_tiny_sd_pipeline(path, quantization_config=config)
        # bitsandbytes only approximately recovers 4-bit statistics after a CPU forward pass: copy them first.
        expected_text_encoder = _state_dict_copy(reference.text_encoder)
        expected_unet = _state_dict_copy(reference.unet)
        expected = _encode(reference.text_encoder)
        pipe = load_tiny_sd_pipeline(path, quantization_config=config)
        if make_bnb_offload_safe:
            make_bnb_offload_safe(pipe.text_encoder)
        # The hooks enable_sequential_cpu_offload() attaches, attached directly: upstream's own call fails earlier on
        # a CPU-only machine (sequential-offload-keeps-the-user-device), and this scenario is about saving.
        for model in (pipe.text_encoder, pipe.unet, pipe.vae):
            cpu_offload(model, torch.device("cpu"))
        _encode(pipe.text_encoder)
        pipe.save_pretrained(workdir / f"saved-{kind}")
        saved = load_tiny_sd_pipeline(workdir / f"saved-{kind}", quantization_config=config)
        kinds[kind] = {
            "text_encoder_equal": _equal_tensors(saved.text_encoder.state_dict(), expected_text_encoder),
            "text_encoder_tensors": len(expected_text_encoder),
            "unet_equal": _equal_tensors(saved.unet.state_dict(), expected_unet),
            "unet_tensors": len(expected_unet),
            "saved_diffs": _diffs(saved.text_encoder, expected, passes=1),
            # The pipeline saved stays offloaded, and still computes the same.
            "offloaded_device": _clip_text_modules(pipe.text_encoder).embeddings.token_embedding.weight.device.type,
            "offloaded_diffs": _diffs(pipe.text_encoder, expected, passes=1),
        }
    return {"kinds": kinds}


@scenario(
    "bnb-4bit-dispatch-cpu-disk-then-peft",
    patch="local-bnb-4bit-statistics-survive-offload-hooks.patch",
    summary="transformers 4-bit double-quant model, dispatch_model with cpu + disk, PeftModel.from_pretrained",
    text="make_bnb_offload_safe covered {covered} weights; max abs diff to the un-offloaded adapter model {diffs}",
    judge=_judge_diffs,
)
def bnb_4bit_dispatch_cpu_disk_then_peft(workdir):
    from accelerate import dispatch_model
    from peft import PeftModel

    save_tiny_llama_with_adapter(workdir)
    expected = llama_logits(PeftModel.from_pretrained(load_tiny_llama_4bit(workdir), workdir / "adapter"))
    model = load_tiny_llama_4bit(workdir)
    make_bnb_offload_safe = _make_bnb_offload_safe()
    covered = make_bnb_offload_safe(model) if make_bnb_offload_safe else None
    model = dispatch_model(model, device_map=LLAMA_CPU_DISK_MAP, offload_dir=workdir / "offload")
    model = PeftModel.from_pretrained(model, workdir / "adapter")
    return {"covered": covered, "diffs": [(llama_logits(model) - expected).abs().max().item() for _ in range(3)]}


def _run_repacked(text_encoder):
    _bnb_cpu_repacking(text_encoder, True)
    _encode(text_encoder)
    _bnb_cpu_repacking(text_encoder, False)


def _judge_bnb_4bit_save_after_cpu_forward(result):
    saved_after = [k["saved_after"] for k in result["kinds"].values()]
    if any(value != "refused" for value in saved_after):
        return close(
            [value for value in saved_after if value != "refused"],
            what="saved re-derived statistics silently: reloaded max abs diff",
        )
    verdict, figure = close(result["made_safe_diffs"] + result["made_safe_in_memory_diffs"])
    if verdict != RIGHT:
        return verdict, f"with make_bnb_offload_safe: {figure}"
    return REFUSED, "saving re-derived statistics refused; with make_bnb_offload_safe, saved exactly"


@scenario(
    "bnb-4bit-save-after-cpu-forward",
    patch="refuse-to-save-bnb-4bit-statistics-repacked-on-cpu.patch",
    summary=(
        "nf4 / fp4 text encoders, with and without double quant: a forward pass that repacks the weights for "
        "bitsandbytes' CPU kernels (as on CPUs with AVX512-BF16), then pipe.save_pretrained and reload"
    ),
    text=(
        "max abs diff of the reloaded text encoder to the one saved before the forward pass: nf4 "
        "{kinds[nf4][saved_after]}, fp4 {kinds[fp4][saved_after]}, nf4-dq {kinds[nf4-dq][saved_after]}, fp4-dq "
        "{kinds[fp4-dq][saved_after]} (saved before the forward pass: {saved_before}); refusal: {refusal}; with "
        "make_bnb_offload_safe before the forward pass: max abs diffs {made_safe_diffs}, "
        "{made_safe_statistics_equal}/{statistics} saved statistics equal"
    ),
    judge=_judge_bnb_4bit_save_after_cpu_forward,
)
def bnb_4bit_save_after_cpu_forward(workdir):
    from transformers import CLIPTextModel

    path = save_tiny_sd_pipeline(workdir / "pipe")
    make_bnb_offload_safe = _make_bnb_offload_safe()
    kinds, saved_before, refusal, statistics = {}, [], None, 0
    made_safe_diffs, made_safe_in_memory_diffs, made_safe_statistics_equal = [], [], 0

    def load(config):
        pipe = load_tiny_sd_pipeline(path, quantization_config=config)
        _bnb_cpu_repacking(pipe.text_encoder, False)
        return pipe

    def reload(directory):
        text_encoder = CLIPTextModel.from_pretrained(directory / "text_encoder").eval()
        _bnb_cpu_repacking(text_encoder, False)
        return text_encoder

    def diff(text_encoder, expected):
        return (_encode(text_encoder) - expected).abs().max().item()

    for kind in ("nf4", "fp4", "nf4-dq", "fp4-dq"):
        config = bnb_text_encoder_config(kind.split("-")[0], double_quant=kind.endswith("-dq"))
        reference = load(config)
        reference.save_pretrained(workdir / f"{kind}-before")
        expected = _encode(reference.text_encoder)
        expected_statistics = _quant_statistics(reference.text_encoder.state_dict())
        saved_before.append(diff(reload(workdir / f"{kind}-before"), expected))
        statistics += len(expected_statistics)

        pipe = load(config)
        _run_repacked(pipe.text_encoder)
        try:
            pipe.save_pretrained(workdir / f"{kind}-after")
        except ValueError as e:
            refusal = str(e)
            kinds[kind] = {"saved_after": "refused"}
        else:
            saved = reload(workdir / f"{kind}-after")
            kinds[kind] = {
                "saved_after": diff(saved, expected),
                "statistics_equal": _equal_tensors(_quant_statistics(saved.state_dict()), expected_statistics),
                "statistics": len(expected_statistics),
                # `state_dict()` re-derived the statistics of the running model too.
                "in_memory_after_save": diff(pipe.text_encoder, expected),
            }

        if make_bnb_offload_safe:
            pipe = load(config)
            make_bnb_offload_safe(pipe.text_encoder)
            _run_repacked(pipe.text_encoder)
            pipe.save_pretrained(workdir / f"{kind}-safe")
            saved = reload(workdir / f"{kind}-safe")
            made_safe_diffs.append(diff(saved, expected))
            made_safe_statistics_equal += _equal_tensors(_quant_statistics(saved.state_dict()), expected_statistics)
            made_safe_in_memory_diffs.append(diff(pipe.text_encoder, expected))
    return {
        "kinds": kinds,
        "saved_before": saved_before,
        "refusal": refusal,
        "statistics": statistics,
        "made_safe_diffs": made_safe_diffs if make_bnb_offload_safe else None,
        "made_safe_statistics_equal": made_safe_statistics_equal if make_bnb_offload_safe else None,
        "made_safe_in_memory_diffs": made_safe_in_memory_diffs if make_bnb_offload_safe else None,
    }


def offload_run(pipeline, mode):
    """A scenario's run: the tiny `pipeline` offloaded in `mode`, its max abs diff to the un-offloaded output."""

    def run(workdir):
        return {"diff": offload_diff(pipeline, mode)}

    return run


_PRELOAD = "offloading-loads-modules-that-read-child-weights.patch"


for _pipeline, _patch, _reads in [
    (
        "hunyuan-dit",
        _PRELOAD,
        "HunyuanDiTAttentionPool passes its projections' weights to F.multi_head_attention_forward",
    ),
    ("stable-audio", _PRELOAD, "the VAE's weight_norm computes its weights in a forward pre-hook"),
    (
        "framepack-image-encoder",
        _PRELOAD,
        "SigLIP's pooling head calls nn.MultiheadAttention, which reads out_proj.weight",
    ),
    (
        "stable-audio-3-audio-to-audio",
        "same-vae-calls-its-bottleneck-as-a-module.patch",
        "the SAME VAE encodes with its bottleneck's encode method, which no offload hook sees",
    ),
    (
        "consistency-decoder-vae",
        "consistency-decoder-vae-sets-timesteps-on-the-latents-device.patch",
        "its decode sets the scheduler's timesteps on the model's own device, meta under sequential offloading",
    ),
    (
        "ace-step",
        "sequential-offload-keeps-what-ace-step-reads-outside-forward.patch",
        "the pipeline reads the condition encoder's null_condition_emb and silence_latent, and decodes audio codes "
        "with the audio tokenizer's quantizer, outside of any forward",
    ),
]:
    scenario(
        f"sequential-offload-{_pipeline}",
        patch=_patch,
        summary=f"{_pipeline} (tiny), enable_sequential_cpu_offload(device='cpu') vs. no offload: {_reads}",
        text="max abs diff to the un-offloaded output {diff}",
        judge=lambda result: close([result["diff"]], what="max abs diff to the un-offloaded output"),
    )(offload_run(_pipeline, "sequential"))


def _judge_sequential_offload_refuses_quanto(result):
    if not result["refused"]:
        return WRONG, "sequential offloading of quanto weights not refused"
    verdict, figure = close(result["diffs"], what="then, not offloaded: max abs diff to the output before")
    if verdict != RIGHT:
        return verdict, figure
    return REFUSED, f"{result['refused'].split(':')[0]}; {figure}"


@scenario(
    "sequential-offload-quanto-pipeline",
    patch="refuse-to-sequentially-offload-quanto-weights.patch",
    summary="FluxPipeline with a quanto float8 transformer: enable_sequential_cpu_offload(), then a call",
    text="sequential offload refused: {refused}; then, not offloaded, max abs diff to the output before {diffs}",
    judge=_judge_sequential_offload_refuses_quanto,
)
def sequential_offload_quanto_pipeline(workdir):
    import torch

    from ..tiny_checkpoints import flux_transformer_pipeline

    quantized, _, _, inputs = quanto_flux(workdir)
    with torch.no_grad():
        expected = quantized(**inputs)[0]
    pipe = flux_transformer_pipeline(quantized)
    # Only a refusal is right: accelerate's hooks cannot move quanto's weights (upstream: a TypeError).
    refused = None
    try:
        pipe.enable_sequential_cpu_offload(device="cpu")
    except ValueError as e:
        refused = str(e)
    # Refused before anything was offloaded: the pipeline computes as before.
    with torch.no_grad():
        return {"refused": refused, "diffs": [(pipe.transformer(**inputs)[0] - expected).abs().max().item()]}


def _judge_layerwise_casting_after_offloading(result):
    verdict, figure = close(result["diffs"], what=result["compared"])
    if result["refused"] is None or verdict != RIGHT:
        return verdict, figure
    return REFUSED, f"{result['refused'].split(':')[0]}; {figure}"


@scenario(
    "layerwise-casting-after-accelerate-cpu-offload",
    patch="refuse-layerwise-casting-of-offloaded-weights.patch",
    summary="tiny SD pipeline whose unet the user offloaded with accelerate's cpu_offload, then "
    "unet.enable_layerwise_casting(storage_dtype=float8_e4m3fn, compute_dtype=float32)",
    text="layerwise casting refused: {refused}; {compared}: {diffs}",
    judge=_judge_layerwise_casting_after_offloading,
)
def layerwise_casting_after_accelerate_cpu_offload(workdir):
    import torch
    from accelerate import cpu_offload

    from .adapters import _reference_pipeline, _saved_pipeline

    pipe = load_tiny_sd_pipeline(_saved_pipeline())
    cpu_offload(pipe.unet, execution_device=torch.device("cpu"))
    before = _unet_output(pipe.unet)
    try:
        pipe.unet.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=torch.float32)
    except ValueError as e:
        # Refused before anything was cast: the unet computes as before.
        return {
            "refused": str(e),
            "compared": "then, max abs diff to the output before",
            "diffs": [(_unet_output(pipe.unet) - before).abs().max().item()],
        }
    # Cast: the unet computes with its weights rounded to float8, as a float32 unet holding them does.
    expected = _unet_output(_reference_pipeline("layerwise-cast").unet)
    return {
        "refused": None,
        "compared": "max abs diff to the float8 unet's output",
        "diffs": [(_unet_output(pipe.unet) - expected).abs().max().item()],
    }


def _add_one_to_the_sample(unet):
    from diffusers.hooks import HookRegistry, ModelHook

    class AddToSample(ModelHook):
        def pre_forward(self, module, sample, *args, **kwargs):
            return (sample + 1.0, *args), kwargs

    HookRegistry.check_if_exists_or_initialize(unet).register_hook(AddToSample(), "add_to_sample")


def _outputs_of_calls_then_lora(pipe):
    from .adapters import _lora

    outputs = [_unet_output(pipe.unet)]
    # What the end of each pipeline call does: under model CPU offloading, its hooks are removed and added again.
    pipe.maybe_free_model_hooks()
    outputs.append(_unet_output(pipe.unet))
    pipe.load_lora_weights(_lora())
    outputs.append(_unet_output(pipe.unet))
    pipe.maybe_free_model_hooks()
    outputs.append(_unet_output(pipe.unet))
    return outputs


@scenario(
    "hook-registered-after-model-offload",
    patch="keep-the-hooks-registered-after-accelerate-hooks.patch",
    summary="tiny SD pipeline, enable_model_cpu_offload(device='cpu'), then a diffusers ModelHook registered on the "
    "unet: the unet run, maybe_free_model_hooks() as each pipeline call ends, load_lora_weights, vs. no offload",
    text="max abs diff to the un-offloaded unet with the hook: first call, second call, with the LoRA, again {diffs}",
    judge=_judge_diffs,
)
def hook_registered_after_model_offload(workdir):
    from .adapters import _saved_pipeline

    reference = load_tiny_sd_pipeline(_saved_pipeline())
    _add_one_to_the_sample(reference.unet)
    expected = _outputs_of_calls_then_lora(reference)
    pipe = load_tiny_sd_pipeline(_saved_pipeline())
    pipe.enable_model_cpu_offload(device="cpu")
    _add_one_to_the_sample(pipe.unet)
    outputs = _outputs_of_calls_then_lora(pipe)
    return {"diffs": [(output - wanted).abs().max().item() for output, wanted in zip(outputs, expected)]}
