"""What the scenarios of several topics share: text encoder passes, LoRAs made here, accelerate hooks described, the tiny
Llama of the bitsandbytes flows, log capture."""

import logging
from contextlib import contextmanager

from ..judges import close


@contextmanager
def diffusers_log_messages(level, containing):
    """The messages containing `containing` that diffusers logs at `level` or above inside the block.

    Scenarios share one interpreter: the handler is detached and the logger's level restored once the block ends.
    """
    messages = []

    class Handler(logging.Handler):
        def emit(self, record):
            if containing in record.getMessage():
                messages.append(record.getMessage())

    logger = logging.getLogger("diffusers")
    handler = Handler(level)
    previous_level = logger.level
    logger.setLevel(min(level, logger.getEffectiveLevel()))
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def _clip_text_modules(text_encoder):
    # transformers 5.x moved CLIPTextModel's `text_model` modules onto the model itself.
    return getattr(text_encoder, "text_model", text_encoder)


def _first_mlp_weight(text_encoder):
    return _clip_text_modules(text_encoder).encoder.layers[0].mlp.fc1.weight


def _encode(text_encoder, device="cpu"):
    import torch

    with torch.no_grad():
        return text_encoder(torch.tensor([[0, 5, 17, 99, 250, 2, 1, 1]], device=device))[0]


def _diffs(text_encoder, expected, passes=3, device="cpu"):
    """Max abs difference of the text encoder's output to `expected`, on each of `passes` passes."""
    return [(_encode(text_encoder, device) - expected).abs().max().item() for _ in range(passes)]


def _state_dict_copy(model):
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def _equal_tensors(state_dict, expected):
    import torch

    return sum(name in state_dict and torch.equal(state_dict[name], tensor) for name, tensor in expected.items())


def _quant_statistics(state_dict):
    """The 4-bit quantization statistics (absmax, quant_map, ...) a state dict holds next to the weights."""
    return {name: tensor for name, tensor in state_dict.items() if ".weight." in name}


def _meta_statistics(model):
    """Names of 4-bit quantization statistics that are on the meta device."""
    names = []
    for name, module in model.named_modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if state is None:
            continue
        tensors = {"absmax": state.absmax, "code": state.code}
        if state.nested:
            tensors.update(offset=state.offset, nested_absmax=state.state2.absmax)
        names += [f"{name}.{key}" for key, tensor in tensors.items() if tensor.device.type == "meta"]
    return names


def _text_encoder_lora(text_encoder, rank=4, prefix="text_encoder", targets=(".q_proj", ".v_proj", ".fc1")):
    """A LoRA for `load_lora_weights`: random A and B for the Linear layers named `*targets` (the unet's: `prefix="unet"`)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    state_dict = {}
    for name, module in text_encoder.named_modules():
        if name.endswith(targets):
            state_dict[f"{prefix}.{name}.lora_A.weight"] = torch.randn(rank, module.in_features, generator=generator)
            state_dict[f"{prefix}.{name}.lora_B.weight"] = torch.randn(module.out_features, rank, generator=generator)
    return state_dict


def _make_bnb_offload_safe():
    """The patched helper, or None on upstream (the scenario then shows what upstream does without it)."""
    try:
        from diffusers.quantizers.bitsandbytes.utils import make_bnb_offload_safe
    except ImportError:
        return None
    return make_bnb_offload_safe


def _judge_diffs(result):
    return close(result["diffs"])


def _accelerate_hooks(model):
    """{module: (hook object, [(hook class, execution device, offload, weights map keys), ...])} of hooked modules."""
    from accelerate.hooks import SequentialHook

    hooks = {}
    for module in model.modules():
        hook = getattr(module, "_hf_hook", None)
        if hook is not None:
            chain = hook.hooks if isinstance(hook, SequentialHook) else [hook]
            hooks[module] = (hook, [_describe_hook(h) for h in chain])
    return hooks


def _describe_hook(hook):
    weights_map = getattr(hook, "weights_map", None)
    keys = None if weights_map is None else sorted(weights_map)
    return [type(hook).__name__, str(getattr(hook, "execution_device", None)), getattr(hook, "offload", None), keys]


def _unet_output(unet, **kwargs):
    import torch

    generator = torch.Generator().manual_seed(0)
    inputs = (
        torch.randn(1, unet.config.in_channels, 16, 16, generator=generator),
        10,
        torch.randn(1, 8, unet.config.cross_attention_dim, generator=generator),
    )
    with torch.no_grad():
        return unet(*inputs, **kwargs).sample


LLAMA_CPU_DISK_MAP = {
    "model.embed_tokens": "cpu",
    "model.rotary_emb": "cpu",
    "model.layers.0": "cpu",
    "model.layers.1": "disk",
    "model.norm": "cpu",
    "lm_head": "disk",
}


def load_tiny_llama_4bit(workdir, **kwargs):
    """The Llama of `save_tiny_llama_with_adapter`, nf4 with double quant, computing in float32."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    quantization_config = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.float32,
        **kwargs.pop("quantization_kwargs", {}),
    )
    return AutoModelForCausalLM.from_pretrained(
        workdir / "model", quantization_config=quantization_config, **kwargs
    ).eval()


def save_tiny_llama_with_adapter(workdir):
    """A 2-layer Llama saved to `workdir / "model"`, and a LoRA for it (non-zero B) to `workdir / "adapter"`."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(workdir / "model")
    lora = LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
    get_peft_model(model, lora).save_pretrained(workdir / "adapter")


def llama_logits(model, device="cpu"):
    import torch

    with torch.no_grad():
        return model(torch.tensor([[1, 7, 42, 99, 200, 3]], device=device)).logits


def quanto_flux(workdir):
    """A tiny Flux transformer loaded with `QuantoConfig(weights_dtype="float8")`; an unquantized one holding the values
    the quantized one computes with (the reference); a LoRA of its attention projections; the inputs."""
    import copy

    from diffusers import FluxTransformer2DModel, QuantoConfig
    from optimum.quanto import QModuleMixin
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    from ..tiny_checkpoints import FLUX_DEV_CONFIG, build_flux, flux_inputs

    model = build_flux(FLUX_DEV_CONFIG)
    model.save_pretrained(workdir / "flux")
    quantized = FluxTransformer2DModel.from_pretrained(
        workdir / "flux", quantization_config=QuantoConfig(weights_dtype="float8")
    )
    reference = copy.deepcopy(model)
    for name, module in quantized.named_modules():
        if isinstance(module, QModuleMixin):
            reference.get_submodule(name).weight.data.copy_(module.qweight.dequantize())
    with_lora = copy.deepcopy(model)
    with_lora.add_adapter(
        LoraConfig(r=4, lora_alpha=4, target_modules=["to_q", "to_k", "to_v"], init_lora_weights=False)
    )
    lora = {f"transformer.{key}": value for key, value in get_peft_model_state_dict(with_lora).items()}
    return quantized, reference, lora, flux_inputs(FLUX_DEV_CONFIG)


def _bnb_cpu_repacking(model, enabled):
    """Switch bitsandbytes' repacking of 4-bit weights for its CPU kernels, on by default on CPUs with AVX512-BF16 only.

    On, the next forward pass repacks the weights (rewriting their statistics) on any CPU, as on those CPUs; off,
    outputs are computed from the weights as stored, the same on every machine.
    """
    import bitsandbytes as bnb

    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            module.support_avx512bf16_for_cpu = enabled
