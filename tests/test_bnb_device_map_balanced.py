"""Patches 0007-0010: pipelines with bitsandbytes components and device_map="balanced" (diffusers #12719).

Planning is tested for real on CPU: `max_memory={0: budget, "cpu": ...}` makes the planner run (accelerate only warns
that device 0 is missing) and `plan_with_budget` stops `from_pretrained` right after planning. Loading onto GPU 0 is
impossible here, so placement is tested by loading with the part of the plan that can run on CPU
({"text_encoder": "cpu"}), through the real `load_sub_model`.

Sizes of the tiny pipeline (float32): text_encoder 7.42 MB (2.02 MB in nf4), unet 4.40 MB, vae 0.58 MB.
"""

import json

import pytest
from conftest import run_python


PLANS = """
import json, sys
from tests.support.tiny_pipelines import bnb_text_encoder_config, count_weight_reads, plan_with_budget
reads = count_weight_reads()
plans = {{}}
for gpu, cpu in {budgets}:
    try:
        plans[f"{{gpu}}/{{cpu}}"] = plan_with_budget({path!r}, gpu, cpu_budget=cpu, quantization_config=bnb_text_encoder_config())
    except Exception as e:
        plans[f"{{gpu}}/{{cpu}}"] = f"{{type(e).__name__}}: {{e}}"
print(json.dumps({{"plans": {{k: v if isinstance(v, str) else sorted(v.items()) for k, v in plans.items()}}, "reads": reads}}))
"""

BUDGETS = [
    (7_200_000, 10**9),  # the pipeline fits GPU 0 only with the text encoder quantized
    (3_000_000, 10**9),  # two of three fit
    (500_000, 10**9),  # nothing fits GPU 0, everything fits the CPU
    (500_000, 5_000_000),  # nothing fits anywhere
]


@pytest.fixture(scope="module")
def pipeline_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("pipe")
    code = f"""
    from tests.support.scenarios import DEVICE_MAP_TEXT_ENCODER
    from tests.support.tiny_pipelines import save_tiny_sd_pipeline

    save_tiny_sd_pipeline({str(path)!r}, text_encoder_kwargs=DEVICE_MAP_TEXT_ENCODER)
    """
    result = run_python(code, patched=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return path


@pytest.fixture(scope="module")
def plans(pipeline_path):
    def compute(patched):
        result = run_python(PLANS.format(budgets=BUDGETS, path=str(pipeline_path)), patched=patched)
        assert result.returncode == 0, result.stderr[-3000:]
        out = json.loads(result.stdout.strip().splitlines()[-1])
        return {k: (dict(v) if isinstance(v, list) else v) for k, v in out["plans"].items()}, out["reads"]

    return {"upstream": compute(False), "patched": compute(True)}


def test_a_text_encoder_that_fits_only_quantized_is_planned_on_the_gpu(plans):
    assert plans["upstream"][0]["7200000/1000000000"] == {"text_encoder": "cpu", "unet": 0, "vae": 0}
    assert plans["patched"][0]["7200000/1000000000"] == {"text_encoder": 0, "unet": 0, "vae": 0}


def test_two_of_three_fit_and_none_is_dropped(plans):
    # Upstream: the unquantized text encoder (7.42 MB) and the unet both "do not fit" and the unet overwrites it.
    assert plans["upstream"][0]["3000000/1000000000"] == {"unet": "cpu", "vae": 0}
    assert plans["patched"][0]["3000000/1000000000"] == {"text_encoder": 0, "unet": "cpu", "vae": 0}


def test_when_nothing_fits_every_component_is_planned(plans):
    assert plans["upstream"][0]["500000/1000000000"] == {"vae": "cpu"}
    assert plans["patched"][0]["500000/1000000000"] == {"text_encoder": "cpu", "unet": "cpu", "vae": "cpu"}


def test_an_impossible_plan_raises_before_loading(plans):
    assert plans["upstream"][0]["500000/5000000"] == {"vae": "cpu"}
    assert plans["patched"][0]["500000/5000000"] == (
        "ValueError: Cannot load StableDiffusionPipeline with `device_map='balanced'`: unet (4.2 MB), text_encoder"
        " (1.92 MB), vae (564.15 KB) do not fit on the accelerators, and need 6.67 MB of CPU memory together. Memory"
        " available per device: 0: 488.28 KB, cpu: 4.77 MB. Please pass a larger `max_memory`, or quantize these"
        " components with `quantization_config`."
    )


def test_planning_reads_no_weights(plans):
    assert plans["upstream"][1] == []
    assert plans["patched"][1] == []


PLACEMENT = """
import json, torch
from tests.support.tiny_pipelines import bnb_text_encoder_config, fixed_text_input, load_tiny_sd_pipeline, load_with_plan, run_pipeline
config = dict(kind={kind!r}, double_quant={double_quant!r})
reference = load_tiny_sd_pipeline({path!r}, quantization_config=bnb_text_encoder_config(**config))
pipe = load_with_plan({path!r}, {{"text_encoder": "cpu"}}, quantization_config=bnb_text_encoder_config(**config))
ids = fixed_text_input()
with torch.no_grad():
    diffs = [(pipe.text_encoder(ids)[0] - reference.text_encoder(ids)[0]).abs().max().item() for _ in range(3)]
(embeds, images), (ref_embeds, ref_images) = run_pipeline(pipe), run_pipeline(reference)
devices = sorted({{t.device.type for t in pipe.text_encoder.state_dict().values()}})
print(json.dumps({{"map": pipe.hf_device_map, "devices": devices, "diffs": diffs,
                   "pipeline_diff": (images - ref_images).abs().max().item()}}))
"""


@pytest.mark.parametrize("kind,double_quant", [("nf4", True), ("8bit", False)])
def test_a_bnb_text_encoder_planned_on_cpu_runs_like_an_unoffloaded_one(pipeline_path, kind, double_quant):
    code = PLACEMENT.format(path=str(pipeline_path), kind=kind, double_quant=double_quant)
    upstream = run_python(code, patched=False)
    assert upstream.returncode != 0
    assert "RuntimeError: Cannot access accelerator device when none is available." in upstream.stderr

    patched = run_python(code)
    assert patched.returncode == 0, patched.stderr[-3000:]
    assert json.loads(patched.stdout.strip().splitlines()[-1]) == {
        "map": {"text_encoder": "cpu"},
        "devices": ["cpu"],
        "diffs": [0.0, 0.0, 0.0],
        "pipeline_diff": 0.0,
    }
