"""O008 on every way DRA arrives (RULES.md): the GPU Operator's own DRA stack (v26.7
GPUCluster), with and without its ClusterPolicy; the kubernetes-sigs chart name."""

from __future__ import annotations

from typing import Any

from gpustrata_policies import evaluate


def _operator(name: str, **values: Any) -> dict[str, Any]:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": "gpu-operator"},
        "spec": {
            "chart": {"spec": {"chart": "gpu-operator", "version": "v26.7.0"}},
            "values": {"driver": {"enabled": False}, **values},
        },
    }


def _o008(*docs: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f.resource, f.message) for f in evaluate(list(docs)).findings if f.rule == "O008"]


def test_the_operators_dra_stack_alone_is_one_allocator() -> None:
    dra_only = _operator("op", clusterPolicy={"deployCR": False}, gpuCluster={"deployCR": True})
    assert _o008(dra_only) == []


def test_the_operators_dra_beside_its_device_plugin_is_two() -> None:
    (found,) = _o008(_operator("op", gpuCluster={"deployCR": "true"}))
    assert "both a ClusterPolicy" in found[1]


def test_a_gpucluster_cr_beside_a_clusterpolicy_is_two() -> None:
    cluster = {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "GPUCluster",
        "metadata": {"name": "gpu-cluster"},
        "spec": {"draDriver": {"version": "v0.5.0"}},
    }
    policy = {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"devicePlugin": {"enabled": True}},
    }
    found = _o008(cluster, policy)
    assert any("GPUCluster gpu-cluster and ClusterPolicy cluster-policy" in m for _, m in found)
    assert _o008(cluster) == []


def test_a_confined_driver_without_pools_is_not_evaluated() -> None:
    driver = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "dra", "namespace": "dra"},
        "spec": {
            "chart": {"spec": {"chart": "dra-driver-nvidia-gpu", "version": "0.4.1"}},
            "values": {"kubeletPlugin": {"nodeSelector": {"pool": "dra"}}},
        },
    }
    report = evaluate([_operator("op"), driver])
    assert [f for f in report.findings if f.rule == "O008"] == []
    assert any(n.rule == "O008" and "GpuNodePool" in n.reason for n in report.not_evaluated)
    del driver["spec"]["values"]["kubeletPlugin"]
    assert len(_o008(_operator("op"), driver)) == 1
