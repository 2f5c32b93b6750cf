"""KubeAI's chart defaults per release (catalog/data/kubeai-defaults.yaml, written by
tools/kubeai_defaults.py from substratusai/kubeai's helm-chart-kubeai-* tags)."""

from __future__ import annotations

import re
from dataclasses import replace

from gpustrata.catalog.kubeai import defining, kubeai_defaults, kubeai_releases

GPU_PRESENT = {
    "key": "nvidia.com/gpu",
    "operator": "Equal",
    "value": "present",
    "effect": "NoSchedule",
}


def test_releases_are_ordered_and_cited_per_tag() -> None:
    releases = kubeai_releases()
    assert releases[0] == "0.4.1" and releases[-1] == "0.21.0"
    key = [tuple(int(p) for p in r.split(".")) for r in releases]
    assert key == sorted(key)
    for release in releases:
        found = kubeai_defaults(release)
        assert found is not None
        assert found.source == (
            f"substratusai/kubeai@helm-chart-kubeai-{release}:charts/kubeai/values.yaml"
        )
        assert re.fullmatch(r"\S+:\S+", found.vllm_images["default"])


def test_release_0_21_0_values() -> None:
    """charts/kubeai/values.yaml at helm-chart-kubeai-0.21.0: nvidia-gpu-h100 gives one GPU
    per unit and the nvidia.com/gpu=present toleration, no node selector; its image name
    nvidia-gpu is vllm/vllm-openai:v0.8.3."""
    found = kubeai_defaults("v0.21.0")
    assert found is not None and found.release == "0.21.0"
    h100 = found.resource_profiles["nvidia-gpu-h100"]
    assert h100["limits"] == {"nvidia.com/gpu": "1"}
    assert h100["tolerations"] == [GPU_PRESENT]
    assert "nodeSelector" not in h100
    assert found.vllm_image("nvidia-gpu-h100") == "vllm/vllm-openai:v0.8.3"
    assert found.vllm_image("cpu") == found.vllm_images["cpu"]
    assert found.vllm_image("no-such-profile") is None


def test_image_falls_back_to_default() -> None:
    """lookupServerImage: a profile whose imageName names no image runs ``default``; at
    0.7.0 and 0.8.0 the chart lists no nvidia-gpu image, so nvidia-gpu-* profiles run it."""
    found = kubeai_defaults("0.8.0")
    assert found is not None and "nvidia-gpu" not in found.vllm_images
    assert found.resource_profiles["nvidia-gpu-l4"]["imageName"] == "nvidia-gpu"
    assert found.vllm_image("nvidia-gpu-l4") == found.vllm_images["default"]


def test_defining_lists_the_releases_of_a_profile() -> None:
    """nvidia-gpu-h100 first appears in the chart at 0.5.0; an unknown profile in none."""
    assert defining("nvidia-gpu-h100")[0].release == "0.5.0"
    assert defining("nvidia-gpu-l4")[0].release == "0.4.1"
    assert defining("nvidia-gpu-b200") == ()
    assert kubeai_defaults("0.99.0") is None


def test_values_files_merge_as_helm_does() -> None:
    """values-eks.yaml at 0.21.0 adds a node selector to nvidia-gpu-h100 and keeps the
    defaults' limits and toleration (maps merge key by key); the source names both files."""
    base = kubeai_defaults("0.21.0")
    assert base is not None and set(base.overlays) >= {"values-eks.yaml", "values-gke.yaml"}
    eks = base.with_overlays(["values-eks.yaml"])
    assert eks is not None and eks.applied == ("values-eks.yaml",)
    h100 = eks.resource_profiles["nvidia-gpu-h100"]
    assert h100["nodeSelector"] == {"karpenter.k8s.aws/instance-gpu-name": "h100"}
    assert h100["limits"] == {"nvidia.com/gpu": "1"} and h100["tolerations"] == [GPU_PRESENT]
    assert eks.source.endswith("charts/kubeai/values.yaml + values-eks.yaml")
    assert "nodeSelector" not in base.resource_profiles["nvidia-gpu-h100"]  # unchanged
    assert base.with_overlays(["values-none.yaml"]) is None


def test_overlay_null_removes_a_profile_key() -> None:
    """A values file's ``null`` removes the chart's key (Helm's coalesce.go), at any depth."""
    base = kubeai_defaults(kubeai_releases()[-1])
    assert base is not None
    name, profile = next(iter(base.resource_profiles.items()))
    key = next(iter(profile))
    over = {"x.yaml": {"resource_profiles": {name: {key: None}}, "vllm_images": {"new": "i:1"}}}
    merged = replace(base, overlays=over).with_overlays(["x.yaml"])
    assert merged is not None and key in profile
    assert key not in merged.resource_profiles[name]
    assert merged.vllm_images["new"] == "i:1"
    assert set(merged.vllm_images) == {*base.vllm_images, "new"}
