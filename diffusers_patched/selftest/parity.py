"""The parity net: the flows diffusers documents for each quantization backend that runs on a CPU, run on both sides.

The demo scenarios start from flows upstream gets wrong; these start from flows upstream gets right, so that a patch
cannot take one away unnoticed (a pre-quantized quanto checkpoint once was refused with the patches). Each backend is
one entry of `PARITY`, a tiny Flux transformer through every flow, each flow a cell:

- `load`: quantizing while loading (`from_pretrained(..., quantization_config=...)`; for GGUF, `from_single_file` of a
  Q8_0 file), against an unquantized model holding the weights the quantized layers compute with;
- `model round trip`, `pipeline round trip`: `save_pretrained`, then `from_pretrained` of the saved folder (the
  pre-quantized checkpoint a hub repository holds), against the loaded model;
- `to and from_pipe`: `pipe.to("cpu")`, then `FluxPipeline.from_pipe(pipe)`;
- the offload flows (OFFLOAD_FLOWS), each called twice, since what the first call leaves behind (a weight a layer
  repacked, a file written) must not change the second: `enable_model_cpu_offload(device="cpu")`,
  `enable_sequential_cpu_offload(device="cpu")`, `enable_group_offload(...)` at leaf level and at block level (one
  block a group), in memory and with `offload_to_disk_path`;
- `lora`: `load_lora_weights`, against the reference with the same LoRA, then `unload_lora_weights()`, against the
  loaded model; `lora, <offload flow>` the same into the pipeline offloaded so, called twice with the LoRA;
- `fuse`: `load_lora_weights`, `fuse_lora()`, then `unfuse_lora()`: the share of the LoRA's effect on the output the
  fused model keeps (a backend that quantizes the fused weight again rounds some of it away), and the unfused model
  against the one before fusing; `fuse, <offload flow>` the same in the pipeline offloaded so.

A cell holds the max abs diff to its reference (or the error), and the output itself: the suite asserts that wherever
upstream is right the patched side is right too, with the same outputs (tests/test_parity.py).

What does not run on a CPU, and why (diffusers 0.42.1): diffusers' own bitsandbytes quantizer refuses without a GPU
("No GPU found"; the bitsandbytes row quantizes a pipeline's transformers text encoder, which runs on a CPU);
Nunchaku's quantizer requires CUDA in `validate_environment`; ModelOpt and AutoRound are not in the verified stack
(docs/parity.md). SDNQ (diffusers 0.40.0 and later) runs on a CPU with its PyTorch kernels.
"""

import functools
import logging
import os
import sys

from .judges import FAILS, RETENTION_BOUND, RIGHT, WRONG, close, retained, retention
from .scenarios.common import diffusers_log_messages
from .scenarios.registry import _main, scenario


PARITY = {}
OFFLOAD_FLOWS = (
    "model cpu offload",
    "sequential cpu offload",
    "group offload leaf",
    "group offload block",
    "group offload leaf to disk",
    "group offload block to disk",
)
LORA_OFFLOAD_FLOWS = tuple(f"lora, {flow}" for flow in OFFLOAD_FLOWS)
FUSE_OFFLOAD_FLOWS = tuple(f"fuse, {flow}" for flow in OFFLOAD_FLOWS)
FLOWS = (
    "load",
    "model round trip",
    "pipeline round trip",
    "to and from_pipe",
    *OFFLOAD_FLOWS,
    "lora",
    *LORA_OFFLOAD_FLOWS,
    "fuse",
    *FUSE_OFFLOAD_FLOWS,
)


def cell_verdict(cell):
    if cell["error"] is not None:
        return FAILS, cell["error"]
    if cell.get("reported_missing"):
        return WRONG, f"a complete checkpoint said to lack keys: {cell['reported_missing'][0][:200]}"
    verdict, figure = close(cell["diffs"], scale=cell["scale"])
    if "retention" not in cell:
        return verdict, figure
    kept = f"keeps {cell['retention']:.1%} of the LoRA's effect (bound {RETENTION_BOUND:.0%}); unfused: {figure}"
    if verdict == RIGHT and not retained(cell["retention"]):
        verdict = WRONG
    return verdict, kept


def cell_verdicts(outcome):
    """{flow: (verdict, figure)} of a backend's outcome (registry.Outcome); a backend that raised before its first flow
    fails every flow with that error."""
    if not outcome.ok:
        error = f"{outcome.error['type']}: {outcome.error['message']}"[:400]
        return {flow: (FAILS, error) for flow in FLOWS}
    return {flow: cell_verdict(cell) for flow, cell in outcome.result["cells"].items()}


def parity_breaks(upstream, patched):
    """The flows of one backend where upstream is right and the patched side is not, or computes other outputs than
    upstream's (beyond the tolerance): `{flow: why}`. Empty when diffusers-patched is never worse than upstream."""
    upstream_verdicts, patched_verdicts = cell_verdicts(upstream), cell_verdicts(patched)
    breaks = {}
    for flow, (verdict, _) in upstream_verdicts.items():
        if verdict != RIGHT:
            continue
        patched_verdict, figure = patched_verdicts[flow]
        if patched_verdict != RIGHT:
            breaks[flow] = f"upstream right, patched {patched_verdict}: {figure}"
            continue
        upstream_output = upstream.result["cells"][flow]["output"]
        patched_output = patched.result["cells"][flow]["output"]
        diff = max(abs(a - b) for a, b in zip(upstream_output, patched_output))
        scale = upstream.result["cells"][flow]["scale"]
        if len(upstream_output) != len(patched_output) or close([diff], scale=scale)[0] != RIGHT:
            breaks[flow] = f"patched output differs from upstream's by {diff:.2g} (tolerance 1e-05)"
    return breaks


def _judge(result):
    verdicts = {flow: cell_verdict(cell) for flow, cell in result["cells"].items()}
    failing = [f"{flow}: {figure}" for flow, (verdict, figure) in verdicts.items() if verdict != RIGHT]
    if failing:
        return FAILS, "; ".join(failing)
    worst = max(max(cell["diffs"]) for cell in result["cells"].values())
    return RIGHT, f"{len(verdicts)} flows, worst max abs diff to the reference {worst:.2g} (tolerance 1e-05)"


def _output(model, inputs):
    import torch

    with torch.no_grad():
        return model(**inputs)[0]


class Family:
    """A tiny model family the flows run on: how to build the unquantized model (the same weights every time), its
    inputs, the pipeline of it alone, and the modules a LoRA targets."""

    def __init__(self, name):
        self.name = name

    def build(self):
        from . import tiny_checkpoints

        if self.name == "flux":
            return tiny_checkpoints.build_flux(tiny_checkpoints.FLUX_DEV_CONFIG)
        return tiny_checkpoints.build_wan(tiny_checkpoints.wan_config("t2v"))

    def inputs(self):
        from . import tiny_checkpoints

        if self.name == "flux":
            return tiny_checkpoints.flux_inputs(tiny_checkpoints.FLUX_DEV_CONFIG)
        return tiny_checkpoints.wan_inputs(tiny_checkpoints.wan_config("t2v"))

    def pipeline(self, transformer):
        from . import tiny_checkpoints

        if self.name == "flux":
            return tiny_checkpoints.flux_transformer_pipeline(transformer)
        return tiny_checkpoints.wan_transformer_pipeline(transformer)

    def unused_components(self):
        if self.name == "flux":
            return {"text_encoder": None, "tokenizer": None, "text_encoder_2": None, "tokenizer_2": None, "vae": None}
        return {"text_encoder": None, "tokenizer": None, "vae": None}


FLUX, WAN = Family("flux"), Family("wan")


def _effective_weights_reference(family, quantized):
    """The unquantized model holding, in each Linear, the weight the quantized one computes with: read off by passing
    the identity through it (exact in float32), whatever the backend stores."""
    import torch

    reference = family.build()
    with torch.no_grad():
        for name, module in reference.named_modules():
            if isinstance(module, torch.nn.Linear):
                layer = quantized.get_submodule(name)
                identity = torch.eye(module.in_features)
                weight = layer(identity) - (0 if layer.bias is None else layer.bias.float())
                module.weight.copy_(weight.T)
    return reference


def _lora(family, seed=1):
    import torch
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    model = family.build()
    torch.manual_seed(seed)
    model.add_adapter(LoraConfig(r=4, lora_alpha=4, target_modules=["to_q", "to_k", "to_v"], init_lora_weights=False))
    return {f"transformer.{key}": value for key, value in get_peft_model_state_dict(model).items()}


def _cell(run):
    """{"diffs", "scale", "output", "error"} of one flow: `run()` returns (outputs, references) to compare pairwise."""
    try:
        outputs, references = run()
    except Exception as e:
        return {"diffs": [], "scale": 1.0, "output": None, "error": f"{type(e).__name__}: {e}"[:400]}
    return {
        "diffs": [(output - reference).abs().max().item() for output, reference in zip(outputs, references)],
        "scale": max(reference.abs().max().item() for reference in references),
        "output": outputs[0].flatten()[:64].tolist(),
        "error": None,
    }


def _fuse_cell(run, loaded):
    """The `fuse` cell: `run()` returns the outputs fused, with the LoRA unfused before fusing and after unfusing, and
    the reference's with the LoRA; the share of the reference's change of output the fused model's change keeps."""
    try:
        fused, unfused, after_unfusing, expected = run()
    except Exception as e:
        return {"diffs": [], "scale": 1.0, "output": None, "error": f"{type(e).__name__}: {e}"[:400]}
    return {
        "diffs": [(after_unfusing - unfused).abs().max().item()],
        "scale": unfused.abs().max().item(),
        "output": fused.flatten()[:64].tolist(),
        "error": None,
        "retention": retention(fused - loaded, expected - loaded),
    }


def _offload(pipe, flow, directory):
    """Offloads `pipe` as the flow of OFFLOAD_FLOWS says, a group offloading to disk into `directory`."""
    from .tiny_pipelines import apply_offload_mode

    mode = {"model cpu offload": "model", "sequential cpu offload": "sequential"}.get(flow)
    if mode is None:
        mode = "group-block" if "block" in flow else "group-leaf"
    apply_offload_mode(pipe, mode, directory if flow.endswith("to disk") else None)


def _pipeline_flows(workdir, load_pipeline, reload_pipeline, run, loaded, lora, save_kwargs=None):
    """The pipeline flows of FLOWS, each on a fresh `load_pipeline()` (a flow that fails must not decide the next one's
    result): `run(pipe)` is the output of its quantized component, `loaded` that output once loaded, `lora()` a LoRA for
    `load_lora_weights` and the output the reference computes with it."""
    lora = functools.cache(lora)

    def pipeline_round_trip():
        load_pipeline().save_pretrained(workdir / "pipeline", **(save_kwargs or {}))
        return [run(reload_pipeline(workdir / "pipeline"))], [loaded]

    def to_and_from_pipe():
        pipe = load_pipeline()
        pipe.to("cpu")
        return [run(type(pipe).from_pipe(pipe))], [loaded]

    def offloaded(flow, directory):
        pipe = load_pipeline()
        _offload(pipe, flow, workdir / directory)
        return pipe

    def offload(flow):
        def run_flow():
            pipe = offloaded(flow, flow)
            return [run(pipe), run(pipe)], [loaded, loaded]

        return run_flow

    def pipeline_with_lora(flow, directory):
        lora_state_dict, expected = lora()
        pipe = load_pipeline() if flow is None else offloaded(flow, directory)
        pipe.load_lora_weights(dict(lora_state_dict))
        return pipe, expected

    def with_lora(flow=None):
        def run_flow():
            pipe, expected = pipeline_with_lora(flow, f"lora {flow}")
            outputs = [run(pipe), run(pipe)]
            pipe.unload_lora_weights()
            return [*outputs, run(pipe)], [expected, expected, loaded]

        return run_flow

    def fused_lora(flow=None):
        def run_flow():
            pipe, expected = pipeline_with_lora(flow, f"fuse {flow}")
            unfused = run(pipe)
            pipe.fuse_lora()
            fused = run(pipe)
            pipe.unfuse_lora()
            return fused, unfused, run(pipe), expected

        return run_flow

    flows = {
        "pipeline round trip": pipeline_round_trip,
        "to and from_pipe": to_and_from_pipe,
        **{flow: offload(flow) for flow in OFFLOAD_FLOWS},
        "lora": with_lora(),
        **{f"lora, {flow}": with_lora(flow) for flow in OFFLOAD_FLOWS},
    }
    return {
        **{flow: _cell(run_flow) for flow, run_flow in flows.items()},
        "fuse": _fuse_cell(fused_lora(), loaded),
        **{f"fuse, {flow}": _fuse_cell(fused_lora(flow), loaded) for flow in OFFLOAD_FLOWS},
    }


def _loaded(load, output):
    """(what `load()` returned, its output, the "missing keys" warnings it logged): every checkpoint here is complete,
    so a load that says it lacks keys (and with `strict=True` refuses it) is wrong."""
    with diffusers_log_messages(logging.WARNING, "were not") as reported_missing:
        loaded = load()
    return loaded, output(loaded), reported_missing


def _flows(workdir, family, load, save_kwargs=None):
    """Every flow of FLOWS on the transformer `load()` returns, in its pipeline for the pipeline flows."""
    import torch
    from diffusers import DiffusionPipeline

    inputs = family.inputs()
    quantized, loaded, reported_missing = _loaded(load, lambda model: _output(model, inputs))
    reference = _effective_weights_reference(family, quantized)
    cells = {"load": {**_cell(lambda: ([loaded], [_output(reference, inputs)])), "reported_missing": reported_missing}}
    # A backend that leaves every layer as it was (SDNQ skips small layers by default) would pass every flow vacuously.
    unquantized = family.build()
    linears = [name for name, module in reference.named_modules() if isinstance(module, torch.nn.Linear)]
    quantized_linears = sum(
        not torch.equal(reference.get_submodule(name).weight, unquantized.get_submodule(name).weight)
        for name in linears
    )

    def model_round_trip():
        model = load()
        model.save_pretrained(workdir / "model", **(save_kwargs or {}))
        reloaded = type(model).from_pretrained(workdir / "model", torch_dtype=torch.float32)
        return [_output(reloaded, inputs)], [loaded]

    def lora():
        lora_state_dict = _lora(family)
        reference.load_lora_adapter(dict(lora_state_dict), prefix="transformer")
        return lora_state_dict, _output(reference, inputs)

    cells["model round trip"] = _cell(model_round_trip)
    cells.update(
        _pipeline_flows(
            workdir,
            lambda: family.pipeline(load()),
            lambda path: DiffusionPipeline.from_pretrained(
                path, torch_dtype=torch.float32, **family.unused_components()
            ),
            lambda pipe: _output(pipe.transformer, inputs),
            loaded,
            lora,
            save_kwargs,
        )
    )
    return {"cells": cells, "quantized_linears": f"{quantized_linears}/{len(linears)}"}


def _quantized_while_loading(workdir, quantization_config, save_kwargs=None):
    import torch
    from diffusers import FluxTransformer2DModel

    FLUX.build().save_pretrained(workdir / "flux")

    def load():
        # In float32, as the reference: torchao's quantizer loads in bfloat16 unless told otherwise.
        return FluxTransformer2DModel.from_pretrained(
            workdir / "flux", quantization_config=quantization_config(), torch_dtype=torch.float32
        )

    return _flows(workdir, FLUX, load, save_kwargs)


def _parity(name, summary):
    return scenario(
        name,
        patch=None,
        summary=summary,
        text="each flow judged on its own: cell_verdicts",
        judge=_judge,
        registry=PARITY,
    )


@_parity("quanto int8", "QuantoConfig(weights_dtype='int8')")
def quanto_int8(workdir):
    from diffusers import QuantoConfig

    return _quantized_while_loading(workdir, lambda: QuantoConfig(weights_dtype="int8"))


@_parity("quanto int4", "QuantoConfig(weights_dtype='int4')")
def quanto_int4(workdir):
    from diffusers import QuantoConfig

    return _quantized_while_loading(workdir, lambda: QuantoConfig(weights_dtype="int4"))


@_parity("quanto float8", "QuantoConfig(weights_dtype='float8')")
def quanto_float8(workdir):
    from diffusers import QuantoConfig

    return _quantized_while_loading(workdir, lambda: QuantoConfig(weights_dtype="float8"))


@_parity("torchao int8 weight-only", "TorchAoConfig(Int8WeightOnlyConfig()), saved with safe_serialization=False")
def torchao_int8_weight_only(workdir):
    from diffusers import TorchAoConfig
    from torchao.quantization import Int8WeightOnlyConfig

    # torchao's tensors are not safetensors-serializable: its documented round trip saves with pickle.
    return _quantized_while_loading(
        workdir, lambda: TorchAoConfig(Int8WeightOnlyConfig()), save_kwargs={"safe_serialization": False}
    )


def _sdnq(workdir, weights_dtype):
    # On a CPU, sdnq compiles its dequantization with torch.compile (seconds at import and per layer shape); the flows
    # judged here are diffusers', which its eager dequantization runs the same.
    os.environ.setdefault("SDNQ_USE_TORCH_COMPILE", "0")
    from diffusers import SDNQConfig

    # SDNQ leaves layers under 16384 elements unquantized by default: every layer of the tiny model is.
    return _quantized_while_loading(
        workdir,
        lambda: SDNQConfig(weights_dtype=weights_dtype, minimum_allowed_numel=0, minimum_allowed_channel_size=0),
    )


@_parity("sdnq int8", "SDNQConfig(weights_dtype='int8', minimum_allowed_numel=0)")
def sdnq_int8(workdir):
    return _sdnq(workdir, "int8")


@_parity("sdnq uint4", "SDNQConfig(weights_dtype='uint4', minimum_allowed_numel=0)")
def sdnq_uint4(workdir):
    return _sdnq(workdir, "uint4")


@_parity("gguf Q8_0", "from_single_file of a Q8_0 GGUF file (Wan) with GGUFQuantizationConfig")
def gguf_q8_0(workdir):
    from .tiny_checkpoints import (
        load_wan_single_file,
        wan_config,
        wan_original_state_dict,
        write_config_dir,
        write_gguf,
    )

    # A Wan transformer: upstream converts a tiny Flux single file with the real model's width.
    path = write_gguf(wan_original_state_dict(WAN.build()), str(workdir / "wan.gguf"))
    config = write_config_dir("WanTransformer3DModel", wan_config("t2v"), str(workdir / "config"))
    return _flows(workdir, WAN, lambda: load_wan_single_file(path, config))


def _text_encoder_output(text_encoder):
    import torch

    from .tiny_pipelines import fixed_text_input

    with torch.no_grad():
        return text_encoder(fixed_text_input())[0]


@_parity(
    "bitsandbytes nf4 text encoder",
    "PipelineQuantizationConfig(bitsandbytes_4bit, nf4) of a pipeline's (transformers) text encoder: what runs on a CPU",
)
def bitsandbytes_nf4_text_encoder(workdir):
    """The flows on a pipeline's text encoder, against the text encoder transformers loads quantized by itself (and
    PEFT's own LoRA on it): diffusers' own bitsandbytes quantizer needs a GPU. Each checkpoint is saved before any
    forward pass: a 4-bit CPU forward may repack the weights (docs/development.md)."""
    from peft import LoraConfig, inject_adapter_in_model, set_peft_model_state_dict
    from transformers import BitsAndBytesConfig, CLIPTextModel

    from .scenarios.common import _text_encoder_lora
    from .tiny_pipelines import bnb_text_encoder_config, load_tiny_sd_pipeline, save_tiny_sd_pipeline

    path = save_tiny_sd_pipeline(workdir / "pipe")

    def load():
        return load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config("nf4"))

    def load_reference():
        config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4")
        return CLIPTextModel.from_pretrained(path / "text_encoder", quantization_config=config)

    reference = _text_encoder_output(load_reference())
    _, loaded, reported_missing = _loaded(load, lambda pipe: _text_encoder_output(pipe.text_encoder))
    cells = {"load": {**_cell(lambda: ([loaded], [reference])), "reported_missing": reported_missing}}

    def lora():
        peft_model = load_reference()
        lora_state_dict = _text_encoder_lora(peft_model)
        targets = sorted({key.split(".", 1)[1].rsplit(".lora_", 1)[0] for key in lora_state_dict})
        inject_adapter_in_model(LoraConfig(r=4, lora_alpha=4, target_modules=targets), peft_model)
        set_peft_model_state_dict(peft_model, {key.split(".", 1)[1]: value for key, value in lora_state_dict.items()})
        return lora_state_dict, _text_encoder_output(peft_model)

    cells.update(
        _pipeline_flows(
            workdir,
            load,
            load_tiny_sd_pipeline,
            lambda pipe: _text_encoder_output(pipe.text_encoder),
            loaded,
            lora,
        )
    )
    from bitsandbytes.functional import has_avx512bf16

    # Only there does bitsandbytes repack 4-bit weights on their first forward (its CPU backend asks once, at import).
    return {"cells": cells, "repacks_4bit_weights": bool(has_avx512bf16())}


def _bfl(workdir, quant_type):
    import torch
    from diffusers import BFLQuantizationConfig, FluxTransformer2DModel
    from diffusers.quantizers.bfl.utils import quantize_fp8r, quantize_nvfp4

    from .tiny_checkpoints import FLUX_DEV_CONFIG, write_config_dir, write_safetensors

    # diffusers' own key names: the checkpoint needs no conversion, only the quantizer's folding of its scales.
    checkpoint = {key: value.contiguous() for key, value in FLUX.build().state_dict().items()}
    for key in [key for key in checkpoint if key.endswith(".weight") and checkpoint[key].ndim == 2]:
        name = key[: -len(".weight")]
        if quant_type == "fp8r":
            checkpoint[key], checkpoint[f"{name}.weight_scale"] = quantize_fp8r(checkpoint[key])
        else:
            checkpoint[key], checkpoint[f"{name}.weight_scale"], weight_scale_2 = quantize_nvfp4(checkpoint[key])
            checkpoint[f"{name}.weight_scale_2"] = weight_scale_2.reshape(())
            checkpoint[f"{name}.input_scale"] = torch.tensor(1.0)
    path = write_safetensors(checkpoint, str(workdir / f"flux_{quant_type}.safetensors"))
    config = write_config_dir("FluxTransformer2DModel", FLUX_DEV_CONFIG, str(workdir / "config"))

    def load():
        return FluxTransformer2DModel.from_single_file(
            path,
            config=config,
            local_files_only=True,
            quantization_config=BFLQuantizationConfig(compute_dtype=torch.float32),
        )

    return _flows(workdir, FLUX, load)


@_parity("bfl fp8r", "from_single_file of a BFL fp8r checkpoint with BFLQuantizationConfig")
def bfl_fp8r(workdir):
    return _bfl(workdir, "fp8r")


@_parity("bfl nvfp4", "from_single_file of a BFL nvfp4 checkpoint with BFLQuantizationConfig")
def bfl_nvfp4(workdir):
    return _bfl(workdir, "nvfp4")


if __name__ == "__main__":
    _main(PARITY, *sys.argv[1:])
