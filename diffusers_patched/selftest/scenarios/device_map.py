"""`device_map="balanced"` planning of pipelines with quantized components, and their placement."""

from ..judges import RIGHT, WRONG, close
from ..tiny_pipelines import (
    bnb_text_encoder_config,
    fixed_text_input,
    load_tiny_sd_pipeline,
    load_with_plan,
    loaded_size,
    plan_with_budget,
    planned_sizes,
    recording_weight_reads,
    save_tiny_sd_pipeline,
)
from .common import _first_mlp_weight
from .registry import error_of, scenario


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
    patch="size-quantized-components-as-they-will-be-loaded.patch",
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


# The planner's guarantee the scenario checks: each component planned within this fraction of the bytes it holds once
# loaded (measured: exactly them, for every backend here).
PLANNED_SIZE_BOUND = 0.05


def _judge_quantized_components_planned_at_loaded_size(result):
    ratios = {name: planned / loaded for name, (planned, loaded) in result["sizes"].items()}
    worst = max(ratios, key=lambda name: abs(ratios[name] - 1))
    figure = f"worst planned/loaded {ratios[worst]:.3f} ({worst}; bound 1 ± {PLANNED_SIZE_BOUND})"
    return (RIGHT if abs(ratios[worst] - 1) <= PLANNED_SIZE_BOUND else WRONG), figure


@scenario(
    "quanto-torchao-gguf-planned-at-loaded-size",
    patch="size-quantized-components-as-they-will-be-loaded.patch",
    summary='device_map="balanced" sizes of quanto (int8, int4), torchao (int8 weight-only) and GGUF (Q8_0) components',
    text="planned / loaded bytes: {sizes}",
    judge=_judge_quantized_components_planned_at_loaded_size,
)
def quanto_torchao_gguf_planned_at_loaded_size(workdir):
    import torch
    from diffusers import QuantoConfig, TorchAoConfig, WanPipeline
    from diffusers.quantizers import PipelineQuantizationConfig
    from torchao.quantization import Int8WeightOnlyConfig
    from transformers import QuantoConfig as TransformersQuantoConfig
    from transformers import TorchAoConfig as TransformersTorchAoConfig

    from ..tiny_checkpoints import (
        build_wan,
        load_wan_single_file,
        wan_config,
        wan_original_state_dict,
        wan_transformer_pipeline,
        write_config_dir,
        write_gguf,
    )

    path = save_tiny_sd_pipeline(workdir / "pipe", text_encoder_kwargs=DEVICE_MAP_TEXT_ENCODER)
    configs = {
        "quanto int8": (QuantoConfig(weights_dtype="int8"), TransformersQuantoConfig(weights="int8")),
        "quanto int4": (QuantoConfig(weights_dtype="int4"), TransformersQuantoConfig(weights="int4")),
        "torchao int8": (TorchAoConfig(Int8WeightOnlyConfig()), TransformersTorchAoConfig(Int8WeightOnlyConfig())),
    }
    sizes = {}
    for backend, (unet_config, text_encoder_config) in configs.items():
        config = PipelineQuantizationConfig(quant_mapping={"unet": unet_config, "text_encoder": text_encoder_config})
        planned = planned_sizes(load_tiny_sd_pipeline, path, quantization_config=config)
        pipe = load_tiny_sd_pipeline(path, quantization_config=config)
        for name in ("unet", "text_encoder"):
            sizes[f"{backend} {name}"] = (planned[name], loaded_size(getattr(pipe, name)))

    # GGUF models come to a pipeline loaded, as the components passed to `from_pretrained`.
    wan = wan_config("t2v")
    gguf_path = write_gguf(wan_original_state_dict(build_wan(wan)), str(workdir / "wan.gguf"))
    transformer = load_wan_single_file(
        gguf_path,
        write_config_dir("WanTransformer3DModel", wan, str(workdir / "cfg")),
        compute_dtype=torch.bfloat16,
        torch_dtype=torch.bfloat16,
    )
    wan_transformer_pipeline(build_wan(wan)).save_pretrained(workdir / "wan")
    planned = planned_sizes(
        WanPipeline.from_pretrained, workdir / "wan", transformer=transformer, torch_dtype=torch.bfloat16
    )
    sizes["GGUF Q8_0 transformer"] = (planned["transformer"], loaded_size(transformer))
    return {"sizes": sizes}
