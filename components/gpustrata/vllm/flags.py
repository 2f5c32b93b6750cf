"""vLLM's own flag grammar: the one parser of ``vllm serve`` flags and engine settings.

What vLLM accepts (``vllm/utils/argparse_utils.py`` ``FlexibleArgumentParser`` and
``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args`` of the reference release):

* ``--a-b v``, ``--a_b v`` and ``--a-b=v`` name the same setting (normalised here to
  vLLM's underscore name ``a_b``); ``-tp``/``-pp``/``-dp`` are the short forms;
* booleans: ``--flag``, ``--no-flag`` (``BooleanOptionalAction``), ``--flag=false``,
  and YAML booleans in Ray Serve ``engine_kwargs``;
* human-readable ints (``human_readable_int``): ``8k`` = 8000, ``8K`` = 8192,
  ``25.6k`` = 25600, no decimals with a binary suffix; only for the settings vLLM
  types that way (``HUMAN_READABLE_INT_SETTINGS``); ``max_model_len`` also takes
  ``-1`` / ``auto`` (``human_readable_int_or_auto``); every other int is ``int(text)``;
* JSON-valued flags (``--speculative-config '{"method": "ngram"}'``), with bare
  human-readable numbers inside expanded (``_expand_json_human_readable_numbers``).

Pure: no Pulumi, no pydantic.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gpustrata.core.unknown import UNKNOWN, UnknownInput

__all__ = [
    "AUTO_FIT",
    "BOOLEAN_FLAGS",
    "HUMAN_READABLE_INT_SETTINGS",
    "SHORT_FLAGS",
    "flag_bool",
    "human_readable_int",
    "human_readable_int_or_auto",
    "int_setting",
    "json_setting",
    "known_setting",
    "parse_flags",
    "setting_name",
]

SHORT_FLAGS = {
    "-tp": "tensor_parallel_size",
    "-pp": "pipeline_parallel_size",
    "-dp": "data_parallel_size",
}
"""vLLM's short aliases (``EngineArgs.add_cli_args``)."""

BOOLEAN_FLAGS = frozenset(
    {
        "enforce_eager",
        "trust_remote_code",
        "enable_chunked_prefill",
        "enable_prefix_caching",
        "disable_log_requests",
        "disable_log_stats",
        "enable_auto_tool_choice",
        "enable_expert_parallel",
        "enable_lora",
        "disable_custom_all_reduce",
        "headless",
        "is_decode_worker",
        "is_prefill_worker",
    }
)
"""Flags that take no value when written bare (``--enforce-eager``)."""

HUMAN_READABLE_INT_SETTINGS = frozenset(
    {
        "max_model_len",
        "max_num_batched_tokens",
        "max_num_scheduled_tokens",
        "kv_cache_memory_bytes",
        "safetensors_prefetch_block_size",
        "max_num_queued_tokens",
    }
)
"""Settings vLLM parses with ``human_readable_int`` (``vllm/engine/arg_utils.py``
``_compute_kwargs``: ``human_readable_int_args`` plus ``max_model_len``)."""

AUTO_FIT = -1
"""``--max-model-len -1`` / ``auto``: vLLM fits max_model_len to the KV cache."""

_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_JSON_NUMBER = re.compile(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b")
_JSON_STRING = re.compile(r'("(?:[^"\\]|\\.)*")')


def human_readable_int(text: str) -> int:
    """``'8k'`` -> 8000, ``'8K'`` -> 8192, ``'25.6k'`` -> 25600, ``'42'`` -> 42.

    As vLLM's ``vllm/utils/argparse_utils.py`` ``human_readable_int``: decimal suffixes
    ``k m g t``, binary ``K M G T`` (whole numbers only), else ``int(text)``. Raises
    ``ValueError`` for anything else.
    """
    value = text.strip()
    match = _HUMAN_INT.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        return int(number) * _BINARY[suffix]  # ValueError for '1.5K', as vLLM
    return int(value)


def human_readable_int_or_auto(text: str) -> int:
    """:func:`human_readable_int`, plus ``'-1'`` / ``'auto'`` -> :data:`AUTO_FIT`."""
    value = text.strip()
    if value == "-1" or value.lower() == "auto":
        return AUTO_FIT
    return human_readable_int(value)


def setting_name(flag: str) -> str:
    """``'--max-model-len'`` / ``'max_model_len'`` / ``'-tp'`` -> vLLM's setting name."""
    if flag in SHORT_FLAGS:
        return SHORT_FLAGS[flag]
    return flag.lstrip("-").replace("-", "_")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_flags(
    tokens: list[str], values: dict[str, Any], written: list[str] | None = None
) -> str | None:
    """Parse vLLM CLI flags into *values* (by setting name); returns the first positional
    (the model of ``vllm serve MODEL``).

    A flag's value is the next token unless that is another flag (a negative number is a
    value); a bare boolean flag is ``True`` and ``--no-x`` is ``x = False``. Values stay
    text: :func:`int_setting`, :func:`flag_bool` and :func:`json_setting` read them.
    *written*, when given, collects each option as written (``--max_model_len``,
    ``--no-enforce-eager``, ``-q``; without ``=value``).
    """
    positional: str | None = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if written is not None and tok.startswith("-") and len(tok) > 1 and not _is_number(tok):
            written.append(tok.split("=", 1)[0])
        if tok in SHORT_FLAGS:
            key = SHORT_FLAGS[tok]
        elif tok.startswith("--") and len(tok) > 2:
            key = tok[2:]
        else:
            if positional is None and not tok.startswith("-"):
                positional = tok
            continue
        value: Any = True
        if "=" in key:
            key, value = key.split("=", 1)
        key = key.replace("-", "_")
        if value is True:
            nxt = tokens[i] if i < len(tokens) else None
            takes = key not in BOOLEAN_FLAGS or (nxt or "").lower() in {"true", "false"}
            if takes and nxt is not None and (not nxt.startswith("-") or _is_number(nxt)):
                value = nxt
                i += 1
        if key.startswith("no_") and value is True:
            key, value = key[3:], False
        values[key] = value
    return positional


def known_setting(values: Mapping[str, Any], key: str, where: str) -> Any:
    """The setting *key* of *values* as given (``None`` when unset); :class:`UnknownInput`
    naming it and *where* when its value is not known before deploy."""
    value = values.get(key)
    if value is UNKNOWN:
        raise UnknownInput(f"{key} of {where}")
    return value


def int_setting(values: Mapping[str, Any], key: str, where: str = "the engine") -> int | str | None:
    """An integer setting as vLLM reads it: the int, ``None`` when unset, or the raw text
    when vLLM would refuse it (so a rule can quote it).

    Human-readable ints only where vLLM takes them (:data:`HUMAN_READABLE_INT_SETTINGS`;
    ``max_model_len`` ``auto`` is :data:`AUTO_FIT`). Raises ``UnknownInput`` for a value
    not known until deployment.
    """
    value = values.get(key)  # _known inlined: the rules read ~50,000 ints per cluster
    if value is None:
        return None
    if type(value) is int:  # the common case first (a bool is not: its type is bool)
        return value
    if value is UNKNOWN:
        raise UnknownInput(f"{key} of {where}")
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        if key == "max_model_len":
            return human_readable_int_or_auto(text)
        if key in HUMAN_READABLE_INT_SETTINGS:
            return human_readable_int(text)
        return int(text)
    except ValueError:
        return text


def flag_bool(values: Mapping[str, Any], key: str, where: str = "the engine") -> bool | None:
    """A boolean setting (``--flag``, ``--no-flag``, ``--flag=false``, YAML booleans);
    ``None`` when unset or not a boolean."""
    value = known_setting(values, key, where)
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"true", "1", "yes"}:
        return True
    if text in {"false", "0", "no"}:
        return False
    return None


def json_setting(values: Mapping[str, Any], key: str, where: str = "the engine") -> Any:
    """A JSON-valued setting (``--speculative-config '{...}'``): the parsed value, the
    mapping itself when given as YAML (Ray Serve ``engine_kwargs``), ``None`` when unset.
    Raises ``ValueError`` when the text is not JSON vLLM would accept."""
    value = known_setting(values, key, where)
    if value is None or not isinstance(value, str):
        return value
    parts = _JSON_STRING.split(value)
    for i in range(0, len(parts), 2):  # outside quoted strings only, as vLLM
        parts[i] = _JSON_NUMBER.sub(lambda m: str(human_readable_int(m.group())), parts[i])
    return json.loads("".join(parts))
