"""Model and KV-cache dtypes: bytes per element as vLLM resolves ``--dtype`` and
``--kv-cache-dtype``."""

from __future__ import annotations

from collections.abc import Mapping

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.vllm.reference import SRC_VLLM
from gpustrata.vllm.terms import CapacityError

__all__ = [
    "FLOAT16_REFUSED_MODEL_TYPES",
    "FP8_DS_MLA_TOKEN_BYTES",
    "cache_dtype_bytes",
    "model_dtype_bytes",
]


_MODEL_DTYPES: Mapping[str, tuple[str, int]] = {
    "half": ("float16", 2),
    "float16": ("float16", 2),
    "fp16": ("float16", 2),
    "bfloat16": ("bfloat16", 2),
    "bf16": ("bfloat16", 2),
    "float": ("float32", 4),
    "float32": ("float32", 4),
}
# vllm/utils/torch_utils.py STR_DTYPE_TO_TORCH_DTYPE: fp8 variants are stored as 1-byte
# tensors (uint8 / float8_e4m3fn); "auto" takes the model dtype.
_CACHE_DTYPES: Mapping[str, int] = {
    "float16": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
}
FP8_DS_MLA_TOKEN_BYTES = 656

# --------------------------------------------------------------------------- dtypes


FLOAT16_REFUSED_MODEL_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text", "glm4"})
"""Model types vLLM refuses to run in float16 (reference release vllm/config/model.py
``_FLOAT16_NOT_SUPPORTED_MODELS``)."""


def model_dtype_bytes(arch: ModelArchitecture, model_dtype: str = "auto") -> tuple[str, int]:
    """Resolve vLLM ``--dtype`` to ``(dtype name, bytes per element)``.

    ``auto`` takes config.json's dtype; float32 checkpoints are served in bfloat16
    (``vllm/config/model.py`` ``_resolve_auto_dtype`` downcasts float32 to the
    platform's preferred dtype).
    """
    key = model_dtype.strip().lower()
    if key == "auto":
        name, size = _MODEL_DTYPES.get(arch.torch_dtype.lower(), ("bfloat16", 2))
        if name == "float32":
            return "bfloat16", 2
        return name, size
    if key not in _MODEL_DTYPES:
        known = ", ".join(["auto", *sorted(_MODEL_DTYPES)])
        raise CapacityError("dtype", f"dtype {model_dtype!r} is not one of {known}")
    name, size = _MODEL_DTYPES[key]
    if name == "float16" and arch.model_type in FLOAT16_REFUSED_MODEL_TYPES:
        raise CapacityError(
            "dtype",
            f"vLLM refuses float16 for model type {arch.model_type!r} ({arch.id}): numerical "
            f"instability ({SRC_VLLM} vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS); "
            "use bfloat16 or float32",
        )
    return name, size


def cache_dtype_bytes(
    arch: ModelArchitecture, cache_dtype: str = "auto", model_dtype: str = "auto"
) -> tuple[str, int]:
    """Resolve vLLM ``--kv-cache-dtype`` to ``(dtype name, bytes per element)``.

    ``auto`` uses the model dtype (``kv_cache_dtype_str_to_dtype``); fp8 variants are
    one byte. ``fp8_ds_mla`` is only valid for MLA models.
    """
    key = cache_dtype.strip().lower()
    if key == "auto":
        return model_dtype_bytes(arch, model_dtype)
    if key not in _CACHE_DTYPES:
        known = ", ".join(["auto", *_CACHE_DTYPES])
        raise CapacityError(
            "kv_cache_dtype",
            f"kv_cache_dtype {cache_dtype!r} is not modelled; use one of {known}",
        )
    if key == "fp8_ds_mla" and arch.attention != "mla":
        raise CapacityError(
            "kv_cache_dtype",
            f"kv_cache_dtype 'fp8_ds_mla' is only for MLA models; {arch.id} uses "
            f"{arch.attention} attention: use 'fp8' or 'auto'",
        )
    return key, _CACHE_DTYPES[key]
