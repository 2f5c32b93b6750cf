"""Which tensor-parallel sizes vLLM accepts for a model: the one list every message names.

Light on purpose (no catalogue or pydantic import at module level): rule V002 imports it
when ``gpustrata check`` starts, and the capacity planner (:mod:`.kv_cache`) refuses with
the same list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture

__all__ = ["LARGEST_TP_SHOWN", "kv_heads_split", "valid_tp_sizes"]

LARGEST_TP_SHOWN = 64
"""Valid TP sizes are listed up to this size."""


def kv_heads_split(arch: ModelArchitecture, tp: int) -> bool:
    """KV heads split over TP ranks, or replicated evenly (not for MLA's shared latent)."""
    if arch.attention == "mla":
        return True
    kv = arch.num_key_value_heads
    return kv % tp == 0 if kv >= tp else tp % kv == 0


def valid_tp_sizes(arch: ModelArchitecture) -> list[int]:
    """TP sizes (up to 64) vLLM accepts for the model: they divide its attention heads and
    split or evenly replicate its KV heads."""
    return [
        tp
        for tp in range(1, LARGEST_TP_SHOWN + 1)
        if arch.num_attention_heads % tp == 0 and kv_heads_split(arch, tp)
    ]
