"""Known upstream failures, each as a scenario that builds tiny models locally and runs one user flow.

`make demo` and the tests run every scenario twice in subprocesses: on upstream (`DIFFUSERS_PATCHED=0`) and
with diffusers-patched. A scenario returns a one-line result, or raises the error a user would see.
"""

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .tiny_pipelines import (
    bnb_text_encoder_config,
    fixed_text_input,
    load_tiny_sd_pipeline,
    load_with_plan,
    plan_with_budget,
    save_tiny_sd_pipeline,
)


SCENARIOS = {}
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Scenario:
    name: str
    patch: str
    summary: str
    run: callable


@dataclass
class Outcome:
    ok: bool
    result: str
    seconds: float


def scenario(name, patch, summary):
    def register(run):
        SCENARIOS[name] = Scenario(name, patch, summary, run)
        return run

    return register


def run_scenarios(names, patched):
    """Run scenarios in one fresh interpreter (imports dominate their cost), with or without the patches.

    Each scenario works in its own directory on models it builds itself; an error in one ends only that one.
    """
    env = {**os.environ, "DIFFUSERS_PATCHED": "1" if patched else "0", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as workdir:
        process = subprocess.run(
            [sys.executable, "-m", "tests.support.scenarios", workdir, *names],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
    outcomes = {}
    for line in process.stdout.splitlines():
        if line.startswith(_OUTCOME_PREFIX):
            name, outcome = json.loads(line[len(_OUTCOME_PREFIX) :])
            outcomes[name] = Outcome(**outcome)
    for name in names:
        if name not in outcomes:
            outcomes[name] = Outcome(False, f"scenario crashed: {process.stderr.strip()[-2000:]}", 0.0)
    return outcomes


_OUTCOME_PREFIX = "diffusers-patched scenario outcome: "


def _main(workdir, *names):
    for name in names:
        scenario_dir = Path(workdir) / name
        scenario_dir.mkdir()
        start = time.perf_counter()
        try:
            outcome = {"ok": True, "result": SCENARIOS[name].run(scenario_dir)}
        except Exception as e:
            traceback.print_exc()
            outcome = {"ok": False, "result": f"{type(e).__name__}: {e}"}
        outcome["seconds"] = time.perf_counter() - start
        print(_OUTCOME_PREFIX + json.dumps([name, outcome]), flush=True)


def record_from_pretrained_kwargs(model_class):
    """Record the kwargs every `model_class.from_pretrained` call really receives, still calling the real one."""
    calls = []
    real_from_pretrained = model_class.from_pretrained.__func__

    def from_pretrained(cls, *args, **kwargs):
        calls.append(kwargs)
        return real_from_pretrained(cls, *args, **kwargs)

    model_class.from_pretrained = classmethod(from_pretrained)
    return calls


@scenario(
    "bnb-text-encoder-with-device-map",
    patch="0001-pipelines-detect-bitsandbytes-in-load-sub-model.patch",
    summary="pipeline with a bnb 4-bit text encoder and device_map: kwargs given to transformers",
)
def bnb_text_encoder_with_device_map(workdir):
    from transformers import CLIPTextModel

    calls = record_from_pretrained_kwargs(CLIPTextModel)
    pipe = load_tiny_sd_pipeline(
        save_tiny_sd_pipeline(workdir / "pipe"), quantization_config=bnb_text_encoder_config(), device_map="cpu"
    )
    (kwargs,) = calls
    method = kwargs["quantization_config"].quantization_method()
    weight = pipe.text_encoder.encoder.layers[0].mlp.fc1.weight
    return (
        f"low_cpu_mem_usage={kwargs['low_cpu_mem_usage']} given to transformers for the {method} text encoder "
        f"({type(weight).__name__} weights) with device_map={kwargs['device_map']!r}"
    )


def _encode(text_encoder):
    import torch

    with torch.no_grad():
        return text_encoder(torch.tensor([[0, 5, 17, 99, 250, 2, 1, 1]]))[0]


def _diffs(text_encoder, expected, passes=3):
    return [round((_encode(text_encoder) - expected).abs().max().item(), 6) for _ in range(passes)]


def _state_dict_copy(model):
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def _equal_tensors(state_dict, expected):
    import torch

    return sum(name in state_dict and torch.equal(state_dict[name], tensor) for name, tensor in expected.items())


def _meta_statistics(model):
    """Names of 4-bit quantization statistics that are on the meta device."""
    names = []
    for name, module in model.named_modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if state is None:
            continue
        tensors = {"absmax": state.absmax, "code": state.code}
        if state.nested:
            tensors.update(offset=state.offset, nested_absmax=state.state2.absmax)
        names += [f"{name}.{key}" for key, tensor in tensors.items() if tensor.device.type == "meta"]
    return names


def _text_encoder_lora(text_encoder, rank=4):
    import torch

    generator = torch.Generator().manual_seed(0)
    state_dict = {}
    for name, module in text_encoder.named_modules():
        if name.endswith((".q_proj", ".v_proj", ".fc1")):
            state_dict[f"text_encoder.{name}.lora_A.weight"] = torch.randn(
                rank, module.in_features, generator=generator
            )
            state_dict[f"text_encoder.{name}.lora_B.weight"] = torch.randn(
                module.out_features, rank, generator=generator
            )
    return state_dict


def _make_bnb_offload_safe():
    """The patched helper, or None on upstream (the scenario then shows what upstream does without it)."""
    try:
        from diffusers.quantizers.bitsandbytes.utils import make_bnb_offload_safe
    except ImportError:
        return None
    return make_bnb_offload_safe


@scenario(
    "sequential-cpu-offload-on-cpu",
    patch="0002-sequential-offload-keeps-the-user-device.patch",
    summary="unquantized pipeline, enable_sequential_cpu_offload(device='cpu'), 3 text encoder passes",
)
def sequential_cpu_offload_on_cpu(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    expected = _encode(load_tiny_sd_pipeline(path).text_encoder)
    pipe = load_tiny_sd_pipeline(path)
    pipe.enable_sequential_cpu_offload(device="cpu")
    return f"offload device {pipe._offload_device}; max abs diff per pass {_diffs(pipe.text_encoder, expected)}"


@scenario(
    "bnb-4bit-sequential-cpu-offload",
    patch="0004-bnb-4bit-quant-state-survives-offload-hooks.patch",
    summary="nf4 double-quant text encoder under enable_sequential_cpu_offload(device='cpu'), 3 passes + state_dict",
)
def bnb_4bit_sequential_cpu_offload(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    config = bnb_text_encoder_config("nf4", double_quant=True)
    reference = load_tiny_sd_pipeline(path, quantization_config=config).text_encoder
    expected_state = reference.state_dict()
    expected = _encode(reference)
    pipe = load_tiny_sd_pipeline(path, quantization_config=config)
    pipe.enable_sequential_cpu_offload(device="cpu")
    diffs = _diffs(pipe.text_encoder, expected)
    state = pipe.text_encoder.state_dict()  # raises "Tensor.item() cannot be called on meta tensors" upstream
    expected_statistics = {k: v for k, v in expected_state.items() if ".weight." in k}
    return (
        f"max abs diff per pass {diffs}; {len(_meta_statistics(pipe.text_encoder))} statistics on meta; "
        f"{_equal_tensors(state, expected_statistics)}/{len(expected_statistics)} state_dict statistics equal"
    )


@scenario(
    "bnb-4bit-offload-twice-then-model-offload",
    patch="0004-bnb-4bit-quant-state-survives-offload-hooks.patch",
    summary="nf4 text encoder: enable_sequential_cpu_offload twice, then enable_model_cpu_offload, passes after each",
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
    return f"max abs diff per pass {diffs}"


@scenario(
    "bnb-4bit-lora-while-sequentially-offloaded",
    patch="0004-bnb-4bit-quant-state-survives-offload-hooks.patch",
    summary="load_lora_weights into an nf4 text encoder while sequentially offloaded on the CPU, vs. no offload",
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
    return f"offload device {pipe._offload_device}; max abs diff per pass {_diffs(pipe.text_encoder, expected)}"


@scenario(
    "lora-into-bnb-text-encoder",
    patch="0003-lora-keep-quantized-text-encoder-dtype.patch",
    summary="load_lora_weights into an fp4 text encoder (no offloading)",
)
def lora_into_bnb_text_encoder(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe")
    pipe = load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config("fp4"))
    pipe.load_lora_weights(_text_encoder_lora(pipe.text_encoder))
    return f"adapters {sorted(pipe.text_encoder.peft_config)} on a quantized text encoder: {pipe.text_encoder.is_quantized}"


@scenario(
    "bnb-8bit-sequential-offload-and-lora",
    patch="0002-sequential-offload-keeps-the-user-device.patch",
    summary="8-bit text encoder under enable_sequential_cpu_offload(device='cpu'), then load_lora_weights, vs. no offload",
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
    expected_with_lora = _encode(reference.text_encoder)
    return (
        f"max abs diff per pass {diffs}; with the LoRA loaded while offloaded "
        f"{_diffs(pipe.text_encoder, expected_with_lora)}"
    )


@scenario(
    "save-offloaded-pipeline",
    patch="0011-save-offloaded-weights-not-meta-placeholders.patch",
    summary="pipeline with an 8-bit, then an nf4 text encoder, offloaded by accelerate's hooks: save_pretrained, reload",
)
def save_offloaded_pipeline(workdir):
    import torch
    from accelerate import cpu_offload

    path = save_tiny_sd_pipeline(workdir / "pipe")
    make_bnb_offload_safe = _make_bnb_offload_safe()
    results = []
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
        # a CPU-only machine (patch 0002), and this scenario is about saving.
        for model in (pipe.text_encoder, pipe.unet, pipe.vae):
            cpu_offload(model, torch.device("cpu"))
        _encode(pipe.text_encoder)
        pipe.save_pretrained(workdir / f"saved-{kind}")
        saved = load_tiny_sd_pipeline(workdir / f"saved-{kind}", quantization_config=config)
        results.append(
            f"{kind}: {_equal_tensors(saved.text_encoder.state_dict(), expected_text_encoder)}/"
            f"{len(expected_text_encoder)} text encoder and {_equal_tensors(saved.unet.state_dict(), expected_unet)}/"
            f"{len(expected_unet)} unet tensors equal, max abs diff {_diffs(saved.text_encoder, expected, passes=1)}"
        )
    return "; ".join(results)


@scenario(
    "bnb-4bit-dispatch-cpu-disk-then-peft",
    patch="0004-bnb-4bit-quant-state-survives-offload-hooks.patch",
    summary="transformers 4-bit double-quant model, dispatch_model with cpu + disk, PeftModel.from_pretrained",
)
def bnb_4bit_dispatch_cpu_disk_then_peft(workdir):
    import torch
    from accelerate import dispatch_model
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(workdir / "model")
    lora = LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
    get_peft_model(model, lora).save_pretrained(workdir / "adapter")

    def load():
        quantization_config = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.float32,
        )
        return AutoModelForCausalLM.from_pretrained(workdir / "model", quantization_config=quantization_config).eval()

    def logits(model):
        with torch.no_grad():
            return model(torch.tensor([[1, 7, 42, 99, 200, 3]])).logits

    expected = logits(PeftModel.from_pretrained(load(), workdir / "adapter"))
    model = load()
    make_bnb_offload_safe = _make_bnb_offload_safe()
    covered = make_bnb_offload_safe(model) if make_bnb_offload_safe else None
    device_map = {
        "model.embed_tokens": "cpu",
        "model.rotary_emb": "cpu",
        "model.layers.0": "cpu",
        "model.layers.1": "disk",
        "model.norm": "cpu",
        "lm_head": "disk",
    }
    model = dispatch_model(model, device_map=device_map, offload_dir=workdir / "offload")
    model = PeftModel.from_pretrained(model, workdir / "adapter")
    diffs = [round((logits(model) - expected).abs().max().item(), 6) for _ in range(3)]
    return f"make_bnb_offload_safe covered {covered} weights; max abs diff to the un-offloaded adapter model {diffs}"


@contextmanager
def _missing_keys_warnings():
    """The missing-keys warnings diffusers logs inside the block (scenarios share one interpreter: detach after)."""
    messages = []

    class Handler(logging.Handler):
        def emit(self, record):
            if "not found in the checkpoint" in record.getMessage():
                messages.append(record.getMessage())

    handler = Handler(logging.WARNING)
    logging.getLogger("diffusers").addHandler(handler)
    try:
        yield messages
    finally:
        logging.getLogger("diffusers").removeHandler(handler)


def _wan22_typed_as_wan21(workdir, fmt):
    import torch
    from diffusers import GGUFQuantizationConfig, WanTransformer3DModel

    from .tiny_checkpoints import (
        build_wan,
        meta_tensors,
        wan_config,
        wan_original_state_dict,
        write_config_dir,
        write_gguf,
        write_safetensors,
    )

    state_dict = wan_original_state_dict(build_wan(wan_config("wan2.2-i2v")))
    path = str(workdir / f"wan22_i2v.{fmt}")
    (write_safetensors if fmt == "safetensors" else write_gguf)(state_dict, path)
    config = write_config_dir("WanTransformer3DModel", wan_config("wan2.1-i2v"), str(workdir / "wan21_i2v"))
    kwargs = {"quantization_config": GGUFQuantizationConfig(compute_dtype=torch.float32)} if fmt == "gguf" else {}
    with _missing_keys_warnings() as warnings:
        model = WanTransformer3DModel.from_single_file(path, config=config, local_files_only=True, **kwargs)
    count = warnings[0].split(": ", 1)[1].split(" keys")[0] if warnings else "0"
    return (
        f"loaded, {len(meta_tensors(model))} meta tensors left; {count} missing keys zero-initialized, "
        f"{len(warnings)} warning(s)"
    )


@scenario(
    "single-file-wan22-i2v-as-wan21-safetensors",
    patch="0005-materialize-tensors-left-on-meta-in-from-single-file.patch",
    summary="Wan2.2-I2V-like single file (safetensors) loaded with a Wan2.1-I2V config: keys missing",
)
def wan22_typed_as_wan21_safetensors(workdir):
    return _wan22_typed_as_wan21(workdir, "safetensors")


@scenario(
    "single-file-wan22-i2v-as-wan21-gguf",
    patch="0005-materialize-tensors-left-on-meta-in-from-single-file.patch",
    summary="Wan2.2-I2V-like single file (GGUF Q8_0) loaded with a Wan2.1-I2V config: keys missing",
)
def wan22_typed_as_wan21_gguf(workdir):
    return _wan22_typed_as_wan21(workdir, "gguf")


@scenario(
    "single-file-include-buffers",
    patch="0005-materialize-tensors-left-on-meta-in-from-single-file.patch",
    summary="single-file Wan with ACCELERATE_INIT_INCLUDE_BUFFERS=1: RoPE buffers created on meta",
)
def include_buffers(workdir):
    import torch
    from diffusers import WanTransformer3DModel

    from .tiny_checkpoints import (
        build_wan,
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
    os.environ["ACCELERATE_INIT_INCLUDE_BUFFERS"] = "1"
    try:
        model = WanTransformer3DModel.from_single_file(path, config=config, local_files_only=True)
    finally:
        del os.environ["ACCELERATE_INIT_INCLUDE_BUFFERS"]  # scenarios share one interpreter
    inputs = wan_inputs(wan_config("t2v"))
    with torch.no_grad():
        equal = torch.equal(model(**inputs)[0], reference(**inputs)[0])
    rope = torch.equal(model.rope.freqs_cos, reference.rope.freqs_cos)
    return f"loaded, {len(meta_tensors(model))} meta tensors left; RoPE equal: {rope}; output equal: {equal}"


@scenario(
    "single-file-wan22-detection",
    patch="0006-tell-wan2-2-single-file-checkpoints-apart-from-wan2.patch",
    summary="config picked for Wan2.2-I2V-A14B and Wan2.2-TI2V-5B single files (shapes only)",
)
def wan22_detection(workdir):
    from diffusers.loaders.single_file_utils import fetch_diffusers_config

    from .tiny_checkpoints import wan_detection_checkpoint

    picked = [
        fetch_diffusers_config(wan_detection_checkpoint(name))["pretrained_model_name_or_path"]
        for name in ("wan2.2-i2v-A14B", "wan2.2-ti2v-5B")
    ]
    if picked[0].startswith("Wan-AI/Wan2.1"):
        raise ValueError(f"Wan2.2-I2V-A14B typed as {picked[0]}, Wan2.2-TI2V-5B as {picked[1]}")
    return f"Wan2.2-I2V-A14B -> {picked[0]}, Wan2.2-TI2V-5B -> {picked[1]}"


# A text encoder wide enough that its Linear weights dominate: 7.42 MB in float32, 2.02 MB in nf4.
DEVICE_MAP_TEXT_ENCODER = {"hidden_size": 256, "intermediate_size": 1024}
GPU_BUDGET_FITS_ONLY_QUANTIZED = 7_200_000


@scenario(
    "bnb-device-map-balanced-plan",
    patch="0007-size-quantized-components-as-they-will-be-loaded.patch",
    summary='nf4 text encoder, device_map="balanced", GPU 0 budgets of 7.2 / 3 / 0.5 MB: the plan',
)
def bnb_device_map_balanced_plan(workdir):
    path = save_tiny_sd_pipeline(workdir / "pipe", text_encoder_kwargs=DEVICE_MAP_TEXT_ENCODER)
    plans = {
        name: plan_with_budget(path, gpu, quantization_config=bnb_text_encoder_config())
        for name, gpu in (("7.2 MB", GPU_BUDGET_FITS_ONLY_QUANTIZED), ("3 MB", 3_000_000), ("0.5 MB", 500_000))
    }
    return "; ".join(f"GPU 0 {name}: {plan}" for name, plan in plans.items())


@scenario(
    "bnb-text-encoder-planned-on-cpu",
    patch="0010-run-bitsandbytes-components-planned-on-the-cpu-there.patch",
    summary='nf4 text encoder planned on "cpu" by device_map="balanced": load, run, compare to an un-offloaded run',
)
def bnb_text_encoder_planned_on_cpu(workdir):
    import torch

    path = save_tiny_sd_pipeline(workdir / "pipe", text_encoder_kwargs=DEVICE_MAP_TEXT_ENCODER)
    config = bnb_text_encoder_config(double_quant=True)
    reference = load_tiny_sd_pipeline(path, quantization_config=config)
    pipe = load_with_plan(
        path, {"text_encoder": "cpu"}, quantization_config=bnb_text_encoder_config(double_quant=True)
    )
    input_ids = fixed_text_input()
    with torch.no_grad():
        diffs = [
            (pipe.text_encoder(input_ids)[0] - reference.text_encoder(input_ids)[0]).abs().max().item()
            for _ in range(3)
        ]
    weight = pipe.text_encoder.encoder.layers[0].mlp.fc1.weight
    return (
        f"hf_device_map={pipe.hf_device_map}; text encoder weights {type(weight).__name__} on {weight.device}, "
        f"absmax on {weight.quant_state.absmax.device}; max abs diff to an un-offloaded run over 3 passes: {max(diffs)}"
    )


if __name__ == "__main__":
    _main(*sys.argv[1:])
