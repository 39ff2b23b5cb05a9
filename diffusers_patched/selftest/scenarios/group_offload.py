"""Group offloading of the pipelines and models upstream refused or got wrong."""

import logging
import os

from ..judges import WRONG, close
from ..tiny_pipelines import TINY_AUDIO_VAES, TINY_DECODER_VAES, TINY_PRELOADING_MODELS, offload_diff
from .common import diffusers_log_messages
from .registry import scenario


def _judge_group_offload(warning_count):
    """RIGHT when the output of every offloaded run equals the un-offloaded one up to float32 rounding and
    `warning_count` warnings named a model that does not support group offloading."""

    def judge(result):
        if len(result["warnings"]) != warning_count:
            return WRONG, f"{len(result['warnings'])} warnings (expected {warning_count}): {result['warnings']}"
        return close(result["diffs"], what="max abs diff to the un-offloaded output")

    return judge


def _group_offload(pipeline, modes=("group-leaf", "group-block")):
    # A weight offloaded to disk wrongly holds what `torch.empty_like` gave it: how far off such a run is differs from
    # run to run, not that it is off.
    def run(workdir):
        with diffusers_log_messages(logging.WARNING, "does not support group offloading") as warned:
            diffs = [offload_diff(pipeline, mode) for mode in modes]
        return {"diffs": diffs, "warnings": warned}

    return run


for _name, _pipeline, _patch, _cause, _modes in [
    (
        "group-offload-hunyuan-dit",
        "hunyuan-dit",
        "offloading-loads-modules-that-read-child-weights.patch",
        "HunyuanDiT2DModel declared _supports_group_offloading = False: its attention pooling uses its projections' "
        "weights",
        ("group-leaf", "group-block"),
    ),
    (
        "group-offload-stable-audio",
        "stable-audio",
        "offloading-loads-modules-that-read-child-weights.patch",
        "AutoencoderOobleck declared _supports_group_offloading = False: weight_norm computes its weights in forward "
        "pre-hooks",
        ("group-leaf", "group-block"),
    ),
    (
        "group-offload-stable-audio-3-audio-to-audio",
        "stable-audio-3-audio-to-audio",
        "pipeline-group-offload-to-disk-per-component.patch",
        "the VAE's and the transformer's groups of the same names were saved to the same files",
        ("group-leaf", "group-block"),
    ),
    (
        "group-offload-ace-step",
        "ace-step",
        "group-offload-keeps-what-models-read-outside-forward.patch",
        "the pipeline reads the condition encoder's and audio tokenizer's tensors outside of any forward",
        ("group-leaf",),
    ),
    (
        "group-offload-ace-step-block-level",
        "ace-step",
        "group-offload-onloads-modules-outside-blocks-called-directly.patch",
        "the pipeline calls the text encoder's input embeddings after the text encoder's forward, where block-level "
        "offloading onloads the modules outside its blocks",
        ("group-block",),
    ),
    (
        "group-offload-dit",
        "dit",
        "group-offload-onloads-block-modules-called-outside-their-block.patch",
        "DiTTransformer2DModel declared _supports_group_offloading = False: its output layer calls the first block's "
        "timestep and label embedding after the blocks",
        ("group-leaf", "group-block"),
    ),
    (
        "group-offload-glm-image-leaf-level",
        "glm-image",
        "group-offload-to-disk-keeps-tied-weights.patch",
        "T5's shared and encoder.embed_tokens hold one weight, in two leaf groups, and the second group wrote it to "
        "disk after the first had emptied it",
        ("group-leaf",),
    ),
]:
    scenario(
        _name,
        patch=_patch,
        summary=f"{_pipeline} (tiny), pipe.enable_group_offload {' and '.join(_modes)}, offloaded to disk: {_cause}",
        text="max abs diff to the un-offloaded output per level {diffs}; warned: {warnings}",
        judge=_judge_group_offload(warning_count=0),
    )(_group_offload(_pipeline, _modes))


def _group_offload_decoder_vaes(workdir):
    with diffusers_log_messages(logging.WARNING, "does not support group offloading") as warned:
        diffs = [offload_diff(vae, mode) for vae in TINY_DECODER_VAES for mode in ("group-leaf", "group-block")]
    return {"diffs": diffs, "warnings": warned}


def _offload_audio_vaes(workdir):
    with diffusers_log_messages(logging.WARNING, "does not support group offloading") as warned:
        diffs = [
            offload_diff(vae, mode) for vae in TINY_AUDIO_VAES for mode in ("group-leaf", "group-block", "sequential")
        ]
    return {"diffs": diffs, "warnings": warned}


scenario(
    "offload-audio-vaes",
    patch="audio-vaes-support-group-offloading.patch",
    summary="the LongCat-AudioDiT, MiniMax-H3, KVAE and Cosmos3 audio VAEs (tiny), each alone in a pipeline, group "
    "offloaded to disk at leaf and block level, then sequentially offloaded: they declared "
    "_supports_group_offloading = False; LongCat's encoder calls slices of its nn.Sequential and MiniMax-H3's "
    "attention reads qkv.weight, without calling what offloading hooks",
    text="max abs diff to the un-offloaded output per VAE and mode (group-leaf, group-block, sequential) {diffs}; "
    "warned: {warnings}",
    judge=_judge_group_offload(warning_count=0),
)(_offload_audio_vaes)


def _offload_models_holding_modules_loaded_whole(workdir):
    with diffusers_log_messages(logging.WARNING, "does not support group offloading") as warned:
        diffs = [
            offload_diff(model, mode)
            for model in TINY_PRELOADING_MODELS
            for mode in ("sequential", "group-leaf", "group-block")
        ]
    return {"diffs": diffs, "warnings": warned}


scenario(
    "offload-models-holding-modules-loaded-whole",
    patch="offloading-loads-modules-that-read-child-weights.patch",
    summary="HunyuanDiT2DControlNetModel, PaellaVQModel, ShapEParamsProjModel and ControlNetUnionModel (tiny), each "
    "alone in a pipeline, sequentially offloaded, then group offloaded to disk at leaf and block level: they hold HunyuanDiT's attention pooling, the VQ quantizer, Shap-E's ChannelsProj and "
    "nn.MultiheadAttention, which use their children's weights without calling them, and which offloading loaded "
    "whole only in the models that listed them",
    text="max abs diff to the un-offloaded output per model and mode (sequential, group-leaf, group-block) {diffs}; "
    "warned: {warnings}",
    judge=_judge_group_offload(warning_count=0),
)(_offload_models_holding_modules_loaded_whole)


scenario(
    "group-offload-vq-and-consistency-decoder-vaes",
    patch="vq-and-consistency-decoder-vaes-support-group-offloading.patch",
    summary="VQModel and ConsistencyDecoderVAE (tiny), each alone in a pipeline, pipe.enable_group_offload leaf and "
    "block level, offloaded to disk: they declared _supports_group_offloading = False; VQModel's quantizer reads its "
    "codebook's weight without calling it, ConsistencyDecoderVAE's decode reads its means and stds outside forward",
    text="max abs diff to the un-offloaded output per VAE and level {diffs}; warned: {warnings}",
    judge=_judge_group_offload(warning_count=0),
)(_group_offload_decoder_vaes)


def _group_offload_weights_tied_across_blocks(workdir):
    # No model diffusers ships ties a weight across block-level groups: the tie is made here, as a user's model or a
    # future one would make it (ALBERT-style shared layers, an output projection tied to a block's).
    import torch
    from diffusers.hooks import apply_group_offloading

    class TiedAcrossBlocks(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(32, 32) for _ in range(3)])
            self.proj_out = torch.nn.Linear(32, 32)
            # Three groups at block level hold it: the first block's, the last block's and the one of `proj_out`,
            # outside the blocks, which stays onloaded while the blocks' groups are offloaded.
            self.blocks[-1].weight = self.blocks[0].weight
            self.proj_out.weight = self.blocks[0].weight

        def forward(self, hidden_states):
            for block in self.blocks:
                hidden_states = torch.nn.functional.silu(block(hidden_states))
            return self.proj_out(hidden_states)

    torch.manual_seed(0)
    model = TiedAcrossBlocks().eval()
    hidden_states = torch.randn(4, 32)
    with torch.no_grad():
        expected = model(hidden_states)
        apply_group_offloading(
            model,
            onload_device=torch.device("cpu"),
            offload_type="block_level",
            num_blocks_per_group=1,
            offload_to_disk_path=os.path.join(workdir, "offload"),
        )
        diffs = [(model(hidden_states) - expected).abs().max().item() for _ in range(2)]
    return {"diffs": diffs}


scenario(
    "group-offload-weights-tied-across-blocks",
    patch="group-offload-to-disk-keeps-weights-tied-across-blocks.patch",
    summary="a model (tiny) whose first block, last block and output projection share one weight, group offloaded to "
    "disk at block level: the first group emptied the weight before the others wrote their files, and the "
    "first block's group emptied it while the output projection's group, onloaded, still needed it",
    text="max abs diff to the un-offloaded output per pass {diffs}",
    judge=lambda result: close(result["diffs"], what="max abs diff to the un-offloaded output"),
)(_group_offload_weights_tied_across_blocks)


def _offload_weight_norm_layers(workdir):
    # As BigVGAN's AMP blocks (MiniMax-H3's decoder) hold them: weight-normalized convolutions in an nn.ModuleList the
    # model iterates, and one that is a direct child of the model.
    import diffusers
    import torch
    from torch.nn.utils import weight_norm

    class WeightNormModel(diffusers.ModelMixin):
        def __init__(self):
            super().__init__()
            self.conv_in = weight_norm(torch.nn.Conv1d(2, 8, 3, padding=1))
            self.convs = torch.nn.ModuleList([weight_norm(torch.nn.Conv1d(8, 8, 3, padding=1)) for _ in range(2)])

        def forward(self, hidden_states):
            hidden_states = self.conv_in(hidden_states)
            for conv in self.convs:
                hidden_states = torch.nn.functional.silu(conv(hidden_states))
            return hidden_states

    class ModelPipeline(diffusers.DiffusionPipeline):
        def __init__(self, model):
            super().__init__()
            self.register_modules(model=model)

    def model():
        torch.manual_seed(0)
        return WeightNormModel().eval()

    hidden_states = torch.randn(1, 2, 16, generator=torch.Generator().manual_seed(0))
    diffs, conv_in_devices = [], []
    with torch.no_grad():
        expected = model()(hidden_states)
        for offload_type in ("leaf_level", "block_level"):
            offloaded = model()
            offloaded.enable_group_offload(
                onload_device=torch.device("cpu"),
                offload_type=offload_type,
                num_blocks_per_group=1,
                offload_to_disk_path=os.path.join(workdir, offload_type),
            )
            diffs.append((offloaded(hidden_states) - expected).abs().max().item())
        pipe = ModelPipeline(model())
        pipe.enable_sequential_cpu_offload(device="cpu")
        pipe.model.convs[1].register_forward_hook(
            lambda *_: conv_in_devices.append(pipe.model.conv_in.weight_v.device.type)
        )
        diffs.append((pipe.model(hidden_states) - expected).abs().max().item())
    return {"diffs": diffs, "conv_in_device_while_convs_1_runs": conv_in_devices}


def _judge_offload_weight_norm_layers(result):
    if result["conv_in_device_while_convs_1_runs"] != ["meta"]:
        return WRONG, (
            "sequential offloading kept conv_in loaded while convs.1 ran "
            f"({result['conv_in_device_while_convs_1_runs']}): it loaded the whole model at once"
        )
    return close(result["diffs"], what="max abs diff to the un-offloaded output")


scenario(
    "offload-weight-norm-layers",
    patch="offloading-loads-modules-that-read-child-weights.patch",
    summary="a model (tiny) with weight-normalized convolutions in an nn.ModuleList it iterates and one as a direct "
    "child, group offloaded to disk at leaf and block level, then sequentially offloaded: weight_norm computes the "
    "weight in a forward pre-hook, before the offload hooks load it; loading each such layer's parent by class loads "
    "nothing for a list, and the whole model for a direct child",
    text="max abs diff to the un-offloaded output (group-leaf, group-block, sequential) {diffs}; sequential: conv_in's "
    "weight on {conv_in_device_while_convs_1_runs} while convs.1 runs",
    judge=_judge_offload_weight_norm_layers,
)(_offload_weight_norm_layers)


def _group_offload_transformer_2d_block_level(workdir):
    # DiT's configuration of the legacy Transformer2DModel, which does not opt out of group offloading: its output layer
    # calls the first block's `norm1.emb` after the blocks, whose group block-level offloading emptied by then.
    import torch
    from diffusers import Transformer2DModel

    from ..tiny_pipelines import tiny_dit_pipeline

    dit = tiny_dit_pipeline()[0].transformer
    model = Transformer2DModel(**dit.config).eval()
    model.load_state_dict(dit.state_dict())
    inputs = {
        "hidden_states": torch.randn(1, 4, 16, 16),
        "timestep": torch.tensor([10]),
        "class_labels": torch.tensor([1]),
    }
    with torch.no_grad():
        expected = model(**inputs).sample
        model.enable_group_offload(
            torch.device("cpu"),
            offload_type="block_level",
            num_blocks_per_group=1,
            offload_to_disk_path=os.path.join(workdir, "offload"),
        )
        diffs = [(model(**inputs).sample - expected).abs().max().item() for _ in range(2)]
    return {"diffs": diffs}


scenario(
    "group-offload-transformer-2d-block-level",
    patch="group-offload-onloads-block-modules-called-outside-their-block.patch",
    summary="Transformer2DModel (tiny, DiT's ada_norm_zero configuration) group offloaded to disk at block level: its "
    "output layer calls the first block's timestep and label embedding after the blocks",
    text="max abs diff to the un-offloaded output per pass {diffs}",
    judge=lambda result: close(result["diffs"], what="max abs diff to the un-offloaded output"),
)(_group_offload_transformer_2d_block_level)


scenario(
    "group-offload-model-opting-out",
    patch="group-offload-skips-models-that-do-not-support-it.patch",
    summary="DiT (tiny) whose transformer is of a class declaring _supports_group_offloading = False, as a model of "
    "another library can: pipe.enable_group_offload leaf and block level, offloaded to disk",
    text="max abs diff to the un-offloaded output per level {diffs}; warned: {warnings}",
    judge=_judge_group_offload(warning_count=2),
)(_group_offload("dit-opting-out"))
