"""`make bench`: what diffusers-patched costs against upstream, measured side by side in one run.

Every figure comes from fresh interpreters, upstream (`DIFFUSERS_PATCHED=0`) and patched interleaved, repeated;
the table gives medians, the spread (min-max) and the ratio patched / upstream. Models are built from small
configs and cached in the diffusers-patched cache directory, outside the repository.
"""

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import REPO_ROOT
from .upstream import cache_dir


# name -> (Flux transformer width in attention heads of 64, double blocks, single blocks)
FLUX_SIZES = {"tiny": (1, 1, 1), "small": (4, 2, 4), "medium": (12, 4, 8)}
# name -> UNet block_out_channels of the tiny Stable Diffusion pipeline
PIPELINE_SIZES = {"tiny": (32, 64), "medium": (256, 512)}


def fixture_dir():
    return cache_dir() / "bench"


def flux_transformer(size):
    import torch
    from diffusers import FluxTransformer2DModel

    heads, double_blocks, single_blocks = FLUX_SIZES[size]
    torch.manual_seed(0)
    return FluxTransformer2DModel(
        patch_size=1,
        in_channels=16,
        num_layers=double_blocks,
        num_single_layers=single_blocks,
        attention_head_dim=64,
        num_attention_heads=heads,
        joint_attention_dim=64,
        pooled_projection_dim=64,
        axes_dims_rope=(16, 24, 24),
    )


def single_file_fixture(size):
    """A Flux transformer saved as one safetensors file in diffusers' key names, plus its config directory."""
    from safetensors.torch import save_file

    directory = fixture_dir() / f"flux-{size}"
    checkpoint = directory / "transformer.safetensors"
    if not checkpoint.exists():
        model = flux_transformer(size)
        model.save_config(directory)
        save_file(model.state_dict(), directory / "partial.safetensors")
        (directory / "partial.safetensors").rename(checkpoint)
    return directory, checkpoint


def pipeline_fixture(size):
    from diffusers_patched.selftest.tiny_pipelines import save_tiny_sd_pipeline

    directory = fixture_dir() / f"sd-pipeline-{size}"
    if not (directory / "model_index.json").exists():
        save_tiny_sd_pipeline(directory, unet_channels=PIPELINE_SIZES[size])
    return directory


def _import_before_timing():
    """Import what the timed cases use, so that their clocks measure loading, not imports (the import case does)."""
    import bitsandbytes  # noqa: F401
    import diffusers
    from diffusers.loaders import single_file_model  # noqa: F401
    from transformers import CLIPTextModel  # noqa: F401

    diffusers.StableDiffusionPipeline  # resolves diffusers' lazy imports


def _measure(load):
    _import_before_timing()
    start = time.perf_counter()
    model = load()
    seconds = time.perf_counter() - start
    parameters = sum(p.numel() for component in _modules(model) for p in component.parameters())
    return {"seconds": seconds, "parameters": parameters}


def _modules(model):
    import torch

    if isinstance(model, torch.nn.Module):
        return [model]
    return [component for component in model.components.values() if isinstance(component, torch.nn.Module)]


def _case_import():
    start = time.perf_counter()
    import diffusers

    diffusers.StableDiffusionPipeline  # resolves the lazy import, which loads pipeline_loading_utils
    return {"seconds": time.perf_counter() - start}


def _case_load_pipeline(size):
    from diffusers_patched.selftest.tiny_pipelines import load_tiny_sd_pipeline

    return _measure(lambda: load_tiny_sd_pipeline(pipeline_fixture(size)))


def _case_single_file(size):
    from diffusers import FluxTransformer2DModel

    directory, checkpoint = single_file_fixture(size)
    return _measure(lambda: FluxTransformer2DModel.from_single_file(str(checkpoint), config=str(directory)))


def _case_save_pipeline(size):
    from diffusers_patched.selftest.tiny_pipelines import load_tiny_sd_pipeline

    return _measure_save(load_tiny_sd_pipeline(pipeline_fixture(size)))


def _measure_save(pipe):
    with tempfile.TemporaryDirectory() as directory:

        def save():
            pipe.save_pretrained(directory)
            return pipe  # _measure counts the parameters of what it is given back

        return _measure(save)


def _patched():
    return os.environ.get("DIFFUSERS_PATCHED") != "0"


# Affected paths: upstream cannot run them, so its side runs the nearest path that works, named in the case.

# name -> text encoder width, MLP width and layers of the offloaded 4-bit text encoder
TEXT_ENCODER_SIZES = {"tiny": (64, 128, 2), "small": (256, 1024, 2), "medium": (512, 2048, 4)}
# name -> layers of the tiny Wan loaded from a single file
WAN_LAYERS = {"tiny": 2, "small": 8, "medium": 32}


def _case_offloaded_4bit_forward(size):
    import torch

    from diffusers_patched.selftest.tiny_pipelines import (
        bnb_text_encoder_config,
        fixed_text_input,
        load_tiny_sd_pipeline,
        save_tiny_sd_pipeline,
    )

    hidden_size, intermediate_size, layers = TEXT_ENCODER_SIZES[size]
    path = fixture_dir() / f"sd-text-encoder-{size}"
    if not (path / "model_index.json").exists():
        text_encoder_kwargs = {"hidden_size": hidden_size, "intermediate_size": intermediate_size}
        save_tiny_sd_pipeline(path, text_encoder_kwargs={**text_encoder_kwargs, "num_hidden_layers": layers})
    pipe = load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config(double_quant=True))
    if _patched():
        pipe.enable_sequential_cpu_offload(device="cpu")
    else:
        pipe.enable_model_cpu_offload(device="cpu")
    input_ids = fixed_text_input()
    with torch.no_grad():
        pipe.text_encoder(input_ids)  # the first pass repacks 4-bit weights for the CPU
        start = time.perf_counter()
        for _ in range(5):
            pipe.text_encoder(input_ids)
    parameters = sum(p.numel() for p in pipe.text_encoder.parameters())
    return {"seconds": (time.perf_counter() - start) / 5, "parameters": parameters}


# name -> layers, attention heads and head width of the HunyuanDiT transformer run under sequential offload
HUNYUAN_DIT_SIZES = {"tiny": (2, 3, 8), "small": (8, 8, 48), "medium": (16, 16, 64)}


def _hunyuan_dit_call(size, device):
    """One call of a HunyuanDiT pipeline (two steps), sequentially offloaded when patched (upstream cannot offload it:
    its attention pooling reads its projections' weights directly), not offloaded on upstream's side."""
    import torch

    from diffusers_patched.selftest.tiny_pipelines import tiny_hunyuan_dit_pipeline

    pipe, run = tiny_hunyuan_dit_pipeline(*HUNYUAN_DIT_SIZES[size])
    pipe.set_progress_bar_config(disable=True)
    if _patched():
        pipe.enable_sequential_cpu_offload(device=device)
    else:
        pipe.to(device)
    with torch.no_grad():
        run(pipe)  # the first call builds caches and, offloaded, its hooks' state
        start = time.perf_counter()
        run(pipe)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "parameters": sum(p.numel() for p in pipe.transformer.parameters())}


def _case_sequential_offload_hunyuan_dit(size):
    return _hunyuan_dit_call(size, "cpu")


def _case_save_offloaded_pipeline(size):
    import torch
    from accelerate import cpu_offload

    from diffusers_patched.selftest.tiny_pipelines import load_tiny_sd_pipeline

    pipe = load_tiny_sd_pipeline(pipeline_fixture(size))
    if _patched():
        for model in _modules(pipe):
            cpu_offload(model, torch.device("cpu"))
    return _measure_save(pipe)


def _case_single_file_missing_keys(size):
    from diffusers import WanTransformer3DModel

    from diffusers_patched.selftest.tiny_checkpoints import (
        build_wan,
        wan_config,
        wan_original_state_dict,
        write_config_dir,
        write_safetensors,
    )

    directory = fixture_dir() / f"wan22-i2v-{size}"
    checkpoint = directory / "wan.safetensors"
    if not checkpoint.exists():
        directory.mkdir(parents=True, exist_ok=True)
        for variant in ("wan2.1-i2v", "wan2.2-i2v"):
            write_config_dir(
                "WanTransformer3DModel", wan_config(variant, num_layers=WAN_LAYERS[size]), directory / variant
            )
        model = build_wan(wan_config("wan2.2-i2v", num_layers=WAN_LAYERS[size]))
        write_safetensors(wan_original_state_dict(model), str(directory / "partial.safetensors"))
        (directory / "partial.safetensors").rename(checkpoint)
    # Patched: the Wan2.1-I2V config, which wants keys the checkpoint lacks. Upstream: the matching config.
    config = directory / ("wan2.1-i2v" if _patched() else "wan2.2-i2v")
    return _measure(lambda: WanTransformer3DModel.from_single_file(str(checkpoint), config=str(config)))


def _case_from_pretrained_missing_keys(size):
    from diffusers import WanTransformer3DModel

    from diffusers_patched.selftest.tiny_checkpoints import build_wan, wan_config

    directory = fixture_dir() / f"wan22-i2v-folder-{size}"
    if not (directory / "config.json").exists():
        build_wan(wan_config("wan2.2-i2v", num_layers=WAN_LAYERS[size])).save_pretrained(directory)
    # Patched: with the image layers of Wan2.1-I2V added, which the checkpoint lacks. Upstream: as saved.
    added_layers = {"image_dim": 32, "added_kv_proj_dim": 64} if _patched() else {}
    return _measure(lambda: WanTransformer3DModel.from_pretrained(directory, **added_layers))


def _case_ltx_vae_missing_norm_and_scalar(size):
    """The cost of filling what a checkpoint lacks with constructor values: a ~100M-parameter LTX-Video VAE whose
    checkpoint lacks one block's norm and the decoder's timestep multiplier (patched), against the complete
    checkpoint (upstream, where the incomplete one fails)."""
    import torch
    from diffusers import AutoencoderKLLTXVideo
    from safetensors.torch import load_file, save_file

    from diffusers_patched.selftest.tiny_pipelines import ltx_video_vae

    directory = fixture_dir() / f"ltx-vae-{size}"
    if not (directory / "without-norm-and-multiplier" / "diffusion_pytorch_model.safetensors").exists():
        torch.manual_seed(0)
        ltx_video_vae(LTX_VAE_CHANNELS[size], layers_per_block=2).save_pretrained(directory / "complete")
        state_dict = load_file(directory / "complete" / "diffusion_pytorch_model.safetensors")
        for name in LTX_VAE_MISSING:
            del state_dict[name]
        (directory / "without-norm-and-multiplier").mkdir()
        shutil.copyfile(
            directory / "complete" / "config.json", directory / "without-norm-and-multiplier" / "config.json"
        )
        save_file(state_dict, directory / "without-norm-and-multiplier" / "diffusion_pytorch_model.safetensors")
    folder = directory / ("without-norm-and-multiplier" if _patched() else "complete")
    return _measure(lambda: AutoencoderKLLTXVideo.from_pretrained(folder))


def _wan_gguf_fixture(size):
    """A Q8_0 GGUF Wan transformer in the original key names, plus its config directory."""
    from diffusers_patched.selftest.tiny_checkpoints import (
        build_wan,
        wan_config,
        wan_original_state_dict,
        write_config_dir,
        write_gguf,
    )

    config = wan_config("t2v", num_layers=WAN_LAYERS[size])
    directory = fixture_dir() / f"wan-gguf-{size}"
    checkpoint = directory / "wan.gguf"
    if not checkpoint.exists():
        write_config_dir("WanTransformer3DModel", config, directory)
        write_gguf(wan_original_state_dict(build_wan(config)), str(directory / "partial.gguf"))
        (directory / "partial.gguf").rename(checkpoint)
    return config, directory, checkpoint


def _case_offloaded_gguf_forward(size):
    import torch
    from accelerate import cpu_offload

    from diffusers_patched.selftest.tiny_checkpoints import load_wan_single_file, wan_inputs

    config, directory, checkpoint = _wan_gguf_fixture(size)
    model = load_wan_single_file(checkpoint, directory)
    if _patched():
        cpu_offload(model, torch.device("cpu"))
    inputs = wan_inputs(config)
    with torch.no_grad():
        start = time.perf_counter()
        model(**inputs)
        first = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(5):
            model(**inputs)
    parameters = sum(p.numel() for p in model.parameters())
    return {
        "seconds": (time.perf_counter() - start) / 5,
        "parameters": parameters,
        "note": f"first pass {first:.3f} s",
    }


def _case_gguf_lora_forward(size):
    import torch
    from peft.tuners.tuners_utils import BaseTunerLayer

    from diffusers_patched.selftest.tiny_checkpoints import (
        load_wan_single_file,
        wan_inputs,
        wan_lightx2v_lora,
        wan_transformer_pipeline,
    )

    config, directory, checkpoint = _wan_gguf_fixture(size)
    _import_before_timing()
    transformer = load_wan_single_file(checkpoint, directory, compute_dtype=torch.bfloat16)
    pipe = wan_transformer_pipeline(transformer)
    pipe.load_lora_weights(wan_lightx2v_lora(config))

    def lora_weights_mb():
        layers = [module for module in transformer.modules() if isinstance(module, BaseTunerLayer)]
        return sum(layer.get_base_layer().weight.nbytes for layer in layers) / 1e6

    quantized_mb = lora_weights_mb()
    if _patched():
        pipe.fuse_lora()
        note = f"fused: {lora_weights_mb():.2f} MB bfloat16 + {quantized_mb:.2f} MB Q8_0 kept for unfuse_lora"
    else:
        note = f"unfused: {quantized_mb:.2f} MB Q8_0"
    inputs = {
        name: value.to(torch.bfloat16) if value.is_floating_point() else value
        for name, value in wan_inputs(config).items()
        if isinstance(value, torch.Tensor)
    }
    with torch.no_grad():
        transformer(**inputs)
        start = time.perf_counter()
        for _ in range(5):
            transformer(**inputs)
    parameters = sum(p.numel() for p in transformer.parameters())
    return {"seconds": (time.perf_counter() - start) / 5, "parameters": parameters, "note": note}


def _case_device_map_planning(size):
    from diffusers_patched.selftest.scenarios.device_map import DEVICE_MAP_TEXT_ENCODER, GPU_BUDGET_FITS_ONLY_QUANTIZED
    from diffusers_patched.selftest.tiny_pipelines import (
        bnb_text_encoder_config,
        load_tiny_sd_pipeline,
        loaded_size,
        plan_with_budget,
        save_tiny_sd_pipeline,
    )

    path = fixture_dir() / "sd-pipeline-device-map"
    if not (path / "model_index.json").exists():
        save_tiny_sd_pipeline(path, text_encoder_kwargs=DEVICE_MAP_TEXT_ENCODER)
    _import_before_timing()
    start = time.perf_counter()
    plan = plan_with_budget(path, GPU_BUDGET_FITS_ONLY_QUANTIZED, quantization_config=bnb_text_encoder_config())
    seconds = time.perf_counter() - start
    # What the plan puts on the accelerator, each component at the size it has once loaded.
    pipe = load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config())
    on_gpu = sum(loaded_size(getattr(pipe, name)) for name, device in plan.items() if device != "cpu")
    return {"seconds": seconds, "note": f"{on_gpu / 1e6:.2f} MB on GPU 0"}


# name -> LTX-Video VAE block_out_channels: "medium" has about 100M parameters.
LTX_VAE_CHANNELS = {"medium": (72, 144, 288, 288)}
# One block's norm and a scalar, both constants of the constructor.
LTX_VAE_MISSING = (
    "decoder.up_blocks.2.conv_in.norm3.weight",
    "decoder.up_blocks.2.conv_in.norm3.bias",
    "decoder.timestep_scale_multiplier",
)

CASES = {
    "import diffusers + pipeline class": (_case_import, [None]),
    "from_pretrained (saved pipeline)": (_case_load_pipeline, list(PIPELINE_SIZES)),
    "from_single_file (nothing missing)": (_case_single_file, list(FLUX_SIZES)),
    "save_pretrained (nothing offloaded)": (_case_save_pipeline, list(PIPELINE_SIZES)),
    "nf4 text encoder forward: sequential offload (patched) vs model offload (upstream)": (
        _case_offloaded_4bit_forward,
        list(TEXT_ENCODER_SIZES),
    ),
    "Wan from_single_file: missing keys (patched) vs matching config (upstream)": (
        _case_single_file_missing_keys,
        list(WAN_LAYERS),
    ),
    "LTX-Video VAE from_pretrained: a norm and a scalar missing (patched) vs nothing missing (upstream)": (
        _case_ltx_vae_missing_norm_and_scalar,
        list(LTX_VAE_CHANNELS),
    ),
    "Wan from_pretrained: missing keys (patched) vs matching config (upstream)": (
        _case_from_pretrained_missing_keys,
        list(WAN_LAYERS),
    ),
    "GGUF Q8_0 Wan forward: sequential offload (patched) vs not offloaded (upstream)": (
        _case_offloaded_gguf_forward,
        list(WAN_LAYERS),
    ),
    "HunyuanDiT pipeline call: sequential offload (patched) vs not offloaded (upstream)": (
        _case_sequential_offload_hunyuan_dit,
        list(HUNYUAN_DIT_SIZES)[:2],
    ),
    "save_pretrained: offloaded by accelerate's hooks (patched) vs not offloaded (upstream)": (
        _case_save_offloaded_pipeline,
        list(PIPELINE_SIZES),
    ),
    "Wan GGUF (Q8_0, bfloat16 compute) + LoRA forward: fused (patched) vs unfused (upstream)": (
        _case_gguf_lora_forward,
        list(WAN_LAYERS),
    ),
    'device_map="balanced" planning, nf4 text encoder, GPU 0 budget (no weights loaded)': (
        _case_device_map_planning,
        ["tiny"],
    ),
}


# GPU rows, run when torch sees a CUDA device: the unaffected loads onto the GPU, the sequential-offload step and the
# device-map placement. Not run yet: no GPU has been lent to this project.


def _measure_gpu(load):
    """Time and peak GPU memory (`torch.cuda.max_memory_allocated`) of `load()`, which leaves its result on the GPU."""
    import torch

    _import_before_timing()
    torch.zeros(1, device="cuda")  # creates the CUDA context outside the clock
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    model = load()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    parameters = sum(p.numel() for component in _modules(model) for p in component.parameters())
    return {"seconds": seconds, "parameters": parameters, "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20}


def _gpu_case_load_pipeline(size):
    from diffusers_patched.selftest.tiny_pipelines import load_tiny_sd_pipeline

    return _measure_gpu(lambda: load_tiny_sd_pipeline(pipeline_fixture(size)).to("cuda"))


def _gpu_case_single_file(size):
    from diffusers import FluxTransformer2DModel

    directory, checkpoint = single_file_fixture(size)
    return _measure_gpu(
        lambda: FluxTransformer2DModel.from_single_file(str(checkpoint), config=str(directory)).to("cuda")
    )


def _gpu_case_offloaded_4bit_step(size):
    """Per-step time of an nf4 unet (diffusers' quantizer) + nf4 text encoder pipeline, and the peak GPU memory of the
    steps: sequential offload patched; model offload upstream, which cannot offload a 4-bit model sequentially."""
    import torch

    from diffusers_patched.selftest.gpu_scenarios import unet_step
    from diffusers_patched.selftest.tiny_pipelines import bnb_text_encoder_config, load_tiny_sd_pipeline

    config = bnb_text_encoder_config("nf4", components=("text_encoder", "unet"))
    pipe = load_tiny_sd_pipeline(pipeline_fixture(size), quantization_config=config)
    if _patched():
        pipe.enable_sequential_cpu_offload()
    else:
        pipe.enable_model_cpu_offload()
    unet_step(pipe.unet)  # warm-up: kernels, cuBLAS workspace
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(5):
        unet_step(pipe.unet)
    torch.cuda.synchronize()
    return {
        "seconds": (time.perf_counter() - start) / 5,
        "parameters": sum(p.numel() for p in pipe.unet.parameters()),
        "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20,
    }


def _gpu_case_device_map_placement(size):
    """device_map="balanced" with GPU 0 too small for all of an nf4 text encoder + nf4 unet + vae: load time, and the
    bytes planned on GPU 0 against `torch.cuda.memory_allocated` once loaded (both sides load; upstream fails later)."""
    import torch

    from diffusers_patched.selftest.gpu_scenarios import GPU0_BUDGETS, recording_planned_sizes
    from diffusers_patched.selftest.scenarios.device_map import DEVICE_MAP_TEXT_ENCODER
    from diffusers_patched.selftest.tiny_pipelines import (
        bnb_text_encoder_config,
        load_tiny_sd_pipeline,
        save_tiny_sd_pipeline,
    )

    path = fixture_dir() / "sd-pipeline-device-map"
    if not (path / "model_index.json").exists():
        save_tiny_sd_pipeline(path, text_encoder_kwargs=DEVICE_MAP_TEXT_ENCODER)
    config = bnb_text_encoder_config("nf4", components=("text_encoder", "unet"))
    loaded = {}

    def load():
        loaded["pipe"] = load_tiny_sd_pipeline(
            path, quantization_config=config, device_map="balanced", max_memory={0: GPU0_BUDGETS[size], "cpu": "1GB"}
        )
        return loaded["pipe"]

    with recording_planned_sizes() as sizes:
        result = _measure_gpu(load)
    plan = loaded["pipe"].hf_device_map
    planned = sum(sizes[name] for name, device in plan.items() if device == 0)
    allocated = torch.cuda.memory_allocated()
    return {**result, "note": f"{plan}: {planned / 1e6:.2f} MB planned, {allocated / 1e6:.2f} MB allocated on GPU 0"}


def _gpu_case_sequential_offload_hunyuan_dit(size):
    """The CPU row's call on the GPU, with its peak GPU memory: the weights sequential offload keeps off the GPU."""
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.reset_peak_memory_stats()
    result = _hunyuan_dit_call(size, "cuda")
    return {**result, "peak_gpu_mib": torch.cuda.max_memory_allocated() / 2**20}


GPU_CASES = {
    "GPU: from_pretrained (saved pipeline) + .to('cuda')": (_gpu_case_load_pipeline, list(PIPELINE_SIZES)),
    "GPU: from_single_file (nothing missing) + .to('cuda')": (_gpu_case_single_file, list(FLUX_SIZES)),
    "GPU: nf4 unet + text encoder, unet step: sequential offload (patched) vs model offload (upstream)": (
        _gpu_case_offloaded_4bit_step,
        list(PIPELINE_SIZES),
    ),
    "GPU: HunyuanDiT pipeline call: sequential offload (patched) vs not offloaded (upstream)": (
        _gpu_case_sequential_offload_hunyuan_dit,
        list(HUNYUAN_DIT_SIZES),
    ),
    'GPU: device_map="balanced" load, nf4 text encoder + unet, GPU 0 budget: planned vs allocated': (
        _gpu_case_device_map_placement,
        ["#12719"],
    ),
}


def _child(case, size):
    function, _ = {**CASES, **GPU_CASES}[case]
    result = function() if size == "None" else function(size)
    # ru_maxrss is in KiB on Linux.
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def _run(args, patched, cuda=False):
    env = {**os.environ, "DIFFUSERS_PATCHED": "1" if patched else "0", "HF_HUB_OFFLINE": "1"}
    if not cuda:
        # CPU rows stay CPU rows on a GPU machine: transformers and diffusers would put bitsandbytes models on GPU 0.
        env["CUDA_VISIBLE_DEVICES"] = ""
    start = time.perf_counter()
    process = subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"benchmark run {args} failed:\n{process.stderr[-3000:]}")
    lines = process.stdout.strip().splitlines()
    return {"wall": wall, **(json.loads(lines[-1]) if lines else {})}


def _interleaved(args, repeats, cuda=False):
    runs = {False: [], True: []}
    for _ in range(repeats):
        for patched in (False, True):
            runs[patched].append(_run(args, patched, cuda))
    return runs[False], runs[True]


def _startup_cost(repeats):
    """Self time of diffusers_patched's modules at start-up, from `python -X importtime -c pass`."""
    costs = []
    for _ in range(repeats):
        env = {**os.environ, "DIFFUSERS_PATCHED": "1"}
        stderr = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "pass"], env=env, capture_output=True, text=True
        ).stderr
        costs.append(
            sum(
                int(line.split("|")[0].split(":")[1])
                for line in stderr.splitlines()
                if line.rstrip().split("|")[-1].strip().startswith("diffusers_patched")
            )
        )
    return statistics.median(costs) / 1000


def _cell(values, unit, digits):
    median = statistics.median(values)
    return f"{median:.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})", median


def _case_row(case, size, repeats, cuda=False):
    """One table row: both sides of a case, interleaved; peak RSS for CPU rows, peak GPU memory for GPU rows."""
    if size is not None:
        _run(["-m", "tools.bench", "--child", case, str(size)], patched=False, cuda=cuda)  # builds the fixture
    upstream, patched = _interleaved(["-m", "tools.bench", "--child", case, str(size)], repeats, cuda)
    up_cell, up = _cell([r["seconds"] for r in upstream], "s", 3)
    pa_cell, pa = _cell([r["seconds"] for r in patched], "s", 3)
    peak = "peak_gpu_mib" if cuda else "peak_rss_mib"
    up_peak = statistics.median(r[peak] for r in upstream)
    pa_peak = statistics.median(r[peak] for r in patched)
    parameters = f"{upstream[0]['parameters'] / 1e6:.1f} M" if "parameters" in upstream[0] else ""
    notes = " / ".join(runs[0]["note"] for runs in (upstream, patched) if "note" in runs[0])
    digits = 1 if cuda else 0
    return (
        case,
        size or "",
        parameters,
        up_cell,
        pa_cell,
        pa / up,
        f"{up_peak:.{digits}f}",
        f"{pa_peak:.{digits}f}",
        pa_peak / up_peak if up_peak else "",
        notes,
    )


def _markdown_row(row):
    return f"| {' | '.join(str(c) if not isinstance(c, float) else f'{c:.3f}' for c in row)} |"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("build") / "bench.md")
    parser.add_argument("--cases", default="", help="run only the cases whose name contains this text")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(*args.child)

    import diffusers
    import torch

    rows = []
    jobs = [(case, size) for case, (_, sizes) in CASES.items() if args.cases in case for size in sizes]
    print(f"[1/{len(jobs) + 1}] interpreter start-up", file=sys.stderr, flush=True)
    upstream, patched = _interleaved(["-c", "pass"], args.repeats * 4)
    up_cell, up = _cell([r["wall"] * 1000 for r in upstream], "ms", 1)
    pa_cell, pa = _cell([r["wall"] * 1000 for r in patched], "ms", 1)
    rows.append(("python -c pass (DIFFUSERS_PATCHED=1 vs 0)", "", "", up_cell, pa_cell, pa / up, "", "", "", ""))
    startup_ms = _startup_cost(args.repeats * 4)
    for number, (case, size) in enumerate(jobs, 2):
        print(f"[{number}/{len(jobs) + 1}] {case} {size or ''}", file=sys.stderr, flush=True)
        rows.append(_case_row(case, size, args.repeats))
    gpu_rows = []
    if torch.cuda.is_available():
        gpu_jobs = [(case, size) for case, (_, sizes) in GPU_CASES.items() if args.cases in case for size in sizes]
        for number, (case, size) in enumerate(gpu_jobs, 1):
            print(f"[GPU {number}/{len(gpu_jobs)}] {case} {size}", file=sys.stderr, flush=True)
            try:
                gpu_rows.append(_case_row(case, size, args.repeats, cuda=True))
            except RuntimeError as e:
                # Not run before on any GPU: one failing case must not take the others' figures with it.
                gpu_rows.append((case, size, "", "failed", "failed", "", "", "", "", str(e).splitlines()[-1]))

    header = [
        f"diffusers-patched benchmark: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"torch {torch.__version__}, diffusers {diffusers.__version__}; device: CPU; {args.repeats} interleaved "
        f"repeats (start-up: {args.repeats * 4}); median (min-max).",
        "",
        f"Start-up cost of activation (`python -X importtime -c pass`, self time of diffusers_patched modules): "
        f"{startup_ms:.2f} ms",
        "",
        "| case | size | parameters | upstream | patched | time ratio | peak RSS upstream (MiB) | peak RSS patched (MiB)"
        " | RSS ratio | notes (upstream / patched) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    table = "\n".join(header + [_markdown_row(row) for row in rows])
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        table += "\n".join(
            [
                "",
                "",
                f"GPU rows: device: {properties.name} ({properties.total_memory / 2**30:.0f} GiB), CUDA "
                f"{torch.version.cuda}; {args.repeats} interleaved repeats; median (min-max); peak GPU memory is "
                "`torch.cuda.max_memory_allocated`.",
                "",
                "| case | size | parameters | upstream | patched | time ratio | peak GPU upstream (MiB) | peak GPU patched "
                "(MiB) | GPU memory ratio | notes (upstream / patched) |",
                "|---|---|---|---|---|---|---|---|---|---|",
                *[_markdown_row(row) for row in gpu_rows],
            ]
        )
    else:
        table += "\n\nGPU rows: skipped (torch.cuda.is_available() is False)."
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table + "\n")
    print(f"\nwritten to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
