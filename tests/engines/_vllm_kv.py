"""vLLM's own KV-cache sizing for a model config, without a GPU (harness for the tests).

What is vLLM's and what this module assembles (vLLM 0.33.0, file paths in the package):

vLLM's own, called as the engine calls it:

* ``EngineArgs(...).create_engine_config()`` (``vllm/engine/arg_utils.py``): the whole
  ``VllmConfig`` from a local ``config.json`` (dtype resolution, ``ModelConfig``,
  ``ParallelConfig``, ``CacheConfig`` with ``cache_dtype``/``block_size``/``sliding_window``).
* the model's attention layers, built by vLLM's model code
  (``vllm/model_executor/model_loader/utils.py initialize_model``) on the ``meta`` device at
  TP=1: which layers slide and by how much, head sizes, MLA vs. regular attention come
  from ``llama.py``/``gemma3.py``/``gpt_oss.py``/``deepseek_v2.py``..., not from gpustrata.
* each layer's ``get_kv_cache_spec(vllm_config)`` (``Attention`` in
  ``model_executor/layers/attention/attention.py``, ``MLAAttention`` in ``mla_attention.py``)
  and ``customize_attention_spec`` (``vllm/v1/worker/utils.py``), exactly as
  ``GPUModelRunner.get_kv_cache_spec`` calls them;
* ``get_pp_indices`` (``vllm/distributed/utils.py``) for the layers of each pipeline stage;
* ``get_supported_kv_cache_layouts`` / ``resolve_kv_cache_layout``
  (``vllm/v1/attention/backends/utils.py``), ``get_global_kv_cache_groups`` and
  ``get_kv_cache_configs`` (``vllm/v1/core/kv_cache_planning.py``), in the order
  ``EngineCore._initialize_kv_caches`` (``vllm/v1/engine/core.py``) runs them.

What this module supplies, because a CPU process cannot have it:

* the per-grid-point values ``Attention.__init__`` derives when a layer is built on a
  GPU rank: ``num_kv_heads`` = ``ModelConfig.get_num_kv_heads(parallel_config)`` (what
  every model's attention computes as ``max(1, total_kv_heads // tp)``; checked against
  the TP=1 layer), ``kv_cache_dtype`` = ``cache_config.cache_dtype`` and
  ``kv_cache_torch_dtype`` = ``kv_cache_dtype_str_to_dtype(...)`` (vLLM's function);
* the attention backend class the CUDA platform would pick: FLASH_ATTN for regular
  attention (first in ``vllm/platforms/cuda.py _get_backend_priorities`` on SM 8.x/9.x,
  ``MultipleOf(16)`` block sizes) and TRITON_MLA for MLA (the MLA backend that takes every
  multiple of 16 on every compute capability; FLASH_ATTN_MLA cannot be imported without
  CUDA). For "auto"/"fp8" caches the backend only decides the block size of
  sliding-window layers (``_largest_kernel_block_within``) and the stride alignment;
* one worker per pipeline stage with the same ``available_memory`` each, as
  ``determine_available_memory`` would report. The TP ranks of a stage report identical
  specs (``get_global_kv_cache_groups`` asserts it) and get identical configs, so one
  worker stands for all of them;
* ``cache_config.block_size`` is put back to the grid value after ``CpuPlatform`` forced
  16 on MLA models for its CPU kernel (``vllm/platforms/cpu.py check_and_update_config``;
  the CUDA platform of 0.33 does not override it).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustrata.catalog.architectures import ModelArchitecture

GIB = 1 << 30

# config.json key for the routed-expert count, per model_type (transformers' config classes).
_EXPERT_KEY = {
    "mixtral": "num_local_experts",
    "gpt_oss": "num_local_experts",
    "qwen3_moe": "num_experts",
    "qwen2_moe": "num_experts",
    "deepseek_v3": "n_routed_experts",
    "deepseek_v2": "n_routed_experts",
}
# Multimodal repos whose language model vLLM sizes the cache for: write the text config.
_TEXT_ONLY = {"Gemma3ForConditionalGeneration": ("Gemma3ForCausalLM", "gemma3_text")}


def hf_config(arch: ModelArchitecture) -> dict[str, Any]:
    """A Hugging Face ``config.json`` with the catalogue entry's shape.

    Multimodal entries become their text model (the vision tower has no KV cache);
    ``quantization_config`` is left out (weight quantisation does not change the cache).
    """
    architecture, model_type = _TEXT_ONLY.get(
        arch.architecture, (arch.architecture, arch.model_type)
    )
    cfg: dict[str, Any] = {
        "architectures": [architecture],
        "model_type": model_type,
        "num_hidden_layers": arch.num_hidden_layers,
        "hidden_size": arch.hidden_size,
        "intermediate_size": arch.intermediate_size,
        "num_attention_heads": arch.num_attention_heads,
        "num_key_value_heads": arch.num_key_value_heads,
        "vocab_size": arch.vocab_size,
        "max_position_embeddings": arch.max_position_embeddings,
        "tie_word_embeddings": arch.tie_word_embeddings,
        "torch_dtype": arch.torch_dtype,
    }
    if arch.attention == "mla":
        cfg.update(
            kv_lora_rank=arch.kv_lora_rank,
            qk_rope_head_dim=arch.qk_rope_head_dim,
            qk_nope_head_dim=arch.qk_nope_head_dim,
            v_head_dim=arch.v_head_dim,
            q_lora_rank=arch.q_lora_rank,
        )
    elif not arch.head_dim_derived:
        cfg["head_dim"] = arch.head_dim
    if arch.moe_intermediate_size is not None:
        cfg["moe_intermediate_size"] = arch.moe_intermediate_size
    if arch.num_experts is not None:
        cfg[_EXPERT_KEY.get(str(model_type), "num_experts")] = arch.num_experts
        cfg["num_experts_per_tok"] = arch.num_experts_per_tok
    if arch.attention == "full" and model_type in ("qwen2", "qwen3", "qwen3_moe"):
        cfg["use_sliding_window"] = False
    if arch.sliding_window is not None:
        cfg["sliding_window"] = arch.sliding_window
    if arch.attention == "hybrid_sliding":
        cfg["layer_types"] = list(arch.layer_attention_types())
    return cfg


def write_model_dir(root: Path, arch: ModelArchitecture) -> Path:
    """Write ``<root>/<id with / as __>/config.json`` and return the directory."""
    path = root / arch.id.replace("/", "__")
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(hf_config(arch), indent=1), encoding="utf-8")
    return path


def free_port() -> int:
    """A free TCP port on localhost (for the one-process gloo group)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def engine_config(
    model_dir: Path,
    *,
    tp: int = 1,
    pp: int = 1,
    dtype: str = "auto",
    cache_dtype: str = "auto",
    block_size: int = 16,
    max_model_len: int = 4096,
) -> Any:
    """``VllmConfig`` from vLLM's own ``EngineArgs.create_engine_config`` (no weights)."""
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(
        model=str(model_dir),
        load_format="dummy",
        skip_tokenizer_init=True,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        dtype=dtype,
        kv_cache_dtype=cache_dtype,
        block_size=block_size,
        max_model_len=max_model_len,
        enforce_eager=True,
    )
    cfg = args.create_engine_config()
    cfg.cache_config.block_size = block_size  # undo CpuPlatform's MLA override (see module doc)
    return cfg


@contextmanager
def one_process_group(cfg: Any) -> Iterator[None]:
    """vLLM's distributed state for one CPU process (world size 1, gloo)."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import (
        destroy_distributed_environment,
        destroy_model_parallel,
        ensure_model_parallel_initialized,
        init_distributed_environment,
    )

    with set_current_vllm_config(cfg):
        init_distributed_environment(
            world_size=1,
            rank=0,
            local_rank=0,
            distributed_init_method=f"tcp://127.0.0.1:{free_port()}",
            backend="gloo",
        )
        ensure_model_parallel_initialized(1, 1)
    try:
        yield
    finally:
        destroy_model_parallel()
        destroy_distributed_environment()


@dataclass
class VllmModel:
    """A model's attention layers as vLLM's model code builds them (TP=1, meta device)."""

    path: Path
    layers: dict[str, Any]
    """Attention modules by layer name (``model.layers.3.self_attn.attn``), model order."""
    total_layers: int
    use_mla: bool


def build_model(path: Path) -> VllmModel:
    """Instantiate the model with vLLM's loader on ``meta`` in a one-process group."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import initialize_model

    cfg = engine_config(path)
    # The group is built per model: vLLM creates the expert-parallel group only for MoE
    # configs (vllm/distributed/parallel_state.py initialize_model_parallel).
    with one_process_group(cfg), set_current_vllm_config(cfg), torch.device("meta"):
        model = initialize_model(vllm_config=cfg)
    layers = {n: m for n, m in model.named_modules() if isinstance(m, AttentionLayerBase)}
    mc = cfg.model_config
    if not mc.use_mla:
        heads = {m.num_kv_heads for m in layers.values()}
        # The injected per-rank head count is only valid if the model has one KV width.
        assert heads == {mc.get_total_num_kv_heads()}, (path, heads)
    return VllmModel(path, layers, mc.get_total_num_hidden_layers(), mc.use_mla)


def _backend(use_mla: bool) -> Any:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    name = "TRITON_MLA" if use_mla else "FLASH_ATTN"
    return AttentionBackendEnum[name].get_class()


def worker_specs(model: VllmModel, cfg: Any) -> list[dict[str, Any]]:
    """Per-stage ``{layer: KVCacheSpec}`` the GPU model runners of this config report."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed.utils import get_pp_indices
    from vllm.model_executor.models.utils import extract_layer_index
    from vllm.utils.torch_utils import kv_cache_dtype_str_to_dtype
    from vllm.v1.worker.utils import customize_attention_spec

    mc, pc, cc = cfg.model_config, cfg.parallel_config, cfg.cache_config
    backend = _backend(model.use_mla)
    cache_torch_dtype = kv_cache_dtype_str_to_dtype(cc.cache_dtype, mc)
    specs_by_layer: dict[str, Any] = {}
    with set_current_vllm_config(cfg):
        for name, layer in model.layers.items():
            if not model.use_mla:
                layer.num_kv_heads = mc.get_num_kv_heads(pc)
                layer.kv_cache_torch_dtype = cache_torch_dtype
            layer.kv_cache_dtype = cc.cache_dtype
            layer.attn_backend = backend
            spec = layer.get_kv_cache_spec(cfg)
            specs_by_layer[name] = customize_attention_spec(backend, spec)
    workers = []
    for pp_rank in range(pc.pipeline_parallel_size):
        start, end = get_pp_indices(model.total_layers, pp_rank, pc.pipeline_parallel_size)
        workers.append(
            {n: s for n, s in specs_by_layer.items() if start <= extract_layer_index(n) < end}
        )
    return workers


@dataclass(frozen=True)
class VllmLayout:
    """What vLLM planned for one worker."""

    page_sizes: frozenset[int]
    num_blocks: int
    num_groups: int


def vllm_kv_layout(model: VllmModel, cfg: Any, available: int) -> VllmLayout:
    """``get_kv_cache_configs`` for this config with ``available`` bytes on every worker."""
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        resolve_kv_cache_layout,
    )
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs

    register_all_kvcache_specs(cfg)
    specs = worker_specs(model, cfg)
    names = [layout.name for layout in get_supported_kv_cache_layouts([_backend(model.use_mla)])]
    resolve_kv_cache_layout(cfg, [names] * len(specs), [s for w in specs for s in w.values()])
    groups = get_global_kv_cache_groups(cfg, specs)
    configs = get_kv_cache_configs(cfg, specs, [available] * len(specs), groups)
    assert len({c.num_blocks for c in configs}) == 1
    pages = frozenset(s.page_size_bytes for w in specs for s in w.values())
    return VllmLayout(pages, configs[0].num_blocks, len(configs[0].kv_cache_groups))


def describe(point: Mapping[str, Any]) -> str:
    """``tp=2 pp=1 dtype=bfloat16 cache=fp8 block=32`` for messages."""
    return " ".join(f"{k}={v}" for k, v in point.items())
