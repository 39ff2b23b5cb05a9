"""`make demo`'s scenarios, asserted on both sides: upstream shows the known failure, diffusers-patched the fix.

Every scenario runs once per side per session (`upstream_outcomes`, `patched_outcomes` in conftest.py) and returns
numbers, counts, devices or the error it raised; the tests assert on those. Tests of upstream's side are marked
`upstream`: `make test-fast` leaves them out, so that only the patched side runs.
"""

import pytest

from diffusers_patched.selftest.judges import TOLERANCE
from diffusers_patched.selftest.scenarios import REFUSED, RIGHT, SCENARIOS, WRONG
from diffusers_patched.selftest.scenarios.device_map import PLAN_BUDGETS
from tests.conftest import REPO_ROOT
from tests.support.assertions import (
    CAST_ERROR,
    CPU_DEVICE_ERROR,
    META_COPY_ERROR,
    META_ITEM_ERROR,
    assert_clearly_wrong,
    assert_close_to_reference,
    assert_raised,
    figures_off_the_margin,
    result_of,
)
from tools.patches import Project


upstream = pytest.mark.upstream


def test_every_scenario_is_tested_on_both_sides():
    # A test named after a scenario (or after a family of them, e.g. its formats) asserts its patched side, one with
    # `_upstream` appended its upstream side.
    tests = {name[len("test_") :] for name in globals() if name.startswith("test_")}
    for name in SCENARIOS:
        scenario = name.replace("-", "_")
        assert any(scenario.startswith(test) and f"{test}_upstream" in tests for test in tests), name


@upstream
def test_every_outcome_is_described(upstream_outcomes, patched_outcomes):
    """What `make demo` prints for each side: a scenario's text fits every shape its result takes."""
    for outcomes in (upstream_outcomes, patched_outcomes):
        for name, outcome in outcomes.items():
            assert outcome.describe(SCENARIOS[name]), name


def test_every_scenario_judges_its_result():
    assert [name for name, scenario in SCENARIOS.items() if scenario.judge is None] == []


def test_patched_verdicts_are_right(patched_outcomes):
    verdicts = {name: outcome.verdict(SCENARIOS[name]) for name, outcome in patched_outcomes.items()}
    assert {name: verdict for name, verdict in verdicts.items() if verdict[0] not in (RIGHT, REFUSED)} == {}
    assert figures_off_the_margin(patched_outcomes) == {}


@upstream
def test_upstream_verdicts_are_not_right(upstream_outcomes):
    verdicts = {name: outcome.verdict(SCENARIOS[name]) for name, outcome in upstream_outcomes.items()}
    # A guard is not a fix: single-file-bad-files is refused on both sides, the error naming the broken file.
    assert {name: verdict[0] for name, verdict in verdicts.items() if verdict[0] in (RIGHT, REFUSED)} == {
        name: REFUSED for name, scenario in SCENARIOS.items() if scenario.guard
    }
    # Upstream returns wrong numbers, without an error, in these.
    assert sorted(name for name, verdict in verdicts.items() if verdict[0] == WRONG) == [
        "bnb-4bit-save-after-cpu-forward",
        "bnb-device-map-balanced-plan",
        "fuse-lora-group-offloaded-to-disk",
        "fuse-lora-into-quanto-weights",
        "fuse-lora-under-offload-hooks",
        "group-offload-glm-image-leaf-level",
        "group-offload-transformer-2d-block-level",
        "group-offload-weights-tied-across-blocks",
        "layerwise-casting-after-accelerate-cpu-offload",
        "lora-loaded-group-offloaded-to-disk",
        "quanto-torchao-gguf-planned-at-loaded-size",
        "save-model-with-lora-injected",
        "save-pretrained-group-offloaded-to-disk",
        "single-file-comfyui-fp8-scaled",
        "single-file-wan22-detection",
    ]
    # Where they are numbers, each is at least MARGIN times the tolerance (or NaN): glm-image's 0.02 to 0.06 (the
    # emptied embedding holds what memory held), the weights tied across blocks' NaN or huge numbers (the same), the
    # saved statistics' 0.0095 to 0.65, the NaN of the weights on meta.
    assert figures_off_the_margin(upstream_outcomes) == {}


def test_lora_loaded_group_offloaded_to_disk_upstream(upstream_outcomes):
    # The LoRA layers' leaf groups wrote the weights offloading had emptied.
    assert_clearly_wrong(result_of(upstream_outcomes["lora-loaded-group-offloaded-to-disk"])["diffs"])


def test_lora_loaded_group_offloaded_to_disk(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["lora-loaded-group-offloaded-to-disk"])["diffs"], 6)


def test_save_pretrained_group_offloaded_to_disk_upstream(upstream_outcomes):
    # The saved pipeline holds the empty weights offloading left, and loads without an error.
    result = result_of(upstream_outcomes["save-pretrained-group-offloaded-to-disk"])
    assert_clearly_wrong(result["diffs"])


def test_save_pretrained_group_offloaded_to_disk(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["save-pretrained-group-offloaded-to-disk"])["diffs"], 6)


def test_textual_inversion_group_offloaded_to_disk_upstream(upstream_outcomes):
    # The groups onloaded the embeddings their files hold, of the old vocabulary.
    assert_raised(
        upstream_outcomes["textual-inversion-group-offloaded-to-disk"], "IndexError", "index out of range in self"
    )


def test_textual_inversion_group_offloaded_to_disk(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["textual-inversion-group-offloaded-to-disk"])["diffs"], 6)


def test_save_lora_adapter_sequentially_offloaded_upstream(upstream_outcomes):
    # Upstream's load_lora_weights applies the offloading it removed again without the user's device.
    assert_raised(
        upstream_outcomes["save-lora-adapter-sequentially-offloaded"],
        "RuntimeError",
        "`enable_sequential_cpu_offload` requires accelerator, but not found",
    )


def test_save_lora_adapter_sequentially_offloaded(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["save-lora-adapter-sequentially-offloaded"])["diffs"], 5)


def test_save_lora_adapter_quanto_quantized_upstream(upstream_outcomes):
    # save_lora_adapter cast the model with `self.to(dtype=None)`, which a quantized model refuses for any dtype.
    assert_raised(
        upstream_outcomes["save-lora-adapter-quanto-quantized"],
        "ValueError",
        "Casting a quantized model to a new `dtype` is unsupported",
    )


def test_save_lora_adapter_quanto_quantized(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["save-lora-adapter-quanto-quantized"])["diffs"], 5)


def test_ip_adapter_loaded_quanto_quantized_upstream(upstream_outcomes):
    # _load_ip_adapter_weights moved the whole unet with `self.to(dtype=..., device=...)` to place its new layers.
    assert_raised(
        upstream_outcomes["ip-adapter-loaded-quanto-quantized"],
        "ValueError",
        "Casting a quantized model to a new `dtype` is unsupported",
    )


def test_ip_adapter_loaded_quanto_quantized(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["ip-adapter-loaded-quanto-quantized"])["diffs"], 7)


def test_lora_fuse_two_torchao_int8_upstream(upstream_outcomes):
    # PEFT's torchao LoRA layer loses its weight after merging the first of two adapters fused at once (peft#3728).
    assert_raised(
        upstream_outcomes["lora-fuse-two-torchao-int8"], "UnboundLocalError", "cannot access local variable 'weight'"
    )


def test_lora_fuse_two_torchao_int8(patched_outcomes):
    # Fused: the share of the reference's change kept, within its bound; unfused: within the tolerance.
    verdict = patched_outcomes["lora-fuse-two-torchao-int8"].verdict(SCENARIOS["lora-fuse-two-torchao-int8"])
    assert verdict[0] == RIGHT, verdict


def test_lora_set_adapters_compiled_upstream(upstream_outcomes):
    # The text encoder's LoRA ranks were looked up under the compiled wrapper's `_orig_mod.` names.
    assert_raised(upstream_outcomes["lora-set-adapters-compiled"], "IndexError", "list index out of range")


def test_lora_set_adapters_compiled(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["lora-set-adapters-compiled"])["diffs"], 6)


def test_lora_refused_for_text_encoder_offloaded_to_disk_upstream(upstream_outcomes):
    # Upstream takes the user's dispatch for the pipeline's sequential offloading and applies that again.
    assert_raised(
        upstream_outcomes["lora-refused-for-text-encoder-offloaded-to-disk"],
        "RuntimeError",
        "`enable_sequential_cpu_offload` requires accelerator, but not found",
    )


def test_lora_refused_for_text_encoder_offloaded_to_disk(patched_outcomes):
    refused = result_of(patched_outcomes["lora-refused-for-text-encoder-offloaded-to-disk"])["refused"]
    assert refused.startswith("Cannot load a LoRA into CLIPTextModel: its `device_map` offloads modules to 'disk'")
    assert "enable_sequential_cpu_offload()" in refused


def test_every_scenario_names_a_patch_of_the_series():
    series = Project(REPO_ROOT).read_series()
    assert {name: scenario.patch for name, scenario in SCENARIOS.items() if scenario.patch not in series} == {}


# sequential-offload-keeps-the-user-device: enable_sequential_cpu_offload(device="cpu") offloads to that device.


@upstream
def test_sequential_cpu_offload_on_cpu_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["sequential-cpu-offload-on-cpu"], "TypeError", CPU_DEVICE_ERROR)


def test_sequential_cpu_offload_on_cpu(patched_outcomes):
    result = result_of(patched_outcomes["sequential-cpu-offload-on-cpu"])
    assert result["offload_device"] == "cpu"
    assert_close_to_reference(result["diffs"], 3)


@upstream
def test_bnb_8bit_sequential_offload_and_lora_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["bnb-8bit-sequential-offload-and-lora"], "TypeError", CPU_DEVICE_ERROR)


def test_bnb_8bit_sequential_offload_and_lora(patched_outcomes):
    result = result_of(patched_outcomes["bnb-8bit-sequential-offload-and-lora"])
    assert_close_to_reference(result["diffs"], 3)
    assert_close_to_reference(result["diffs_with_lora"], 3)


# lora-keep-quantized-text-encoder-dtype: LoRA loading keeps a quantized text encoder's dtype instead of casting it.


@upstream
def test_lora_into_bnb_text_encoder_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["lora-into-bnb-text-encoder"], "ValueError", CAST_ERROR)


def test_lora_into_bnb_text_encoder(patched_outcomes):
    result = result_of(patched_outcomes["lora-into-bnb-text-encoder"])
    assert result == {"adapters": ["default_0"], "is_quantized": True}


# local-bnb-4bit-statistics-survive-offload-hooks: 4-bit quantization statistics survive accelerate's offload hooks
# (upstream's PR, refuse-to-sequentially-offload-bnb-4bit-weights, refuses the flow; the local patch keeps them).


@upstream
def test_bnb_4bit_sequential_cpu_offload_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["bnb-4bit-sequential-cpu-offload"], "TypeError", CPU_DEVICE_ERROR)


def test_bnb_4bit_sequential_cpu_offload(patched_outcomes):
    result = result_of(patched_outcomes["bnb-4bit-sequential-cpu-offload"])
    assert_close_to_reference(result["diffs"], 3)
    assert result["statistics_on_meta"] == 0
    assert result["statistics_equal"] == result["statistics"] == 60


@upstream
def test_bnb_4bit_cpu_offload_hooks_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["bnb-4bit-cpu-offload-hooks"], "NotImplementedError", META_COPY_ERROR)


def test_bnb_4bit_cpu_offload_hooks(patched_outcomes):
    kinds = result_of(patched_outcomes["bnb-4bit-cpu-offload-hooks"])["kinds"]
    assert sorted(kinds) == ["fp4", "fp4-dq", "nf4", "nf4-dq"]
    for kind, result in kinds.items():
        assert result["covered"] == 12, kind
        assert_close_to_reference(result["diffs"], 3)
        assert result["statistics_equal"] == result["statistics"] > 0, kind


@upstream
def test_bnb_4bit_offload_twice_then_model_offload_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["bnb-4bit-offload-twice-then-model-offload"], "TypeError", CPU_DEVICE_ERROR)


def test_bnb_4bit_offload_twice_then_model_offload(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["bnb-4bit-offload-twice-then-model-offload"])["diffs"], 6)


@upstream
def test_bnb_4bit_lora_while_sequentially_offloaded_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["bnb-4bit-lora-while-sequentially-offloaded"], "ValueError", CAST_ERROR)


def test_bnb_4bit_lora_while_sequentially_offloaded(patched_outcomes):
    result = result_of(patched_outcomes["bnb-4bit-lora-while-sequentially-offloaded"])
    assert result["offload_device"] == "cpu"
    assert_close_to_reference(result["diffs"], 3)


@upstream
def test_bnb_4bit_dispatch_cpu_disk_then_peft_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["bnb-4bit-dispatch-cpu-disk-then-peft"],
        "RuntimeError",
        META_ITEM_ERROR,
    )


def test_bnb_4bit_dispatch_cpu_disk_then_peft(patched_outcomes):
    result = result_of(patched_outcomes["bnb-4bit-dispatch-cpu-disk-then-peft"])
    assert result["covered"] == 14
    assert_close_to_reference(result["diffs"], 3)


# materialize-tensors-left-on-meta-in-from-single-file (and the missing-keys patches after it): from_single_file leaves no tensor on meta and reports missing keys once.


@upstream
@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
def test_single_file_wan22_i2v_as_wan21_upstream(upstream_outcomes, fmt):
    outcome = upstream_outcomes[f"single-file-wan22-i2v-as-wan21-{fmt}"]
    assert_raised(outcome, "NotImplementedError", META_COPY_ERROR)


@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
def test_single_file_wan22_i2v_as_wan21(patched_outcomes, fmt):
    result = result_of(patched_outcomes[f"single-file-wan22-i2v-as-wan21-{fmt}"])
    assert result["meta_tensors"] == 0
    assert result["missing_keys_as_constructed"] == result["missing_keys"] > 0
    # Wan2.1-I2V's image layers: drawn at random, or constructor constants of which only norm biases are zeros.
    assert result["missing_keys_zero"] < result["missing_keys"] // 2
    (warning,) = result["warnings"]
    assert f"{result['missing_keys']} keys" in warning


@upstream
def test_single_file_include_buffers_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["single-file-include-buffers"], "NotImplementedError", META_COPY_ERROR)


def test_single_file_include_buffers(patched_outcomes):
    result = result_of(patched_outcomes["single-file-include-buffers"])
    assert_close_to_reference([result.pop("output_diff")], 1)
    assert result == {"meta_tensors": 0, "rope_equal": True}


# single-file-t5-ties-input-embeddings (and single-file-t5-in-evaluation-mode: every pass equals from_pretrained).
@upstream
def test_single_file_t5_text_encoder_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["single-file-t5-text-encoder"],
        "RuntimeError",
        "Tensor on device meta is not on the expected device cpu!",
    )


def test_single_file_t5_text_encoder(patched_outcomes):
    result = result_of(patched_outcomes["single-file-t5-text-encoder"])
    assert result["meta_tensors"] == 0 and result["tied"]
    assert_close_to_reference(result["diffs"], 3)


# dequantize-scaled-weights-of-single-files: upstream takes the float8 values for the weights and drops their scales.
@upstream
def test_single_file_comfyui_fp8_scaled_upstream(upstream_outcomes):
    result = result_of(upstream_outcomes["single-file-comfyui-fp8-scaled"])
    assert_clearly_wrong([result["scale_weight_file_diff"], result["comfy_quant_file_diff"]])


def test_single_file_comfyui_fp8_scaled(patched_outcomes):
    result = result_of(patched_outcomes["single-file-comfyui-fp8-scaled"])
    assert_close_to_reference([result["scale_weight_file_diff"], result["comfy_quant_file_diff"]], 2)


# gguf-parameters-survive-accelerate-offload-hooks.
@upstream
def test_gguf_sequential_offload_upstream(upstream_outcomes):
    # `GGML_QUANT_SIZES[None]`: the parameter accelerate's hooks rebuilt lost its `quant_type`, and nothing else.
    outcome = upstream_outcomes["gguf-sequential-offload"]
    assert outcome.error == {"type": "KeyError", "message": "None"}, outcome.error


def test_gguf_sequential_offload(patched_outcomes):
    result = result_of(patched_outcomes["gguf-sequential-offload"])
    assert result["quantized"]
    assert_close_to_reference(result["diffs"], 6)
    # Upstream refuses to serialize GGUF models, offloaded or not, and says so: nothing to fix there.
    assert "is quantized with QuantizationMethod.GGUF and is not serializable" in result["save_error"]


# refuse-to-save-pipelines-whose-transformers-components-hold-lora-adapters.
@upstream
def test_save_pipeline_with_text_encoder_lora_upstream(upstream_outcomes):
    # Saved without an error; the text encoder folder holds the adapter alone, and loading the pipeline back looks for
    # the adapter's base model on the Hub.
    error = upstream_outcomes["save-pipeline-with-text-encoder-lora"].error
    assert error["type"] == "OSError" and "couldn't find them in the cached files" in error["message"], error


def test_save_pipeline_with_text_encoder_lora(patched_outcomes):
    refused = result_of(patched_outcomes["save-pipeline-with-text-encoder-lora"])["refused"]
    assert "`text_encoder` (CLIPTextModel) holds the LoRA adapters" in refused
    assert "save_lora_weights()" in refused and "unload_lora_weights()" in refused


# save-models-with-lora-adapters-under-their-own-keys.
@upstream
def test_save_model_with_lora_injected_upstream(upstream_outcomes):
    # Saved and reloaded without an error, with the wrapped weights left on meta; the output is NaN on this stack.
    result = result_of(upstream_outcomes["save-model-with-lora-injected"])
    assert result["meta_tensors"] > 0
    assert_clearly_wrong([result["output_diff"]])


def test_save_model_with_lora_injected(patched_outcomes):
    result = result_of(patched_outcomes["save-model-with-lora-injected"])
    assert result["meta_tensors"] == 0
    assert_close_to_reference([result["output_diff"]], 1)


# from-pretrained-materializes-missing-weights: from_pretrained leaves no tensor on meta and reports missing keys once.
@upstream
def test_from_pretrained_missing_keys_upstream(upstream_outcomes):
    # `strict` is not an argument upstream: it ends in the config, unused. The weights stay on meta.
    assert_raised(
        upstream_outcomes["from-pretrained-missing-keys"],
        "RuntimeError",
        "Tensor on device meta is not on the expected device cpu!",
    )


def test_from_pretrained_missing_keys(patched_outcomes):
    result = result_of(patched_outcomes["from-pretrained-missing-keys"])
    assert result["meta_tensors"] == 0
    assert_close_to_reference([result["output_diff"]], 1)
    assert result["missing_keys_as_constructed"] == result["missing_keys"] > 0
    assert result["missing_keys_zero"] < result["missing_keys"] // 2
    assert result["warnings"] == 1 and result["constructor_values_said"]
    assert result["warning"].endswith(f"{result['missing_keys']} keys")
    assert result["strict_error"].endswith("because the following keys are missing")


@upstream
def test_ltx_video_vae_without_timestep_scale_multiplier_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["ltx-video-vae-without-timestep-scale-multiplier"], "NotImplementedError", META_COPY_ERROR
    )


def test_ltx_video_vae_without_timestep_scale_multiplier(patched_outcomes):
    # The constructor's 1000.0 (bit for bit: a constant), not zeros: the video equals the complete repo's up to float32
    # rounding (zero-filled, it differs by 0.67).
    result = result_of(patched_outcomes["ltx-video-vae-without-timestep-scale-multiplier"])
    assert result["multiplier"] == 1000.0
    assert_close_to_reference([result["video_diff"]], 1)


# single-file-block-counts-come-from-the-checkpoint: without `config`, a single file is built with its own depth.
@upstream
def test_single_file_flex_gguf_without_config_upstream(upstream_outcomes):
    # Upstream's Flux converter assumes FLUX.1's width (3072); at that width the missing blocks stay on meta instead
    # ("Cannot copy out of meta tensor", #10674).
    assert_raised(
        upstream_outcomes["single-file-flex-gguf-without-config"],
        "RuntimeError",
        "split_sizes=[3072, 3072, 3072, 12288]",
    )


def test_single_file_flex_gguf_without_config(patched_outcomes):
    result = result_of(patched_outcomes["single-file-flex-gguf-without-config"])
    assert result["blocks"] == [2, 1]
    assert result["meta_tensors"] == 0
    assert_close_to_reference([result["output_diff"]], 1)
    assert result["gap_error"] == (
        "the checkpoint has transformer_blocks 0-2 but not 1, where the config has `num_layers=3`."
    )


# fuse-lora-into-gguf-quantized-weights.
@upstream
def test_fuse_lora_into_gguf_upstream(upstream_outcomes):
    # PEFT added the LoRA to the packed bytes: 64 Q8_0 values are 2 blocks of 34 bytes.
    assert_raised(
        upstream_outcomes["fuse-lora-into-gguf"],
        "RuntimeError",
        "The size of tensor a (68) must match the size of tensor b (64)",
    )


def test_fuse_lora_into_gguf(patched_outcomes):
    result = result_of(patched_outcomes["fuse-lora-into-gguf"])
    assert_close_to_reference(result["fused_diffs"], 2)
    assert result["fused_weight"] == "Parameter torch.float32"
    # Fused into float32 (4 bytes a value) from Q8_0 (34 bytes for 32 values).
    assert result["fused_bytes"] * 34 == result["quantized_bytes"] * 4 * 32
    assert result["restored"] == result["quantized_weights"] > 0
    assert result["meta_tensors"] == 0


# fuse-lora-into-offloaded-weights.
@upstream
def test_fuse_lora_under_offload_hooks_upstream(upstream_outcomes):
    # PEFT merged the LoRA into the meta placeholders and stopped applying it: the outputs are those without it.
    result = result_of(upstream_outcomes["fuse-lora-under-offload-hooks"])
    assert_clearly_wrong(result["fused_diffs"])
    assert result["fused_diffs"] == pytest.approx(result["lora_effects"], abs=TOLERANCE)


def test_fuse_lora_under_offload_hooks(patched_outcomes):
    result = result_of(patched_outcomes["fuse-lora-under-offload-hooks"])
    assert_close_to_reference(result["fused_diffs"], 2)
    assert_close_to_reference(result["unfused_diffs"], 2)
    assert_clearly_wrong(result["lora_effects"])
    # The hooks offload the fused weights as they offloaded the others.
    assert result["weights_off_meta"] == 0


@upstream
def test_fuse_lora_group_offloaded_to_disk_upstream(upstream_outcomes):
    # The layers compute with the weights in the offload files, where nothing was fused.
    result = result_of(upstream_outcomes["fuse-lora-group-offloaded-to-disk"])
    assert_clearly_wrong(result["fused_diffs"])
    assert result["fused_diffs"] == pytest.approx(result["lora_effects"], abs=TOLERANCE)


def test_fuse_lora_group_offloaded_to_disk(patched_outcomes):
    result = result_of(patched_outcomes["fuse-lora-group-offloaded-to-disk"])
    assert_close_to_reference(result["fused_diffs"] + result["unfused_diffs"], 2)


# ltx2-single-file-converters-take-only-their-own-weights, ltx2-single-file-map-ltx-2-3-keys and
# ltx2-audio-vae-loads-from-a-single-file.
@upstream
def test_ltx2_3_single_file_upstream(upstream_outcomes):
    # The transformer's converter leaves 2.3's prompt AdaLN on meta (and takes every other component's weights).
    assert_raised(upstream_outcomes["ltx2-3-single-file"], "NotImplementedError", META_COPY_ERROR)


def test_ltx2_3_single_file(patched_outcomes):
    result = result_of(patched_outcomes["ltx2-3-single-file"])
    assert result["meta_tensors"] == 0
    assert all(a == b for a, b in (equal.split("/") for equal in result["equal"].values())), result["equal"]
    assert result["from_single_file"] == {
        "transformer": True,
        "vae": True,
        "audio_vae": True,
        "connectors": False,
        # No converters in 0.42.1: the pipeline takes them from `config`.
        "vocoder": False,
    }
    assert_close_to_reference([result["transformer_diff"], result["vae_diff"]], 2)


def _assert_bad_files_named(errors):
    assert sorted(errors) == ["gguf", "safetensors"]
    for fmt, error in errors.items():
        assert error["type"] is not None, f"{fmt}: a broken file loaded"
        assert error["path"] in error["message"], error
        assert "meta" not in error["message"], error


@upstream
def test_single_file_bad_files_upstream(upstream_outcomes):
    _assert_bad_files_named(result_of(upstream_outcomes["single-file-bad-files"])["errors"])


def test_single_file_bad_files(patched_outcomes):
    _assert_bad_files_named(result_of(patched_outcomes["single-file-bad-files"])["errors"])


# tell-wan2-2-single-file-checkpoints-apart-from-wan2-1: Wan2.2 single files are told apart from Wan2.1; variants detection cannot tell ask for a `config`.


@upstream
def test_single_file_wan22_detection_upstream(upstream_outcomes):
    picked = result_of(upstream_outcomes["single-file-wan22-detection"])["picked"]
    assert picked["wan2.2-i2v-A14B"] == picked["wan2.2-ti2v-5B"] == "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers"


def test_single_file_wan22_detection(patched_outcomes):
    picked = result_of(patched_outcomes["single-file-wan22-detection"])["picked"]
    unrecognized = {
        name: picked.pop(name) for name in ("wan2.1-fun-inp-1.3B", "wan2.1-fun-control-14B", "unknown-width")
    }
    assert picked == {
        "wan2.1-t2v-1.3B": "Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
        "wan2.1-t2v-14B": "Wan-AI/Wan2.1-T2V-14B-Diffusers",
        "wan2.2-t2v-A14B": "Wan-AI/Wan2.1-T2V-14B-Diffusers",
        "wan2.1-i2v-14B": "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers",
        "wan2.1-flf2v-14B": "Wan-AI/Wan2.1-FLF2V-14B-720P-diffusers",
        "wan2.2-i2v-A14B": "Wan-AI/Wan2.2-I2V-A14B-Diffusers",
        "wan2.2-ti2v-5B": "Wan-AI/Wan2.2-TI2V-5B-Diffusers",
    }
    for name, error in unrecognized.items():
        assert error["type"] == "ValueError", name
        assert error["message"].startswith("Cannot infer which Wan model") and "`config`" in error["message"], name


# The device-map planning patches (size-quantized-components-... to raise-when-...-fit-nowhere): device_map="balanced" plans quantized components at their loaded size, plans every component, and
# raises before loading when they fit nowhere. Planning reads no weight, on either side.


@upstream
def test_bnb_device_map_balanced_plan_upstream(upstream_outcomes):
    result = result_of(upstream_outcomes["bnb-device-map-balanced-plan"])
    assert result["plans"] == {
        "fits only quantized": {"text_encoder": "cpu", "unet": 0, "vae": 0},
        # The unquantized text encoder (7.42 MB) and the unet both "do not fit": the unet overwrites it.
        "two of three fit": {"unet": "cpu", "vae": 0},
        "none fits GPU 0": {"vae": "cpu"},
        "none fits anywhere": {"vae": "cpu"},
    }
    assert result["weight_reads"] == 0 and result["weight_reads_of_a_load"] > 0


def test_bnb_device_map_balanced_plan(patched_outcomes):
    result = result_of(patched_outcomes["bnb-device-map-balanced-plan"])
    plans = result["plans"]
    assert sorted(plans) == sorted(PLAN_BUDGETS)
    assert plans["fits only quantized"] == {"text_encoder": 0, "unet": 0, "vae": 0}
    assert plans["two of three fit"] == {"text_encoder": 0, "unet": "cpu", "vae": 0}
    assert plans["none fits GPU 0"] == {"text_encoder": "cpu", "unet": "cpu", "vae": "cpu"}
    error = plans["none fits anywhere"]
    assert error["type"] == "ValueError"
    assert error["message"].startswith(
        "Cannot load StableDiffusionPipeline with `device_map='balanced'`: unet (4.2 MB), text_encoder (1.92 MB),"
        " vae (564.15 KB) do not fit on the accelerators, and need 6.67 MB of CPU memory together."
    )
    assert result["weight_reads"] == 0 and result["weight_reads_of_a_load"] > 0


# size-quantized-components-as-they-will-be-loaded: quanto and torchao components are planned at the bytes they hold
# once loaded; GGUF ones, passed to the pipeline loaded, too.


@upstream
def test_quanto_torchao_gguf_planned_at_loaded_size_upstream(upstream_outcomes):
    sizes = result_of(upstream_outcomes["quanto-torchao-gguf-planned-at-loaded-size"])["sizes"]
    # Every quanto and torchao component at its float32 size: unet 4.40 MB, text encoder 7.42 MB, 1.5 to 3.7 times
    # what they hold; the GGUF transformer's float32 modules and rope buffers at bfloat16.
    assert {planned for name, (planned, _) in sizes.items() if not name.startswith("GGUF")} == {4400528, 7423592}
    assert all(planned >= 1.5 * loaded for name, (planned, loaded) in sizes.items() if not name.startswith("GGUF"))
    planned, loaded = sizes["GGUF Q8_0 transformer"]
    assert planned < 0.85 * loaded


def test_quanto_torchao_gguf_planned_at_loaded_size(patched_outcomes):
    sizes = result_of(patched_outcomes["quanto-torchao-gguf-planned-at-loaded-size"])["sizes"]
    assert len(sizes) == 7
    assert {name: planned - loaded for name, (planned, loaded) in sizes.items()} == {name: 0 for name in sizes}


# run-bitsandbytes-components-planned-on-the-cpu-there: a bitsandbytes component planned on the CPU is loaded and runs there.


@upstream
def test_bnb_text_encoder_planned_on_cpu_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["bnb-text-encoder-planned-on-cpu"],
        "RuntimeError",
        "Cannot access accelerator device when none is available.",
    )


def test_bnb_text_encoder_planned_on_cpu(patched_outcomes):
    result = result_of(patched_outcomes["bnb-text-encoder-planned-on-cpu"])
    assert_close_to_reference(result.pop("diffs"), 3)
    assert result == {
        "plan": {"text_encoder": "cpu", "unet": 0, "vae": 0},
        "hf_device_map": {"text_encoder": "cpu"},
        "weight_type": "Params4bit",
        "weight_device": "cpu",
        "absmax_device": "cpu",
    }


# save-offloaded-weights-not-meta-placeholders: save_pretrained of an offloaded pipeline saves its weights, not meta placeholders.


@upstream
def test_save_offloaded_pipeline_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["save-offloaded-pipeline"], "NotImplementedError", META_COPY_ERROR)


def test_save_offloaded_pipeline(patched_outcomes):
    kinds = result_of(patched_outcomes["save-offloaded-pipeline"])["kinds"]
    assert sorted(kinds) == ["8-bit", "nf4-dq"]
    for kind, result in kinds.items():
        assert result["text_encoder_equal"] == result["text_encoder_tensors"] > 0, kind
        assert result["unet_equal"] == result["unet_tensors"] == 208, kind
        assert_close_to_reference(result["saved_diffs"], 1)
        assert result["offloaded_device"] == "meta", kind
        assert_close_to_reference(result["offloaded_diffs"], 1)


# refuse-to-save-bnb-4bit-statistics-repacked-on-cpu: save_pretrained after a CPU forward pass that repacked 4-bit
# weights refuses instead of saving re-derived statistics; with make_bnb_offload_safe first, it saves the exact ones.


@upstream
def test_bnb_4bit_save_after_cpu_forward_upstream(upstream_outcomes):
    # Saved without a word, with re-derived absmax: the reloaded encoder (and the saved one) compute different outputs.
    result = result_of(upstream_outcomes["bnb-4bit-save-after-cpu-forward"])
    assert_close_to_reference(result["saved_before"], 4)
    assert result["refusal"] is None and result["made_safe_diffs"] is None
    for kind, kind_result in result["kinds"].items():
        assert_clearly_wrong([kind_result["saved_after"]])
        # The model saved computes what the one reloaded does (the same figure up to float32 rounding): both hold the
        # re-derived statistics.
        assert_close_to_reference([abs(kind_result["in_memory_after_save"] - kind_result["saved_after"])], 1)
        assert kind_result["statistics_equal"] < kind_result["statistics"], kind


def test_bnb_4bit_save_after_cpu_forward(patched_outcomes):
    result = result_of(patched_outcomes["bnb-4bit-save-after-cpu-forward"])
    assert_close_to_reference(result["saved_before"], 4)
    assert result["kinds"] == {kind: {"saved_after": "refused"} for kind in ("nf4", "fp4", "nf4-dq", "fp4-dq")}
    assert result["refusal"].startswith(
        "Cannot save `text_encoder` (CLIPTextModel): the bitsandbytes 4-bit quantization statistics of 12 weight(s) "
        "(encoder.layers.0.self_attn.k_proj.weight, "
    )
    assert "Save the model before running it on the CPU" in result["refusal"]
    assert_close_to_reference(result["made_safe_diffs"], 4)
    assert_close_to_reference(result["made_safe_in_memory_diffs"], 4)
    assert result["made_safe_statistics_equal"] == result["statistics"] == 192


# offloading-loads-modules-that-read-child-weights: modules that use their children's weights without calling them
# are loaded as a whole by sequential offloading; same-vae-calls-its-bottleneck-as-a-module: the SAME
# VAE's bottleneck is called as a module; sequential-offload-keeps-what-ace-step-reads-outside-forward: what ACE-Step's
# pipeline reads outside of forward stays loaded. Upstream fails earlier on the CPU, with its `cpu:0`.
SEQUENTIAL_OFFLOAD_SCENARIOS = [
    "sequential-offload-hunyuan-dit",
    "sequential-offload-stable-audio",
    "sequential-offload-framepack-image-encoder",
    "sequential-offload-stable-audio-3-audio-to-audio",
    "sequential-offload-ace-step",
]


@upstream
@pytest.mark.parametrize("name", SEQUENTIAL_OFFLOAD_SCENARIOS)
def test_sequential_offload_upstream(upstream_outcomes, name):
    assert_raised(upstream_outcomes[name], "TypeError", CPU_DEVICE_ERROR)


@pytest.mark.parametrize("name", SEQUENTIAL_OFFLOAD_SCENARIOS)
def test_sequential_offload(patched_outcomes, name):
    assert_close_to_reference([result_of(patched_outcomes[name])["diff"]], 1)


# consistency-decoder-vae-sets-timesteps-on-the-latents-device: ConsistencyDecoderVAE decodes under sequential
# offloading as without it; upstream's scheduler reads timesteps it put on the model's device, `meta` there.
@upstream
def test_sequential_offload_consistency_decoder_vae_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["sequential-offload-consistency-decoder-vae"],
        "RuntimeError",
        "Tensor.item() cannot be called on meta tensors",
    )


def test_sequential_offload_consistency_decoder_vae(patched_outcomes):
    assert_close_to_reference([result_of(patched_outcomes["sequential-offload-consistency-decoder-vae"])["diff"]], 1)


# offloading-loads-modules-that-read-child-weights: the models that declared `_supports_group_offloading = False` for
# it group offload; pipeline-group-offload-to-disk-per-component: components offload to disk without sharing files;
# group-offload-keeps-what-models-read-outside-forward: ACE-Step's tensors read outside forward stay onloaded;
# group-offload-onloads-modules-outside-blocks-called-directly: ACE-Step's lyrics are embedded at block level with the
# text encoder's input embeddings onloaded; group-offload-onloads-block-modules-called-outside-their-block: DiT's output
# layer calls the first block's timestep and label embedding, onloaded, after the blocks. Upstream refuses each of these
# pipelines.
GROUP_OFFLOAD_SCENARIOS = {
    "group-offload-hunyuan-dit": "HunyuanDiT2DModel",
    "group-offload-dit": "DiTTransformer2DModel",
    "group-offload-stable-audio": "AutoencoderOobleck",
    "group-offload-stable-audio-3-audio-to-audio": "AutoencoderSAME",
    "group-offload-ace-step": "AutoencoderOobleck",
    "group-offload-ace-step-block-level": "AutoencoderOobleck",
}


@upstream
@pytest.mark.parametrize("name", GROUP_OFFLOAD_SCENARIOS)
def test_group_offload_upstream(upstream_outcomes, name):
    model_class = GROUP_OFFLOAD_SCENARIOS[name]
    assert_raised(upstream_outcomes[name], "ValueError", f"{model_class} does not support group offloading.")


@pytest.mark.parametrize("name", GROUP_OFFLOAD_SCENARIOS)
def test_group_offload(patched_outcomes, name):
    levels = 1 if name.startswith("group-offload-ace-step") else 2
    result = result_of(patched_outcomes[name])
    assert_close_to_reference(result.pop("diffs"), levels)
    assert result == {"warnings": []}


# group-offload-to-disk-keeps-tied-weights: T5's tied embedding, in two leaf groups offloaded to disk, keeps its values
# in both; upstream's text encoder embeds the prompt with an emptied weight, without an error.
@upstream
def test_group_offload_glm_image_leaf_level_upstream(upstream_outcomes):
    result = result_of(upstream_outcomes["group-offload-glm-image-leaf-level"])
    assert_clearly_wrong(result.pop("diffs"))
    assert result == {"warnings": []}


def test_group_offload_glm_image_leaf_level(patched_outcomes):
    result = result_of(patched_outcomes["group-offload-glm-image-leaf-level"])
    assert_close_to_reference(result.pop("diffs"), 1)
    assert result == {"warnings": []}


# group-offload-to-disk-keeps-weights-tied-across-blocks: a weight three block-level groups share (two blocks' and the
# one outside the blocks) keeps its values in each; upstream computes with an emptied weight, without an error.
@upstream
def test_group_offload_weights_tied_across_blocks_upstream(upstream_outcomes):
    assert_clearly_wrong(result_of(upstream_outcomes["group-offload-weights-tied-across-blocks"])["diffs"])


def test_group_offload_weights_tied_across_blocks(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["group-offload-weights-tied-across-blocks"])["diffs"], 2)


# group-offload-onloads-block-modules-called-outside-their-block: Transformer2DModel in DiT's configuration does not opt
# out of group offloading; upstream's output layer reads the first block's emptied embedding, without an error.
@upstream
def test_group_offload_transformer_2d_block_level_upstream(upstream_outcomes):
    assert_clearly_wrong(result_of(upstream_outcomes["group-offload-transformer-2d-block-level"])["diffs"])


def test_group_offload_transformer_2d_block_level(patched_outcomes):
    assert_close_to_reference(result_of(patched_outcomes["group-offload-transformer-2d-block-level"])["diffs"], 2)


# vq-and-consistency-decoder-vaes-support-group-offloading: VQModel and ConsistencyDecoderVAE group offload at leaf and
# block level, their decodes equal to the un-offloaded ones up to float32 rounding; upstream refuses the first.
@upstream
def test_group_offload_vq_and_consistency_decoder_vaes_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["group-offload-vq-and-consistency-decoder-vaes"],
        "ValueError",
        "VQModel does not support group offloading.",
    )


def test_group_offload_vq_and_consistency_decoder_vaes(patched_outcomes):
    result = result_of(patched_outcomes["group-offload-vq-and-consistency-decoder-vaes"])
    assert_close_to_reference(result.pop("diffs"), 4)
    assert result == {"warnings": []}


# offloading-loads-modules-that-read-child-weights: the models holding a module that declares `_preload_submodules` (or
# an nn.MultiheadAttention) without the model listing it offload in every mode, their outputs equal to the un-offloaded
# ones up to float32 rounding (tests/test_preloading_coverage.py walks diffusers for such models). Upstream fails
# earlier on the CPU, with its `cpu:0`.
@upstream
def test_offload_models_holding_modules_loaded_whole_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["offload-models-holding-modules-loaded-whole"], "TypeError", CPU_DEVICE_ERROR)


def test_offload_models_holding_modules_loaded_whole(patched_outcomes):
    result = result_of(patched_outcomes["offload-models-holding-modules-loaded-whole"])
    assert_close_to_reference(result.pop("diffs"), 12)
    assert result == {"warnings": []}


# offloading-loads-modules-that-read-child-weights: weight-normalized layers in a list the model iterates, and one that is
# a direct child of the model, offload at both group levels and sequentially, their weights loaded one layer at a
# time. Upstream fails earlier on the CPU, with its `cpu:0`.
@upstream
def test_offload_weight_norm_layers_upstream(upstream_outcomes):
    assert_raised(upstream_outcomes["offload-weight-norm-layers"], "TypeError", CPU_DEVICE_ERROR)


def test_offload_weight_norm_layers(patched_outcomes):
    result = result_of(patched_outcomes["offload-weight-norm-layers"])
    assert_close_to_reference(result.pop("diffs"), 3)
    assert result == {"conv_in_device_while_convs_1_runs": ["meta"]}


# audio-vaes-support-group-offloading: the audio VAEs that refused group offloading are group and sequentially
# offloaded, their outputs equal to the un-offloaded ones up to float32 rounding; upstream refuses the first.
@upstream
def test_offload_audio_vaes_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["offload-audio-vaes"], "ValueError", "LongCatAudioDiTVae does not support group offloading."
    )


def test_offload_audio_vaes(patched_outcomes):
    result = result_of(patched_outcomes["offload-audio-vaes"])
    assert_close_to_reference(result.pop("diffs"), 12)
    assert result == {"warnings": []}


# group-offload-skips-models-that-do-not-support-it: pipe.enable_group_offload places a model that does not support
# group offloading (no model diffusers ships, since the next patch; one of another library can) on the onload device,
# group offloads the others and says so, where upstream refuses the whole pipeline.
@upstream
def test_group_offload_model_opting_out_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["group-offload-model-opting-out"],
        "ValueError",
        "DiTTransformer2DModelOptingOut does not support group offloading.",
    )


def test_group_offload_model_opting_out(patched_outcomes):
    warning = (
        "`transformer` (DiTTransformer2DModelOptingOut) does not support group offloading and is placed on cpu "
        "instead, as if it were in `exclude_modules`. The other components are group offloaded."
    )
    result = result_of(patched_outcomes["group-offload-model-opting-out"])
    assert_close_to_reference(result.pop("diffs"), 2)
    assert result == {"warnings": [warning, warning]}


# restore-the-accelerate-hooks-the-loaders-remove: a LoRA loaded after the user placed models with accelerate keeps
# that placement (the same hooks, execution devices and weights maps) instead of enable_sequential_cpu_offload().


@upstream
def test_lora_keeps_user_accelerate_hooks_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["lora-keeps-user-accelerate-hooks"],
        "RuntimeError",
        "`enable_sequential_cpu_offload` requires accelerator, but not found",
    )


def test_lora_keeps_user_accelerate_hooks(patched_outcomes):
    result = result_of(patched_outcomes["lora-keeps-user-accelerate-hooks"])
    assert set(result["placements"]) == {"cpu_offload", "dispatch_model"}
    for placement in result["placements"].values():
        assert placement["hooks_changed"] == 0
        assert placement["lora_layers_off_their_device"] == 0
    assert_close_to_reference(result["placements"]["cpu_offload"]["diffs"], 4)
    assert_close_to_reference(result["placements"]["dispatch_model"]["diffs"], 2)


# upcast-the-lora-layers-loaded-after-enable-layerwise: a LoRA loaded after enable_layerwise_casting computes in the
# compute dtype, as the uncast model holding the stored weights does; upstream creates its layers in float8.
@upstream
def test_lora_after_layerwise_casting_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["lora-after-layerwise-casting"],
        "NotImplementedError",
        "\"mul_cpu_reduced_float\" not implemented for 'Float8_e4m3fn'",
    )


def test_lora_after_layerwise_casting(patched_outcomes):
    result = result_of(patched_outcomes["lora-after-layerwise-casting"])
    assert_close_to_reference([result["diff"]], 1)
    assert result["lora_dtypes"] == ["torch.float32"]
    # The LoRA changes the output far beyond the tolerance: a LoRA left out could not pass for one applied.
    assert result["lora_effect"] > 0.1


# pipeline-to-moves-quantized-models-of-any-backend: pipe.to(dtype) and from_pipe move a GGUF component without a
# dtype and cast the others; upstream passes the dtype to the GGUF model, which refuses it.
@upstream
def test_pipeline_to_dtype_with_gguf_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["pipeline-to-dtype-with-gguf"],
        "ValueError",
        "Casting a quantized model to a new `dtype` is unsupported.",
    )


def test_pipeline_to_dtype_with_gguf(patched_outcomes):
    result = result_of(patched_outcomes["pipeline-to-dtype-with-gguf"])
    assert_close_to_reference(result.pop("diffs"), 2)
    assert result["quantized_kept"] == result["quantized_weights"] > 0
    assert result["dtypes"] == ["torch.bfloat16", "torch.float32"]


# load-flux-loras-into-quanto-quantized-transformers: FluxPipeline.load_lora_weights into a quanto transformer.


@upstream
def test_flux_lora_into_quanto_transformer_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["flux-lora-into-quanto-transformer"],
        "KeyError",
        "'single_transformer_blocks.0.attn.to_k.weight'",
    )


def test_flux_lora_into_quanto_transformer(patched_outcomes):
    result = result_of(patched_outcomes["flux-lora-into-quanto-transformer"])
    assert_close_to_reference(result["diffs"], 1)
    assert_clearly_wrong([result["lora_effect"]])


# fuse-lora-into-quanto-quantized-weights: fusing into quanto weights fuses, unfusing puts the quantized weights back.


@upstream
def test_fuse_lora_into_quanto_weights_upstream(upstream_outcomes):
    result = result_of(upstream_outcomes["fuse-lora-into-quanto-weights"])
    # Fused (and fused then unloaded): the outputs without the LoRA, off by about its effect.
    fused, unfused, unloaded = result["diffs"]
    assert_clearly_wrong([fused])
    assert_clearly_wrong([unloaded])
    assert_close_to_reference([unfused], 1)


def test_fuse_lora_into_quanto_weights(patched_outcomes):
    result = result_of(patched_outcomes["fuse-lora-into-quanto-weights"])
    assert_close_to_reference(result["diffs"], 3)
    assert result["restored"]
    assert_clearly_wrong([result["lora_effect"]])


# refuse-to-sequentially-offload-quanto-weights: a clear refusal instead of accelerate's TypeError; group offloading works.


@upstream
def test_sequential_offload_quanto_pipeline_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["sequential-offload-quanto-pipeline"],
        "TypeError",
        "WeightQBytesTensor.__new__() missing 6 required positional arguments",
    )


def test_sequential_offload_quanto_pipeline(patched_outcomes):
    result = result_of(patched_outcomes["sequential-offload-quanto-pipeline"])
    assert result["refused"].startswith(
        "Cannot sequentially offload `transformer` (FluxTransformer2DModel): accelerate's offload hooks cannot move its "
        "weights quantized by optimum-quanto"
    )
    assert "`enable_group_offload()`" in result["refused"]
    assert_close_to_reference(result["diffs"], 1)


def test_layerwise_casting_after_accelerate_cpu_offload_upstream(upstream_outcomes):
    # Cast silently lost: the unet computes with the float32 weights accelerate's hooks saved.
    result = result_of(upstream_outcomes["layerwise-casting-after-accelerate-cpu-offload"])
    assert result["refused"] is None
    assert_clearly_wrong(result["diffs"])


def test_layerwise_casting_after_accelerate_cpu_offload(patched_outcomes):
    result = result_of(patched_outcomes["layerwise-casting-after-accelerate-cpu-offload"])
    assert result["refused"].startswith(
        "Cannot apply layerwise casting to UNet2DConditionModel: its weights are offloaded"
    )
    assert result["refused"].endswith("Enable layerwise casting before offloading the model.")
    assert_close_to_reference(result["diffs"], 1)


def test_hook_registered_after_model_offload_upstream(upstream_outcomes):
    assert_raised(
        upstream_outcomes["hook-registered-after-model-offload"],
        "RuntimeError",
        "`enable_model_cpu_offload` requires accelerator, but not found",
    )


def test_hook_registered_after_model_offload(patched_outcomes):
    # First call, second call, with the LoRA, again.
    assert_close_to_reference(result_of(patched_outcomes["hook-registered-after-model-offload"])["diffs"], 4)
