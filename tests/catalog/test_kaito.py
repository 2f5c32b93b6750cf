"""KAITO's preset facts per release (catalog/data/kaito-presets.yaml, written by
tools/kaito_presets.py from kaito-project/kaito's vX.Y.Z tags)."""

from __future__ import annotations

import re

import pytest

from gpustrata.catalog.kaito import (
    EstimatorInputs,
    base_image_vllm,
    defining,
    estimate_nodes,
    kaito_release,
    kaito_releases,
)


def test_releases_are_ordered_and_cited_per_tag() -> None:
    releases = kaito_releases()
    assert releases[0] == "0.4.6"  # the first tag with a shared kaito-base image
    key = [tuple(int(p) for p in r.split(".")) for r in releases]
    assert key == sorted(key)
    for release in releases:
        found = kaito_release(release)
        assert found is not None
        assert found.source.startswith(f"kaito-project/kaito@v{release} (supported_models.yaml")
        assert re.fullmatch(
            r"mcr\.microsoft\.com/aks/kaito/kaito-base:\d+\.\d+\.\d+", found.base_image
        )
        assert re.fullmatch(r"\d+\.\d+\.\d+(\.\d+)?", found.vllm)
        assert found.parallelism in {"all-gpus", "data-parallel-when-fits"}
        assert found.node_count in {"resource.count", "estimated"}


def test_release_0_12_0() -> None:
    """v0.12.0: supported_models.yaml's base tag 0.5.0 (runtimeVersion.vllm equal to the
    requirements.txt pin), configureParallelism's data-parallel tier, the node estimator,
    --gpu-memory-utilization 0.84 with the A10 at 0.82."""
    found = kaito_release("v0.12.0")
    assert found is not None and found.release == "0.12.0"
    assert found.base_image.endswith("kaito-base:0.5.0")
    assert found.parallelism == "data-parallel-when-fits"
    assert found.node_count == "estimated"
    assert found.gpu_memory_utilization == "0.84"
    assert found.gpu_memory_utilization_by_gpu == {"NVIDIA A10": "0.82"}
    llama = found.presets["llama-3.3-70b-instruct"]
    assert llama.model == "meta-llama/Llama-3.3-70B-Instruct"
    assert llama.revision.startswith("6f6073b")


def test_early_releases_use_resource_count_and_every_gpu() -> None:
    """Before v0.7.0 resource.count was the node count and --tensor-parallel-size the
    node's GPU count; --gpu-memory-utilization was computed from the GPU."""
    old = kaito_release("0.6.2")
    assert old is not None
    assert (old.parallelism, old.node_count) == ("all-gpus", "resource.count")
    assert old.gpu_memory_utilization is None
    assert kaito_release("0.7.0") is not None
    assert kaito_release("0.7.0").node_count == "estimated"  # type: ignore[union-attr]
    assert kaito_release("0.99.0") is None


def test_defining_lists_the_releases_of_a_preset() -> None:
    """gpt-oss-120b first appears at v0.7.0, gemma-3-27b-instruct at v0.8.0."""
    assert defining("gpt-oss-120b")[0].release == "0.7.0"
    assert defining("gemma-3-27b-instruct")[0].release == "0.8.0"
    assert defining("mistral-7b-instruct")[0].release == "0.4.6"
    assert defining("no-such-preset") == ()
    revisions = {r.presets["mistral-7b-instruct"].revision for r in defining("mistral-7b-instruct")}
    assert len(revisions) == 1  # every release pins the same commit


def test_served_kinds_follow_the_crds() -> None:
    """config/crd/bases: Workspace v1alpha1 and v1beta1 throughout; InferenceSet from v0.8.0
    (v1alpha1), v1beta1 from v0.11.0."""
    first = kaito_release("0.7.2")
    assert first is not None and first.serves("kaito.sh/v1beta1", "Workspace")
    assert not first.serves("kaito.sh/v1alpha1", "InferenceSet")
    assert not first.serves("other.io/v1beta1", "Workspace")
    assert [
        r.release for r in defining("phi-4-mini-instruct", "kaito.sh/v1beta1", "InferenceSet")
    ] == [
        "0.11.0",
        "0.12.0",
    ]


def test_estimator_per_release() -> None:
    """resource.count decides before v0.7.0; the advanced estimator's formula from v0.7.0,
    the weight-scaled overhead from v0.11.0 (each read at its tag)."""
    assert [
        kaito_release(r).estimator for r in ("0.6.2", "0.7.0", "0.10.0", "0.11.0", "0.12.0")
    ] == [  # type: ignore[union-attr]
        None,
        "kv-overhead",
        "kv-overhead",
        "kv-weight-overhead",
        "kv-weight-overhead",
    ]
    llama = kaito_release("0.12.0").presets["llama-3.3-70b-instruct"].estimator  # type: ignore[union-attr]
    assert llama == EstimatorInputs("131.42Gi", 327680, True, True)
    assert base_image_vllm("mcr.microsoft.com/aks/kaito/kaito-base:0.5.0") is not None
    assert base_image_vllm("vllm/vllm-openai:v0.10.1") is None


def test_estimator_hand_derived_per_formula() -> None:
    """A 62Gi preset (131072 bytes per token) on one 80Gi GPU with the default 2048-token
    context: weights 62 x 1.02 = 63.24 GiB; budget 0.84 x 80 = 67.2 GiB; reserve 2.3 GiB +
    2048 x 131072 B = 2.55 GiB. kv-overhead: 63.24 / (67.2 - 2.55 = 64.65) = 0.978, so
    1 GPU, 1 node. kv-weight-overhead: 64.65 / 1.05 = 61.571; 63.24 / 61.571 = 1.027, so
    2 GPUs, 2 nodes."""
    preset = EstimatorInputs("62Gi", 131072, True, True)
    assert estimate_nodes("kv-overhead", preset, 80, 1, None) == 1
    assert estimate_nodes("kv-weight-overhead", preset, 80, 1, None) == 2
    # llama-3.3-70b on Standard_NC48ads_A100_v4 (160Gi, 2 GPUs) at 16384 tokens: weights
    # 134.05 GiB; per GPU 67.2 - 2.3 - 16384 x 327680 / 2 B (2.5 GiB) = 62.4 GiB, so
    # floor(2.148) + 1 = 3 GPUs (the 1.05 divisor: 59.43, 2.256, 3): 2 nodes either way
    llama = EstimatorInputs("131.42Gi", 327680, True, True)
    for formula in ("kv-overhead", "kv-weight-overhead"):
        assert estimate_nodes(formula, llama, 160, 2, 16384) == 2


def test_estimator_refusals() -> None:
    """KAITO refuses a Workspace whose preset may not span nodes, or whose GPU holds no
    more than the overhead; an unknown formula or size is a clear error."""
    alone = EstimatorInputs("62Gi", 131072, False, True)
    refused = estimate_nodes("kv-weight-overhead", alone, 80, 1, None)
    assert isinstance(refused, str) and "distributed inference" in refused
    tiny = estimate_nodes("kv-overhead", EstimatorInputs("1Gi", 1 << 20, True, True), 16, 1, 16384)
    assert isinstance(tiny, str) and "overhead" in tiny
    with pytest.raises(ValueError, match="unknown KAITO estimator"):
        estimate_nodes("guess", alone, 80, 1, None)
    with pytest.raises(ValueError, match="not in Gi"):
        _ = EstimatorInputs("62G", 1, True, True).size_bytes
