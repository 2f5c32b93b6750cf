"""The reference vLLM release the capacity arithmetic follows, and where each formula was read.

The release comes from the release catalogue (``catalog/data/vllm-releases.yaml``); ``SRC_*``
name the files of that release each formula follows.
"""

from __future__ import annotations

from gpustrata.catalog.vllm_releases import load_vllm_releases

__all__ = [
    "SRC_ARG_UTILS",
    "SRC_ATTENTION",
    "SRC_KV_PLAN",
    "SRC_KV_SPEC",
    "SRC_KV_UTILS",
    "SRC_MODEL_CONFIG",
    "SRC_PP",
    "SRC_PROFILING",
    "SRC_VLLM",
    "SRC_WORKER",
    "VLLM_SERIES",
    "VLLM_VERSION",
]


VLLM_VERSION = load_vllm_releases().reference
"""The reference vLLM release, whose arithmetic and defaults this module follows."""
SRC_VLLM = f"vllm {VLLM_VERSION}"
"""``vllm X.Y.Z``: the prefix of every source reference."""
VLLM_SERIES = ".".join(VLLM_VERSION.split(".")[:2])
"""``X.Y`` of the reference release, for prose."""
SRC_KV_SPEC = f"{SRC_VLLM} vllm/v1/kv_cache_interface.py"
SRC_KV_PLAN = f"{SRC_VLLM} vllm/v1/core/kv_cache_planning.py"
SRC_KV_UTILS = f"{SRC_VLLM} vllm/v1/core/kv_cache_utils.py"
SRC_MODEL_CONFIG = f"{SRC_VLLM} vllm/config/model.py"
SRC_ATTENTION = f"{SRC_VLLM} vllm/model_executor/layers/attention/attention.py"
SRC_WORKER = f"{SRC_VLLM} vllm/v1/worker/gpu_worker.py determine_available_memory"
SRC_PROFILING = f"{SRC_VLLM} vllm/utils/mem_utils.py memory_profiling"
SRC_ARG_UTILS = f"{SRC_VLLM} vllm/engine/arg_utils.py"
SRC_PP = f"{SRC_VLLM} vllm/distributed/utils.py get_pp_indices"
