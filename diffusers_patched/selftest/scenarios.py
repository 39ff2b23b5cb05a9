"""Known upstream failures, each as a scenario that builds tiny models locally and runs one user flow.

`make demo` and the tests run every scenario twice in subprocesses: on upstream (`DIFFUSERS_PATCHED=0`) and
with diffusers-patched. A scenario returns a JSON-serializable dict of what it measured (max abs diffs, counts,
devices, ...), or raises the error a user would see; the demo renders the dict with the scenario's `text` template,
the tests assert on its values.
"""

import copy
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional
from unittest import mock

from .judges import FAILS, REFUSED, RIGHT, WRONG, close
from .tiny_pipelines import (
    TINY_AUDIO_VAES,
    TINY_DECODER_VAES,
    bnb_text_encoder_config,
    fixed_text_input,
    load_tiny_sd_pipeline,
    load_with_plan,
    offload_diff,
    plan_with_budget,
    recording_weight_reads,
    save_tiny_sd_pipeline,
)


SCENARIOS = {}


@dataclass
class Scenario:
    name: str
    patch: str
    summary: str
    # `str.format` template over the result dict: the demo's one-line text of a scenario that returned.
    text: str
    run: Callable
    # result dict -> (RIGHT / WRONG / REFUSED, the figure that decides it).
    judge: Optional[Callable] = None
    # A guard, not a fix: upstream behaves the same (the scenario shows that the patches do not change it).
    guard: bool = False


@dataclass
class Outcome:
    result: Optional[dict]
    # {"type": exception class name, "message": str(exception)} when the scenario raised, else None.
    error: Optional[dict]
    seconds: float

    @property
    def ok(self):
        return self.error is None

    def describe(self, scenario):
        if self.ok:
            return scenario.text.format(**self.result)
        return f"{self.error['type']}: {self.error['message']}"

    def verdict(self, scenario):
        """(verdict, figure): FAILS with the error a user reads, else the scenario's judgement of its result."""
        if not self.ok:
            return FAILS, f"{self.error['type']}: {self.error['message']}"
        return scenario.judge(self.result)


def scenario(name, patch, summary, text, judge=None, guard=False, registry=SCENARIOS):
    def register(run):
        registry[name] = Scenario(name, patch, summary, text, run, judge, guard)
        return run

    return register


def error_of(exception):
    return {"type": type(exception).__name__, "message": str(exception)}


def run_scenarios(names, patched, module="diffusers_patched.selftest.scenarios", cuda=False, site=None, log=None):
    """Run scenarios in one fresh interpreter (imports dominate their cost), with or without the patches.

    Each scenario works in its own directory on models it builds itself; an error in one ends only that one. `module`
    holds the scenarios (`diffusers_patched.selftest.gpu_scenarios` for the CUDA ones). Without `cuda`, CUDA devices are hidden:
    on a GPU machine, transformers and diffusers would otherwise load bitsandbytes models onto GPU 0 by themselves,
    and a CPU scenario would no longer be about the CPU. `site`: a directory with another diffusers release and its
    diffusers-patched (tools/wheels.py `release_site`), first on the path. `log`: a file to keep the interpreter's
    stderr in.
    """
    env = {**os.environ, "DIFFUSERS_PATCHED": "1" if patched else "0", "HF_HUB_OFFLINE": "1"}
    if not cuda:
        env["CUDA_VISIBLE_DEVICES"] = ""
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory() as workdir:
        process = subprocess.run(
            [sys.executable, "-m", module, workdir, *names],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
        )
    if log is not None:
        Path(log).write_text(process.stderr)
    return read_outcomes(process.stdout, process.stderr, names)


def read_outcomes(stdout, stderr, names):
    """{name: Outcome} from what a scenario interpreter printed; a scenario it did not report crashed it."""
    outcomes = {}
    for line in stdout.splitlines():
        if line.startswith(_OUTCOME_PREFIX):
            name, outcome = json.loads(line[len(_OUTCOME_PREFIX) :])
            outcomes[name] = Outcome(**outcome)
    for name in names:
        if name not in outcomes:
            crash = {"type": "ScenarioCrashed", "message": stderr.strip()[-2000:]}
            outcomes[name] = Outcome(None, crash, 0.0)
    return outcomes


def run_each_apart(names, patched, module, cuda=False, log_dir=None):
    """`run_scenarios` for each scenario in an interpreter of its own, half the cores' worth at a time: a CUDA fault
    leaves the process it happens in unusable, and must not take the other flows with it. `log_dir`: where each
    interpreter's stderr is kept (`<side>-<name>.stderr`)."""
    side = "patched" if patched else "upstream"

    def run(name):
        log = None if log_dir is None else Path(log_dir) / f"{side}-{name}.stderr"
        return run_scenarios([name], patched, module=module, cuda=cuda, log=log)

    outcomes = {}
    with ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2) // 2)) as pool:
        for outcome in pool.map(run, names):
            outcomes.update(outcome)
    return outcomes


_OUTCOME_PREFIX = "diffusers-patched scenario outcome: "


def _main(registry, workdir, *names):
    import torch

    # As upstream's `enable_full_determinism`, and for its side effect: `torch.empty` fills its memory with NaN, so a
    # flow that reads memory it never wrote reads wrong on every run, not only when the allocator hands back garbage.
    torch.use_deterministic_algorithms(True, warn_only=True)
    for name in names:
        scenario_dir = Path(workdir) / name
        scenario_dir.mkdir()
        start = time.perf_counter()
        try:
            outcome = {"result": registry[name].run(scenario_dir), "error": None}
        except Exception as e:
            traceback.print_exc()
            outcome = {"result": None, "error": error_of(e)}
        outcome["seconds"] = time.perf_counter() - start
        print(_OUTCOME_PREFIX + json.dumps([name, outcome]), flush=True)


@contextmanager
def recording_from_pretrained_kwargs(model_class):
    """Record the kwargs every `model_class.from_pretrained` call receives inside the block, still calling the real one.

    Scenarios share one interpreter: the real classmethod is back once the block ends.
    """
    calls = []
    real_from_pretrained = model_class.from_pretrained.__func__

    def from_pretrained(cls, *args, **kwargs):
        calls.append(kwargs)
        return real_from_pretrained(cls, *args, **kwargs)

    with mock.patch.object(model_class, "from_pretrained", classmethod(from_pretrained)):
        yield calls


@contextmanager
def diffusers_log_messages(level, containing):
    """The messages containing `containing` that diffusers logs at `level` or above inside the block.

    Scenarios share one interpreter: the handler is detached and the logger's level restored once the block ends.
    """
    messages = []

    class Handler(logging.Handler):
        def emit(self, record):
            if containing in record.getMessage():
                messages.append(record.getMessage())

    logger = logging.getLogger("diffusers")
    handler = Handler(level)
    previous_level = logger.level
    logger.setLevel(min(level, logger.getEffectiveLevel()))
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def _judge_bnb_text_encoder_with_device_map(result):
    if result["low_cpu_mem_usage"] is False and result["weight_type"] == "Params4bit":
        return RIGHT, f"{result['quantization_method']} text encoder loaded with low_cpu_mem_usage=False"
    return WRONG, f"low_cpu_mem_usage={result['low_cpu_mem_usage']} under a device_map, unnoticed"


@scenario(
    "bnb-text-encoder-with-device-map",
    patch="pipelines-detect-bitsandbytes-in-load-sub-model.patch",
    summary="pipeline with a bnb 4-bit text encoder and device_map: kwargs given to transformers",
    text=(
        "low_cpu_mem_usage={low_cpu_mem_usage} given to transformers for the {quantization_method} text encoder "
        "({weight_type} weights) with device_map={device_map!r}; logged: {logged}"
    ),
    judge=_judge_bnb_text_encoder_with_device_map,
)
def bnb_text_encoder_with_device_map(workdir):
    from transformers import CLIPTextModel

    path = save_tiny_sd_pipeline(workdir / "pipe")
    with recording_from_pretrained_kwargs(CLIPTextModel) as calls:
        with diffusers_log_messages(logging.INFO, "low_cpu_mem_usage") as logged:
            pipe = load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config(), device_map="cpu")
    (kwargs,) = calls
    return {
        "low_cpu_mem_usage": kwargs["low_cpu_mem_usage"],
        "quantization_method": kwargs["quantization_config"].quantization_method(),
        "device_map": kwargs["device_map"],
        "weight_type": type(_first_mlp_weight(pipe.text_encoder)).__name__,
        "logged": logged,
    }


def _clip_text_modules(text_encoder):
    # transformers 5.x moved CLIPTextModel's `text_model` modules onto the model itself.
    return getattr(text_encoder, "text_model", text_encoder)


def _first_mlp_weight(text_encoder):
    return _clip_text_modules(text_encoder).encoder.layers[0].mlp.fc1.weight


def _encode(text_encoder, device="cpu"):
    import torch

    with torch.no_grad():
        return text_encoder(torch.tensor([[0, 5, 17, 99, 250, 2, 1, 1]], device=device))[0]


def _diffs(text_encoder, expected, passes=3, device="cpu"):
    """Max abs difference of the text encoder's output to `expected`, on each of `passes` passes."""
    return [(_encode(text_encoder, device) - expected).abs().max().item() for _ in range(passes)]


def _state_dict_copy(model):
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def _equal_tensors(state_dict, expected):
    import torch

    return sum(name in state_dict and torch.equal(state_dict[name], tensor) for name, tensor in expected.items())


def _quant_statistics(state_dict):
    """The 4-bit quantization statistics (absmax, quant_map, ...) a state dict holds next to the weights."""
    return {name: tensor for name, tensor in state_dict.items() if ".weight." in name}


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


def _text_encoder_lora(text_encoder, rank=4, prefix="text_encoder", targets=(".q_proj", ".v_proj", ".fc1")):
    """A LoRA for `load_lora_weights`: random A and B for the Linear layers named `*targets` (the unet's: `prefix="unet"`)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    state_dict = {}
    for name, module in text_encoder.named_modules():
        if name.endswith(targets):
            state_dict[f"{prefix}.{name}.lora_A.weight"] = torch.randn(rank, module.in_features, generator=generator)
            state_dict[f"{prefix}.{name}.lora_B.weight"] = torch.randn(module.out_features, rank, generator=generator)
    return state_dict


def _make_bnb_offload_safe():
    """The patched helper, or None on upstream (the scenario then shows what upstream does without it)."""
    try:
        from diffusers.quantizers.bitsandbytes.utils import make_bnb_offload_safe
    except ImportError:
        return None
    return make_bnb_offload_safe


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
    patch="bnb-4bit-quant-state-survives-offload-hooks.patch",
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
    patch="bnb-4bit-quant-state-survives-offload-hooks.patch",
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


def _judge_diffs(result):
    return close(result["diffs"])


@scenario(
    "bnb-4bit-offload-twice-then-model-offload",
    patch="bnb-4bit-quant-state-survives-offload-hooks.patch",
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


@scenario(
    "bnb-4bit-lora-while-sequentially-offloaded",
    patch="bnb-4bit-quant-state-survives-offload-hooks.patch",
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


def _accelerate_hooks(model):
    """{module: (hook object, [(hook class, execution device, offload, weights map keys), ...])} of hooked modules."""
    from accelerate.hooks import SequentialHook

    hooks = {}
    for module in model.modules():
        hook = getattr(module, "_hf_hook", None)
        if hook is not None:
            chain = hook.hooks if isinstance(hook, SequentialHook) else [hook]
            hooks[module] = (hook, [_describe_hook(h) for h in chain])
    return hooks


def _describe_hook(hook):
    weights_map = getattr(hook, "weights_map", None)
    keys = None if weights_map is None else sorted(weights_map)
    return [type(hook).__name__, str(getattr(hook, "execution_device", None)), getattr(hook, "offload", None), keys]


def _unet_output(unet):
    import torch

    generator = torch.Generator().manual_seed(0)
    inputs = (
        torch.randn(1, unet.config.in_channels, 16, 16, generator=generator),
        10,
        torch.randn(1, 8, unet.config.cross_attention_dim, generator=generator),
    )
    with torch.no_grad():
        return unet(*inputs).sample


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
    patch="bnb-4bit-quant-state-survives-offload-hooks.patch",
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


LLAMA_CPU_DISK_MAP = {
    "model.embed_tokens": "cpu",
    "model.rotary_emb": "cpu",
    "model.layers.0": "cpu",
    "model.layers.1": "disk",
    "model.norm": "cpu",
    "lm_head": "disk",
}


def load_tiny_llama_4bit(workdir, **kwargs):
    """The Llama of `save_tiny_llama_with_adapter`, nf4 with double quant, computing in float32."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    quantization_config = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.float32,
        **kwargs.pop("quantization_kwargs", {}),
    )
    return AutoModelForCausalLM.from_pretrained(
        workdir / "model", quantization_config=quantization_config, **kwargs
    ).eval()


def save_tiny_llama_with_adapter(workdir):
    """A 2-layer Llama saved to `workdir / "model"`, and a LoRA for it (non-zero B) to `workdir / "adapter"`."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

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


def llama_logits(model, device="cpu"):
    import torch

    with torch.no_grad():
        return model(torch.tensor([[1, 7, 42, 99, 200, 3]], device=device)).logits


def _wan22_typed_as_wan21(workdir, fmt):
    from diffusers import WanTransformer3DModel

    from .tiny_checkpoints import (
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

    from .tiny_checkpoints import (
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

    from .tiny_checkpoints import (
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

    from .tiny_checkpoints import meta_tensors

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


def _judge_gguf_sequential_offload(result):
    if not result["quantized"]:
        return WRONG, "weights no longer GGUF-quantized"
    return close(result["diffs"])


@scenario(
    "gguf-sequential-offload",
    patch="gguf-parameter-keeps-quant-type-when-rebuilt.patch",
    summary="GGUF (Q8_0) Wan transformer under sequential offload hooks; a LoRA loaded while offloaded; saved",
    text=(
        "max abs diff to the un-offloaded model per pass {diffs} (passes 4-6 with a LoRA loaded while offloaded); "
        "weights still GGUF-quantized: {quantized}; save_pretrained: {save_error}"
    ),
    judge=_judge_gguf_sequential_offload,
)
def gguf_sequential_offload(workdir):
    import torch
    from accelerate import cpu_offload
    from accelerate.hooks import remove_hook_from_module
    from diffusers.quantizers.gguf.utils import GGUFParameter
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    from .tiny_checkpoints import (
        build_wan,
        load_wan_single_file,
        wan_config,
        wan_inputs,
        wan_original_state_dict,
        write_config_dir,
        write_gguf,
    )

    path = write_gguf(wan_original_state_dict(build_wan(wan_config("t2v"))), str(workdir / "wan.gguf"))
    config = write_config_dir("WanTransformer3DModel", wan_config("t2v"), str(workdir / "cfg"))

    model, reference = load_wan_single_file(path, config), load_wan_single_file(path, config)
    inputs = wan_inputs(wan_config("t2v"))
    with torch.no_grad():
        expected = [reference(**inputs)[0]]
        lora_config = LoraConfig(r=4, lora_alpha=4, target_modules=["to_q", "to_k"], init_lora_weights=False)
        reference.add_adapter(lora_config)
        expected.append(reference(**inputs)[0])
    lora = {f"transformer.{key}": value for key, value in get_peft_model_state_dict(reference).items()}
    diffs = []
    for with_lora in (False, True):
        if with_lora:
            # What the LoRA loaders do while sequential offload is on: remove the hooks, load, offload again.
            remove_hook_from_module(model, recurse=True)
            model.load_lora_adapter(lora, prefix="transformer")
        cpu_offload(model, execution_device=torch.device("cpu"))
        with torch.no_grad():
            diffs += [(model(**inputs)[0] - expected[with_lora]).abs().max().item() for _ in range(3)]
        if not with_lora:
            try:
                model.save_pretrained(workdir / "saved")
                save_error = None
            except ValueError as e:
                save_error = str(e)
    return {
        "diffs": diffs,
        "quantized": isinstance(model.blocks[0].ffn.net[2].weight, GGUFParameter),
        "save_error": save_error,
    }


def _judge_fuse_lora_into_gguf(result):
    # Fusing adds the LoRA delta to the dequantized weight: the output equals the unfused LoRA's up to float32 rounding.
    # unfuse_lora must put back the very GGUF bytes (counted bit for bit).
    if result["restored"] != result["quantized_weights"] or result["meta_tensors"]:
        return WRONG, (
            f"{result['restored']}/{result['quantized_weights']} GGUF weights restored, {result['meta_tensors']} on meta"
        )
    return close(result["fused_diffs"], what="fused vs unfused LoRA max abs diff")


@scenario(
    "fuse-lora-into-gguf",
    patch="fuse-lora-into-gguf-quantized-weights.patch",
    summary="Wan2.2-like pair of GGUF (Q8_0) experts, a lightx2v-style LoRA each: pipe.fuse_lora(), pipe.unfuse_lora()",
    text=(
        "fused vs unfused LoRA, max abs diff per expert {fused_diffs}; fused weights {fused_weight}, {fused_bytes} "
        "bytes (plus the {quantized_bytes} quantized bytes kept for unfuse_lora); unfuse_lora put back "
        "{restored}/{quantized_weights} GGUF weights bit for bit; {meta_tensors} meta tensors"
    ),
    judge=_judge_fuse_lora_into_gguf,
)
def fuse_lora_into_gguf(workdir):
    import torch
    from diffusers.quantizers.gguf.utils import GGUFParameter
    from peft.tuners.tuners_utils import BaseTunerLayer

    from .tiny_checkpoints import (
        build_wan,
        load_wan_single_file,
        meta_tensors,
        wan_config,
        wan_inputs,
        wan_lightx2v_lora,
        wan_original_state_dict,
        wan_transformer_pipeline,
        write_config_dir,
        write_gguf,
    )

    config = wan_config("t2v")
    config_dir = write_config_dir("WanTransformer3DModel", config, str(workdir / "cfg"))
    experts = []
    for seed in (0, 1):
        path = write_gguf(wan_original_state_dict(build_wan(config, seed=seed)), str(workdir / f"expert{seed}.gguf"))
        experts.append(load_wan_single_file(path, config_dir))
    pipe = wan_transformer_pipeline(*experts)
    pipe.load_lora_weights(wan_lightx2v_lora(config, seed=1), adapter_name="lightx2v")
    pipe.load_lora_weights(wan_lightx2v_lora(config, seed=2), adapter_name="lightx2v", load_into_transformer_2=True)

    def lora_weights():
        return [
            module.get_base_layer().weight
            for expert in experts
            for module in expert.modules()
            if isinstance(module, BaseTunerLayer)
        ]

    quantized = {
        (index, name): (param.as_tensor().clone(), param.quant_type)
        for index, expert in enumerate(experts)
        for name, param in expert.named_parameters()
        if isinstance(param, GGUFParameter)
    }
    inputs = wan_inputs(config)
    with torch.no_grad():
        expected = [expert(**inputs)[0] for expert in experts]
    quantized_bytes = sum(weight.nbytes for weight in lora_weights())

    pipe.fuse_lora(components=["transformer", "transformer_2"])
    with torch.no_grad():
        fused_diffs = [(expert(**inputs)[0] - e).abs().max().item() for expert, e in zip(experts, expected)]
    fused_weight = lora_weights()[0]
    fused_bytes = sum(weight.nbytes for weight in lora_weights())

    pipe.unfuse_lora(components=["transformer", "transformer_2"])
    restored = 0
    for index, expert in enumerate(experts):
        for name, param in expert.named_parameters():
            if (index, name) in quantized and isinstance(param, GGUFParameter):
                data, quant_type = quantized[(index, name)]
                restored += param.quant_type == quant_type and torch.equal(param.as_tensor(), data)
    return {
        "fused_diffs": fused_diffs,
        "fused_weight": f"{type(fused_weight).__name__} {fused_weight.dtype}",
        "fused_bytes": fused_bytes,
        "quantized_bytes": quantized_bytes,
        "restored": restored,
        "quantized_weights": len(quantized),
        "meta_tensors": sum(len(meta_tensors(expert)) for expert in experts),
    }


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


def _judge_fuse_lora_group_offloaded_to_disk(result):
    if result["refused"]:
        verdict, figure = close(result["diffs_after_refusal"], what="then output max abs diff to the LoRA's unfused")
        return (REFUSED, f"{result['refused'].split(':')[0]}; {figure}") if verdict == RIGHT else (verdict, figure)
    return close(result["fused_diffs"], what="fused: output max abs diff to fusing unoffloaded")


@scenario(
    "fuse-lora-group-offloaded-to-disk",
    patch="fuse-lora-into-offloaded-weights.patch",
    summary="unet with a LoRA, leaf-level group offloading to disk: pipe.fuse_lora(), vs. the same without offloading",
    text=(
        "refused: {refused}, then max abs diff {diffs_after_refusal} / fused: max abs diff {fused_diffs} (the LoRA "
        "moves the output by {lora_effects})"
    ),
    judge=_judge_fuse_lora_group_offloaded_to_disk,
)
def fuse_lora_group_offloaded_to_disk(workdir):
    import torch

    path = save_tiny_sd_pipeline(workdir / "pipe")
    expected_with_lora, expected_fused, _ = _lora_fused_and_unfused_outputs(path)
    pipe = load_tiny_sd_pipeline(path)
    without_lora = _unet_output(pipe.unet)
    pipe.load_lora_weights(_sd_lora(pipe))
    pipe.unet.enable_group_offload(
        torch.device("cpu"), offload_type="leaf_level", offload_to_disk_path=str(workdir / "offload")
    )
    result = {"lora_effects": [(expected_fused[1] - without_lora).abs().max().item()]}
    try:
        pipe.fuse_lora(components=["unet"])
    except ValueError as e:
        # Nothing fused: the LoRA still applies on top of the weights.
        diffs = [(_unet_output(pipe.unet) - expected_with_lora[1]).abs().max().item()]
        return {**result, "refused": str(e), "diffs_after_refusal": diffs, "fused_diffs": None}
    diffs = [(_unet_output(pipe.unet) - expected_fused[1]).abs().max().item()]
    return {**result, "refused": None, "diffs_after_refusal": None, "fused_diffs": diffs}


def _judge_save_model_with_lora_injected(result):
    if result["refused"]:
        return REFUSED, result["refused"].split(":")[0]
    _, figure = close([result["output_diff"]], what="output max abs diff")
    return WRONG, f"saved; reloaded with {result['meta_tensors']} tensors on meta, {figure}"


@scenario(
    "save-model-with-lora-injected",
    patch="refuse-to-save-a-model-with-lora-adapters-injected.patch",
    summary="UNet with a LoRA fused then unfused (adapters still injected): save_pretrained, from_pretrained",
    text="refused: {refused} / saved, reloaded with {meta_tensors} tensors on meta, output max abs diff {output_diff}",
    judge=_judge_save_model_with_lora_injected,
)
def save_model_with_lora_injected(workdir):
    import torch
    from diffusers import UNet2DConditionModel
    from peft import LoraConfig

    from .tiny_checkpoints import meta_tensors

    path = save_tiny_sd_pipeline(workdir / "pipe")
    unet = UNet2DConditionModel.from_pretrained(path, subfolder="unet")
    unet.add_adapter(LoraConfig(r=4, lora_alpha=4, target_modules=["to_q", "to_k", "to_v"], init_lora_weights=False))
    unet.fuse_lora()
    unet.unfuse_lora()
    try:
        unet.save_pretrained(workdir / "saved")
    except ValueError as e:
        return {"refused": str(e), "meta_tensors": None, "output_diff": None}
    # Upstream saved PEFT's wrapped keys; from_pretrained leaves the weights it does not find there on meta, silently.
    loaded = UNet2DConditionModel.from_pretrained(workdir / "saved")
    generator = torch.Generator().manual_seed(0)
    inputs = (
        torch.randn(1, unet.config.in_channels, 16, 16, generator=generator),
        10,
        torch.randn(1, 4, unet.config.cross_attention_dim, generator=generator),
    )
    with torch.no_grad():
        output_diff = (loaded(*inputs).sample - unet(*inputs).sample).abs().max().item()
    return {"refused": None, "meta_tensors": len(meta_tensors(loaded)), "output_diff": output_diff}


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

    from .tiny_checkpoints import build_wan, constructor_valued, meta_tensors, wan_config, wan_inputs

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

    from .tiny_pipelines import save_tiny_ltx_pipeline

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
    from .tiny_pipelines import tiny_ltx_video

    complete, without_multiplier = save_ltx_repos_with_and_without_multiplier(workdir)
    _, expected = tiny_ltx_video(complete)
    pipe, video = tiny_ltx_video(without_multiplier)
    return {
        "multiplier": pipe.vae.decoder.timestep_scale_multiplier.item(),
        "video_diff": (video - expected).abs().max().item(),
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

    from .tiny_checkpoints import (
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

    from .tiny_checkpoints import WAN_REAL, wan_detection_checkpoint

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

    from .tiny_checkpoints import (
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


# A text encoder wide enough that its Linear weights dominate: 7.42 MB in float32, 2.02 MB in nf4.
DEVICE_MAP_TEXT_ENCODER = {"hidden_size": 256, "intermediate_size": 1024}
GPU_BUDGET_FITS_ONLY_QUANTIZED = 7_200_000
# unet (4.2 MB) and vae fit, the nf4 text encoder (1.92 MB) no longer does.
GPU_BUDGET_TEXT_ENCODER_ON_CPU = 5_000_000
# name -> (GPU 0 budget, CPU budget) of the device_map="balanced" plans the scenario computes
PLAN_BUDGETS = {
    "fits only quantized": (GPU_BUDGET_FITS_ONLY_QUANTIZED, "1GB"),
    "two of three fit": (3_000_000, "1GB"),
    "none fits GPU 0": (500_000, "1GB"),
    "none fits anywhere": (500_000, 5_000_000),
}


def _judge_bnb_device_map_balanced_plan(result):
    # The right plans: the 4-bit text encoder fits where its unquantized size would not, every component that does not
    # fit an accelerator is planned on the CPU, and a plan that fits nowhere is refused before loading.
    plans = result["plans"]
    if result["weight_reads"] or not result["weight_reads_of_a_load"]:
        return WRONG, f"{result['weight_reads']} weight files read while planning"
    if plans["fits only quantized"].get("text_encoder") != 0:
        return WRONG, f"the nf4 text encoder planned on {plans['fits only quantized'].get('text_encoder')!r}"
    if len(plans["none fits GPU 0"]) != 3:
        return WRONG, f"planned: {plans['none fits GPU 0']} of three components"
    if not isinstance(plans["none fits anywhere"], dict) or plans["none fits anywhere"].get("type") != "ValueError":
        return WRONG, "a plan that fits nowhere is not refused"
    return RIGHT, "nf4 text encoder on GPU 0 at its loaded size; every component planned; no fit: refused"


@scenario(
    "bnb-device-map-balanced-plan",
    patch="size-bitsandbytes-components-as-they-will-be-loaded.patch",
    summary='nf4 text encoder, device_map="balanced", GPU 0 budgets of 7.2 / 3 / 0.5 MB (and 5 MB of CPU): the plans',
    text=(
        "GPU 0 7.2 MB: {plans[fits only quantized]}; 3 MB: {plans[two of three fit]}; 0.5 MB: {plans[none fits GPU 0]}; "
        "0.5 MB and CPU 5 MB: {plans[none fits anywhere]}; {weight_reads} weight files read while planning "
        "({weight_reads_of_a_load} while loading)"
    ),
    judge=_judge_bnb_device_map_balanced_plan,
)
def bnb_device_map_balanced_plan(workdir):
    """Also shows plan-components-that-fit-no-accelerator-on-the-cpu and raise-when-pipeline-components-fit-nowhere."""
    path = save_tiny_sd_pipeline(workdir / "pipe", text_encoder_kwargs=DEVICE_MAP_TEXT_ENCODER)
    plans = {}
    with recording_weight_reads() as reads:
        for name, (gpu, cpu) in PLAN_BUDGETS.items():
            try:
                plans[name] = plan_with_budget(path, gpu, cpu, quantization_config=bnb_text_encoder_config())
            except ValueError as e:
                plans[name] = error_of(e)
    # The spy's positive control: loading the same pipeline reads its weight files.
    with recording_weight_reads() as load_reads:
        load_tiny_sd_pipeline(path)
    return {"plans": plans, "weight_reads": len(reads), "weight_reads_of_a_load": len(load_reads)}


def _judge_bnb_text_encoder_planned_on_cpu(result):
    if (result["weight_device"], result["absmax_device"]) != ("cpu", "cpu"):
        return WRONG, f"weights on {result['weight_device']}, absmax on {result['absmax_device']}"
    return close(result["diffs"])


@scenario(
    "bnb-text-encoder-planned-on-cpu",
    patch="run-bitsandbytes-components-planned-on-the-cpu-there.patch",
    summary='nf4 text encoder planned on "cpu" by device_map="balanced": load, run, compare to an un-offloaded run',
    text=(
        "planned {plan}; hf_device_map={hf_device_map}; text encoder weights {weight_type} on {weight_device}, absmax on "
        "{absmax_device}; max abs diff to an un-offloaded run per pass {diffs}"
    ),
    judge=_judge_bnb_text_encoder_planned_on_cpu,
)
def bnb_text_encoder_planned_on_cpu(workdir):
    """The plan is the real planner's for a 5 MB GPU 0 (both sides: the text encoder on "cpu", unet and vae on GPU 0).
    Of it, a CPU-only machine can load only the components planned on "cpu" (GPU 0 does not exist here); the whole plan
    runs on a GPU in tests/gpu/test_gpu_device_map_balanced.py."""
    import torch

    path = save_tiny_sd_pipeline(workdir / "pipe", text_encoder_kwargs=DEVICE_MAP_TEXT_ENCODER)
    config = bnb_text_encoder_config(double_quant=True)
    reference = load_tiny_sd_pipeline(path, quantization_config=config)
    plan = plan_with_budget(path, GPU_BUDGET_TEXT_ENCODER_ON_CPU, quantization_config=config)
    pipe = load_with_plan(
        path,
        {name: device for name, device in plan.items() if device == "cpu"},
        quantization_config=bnb_text_encoder_config(double_quant=True),
    )
    input_ids = fixed_text_input()
    with torch.no_grad():
        diffs = [
            (pipe.text_encoder(input_ids)[0] - reference.text_encoder(input_ids)[0]).abs().max().item()
            for _ in range(3)
        ]
    weight = _first_mlp_weight(pipe.text_encoder)
    return {
        "plan": dict(sorted(plan.items())),
        "hf_device_map": pipe.hf_device_map,
        "weight_type": type(weight).__name__,
        "weight_device": str(weight.device),
        "absmax_device": str(weight.quant_state.absmax.device),
        "diffs": diffs,
    }


def _bnb_cpu_repacking(model, enabled):
    """Switch bitsandbytes' repacking of 4-bit weights for its CPU kernels, on by default on CPUs with AVX512-BF16 only.

    On, the next forward pass repacks the weights (rewriting their statistics) on any CPU, as on those CPUs; off,
    outputs are computed from the weights as stored, the same on every machine.
    """
    import bitsandbytes as bnb

    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            module.support_avx512bf16_for_cpu = enabled


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


# The pipelines whose offload tests upstream skips (diffusers_patched/selftest/tiny_pipelines.py TINY_OFFLOAD_PIPELINES); the README's
# pipeline x mode table is tests/test_offload_modes.py.


def offload_run(pipeline, mode):
    """A scenario's run: the tiny `pipeline` offloaded in `mode`, its max abs diff to the un-offloaded output."""

    def run(workdir):
        return {"diff": offload_diff(pipeline, mode)}

    return run


_PRELOAD = "sequential-offload-preloads-modules-that-read-child-weights.patch"
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


def _judge_group_offload(warning_count):
    """RIGHT when the output of every offloaded run equals the un-offloaded one up to float32 rounding and
    `warning_count` warnings named a model that does not support group offloading."""

    def judge(result):
        if len(result["warnings"]) != warning_count:
            return WRONG, f"{len(result['warnings'])} warnings (expected {warning_count}): {result['warnings']}"
        return close(result["diffs"], what="max abs diff to the un-offloaded output")

    return judge


def _group_offload(pipeline, modes=("group-leaf", "group-block")):
    # A weight offloaded to disk wrongly holds what `torch.empty_like` gave it: how far off such a run is differs from
    # run to run, not that it is off.
    def run(workdir):
        with diffusers_log_messages(logging.WARNING, "does not support group offloading") as warned:
            diffs = [offload_diff(pipeline, mode) for mode in modes]
        return {"diffs": diffs, "warnings": warned}

    return run


for _name, _pipeline, _patch, _cause, _modes in [
    (
        "group-offload-hunyuan-dit",
        "hunyuan-dit",
        "group-offload-preloads-modules-that-read-child-weights.patch",
        "HunyuanDiT2DModel declared _supports_group_offloading = False: its attention pooling uses its projections' "
        "weights",
        ("group-leaf", "group-block"),
    ),
    (
        "group-offload-stable-audio",
        "stable-audio",
        "group-offload-preloads-modules-that-read-child-weights.patch",
        "AutoencoderOobleck declared _supports_group_offloading = False: weight_norm computes its weights in forward "
        "pre-hooks",
        ("group-leaf", "group-block"),
    ),
    (
        "group-offload-stable-audio-3-audio-to-audio",
        "stable-audio-3-audio-to-audio",
        "pipeline-group-offload-to-disk-per-component.patch",
        "the VAE's and the transformer's groups of the same names were saved to the same files",
        ("group-leaf", "group-block"),
    ),
    (
        "group-offload-ace-step",
        "ace-step",
        "group-offload-keeps-what-models-read-outside-forward.patch",
        "the pipeline reads the condition encoder's and audio tokenizer's tensors outside of any forward",
        ("group-leaf",),
    ),
    (
        "group-offload-ace-step-block-level",
        "ace-step",
        "group-offload-onloads-modules-outside-blocks-called-directly.patch",
        "the pipeline calls the text encoder's input embeddings after the text encoder's forward, where block-level "
        "offloading onloads the modules outside its blocks",
        ("group-block",),
    ),
    (
        "group-offload-dit",
        "dit",
        "group-offload-onloads-block-modules-called-outside-their-block.patch",
        "DiTTransformer2DModel declared _supports_group_offloading = False: its output layer calls the first block's "
        "timestep and label embedding after the blocks",
        ("group-leaf", "group-block"),
    ),
    (
        "group-offload-glm-image-leaf-level",
        "glm-image",
        "group-offload-to-disk-keeps-tied-weights.patch",
        "T5's shared and encoder.embed_tokens hold one weight, in two leaf groups, and the second group wrote it to "
        "disk after the first had emptied it",
        ("group-leaf",),
    ),
]:
    scenario(
        _name,
        patch=_patch,
        summary=f"{_pipeline} (tiny), pipe.enable_group_offload {' and '.join(_modes)}, offloaded to disk: {_cause}",
        text="max abs diff to the un-offloaded output per level {diffs}; warned: {warnings}",
        judge=_judge_group_offload(warning_count=0),
    )(_group_offload(_pipeline, _modes))


def _group_offload_decoder_vaes(workdir):
    with diffusers_log_messages(logging.WARNING, "does not support group offloading") as warned:
        diffs = [offload_diff(vae, mode) for vae in TINY_DECODER_VAES for mode in ("group-leaf", "group-block")]
    return {"diffs": diffs, "warnings": warned}


def _offload_audio_vaes(workdir):
    with diffusers_log_messages(logging.WARNING, "does not support group offloading") as warned:
        diffs = [
            offload_diff(vae, mode) for vae in TINY_AUDIO_VAES for mode in ("group-leaf", "group-block", "sequential")
        ]
    return {"diffs": diffs, "warnings": warned}


scenario(
    "offload-audio-vaes",
    patch="audio-vaes-support-group-offloading.patch",
    summary="the LongCat-AudioDiT, MiniMax-H3, KVAE and Cosmos3 audio VAEs (tiny), each alone in a pipeline, group "
    "offloaded to disk at leaf and block level, then sequentially offloaded: they declared "
    "_supports_group_offloading = False; LongCat's encoder calls slices of its nn.Sequential and MiniMax-H3's "
    "attention reads qkv.weight, without calling what offloading hooks",
    text="max abs diff to the un-offloaded output per VAE and mode (group-leaf, group-block, sequential) {diffs}; "
    "warned: {warnings}",
    judge=_judge_group_offload(warning_count=0),
)(_offload_audio_vaes)


scenario(
    "group-offload-vq-and-consistency-decoder-vaes",
    patch="vq-and-consistency-decoder-vaes-support-group-offloading.patch",
    summary="VQModel and ConsistencyDecoderVAE (tiny), each alone in a pipeline, pipe.enable_group_offload leaf and "
    "block level, offloaded to disk: they declared _supports_group_offloading = False; VQModel's quantizer reads its "
    "codebook's weight without calling it, ConsistencyDecoderVAE's decode reads its means and stds outside forward",
    text="max abs diff to the un-offloaded output per VAE and level {diffs}; warned: {warnings}",
    judge=_judge_group_offload(warning_count=0),
)(_group_offload_decoder_vaes)


def _group_offload_weights_tied_across_blocks(workdir):
    # No model diffusers ships ties a weight across block-level groups: the tie is made here, as a user's model or a
    # future one would make it (ALBERT-style shared layers, an output projection tied to a block's).
    import torch
    from diffusers.hooks import apply_group_offloading

    class TiedAcrossBlocks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(32, 32) for _ in range(3)])
            self.proj_out = torch.nn.Linear(32, 32)
            # Three groups at block level hold it: the first block's, the last block's and the one of `proj_out`,
            # outside the blocks, which stays onloaded while the blocks' groups are offloaded.
            self.blocks[-1].weight = self.blocks[0].weight
            self.proj_out.weight = self.blocks[0].weight

        def forward(self, hidden_states):
            for block in self.blocks:
                hidden_states = torch.nn.functional.silu(block(hidden_states))
            return self.proj_out(hidden_states)

    torch.manual_seed(0)
    model = TiedAcrossBlocks().eval()
    hidden_states = torch.randn(4, 32)
    with torch.no_grad():
        expected = model(hidden_states)
        apply_group_offloading(
            model,
            onload_device=torch.device("cpu"),
            offload_type="block_level",
            num_blocks_per_group=1,
            offload_to_disk_path=os.path.join(workdir, "offload"),
        )
        diffs = [(model(hidden_states) - expected).abs().max().item() for _ in range(2)]
    return {"diffs": diffs}


scenario(
    "group-offload-weights-tied-across-blocks",
    patch="group-offload-to-disk-keeps-weights-tied-across-blocks.patch",
    summary="a model (tiny) whose first block, last block and output projection share one weight, group offloaded to "
    "disk at block level: the first group emptied the weight before the others wrote their files, and the "
    "first block's group emptied it while the output projection's group, onloaded, still needed it",
    text="max abs diff to the un-offloaded output per pass {diffs}",
    judge=lambda result: close(result["diffs"], what="max abs diff to the un-offloaded output"),
)(_group_offload_weights_tied_across_blocks)


def _group_offload_transformer_2d_block_level(workdir):
    # DiT's configuration of the legacy Transformer2DModel, which does not opt out of group offloading: its output layer
    # calls the first block's `norm1.emb` after the blocks, whose group block-level offloading emptied by then.
    import torch
    from diffusers import Transformer2DModel

    from .tiny_pipelines import tiny_dit_pipeline

    dit = tiny_dit_pipeline()[0].transformer
    model = Transformer2DModel(**dit.config).eval()
    model.load_state_dict(dit.state_dict())
    inputs = {
        "hidden_states": torch.randn(1, 4, 16, 16),
        "timestep": torch.tensor([10]),
        "class_labels": torch.tensor([1]),
    }
    with torch.no_grad():
        expected = model(**inputs).sample
        model.enable_group_offload(
            torch.device("cpu"),
            offload_type="block_level",
            num_blocks_per_group=1,
            offload_to_disk_path=os.path.join(workdir, "offload"),
        )
        diffs = [(model(**inputs).sample - expected).abs().max().item() for _ in range(2)]
    return {"diffs": diffs}


scenario(
    "group-offload-transformer-2d-block-level",
    patch="group-offload-onloads-block-modules-called-outside-their-block.patch",
    summary="Transformer2DModel (tiny, DiT's ada_norm_zero configuration) group offloaded to disk at block level: its "
    "output layer calls the first block's timestep and label embedding after the blocks",
    text="max abs diff to the un-offloaded output per pass {diffs}",
    judge=lambda result: close(result["diffs"], what="max abs diff to the un-offloaded output"),
)(_group_offload_transformer_2d_block_level)

scenario(
    "group-offload-model-opting-out",
    patch="group-offload-skips-models-that-do-not-support-it.patch",
    summary="DiT (tiny) whose transformer is of a class declaring _supports_group_offloading = False, as a model of "
    "another library can: pipe.enable_group_offload leaf and block level, offloaded to disk",
    text="max abs diff to the un-offloaded output per level {diffs}; warned: {warnings}",
    judge=_judge_group_offload(warning_count=2),
)(_group_offload("dit-opting-out"))


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

    from .tiny_pipelines import tiny_unet

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


def _judge_pipeline_to_dtype_with_gguf(result):
    if result["quantized_kept"] != result["quantized_weights"] or result["dtypes"] != [
        "torch.bfloat16",
        "torch.float32",
    ]:
        return WRONG, (
            f"{result['quantized_kept']}/{result['quantized_weights']} GGUF weights kept; unquantized component in "
            f"{result['dtypes']}"
        )
    return close(result["diffs"], what="output max abs diff")


@scenario(
    "pipeline-to-dtype-with-gguf",
    patch="pipeline-to-moves-quantized-models-of-any-backend.patch",
    summary="a WanPipeline of a GGUF (Q8_0) transformer and an unquantized transformer_2 (tiny): pipe.to(torch.bfloat16), "
    "then WanPipeline.from_pipe(pipe) (which casts to float32)",
    text="GGUF weights kept {quantized_kept}/{quantized_weights}; transformer_2 in {dtypes} after to() and from_pipe; "
    "max abs diff to the references (the GGUF model untouched, the unquantized one cast by torch) {diffs}",
    judge=_judge_pipeline_to_dtype_with_gguf,
)
def pipeline_to_dtype_with_gguf(workdir):
    import copy

    import torch
    from diffusers import WanPipeline
    from diffusers.quantizers.gguf.utils import GGUFParameter

    from .tiny_checkpoints import (
        build_wan,
        load_wan_single_file,
        wan_config,
        wan_inputs,
        wan_original_state_dict,
        wan_transformer_pipeline,
        write_config_dir,
        write_gguf,
    )

    config = wan_config("t2v")
    path = write_gguf(wan_original_state_dict(build_wan(config)), str(workdir / "wan.gguf"))
    config_dir = write_config_dir("WanTransformer3DModel", config, str(workdir / "cfg"))
    transformer, reference = load_wan_single_file(path, config_dir), load_wan_single_file(path, config_dir)
    transformer_2 = build_wan(config, seed=1)
    reference_2 = copy.deepcopy(transformer_2).to(torch.bfloat16)
    quantized = {
        name: param.as_tensor().clone()
        for name, param in transformer.named_parameters()
        if isinstance(param, GGUFParameter)
    }
    inputs = wan_inputs(config)

    pipe = wan_transformer_pipeline(transformer, transformer_2)
    pipe.to(torch.bfloat16)
    dtypes = [str(transformer_2.dtype)]
    new_pipe = WanPipeline.from_pipe(pipe)
    dtypes.append(str(new_pipe.transformer_2.dtype))
    with torch.no_grad():
        diffs = [
            (transformer(**inputs)[0] - reference(**inputs)[0]).abs().max().item(),
            (new_pipe.transformer_2(**inputs)[0] - reference_2.float()(**inputs)[0]).abs().max().item(),
        ]
    kept = sum(
        isinstance(param, GGUFParameter) and torch.equal(param.as_tensor(), quantized[name])
        for name, param in transformer.named_parameters()
        if name in quantized
    )
    return {"quantized_kept": kept, "quantized_weights": len(quantized), "dtypes": dtypes, "diffs": diffs}


if __name__ == "__main__":
    _main(SCENARIOS, *sys.argv[1:])
