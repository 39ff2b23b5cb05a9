"""What the patches' carried upstream-style tests cannot show on an older supported release, and why: {release:
{node id or prefix: reason}}. tests/test_release_carried_tests.py checks that each still fails there, so an entry that
no longer holds is found. (What the demo scenarios show otherwise on a release is in patches/releases.json, `scenarios`:
the selftest of that release's build reads it.)"""

GROUP_OFFLOADING_NEEDS_AN_ACCELERATOR = (
    "group offloading of diffusers {release} cannot run without an accelerator (its ModuleGroup calls "
    "`torch.accelerator.current_accelerator().type`, None on a CPU-only machine; 0.41.0 replaced it): the test fails on "
    "upstream {release} already, before anything is group offloaded"
)
GROUP_OFFLOADING_TESTS = [
    "tests/hooks/test_group_offloading_modules_called_outside_their_block.py",
    "tests/hooks/test_group_offloading_tied_weights.py",
    "tests/hooks/test_group_offloading_to_disk_quanto.py",
    "tests/hooks/test_group_offloading_to_disk_reapplied.py",
    "tests/hooks/test_group_offloading_to_disk_replaced_tensors.py",
    "tests/hooks/test_group_offloading_unmatched_modules.py",
    "tests/hooks/test_layerwise_casting_offloaded_models.py::TestLayerwiseCastingOffloadedModels::"
    "test_layerwise_casting_after_offloading_raises[group_",
    "tests/hooks/test_layerwise_casting_offloaded_models.py::TestLayerwiseCastingOffloadedModels::"
    "test_layerwise_casting_before_offloading[group_",
    "tests/hooks/test_layerwise_casting_offloaded_models.py::TestLayerwiseCastingOffloadedModels::"
    "test_layerwise_casting_after_group_offloading_in_memory",
    "tests/hooks/test_offloading_preload_submodules.py::TestOffloadingPreloadSubmodules::test_group_offloading_to_disk",
    "tests/lora/test_lora_keeps_accelerate_hooks.py::TestLoraKeepsAccelerateHooks::"
    "test_fuse_lora_into_weights_group_offloaded_to_disk",
    "tests/lora/test_save_lora_adapter_offloaded.py::TestSaveLoraAdapterOffloaded::test_save_lora_adapter[group_",
    "tests/models/autoencoders/test_models_audio_vae_offloading.py::TestAudioVaeOffloading::"
    "test_offloaded_audio_vaes_encode_and_decode_as_without_offloading[leaf_level",
    "tests/models/autoencoders/test_models_audio_vae_offloading.py::TestAudioVaeOffloading::"
    "test_offloaded_audio_vaes_encode_and_decode_as_without_offloading[block_level",
    "tests/models/autoencoders/test_models_autoencoder_same_offload.py::TestAutoencoderSAMEGroupOffload",
    "tests/models/autoencoders/test_models_vq_consistency_decoder_offloading.py",
    "tests/models/test_modeling_save_group_offloaded.py",
    "tests/pipelines/ace_step/test_ace_step_group_offload.py",
    "tests/pipelines/test_pipeline_group_offload_to_disk.py",
    "tests/pipelines/test_pipeline_group_offload_unsupported_models.py",
    "tests/pipelines/test_pipeline_textual_inversion_offloading.py::TestTextualInversionOffloading::"
    "test_load_and_unload_textual_inversion_offloaded_to_disk",
]
NO_LTX_2_3 = (
    "the tests' tiny LTX-2 models take `upsample_type` (video VAE) and `gated_attn` (LTX-2.3 transformer), which "
    "{release} does not have (both arrived in 0.38.0 with LTX-2.3); the LTX-2 fixes are shown on {release} by the "
    "ltx2-single-file scenario"
)

ROPE_NOT_DECLARED_FLOAT32 = (
    "Wan's rope frequencies stay in float32 in diffusers {release} without `rope` in `_keep_in_fp32_modules` (0.40.0 "
    "declares it), so a plan in bfloat16 counts them in bfloat16: 1.7% short of a tiny Wan transformer, which the "
    "quanto-torchao-gguf-planned-at-loaded-size scenario shows within its bound"
)
BUFFERS_KEPT_IN_FLOAT32_TEST = (
    "tests/pipelines/test_pipeline_device_map_quantized_sizes.py::TestPipelineDeviceMapSizes::"
    "test_buffers_kept_in_float32_are_sized_in_float32"
)

# 0.37.1 skips the patches of these tests (no ACE-Step and none of these audio VAEs before 0.38.0): not carried there.
NOT_CARRIED_TO_0_37_1 = {
    "tests/models/autoencoders/test_models_audio_vae_offloading.py",
    "tests/pipelines/ace_step/test_ace_step_group_offload.py",
}

NO_QUANTIZER = "diffusers {release} has no {quantizer} quantizer (added in {added}): the test cannot import its config"
SDNQ_LORA_TEST = "tests/lora/test_lora_flux_sdnq.py"
BFL_LORA_TEST = "tests/lora/test_lora_flux_bfl_nvfp4.py"
# Imports `BFLQuantizationConfig` (and `SDNQConfig`) for its BFL and SDNQ cases.
LOW_PRECISION_FUSE_TEST = "tests/lora/test_lora_fuse_low_precision_weights.py"

CARRIED_TESTS_FAILING = {
    release: {
        **{
            test: GROUP_OFFLOADING_NEEDS_AN_ACCELERATOR.format(release=release)
            for test in GROUP_OFFLOADING_TESTS
            if release != "0.37.1" or test not in NOT_CARRIED_TO_0_37_1
        },
        **(
            {"tests/single_file/test_ltx2_single_file.py": NO_LTX_2_3.format(release=release)}
            if release == "0.37.1"
            else {}
        ),
        **(
            {BUFFERS_KEPT_IN_FLOAT32_TEST: ROPE_NOT_DECLARED_FLOAT32.format(release=release)}
            if release != "0.40.0"
            else {}
        ),
        **(
            {SDNQ_LORA_TEST: NO_QUANTIZER.format(release=release, quantizer="SDNQ", added="0.40.0")}
            if release != "0.40.0"
            else {}
        ),
        **{
            test: NO_QUANTIZER.format(release=release, quantizer="BFL", added="0.42.0")
            for test in (BFL_LORA_TEST, LOW_PRECISION_FUSE_TEST)
        },
    }
    for release in ("0.37.1", "0.38.0", "0.39.0", "0.40.0")
}
CARRIED_TESTS_FAILING["0.41.0"] = {
    test: NO_QUANTIZER.format(release="0.41.0", quantizer="BFL", added="0.42.0")
    for test in (BFL_LORA_TEST, LOW_PRECISION_FUSE_TEST)
}
