"""The vLLM facts behind rules V002, V005 and V006, checked against the installed vLLM 0.33.0.

The rules never import vLLM; they carry what was read in vLLM's sources. Here the real
package (optional ``engines`` extra) confirms the 0.33.0 part of those facts:

* V006: a block size is refused exactly when no CUDA attention backend of 0.33.0 supports
  it (``AttentionBackend.supports_block_size`` of every backend class that imports without
  a GPU), and ``CacheConfig`` takes any positive block size;
* V005: ``EngineArgs.get_batch_defaults`` gives the token and sequence defaults the rule
  uses for every GPU of the hardware catalogue (the platform object is replaced by one
  that reports that GPU's memory and name: the only CUDA-specific inputs of that function),
  and vLLM's own config refuses the settings the rule reports, with the words it quotes;
* V002: ``ModelConfig.verify_with_parallel_config`` refuses exactly the TP sizes that do not
  divide the attention heads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import engine_module

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.catalog.vllm_facts import facts_for
from gpustrata.catalog.vllm_releases import reference_release
from gpustrata_policies.rules.v002_parallelism_fits_model import rule as v002
from gpustrata_policies.rules.v005_batch_budget_covers_context import rule as v005
from gpustrata_policies.rules.v006_block_size_valid import rule as v006
from gpustrata_policies.view.engines import release_key

pytestmark = [
    pytest.mark.engines,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

# Regular and MLA attention backends the CUDA platform of 0.33.0 can pick
# (vllm/platforms/cuda.py _get_backend_priorities). FLASH_ATTN_MLA and CUTLASS_MLA need a
# CUDA runtime to import; their sizes (MultipleOf(16), [128]) are multiples of 16 as well.
REGULAR = ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")
MLA = ("FLASHMLA", "FLASHINFER_MLA", "TOKENSPEED_MLA", "TRITON_MLA")


@pytest.fixture(scope="module")
def vllm() -> Any:
    """The vllm package (skips, or fails under GPUSTRATA_REQUIRE_ENGINES=1, when missing)."""
    return engine_module("vllm")


def _backends(names: tuple[str, ...]) -> list[Any]:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    return [AttentionBackendEnum[n].get_class() for n in names]


@pytest.mark.parametrize("mla", [False, True], ids=["attention", "mla"])
def test_v006_refuses_exactly_what_no_cuda_backend_supports(vllm: Any, mla: bool) -> None:
    backends = _backends(MLA if mla else REGULAR)
    verdict = dict(v006.READ)[release_key(reference_release())].verdict
    for block in range(1, 513):
        supported = any(b.supports_block_size(block) for b in backends)
        for cc in ((8, 0), (9, 0), (10, 0)):
            refused, _ = verdict(block, mla, cc, True)
            assert refused is (not supported), (block, mla, cc)


def test_default_block_sizes_are_the_installed_vllms(vllm: Any) -> None:
    """facts_for's block size of an unset --block-size: CacheConfig.DEFAULT_BLOCK_SIZE, and
    for MLA on the catalogued generations the first MLA backend's smallest kernel page."""
    from vllm.config import CacheConfig
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    facts = facts_for(reference_release())
    plain = facts.block_size(False, "9.0")
    assert plain is not None and plain.value == CacheConfig.DEFAULT_BLOCK_SIZE
    assert facts.block is not None and facts.block.mla
    for m in facts.block.mla:
        sizes = AttentionBackendEnum[m.backend].get_class().get_supported_kernel_block_sizes()
        assert m.value == min(int(s) for s in sizes if isinstance(s, int)), m.backend
        found = facts.block_size(True, f"{m.compute_capability[0]}.0")
        assert found is not None and found.value == m.value


def test_v006_cache_config_takes_any_positive_block_size(vllm: Any) -> None:
    from vllm.config import CacheConfig

    assert CacheConfig(block_size=48).block_size == 48
    with pytest.raises(ValueError):
        CacheConfig(block_size=0)


class _Gpu:
    """A stand-in for vLLM's current_platform reporting one catalogue GPU."""

    def __init__(self, memory_bytes: int, name: str, capability: tuple[int, int]) -> None:
        self._memory, self._name, self._cc = memory_bytes, name, capability

    def get_device_total_memory(self, device_id: int = 0) -> int:
        return self._memory

    def get_device_name(self, device_id: int = 0) -> str:
        return self._name

    def is_device_capability(self, capability: Any, device_id: int = 0) -> bool:
        return tuple(capability) == self._cc if isinstance(capability, tuple) else False

    def is_tpu(self) -> bool:
        return False

    def is_cpu(self) -> bool:
        return False


def test_v005_defaults_equal_get_batch_defaults_for_every_catalogued_gpu(
    vllm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference release's scheduler rows (what facts_for gives the planner, V005 and
    the capacity view) are what the installed vLLM's get_batch_defaults returns."""
    import vllm.engine.arg_utils as arg_utils
    from vllm.usage.usage_lib import UsageContext

    release = dict(v005.READ)[release_key(reference_release())]
    assert release is facts_for(reference_release()).scheduler
    gpus = list(load_hardware_catalog().gpus.values())
    assert len(gpus) >= 8
    for gpu in gpus:
        major, _, minor = gpu.compute_capability.partition(".")
        stub = _Gpu(int(gpu.memory_gib * (1 << 30)), gpu.name, (int(major), int(minor)))
        monkeypatch.setattr(arg_utils, "current_platform", stub)
        tokens, seqs = arg_utils.EngineArgs.get_batch_defaults(world_size=1)
        tier = release.batch_row(gpu.memory_gib, f"{gpu.id} {gpu.name}")
        server = UsageContext.OPENAI_API_SERVER
        assert (tokens[server], seqs[server]) == (tier.tokens, tier.seqs), gpu.id
        # what an engine built outside `vllm serve` (Ray Serve LLM) falls back to
        assert tokens.get(UsageContext.ENGINE_CONTEXT, v005.DEFAULT_TOKENS) == 2048
    assert vllm.config.SchedulerConfig.DEFAULT_MAX_NUM_SEQS == v005.ENGINE_CONTEXT_SEQS
    assert vllm.config.SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS == v005.DEFAULT_TOKENS


@pytest.fixture(scope="module")
def small_model(vllm: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import _vllm_kv

    arch = load_model_catalog().get("meta-llama/Llama-3.2-1B-Instruct")
    assert arch is not None
    return Path(_vllm_kv.write_model_dir(tmp_path_factory.mktemp("models"), arch))


def _config(model: Path, **kwargs: Any) -> Any:
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(model=str(model), load_format="dummy", skip_tokenizer_init=True, **kwargs)
    return args.create_engine_config()


def test_v005_vllm_refuses_an_unchunked_budget_below_max_model_len(small_model: Path) -> None:
    with pytest.raises(
        ValueError,
        match=r"max_num_batched_tokens \(4096\) is smaller than "
        r"max_model_len \(8192\)",
    ):
        _config(
            small_model,
            enable_chunked_prefill=False,
            max_num_batched_tokens=4096,
            max_model_len=8192,
        )
    # 0.33.0 honours the flag (0.11.0 and earlier V1 releases forced chunking on) ...
    config = _config(small_model, enable_chunked_prefill=False, max_model_len=8192)
    assert config.scheduler_config.enable_chunked_prefill is False
    # ... and raises an unset budget to max_model_len, so only a stated one can be too small
    assert config.scheduler_config.max_num_batched_tokens >= 8192


def test_v005_vllm_refuses_a_budget_below_max_num_seqs(small_model: Path) -> None:
    with pytest.raises(
        ValueError,
        match=r"max_num_batched_tokens \(2048\) must be greater "
        r"than or equal to max_num_seqs \(4096\)\.",
    ):
        _config(small_model, max_num_batched_tokens=2048, max_num_seqs=4096, max_model_len=4096)
    # an unset max_num_seqs is lowered to the budget instead (clamp_seqs)
    config = _config(small_model, max_num_batched_tokens=64, max_model_len=4096)
    assert config.scheduler_config.max_num_seqs == 64
    assert dict(v005.READ)[release_key(reference_release())].clamp_seqs


@pytest.mark.parametrize(
    "model_id",
    ["meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "deepseek-ai/DeepSeek-V3"],
)
def test_v002_head_rule_equals_vllm_verify_with_parallel_config(
    vllm: Any, model_id: str, tmp_path: Path
) -> None:
    import _vllm_kv

    arch = load_model_catalog().get(model_id)
    assert arch is not None
    path = _vllm_kv.write_model_dir(tmp_path, arch)
    for tp in range(1, 17):
        ours = any("does not divide its" in p for p in v002.problems(arch, tp, 1))
        try:
            _vllm_kv.engine_config(path, tp=tp, max_model_len=1024)
            refused = False
        except ValueError as exc:
            assert "must be divisible by tensor parallel size" in str(exc)
            refused = True
        assert ours is refused, (model_id, tp)
