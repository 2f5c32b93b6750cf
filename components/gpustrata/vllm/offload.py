"""KV cache held in host memory: vLLM's native CPU offload and LMCache (capacity, K020).

What each spelling pins in the engine container's memory, and how many tokens it holds:

* ``--kv-offloading-size GiB`` (``kv_offloading_backend`` ``native``, the default): vLLM
  configures its ``OffloadingConnector`` with ``cpu_bytes_to_use = size x 2**30``, "the
  total buffer size summed across all TP ranks" (vllm@v<reference>:vllm/config/cache.py,
  ``CacheConfig.kv_offloading_size``; vllm@v<reference>:vllm/config/vllm.py
  ``_post_init_kv_transfer_config``). The CPU spec divides it into chunks of every rank's
  KV (vllm@v<reference>:vllm/v1/kv_offload/cpu/spec.py: ``kv_bytes_per_block x world_size``),
  so it holds ``bytes / (KV bytes per token per GPU x GPUs)`` tokens.
* ``--kv-offloading-backend lmcache``: vLLM connects to a separate LMCache server
  (``LMCacheMPConnector``; "the actual KV storage capacity is managed by the standalone
  LMCache server process, so kv_offloading_size is not propagated",
  vllm@v<reference>:vllm/config/vllm.py): nothing is pinned in the engine's container.
* ``--kv-transfer-config`` naming ``OffloadingConnector`` with
  ``kv_connector_extra_config.cpu_bytes_to_use``: the same buffer, in bytes.
* ``--kv-transfer-config`` naming ``LMCacheConnectorV1`` (LMCache in the vLLM process):
  each worker (GPU rank) builds an LMCache engine whose CPU allocator holds
  ``max_local_cpu_size`` GiB (``LMCACHE_MAX_LOCAL_CPU_SIZE``; default 5.0, on unless
  ``LMCACHE_LOCAL_CPU`` is false: LMCache/LMCache@3ecd72f84ee028571d17a9694d910b5339d33874:
  lmcache/v1/config.py ``_CONFIG_DEFINITIONS``; ``MixedMemoryAllocator(int(
  max_local_cpu_size * 1024**3))`` per engine: LMCache/LMCache@3bafe17fbd0b153a56d6507e264d
  74097f0e8cc1:lmcache/v1/cache_engine.py), each holding that rank's shard of the tokens.
  A config file (``LMCACHE_CONFIG_FILE``) is not read: its size is unknown.

Also pinned on the host, per GPU: ``--cpu-offload-gb`` of weights ("the space in GiB to
offload to CPU, per GPU", vllm@v<reference>:vllm/config/offload.py ``cpu_offload_gb``).
Loading the weights (``weight_loading``) holds them in the container's memory in one of
three ways, read in vllm@v<reference>:vllm/model_executor/model_loader/default_loader.py and
weight_utils.py (``DefaultModelLoader._get_weights_iterator``):

* safetensors, memory-mapped (``--load-format auto|safetensors``, ``safetensors_load_strategy``
  unset, ``lazy`` or ``prefetch``): ``safe_open`` opens each file and reads one tensor at a
  time; the page cache is charged to the container's cgroup but reclaimed before the OOM
  killer runs, so a limit below the weights loads. vLLM's automatic prefetch on NFS/Lustre
  needs the checkpoint within 90% of the cgroup's free memory (``_get_available_ram_bytes``
  "honoring cgroup limits"), so it is skipped under such a limit.
* whole files in process memory (``--load-format pt|npcache``: ``torch.load`` per ``.bin``
  file; ``safetensors_load_strategy eager``: ``load(f.read())``; ``torchao``;
  ``enable_multithread_load`` on safetensors: ``load_file`` for up to ``num_threads``, 8 by
  default, files at once; the Run:ai streamer's CPU buffer): each GPU worker holds whole
  files, so a limit below the weights fails or not depending on the checkpoint's shards.
* everything at once: ``enable_multithread_load`` on ``.bin`` files keeps every file's state
  dict referenced by its list of futures until the load ends
  (``multi_thread_pt_weights_iterator``), in each GPU worker: the weights times the workers.

``<reference>`` is the release catalogue's reference release, in which these were read.
Pure: no Pulumi import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpustrata.vllm.reference import vllm_source

__all__ = [
    "GIB",
    "LMCACHE_DEFAULT_CPU_GIB",
    "VLLM_CACHE_SRC",
    "VLLM_CPU_SPEC_SRC",
    "VLLM_LOADER_SRC",
    "VLLM_OFFLOAD_SRC",
    "VLLM_WEIGHTS_SRC",
    "HostMemory",
    "WeightLoading",
    "host_memory",
    "weight_loading",
]

GIB = 1 << 30
LMCACHE_DEFAULT_CPU_GIB = 5.0
"""LMCache's ``max_local_cpu_size`` default (GiB)."""
VLLM_CACHE_SRC = vllm_source("vllm/config/cache.py")
VLLM_OFFLOAD_SRC = vllm_source("vllm/config/vllm.py")
VLLM_WEIGHTS_SRC = vllm_source("vllm/config/offload.py")
VLLM_CPU_SPEC_SRC = vllm_source("vllm/v1/kv_offload/cpu/spec.py")
VLLM_LOADER_SRC = vllm_source("vllm/model_executor/model_loader/weight_utils.py")
_LOAD_CONFIG_SRC = vllm_source("vllm/config/load.py")
LMCACHE_SRC = "LMCache/LMCache@3ecd72f84ee028571d17a9694d910b5339d33874:lmcache/v1/config.py"


@dataclass(frozen=True)
class HostMemory:
    """What one engine pins in its container's memory beyond the engine processes."""

    kv_bytes: int
    """Host KV cache (offload buffer) in the engine's container."""
    kv_tokens: int | None
    """Tokens the host KV cache holds (None: no KV bytes per token given)."""
    weight_bytes: int
    """Weights offloaded to the CPU (``cpu_offload_gb`` x GPUs)."""
    parts: tuple[str, ...]
    """One line per part with its source (``kv_offloading_size 40 GiB (native, ...)``)."""

    @property
    def total_bytes(self) -> int:
        """Host KV plus offloaded weights."""
        return self.kv_bytes + self.weight_bytes


def _number(value: Any, what: str) -> float | str | None:
    if value is None or value is False:
        return None
    try:
        number = float(str(value))
    except ValueError:
        return f"{what} {value!r} is not a number"
    if number < 0:
        return f"{what} {value!r} is negative"
    return number


def _json_object(name: str, value: Any) -> Mapping[str, Any] | str | None:
    """The JSON-object setting *name* (a mapping, or its JSON text); ``None`` when unset; a
    string says why it is not one."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value
    try:
        data = json.loads(str(value))
    except ValueError:
        return f"{name} {str(value)[:80]!r} is not JSON"
    return data if isinstance(data, Mapping) else f"{name} is not a JSON object"


def _flag(value: str | None) -> bool:
    return value is None or value.strip().lower() in ("1", "true", "yes", "on")


def host_memory(
    values: Mapping[str, Any],
    env: Mapping[str, str],
    gpus: int,
    kv_bytes_per_token: int | None = None,
) -> HostMemory | str:
    """What the engine with these settings (flag names with ``_``), literal *env* and
    *gpus* (TP x PP in the container) pins on the host; *kv_bytes_per_token* is the KV
    one token costs on one GPU (the capacity estimate's). Returns why it is unknown
    when a value cannot be read (an LMCache config file, a malformed number)."""
    parts: list[str] = []
    kv_bytes = 0
    per_gpu_tokens: float | None = None  # host bytes of one rank's shard of the tokens
    size = _number(values.get("kv_offloading_size"), "kv_offloading_size")
    if isinstance(size, str):
        return size
    backend = str(values.get("kv_offloading_backend") or "native")
    if size:
        if backend == "lmcache":
            parts.append(
                f"kv_offloading_size {size:g} GiB with the lmcache backend: held by the "
                f"LMCache server process, not this container ({VLLM_OFFLOAD_SRC})"
            )
        else:
            kv_bytes = int(size * GIB)
            per_gpu_tokens = kv_bytes / max(gpus, 1)
            parts.append(
                f"kv_offloading_size {size:g} GiB: vLLM's native CPU offload, the total over "
                f"{gpus} GPU rank(s), {VLLM_CACHE_SRC}"
            )
    transfer = _json_object("kv_transfer_config", values.get("kv_transfer_config"))
    if isinstance(transfer, str):
        return transfer
    connector = str(transfer.get("kv_connector", "")) if transfer else ""
    if connector == "OffloadingConnector" and not size:
        extra = transfer.get("kv_connector_extra_config") if transfer else None
        raw = extra.get("cpu_bytes_to_use") if isinstance(extra, Mapping) else None
        found = _number(raw, "cpu_bytes_to_use")
        if isinstance(found, str):
            return found
        if found:
            kv_bytes = int(found)
            per_gpu_tokens = kv_bytes / max(gpus, 1)
            parts.append(
                f"OffloadingConnector cpu_bytes_to_use {int(found):,}: the total over {gpus} "
                f"GPU rank(s), {VLLM_CPU_SPEC_SRC}"
            )
    elif connector.startswith("LMCacheConnector"):
        if env.get("LMCACHE_CONFIG_FILE"):
            return (
                f"LMCache reads its sizes from the config file {env['LMCACHE_CONFIG_FILE']}, "
                "which is not in the manifest"
            )
        if _flag(env.get("LMCACHE_LOCAL_CPU")):
            raw_size = env.get("LMCACHE_MAX_LOCAL_CPU_SIZE")
            found = _number(raw_size, "LMCACHE_MAX_LOCAL_CPU_SIZE")
            if isinstance(found, str):
                return found
            gib = LMCACHE_DEFAULT_CPU_GIB if raw_size is None else (found or 0.0)
            how = (
                f"LMCACHE_MAX_LOCAL_CPU_SIZE {raw_size}"
                if raw_size is not None
                else f"max_local_cpu_size unset: LMCache's default {LMCACHE_DEFAULT_CPU_GIB:g}"
            )
            kv_bytes += int(gib * GIB) * gpus
            per_gpu_tokens = gib * GIB
            parts.append(
                f"LMCache in the vLLM process ({connector}): {how} GiB per GPU rank x {gpus}, "
                f"{LMCACHE_SRC}"
            )
    weights = _number(values.get("cpu_offload_gb"), "cpu_offload_gb")
    if isinstance(weights, str):
        return weights
    weight_bytes = int((weights or 0.0) * GIB) * gpus
    if weight_bytes:
        parts.append(f"cpu_offload_gb {weights:g} GiB per GPU x {gpus}, {VLLM_WEIGHTS_SRC}")
    tokens = None
    if per_gpu_tokens is not None and kv_bytes_per_token:
        tokens = int(per_gpu_tokens // kv_bytes_per_token)
    return HostMemory(kv_bytes, tokens, weight_bytes, tuple(parts))


@dataclass(frozen=True)
class WeightLoading:
    """How the engine's loader holds the weights in its container's memory."""

    holds: Literal["pages", "files", "all", "none"]
    """``pages``: memory-mapped, reclaimable page cache; ``files``: whole checkpoint files
    in each GPU worker's memory; ``all``: every file at once in each worker; ``none``:
    nothing read through host memory (dummy weights, direct-to-GPU loaders)."""
    how: str
    """The load path in words, with its source."""


_DIRECT = ("dummy", "fastsafetensors", "instanttensor", "ipc_cache")
_SAFETENSORS = ("auto", "safetensors", "mistral")


def weight_loading(values: Mapping[str, Any]) -> WeightLoading | str:
    """How vLLM's loader with these settings (flag names with ``_``) holds the weights on
    the host; a string says why it is not known (an unread load format, bad JSON)."""
    fmt = str(values.get("load_format") or "auto").strip().lower()
    strategy = values.get("safetensors_load_strategy")
    extra = _json_object("model_loader_extra_config", values.get("model_loader_extra_config"))
    if extra is None:
        extra = {}
    if isinstance(extra, str):
        return extra
    threads = extra.get("enable_multithread_load") is True
    if fmt in _DIRECT:
        return WeightLoading("none", f"--load-format {fmt} reads no weights through host memory")
    if fmt in ("pt", "npcache"):
        if threads and fmt == "pt":
            return WeightLoading(
                "all",
                "--load-format pt with enable_multithread_load keeps every .bin file's tensors "
                "referenced by the loader's list of futures until the load ends, in each GPU "
                f"worker ({VLLM_LOADER_SRC} multi_thread_pt_weights_iterator)",
            )
        return WeightLoading(
            "files",
            f"--load-format {fmt} reads each whole .bin file into each GPU worker's memory "
            f"with torch.load ({VLLM_LOADER_SRC} pt_weights_iterator)",
        )
    if fmt.startswith("runai_streamer"):
        return WeightLoading(
            "files",
            f"--load-format {fmt} streams the files through a CPU buffer (memory_limit in "
            "model_loader_extra_config or RUNAI_STREAMER_MEMORY_LIMIT, not read here)",
        )
    if fmt not in _SAFETENSORS:
        return f"how --load-format {fmt} holds the weights in host memory is not read"
    if threads:
        return WeightLoading(
            "files",
            "enable_multithread_load reads up to num_threads (8 by default) whole safetensors "
            f"files into each GPU worker's memory at once ({VLLM_LOADER_SRC} "
            "multi_thread_safetensors_weights_iterator)",
        )
    if strategy in ("eager", "torchao"):
        return WeightLoading(
            "files",
            f"safetensors_load_strategy {strategy} reads each whole file into each GPU "
            f"worker's memory ({VLLM_LOADER_SRC} safetensors_weights_iterator)",
        )
    return WeightLoading(
        "pages",
        f"safetensors are memory-mapped (safetensors_load_strategy {strategy or 'unset'}, "
        f"{_LOAD_CONFIG_SRC}) and read one tensor at a time; the page cache they fill is "
        "charged to the container but reclaimed before the OOM killer runs",
    )
