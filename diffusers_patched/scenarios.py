"""Known upstream failures, each as a scenario that builds tiny models locally and runs one user flow.

`make demo` and the tests run every scenario twice in subprocesses: on upstream (`DIFFUSERS_PATCHED=0`) and
with diffusers-patched. A scenario returns a one-line result, or raises the error a user would see.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path


SCENARIOS = {}


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


def run_scenario(name, patched, workdir=None):
    """Run scenario `name` in a fresh interpreter, with or without the patches."""
    env = {**os.environ, "DIFFUSERS_PATCHED": "1" if patched else "0", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        process = subprocess.run(
            [sys.executable, "-m", "diffusers_patched.scenarios", name, str(workdir or tmp)],
            env=env,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
    lines = process.stdout.strip().splitlines()
    if process.returncode != 0 or not lines:
        return Outcome(False, f"scenario crashed: {process.stderr.strip()[-2000:]}", seconds)
    return Outcome(seconds=seconds, **json.loads(lines[-1]))


def _main(name, workdir):
    try:
        outcome = {"ok": True, "result": SCENARIOS[name].run(Path(workdir))}
    except Exception as e:
        traceback.print_exc()
        outcome = {"ok": False, "result": f"{type(e).__name__}: {e}"}
    print(json.dumps(outcome))


# Tiny models, built from small configs (dimensions are multiples of 64: bitsandbytes' CPU 4-bit path needs that).


def tiny_text_encoder():
    import torch
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    config = CLIPTextConfig(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_hidden_layers=2,
        vocab_size=1000,
        bos_token_id=0,
        eos_token_id=2,
        pad_token_id=1,
    )
    return CLIPTextModel(config)


def save_tiny_sd_pipeline(path, unet_channels=(32, 64)):
    """A StableDiffusionPipeline of tiny random components, saved with `tokenizer=None`."""
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=unet_channels,
        layers_per_block=1,
        sample_size=16,
        in_channels=4,
        out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=64,
        norm_num_groups=32,
    )
    vae = AutoencoderKL(
        block_out_channels=[32],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D"],
        latent_channels=4,
        norm_num_groups=32,
    )
    pipe = StableDiffusionPipeline(
        unet=unet,
        vae=vae,
        scheduler=DDIMScheduler(),
        text_encoder=tiny_text_encoder(),
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


def bnb_4bit_text_encoder_config(quant_type="nf4", double_quant=False):
    from diffusers.quantizers import PipelineQuantizationConfig

    return PipelineQuantizationConfig(
        quant_backend="bitsandbytes_4bit",
        quant_kwargs={
            "load_in_4bit": True,
            "bnb_4bit_quant_type": quant_type,
            "bnb_4bit_use_double_quant": double_quant,
        },
        components_to_quantize=["text_encoder"],
    )


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
        save_tiny_sd_pipeline(workdir / "pipe"), quantization_config=bnb_4bit_text_encoder_config(), device_map="cpu"
    )
    (kwargs,) = calls
    method = kwargs["quantization_config"].quantization_method()
    weight = pipe.text_encoder.encoder.layers[0].mlp.fc1.weight
    return (
        f"low_cpu_mem_usage={kwargs['low_cpu_mem_usage']} given to transformers for the {method} text encoder "
        f"({type(weight).__name__} weights) with device_map={kwargs['device_map']!r}"
    )


if __name__ == "__main__":
    _main(*sys.argv[1:])
