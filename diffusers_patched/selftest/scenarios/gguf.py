"""GGUF-quantized models under offloading, fusing and `DiffusionPipeline.to`."""

import copy

from ..judges import WRONG, close
from .registry import scenario


def _judge_gguf_sequential_offload(result):
    if not result["quantized"]:
        return WRONG, "weights no longer GGUF-quantized"
    return close(result["diffs"])


@scenario(
    "gguf-sequential-offload",
    patch="gguf-parameters-survive-accelerate-offload-hooks.patch",
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

    from ..tiny_checkpoints import (
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

    from ..tiny_checkpoints import (
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
    import torch
    from diffusers import WanPipeline
    from diffusers.quantizers.gguf.utils import GGUFParameter

    from ..tiny_checkpoints import (
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
