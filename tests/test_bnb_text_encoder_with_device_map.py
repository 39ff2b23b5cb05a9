"""Patch 0001: bitsandbytes components are recognised in `load_sub_model`, whatever form their config takes."""

DETECT = """
import torch
from transformers import BitsAndBytesConfig as TransformersBitsAndBytesConfig
from diffusers import BitsAndBytesConfig, GGUFQuantizationConfig
from diffusers.pipelines import pipeline_loading_utils

configs = {
    "diffusers 8-bit": BitsAndBytesConfig(load_in_8bit=True),
    "diffusers fp4": BitsAndBytesConfig(load_in_4bit=True),
    "diffusers nf4 double quant": BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True
    ),
    "transformers 8-bit": TransformersBitsAndBytesConfig(load_in_8bit=True),
    "transformers fp4": TransformersBitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4"),
    "transformers nf4": TransformersBitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4"),
    "dict nf4": TransformersBitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4").to_dict(),
    "dict 8-bit": {"quant_method": "bitsandbytes", "load_in_8bit": True},
    "dict without bits": {"quant_method": "bitsandbytes"},
    "gguf": GGUFQuantizationConfig(compute_dtype=torch.float32),
    "dict gguf": {"quant_method": "gguf"},
    "none": None,
}
for name, config in configs.items():
    print(f"{name}: {pipeline_loading_utils._get_bitsandbytes_quantization_method(config)}")
"""


def test_every_bitsandbytes_config_form_is_detected_with_its_kind(python):
    upstream = python(DETECT, patched=False)
    assert "has no attribute '_get_bitsandbytes_quantization_method'" in upstream.stderr

    patched = python(DETECT)
    assert patched.returncode == 0, patched.stderr
    assert patched.stdout.splitlines() == [
        "diffusers 8-bit: llm_int8",
        "diffusers fp4: fp4",
        "diffusers nf4 double quant: nf4",
        "transformers 8-bit: llm_int8",
        "transformers fp4: fp4",
        "transformers nf4: nf4",
        "dict nf4: nf4",
        "dict 8-bit: llm_int8",
        "dict without bits: None",
        "gguf: None",
        "dict gguf: None",
        "none: None",
    ]


def test_bnb_text_encoder_under_a_device_map_is_loaded_with_low_cpu_mem_usage_false(scenario_outcomes):
    upstream = scenario_outcomes[False]["bnb-text-encoder-with-device-map"]
    assert upstream.ok, upstream.result
    assert upstream.result.startswith("low_cpu_mem_usage=True given to transformers for the nf4 text encoder")

    patched = scenario_outcomes[True]["bnb-text-encoder-with-device-map"]
    assert patched.ok, patched.result
    assert patched.result == (
        "low_cpu_mem_usage=False given to transformers for the nf4 text encoder (Params4bit weights) "
        "with device_map='cpu'"
    )


def test_the_low_cpu_mem_usage_choice_is_logged_at_info_level(python, tmp_path):
    code = f"""
    from diffusers.utils import logging
    from tests.support.tiny_pipelines import bnb_text_encoder_config, load_tiny_sd_pipeline, save_tiny_sd_pipeline

    logging.set_verbosity_info()
    path = save_tiny_sd_pipeline({str(tmp_path)!r})
    load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config("fp4"), device_map="cpu")
    """
    message = (
        "Loading text_encoder quantized with bitsandbytes (fp4) with `low_cpu_mem_usage=False` because a "
        "`device_map` is set."
    )
    assert message not in python(code, patched=False).stderr
    patched = python(code)
    assert patched.returncode == 0, patched.stderr
    assert message in patched.stderr
