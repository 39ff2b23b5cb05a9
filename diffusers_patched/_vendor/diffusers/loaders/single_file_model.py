# Copyright 2026 The HuggingFace Team. All rights reserved.
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
import importlib
import inspect
import os
import re
from contextlib import nullcontext

import torch
from huggingface_hub.utils import validate_hf_hub_args
from typing_extensions import Self

from .. import __version__
from ..models.model_loading_utils import (
    _caching_allocator_warmup,
    _determine_device_map,
    _expand_device_map,
    _summarize_keys,
)
from ..quantizers import DiffusersAutoQuantizer
from ..utils import ENV_VARS_TRUE_VALUES, deprecate, is_accelerate_available, is_torch_version, logging
from ..utils.torch_utils import empty_device_cache
from .single_file_utils import (
    SINGLE_FILE_BLOCK_COUNT_CONFIG_KEYS,
    SingleFileComponentError,
    convert_animatediff_checkpoint_to_diffusers,
    convert_auraflow_transformer_checkpoint_to_diffusers,
    convert_autoencoder_dc_checkpoint_to_diffusers,
    convert_chroma_transformer_checkpoint_to_diffusers,
    convert_controlnet_checkpoint,
    convert_cosmos_transformer_checkpoint_to_diffusers,
    convert_ernie_image_transformer_checkpoint_to_diffusers,
    convert_flux2_transformer_checkpoint_to_diffusers,
    convert_flux3_transformer_checkpoint_to_diffusers,
    convert_flux_transformer_checkpoint_to_diffusers,
    convert_hidream_transformer_to_diffusers,
    convert_hunyuan_video_transformer_to_diffusers,
    convert_krea2_transformer_checkpoint_to_diffusers,
    convert_ldm_unet_checkpoint,
    convert_ldm_vae_checkpoint,
    convert_ltx2_audio_vae_to_diffusers,
    convert_ltx2_transformer_to_diffusers,
    convert_ltx2_vae_to_diffusers,
    convert_ltx_transformer_checkpoint_to_diffusers,
    convert_ltx_vae_checkpoint_to_diffusers,
    convert_lumina2_to_diffusers,
    convert_minimax_h3_transformer_checkpoint_to_diffusers,
    convert_mochi_transformer_checkpoint_to_diffusers,
    convert_qwen_image21_transformer_checkpoint_to_diffusers,
    convert_sana_transformer_to_diffusers,
    convert_scaled_weights_to_dtype,
    convert_sd3_transformer_checkpoint_to_diffusers,
    convert_stable_cascade_unet_single_file_to_diffusers,
    convert_wan_animate_2_transformer_to_diffusers,
    convert_wan_transformer_to_diffusers,
    convert_wan_vae_to_diffusers,
    convert_z_image_controlnet_checkpoint_to_diffusers,
    convert_z_image_transformer_checkpoint_to_diffusers,
    create_controlnet_diffusers_config_from_ldm,
    create_unet_diffusers_config_from_ldm,
    create_vae_diffusers_config_from_ldm,
    fetch_diffusers_config,
    fetch_original_config,
    get_block_indices_from_checkpoint,
    load_single_file_checkpoint,
)


logger = logging.get_logger(__name__)


if is_accelerate_available():
    from accelerate import dispatch_model, init_empty_weights

    from ..models.model_loading_utils import _materialize_meta_tensors, load_model_dict_into_meta

if is_torch_version(">=", "1.9.0") and is_accelerate_available():
    _LOW_CPU_MEM_USAGE_DEFAULT = True
else:
    _LOW_CPU_MEM_USAGE_DEFAULT = False

SINGLE_FILE_LOADABLE_CLASSES = {
    "StableCascadeUNet": {
        "checkpoint_mapping_fn": convert_stable_cascade_unet_single_file_to_diffusers,
    },
    "UNet2DConditionModel": {
        "checkpoint_mapping_fn": convert_ldm_unet_checkpoint,
        "config_mapping_fn": create_unet_diffusers_config_from_ldm,
        "default_subfolder": "unet",
        "legacy_kwargs": {
            "num_in_channels": "in_channels",  # Legacy kwargs supported by `from_single_file` mapped to new args
        },
    },
    "AutoencoderKL": {
        "checkpoint_mapping_fn": convert_ldm_vae_checkpoint,
        "config_mapping_fn": create_vae_diffusers_config_from_ldm,
        "default_subfolder": "vae",
    },
    "ControlNetModel": {
        "checkpoint_mapping_fn": convert_controlnet_checkpoint,
        "config_mapping_fn": create_controlnet_diffusers_config_from_ldm,
    },
    "SD3Transformer2DModel": {
        "checkpoint_mapping_fn": convert_sd3_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "MotionAdapter": {
        "checkpoint_mapping_fn": convert_animatediff_checkpoint_to_diffusers,
    },
    "SparseControlNetModel": {
        "checkpoint_mapping_fn": convert_animatediff_checkpoint_to_diffusers,
    },
    "FluxTransformer2DModel": {
        "checkpoint_mapping_fn": convert_flux_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "ChromaTransformer2DModel": {
        "checkpoint_mapping_fn": convert_chroma_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "ErnieImageTransformer2DModel": {
        "checkpoint_mapping_fn": convert_ernie_image_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "LTXVideoTransformer3DModel": {
        "checkpoint_mapping_fn": convert_ltx_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "AutoencoderKLLTXVideo": {
        "checkpoint_mapping_fn": convert_ltx_vae_checkpoint_to_diffusers,
        "default_subfolder": "vae",
    },
    "AutoencoderDC": {"checkpoint_mapping_fn": convert_autoencoder_dc_checkpoint_to_diffusers},
    "MochiTransformer3DModel": {
        "checkpoint_mapping_fn": convert_mochi_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "HunyuanVideoTransformer3DModel": {
        "checkpoint_mapping_fn": convert_hunyuan_video_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "AuraFlowTransformer2DModel": {
        "checkpoint_mapping_fn": convert_auraflow_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "Lumina2Transformer2DModel": {
        "checkpoint_mapping_fn": convert_lumina2_to_diffusers,
        "default_subfolder": "transformer",
    },
    "SanaTransformer2DModel": {
        "checkpoint_mapping_fn": convert_sana_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "SkyReelsV2Transformer3DModel": {
        "checkpoint_mapping_fn": convert_wan_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "ChronoEditTransformer3DModel": {
        "checkpoint_mapping_fn": convert_wan_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "WanTransformer3DModel": {
        "checkpoint_mapping_fn": convert_wan_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "WanVACETransformer3DModel": {
        "checkpoint_mapping_fn": convert_wan_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "WanAnimateTransformer3DModel": {
        "checkpoint_mapping_fn": convert_wan_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "WanAnimate2Transformer3DModel": {
        "checkpoint_mapping_fn": convert_wan_animate_2_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "AutoencoderKLWan": {
        "checkpoint_mapping_fn": convert_wan_vae_to_diffusers,
        "default_subfolder": "vae",
    },
    "HiDreamImageTransformer2DModel": {
        "checkpoint_mapping_fn": convert_hidream_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "CosmosTransformer3DModel": {
        "checkpoint_mapping_fn": convert_cosmos_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "QwenImageTransformer2DModel": {
        "checkpoint_mapping_fn": lambda checkpoint, **kwargs: checkpoint,
        "default_subfolder": "transformer",
    },
    "QwenImage21Transformer2DModel": {
        "checkpoint_mapping_fn": convert_qwen_image21_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "Krea2Transformer2DModel": {
        "checkpoint_mapping_fn": convert_krea2_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "Flux2Transformer2DModel": {
        "checkpoint_mapping_fn": convert_flux2_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "Flux3Transformer2DModel": {
        "checkpoint_mapping_fn": convert_flux3_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "ZImageTransformer2DModel": {
        "checkpoint_mapping_fn": convert_z_image_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
    "ZImageControlNetModel": {
        "checkpoint_mapping_fn": convert_z_image_controlnet_checkpoint_to_diffusers,
    },
    "LTX2VideoTransformer3DModel": {
        "checkpoint_mapping_fn": convert_ltx2_transformer_to_diffusers,
        "default_subfolder": "transformer",
    },
    "AutoencoderKLLTX2Video": {
        "checkpoint_mapping_fn": convert_ltx2_vae_to_diffusers,
        "default_subfolder": "vae",
    },
    "AutoencoderKLLTX2Audio": {
        "checkpoint_mapping_fn": convert_ltx2_audio_vae_to_diffusers,
        "default_subfolder": "audio_vae",
    },
    "MotifVideoTransformer3DModel": {
        "checkpoint_mapping_fn": lambda checkpoint, **kwargs: checkpoint,
        "default_subfolder": "transformer",
    },
    "MiniMaxH3Transformer3DModel": {
        "checkpoint_mapping_fn": convert_minimax_h3_transformer_checkpoint_to_diffusers,
        "default_subfolder": "transformer",
    },
}


def _should_convert_state_dict_to_diffusers(model_state_dict, checkpoint_state_dict):
    model_state_dict_keys = set(model_state_dict.keys())
    checkpoint_state_dict_keys = set(checkpoint_state_dict.keys())
    is_subset = model_state_dict_keys.issubset(checkpoint_state_dict_keys)
    is_match = model_state_dict_keys == checkpoint_state_dict_keys
    return not (is_subset and is_match)


def _get_single_file_loadable_mapping_class(cls):
    diffusers_module = importlib.import_module(__name__.split(".")[0])
    for loadable_class_str in SINGLE_FILE_LOADABLE_CLASSES:
        loadable_class = getattr(diffusers_module, loadable_class_str)

        if issubclass(cls, loadable_class):
            return loadable_class_str

    return None


def _get_mapping_function_kwargs(mapping_fn, **kwargs):
    parameters = inspect.signature(mapping_fn).parameters

    mapping_kwargs = {}
    for parameter in parameters:
        if parameter in kwargs:
            mapping_kwargs[parameter] = kwargs[parameter]

    return mapping_kwargs


def _set_block_counts_from_checkpoint(cls, config, checkpoint, block_count_config_keys, config_name, checkpoint_name):
    """
    Sets the numbers of blocks of `config`, inferred for the Diffusers format `checkpoint`, to those of the checkpoint.
    Raises if the checkpoint misses blocks below its last one: no number of blocks describes it.
    """
    block_indices = get_block_indices_from_checkpoint(checkpoint, block_count_config_keys)
    # the indices of the blocks of a model are 0, 1, ..., n - 1
    mismatched = [key for key, indices in block_indices.items() if not indices or indices[-1] >= len(indices)]
    if mismatched:
        held = []
        for key in mismatched:
            module_list, indices = block_count_config_keys[key], block_indices[key]
            if indices:
                missing = ", ".join(str(i) for i in range(indices[-1]) if i not in indices)
                held.append(f"{module_list} 0-{indices[-1]} but not {missing}")
            else:
                held.append(f"no {module_list}")
        expected = ", ".join(f"`{key}={config[key]}`" for key in mismatched)
        raise ValueError(
            f"Cannot load {cls.__name__} from {checkpoint_name} with the config of {config_name} inferred for it:"
            f" the checkpoint has {' and '.join(held)}, where the config has {expected}. \n Please make sure to pass"
            " the `config` (and `subfolder`) of the model the checkpoint belongs to."
        )

    block_counts = {key: len(indices) for key, indices in block_indices.items() if len(indices) != config[key]}
    if block_counts:
        held = " and ".join(f"{n} {block_count_config_keys[key]}" for key, n in block_counts.items())
        expected = " and ".join(str(config[key]) for key in block_counts)
        built = ", ".join(f"`{key}={n}`" for key, n in block_counts.items())
        logger.info(
            f"The checkpoint has {held} where the config of {config_name} inferred for it has {expected}:"
            f" {cls.__name__} is built with {built}. Pass `config` (and `subfolder`) to load it with another config."
        )
        config.update(block_counts)


def _modules_without_weights(model, missing_keys):
    """
    Returns the outermost submodules of `model` whose parameters and persistent buffers are all in `missing_keys`.
    """
    missing_keys = set(missing_keys)
    modules = []
    for name, module in model.named_modules():
        if not name or any(name.startswith(f"{outer}.") for outer in modules):
            continue
        keys = [f"{name}.{key}" for key in module.state_dict(keep_vars=True)]
        if keys and missing_keys.issuperset(keys):
            modules.append(name)
    return modules


class FromOriginalModelMixin:
    """
    Load pretrained weights saved in the `.ckpt` or `.safetensors` format into a model.
    """

    @classmethod
    @validate_hf_hub_args
    def from_single_file(cls, pretrained_model_link_or_path_or_dict: str | None = None, **kwargs) -> Self:
        r"""
        Instantiate a model from pretrained weights saved in the original `.ckpt` or `.safetensors` format. The model
        is set in evaluation mode (`model.eval()`) by default.

        Parameters:
            pretrained_model_link_or_path_or_dict (`str`, *optional*):
                Can be either:
                    - A link to the `.safetensors` or `.ckpt` file (for example
                      `"https://huggingface.co/<repo_id>/blob/main/<path_to_file>.safetensors"`) on the Hub.
                    - A path to a local *file* containing the weights of the component model.
                    - A state dict containing the component model weights.
            config (`str`, *optional*):
                - A string, the *repo id* (for example `CompVis/ldm-text2im-large-256`) of a pretrained pipeline hosted
                  on the Hub.
                - A path to a *directory* (for example `./my_pipeline_directory/`) containing the pipeline component
                  configs in Diffusers format.
            subfolder (`str`, *optional*, defaults to `""`):
                The subfolder location of a model file within a larger model repository on the Hub or locally.
            original_config (`str`, *optional*):
                Dict or path to a yaml file containing the configuration for the model in its original format.
                    If a dict is provided, it will be used to initialize the model configuration.
            dtype (`torch.dtype`, *optional*):
                Override the default `torch.dtype` and load the model with another dtype.
            force_download (`bool`, *optional*, defaults to `False`):
                Whether or not to force the (re-)download of the model weights and configuration files, overriding the
                cached versions if they exist.
            cache_dir (`str | os.PathLike`, *optional*):
                Path to a directory where a downloaded pretrained model configuration is cached if the standard cache
                is not used.

            proxies (`dict[str, str]`, *optional*):
                A dictionary of proxy servers to use by protocol or endpoint, for example, `{'http': 'foo.bar:3128',
                'http://hostname': 'foo.bar:4012'}`. The proxies are used on each request.
            local_files_only (`bool`, *optional*, defaults to `False`):
                Whether to only load local model weights and configuration files or not. If set to True, the model
                won't be downloaded from the Hub.
            token (`str` or *bool*, *optional*):
                The token to use as HTTP bearer authorization for remote files. If `True`, the token generated from
                `diffusers-cli login` (stored in `~/.huggingface`) is used.
            revision (`str`, *optional*, defaults to `"main"`):
                The specific model version to use. It can be a branch name, a tag name, a commit id, or any identifier
                allowed by Git.
            low_cpu_mem_usage (`bool`, *optional*, defaults to `True` if torch version >= 1.9.0 and
                is_accelerate_available() else `False`): Speed up model loading only loading the pretrained weights and
                not initializing the weights. This also tries to not use more than 1x model size in CPU memory
                (including peak memory) while loading the model. Only supported for PyTorch >= 1.9.0. If you are using
                an older version of PyTorch, setting this argument to `True` will raise an error.
            disable_mmap ('bool', *optional*, defaults to 'False'):
                Whether to disable mmap when loading a Safetensors model. This option can perform better when the model
                is on a network mount or hard drive, which may not handle the seeky-ness of mmap very well.
            strict (`bool`, *optional*, defaults to `False`):
                Whether to raise an error when the checkpoint lacks weights the model expects, instead of initializing
                them as the model's constructor does and warning about them.
            kwargs (remaining dictionary of keyword arguments, *optional*):
                Can be used to overwrite load and saveable variables (for example the pipeline components of the
                specific pipeline class). The overwritten components are directly passed to the pipelines `__init__`
                method. See example below for more information.

        ```py
        >>> from diffusers import StableCascadeUNet

        >>> ckpt_path = "https://huggingface.co/stabilityai/stable-cascade/blob/main/stage_b_lite.safetensors"
        >>> model = StableCascadeUNet.from_single_file(ckpt_path)
        ```
        """

        mapping_class_name = _get_single_file_loadable_mapping_class(cls)
        # if class_name not in SINGLE_FILE_LOADABLE_CLASSES:
        if mapping_class_name is None:
            raise ValueError(
                f"FromOriginalModelMixin is currently only compatible with {', '.join(SINGLE_FILE_LOADABLE_CLASSES.keys())}"
            )

        pretrained_model_link_or_path = kwargs.get("pretrained_model_link_or_path", None)
        if pretrained_model_link_or_path is not None:
            deprecation_message = (
                "Please use `pretrained_model_link_or_path_or_dict` argument instead for model classes"
            )
            deprecate("pretrained_model_link_or_path", "1.0.0", deprecation_message)
            pretrained_model_link_or_path_or_dict = pretrained_model_link_or_path

        config = kwargs.pop("config", None)
        original_config = kwargs.pop("original_config", None)

        if config is not None and original_config is not None:
            raise ValueError(
                "`from_single_file` cannot accept both `config` and `original_config` arguments. Please provide only one of these arguments"
            )

        force_download = kwargs.pop("force_download", False)
        proxies = kwargs.pop("proxies", None)
        token = kwargs.pop("token", None)
        cache_dir = kwargs.pop("cache_dir", None)
        local_files_only = kwargs.pop("local_files_only", None)
        subfolder = kwargs.pop("subfolder", None)
        revision = kwargs.pop("revision", None)
        config_revision = kwargs.pop("config_revision", None)
        torch_dtype = kwargs.pop("torch_dtype", None)
        dtype = kwargs.pop("dtype", None)
        torch_dtype = dtype if dtype is not None else torch_dtype
        quantization_config = kwargs.pop("quantization_config", None)
        low_cpu_mem_usage = kwargs.pop("low_cpu_mem_usage", _LOW_CPU_MEM_USAGE_DEFAULT)
        device = kwargs.pop("device", None)
        disable_mmap = kwargs.pop("disable_mmap", False)
        # diffusers-patched: DIFFUSERS_PATCHED_STRICT_LOAD=1 makes strict loading the default of a deployment.
        kwargs.setdefault("strict", os.getenv("DIFFUSERS_PATCHED_STRICT_LOAD", "").upper() in ENV_VARS_TRUE_VALUES)
        strict = kwargs.pop("strict", False)
        device_map = kwargs.pop("device_map", None)

        user_agent = {
            "diffusers": __version__,
            "file_type": "single_file",
            "framework": "pytorch",
        }
        # In order to ensure popular quantization methods are supported. Can be disable with `disable_telemetry`
        if quantization_config is not None:
            user_agent["quant"] = quantization_config.quant_method.value

        if torch_dtype is not None and not isinstance(torch_dtype, torch.dtype):
            torch_dtype = torch.float32
            logger.warning(
                f"Passed `torch_dtype` {torch_dtype} is not a `torch.dtype`. Defaulting to `torch.float32`."
            )

        if isinstance(pretrained_model_link_or_path_or_dict, dict):
            checkpoint = pretrained_model_link_or_path_or_dict
        else:
            checkpoint = load_single_file_checkpoint(
                pretrained_model_link_or_path_or_dict,
                force_download=force_download,
                proxies=proxies,
                token=token,
                cache_dir=cache_dir,
                local_files_only=local_files_only,
                revision=revision,
                disable_mmap=disable_mmap,
                user_agent=user_agent,
            )
        if quantization_config is not None:
            if not low_cpu_mem_usage:
                raise ValueError("`low_cpu_mem_usage` cannot be False when using quantization.")
            hf_quantizer = DiffusersAutoQuantizer.from_config(quantization_config)
            hf_quantizer.validate_environment()
            torch_dtype = hf_quantizer.update_torch_dtype(torch_dtype)
            checkpoint = hf_quantizer.maybe_update_state_dict(checkpoint)

        else:
            # without a quantization config, weights stored scaled would be loaded as if they were the stored values
            checkpoint = convert_scaled_weights_to_dtype(checkpoint, torch_dtype)
            hf_quantizer = None

        mapping_functions = SINGLE_FILE_LOADABLE_CLASSES[mapping_class_name]
        checkpoint_name = (
            "the state dict passed"
            if isinstance(pretrained_model_link_or_path_or_dict, dict)
            else pretrained_model_link_or_path_or_dict
        )

        checkpoint_mapping_fn = mapping_functions["checkpoint_mapping_fn"]
        checkpoint_converted = False
        config_inferred = original_config is None and config is None
        if original_config is not None:
            if "config_mapping_fn" in mapping_functions:
                config_mapping_fn = mapping_functions["config_mapping_fn"]
            else:
                config_mapping_fn = None

            if config_mapping_fn is None:
                raise ValueError(
                    (
                        f"`original_config` has been provided for {mapping_class_name} but no mapping function"
                        "was found to convert the original config to a Diffusers config in"
                        "`diffusers.loaders.single_file_utils`"
                    )
                )

            if isinstance(original_config, str):
                # If original_config is a URL or filepath fetch the original_config dict
                original_config = fetch_original_config(original_config, local_files_only=local_files_only)

            config_mapping_kwargs = _get_mapping_function_kwargs(config_mapping_fn, **kwargs)
            diffusers_model_config = config_mapping_fn(
                original_config=original_config,
                checkpoint=checkpoint,
                **config_mapping_kwargs,
            )
        else:
            if config is not None:
                if isinstance(config, str):
                    default_pretrained_model_config_name = config
                else:
                    raise ValueError(
                        (
                            "Invalid `config` argument. Please provide a string representing a repo id"
                            "or path to a local Diffusers model repo."
                        )
                    )

            else:
                config = fetch_diffusers_config(checkpoint)
                default_pretrained_model_config_name = config["pretrained_model_name_or_path"]

                if "default_subfolder" in mapping_functions:
                    subfolder = mapping_functions["default_subfolder"]

                subfolder = subfolder or config.pop(
                    "subfolder", None
                )  # some configs contain a subfolder key, e.g. StableCascadeUNet

            diffusers_model_config = cls.load_config(
                pretrained_model_name_or_path=default_pretrained_model_config_name,
                subfolder=subfolder,
                local_files_only=local_files_only,
                token=token,
                revision=config_revision,
            )
            expected_kwargs, optional_kwargs = cls._get_signature_keys(cls)

            # The checkpoint fixes the numbers of blocks, which a config inferred for it may not have. They are known
            # from the Diffusers names of its keys: it is converted before the model is built.
            block_count_config_keys = SINGLE_FILE_BLOCK_COUNT_CONFIG_KEYS.get(mapping_class_name)
            if config_inferred and block_count_config_keys is not None:
                config_block_indices = {
                    key: list(range(diffusers_model_config[key])) for key in block_count_config_keys
                }
                # a checkpoint in the Diffusers format with the blocks of the config is loaded as it is
                if get_block_indices_from_checkpoint(checkpoint, block_count_config_keys) != config_block_indices:
                    checkpoint = checkpoint_mapping_fn(
                        config=diffusers_model_config,
                        checkpoint=checkpoint,
                        **_get_mapping_function_kwargs(checkpoint_mapping_fn, **kwargs),
                    )
                    checkpoint_converted = True
                    _set_block_counts_from_checkpoint(
                        cls,
                        diffusers_model_config,
                        checkpoint,
                        block_count_config_keys,
                        default_pretrained_model_config_name,
                        checkpoint_name,
                    )

            # Map legacy kwargs to new kwargs
            if "legacy_kwargs" in mapping_functions:
                legacy_kwargs = mapping_functions["legacy_kwargs"]
                for legacy_key, new_key in legacy_kwargs.items():
                    if legacy_key in kwargs:
                        kwargs[new_key] = kwargs.pop(legacy_key)

            model_kwargs = {k: kwargs.get(k) for k in kwargs if k in expected_kwargs or k in optional_kwargs}
            diffusers_model_config.update(model_kwargs)

        ctx = init_empty_weights if low_cpu_mem_usage else nullcontext
        with ctx():
            model = cls.from_config(diffusers_model_config)

        model_state_dict = model.state_dict()

        # Check if `_keep_in_fp32_modules` is not None
        use_keep_in_fp32_modules = (cls._keep_in_fp32_modules is not None) and (
            (torch_dtype == torch.float16) or hasattr(hf_quantizer, "use_keep_in_fp32_modules")
        )
        if use_keep_in_fp32_modules:
            keep_in_fp32_modules = cls._keep_in_fp32_modules
            if not isinstance(keep_in_fp32_modules, list):
                keep_in_fp32_modules = [keep_in_fp32_modules]

        else:
            keep_in_fp32_modules = []

        # Now that the model is loaded, we can determine the `device_map`
        device_map = _determine_device_map(model, device_map, None, torch_dtype, keep_in_fp32_modules, hf_quantizer)
        if device_map is not None:
            expanded_device_map = _expand_device_map(device_map, model_state_dict.keys())
            _caching_allocator_warmup(model, expanded_device_map, torch_dtype, hf_quantizer)

        checkpoint_mapping_kwargs = _get_mapping_function_kwargs(checkpoint_mapping_fn, **kwargs)

        if not checkpoint_converted and _should_convert_state_dict_to_diffusers(model_state_dict, checkpoint):
            diffusers_format_checkpoint = checkpoint_mapping_fn(
                config=diffusers_model_config,
                checkpoint=checkpoint,
                **checkpoint_mapping_kwargs,
            )
        else:
            diffusers_format_checkpoint = checkpoint

        if not diffusers_format_checkpoint:
            raise SingleFileComponentError(
                f"Failed to load {mapping_class_name}. Weights for this component appear to be missing in the checkpoint."
            )

        if hf_quantizer is not None:
            hf_quantizer.preprocess_model(
                model=model,
                device_map=None,
                state_dict=diffusers_format_checkpoint,
                keep_in_fp32_modules=keep_in_fp32_modules,
            )

        device_map = None
        if low_cpu_mem_usage:
            param_device = torch.device(device) if device else torch.device("cpu")
            empty_state_dict = model.state_dict()
            unexpected_keys = [
                param_name for param_name in diffusers_format_checkpoint if param_name not in empty_state_dict
            ]
            missing_keys = [
                param_name for param_name in empty_state_dict if param_name not in diffusers_format_checkpoint
            ]
            device_map = {"": param_device}
            load_model_dict_into_meta(
                model,
                diffusers_format_checkpoint,
                dtype=torch_dtype,
                device_map=device_map,
                hf_quantizer=hf_quantizer,
                keep_in_fp32_modules=keep_in_fp32_modules,
                unexpected_keys=unexpected_keys,
            )
            empty_device_cache()
        else:
            missing_keys, unexpected_keys = model.load_state_dict(diffusers_format_checkpoint, strict=False)

        if model._keys_to_ignore_on_load_unexpected is not None:
            for pat in model._keys_to_ignore_on_load_unexpected:
                unexpected_keys = [k for k in unexpected_keys if re.search(pat, k) is None]

        if len(unexpected_keys) > 0:
            logger.warning(
                f"Some weights of the model checkpoint were not used when initializing {cls.__name__}: \n {[', '.join(unexpected_keys)]}"
            )

        if hf_quantizer is not None:
            missing_keys = hf_quantizer.update_missing_keys(model, missing_keys, prefix="")
        if config_inferred and len(missing_keys) > 0:
            # Whole modules the checkpoint has no weight of were never trained with it: the inferred config describes
            # another model, and initializing them would only make up a model nobody trained.
            missing_modules = _modules_without_weights(model, missing_keys)
            if missing_modules:
                raise ValueError(
                    f"Cannot load {cls.__name__} from {checkpoint_name} with the config of"
                    f" {default_pretrained_model_config_name} inferred for it: the checkpoint has no weights for"
                    f" {', '.join(missing_modules)}. \n Please make sure to pass the `config` (and `subfolder`) of the"
                    " model the checkpoint belongs to."
                )

        if len(missing_keys) > 0 and strict:
            raise ValueError(
                f"Cannot load {cls.__name__} from {checkpoint_name} because the following keys are missing: \n"
                f" {_summarize_keys(missing_keys)}. \n Please make sure to pass the `config` (and `subfolder`) of the"
                " model the checkpoint belongs to, or pass `strict=False` to load it with these weights"
                " initialized as the model's constructor initializes them."
            )

        initialized_keys = []
        if low_cpu_mem_usage:
            # Nothing may stay on the `meta` device: `dispatch_model` below would fail with "Cannot copy out of meta
            # tensor". Missing weights and non-persistent buffers (never in a checkpoint, on `meta` with
            # `ACCELERATE_INIT_INCLUDE_BUFFERS=1`) take the values a regular construction gives them.
            initialized_keys = _materialize_meta_tensors(
                model,
                lambda: cls.from_config(diffusers_model_config),
                device_map,
                dtype=torch_dtype,
                keep_in_fp32_modules=keep_in_fp32_modules,
            )

        reported_keys = set(missing_keys)
        missing_keys = list(missing_keys) + [key for key in initialized_keys if key not in reported_keys]
        if len(missing_keys) > 0:
            logger.warning(
                f"Some weights of {cls.__name__} were not found in the checkpoint {checkpoint_name} and hold the values"
                f" the model's constructor gives them: {_summarize_keys(missing_keys)}. Wherever these are trained"
                " weights, the model does not compute what the checkpoint was trained for. This usually means that the"
                " config does not match the checkpoint: pass the `config` (and `subfolder`) of the model the checkpoint"
                " belongs to. Otherwise the conversion of this checkpoint misses these keys. Pass `strict=True` to raise"
                " an error instead."
            )

        if hf_quantizer is not None:
            hf_quantizer.postprocess_model(model)
            model.hf_quantizer = hf_quantizer

        if torch_dtype is not None and hf_quantizer is None:
            model.to(torch_dtype)

        model.eval()

        if device_map is not None:
            device_map_kwargs = {"device_map": device_map}
            dispatch_model(model, **device_map_kwargs)

        return model
