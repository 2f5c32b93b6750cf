"""Helpers for tests: the repository root and the reference stacks."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml

ROOT = Path(__file__).resolve().parents[1]
STACKS = ("dev", "staging", "prod")

SMALL_LLAMA_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 16,
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}
"""A private model's Hugging Face config.json (a small Llama), for config.json paths."""


def stack_path(env: str) -> Path:
    """Path of a reference stack file."""
    return ROOT / "stacks" / f"Pulumi.{env}.yaml"


def stack_doc(env: str) -> dict[str, Any]:
    """The `gpustrata:stack` document of a reference stack."""
    data = yaml.safe_load(stack_path(env).read_text(encoding="utf-8"))
    doc: dict[str, Any] = data["config"]["gpustrata:stack"]
    return doc


class _Waits(Protocol):
    @property
    def depends_on(self) -> tuple[str, ...]: ...


def closure(res: Mapping[str, _Waits], name: str) -> set[str]:
    """Everything the resource *name* waits for, transitively (names of registered
    resources, as ``mockrun.Registered.depends_on`` gives them)."""
    seen: set[str] = set()
    todo = list(res[name].depends_on)
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(res[dep].depends_on if dep in res else ())
    return seen
