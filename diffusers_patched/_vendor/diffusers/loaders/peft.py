# coding=utf-8
# Copyright 2025 The HuggingFace Inc. team.
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
import inspect
import json
import os
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Literal

import safetensors
import torch

from ..hooks.group_offloading import _without_group_offloading
from ..utils import (
    MIN_PEFT_VERSION,
    USE_PEFT_BACKEND,
    check_peft_version,
    convert_sai_sd_control_lora_state_dict_to_peft,
    convert_unet_state_dict_to_peft,
    delete_adapter_layers,
    get_adapter_name,
    is_optimum_quanto_available,
    is_peft_available,
    logging,
    set_adapter_layers,
    set_weights_and_activate_adapters,
)
from ..utils.peft_utils import (
    _create_lokr_config,
    _create_lora_config,
    _maybe_fuse_qkv_projections_for_lokr,
    _maybe_warn_for_unhandled_keys,
)
from .lora_base import _fetch_state_dict, _func_optionally_disable_offloading
from .unet_loader_utils import _maybe_expand_lora_scales


logger = logging.get_logger(__name__)


def _maybe_align_adapter_with_layerwise_casting(model, adapter_name):
    # `enable_layerwise_casting()` leaves the PEFT layers in their dtype and stops PEFT from casting their inputs to
    # the weight dtype, but only for the layers that exist when it is called. PEFT creates the layers of an adapter
    # loaded afterwards in the dtype of their base layer's weight, the storage dtype, which no hook upcasts (float8
    # has no matmul on the CPU). Give them what they get when the adapter is loaded first; returns whether any layer
    # needed it.
    from peft.tuners.tuners_utils import BaseTunerLayer

    from ..hooks import HookRegistry
    from ..hooks.layerwise_casting import (
        _LAYERWISE_CASTING_HOOK,
        _PEFT_AUTOCAST_DISABLE_HOOK,
        PeftInputAutocastDisableHook,
    )

    aligned = False
    for module in model.modules():
        if not isinstance(module, BaseTunerLayer):
            continue
        base_registry = getattr(module.get_base_layer(), "_diffusers_hook", None)
        casting_hook = None if base_registry is None else base_registry.get_hook(_LAYERWISE_CASTING_HOOK)
        if casting_hook is None:
            continue
        for layer_name in module.adapter_layer_names:
            adapter_layers = getattr(module, layer_name)
            if adapter_name not in adapter_layers:
                continue
            layer = adapter_layers[adapter_name]
            for param in layer.parameters() if isinstance(layer, torch.nn.Module) else (layer,):
                param.data = param.data.to(casting_hook.compute_dtype)
        registry = HookRegistry.check_if_exists_or_initialize(module)
        if registry.get_hook(_PEFT_AUTOCAST_DISABLE_HOOK) is None:
            registry.register_hook(PeftInputAutocastDisableHook(), _PEFT_AUTOCAST_DISABLE_HOOK)
        aligned = True
    return aligned


_SET_ADAPTER_SCALE_FN_MAPPING = defaultdict(
    lambda: (lambda model_cls, weights: weights),
    {
        "UNet2DConditionModel": _maybe_expand_lora_scales,
        "UNetMotionModel": _maybe_expand_lora_scales,
    },
)


def _is_quanto_tensor(tensor):
    if not is_optimum_quanto_available():
        return False
    # optimum-quanto imports diffusers: imported here to avoid a circular import.
    from optimum.quanto import QTensor

    return isinstance(tensor, QTensor)


def _maybe_dequantize_quanto_base_weight(module):
    # PEFT would add the delta to the `.data` of a quanto tensor, which changes nothing the layer computes with. The
    # LoRA is fused into the dequantized weight, which the layer quantizes as before at every call. The quantized weight
    # is kept, out of the state dict, for unfusing.
    base_layer = module.get_base_layer()
    if _is_quanto_tensor(base_layer.weight):
        module.__dict__["_quantized_base_weight"] = base_layer.weight
        base_layer.weight = torch.nn.Parameter(base_layer.weight.dequantize(), requires_grad=False)


def _maybe_keep_quantized_base_weight(module):
    # PEFT fuses into a torchao or bitsandbytes 4-bit weight by dequantizing it, adding the delta and quantizing the sum,
    # and unfuses the same way: each round trip moves the weight by up to a quantization step of the fused weight, and
    # the moves add up. The quantized weight is kept, out of the state dict, for unfusing.
    from ..hooks.group_offloading import _is_torchao_tensor

    weight = getattr(module.get_base_layer(), "weight", None)
    if _is_torchao_tensor(weight) or weight.__class__.__name__ == "Params4bit":
        module.__dict__.setdefault("_quantized_base_weight", weight)


def _warn_if_quantization_rounds_the_lora_away(model):
    # A quanto or torchao layer computes with the fused weight quantized again. The weight it was fused into holds
    # quantized values already, so a change smaller than the quantization step rounds back to them: the fused weights
    # miss the LoRA's change by that much, over every layer fused into. Called while offloaded weights are onloaded.
    from peft.tuners.tuners_utils import BaseTunerLayer

    from ..hooks.group_offloading import _is_torchao_tensor

    missed = fused = 0.0
    for module in model.modules():
        if not isinstance(module, BaseTunerLayer) or not module.merged:
            continue
        quantized_base_weight = module.__dict__.get("_quantized_base_weight")
        base_layer = module.get_base_layer()
        if _is_quanto_tensor(quantized_base_weight):
            weight = base_layer.qweight.dequantize()
        elif _is_torchao_tensor(quantized_base_weight):
            weight = base_layer.weight.dequantize()
        else:
            continue
        change = sum(module.get_delta_weight(adapter).float() for adapter in module.merged_adapters)
        kept = weight.float() - quantized_base_weight.dequantize().float()
        missed += (kept - change).pow(2).sum().item()
        fused += change.pow(2).sum().item()
    if fused == 0:
        return
    error = (missed / fused) ** 0.5
    logger.info(f"The quantized weights the LoRA was fused into differ from its change by {error:.0%} of it.")
    if error > 0.5:
        logger.warning(
            f"The quantized weights the LoRA was fused into differ from its change by {error:.0%} of it: quantizing "
            "the fused weights again moves them by up to a quantization step, more than this LoRA changes them. Use "
            "the LoRA without fusing it, or fuse it into the model before quantizing it."
        )


def _merge_lora_layer(module, **merge_kwargs):
    # PEFT's torchao LoRA layer drops its weight after merging the first of several adapters in one call
    # ("UnboundLocalError: cannot access local variable 'weight'", peft#3728): it merges one adapter per call.
    from peft.tuners.tuners_utils import check_adapters_to_merge

    if type(module).__name__ != "TorchaoLoraLinear":
        module.merge(**merge_kwargs)
        return
    for adapter_name in check_adapters_to_merge(module, merge_kwargs.pop("adapter_names", None)):
        module.merge(adapter_names=[adapter_name], **merge_kwargs)


def _maybe_restore_quantized_base_weight(module):
    # Puts back, bit for bit, the quantized weight a LoRA was fused into once no adapter is fused into it anymore.
    if not module.merged and "_quantized_base_weight" in module.__dict__:
        base_layer = module.get_base_layer()
        weight = module.__dict__.pop("_quantized_base_weight")
        if getattr(weight, "bnb_quantized", True) is False:
            # PEFT's bitsandbytes merge builds the fused weight from the `__dict__` of the weight it dequantized, marking
            # that one as not quantized, which it still is, and giving the layer the fused weight's quantization state.
            weight.bnb_quantized = True
            base_layer.quant_state = weight.quant_state
        if weight.device != base_layer.weight.device:
            weight = weight.to(base_layer.weight.device)
        if not isinstance(weight, torch.nn.Parameter):
            # Removing accelerate's offload hooks (to fuse into the weights they keep) puts a TorchAO weight back as a
            # tensor, which the layer cannot hold as its `weight` parameter.
            weight = torch.nn.Parameter(weight, requires_grad=False)
        base_layer.weight = weight


class PeftAdapterMixin:
    """
    A class containing all functions for loading and using adapters weights that are supported in PEFT library. For
    more details about adapters and injecting them in a base model, check out the PEFT
    [documentation](https://huggingface.co/docs/peft/index).

    Install the latest version of PEFT, and use this mixin to:

    - Attach new adapters in the model.
    - Attach multiple adapters and iteratively activate/deactivate them.
    - Activate/deactivate all adapters from the model.
    - Get a list of the active adapters.
    """

    _hf_peft_config_loaded = False
    # kwargs for prepare_model_for_compiled_hotswap, if required
    _prepare_lora_hotswap_kwargs: dict | None = None

    @classmethod
    # Copied from diffusers.loaders.lora_base.LoraBaseMixin._optionally_disable_offloading
    def _optionally_disable_offloading(cls, _pipeline):
        return _func_optionally_disable_offloading(_pipeline=_pipeline)

    def load_lora_adapter(
        self, pretrained_model_name_or_path_or_dict, prefix="transformer", hotswap: bool = False, **kwargs
    ):
        r"""
        Loads a LoRA adapter into the underlying model.

        Parameters:
            pretrained_model_name_or_path_or_dict (`str` or `os.PathLike` or `dict`):
                Can be either:

                    - A string, the *model id* (for example `google/ddpm-celebahq-256`) of a pretrained model hosted on
                      the Hub.
                    - A path to a *directory* (for example `./my_model_directory`) containing the model weights saved
                      with [`ModelMixin.save_pretrained`].
                    - A [torch state
                      dict](https://pytorch.org/tutorials/beginner/saving_loading_models.html#what-is-a-state-dict).

            prefix (`str`, *optional*): Prefix to filter the state dict.

            cache_dir (`str | os.PathLike`, *optional*):
                Path to a directory where a downloaded pretrained model configuration is cached if the standard cache
                is not used.
            force_download (`bool`, *optional*, defaults to `False`):
                Whether or not to force the (re-)download of the model weights and configuration files, overriding the
                cached versions if they exist.
            proxies (`dict[str, str]`, *optional*):
                A dictionary of proxy servers to use by protocol or endpoint, for example, `{'http': 'foo.bar:3128',
                'http://hostname': 'foo.bar:4012'}`. The proxies are used on each request.
            local_files_only (`bool`, *optional*, defaults to `False`):
                Whether to only load local model weights and configuration files or not. If set to `True`, the model
                won't be downloaded from the Hub.
            token (`str` or *bool*, *optional*):
                The token to use as HTTP bearer authorization for remote files. If `True`, the token generated from
                `diffusers-cli login` (stored in `~/.huggingface`) is used.
            revision (`str`, *optional*, defaults to `"main"`):
                The specific model version to use. It can be a branch name, a tag name, a commit id, or any identifier
                allowed by Git.
            subfolder (`str`, *optional*, defaults to `""`):
                The subfolder location of a model file within a larger model repository on the Hub or locally.
            network_alphas (`dict[str, float]`):
                The value of the network alpha used for stable learning and preventing underflow. This value has the
                same meaning as the `--network_alpha` option in the kohya-ss trainer script. Refer to [this
                link](https://github.com/darkstorm2150/sd-scripts/blob/main/docs/train_network_README-en.md#execute-learning).
            low_cpu_mem_usage (`bool`, *optional*):
                Speed up model loading by only loading the pretrained LoRA weights and not initializing the random
                weights.
            hotswap : (`bool`, *optional*)
                Defaults to `False`. Whether to substitute an existing (LoRA) adapter with the newly loaded adapter
                in-place. This means that, instead of loading an additional adapter, this will take the existing
                adapter weights and replace them with the weights of the new adapter. This can be faster and more
                memory efficient. However, the main advantage of hotswapping is that when the model is compiled with
                torch.compile, loading the new adapter does not require recompilation of the model. When using
                hotswapping, the passed `adapter_name` should be the name of an already loaded adapter.

                If the new adapter and the old adapter have different ranks and/or LoRA alphas (i.e. scaling), you need
                to call an additional method before loading the adapter:

                ```py
                pipeline = ...  # load diffusers pipeline
                max_rank = ...  # the highest rank among all LoRAs that you want to load
                # call *before* compiling and loading the LoRA adapter
                pipeline.enable_lora_hotswap(target_rank=max_rank)
                pipeline.load_lora_weights(file_name)
                # optionally compile the model now
                ```

                Note that hotswapping adapters of the text encoder is not yet supported. There are some further
                limitations to this technique, which are documented here:
                https://huggingface.co/docs/peft/main/en/package_reference/hotswap
            metadata:
                LoRA adapter metadata. When supplied, the metadata inferred through the state dict isn't used to
                initialize `LoraConfig`.
        """
        from peft import inject_adapter_in_model, set_peft_model_state_dict
        from peft.tuners.tuners_utils import BaseTunerLayer

        from ..hooks.group_offloading import _maybe_remove_and_reapply_group_offloading
        from ..hooks.tensor_parallel import _raise_if_tensor_parallel

        # `_tp_plan` covers the base `Linear` layers only, so the injected adapter weights would stay unsharded
        # and the sharded base layer would be added to a full-sized adapter output.
        _raise_if_tensor_parallel(
            self,
            "have a LoRA adapter loaded",
            "The adapter layers are not covered by the model's `_tp_plan`. Load the adapter before sharding the "
            "model.",
        )

        cache_dir = kwargs.pop("cache_dir", None)
        force_download = kwargs.pop("force_download", False)
        proxies = kwargs.pop("proxies", None)
        local_files_only = kwargs.pop("local_files_only", None)
        token = kwargs.pop("token", None)
        revision = kwargs.pop("revision", None)
        subfolder = kwargs.pop("subfolder", None)
        weight_name = kwargs.pop("weight_name", None)
        use_safetensors = kwargs.pop("use_safetensors", None)
        adapter_name = kwargs.pop("adapter_name", None)
        network_alphas = kwargs.pop("network_alphas", None)
        _pipeline = kwargs.pop("_pipeline", None)
        low_cpu_mem_usage = kwargs.pop("low_cpu_mem_usage", False)
        metadata = kwargs.pop("metadata", None)
        allow_pickle = False

        user_agent = {"file_type": "attn_procs_weights", "framework": "pytorch"}
        state_dict, metadata = _fetch_state_dict(
            pretrained_model_name_or_path_or_dict=pretrained_model_name_or_path_or_dict,
            weight_name=weight_name,
            use_safetensors=use_safetensors,
            local_files_only=local_files_only,
            cache_dir=cache_dir,
            force_download=force_download,
            proxies=proxies,
            token=token,
            revision=revision,
            subfolder=subfolder,
            user_agent=user_agent,
            allow_pickle=allow_pickle,
            metadata=metadata,
        )
        if network_alphas is not None and prefix is None:
            raise ValueError("`network_alphas` cannot be None when `prefix` is None.")
        if network_alphas and metadata:
            raise ValueError("Both `network_alphas` and `metadata` cannot be specified.")

        if prefix is not None:
            state_dict = {k.removeprefix(f"{prefix}."): v for k, v in state_dict.items() if k.startswith(f"{prefix}.")}
            if metadata is not None:
                metadata = {k.removeprefix(f"{prefix}."): v for k, v in metadata.items() if k.startswith(f"{prefix}.")}

        if len(state_dict) > 0:
            if adapter_name in getattr(self, "peft_config", {}) and not hotswap:
                raise ValueError(
                    f"Adapter name {adapter_name} already in use in the model - please select a new adapter name."
                )
            elif adapter_name not in getattr(self, "peft_config", {}) and hotswap:
                raise ValueError(
                    f"Trying to hotswap LoRA adapter '{adapter_name}' but there is no existing adapter by that name. "
                    "Please choose an existing adapter name or set `hotswap=False` to prevent hotswapping."
                )

            if adapter_name is None:
                adapter_name = get_adapter_name(self)

            # LoKr adapters (Kronecker product factors) use a different peft config and state dict layout
            # (`{module}.lokr_w1` etc.) than LoRA; detect them before any LoRA-specific key handling.
            is_lokr = any(".lokr_" in k for k in state_dict)

            if is_lokr:
                if hotswap:
                    raise ValueError("Hotswapping LoKr adapters is not supported.")
                _maybe_fuse_qkv_projections_for_lokr(self, state_dict)
                adapter_config = _create_lokr_config(state_dict, metadata)
            else:
                # check with first key if is not in peft format
                first_key = next(iter(state_dict.keys()))
                if "lora_A" not in first_key:
                    state_dict = convert_unet_state_dict_to_peft(state_dict)

                # Control LoRA from SAI is different from BFL Control LoRA
                # https://huggingface.co/stabilityai/control-lora
                # https://huggingface.co/comfyanonymous/ControlNet-v1-1_fp16_safetensors
                is_sai_sd_control_lora = "lora_controlnet" in state_dict
                if is_sai_sd_control_lora:
                    state_dict = convert_sai_sd_control_lora_state_dict_to_peft(state_dict)

                rank = {}
                for key, val in state_dict.items():
                    # Cannot figure out rank from lora layers that don't have at least 2 dimensions.
                    # Bias layers in LoRA only have a single dimension
                    if "lora_B" in key and val.ndim > 1:
                        # Check out https://github.com/huggingface/peft/pull/2419 for the `^` symbol.
                        # We may run into some ambiguous configuration values when a model has module
                        # names, sharing a common prefix (`proj_out.weight` and `blocks.transformer.proj_out.weight`,
                        # for example) and they have different LoRA ranks.
                        rank[f"^{key}"] = val.shape[1]

                if network_alphas is not None and len(network_alphas) >= 1:
                    alpha_keys = [k for k in network_alphas.keys() if k.startswith(f"{prefix}.")]
                    network_alphas = {
                        k.removeprefix(f"{prefix}."): v for k, v in network_alphas.items() if k in alpha_keys
                    }

                # create LoraConfig
                adapter_config = _create_lora_config(
                    state_dict,
                    network_alphas,
                    metadata,
                    rank,
                    model_state_dict=self.state_dict(),
                    adapter_name=adapter_name,
                )

                # Adjust LoRA config for Control LoRA
                if is_sai_sd_control_lora:
                    adapter_config.lora_alpha = adapter_config.r
                    adapter_config.alpha_pattern = adapter_config.rank_pattern
                    adapter_config.bias = "all"
                    adapter_config.modules_to_save = adapter_config.exclude_modules
                    adapter_config.exclude_modules = None

            # <Unsafe code
            # We can be sure that the following works as it just sets attention processors, lora layers and puts all in the same dtype
            # Now we remove any existing hooks to `_pipeline`.

            # In case the pipeline has been already offloaded to CPU - temporarily remove the hooks
            # otherwise loading LoRA weights will lead to an error.
            is_model_cpu_offload, is_sequential_cpu_offload, is_group_offload = self._optionally_disable_offloading(
                _pipeline
            )
            peft_kwargs = {"low_cpu_mem_usage": low_cpu_mem_usage}

            if hotswap or (self._prepare_lora_hotswap_kwargs is not None):
                from peft.utils.hotswap import (
                    check_hotswap_configs_compatible,
                    hotswap_adapter_from_state_dict,
                    prepare_model_for_compiled_hotswap,
                )

            if hotswap:

                def map_state_dict_for_hotswap(sd):
                    # For hotswapping, we need the adapter name to be present in the state dict keys
                    new_sd = {}
                    for k, v in sd.items():
                        if k.endswith("lora_A.weight") or k.endswith("lora_B.weight"):
                            k = k[: -len(".weight")] + f".{adapter_name}.weight"
                        elif k.endswith("lora_B.bias"):  # lora_bias=True option
                            k = k[: -len(".bias")] + f".{adapter_name}.bias"
                        new_sd[k] = v
                    return new_sd

            # To handle scenarios where we cannot successfully set state dict. If it's unsuccessful,
            # we should also delete the `peft_config` associated to the `adapter_name`.
            try:
                if hotswap:
                    state_dict = map_state_dict_for_hotswap(state_dict)
                    check_hotswap_configs_compatible(self.peft_config[adapter_name], adapter_config)
                    try:
                        hotswap_adapter_from_state_dict(
                            model=self,
                            state_dict=state_dict,
                            adapter_name=adapter_name,
                            config=adapter_config,
                        )
                    except Exception as e:
                        logger.error(f"Hotswapping {adapter_name} was unsuccessful with the following error: \n{e}")
                        raise
                    # the hotswap function raises if there are incompatible keys, so if we reach this point we can set
                    # it to None
                    incompatible_keys = None
                else:
                    inject_adapter_in_model(
                        adapter_config, self, adapter_name=adapter_name, state_dict=state_dict, **peft_kwargs
                    )
                    incompatible_keys = set_peft_model_state_dict(self, state_dict, adapter_name, **peft_kwargs)
                    if _maybe_align_adapter_with_layerwise_casting(self, adapter_name):
                        # PEFT rounded the adapter's weights to the storage dtype: load them again.
                        set_peft_model_state_dict(self, state_dict, adapter_name)

                    if self._prepare_lora_hotswap_kwargs is not None:
                        # For hotswapping of compiled models or adapters with different ranks.
                        # If the user called enable_lora_hotswap, we need to ensure it is called:
                        # - after the first adapter was loaded
                        # - before the model is compiled and the 2nd adapter is being hotswapped in
                        # Therefore, it needs to be called here
                        prepare_model_for_compiled_hotswap(
                            self, config=adapter_config, **self._prepare_lora_hotswap_kwargs
                        )
                        # We only want to call prepare_model_for_compiled_hotswap once
                        self._prepare_lora_hotswap_kwargs = None

                # Set peft config loaded flag to True if module has been successfully injected and incompatible keys retrieved
                if not self._hf_peft_config_loaded:
                    self._hf_peft_config_loaded = True
            except Exception as e:
                # In case `inject_adapter_in_model()` was unsuccessful even before injecting the `peft_config`.
                if hasattr(self, "peft_config"):
                    for module in self.modules():
                        if isinstance(module, BaseTunerLayer):
                            active_adapters = module.active_adapters
                            for active_adapter in active_adapters:
                                if adapter_name in active_adapter:
                                    module.delete_adapter(adapter_name)

                    self.peft_config.pop(adapter_name)
                logger.error(f"Loading {adapter_name} was unsuccessful with the following error: \n{e}")
                raise

            _maybe_warn_for_unhandled_keys(incompatible_keys, adapter_name)

            # Offload back.
            if is_model_cpu_offload or is_sequential_cpu_offload:
                from .lora_base import _func_restore_offloading

                _func_restore_offloading(_pipeline)
            elif is_group_offload:
                for component in _pipeline.components.values():
                    if isinstance(component, torch.nn.Module):
                        _maybe_remove_and_reapply_group_offloading(component)
            # Unsafe code />

        if prefix is not None and not state_dict:
            model_class_name = self.__class__.__name__
            logger.warning(
                f"No LoRA keys associated to {model_class_name} found with the {prefix=}. "
                "This is safe to ignore if LoRA state dict didn't originally have any "
                f"{model_class_name} related params. You can also try specifying `prefix=None` "
                "to resolve the warning. Otherwise, open an issue if you think it's unexpected: "
                "https://github.com/huggingface/diffusers/issues/new"
            )

    def save_lora_adapter(
        self,
        save_directory,
        adapter_name: str = "default",
        upcast_before_saving: bool = False,
        safe_serialization: bool = True,
        weight_name: str | None = None,
    ):
        """
        Save the LoRA parameters corresponding to the underlying model.

        Arguments:
            save_directory (`str` or `os.PathLike`):
                Directory to save LoRA parameters to. Will be created if it doesn't exist.
            adapter_name: (`str`, defaults to "default"): The name of the adapter to serialize. Useful when the
                underlying model has multiple adapters loaded.
            upcast_before_saving (`bool`, defaults to `False`):
                Whether to cast the LoRA parameters to `torch.float32` before serialization.
            safe_serialization (`bool`, *optional*, defaults to `True`):
                Whether to save the model using `safetensors` or the traditional PyTorch way with `pickle`.
            weight_name: (`str`, *optional*, defaults to `None`): Name of the file to serialize the state dict with.
        """
        from peft.utils import get_peft_model_state_dict

        from ..models.modeling_utils import onload_offloaded_weights
        from .lora_base import LORA_ADAPTER_METADATA_KEY, LORA_WEIGHT_NAME, LORA_WEIGHT_NAME_SAFE

        if adapter_name is None:
            adapter_name = get_adapter_name(self)

        if adapter_name not in getattr(self, "peft_config", {}):
            raise ValueError(f"Adapter name {adapter_name} not found in the model.")

        lora_adapter_metadata = self.peft_config[adapter_name].to_dict()

        # Offloading keeps the LoRA layers' weights elsewhere (on the meta device, or in group offloading's files).
        with onload_offloaded_weights(self):
            # `self.to(dtype=...)` is refused for quantized models, and would cast the whole model: cast only the LoRA.
            lora_layers_to_save = get_peft_model_state_dict(self, adapter_name=adapter_name)
        if upcast_before_saving:
            lora_layers_to_save = {name: param.to(torch.float32) for name, param in lora_layers_to_save.items()}
        if os.path.isfile(save_directory):
            raise ValueError(f"Provided path ({save_directory}) should be a directory, not a file")

        if safe_serialization:

            def save_function(weights, filename):
                # Inject framework format.
                metadata = {"format": "pt"}
                if lora_adapter_metadata is not None:
                    for key, value in lora_adapter_metadata.items():
                        if isinstance(value, set):
                            lora_adapter_metadata[key] = list(value)
                    metadata[LORA_ADAPTER_METADATA_KEY] = json.dumps(lora_adapter_metadata, indent=2, sort_keys=True)

                return safetensors.torch.save_file(weights, filename, metadata=metadata)

        else:
            save_function = torch.save

        os.makedirs(save_directory, exist_ok=True)

        if weight_name is None:
            if safe_serialization:
                weight_name = LORA_WEIGHT_NAME_SAFE
            else:
                weight_name = LORA_WEIGHT_NAME

        save_path = Path(save_directory, weight_name).as_posix()
        save_function(lora_layers_to_save, save_path)
        logger.info(f"Model weights saved in {save_path}")

    def set_adapters(
        self,
        adapter_names: list[str] | str,
        weights: float | dict | list[float] | list[dict] | list[None] | None = None,
    ):
        """
        Set the currently active adapters for use in the diffusion network (e.g. unet, transformer, etc.).

        Args:
            adapter_names (`list[str]` or `str`):
                The names of the adapters to use.
            weights (`Union[List[float], float]`, *optional*):
                The adapter(s) weights to use with the UNet. If `None`, the weights are set to `1.0` for all the
                adapters.

        Example:

        ```py
        from diffusers import AutoPipelineForText2Image
        import torch

        pipeline = AutoPipelineForText2Image.from_pretrained(
            "stabilityai/stable-diffusion-xl-base-1.0", torch_dtype=torch.float16
        ).to("cuda")
        pipeline.load_lora_weights(
            "jbilcke-hf/sdxl-cinematic-1", weight_name="pytorch_lora_weights.safetensors", adapter_name="cinematic"
        )
        pipeline.load_lora_weights("nerijs/pixel-art-xl", weight_name="pixel-art-xl.safetensors", adapter_name="pixel")
        pipeline.unet.set_adapters(["cinematic", "pixel"], weights=[0.5, 0.5])
        ```
        """
        if not USE_PEFT_BACKEND:
            raise ValueError("PEFT backend is required for `set_adapters()`.")

        adapter_names = [adapter_names] if isinstance(adapter_names, str) else adapter_names

        # Expand weights into a list, one entry per adapter
        # examples for e.g. 2 adapters:  [{...}, 7] -> [7,7] ; None -> [None, None]
        if not isinstance(weights, list):
            weights = [weights] * len(adapter_names)

        if len(adapter_names) != len(weights):
            raise ValueError(
                f"Length of adapter names {len(adapter_names)} is not equal to the length of their weights {len(weights)}."
            )

        # Set None values to default of 1.0
        # e.g. [{...}, 7] -> [{...}, 7] ; [None, None] -> [1.0, 1.0]
        weights = [w if w is not None else 1.0 for w in weights]

        # e.g. [{...}, 7] -> [{expanded dict...}, 7]
        scale_expansion_fn = _SET_ADAPTER_SCALE_FN_MAPPING[self.__class__.__name__]
        weights = scale_expansion_fn(self, weights)

        set_weights_and_activate_adapters(self, adapter_names, weights)

    def add_adapter(self, adapter_config, adapter_name: str = "default") -> None:
        r"""
        Adds a new adapter to the current model for training. If no adapter name is passed, a default name is assigned
        to the adapter to follow the convention of the PEFT library.

        If you are not familiar with adapters and PEFT methods, we invite you to read more about them in the PEFT
        [documentation](https://huggingface.co/docs/peft).

        Args:
            adapter_config (`[~peft.PeftConfig]`):
                The configuration of the adapter to add; supported adapters are non-prefix tuning and adaption prompt
                methods.
            adapter_name (`str`, *optional*, defaults to `"default"`):
                The name of the adapter to add. If no name is passed, a default name is assigned to the adapter.
        """
        check_peft_version(min_version=MIN_PEFT_VERSION)

        if not is_peft_available():
            raise ImportError("PEFT is not available. Please install PEFT to use this function: `pip install peft`.")

        from peft import PeftConfig, inject_adapter_in_model

        if not self._hf_peft_config_loaded:
            self._hf_peft_config_loaded = True
        elif adapter_name in self.peft_config:
            raise ValueError(f"Adapter with name {adapter_name} already exists. Please use a different name.")

        if not isinstance(adapter_config, PeftConfig):
            raise ValueError(
                f"adapter_config should be an instance of PeftConfig. Got {type(adapter_config)} instead."
            )

        # Unlike transformers, here we don't need to retrieve the name_or_path of the unet as the loading logic is
        # handled by the `load_lora_layers` or `StableDiffusionLoraLoaderMixin`. Therefore we set it to `None` here.
        adapter_config.base_model_name_or_path = None
        inject_adapter_in_model(adapter_config, self, adapter_name)
        self.set_adapter(adapter_name)

    def set_adapter(self, adapter_name: str | list[str]) -> None:
        """
        Sets a specific adapter by forcing the model to only use that adapter and disables the other adapters.

        If you are not familiar with adapters and PEFT methods, we invite you to read more about them on the PEFT
        [documentation](https://huggingface.co/docs/peft).

        Args:
            adapter_name (str | list[str])):
                The list of adapters to set or the adapter name in the case of a single adapter.
        """
        check_peft_version(min_version=MIN_PEFT_VERSION)

        if not self._hf_peft_config_loaded:
            raise ValueError("No adapter loaded. Please load an adapter first.")

        if isinstance(adapter_name, str):
            adapter_name = [adapter_name]

        missing = set(adapter_name) - set(self.peft_config)
        if len(missing) > 0:
            raise ValueError(
                f"Following adapter(s) could not be found: {', '.join(missing)}. Make sure you are passing the correct adapter name(s)."
                f" current loaded adapters are: {list(self.peft_config.keys())}"
            )

        from peft.tuners.tuners_utils import BaseTunerLayer

        _adapters_has_been_set = False

        for _, module in self.named_modules():
            if isinstance(module, BaseTunerLayer):
                if hasattr(module, "set_adapter"):
                    module.set_adapter(adapter_name)
                # Previous versions of PEFT does not support multi-adapter inference
                elif not hasattr(module, "set_adapter") and len(adapter_name) != 1:
                    raise ValueError(
                        "You are trying to set multiple adapters and you have a PEFT version that does not support multi-adapter inference. Please upgrade to the latest version of PEFT."
                        " `pip install -U peft` or `pip install -U git+https://github.com/huggingface/peft.git`"
                    )
                else:
                    module.active_adapter = adapter_name
                _adapters_has_been_set = True

        if not _adapters_has_been_set:
            raise ValueError(
                "Did not succeeded in setting the adapter. Please make sure you are using a model that supports adapters."
            )

    def disable_adapters(self) -> None:
        r"""
        Disable all adapters attached to the model and fallback to inference with the base model only.

        If you are not familiar with adapters and PEFT methods, we invite you to read more about them on the PEFT
        [documentation](https://huggingface.co/docs/peft).
        """
        check_peft_version(min_version=MIN_PEFT_VERSION)

        if not self._hf_peft_config_loaded:
            raise ValueError("No adapter loaded. Please load an adapter first.")

        from peft.tuners.tuners_utils import BaseTunerLayer

        for _, module in self.named_modules():
            if isinstance(module, BaseTunerLayer):
                if hasattr(module, "enable_adapters"):
                    module.enable_adapters(enabled=False)
                else:
                    # support for older PEFT versions
                    module.disable_adapters = True

    def enable_adapters(self) -> None:
        """
        Enable adapters that are attached to the model. The model uses `self.active_adapters()` to retrieve the list of
        adapters to enable.

        If you are not familiar with adapters and PEFT methods, we invite you to read more about them on the PEFT
        [documentation](https://huggingface.co/docs/peft).
        """
        check_peft_version(min_version=MIN_PEFT_VERSION)

        if not self._hf_peft_config_loaded:
            raise ValueError("No adapter loaded. Please load an adapter first.")

        from peft.tuners.tuners_utils import BaseTunerLayer

        for _, module in self.named_modules():
            if isinstance(module, BaseTunerLayer):
                if hasattr(module, "enable_adapters"):
                    module.enable_adapters(enabled=True)
                else:
                    # support for older PEFT versions
                    module.disable_adapters = False

    def active_adapters(self) -> list[str]:
        """
        Gets the current list of active adapters of the model.

        If you are not familiar with adapters and PEFT methods, we invite you to read more about them on the PEFT
        [documentation](https://huggingface.co/docs/peft).
        """
        check_peft_version(min_version=MIN_PEFT_VERSION)

        if not is_peft_available():
            raise ImportError("PEFT is not available. Please install PEFT to use this function: `pip install peft`.")

        if not self._hf_peft_config_loaded:
            raise ValueError("No adapter loaded. Please load an adapter first.")

        from peft.tuners.tuners_utils import BaseTunerLayer

        for _, module in self.named_modules():
            if isinstance(module, BaseTunerLayer):
                return module.active_adapter

    def fuse_lora(self, lora_scale=1.0, safe_fusing=False, adapter_names=None):
        if not USE_PEFT_BACKEND:
            raise ValueError("PEFT backend is required for `fuse_lora()`.")

        from peft.tuners.tuners_utils import BaseTunerLayer

        # PEFT adds the LoRA to the stored weight: one stored as plain int8, packed bytes or float8 values (SDNQ, BFL
        # fp8 and nvfp4, layerwise casting) cannot take it. Checked before fusing any layer, so that fusing does not
        # stop after changing others.
        for name, module in self.named_modules():
            if isinstance(module, BaseTunerLayer):
                weight = getattr(module.get_base_layer(), "weight", None)
                if type(weight) in (torch.Tensor, torch.nn.Parameter) and (
                    not weight.dtype.is_floating_point or weight.dtype.itemsize < 2
                ):
                    raise ValueError(
                        f"Cannot fuse LoRA into `{name}`: its weight is stored as {weight.dtype}, which a LoRA cannot be "
                        "added to. Use the LoRA without fusing it, or fuse it before quantizing the model or enabling "
                        "layerwise casting."
                    )

        from .lora_base import _fusing_into_offloaded_weights

        self.lora_scale = lora_scale
        self._safe_fusing = safe_fusing
        with _fusing_into_offloaded_weights(self):
            self.apply(partial(self._fuse_lora_apply, adapter_names=adapter_names))
            _warn_if_quantization_rounds_the_lora_away(self)

    def _fuse_lora_apply(self, module, adapter_names=None):
        from peft.tuners.tuners_utils import BaseTunerLayer

        merge_kwargs = {"safe_merge": self._safe_fusing}

        if isinstance(module, BaseTunerLayer):
            if self.lora_scale != 1.0:
                module.scale_layer(self.lora_scale)

            # For BC with previous PEFT versions, we need to check the signature
            # of the `merge` method to see if it supports the `adapter_names` argument.
            supported_merge_kwargs = list(inspect.signature(module.merge).parameters)
            if "adapter_names" in supported_merge_kwargs:
                merge_kwargs["adapter_names"] = adapter_names
            elif "adapter_names" not in supported_merge_kwargs and adapter_names is not None:
                raise ValueError(
                    "The `adapter_names` argument is not supported with your PEFT version. Please upgrade"
                    " to the latest version of PEFT. `pip install -U peft`"
                )

            base_layer = module.get_base_layer()
            if getattr(base_layer, "weight", None).__class__.__name__ == "GGUFParameter":
                from ..quantizers.gguf.utils import dequantize_gguf_tensor

                # A GGUF weight holds packed blocks of bytes: the LoRA is fused into the weight dequantized to the dtype
                # the layer computes in. The quantized weight is kept, out of the state dict, for `unfuse_lora()`.
                module.__dict__["_quantized_base_weight"] = base_layer.weight
                weight = dequantize_gguf_tensor(base_layer.weight).to(base_layer.compute_dtype)
                base_layer.weight = torch.nn.Parameter(weight, requires_grad=False)
            _maybe_dequantize_quanto_base_weight(module)
            _maybe_keep_quantized_base_weight(module)

            _merge_lora_layer(module, **merge_kwargs)
            # Nothing was fused into this layer (its adapters are not in `adapter_names`).
            _maybe_restore_quantized_base_weight(module)

    def unfuse_lora(self):
        if not USE_PEFT_BACKEND:
            raise ValueError("PEFT backend is required for `unfuse_lora()`.")

        from .lora_base import _fusing_into_offloaded_weights

        with _fusing_into_offloaded_weights(self):
            self.apply(self._unfuse_lora_apply)

    def _unfuse_lora_apply(self, module):
        from peft.tuners.tuners_utils import BaseTunerLayer

        if isinstance(module, BaseTunerLayer):
            module.unmerge()
            _maybe_restore_quantized_base_weight(module)

    def unload_lora(self):
        if not USE_PEFT_BACKEND:
            raise ValueError("PEFT backend is required for `unload_lora()`.")

        from ..utils import recurse_remove_peft_layers

        with _without_group_offloading(self):
            recurse_remove_peft_layers(self)
        if hasattr(self, "peft_config"):
            del self.peft_config
        if hasattr(self, "_hf_peft_config_loaded"):
            self._hf_peft_config_loaded = None

    def disable_lora(self):
        """
        Disables the active LoRA layers of the underlying model.

        Example:

        ```py
        from diffusers import AutoPipelineForText2Image
        import torch

        pipeline = AutoPipelineForText2Image.from_pretrained(
            "stabilityai/stable-diffusion-xl-base-1.0", torch_dtype=torch.float16
        ).to("cuda")
        pipeline.load_lora_weights(
            "jbilcke-hf/sdxl-cinematic-1", weight_name="pytorch_lora_weights.safetensors", adapter_name="cinematic"
        )
        pipeline.unet.disable_lora()
        ```
        """
        if not USE_PEFT_BACKEND:
            raise ValueError("PEFT backend is required for this method.")
        set_adapter_layers(self, enabled=False)

    def enable_lora(self):
        """
        Enables the active LoRA layers of the underlying model.

        Example:

        ```py
        from diffusers import AutoPipelineForText2Image
        import torch

        pipeline = AutoPipelineForText2Image.from_pretrained(
            "stabilityai/stable-diffusion-xl-base-1.0", torch_dtype=torch.float16
        ).to("cuda")
        pipeline.load_lora_weights(
            "jbilcke-hf/sdxl-cinematic-1", weight_name="pytorch_lora_weights.safetensors", adapter_name="cinematic"
        )
        pipeline.unet.enable_lora()
        ```
        """
        if not USE_PEFT_BACKEND:
            raise ValueError("PEFT backend is required for this method.")
        set_adapter_layers(self, enabled=True)

    def delete_adapters(self, adapter_names: list[str] | str):
        """
        Delete an adapter's LoRA layers from the underlying model.

        Args:
            adapter_names (`list[str, str]`):
                The names (single string or list of strings) of the adapter to delete.

        Example:

        ```py
        from diffusers import AutoPipelineForText2Image
        import torch

        pipeline = AutoPipelineForText2Image.from_pretrained(
            "stabilityai/stable-diffusion-xl-base-1.0", torch_dtype=torch.float16
        ).to("cuda")
        pipeline.load_lora_weights(
            "jbilcke-hf/sdxl-cinematic-1", weight_name="pytorch_lora_weights.safetensors", adapter_names="cinematic"
        )
        pipeline.unet.delete_adapters("cinematic")
        ```
        """
        if not USE_PEFT_BACKEND:
            raise ValueError("PEFT backend is required for this method.")

        if isinstance(adapter_names, str):
            adapter_names = [adapter_names]

        with _without_group_offloading(self):
            for adapter_name in adapter_names:
                delete_adapter_layers(self, adapter_name)

                # Pop also the corresponding adapter from the config
                if hasattr(self, "peft_config"):
                    self.peft_config.pop(adapter_name, None)

    def enable_lora_hotswap(
        self, target_rank: int = 128, check_compiled: Literal["error", "warn", "ignore"] = "error"
    ) -> None:
        """Enables the possibility to hotswap LoRA adapters.

        Calling this method is only required when hotswapping adapters and if the model is compiled or if the ranks of
        the loaded adapters differ.

        Args:
            target_rank (`int`, *optional*, defaults to `128`):
                The highest rank among all the adapters that will be loaded.

            check_compiled (`str`, *optional*, defaults to `"error"`):
                How to handle the case when the model is already compiled, which should generally be avoided. The
                options are:
                  - "error" (default): raise an error
                  - "warn": issue a warning
                  - "ignore": do nothing
        """
        if getattr(self, "peft_config", {}):
            if check_compiled == "error":
                raise RuntimeError("Call `enable_lora_hotswap` before loading the first adapter.")
            elif check_compiled == "warn":
                logger.warning(
                    "It is recommended to call `enable_lora_hotswap` before loading the first adapter to avoid recompilation."
                )
            elif check_compiled != "ignore":
                raise ValueError(
                    f"check_compiles should be one of 'error', 'warn', or 'ignore', got '{check_compiled}' instead."
                )

        self._prepare_lora_hotswap_kwargs = {"target_rank": target_rank, "check_compiled": check_compiled}
