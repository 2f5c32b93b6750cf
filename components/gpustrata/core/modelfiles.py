"""Read a model's own JSON files (``config.json``, ``model.safetensors.index.json``) from
folders the reviewer did not write: the one reader of them.

:func:`read_model_json` resolves the final file (every symbolic link, the last one
included) and refuses it unless it lies inside the folder it must stay in, then reads it
with the guards of every untrusted file: regular files only (``core/textfiles``), a size
cap checked before reading, UTF-8 without NUL bytes, strict JSON (``core/jsonio``: no
repeated keys, no integer over 4,300 digits) and a nesting limit. :func:`read_model_config`
adds the bounds of the shape fields (layers, heads, experts, widths) before any caller
sizes anything from them. Errors are :class:`ModelFileError` (exit 2): one line naming the
file, the field, the value (cut and escaped) and the fix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpustrata.core import jsonio
from gpustrata.core.errors import InputError
from gpustrata.core.terminal import clipped, printable
from gpustrata.core.textfiles import TextFileError, read_text_file

__all__ = [
    "CONFIG_BOUNDS",
    "CONFIG_MAX_BYTES",
    "INDEX_MAX_BYTES",
    "MAX_DEPTH",
    "ModelFileError",
    "read_model_config",
    "read_model_json",
]

CONFIG_MAX_BYTES = 4 << 20
"""The largest config.json read (published ones are under 100 KB)."""
INDEX_MAX_BYTES = 64 << 20
"""The largest model.safetensors.index.json read (one entry per tensor: a few MB)."""
MAX_DEPTH = 32
"""Nesting levels of a model file (Hugging Face configs use four or five)."""

_LAYERS = 1024  # published models: 126 layers at most (Llama 3.1 405B)
_HEADS = 4096
_WIDTH = 1 << 20
CONFIG_BOUNDS: Mapping[str, int] = {
    "num_hidden_layers": _LAYERS,
    "num_attention_heads": _HEADS,
    "num_key_value_heads": _HEADS,
    "head_dim": 1 << 16,
    "hidden_size": _WIDTH,
    "intermediate_size": _WIDTH,
    "moe_intermediate_size": _WIDTH,
    "shared_expert_intermediate_size": _WIDTH,
    "intermediate_size_mlp": _WIDTH,
    "num_experts": 1 << 16,
    "num_local_experts": 1 << 16,
    "n_routed_experts": 1 << 16,
    "n_shared_experts": 1 << 16,
    "num_experts_per_tok": 1 << 16,
    "experts_per_token": 1 << 16,
    "moe_topk": 1 << 16,
    "first_k_dense_replace": _LAYERS,
    "interleave_moe_layer_step": _LAYERS,
    "sliding_window_pattern": _LAYERS,
    "no_rope_layer_interval": _LAYERS,
    "full_attention_interval": _LAYERS,
    "linear_num_key_heads": 1 << 16,
    "linear_num_value_heads": 1 << 16,
    "linear_key_head_dim": 1 << 16,
    "linear_value_head_dim": 1 << 16,
    "linear_conv_kernel_dim": 1 << 10,
    "kv_lora_rank": 1 << 16,
    "q_lora_rank": 1 << 16,
    "qk_rope_head_dim": 1 << 16,
    "qk_nope_head_dim": 1 << 16,
    "v_head_dim": 1 << 16,
    "vocab_size": 1 << 24,
    "max_position_embeddings": 1 << 30,
    "sliding_window": 1 << 30,
    "attention_chunk_size": 1 << 30,
}
"""The largest value of each shape field a config.json may give (its section's per-layer
lists, ``layer_types`` and ``no_rope_layers``, may have ``num_hidden_layers``' bound of
items). Each is far above any published model and low enough that sizing from it
allocates and computes nothing large."""
_LAYER_LISTS = ("layer_types", "no_rope_layers")


class ModelFileError(InputError):
    """A model file that cannot be used: ``file: field: value and fix`` (exit 2)."""


def _fail(file: Path, message: str) -> ModelFileError:
    return ModelFileError(printable(f"{file}: {message}"))


def _resolved(path: Path, inside: Path | None) -> Path:
    """*path* with every link resolved, refused unless inside *inside* (resolved too)."""
    try:
        target = path.resolve(strict=True)
    except FileNotFoundError:
        if path.is_symlink():
            raise _fail(path, "a symbolic link to nothing; point it at a config.json") from None
        raise _fail(path, "cannot be read: no such file") from None
    except (OSError, RuntimeError):  # a link loop, a name too long
        raise _fail(path, "cannot be resolved (a link loop?); give the file itself") from None
    if inside is not None:
        root = inside.resolve()
        if target != root and root not in target.parents:
            raise _fail(
                path,
                f"resolves outside {root} (through a symbolic link); gpustrata reads model "
                "files only inside it: copy the file in",
            )
    return target


def _depth(value: Any) -> int:
    """The nesting depth of a parsed JSON value (iterative: no recursion limit)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            subs = item.values() if isinstance(item, dict) else item
            todo.extend((sub, depth + 1) for sub in subs)
    return deepest


def read_model_json(
    path: Path, inside: Path | None, max_bytes: int = CONFIG_MAX_BYTES
) -> dict[str, Any]:
    """The JSON object in the model file *path*, read only if it resolves inside *inside*
    (``None``: anywhere, for a path the user typed) and is at most *max_bytes* long.

    Raises :class:`ModelFileError` naming the file and what is wrong with it.
    """
    file = _resolved(path, inside)
    try:
        text = read_text_file(file, max_bytes=max_bytes)
    except TextFileError as exc:
        raise _fail(path, f"{exc.reason}") from None
    try:
        root = jsonio.loads(text)
    except jsonio.JsonShapeError as exc:
        line = f"line {exc.line}: " if exc.line else ""
        raise _fail(path, f"{line}{exc}") from None
    except json.JSONDecodeError as exc:
        raise _fail(path, f"line {exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise _fail(path, f"nested too deeply to read (over {MAX_DEPTH} levels)") from None
    if not isinstance(root, dict):
        raise _fail(path, "not a JSON object; a model file is one {...} object")
    if _depth(root) > MAX_DEPTH:
        raise _fail(path, f"nested over {MAX_DEPTH} levels; a model file is a few levels deep")
    return root


def _check_bounds(file: Path, section: Mapping[str, Any], prefix: str) -> None:
    for key, limit in CONFIG_BOUNDS.items():
        value = section.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue  # absent, null or not a number: the caller's type check names it
        if not (math.isfinite(value) and 0 <= value <= limit):
            shown = clipped(repr(value) if isinstance(value, float) else str(value))
            raise _fail(
                file,
                f"{prefix}{key}: {shown} is out of range (0 to {limit:,}); no model has that "
                "many: fix the config.json",
            )
    for key in _LAYER_LISTS:
        value = section.get(key)
        if isinstance(value, list) and len(value) > _LAYERS:
            raise _fail(
                file,
                f"{prefix}{key}: {len(value):,} items, over {_LAYERS:,} (the most layers "
                "read): fix the config.json",
            )


def read_model_config(path: Path, inside: Path | None) -> dict[str, Any]:
    """A model's ``config.json`` (:func:`read_model_json`) whose shape fields, at the top
    level and in ``text_config``, are within :data:`CONFIG_BOUNDS`."""
    root = read_model_json(path, inside, CONFIG_MAX_BYTES)
    _check_bounds(path, root, "")
    text = root.get("text_config")
    if isinstance(text, dict):
        _check_bounds(path, text, "text_config.")
    return root
