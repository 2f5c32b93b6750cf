"""Edge cases a review of the Karpenter, DRA and accelerator readers found: each was a
false positive before its fix (tests/data/review-edges holds the manifests)."""

from __future__ import annotations

from pathlib import Path

from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_paths

EDGES = Path(__file__).resolve().parents[1] / "data" / "review-edges"


def _outcomes(name: str, rule: str) -> tuple[list[str], list[str]]:
    report = evaluate(load_paths([str(EDGES / name)]))
    found = [f.message for f in report.findings if f.rule == rule]
    skipped = [n.reason for n in report.not_evaluated if n.rule == rule]
    return found, skipped


def test_a_claim_of_every_gpu_or_of_alternatives_has_no_count_to_compare() -> None:
    # allocationMode All, and a v1 firstAvailable list: the count is the scheduler's.
    for name in ("edge-dra.yaml", "edge-dra2.yaml"):
        found, skipped = _outcomes(name, "V001")
        assert found == [] and skipped, (name, found)


def test_a_nodepool_that_excludes_gpu_types_is_not_a_gpu_pool() -> None:
    # instance-gpu-count DoesNotExist is how a CPU NodePool keeps GPUs out.
    for rule in ("K016", "K006"):
        found, _ = _outcomes("edge-cpu-np.yaml", rule)
        assert found == [], (rule, found)


def test_k005_does_not_judge_a_nodepool_whose_types_are_not_all_catalogued() -> None:
    found, skipped = _outcomes("edge-k005.yaml", "K005")
    assert found == []
    assert any("gpu" in reason for reason in skipped), skipped


def test_v001_leaves_engines_on_other_accelerators_alone() -> None:
    found, skipped = _outcomes("edge-tpu.yaml", "V001")
    assert found == []
    assert any("google.com/tpu" in reason for reason in skipped), skipped


def test_a_per_node_label_sharing_key_does_not_share_every_gpu() -> None:
    # The operator's config names `any` (no sharing) as default; `a100-40gb` time-slices
    # only nodes labelled for it, so a 2-GPU Pod on a 1-GPU pool still does not fit.
    found, _ = _outcomes("edge-ts-per-label-key.yaml", "K005")
    assert len(found) == 1, found
