"""The reference vLLM release the capacity arithmetic follows, and where each formula was read.

The release comes from the release catalogue (``catalog/data/vllm-releases.yaml``); ``SRC_*``
name the files of that release each formula follows, in the prose form of :func:`vllm_source`.
"""

from __future__ import annotations

from gpustrata.catalog.vllm_facts import cited
from gpustrata.catalog.vllm_releases import minor_release, reference_release

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
    "vllm_source",
]


VLLM_VERSION = reference_release()
"""The reference vLLM release, whose arithmetic and defaults this module follows."""


def vllm_source(path: str, *, prose: bool = False) -> str:
    """Where a fact was read in the reference release's *path* (``path`` may end in the
    function's name): ``vllm@vX.Y.Z:path`` as the catalogue cites a file, or with *prose*
    ``vllm X.Y.Z path`` as messages do (:func:`~gpustrata.catalog.vllm_facts.cited`)."""
    source = f"vllm@v{VLLM_VERSION}:{path}"
    return cited(source) if prose else source


SRC_VLLM = vllm_source("", prose=True)
"""``vllm X.Y.Z``: the prefix of every source reference."""
VLLM_SERIES = minor_release(VLLM_VERSION)
"""``X.Y`` of the reference release, for prose."""
SRC_KV_SPEC = vllm_source("vllm/v1/kv_cache_interface.py", prose=True)
SRC_KV_PLAN = vllm_source("vllm/v1/core/kv_cache_planning.py", prose=True)
SRC_KV_UTILS = vllm_source("vllm/v1/core/kv_cache_utils.py", prose=True)
SRC_MODEL_CONFIG = vllm_source("vllm/config/model.py", prose=True)
SRC_ATTENTION = vllm_source("vllm/model_executor/layers/attention/attention.py", prose=True)
SRC_WORKER = vllm_source("vllm/v1/worker/gpu_worker.py determine_available_memory", prose=True)
SRC_PROFILING = vllm_source("vllm/utils/mem_utils.py memory_profiling", prose=True)
SRC_ARG_UTILS = vllm_source("vllm/engine/arg_utils.py", prose=True)
SRC_PP = vllm_source("vllm/distributed/utils.py get_pp_indices", prose=True)
