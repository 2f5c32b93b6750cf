"""One typed vLLM engine-settings object, read through vLLM's own flag grammar.

:class:`EngineSettings` holds the settings gpustrata models, by vLLM's names
(``vllm/engine/arg_utils.py`` ``EngineArgs``). ``None`` means unset (vLLM's default
applies); a value vLLM would refuse is kept as its raw text so a rule can quote it.
Built from ``vllm serve`` flags (:meth:`EngineSettings.from_flags`) or from already
split values such as Ray Serve ``engine_kwargs`` (:meth:`EngineSettings.from_values`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustrata.vllm.flags import flag_bool, int_setting, known_setting, parse_flags

__all__ = ["BOOL_SETTINGS", "INT_SETTINGS", "TEXT_SETTINGS", "EngineSettings"]

INT_SETTINGS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
)
TEXT_SETTINGS = ("dtype", "kv_cache_dtype", "quantization")
BOOL_SETTINGS = ("enforce_eager", "enable_chunked_prefill", "enable_expert_parallel")


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The vLLM engine settings gpustrata models (``None``: unset, vLLM's default).

    Ints and floats that vLLM would refuse are kept as the text written (``'8x'``);
    :func:`gpustrata.vllm.flags.int_setting` says which spellings vLLM reads
    (``max_model_len`` ``-1``/``auto`` is :data:`gpustrata.vllm.flags.AUTO_FIT`).
    """

    tensor_parallel_size: int | str | None = None
    pipeline_parallel_size: int | str | None = None
    data_parallel_size: int | str | None = None
    max_model_len: int | str | None = None
    max_num_seqs: int | str | None = None
    max_num_batched_tokens: int | str | None = None
    block_size: int | str | None = None
    gpu_memory_utilization: float | str | None = None
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    enforce_eager: bool | str | None = None
    enable_chunked_prefill: bool | str | None = None
    enable_expert_parallel: bool | str | None = None

    @classmethod
    def from_values(cls, values: Mapping[str, Any], where: str = "the engine") -> EngineSettings:
        """Settings from values by vLLM name (dashes or underscores): parsed flags, or Ray
        Serve ``engine_kwargs``. Raises ``UnknownInput`` when a modelled setting is not
        known until deployment."""
        flat = {str(k).replace("-", "_"): v for k, v in values.items()}
        read: dict[str, Any] = {key: int_setting(flat, key, where) for key in INT_SETTINGS}
        for key in TEXT_SETTINGS:
            value = known_setting(flat, key, where)
            read[key] = str(value) if value is not None and not isinstance(value, bool) else None
        for key in BOOL_SETTINGS:
            value = known_setting(flat, key, where)
            parsed = flag_bool(flat, key, where)
            read[key] = parsed if parsed is not None or value is None else str(value)
        read["gpu_memory_utilization"] = _float(
            known_setting(flat, "gpu_memory_utilization", where)
        )
        return cls(**read)

    @classmethod
    def from_flags(cls, flags: list[str], where: str = "the engine") -> EngineSettings:
        """Settings from ``vllm serve`` flags (the model positional is ignored)."""
        values: dict[str, Any] = {}
        parse_flags(flags, values)
        return cls.from_values(values, where)

    def replace(self, **changes: Any) -> EngineSettings:
        """A copy with some settings changed (what-if estimates)."""
        return dataclasses.replace(self, **changes)

    def unreadable(self) -> tuple[str, str] | None:
        """The first (setting, raw text) that vLLM would refuse, or ``None``."""
        for key in (*INT_SETTINGS, "gpu_memory_utilization", *BOOL_SETTINGS):
            value = getattr(self, key)
            if isinstance(value, str):
                return key, value
        return None


def _float(value: Any) -> float | str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value)
    try:
        return float(str(value))
    except ValueError:
        return str(value)
