# Copyright 2025 The HuggingFace Inc. team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""
Adapted from
https://github.com/huggingface/transformers/blob/c409cd81777fb27aadc043ed3d8339dbc020fb3b/src/transformers/integrations/bitsandbytes.py
"""

import inspect
from inspect import signature

from ...utils import is_accelerate_available, is_bitsandbytes_available, is_torch_available, logging
from ..quantization_config import QuantizationMethod


if is_torch_available():
    import torch
    import torch.nn as nn

if is_bitsandbytes_available():
    import bitsandbytes as bnb

if is_accelerate_available():
    import accelerate
    from accelerate import init_empty_weights
    from accelerate.hooks import add_hook_to_module, remove_hook_from_module

logger = logging.get_logger(__name__)


def _replace_with_bnb_linear(
    model,
    modules_to_not_convert=None,
    current_key_name=None,
    quantization_config=None,
    has_been_replaced=False,
):
    """
    Private method that wraps the recursion for module replacement.

    Returns the converted model and a boolean that indicates if the conversion has been successful or not.
    """
    for name, module in model.named_children():
        if current_key_name is None:
            current_key_name = []
        current_key_name.append(name)

        if isinstance(module, nn.Linear) and name not in modules_to_not_convert:
            # Check if the current key is not in the `modules_to_not_convert`
            current_key_name_str = ".".join(current_key_name)
            if not any(
                (key + "." in current_key_name_str) or (key == current_key_name_str) for key in modules_to_not_convert
            ):
                with init_empty_weights():
                    in_features = module.in_features
                    out_features = module.out_features

                    if quantization_config.quantization_method() == "llm_int8":
                        model._modules[name] = bnb.nn.Linear8bitLt(
                            in_features,
                            out_features,
                            module.bias is not None,
                            has_fp16_weights=quantization_config.llm_int8_has_fp16_weight,
                            threshold=quantization_config.llm_int8_threshold,
                        )
                        has_been_replaced = True
                    else:
                        if (
                            quantization_config.llm_int8_skip_modules is not None
                            and name in quantization_config.llm_int8_skip_modules
                        ):
                            pass
                        else:
                            extra_kwargs = (
                                {"quant_storage": quantization_config.bnb_4bit_quant_storage}
                                if "quant_storage" in list(signature(bnb.nn.Linear4bit).parameters)
                                else {}
                            )
                            model._modules[name] = bnb.nn.Linear4bit(
                                in_features,
                                out_features,
                                module.bias is not None,
                                quantization_config.bnb_4bit_compute_dtype,
                                compress_statistics=quantization_config.bnb_4bit_use_double_quant,
                                quant_type=quantization_config.bnb_4bit_quant_type,
                                **extra_kwargs,
                            )
                            has_been_replaced = True
                    # Store the module class in case we need to transpose the weight later
                    model._modules[name].source_cls = type(module)
                    # Force requires grad to False to avoid unexpected errors
                    model._modules[name].requires_grad_(False)
        if len(list(module.children())) > 0:
            _, has_been_replaced = _replace_with_bnb_linear(
                module,
                modules_to_not_convert,
                current_key_name,
                quantization_config,
                has_been_replaced=has_been_replaced,
            )
        # Remove the last key for recursion
        current_key_name.pop(-1)
    return model, has_been_replaced


def replace_with_bnb_linear(model, modules_to_not_convert=None, current_key_name=None, quantization_config=None):
    """
    Helper function to replace the `nn.Linear` layers within `model` with either `bnb.nn.Linear8bit` or
    `bnb.nn.Linear4bit` using the `bitsandbytes` library.

    References:
        * `bnb.nn.Linear8bit`: [LLM.int8(): 8-bit Matrix Multiplication for Transformers at
          Scale](https://huggingface.co/papers/2208.07339)
        * `bnb.nn.Linear4bit`: [QLoRA: Efficient Finetuning of Quantized
          LLMs](https://huggingface.co/papers/2305.14314)

    Parameters:
        model (`torch.nn.Module`):
            Input model or `torch.nn.Module` as the function is run recursively.
        modules_to_not_convert (`list[`str`]`, *optional*, defaults to `[]`):
            Names of the modules to not convert in `Linear8bitLt`. In practice we keep the `modules_to_not_convert` in
            full precision for numerical stability reasons.
        current_key_name (`list[`str`]`, *optional*):
            An array to track the current key of the recursion. This is used to check whether the current key (part of
            it) is not in the list of modules to not convert (for instances modules that are offloaded to `cpu` or
            `disk`).
        quantization_config ('transformers.utils.quantization_config.BitsAndBytesConfig'):
            To configure and manage settings related to quantization, a technique used to compress neural network
            models by reducing the precision of the weights and activations, thus making models more efficient in terms
            of both storage and computation.
    """
    model, _ = _replace_with_bnb_linear(model, modules_to_not_convert, current_key_name, quantization_config)

    has_been_replaced = any(
        isinstance(replaced_module, (bnb.nn.Linear4bit, bnb.nn.Linear8bitLt))
        for _, replaced_module in model.named_modules()
    )
    if not has_been_replaced:
        logger.warning(
            "You are loading your model in 8bit or 4bit but no linear modules were found in your model."
            " Please double check your model architecture, or submit an issue on github if you think this is"
            " a bug."
        )

    return model


# Adapted from PEFT: https://github.com/huggingface/peft/blob/6d458b300fc2ed82e19f796b53af4c97d03ea604/src/peft/utils/integrations.py#L81
def dequantize_bnb_weight(weight: "torch.nn.Parameter", state=None, dtype: "torch.dtype" = None):
    """
    Helper function to dequantize 4bit or 8bit bnb weights.

    If the weight is not a bnb quantized weight, it will be returned as is.
    """
    if not isinstance(weight, torch.nn.Parameter):
        raise TypeError(f"Input weight should be of type nn.Parameter, got {type(weight)} instead")

    cls_name = weight.__class__.__name__
    if cls_name not in ("Params4bit", "Int8Params"):
        return weight

    if cls_name == "Params4bit":
        output_tensor = bnb.functional.dequantize_4bit(weight.data, weight.quant_state)
        msg = f"The model is going to be dequantized in {output_tensor.dtype} - if you want to upcast it to another dtype, make sure to pass the desired dtype when quantizing the model through `bnb_4bit_quant_type` argument of `BitsAndBytesConfig`"
        if dtype:
            msg = f"The model is going to be first dequantized in {output_tensor.dtype} and type-casted to {dtype}"
            output_tensor = output_tensor.to(dtype)
        logger.warning_once(msg)
        return output_tensor

    if state.SCB is None:
        state.SCB = weight.SCB

    if hasattr(bnb.functional, "int8_vectorwise_dequant"):
        # Use bitsandbytes API if available (requires v0.45.0+)
        dequantized = bnb.functional.int8_vectorwise_dequant(weight.data, state.SCB)
    else:
        # Multiply by (scale/127) to dequantize.
        dequantized = weight.data * state.SCB.view(-1, 1) * 7.874015718698502e-3

    if dtype:
        dequantized = dequantized.to(dtype)
    return dequantized


def _create_accelerate_new_hook(old_hook):
    r"""
    Creates a new hook based on the old hook. Use it only if you know what you are doing ! This method is a copy of:
    https://github.com/huggingface/peft/blob/748f7968f3a31ec06a1c2b0328993319ad9a150a/src/peft/utils/other.py#L245 with
    some changes
    """
    old_hook_cls = getattr(accelerate.hooks, old_hook.__class__.__name__)
    old_hook_attr = old_hook.__dict__
    filtered_old_hook_attr = {}
    old_hook_init_signature = inspect.signature(old_hook_cls.__init__)
    for k in old_hook_attr.keys():
        if k in old_hook_init_signature.parameters:
            filtered_old_hook_attr[k] = old_hook_attr[k]
    new_hook = old_hook_cls(**filtered_old_hook_attr)
    return new_hook


def _dequantize_and_replace(
    model,
    dtype,
    modules_to_not_convert=None,
    current_key_name=None,
    quantization_config=None,
    has_been_replaced=False,
):
    """
    Converts a quantized model into its dequantized original version. The newly converted model will have some
    performance drop compared to the original model before quantization - use it only for specific usecases such as
    QLoRA adapters merging.

    Returns the converted model and a boolean that indicates if the conversion has been successful or not.
    """
    quant_method = quantization_config.quantization_method()

    target_cls = bnb.nn.Linear8bitLt if quant_method == "llm_int8" else bnb.nn.Linear4bit

    for name, module in model.named_children():
        if current_key_name is None:
            current_key_name = []
        current_key_name.append(name)

        if isinstance(module, target_cls) and name not in modules_to_not_convert:
            # Check if the current key is not in the `modules_to_not_convert`
            current_key_name_str = ".".join(current_key_name)

            if not any(
                (key + "." in current_key_name_str) or (key == current_key_name_str) for key in modules_to_not_convert
            ):
                bias = getattr(module, "bias", None)

                device = module.weight.device
                with init_empty_weights():
                    new_module = torch.nn.Linear(module.in_features, module.out_features, bias=bias is not None)

                if quant_method == "llm_int8":
                    state = module.state
                else:
                    state = None

                new_module.weight = torch.nn.Parameter(dequantize_bnb_weight(module.weight, state, dtype))

                if bias is not None:
                    new_module.bias = bias

                # Create a new hook and attach it in case we use accelerate
                if hasattr(module, "_hf_hook"):
                    old_hook = module._hf_hook
                    new_hook = _create_accelerate_new_hook(old_hook)

                    remove_hook_from_module(module)
                    add_hook_to_module(new_module, new_hook)

                new_module.to(device)
                model._modules[name] = new_module
                has_been_replaced = True
        if len(list(module.children())) > 0:
            _, has_been_replaced = _dequantize_and_replace(
                module,
                dtype=dtype,
                modules_to_not_convert=modules_to_not_convert,
                current_key_name=current_key_name,
                quantization_config=quantization_config,
                has_been_replaced=has_been_replaced,
            )
        # Remove the last key for recursion
        current_key_name.pop(-1)
    return model, has_been_replaced


def dequantize_and_replace(
    model,
    modules_to_not_convert=None,
    quantization_config=None,
):
    model, _ = _dequantize_and_replace(
        model,
        dtype=model.dtype,
        modules_to_not_convert=modules_to_not_convert,
        quantization_config=quantization_config,
    )
    has_been_replaced = any(
        isinstance(replaced_module, torch.nn.Linear) for _, replaced_module in model.named_modules()
    )
    if not has_been_replaced:
        logger.warning(
            "Some linear modules were not dequantized. This could lead to unexpected behaviour. Please check your model."
        )

    return model


def _check_bnb_status(module) -> bool | bool:
    is_loaded_in_4bit_bnb = (
        hasattr(module, "is_loaded_in_4bit")
        and module.is_loaded_in_4bit
        and getattr(module, "quantization_method", None) == QuantizationMethod.BITS_AND_BYTES
    )
    is_loaded_in_8bit_bnb = (
        hasattr(module, "is_loaded_in_8bit")
        and module.is_loaded_in_8bit
        and getattr(module, "quantization_method", None) == QuantizationMethod.BITS_AND_BYTES
    )
    return is_loaded_in_4bit_bnb or is_loaded_in_8bit_bnb, is_loaded_in_4bit_bnb, is_loaded_in_8bit_bnb


if is_bitsandbytes_available():

    class _OffloadSafeQuantState(bnb.functional.QuantState):
        r"""
        A bitsandbytes 4-bit `QuantState` whose statistics survive offloading. [`make_bnb_offload_safe`] swaps the class
        of existing states in place, so that every holder of a state (the `Params4bit`, its module, the copies
        accelerate keeps in its weights map) sees the change.

        - `Params4bit.to("meta")` moves its *shared* `QuantState` to the meta device in place. accelerate's offload
          hooks do exactly that after every forward pass, and they can only restore the packed weight afterwards, not
          the 4-bit statistics (`absmax`, `code` and, with double quantization, `offset` and the nested state). Here
          `to("meta")` keeps the statistics, on the CPU.
        - On CPU, bitsandbytes repacks a 4-bit weight and rewrites its `QuantState` in place on first use
          (`_convert_weight_packed_for_cpu`). The hooks then restore the original weight against the rewritten state.
          Here `to("meta")` also brings the state back to the layout of the stored weight, so that the next forward
          pass repacks it again, exactly as the first one did.
        - `_convert_weight_packed_for_cpu_inverse` (run by `Linear4bit._save_to_state_dict`) only approximately
          recovers the statistics: it re-quantizes a double-quantized `absmax` and leaves a single-quantized one
          transposed. Here the exact statistics are put back, so that `state_dict()` returns the real ones.
        """

        def _save_offload_statistics(self):
            state2 = self.state2 if self.nested else None
            self.__dict__["_offload_statistics"] = {
                "absmax": self.absmax.to("cpu"),
                "code": self.code.to("cpu"),
                "dtype": self.dtype,
                "nested": self.nested,
                "offset": self.offset.to("cpu") if self.nested else None,
                "state2": state2,
                "state2_absmax": state2.absmax.to("cpu") if state2 is not None else None,
                "state2_code": state2.code.to("cpu") if state2 is not None else None,
                # Statistics taken after a CPU repacking are re-derived from it, not the ones the weight was quantized
                # with.
                "exact": not hasattr(self, "original_qshape"),
            }

        def _restore_offload_statistics(self):
            statistics = self.__dict__["_offload_statistics"]
            # Assign through `__dict__` so that `__setattr__` below is not triggered again.
            for name in ("absmax", "code", "dtype", "nested", "offset", "state2"):
                self.__dict__[name] = statistics[name]
            if statistics["state2"] is not None:
                statistics["state2"].absmax = statistics["state2_absmax"]
                statistics["state2"].code = statistics["state2_code"]
            self.__dict__["packing_format_for_cpu"] = False

        def to(self, device):
            if device is not None and torch.device(device).type == "meta":
                self._restore_offload_statistics()
            else:
                super().to(device)

        def __setattr__(self, name, value):
            super().__setattr__(name, value)
            if name == "packing_format_for_cpu" and not value and "_offload_statistics" in self.__dict__:
                self._restore_offload_statistics()


def _quant_state_tensors(state):
    tensors = [state.absmax, state.code]
    if getattr(state, "nested", False):
        tensors += [state.offset, state.state2.absmax, state.state2.code]
    return tensors


def make_bnb_offload_safe(model: "torch.nn.Module") -> int:
    r"""
    Makes the quantization statistics of the bitsandbytes 4-bit weights of `model` survive accelerate's offload hooks:
    `enable_sequential_cpu_offload()`, `accelerate.cpu_offload` and `accelerate.dispatch_model` with "cpu" or "disk"
    entries in the device map. Without it, those hooks move the statistics to the meta device together with the
    weights, and the next forward pass fails with "Cannot copy out of meta tensor; no data!", `state_dict()` with
    "Tensor.item() cannot be called on meta tensors".

    Call it before the model is offloaded. Models without bitsandbytes 4-bit weights are left untouched; 8-bit weights
    need nothing, accelerate restores their statistics itself. Calling it again is safe.

    Called before the first forward pass on the CPU, it also keeps the exact statistics through bitsandbytes' repacking
    of the weights for its CPU kernels, so that `save_pretrained` saves them.

    Args:
        model (`torch.nn.Module`):
            The model, for example a transformers or diffusers model quantized with bitsandbytes in 4-bit.

    Returns:
        `int`: The number of 4-bit weights whose quantization statistics are now safe.

    Example:

    ```py
    >>> from accelerate import dispatch_model
    >>> from diffusers.quantizers.bitsandbytes import make_bnb_offload_safe

    >>> make_bnb_offload_safe(model)
    >>> model = dispatch_model(model, device_map=device_map, offload_dir="offload")
    ```
    """
    if not is_bitsandbytes_available():
        return 0

    weights = []
    lost = []
    for module_name, module in model.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if not isinstance(param, bnb.nn.Params4bit) or param.quant_state is None:
                continue
            name = f"{module_name}.{param_name}" if module_name else param_name
            if any(tensor.device.type == "meta" for tensor in _quant_state_tensors(param.quant_state)):
                lost.append(name)
            weights.append((param, name))

    if lost:
        raise ValueError(
            f"The bitsandbytes 4-bit quantization statistics of {len(lost)} weight(s) ({', '.join(lost[:3])}"
            f"{', ...' if len(lost) > 3 else ''}) are on the meta device: an offload hook (sequential CPU offloading, "
            "or a `device_map` with 'cpu' or 'disk' entries) destroyed them before `make_bnb_offload_safe` ran, and "
            "they cannot be recovered. Reload the model and call `make_bnb_offload_safe` before offloading it, or use "
            "`enable_model_cpu_offload()` or group offloading, which keep the real data."
        )

    for param, name in weights:
        # PEFT's 4-bit merge writes `requires_grad` into the `__dict__` of the weight it merges into, which accelerate
        # passes to `Params4bit` besides its own `requires_grad` when its hooks rebuild the weight ("got multiple
        # values for keyword argument 'requires_grad'"): the weight PEFT unmerges back to still has it.
        param.__dict__.pop("requires_grad", None)
        state = param.quant_state
        if type(state) not in (bnb.functional.QuantState, _OffloadSafeQuantState):
            raise TypeError(
                f"Cannot make the quantization state of {name} offload-safe: unsupported class {type(state).__name__}."
            )
        packed_for_cpu = getattr(state, "packing_format_for_cpu", False)
        if packed_for_cpu and not hasattr(bnb.functional, "_convert_weight_packed_for_cpu_inverse"):
            raise RuntimeError(
                f"{name} has been repacked for bitsandbytes' CPU kernels, and this version of bitsandbytes cannot "
                "unpack it. Make the model offload-safe before running it on the CPU."
            )

        if type(state) is bnb.functional.QuantState:
            if packed_for_cpu:
                # The statistics of the stored layout are only approximately recoverable: keep the ones the repacked
                # weight computes with, single-quantized like bitsandbytes' CPU path, so that outputs stay the same.
                absmax = state.absmax.T.reshape(-1).to(torch.float32)
                param.data, _ = bnb.functional._convert_weight_packed_for_cpu_inverse(param.data, state)
                state.__dict__.update(absmax=absmax, nested=False, offset=None, state2=None)
            state.__class__ = _OffloadSafeQuantState
            state._save_offload_statistics()
        elif packed_for_cpu:
            # `_OffloadSafeQuantState.__setattr__` puts the exact statistics back.
            param.data, _ = bnb.functional._convert_weight_packed_for_cpu_inverse(param.data, state)

    return len(weights)


def _raise_if_bnb_4bit_statistics_rederived(model: "torch.nn.Module", model_name: str):
    r"""
    Raises if `model.state_dict()` would return bitsandbytes 4-bit quantization statistics re-derived from a weight
    repacked for bitsandbytes' CPU kernels, instead of the statistics the weight was quantized with. A checkpoint saved
    with them computes different outputs.
    """
    if not is_bitsandbytes_available():
        return

    rederived = []
    for name, param in model.named_parameters():
        if not isinstance(param, bnb.nn.Params4bit) or param.quant_state is None:
            continue
        if isinstance(param.quant_state, _OffloadSafeQuantState):
            # It keeps the exact statistics through the repacking, unless it took them from a repacked weight.
            if not param.quant_state.__dict__["_offload_statistics"]["exact"]:
                rederived.append(name)
            continue
        # `_convert_weight_packed_for_cpu` records the layout it repacks from, and its inverse keeps the record.
        if hasattr(param.quant_state, "original_qshape"):
            rederived.append(name)

    if rederived:
        raise ValueError(
            f"Cannot save {model_name}: the bitsandbytes 4-bit quantization statistics of {len(rederived)} weight(s) "
            f"({', '.join(rederived[:3])}{', ...' if len(rederived) > 3 else ''}) are no longer the ones they were "
            "quantized with. A forward pass on the CPU repacked the weights for bitsandbytes' CPU kernels, which "
            "rewrites their statistics in place, and bitsandbytes only approximately recovers them when saving: the "
            "saved model would compute different outputs. Save the model before running it on the CPU, or load it "
            "again from its checkpoint and save it before its first forward pass."
        )
