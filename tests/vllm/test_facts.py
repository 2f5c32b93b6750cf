"""facts_for: one resolver of a release's engine defaults, read from the catalogue.

The expected values here come from the catalogue file itself (parsed as plain YAML, not
through the loader), so a catalogue edit that the planner, the capacity view or V005 did
not follow fails a test.
"""

from __future__ import annotations

import dataclasses
import itertools
from importlib import resources
from typing import Any

import pytest

from gpustrata.catalog import vllm_releases as vr
from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.catalog.hardware import GpuModel, load_hardware_catalog
from gpustrata.catalog.vllm_facts import facts_for, scheduler_releases
from gpustrata.catalog.vllm_release_types import VllmReleaseCatalogError, VllmReleases
from gpustrata.core.yamlio import safe_load
from gpustrata.vllm.capacity import estimate_capacity
from gpustrata.vllm.memory import cuda_total_bytes
from gpustrata.vllm.terms import GIB
from gpustrata_policies.rules.v005_batch_budget_covers_context import rule as v005
from gpustrata_policies.view.engines import release_key


def _raw() -> dict[str, Any]:
    text = resources.files("gpustrata.catalog").joinpath("data", "vllm-releases.yaml")
    doc: dict[str, Any] = safe_load(text.read_text("utf-8"))
    return doc


def _row(rows: list[dict[str, Any]], gpu: GpuModel) -> dict[str, Any]:
    """The first row whose min_gib the GPU's CUDA memory reaches (A100 skipped where
    marked): EngineArgs.get_batch_defaults, as the catalogue writes it."""
    total = cuda_total_bytes(gpu) / GIB
    for row in rows:
        a100 = "a100" in f"{gpu.id} {gpu.name}".lower()
        if total >= row["min_gib"] and not (row.get("not_a100") and a100):
            return row
    raise AssertionError(f"no fallback row for {gpu.id}")


GPUS = list(load_hardware_catalog().gpus.values())
RAW = _raw()
SCHEDULER = RAW["scheduler"]["releases"]


@pytest.mark.parametrize("entry", SCHEDULER, ids=[r["version"] for r in SCHEDULER])
def test_every_catalogued_release_resolves_to_its_catalogue_rows(entry: dict[str, Any]) -> None:
    """For every release of ``scheduler.releases``, facts_for (what the planner and V005
    use) gives each catalogued GPU the catalogue's row, cited to that release's source."""
    facts = facts_for(entry["version"])
    assert facts.scheduler is not None and facts.scheduler.version == entry["version"]
    # V005 judges with the same rows, not a copy
    assert dict(v005.READ)[release_key(entry["version"])] is facts.scheduler
    for gpu in GPUS:
        total, label = cuda_total_bytes(gpu) / GIB, f"{gpu.id} {gpu.name}"
        want = _row(entry["batch_defaults"], gpu)
        tokens, seqs = facts.max_num_batched_tokens(total, label), facts.max_num_seqs(total, label)
        assert tokens is not None and seqs is not None
        assert (tokens.value, seqs.value) == (want["tokens"], want["seqs"]), gpu.id
        assert tokens.source == entry["source"] and tokens.read_in == entry["version"]


@pytest.mark.parametrize("row", RAW["memory_defaults"], ids=[r[0] for r in RAW["memory_defaults"]])
def test_every_catalogued_memory_default_resolves(row: list[Any]) -> None:
    version, value, path = row
    found = facts_for(version).gpu_memory_utilization
    assert found is not None
    assert (found.value, found.source) == (value, f"vllm@v{version}:{path}")


def test_the_planner_uses_the_reference_release_catalogue_values() -> None:
    """estimate_capacity with nothing set: every default it applies is the reference
    release's catalogue value, for every catalogued GPU."""
    reference = RAW["reference"]["version"]
    entry = next(r for r in SCHEDULER if r["version"] == reference)
    block = next(b for b in RAW["block_size"] if b["version"] == reference)
    memory = next(m for m in RAW["memory_defaults"] if m[0] == reference)
    models = load_model_catalog()
    plain, mla = (
        models.get("meta-llama/Llama-3.1-8B-Instruct"),
        models.get("deepseek-ai/DeepSeek-V3"),
    )
    assert plain is not None and mla is not None and mla.attention == "mla"
    mla_majors = {c: m["value"] for m in block["mla"] for c in m["compute_capability"]}
    for gpu in GPUS:
        want = _row(entry["batch_defaults"], gpu)
        est = estimate_capacity(plain, gpu, max_model_len=4096)
        assert (est.max_num_batched_tokens, est.max_num_seqs) == (want["tokens"], want["seqs"])
        assert est.block_size == block["default"]["value"]
        assert est.gpu_memory_utilization == memory[1]
        assert f"vllm {reference} vllm/engine/arg_utils.py" in est.defaults["max_num_seqs"]
        est = estimate_capacity(mla, gpu, tensor_parallel_size=8, max_model_len=4096)
        major = int(gpu.compute_capability.split(".")[0])
        assert est.block_size == mla_majors.get(major, block["default"]["value"]), gpu.id


def _with_reference_tokens(tokens: int) -> VllmReleases:
    """The loaded catalogue with the reference release's top scheduler row changed."""
    cat = vr.load_vllm_releases()
    ref = next(r for r in cat.scheduler if r.version == cat.reference)
    top = dataclasses.replace(ref.batch_defaults[0], tokens=tokens)
    changed = dataclasses.replace(ref, batch_defaults=(top, *ref.batch_defaults[1:]))
    scheduler = tuple(changed if r is ref else r for r in cat.scheduler)
    return dataclasses.replace(cat, scheduler=scheduler)


def test_a_changed_catalogue_tier_changes_the_planner(monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner reads the tier from the catalogue on each estimate: editing the
    reference release's top row moves its number (and V005's facts) with its citation."""
    cat = vr.load_vllm_releases()
    top = next(r for r in cat.scheduler if r.version == cat.reference).batch_defaults[0]
    gpu = next(g for g in GPUS if cuda_total_bytes(g) / GIB >= top.min_gib)
    arch = load_model_catalog().get("meta-llama/Llama-3.1-8B-Instruct")
    assert arch is not None
    before = estimate_capacity(arch, gpu, max_model_len=4096).max_num_batched_tokens
    assert before == top.tokens
    changed = _with_reference_tokens(top.tokens + 7)
    monkeypatch.setattr(vr, "load_vllm_releases", lambda: changed)
    after = estimate_capacity(arch, gpu, max_model_len=4096)
    assert after.max_num_batched_tokens == top.tokens + 7
    assert f": {top.tokens + 7} (vllm {cat.reference} " in after.defaults["max_num_batched_tokens"]
    assert scheduler_releases()[-1].batch_defaults[0].tokens == top.tokens + 7


def test_a_release_between_read_ones_takes_them_only_where_they_agree() -> None:
    versions = [r.version for r in scheduler_releases()]
    rows = {r.version: r for r in scheduler_releases()}
    pairs = list(itertools.pairwise(versions))
    agree = next(
        (lo, hi)
        for lo, hi in pairs
        if rows[lo].batch_defaults == rows[hi].batch_defaults
        and rows[lo].chunked_forced == rows[hi].chunked_forced
        and rows[lo].clamp_seqs == rows[hi].clamp_seqs
        and _inside(lo, hi) is not None
    )
    differ = next(
        (lo, hi)
        for lo, hi in pairs
        if rows[lo].batch_defaults != rows[hi].batch_defaults and _inside(lo, hi) is not None
    )
    inside = _inside(*agree)
    assert inside is not None and facts_for(inside).scheduler is rows[agree[0]]
    inside = _inside(*differ)
    assert inside is not None and facts_for(inside).scheduler is None
    assert facts_for("latest").scheduler is None  # not a release: nothing read
    assert facts_for("0.0.1").max_num_seqs(80.0, "h100") is None


def _inside(low: str, high: str) -> str | None:
    """A patch release strictly between two read releases, if one fits."""
    major, minor, patch = [*low.split("."), "0", "0"][:3]
    if not patch.isdigit():
        return None
    candidate = f"{major}.{minor}.{int(patch) + 1}"
    key = release_key(candidate)
    return candidate if release_key(low) < key < release_key(high) else None


def test_a_catalogue_without_the_reference_memory_default_is_refused() -> None:
    doc = _raw()
    reference = doc["reference"]["version"]
    doc["memory_defaults"] = [r for r in doc["memory_defaults"] if r[0] != reference]
    with pytest.raises(VllmReleaseCatalogError, match="memory_defaults has no row"):
        vr.releases_from_document(doc)
