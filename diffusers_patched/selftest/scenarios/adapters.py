"""Adapter operations (LoRA, textual inversion, saving) on a tiny SD pipeline offloaded on the CPU: the demo's rows of
the adapter operations upstream gets wrong, and what adapter_states.py's matrix of every operation in every state runs.
"""

import functools
import tempfile
from pathlib import Path

from ..judges import REFUSED, RETENTION_BOUND, WRONG, close, retained, retention
from ..tiny_pipelines import apply_offload_mode, load_tiny_sd_pipeline, save_tiny_sd_pipeline, tiny_word_tokenizer
from .common import _bnb_cpu_repacking, _encode, _text_encoder_lora, _unet_output
from .registry import SCENARIOS, scenario


# The pipeline's offloading, a user's own accelerate placement of the unet and text encoder (`cpu_offload`, and
# `dispatch_model` with half of their top-level modules on disk), `torch.compile`, the unet's weights stored in float8
# by layerwise casting, the unet quantized by quanto, torchao or SDNQ, and the text encoder by bitsandbytes.
ADAPTER_STATES = (
    "sequential",
    "model",
    "group-leaf-disk",
    "group-block-disk",
    "user-cpu-offload",
    "user-disk-dispatch",
    "compiled",
    "layerwise-cast",
    "quanto-int8",
    "torchao-int8",
    "sdnq-int8",
    "bnb-nf4-text-encoder",
)
# The states of a component loaded quantized (`_quantized_component`). A bitsandbytes unet is not one: diffusers'
# quantizer refuses to load a model without a GPU ("No GPU found. A GPU is needed for quantization."), pre-quantized or
# not; transformers loads a bitsandbytes text encoder on a CPU.
QUANTIZED_STATES = ("quanto-int8", "torchao-int8", "sdnq-int8", "bnb-nf4-text-encoder")
# The states that change the values the unet computes with: judged against a pipeline without the state holding them.
ROUNDING_STATES = ("layerwise-cast", *QUANTIZED_STATES)
# The states whose fused weights are quantized again, which rounds part of the LoRA away: a fused output is judged by
# the share of the reference's change of output it keeps, as the parity net's fuse flow judges it. (SDNQ's int8
# weights are plain tensors, which fusing refuses.)
REQUANTIZING_STATES = ("quanto-int8", "torchao-int8", "bnb-nf4-text-encoder")
FUSE = "fuse_lora, unfuse_lora"
FUSE_TWO = "fuse_lora of two weighted, unfuse_lora"
# The cells refused by design, before anything changes, naming what works: LoRAs with text encoder weights into a
# text encoder dispatched to disk (transformers cannot load them there), fusing into float8 or int8 weights. Any other
# ValueError is a failure.
REFUSALS = {
    *(
        (operation, "user-disk-dispatch")
        for operation in (
            "load_lora_weights",
            "set_adapters (two, weighted)",
            "disable_lora, enable_lora",
            FUSE,
            FUSE_TWO,
            "unload_lora_weights",
            "delete_adapters",
            "save_lora_adapter, reloaded",
        )
    ),
    *((operation, state) for operation in (FUSE, FUSE_TWO) for state in ("layerwise-cast", "sdnq-int8")),
}


def _lora(scale=1.0):
    """A LoRA of the text encoder and the unet, its B matrices times `scale` (a second adapter is another LoRA); the
    unet's scaled to a LoRA's usual size next to the weights, as scenarios/lora.py's. Made from the modules of the
    pipeline as saved, whatever state the pipeline it is loaded into is in."""
    unet_lora, text_encoder_lora = _lora_of_the_saved_pipeline()
    lora = {
        **text_encoder_lora,
        **{key: value * 0.01 if key.endswith("lora_B.weight") else value for key, value in unet_lora.items()},
    }
    return {key: value * scale if key.endswith("lora_B.weight") else value for key, value in lora.items()}


@functools.cache
def _lora_of_the_saved_pipeline():
    pipe = load_tiny_sd_pipeline(_saved_pipeline())
    return _text_encoder_lora(pipe.unet, prefix="unet", targets=(".to_q", ".to_v")), _text_encoder_lora(
        pipe.text_encoder
    )


def _run(model):
    """The model that computes `model`'s outputs: for a compiled model the one it wraps, which the operations must
    change, run as the compiled forward runs it, without dynamo tracing it again after each operation."""
    from diffusers.utils.torch_utils import unwrap_module

    return unwrap_module(model)


def _outputs(pipe):
    return [_encode(_run(pipe.text_encoder)), _unet_output(_run(pipe.unet))]


def _load_two(pipe):
    pipe.load_lora_weights(_lora(), adapter_name="first")
    pipe.load_lora_weights(_lora(scale=-0.5), adapter_name="second")


def load_lora_weights(pipe, workdir):
    pipe.load_lora_weights(_lora())
    return _outputs(pipe)


def set_adapters(pipe, workdir):
    _load_two(pipe)
    pipe.set_adapters(["first", "second"], adapter_weights=[0.5, 1.5])
    return _outputs(pipe)


def disable_and_enable_lora(pipe, workdir):
    pipe.load_lora_weights(_lora())
    pipe.disable_lora()
    disabled = _outputs(pipe)
    pipe.enable_lora()
    return disabled + _outputs(pipe)


def fuse_and_unfuse_lora(pipe, workdir):
    pipe.load_lora_weights(_lora())
    pipe.fuse_lora(components=["text_encoder", "unet"])
    fused = _outputs(pipe)
    pipe.unfuse_lora(components=["text_encoder", "unet"])
    return fused + _outputs(pipe)


def fuse_two_and_unfuse_lora(pipe, workdir):
    _load_two(pipe)
    pipe.set_adapters(["first", "second"], adapter_weights=[0.5, 1.5])
    pipe.fuse_lora(components=["text_encoder", "unet"])
    fused = _outputs(pipe)
    pipe.unfuse_lora(components=["text_encoder", "unet"])
    return fused + _outputs(pipe)


def unload_lora_weights(pipe, workdir):
    pipe.load_lora_weights(_lora())
    pipe.unload_lora_weights()
    return _outputs(pipe)


def delete_adapters(pipe, workdir):
    _load_two(pipe)
    pipe.delete_adapters("first")
    return _outputs(pipe)


def hotswap(pipe, workdir):
    # Hotswapping is for the unet (diffusers refuses it for text encoders).
    pipe.enable_lora_hotswap(target_rank=8)
    unet_lora = {key: value for key, value in _lora().items() if key.startswith("unet.")}
    pipe.load_lora_weights(unet_lora, adapter_name="first")
    first = [_unet_output(_run(pipe.unet))]
    pipe.load_lora_weights({key: -value for key, value in unet_lora.items()}, adapter_name="first", hotswap=True)
    return first + [_unet_output(_run(pipe.unet))]


def textual_inversion(pipe, workdir):
    import torch

    # A word for each of the text encoder's token ids: loading the embedding adds one, unloading removes it.
    vocab_size = pipe.text_encoder.config.vocab_size
    tokenizer = tiny_word_tokenizer(["<pad>", "<unk>"], [f"w{i}" for i in range(2, vocab_size)], pad_token="<pad>")
    embedding = torch.randn(pipe.text_encoder.config.hidden_size, generator=torch.Generator().manual_seed(1))
    pipe.load_textual_inversion(embedding, token="<cat>", tokenizer=tokenizer, text_encoder=pipe.text_encoder)
    input_ids = tokenizer("w5 <cat> w17 w99", return_tensors="pt").input_ids
    with torch.no_grad():
        loaded = _run(pipe.text_encoder)(input_ids)[0]
    pipe.unload_textual_inversion("<cat>", tokenizer=tokenizer, text_encoder=pipe.text_encoder)
    with torch.no_grad():
        return [loaded, _run(pipe.text_encoder)(tokenizer("w5 w17 w99", return_tensors="pt").input_ids)[0]]


IMAGE_EMBEDDING_WIDTH = 16


@functools.cache
def _ip_adapter():
    """An IP-Adapter for the saved pipeline's unet, in the layout of the files users download: `image_proj.*`, an image
    embedding projected to four tokens of the text encoder's width, and `ip_adapter.{1, 3, 5, ...}.to_k_ip.weight` and
    `to_v_ip.weight`, the keys and values of those tokens for each cross-attention, in the order of the unet's
    attention processors."""
    import torch
    from diffusers import UNet2DConditionModel

    unet = UNet2DConditionModel.from_pretrained(_saved_pipeline() / "unet")
    width = unet.config.cross_attention_dim
    generator = torch.Generator().manual_seed(2)
    weights = {
        "image_proj.proj.weight": torch.randn(4 * width, IMAGE_EMBEDDING_WIDTH, generator=generator) * 0.3,
        "image_proj.proj.bias": torch.zeros(4 * width),
        "image_proj.norm.weight": torch.ones(width),
        "image_proj.norm.bias": torch.zeros(width),
    }
    cross_attentions = [name for name in unet.attn_processors if name.endswith("attn2.processor")]
    for number, name in enumerate(cross_attentions):
        shape = unet.get_submodule(name.removesuffix(".processor")).to_k.weight.shape
        for projection in ("to_k_ip", "to_v_ip"):
            weights[f"ip_adapter.{2 * number + 1}.{projection}.weight"] = torch.randn(shape, generator=generator) * 0.3
    return weights


def ip_adapter(pipe, workdir):
    import torch
    from safetensors.torch import save_file

    save_file(_ip_adapter(), workdir / "ip_adapter.safetensors")
    # The image embedding is given, as `ip_adapter_image_embeds` gives it to the pipeline: no image encoder.
    pipe.load_ip_adapter(workdir, subfolder="", weight_name="ip_adapter.safetensors", image_encoder_folder=None)
    pipe.set_ip_adapter_scale(0.5)
    image_embeds = torch.randn(1, 1, IMAGE_EMBEDDING_WIDTH, generator=torch.Generator().manual_seed(3))
    loaded = _unet_output(_run(pipe.unet), added_cond_kwargs={"image_embeds": [image_embeds]})
    pipe.unload_ip_adapter()
    return [loaded, *_outputs(pipe)]


def save_lora_adapter(pipe, workdir):
    # The unet's LoRA, saved by diffusers (a text encoder's LoRA is saved by transformers and PEFT).
    pipe.load_lora_weights(_lora(), adapter_name="first")
    pipe.unet.save_lora_adapter(workdir / "lora", adapter_name="first")
    reloaded = load_tiny_sd_pipeline(_saved_pipeline())
    reloaded.unet.load_lora_adapter(workdir / "lora", weight_name="pytorch_lora_weights.safetensors")
    return [_unet_output(reloaded.unet)]


def save_pretrained(pipe, workdir):
    import torch

    # After a forward pass, as a user saves: offloading to disk empties the weights only once they are offloaded.
    _outputs(pipe)
    pipe.save_pretrained(workdir / "saved")
    # In the dtype the pipeline was loaded in (torchao's quantizer would pick bfloat16).
    reloaded = load_tiny_sd_pipeline(workdir / "saved", torch_dtype=torch.float32)
    _bnb_cpu_repacking(reloaded.text_encoder, enabled=False)
    return _outputs(reloaded)


ADAPTER_OPERATIONS = {
    "load_lora_weights": load_lora_weights,
    "set_adapters (two, weighted)": set_adapters,
    "disable_lora, enable_lora": disable_and_enable_lora,
    FUSE: fuse_and_unfuse_lora,
    FUSE_TWO: fuse_two_and_unfuse_lora,
    "unload_lora_weights": unload_lora_weights,
    "delete_adapters": delete_adapters,
    "hotswap": hotswap,
    "load_textual_inversion, unload": textual_inversion,
    "load_ip_adapter, unload": ip_adapter,
    "save_lora_adapter, reloaded": save_lora_adapter,
    "save_pretrained, reloaded": save_pretrained,
}


@functools.cache
def _pipeline_directory():
    # Kept by the cache for the interpreter's scenarios, removed when it exits.
    return tempfile.TemporaryDirectory()


@functools.cache
def _saved_pipeline():
    return save_tiny_sd_pipeline(Path(_pipeline_directory().name) / "pipe")


def _operation_outputs(pipe, operation, workdir):
    """What the operation returns, then the pipeline's outputs after it, twice."""
    return ADAPTER_OPERATIONS[operation](pipe, workdir), _outputs(pipe), _outputs(pipe)


def _reference_pipeline(state):
    """The pipeline in no such state the operations in `state` are judged against: for a state that rounds the unet's
    weights, holding the values it stores, in float32 and with no hook (what the state computes with)."""
    pipe = load_tiny_sd_pipeline(_saved_pipeline())
    if state in ROUNDING_STATES:
        getattr(pipe, _rounded_component(state)).load_state_dict(_values_computed_with(state))
    return pipe


def _rounded_component(state):
    return "text_encoder" if state == "bnb-nf4-text-encoder" else "unet"


@functools.cache
def _values_computed_with(state):
    """The state dict of a float32 model that computes as the component the rounding `state` rounds does."""
    import torch

    stored = load_tiny_sd_pipeline(_saved_pipeline())
    _put_in_state(stored, state, workdir=None)
    component = _rounded_component(state)
    if state == "layerwise-cast":
        return {name: tensor.float() for name, tensor in stored.unet.state_dict().items()}
    model = getattr(load_tiny_sd_pipeline(_saved_pipeline()), component)
    # Each Linear's weight read off the quantized layer by passing the identity through it (exact in float32).
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear):
                layer = getattr(stored, component).get_submodule(name)
                weight = layer(torch.eye(module.in_features)) - (0 if layer.bias is None else layer.bias)
                module.weight.copy_(weight.T)
    return model.state_dict()


@functools.cache
def _reference(operation, state):
    """The operation's outputs on `state`'s reference pipeline (computed once per interpreter); with no operation, its
    outputs as loaded."""
    if operation is None:
        return _outputs(_reference_pipeline(state))
    with tempfile.TemporaryDirectory() as workdir:
        return _operation_outputs(_reference_pipeline(state), operation, Path(workdir))


def _quantization_config(state):
    """The quantization config of the unet in `state`."""
    import os

    from diffusers import QuantoConfig, TorchAoConfig

    if state == "quanto-int8":
        return QuantoConfig(weights_dtype="int8")
    if state == "sdnq-int8":
        # diffusers has SDNQ since 0.40.0: imported only for this state, which the older releases' scenarios never use.
        from diffusers import SDNQConfig

        # As the parity net: sdnq's eager dequantization (torch.compile costs seconds per layer shape on a CPU), and
        # every layer quantized (SDNQ leaves layers under 16384 elements alone by default, every layer of the tiny unet).
        os.environ.setdefault("SDNQ_USE_TORCH_COMPILE", "0")
        return SDNQConfig(weights_dtype="int8", minimum_allowed_numel=0, minimum_allowed_channel_size=0)
    from torchao.quantization import Int8WeightOnlyConfig

    return TorchAoConfig(Int8WeightOnlyConfig())


def _put_in_state(pipe, state, workdir):
    import torch
    from accelerate import cpu_offload, dispatch_model

    if state == "user-cpu-offload":
        for model in (pipe.unet, pipe.text_encoder):
            cpu_offload(model, execution_device=torch.device("cpu"))
    elif state == "user-disk-dispatch":
        for name in ("unet", "text_encoder"):
            model = getattr(pipe, name)
            children = [child for child, _ in model.named_children()]
            device_map = {child: "disk" if i % 2 else "cpu" for i, child in enumerate(children)}
            dispatch_model(model, device_map=device_map, offload_dir=str(workdir / name), main_device="cpu")
    elif state == "bnb-nf4-text-encoder":
        from transformers import BitsAndBytesConfig, CLIPTextModel

        pipe.text_encoder = CLIPTextModel.from_pretrained(
            _saved_pipeline() / "text_encoder",
            quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4"),
            torch_dtype=torch.float32,
        )
        # Computed from the weights as stored, the same on every CPU.
        _bnb_cpu_repacking(pipe.text_encoder, enabled=False)
    elif state in QUANTIZED_STATES:
        from diffusers import UNet2DConditionModel

        pipe.unet = UNet2DConditionModel.from_pretrained(
            _saved_pipeline() / "unet", quantization_config=_quantization_config(state), torch_dtype=torch.float32
        )
    elif state == "layerwise-cast":
        pipe.unet.enable_layerwise_casting(storage_dtype=torch.float8_e4m3fn, compute_dtype=torch.float32)
    elif state == "compiled":
        # The eager backend needs no compiler; `_run` runs the models they wrap.
        pipe.unet = torch.compile(pipe.unet, backend="eager")
        pipe.text_encoder = torch.compile(pipe.text_encoder, backend="eager")
    else:
        apply_offload_mode(pipe, state.removesuffix("-disk"), workdir / "offload")


def judge_adapter_state(result):
    if "refused" in result:
        return REFUSED, result["refused"].split(":")[0]
    verdict, figure = close(result["diffs"], what="max abs diff")
    if "retention" not in result:
        return verdict, figure
    if not retained(result["retention"]):
        verdict = WRONG
    return (
        verdict,
        f"fused: keeps {result['retention']:.1%} of the LoRA's effect (bound {RETENTION_BOUND:.0%}); {figure}",
    )


# RSS also counts what the allocator keeps and what the interpreter caches: a bound for gross leaks only, such as a
# model's weights kept each swap; the live tensors and the offload files must come back exactly.
RSS_BOUND_MIB = 32
ADAPTER_SWAPS = 2


def _swap_adapters(pipe, swap):
    """What a user does between images, with LoRAs of new names each time: two loaded and weighted, fused and
    unfused, one deleted, a pipeline call, and all unloaded."""
    first, second = f"first-{swap}", f"second-{swap}"
    pipe.load_lora_weights(_lora(), adapter_name=first)
    pipe.load_lora_weights(_lora(scale=-0.5), adapter_name=second)
    pipe.set_adapters([first, second], adapter_weights=[0.5, 1.5])
    pipe.fuse_lora(components=["text_encoder", "unet"])
    pipe.unfuse_lora(components=["text_encoder", "unet"])
    pipe.delete_adapters(first)
    _outputs(pipe)
    pipe.unload_lora_weights()


def _memory_in_use(offload_dir):
    """(bytes of the live tensors' storages, offload files, their bytes, RSS in MiB) after a garbage collection, and
    after glibc returned the memory it can (`malloc_trim`, where the C library has it)."""
    import ctypes
    import ctypes.util
    import gc
    import os

    import torch

    gc.collect()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
    storages = {}
    for obj in gc.get_objects():
        if isinstance(obj, torch.Tensor) and obj.device.type != "meta":
            storage = obj.untyped_storage()
            try:
                storages[storage.data_ptr()] = storage.nbytes()
            except RuntimeError:
                continue  # a wrapper subclass (quanto's) has no storage of its own: its inner tensors are counted
    files = [path for path in Path(offload_dir).rglob("*") if path.is_file()]
    with open("/proc/self/statm") as statm:
        rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return sum(storages.values()), len(files), sum(path.stat().st_size for path in files), rss / 2**20


def adapter_swaps_run(state):
    def run(workdir):
        # The LoRAs are made from the saved pipeline once per interpreter: made before the baseline, as a user's are.
        _lora_of_the_saved_pipeline()
        pipe = load_tiny_sd_pipeline(_saved_pipeline())
        if state != "plain":
            _put_in_state(pipe, state, workdir)
        before = _outputs(pipe)
        in_use = [_memory_in_use(workdir)]
        diffs = []
        for swap in range(ADAPTER_SWAPS):
            _swap_adapters(pipe, swap)
            diffs += [(output - expected).abs().max().item() for output, expected in zip(_outputs(pipe), before)]
            in_use.append(_memory_in_use(workdir))
        return {"diffs": diffs, "in_use": in_use}

    return run


def judge_adapter_swaps(result):
    (tensor_bytes, files, file_bytes, rss), *after = result["in_use"]
    growth = [
        (swap_tensor_bytes - tensor_bytes, swap_files - files, swap_file_bytes - file_bytes)
        for swap_tensor_bytes, swap_files, swap_file_bytes, _ in after
    ]
    rss_growth = max(swap_rss for *_, swap_rss in after) - rss
    memory = (
        f"after each swap: live tensors {', '.join(f'{grown[0]:+d}' for grown in growth)} bytes, offload files "
        f"{', '.join(f'{grown[1]:+d} ({grown[2]:+d} bytes)' for grown in growth)} (0 expected), "
        f"RSS {rss_growth:+.1f} MiB (bound {RSS_BOUND_MIB} MiB)"
    )
    verdict, figure = close(result["diffs"], what="max abs diff")
    if any(any(grown) for grown in growth) or rss_growth > RSS_BOUND_MIB:
        verdict = WRONG
    return verdict, f"{memory}; outputs against those before the swaps: {figure}"


def adapter_swaps_scenario(name, state, summary, registry):
    """Registers swapping adapters ADAPTER_SWAPS times in `state` as the scenario `name`: the memory in use and the
    outputs must come back to what they were before."""
    scenario(
        name,
        patch=None,
        summary=summary,
        text="{in_use}; max abs diff to the outputs before the swaps {diffs}",
        judge=judge_adapter_swaps,
        registry=registry,
    )(adapter_swaps_run(state))


def adapter_state_run(operation, state):
    def run(workdir):
        pipe = load_tiny_sd_pipeline(_saved_pipeline())
        _put_in_state(pipe, state, workdir)
        try:
            returned, after, again = _operation_outputs(pipe, operation, workdir)
        except ValueError as error:
            if (operation, state) not in REFUSALS:
                raise
            # A refusal: docs/adapters.md's table names its message, which the test checks.
            return {"refused": str(error)}
        reference_state = state if state in ROUNDING_STATES else "plain"
        expected_returned, expected_after, _ = _reference(operation, reference_state)
        result = {}
        if operation in (FUSE, FUSE_TWO) and state in REQUANTIZING_STATES:
            fused, expected_fused = returned[:2], expected_returned[:2]
            returned, expected_returned = returned[2:], expected_returned[2:]
            # The least share over the outputs of the reference's change of output with the LoRA.
            before = _reference(None, reference_state)
            result["retention"] = min(
                retention(output - start, wanted - start)
                for output, wanted, start in zip(fused, expected_fused, before)
            )
        pairs = [*zip(returned, expected_returned), *zip(after, expected_after), *zip(again, after)]
        return {**result, "diffs": [(output - expected).abs().max().item() for output, expected in pairs]}

    return run


def describe_adapter_state(result):
    if "refused" in result:
        return f"refused: {result['refused']}"
    kept = f"fused, keeps {result['retention']:.1%} of the LoRA's effect; " if "retention" in result else ""
    return f"{kept}max abs diff to the outputs in no such state {result['diffs']}"


def adapter_scenario(name, operation, state, summary, patch=None, registry=SCENARIOS):
    """Registers `operation` in `state` as the scenario `name`, judged against the operation in no such state."""
    scenario(
        name,
        patch=patch,
        summary=summary,
        text=describe_adapter_state,
        judge=judge_adapter_state,
        registry=registry,
    )(adapter_state_run(operation, state))


for _name, _operation, _state, _patch, _summary in (
    (
        "lora-loaded-group-offloaded-to-disk",
        "load_lora_weights",
        "group-leaf-disk",
        "group-offload-to-disk-survives-lora-loading.patch",
        "tiny SD pipeline group offloaded to disk at leaf level, then load_lora_weights, vs. no offload",
    ),
    (
        "save-pretrained-group-offloaded-to-disk",
        "save_pretrained, reloaded",
        "group-block-disk",
        "save-weights-group-offloaded-to-disk.patch",
        "tiny SD pipeline group offloaded to disk at block level: save_pretrained, reloaded, vs. no offload",
    ),
    (
        "textual-inversion-group-offloaded-to-disk",
        "load_textual_inversion, unload",
        "group-leaf-disk",
        "textual-inversion-on-offloaded-text-encoders.patch",
        "tiny SD pipeline group offloaded to disk at leaf level: load_textual_inversion, unload, vs. no offload",
    ),
    (
        "save-lora-adapter-sequentially-offloaded",
        "save_lora_adapter, reloaded",
        "sequential",
        "save-lora-adapters-of-offloaded-models.patch",
        "tiny SD pipeline under enable_sequential_cpu_offload(device='cpu'): a LoRA loaded, unet.save_lora_adapter, "
        "reloaded, vs. no offload",
    ),
    (
        "lora-refused-for-text-encoder-offloaded-to-disk",
        "load_lora_weights",
        "user-disk-dispatch",
        "refuse-lora-into-text-encoders-offloaded-to-disk.patch",
        "tiny SD pipeline whose unet and text encoder the user dispatched with accelerate's dispatch_model, half of "
        "their top-level modules on disk: load_lora_weights",
    ),
    (
        "save-lora-adapter-quanto-quantized",
        "save_lora_adapter, reloaded",
        "quanto-int8",
        "save-lora-adapters-of-quantized-models.patch",
        "tiny SD pipeline whose unet was loaded with QuantoConfig(weights_dtype='int8'): a LoRA loaded, "
        "unet.save_lora_adapter, reloaded into the unquantized pipeline, vs. the same LoRA saved from the unquantized "
        "unet",
    ),
    (
        "ip-adapter-loaded-quanto-quantized",
        "load_ip_adapter, unload",
        "quanto-int8",
        "load-ip-adapters-into-offloaded-and-quantized-unets.patch",
        "tiny SD pipeline whose unet was loaded with QuantoConfig(weights_dtype='int8'): load_ip_adapter, the unet's "
        "output with an image embedding, unload_ip_adapter, vs. the unquantized unet holding the weights quanto "
        "computes with",
    ),
    (
        "lora-fuse-two-torchao-int8",
        FUSE_TWO,
        "torchao-int8",
        "local-fuse-torchao-loras-one-adapter-at-a-time.patch",
        "tiny SD pipeline whose unet was loaded with TorchAoConfig(Int8WeightOnlyConfig()): two LoRAs, set_adapters "
        "with weights, fuse_lora of both, unfuse_lora, vs. the unquantized unet holding the weights torchao computes "
        "with",
    ),
    (
        "lora-set-adapters-compiled",
        "set_adapters (two, weighted)",
        "compiled",
        "adapter-operations-on-compiled-models.patch",
        "tiny SD pipeline with torch.compile'd unet and text encoder (eager backend): two LoRAs, set_adapters with "
        "weights, vs. not compiled",
    ),
):
    adapter_scenario(_name, _operation, _state, _summary, patch=_patch)
