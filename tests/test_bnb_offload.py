"""Patches 0002-0004, 0011: bitsandbytes models survive sequential offloading, LoRA loading, state_dict() and saving."""

import pytest


@pytest.mark.parametrize(
    "name, upstream_error, patched_result",
    [
        (
            "sequential-cpu-offload-on-cpu",
            "TypeError: new() received an invalid combination of arguments - got (Tensor, requires_grad=bool)",
            "offload device cpu; max abs diff per pass [0.0, 0.0, 0.0]",
        ),
        (
            "bnb-4bit-sequential-cpu-offload",
            "TypeError: new() received an invalid combination of arguments - got (Tensor, requires_grad=bool)",
            "max abs diff per pass [0.0, 0.0, 0.0]; 0 statistics on meta; 60/60 state_dict statistics equal",
        ),
        (
            "bnb-4bit-offload-twice-then-model-offload",
            "TypeError: new() received an invalid combination of arguments - got (Tensor, requires_grad=bool)",
            "max abs diff per pass [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]",
        ),
        (
            "bnb-4bit-lora-while-sequentially-offloaded",
            "ValueError: You cannot cast a bitsandbytes model in a new `dtype`",
            "offload device cpu; max abs diff per pass [0.0, 0.0, 0.0]",
        ),
        (
            "lora-into-bnb-text-encoder",
            "ValueError: You cannot cast a bitsandbytes model in a new `dtype`",
            "adapters ['default_0'] on a quantized text encoder: True",
        ),
        (
            "bnb-8bit-sequential-offload-and-lora",
            "TypeError: new() received an invalid combination of arguments - got (Tensor, requires_grad=bool)",
            "max abs diff per pass [0.0, 0.0, 0.0]; with the LoRA loaded while offloaded [0.0, 0.0, 0.0]",
        ),
        (
            "save-offloaded-pipeline",
            "NotImplementedError: Cannot copy out of meta tensor; no data!",
            "8-bit: 60/60 text encoder and 208/208 unet tensors equal, max abs diff [0.0]; "
            "nf4-dq: 96/96 text encoder and 208/208 unet tensors equal, max abs diff [0.0]",
        ),
        (
            "bnb-4bit-dispatch-cpu-disk-then-peft",
            "RuntimeError: Tensor.item() cannot be called on meta tensors",
            "make_bnb_offload_safe covered 14 weights; max abs diff to the un-offloaded adapter model [0.0, 0.0, 0.0]",
        ),
    ],
)
def test_flow_fails_upstream_and_matches_the_unoffloaded_reference_patched(
    scenario_outcomes, name, upstream_error, patched_result
):
    upstream = scenario_outcomes[False][name]
    assert not upstream.ok and upstream.result.startswith(upstream_error), upstream.result
    patched = scenario_outcomes[True][name]
    assert patched.ok, patched.result
    assert patched.result == patched_result


# The meta-tensor failure itself, past the cpu:0 problem: accelerate's own cpu_offload with a plain CPU device.
CPU_OFFLOAD = """
import torch
from accelerate import cpu_offload
from tests.support.tiny_pipelines import bnb_text_encoder_config, load_tiny_sd_pipeline, save_tiny_sd_pipeline

path = save_tiny_sd_pipeline({path!r})
ids = torch.tensor([[0, 5, 17, 99, 250, 2, 1, 1]])
for kind in ["nf4", "fp4", "nf4-dq", "fp4-dq"]:
    config = bnb_text_encoder_config(kind.split("-")[0], double_quant=kind.endswith("-dq"))
    reference = load_tiny_sd_pipeline(path, quantization_config=config).text_encoder
    expected_state = reference.state_dict()
    with torch.no_grad():
        expected = reference(ids)[0]
    text_encoder = load_tiny_sd_pipeline(path, quantization_config=config).text_encoder
    try:
        from diffusers_patched import make_bnb_offload_safe

        print(kind, "covered", make_bnb_offload_safe(text_encoder))
    except ImportError:
        pass
    cpu_offload(text_encoder, torch.device("cpu"))
    try:
        for _ in range(3):
            with torch.no_grad():
                print(kind, "diff", (text_encoder(ids)[0] - expected).abs().max().item())
            state = text_encoder.state_dict()
            statistics = [k for k in expected_state if ".weight." in k]
            print(kind, "statistics equal", all(torch.equal(state[k], expected_state[k]) for k in statistics))
    except Exception as e:
        print(kind, "error", type(e).__name__, str(e).splitlines()[0])
"""


def test_4bit_text_encoder_under_cpu_offload_hooks_matches_reference_on_every_pass(python, tmp_path):
    code = CPU_OFFLOAD.format(path=str(tmp_path / "pipe"))
    kinds = ["nf4", "fp4", "nf4-dq", "fp4-dq"]
    upstream = python(code, patched=False)
    assert upstream.returncode == 0, upstream.stderr
    assert upstream.stdout.splitlines() == [
        f"{kind} error NotImplementedError Cannot copy out of meta tensor; no data!" for kind in kinds
    ]

    patched = python(code)
    assert patched.returncode == 0, patched.stderr
    assert patched.stdout.splitlines() == [
        line
        for kind in kinds
        for line in [f"{kind} covered 12"] + [f"{kind} diff 0.0", f"{kind} statistics equal True"] * 3
    ]


def test_offloading_a_4bit_model_whose_statistics_are_already_lost_is_refused_clearly(python, tmp_path):
    code = f"""
    import torch
    from accelerate import cpu_offload
    from diffusers_patched import make_bnb_offload_safe
    from tests.support.tiny_pipelines import bnb_text_encoder_config, load_tiny_sd_pipeline, save_tiny_sd_pipeline

    path = save_tiny_sd_pipeline({str(tmp_path / "pipe")!r})
    pipe = load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config("nf4", double_quant=True))
    cpu_offload(pipe.text_encoder, torch.device("cpu"))
    pipe.enable_sequential_cpu_offload(device="cpu")
    """
    patched = python(code)
    assert patched.returncode != 0
    assert "ValueError: Cannot sequentially offload `text_encoder` (CLIPTextModel)." in patched.stderr
    assert "are on the meta device" in patched.stderr and "enable_model_cpu_offload()" in patched.stderr


def test_offloaded_8bit_text_encoder_state_dict_and_save_hold_real_weights_and_scales(python, tmp_path):
    code = f"""
    import contextlib
    import torch
    from accelerate import cpu_offload
    from transformers import CLIPTextModel
    from tests.support.tiny_pipelines import bnb_text_encoder_config, load_tiny_sd_pipeline, save_tiny_sd_pipeline

    try:
        from diffusers.models.modeling_utils import onload_offloaded_weights
    except ImportError:  # upstream
        onload_offloaded_weights = lambda model: contextlib.nullcontext()

    path = save_tiny_sd_pipeline({str(tmp_path / "pipe")!r})
    ids = torch.tensor([[0, 5, 17, 99, 250, 2, 1, 1]])
    reference = load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config("8bit")).text_encoder
    expected_state = reference.state_dict()
    with torch.no_grad():
        expected = reference(ids)[0]
    text_encoder = load_tiny_sd_pipeline(path, quantization_config=bnb_text_encoder_config("8bit")).text_encoder
    cpu_offload(text_encoder, torch.device("cpu"))
    with torch.no_grad():
        text_encoder(ids)
    print("plain state_dict: SCB", sum(k.endswith(".SCB") for k in text_encoder.state_dict()), "of 12")
    try:
        with onload_offloaded_weights(text_encoder):
            state = text_encoder.state_dict()
            print("onloaded state_dict: equal", sum(k in state and state[k].device.type != "meta" and torch.equal(state[k], v) for k, v in expected_state.items()), "of", len(expected_state))
            text_encoder.save_pretrained({str(tmp_path / "saved")!r})
        saved = CLIPTextModel.from_pretrained({str(tmp_path / "saved")!r})
        with torch.no_grad():
            print("saved: max abs diff", (saved(ids)[0] - expected).abs().max().item())
            print("offloaded again:", text_encoder.embeddings.token_embedding.weight.device.type, (text_encoder(ids)[0] - expected).abs().max().item())
    except Exception as e:
        print("error", type(e).__name__, str(e).splitlines()[0])
    """
    upstream = python(code, patched=False)
    assert upstream.returncode == 0, upstream.stderr
    assert upstream.stdout.splitlines() == [
        "plain state_dict: SCB 0 of 12",
        "onloaded state_dict: equal 0 of 60",
        "error NotImplementedError Cannot copy out of meta tensor; no data!",
    ]

    patched = python(code)
    assert patched.returncode == 0, patched.stderr
    assert patched.stdout.splitlines() == [
        "plain state_dict: SCB 0 of 12",
        "onloaded state_dict: equal 60 of 60",
        "saved: max abs diff 0.0",
        "offloaded again: meta 0.0",
    ]
