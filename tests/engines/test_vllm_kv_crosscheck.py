"""gpustrata's KV-cache block math against vLLM 0.33's own, on a grid of catalogue models.

For every grid point (model x TP x PP x dtype x KV-cache dtype x block size) this asserts
that ``gpustrata.vllm.capacity.kv_cache_blocks`` gives the page size and the block
count that vLLM's ``get_kv_cache_configs`` computes for the same memory budget, from the
KV-cache specs vLLM derives for that model config. Which parts are vLLM's and which this
test assembles is listed in ``_vllm_kv.py`` (module docstring): the config, the model's
attention layers, every layer's ``get_kv_cache_spec`` and the grouping and sizing are
vLLM's own code; the test supplies what a GPU rank would (the per-rank KV-head count
vLLM's ``ModelConfig.get_num_kv_heads`` gives, the cache torch dtype from vLLM's
``kv_cache_dtype_str_to_dtype``, the CUDA attention backend class, one worker per rank).

The number of grid points compared is printed (``-s``) and summed in the terminal summary
("engine cross-checks"). Settings vLLM refuses (a TP size that does not divide the
heads, float16 for Gemma 2, ...) must be refused by gpustrata as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import product
from pathlib import Path
from typing import Any

import pytest
from conftest import engine_module

from gpustrata.catalog.architectures import ModelArchitecture, load_model_catalog
from gpustrata.vllm.capacity import CapacityError, kv_cache_blocks

pytestmark = [
    pytest.mark.engines,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

MAX_MODEL_LEN = 4096
DTYPES = ("bfloat16", "float16")
CACHE_DTYPES = ("auto", "fp8")
BLOCK_SIZES = (16, 32, 64, 128)
TP_SIZES = (1, 2, 4, 8)
# Diverse attention layouts: dense GQA, MHA, MoE, MLA, all-sliding and hybrid sliding.
MODELS: dict[str, tuple[int, ...]] = {
    # model id: pipeline-parallel sizes besides 1 to check
    "meta-llama/Llama-3.1-8B-Instruct": (),
    "meta-llama/Llama-3.1-70B-Instruct": (2, 4),  # dense GQA, 80 layers
    "Qwen/Qwen2.5-7B-Instruct": (),  # 28 heads / 4 KV heads: TP 8 refused
    "Qwen/Qwen3-30B-A3B": (2,),  # MoE, explicit head_dim
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (),  # MoE
    "mistralai/Ministral-8B-Instruct-2410": (),  # every layer sliding (32768)
    "microsoft/Phi-3-mini-4k-instruct": (),  # MHA (32 KV heads), sliding 2047, head 96
    "google/gemma-2-9b-it": (2,),  # hybrid 1:1, head_dim 256
    "google/gemma-3-27b-it": (4,),  # hybrid 5:1, 62 layers (uneven PP split)
    "openai/gpt-oss-20b": (2,),  # hybrid 1:1, sliding 128, attention sinks
    "deepseek-ai/DeepSeek-V3": (2,),  # MLA (kv_lora_rank 512 + rope 64)
}


def _available(index: int) -> int:
    """A different, non-round KV budget per grid point (3 to 33 GiB)."""
    return (3 + (index * 7) % 31) * (1 << 30) + 987_654_321 + index * 4096


def _points(pps: tuple[int, ...]) -> Iterator[dict[str, Any]]:
    for tp, dtype, cache, block in product(TP_SIZES, DTYPES, CACHE_DTYPES, BLOCK_SIZES):
        if dtype == "float16" and block not in (16, 128):
            continue  # fp16 pages equal bf16 pages: two block sizes are enough
        yield {"tp": tp, "pp": 1, "dtype": dtype, "cache": cache, "block": block}
    for pp, tp, cache, block in product(pps, (1, 2), CACHE_DTYPES, (16, 64)):
        yield {"tp": tp, "pp": pp, "dtype": "bfloat16", "cache": cache, "block": block}


def _reason(exc: ValueError) -> str:
    """vLLM's message without pydantic's wrapping."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = next((line for line in lines if line.startswith("Value error, ")), lines[0])
    return text.removeprefix("Value error, ").split(" [type=")[0]


@pytest.fixture(scope="module")
def harness() -> Any:
    """The vLLM harness module (imports vLLM; skips or fails when it is missing)."""
    engine_module("vllm")
    import _vllm_kv

    return _vllm_kv


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of config.json files written from the catalogue."""
    return tmp_path_factory.mktemp("models")


def test_harness_reproduces_the_textbook_llama_page(harness: Any, models_dir: Path) -> None:
    """Sanity of the harness itself: Llama-3.1-8B, bf16, block 16, TP 1.

    2 (K and V) x 8 KV heads x 128 head dim x 2 bytes x 16 tokens = 65536 bytes a page;
    32 layers share one group, so a block costs 32 pages of the budget.
    """
    arch = load_model_catalog().get("meta-llama/Llama-3.1-8B-Instruct")
    assert arch is not None
    path = harness.write_model_dir(models_dir, arch)
    model = harness.build_model(path)
    cfg = harness.engine_config(path, dtype="bfloat16", block_size=16)
    budget = 10 * harness.GIB
    got = harness.vllm_kv_layout(model, cfg, budget)
    assert got.page_sizes == {65536}
    assert got.num_blocks == budget // (32 * 65536)


@pytest.mark.parametrize("model_id", sorted(MODELS))
def test_block_count_and_page_size_equal_vllm(
    model_id: str,
    harness: Any,
    models_dir: Path,
    crosscheck_tally: dict[str, list[int]],
) -> None:
    """kv_cache_blocks == vLLM get_kv_cache_configs on this model's grid (zero difference)."""
    arch: ModelArchitecture | None = load_model_catalog().get(model_id)
    assert arch is not None, f"{model_id} is not in the model catalogue"
    path = harness.write_model_dir(models_dir, arch)
    model = harness.build_model(path)
    compared, refused, differences, unrefused = 0, 0, [], []
    for index, point in enumerate(_points(MODELS[model_id])):
        label = f"{model_id} {harness.describe(point)}"
        budget = _available(index)

        def ours(point: dict[str, Any] = point, budget: int = budget) -> Any:
            return kv_cache_blocks(
                arch,
                tensor_parallel_size=point["tp"],
                pipeline_parallel_size=point["pp"],
                block_size=point["block"],
                cache_dtype=point["cache"],
                model_dtype=point["dtype"],
                available_bytes=budget,
                max_model_len=MAX_MODEL_LEN,
            )

        try:
            cfg = harness.engine_config(
                path,
                tp=point["tp"],
                pp=point["pp"],
                dtype=point["dtype"],
                cache_dtype=point["cache"],
                block_size=point["block"],
                max_model_len=MAX_MODEL_LEN,
            )
        except ValueError as exc:  # vLLM refuses the settings (pydantic errors included)
            reason = _reason(exc)
            try:
                ours()
            except CapacityError:
                refused += 1
                continue
            unrefused.append(f"{label}: vLLM refuses ({reason.strip()}), gpustrata does not")
            continue
        want = harness.vllm_kv_layout(model, cfg, budget)
        got = ours()
        compared += 1
        if want.page_sizes != {got.page_size_bytes} or want.num_blocks != got.num_blocks:
            differences.append(
                f"{label} budget={budget}: vLLM page {sorted(want.page_sizes)} blocks "
                f"{want.num_blocks} ({want.num_groups} groups); gpustrata page "
                f"{got.page_size_bytes} blocks {got.num_blocks}"
            )
    tally = crosscheck_tally.setdefault("vLLM 0.33 KV blocks (get_kv_cache_configs)", [0, 0])
    tally[0] += compared
    tally[1] += len(differences)
    refusals = crosscheck_tally.setdefault("vLLM 0.33 refusals also refused by gpustrata", [0, 0])
    refusals[0] += refused + len(unrefused)
    refusals[1] += len(unrefused)
    print(
        f"{model_id}: {compared} grid points compared, {len(differences)} differ; "
        f"{refused + len(unrefused)} settings vLLM refuses, {len(unrefused)} of them "
        "accepted by gpustrata"
    )
    assert compared > 0
    assert differences == [], "\n".join(differences[:20])
    assert unrefused == [], "\n".join(unrefused[:20])
