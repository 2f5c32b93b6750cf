"""Cluster context read by one reader per grammar (issue 20 item 1): the GPU Operator's
NVIDIADriver CR and the NVIDIA device plugin's sharing config (ConfigMap, chart values,
the config file itself), read from the upstream samples in tests/data/field-corpus-2-context
where there is one, and what K002/K005 make of time-slicing and MPS replicas."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIELD_CORPUS_2_CONTEXT

from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_paths, load_text
from gpustrata_policies.view.device_plugin import cluster_sharing, parse_config
from gpustrata_policies.view.gpu_operator import nvidia_drivers_of, operators_of
from gpustrata_policies.view.nodes import pool_driver
from gpustrata_policies.view.pools import pools_of

POOL = """\
apiVersion: gpustrata.io/v1alpha1
kind: GpuNodePool
metadata: {name: l4}
spec:
  instanceType: g6.2xlarge
  gpuProduct: NVIDIA-L4
  gpuCount: 1
  labels: {pool: l4}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: vllm, namespace: llm}
spec:
  nodeSelector: {pool: l4}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.8.5
      resources: {limits: {nvidia.com/gpu: 2, cpu: "2", memory: 8Gi}}
"""


def sharing_map(strategy: str, replicas: int, extra: str = "") -> str:
    return f"""\
apiVersion: v1
kind: ConfigMap
metadata: {{name: dp-config, namespace: gpu-operator}}
data:
  any: |
    version: v1
    sharing:
      {strategy}:
        {extra or "renameByDefault: false"}
        resources: [{{name: nvidia.com/gpu, replicas: {replicas}}}]
"""


def test_nvidiadriver_sample_gives_the_driver_of_every_gpu_pool() -> None:
    objects = load_paths([str(FIELD_CORPUS_2_CONTEXT / "gpu-operator-nvidiadriver-sample.yaml")])
    (cr,) = nvidia_drivers_of(objects)
    assert (cr.version, cr.driver_type, dict(cr.node_selector)) == ("595.91.07", "gpu", {})
    (pool,) = pools_of(load_text(POOL, "pool.yaml"))
    driver = pool_driver(pool, [], [cr])
    assert driver is not None and driver.version == "595.91.07"
    assert "NVIDIADriver/-/nvidiadriver-sample" in driver.where


def test_nvidiadriver_applies_only_where_its_node_selector_picks() -> None:
    text = """\
apiVersion: nvidia.com/v1alpha1
kind: NVIDIADriver
metadata: {name: h100}
spec: {driverType: gpu, image: driver, version: "580.95.05", nodeSelector: {pool: h100}}
"""
    (cr,) = nvidia_drivers_of(load_text(text, "cr.yaml"))
    (pool,) = pools_of(load_text(POOL, "pool.yaml"))
    assert pool_driver(pool, [], [cr]) is None
    (other,) = pools_of(load_text(POOL.replace("pool: l4", "pool: h100"), "pool.yaml"))
    driver = pool_driver(other, [], [cr])
    assert driver is not None and driver.version == "580.95.05"


def test_device_plugin_config_file_of_the_operator_tests_is_time_slicing_x10() -> None:
    path = FIELD_CORPUS_2_CONTEXT / "gpu-operator-tests-device-plugin-config.yaml"
    objects = load_paths([str(path)])
    assert [o.kind for o in objects] == ["HelmValues"]  # kindless: read as the plugin's own
    sharing = cluster_sharing(objects)
    assert sharing is not None
    assert (sharing.strategy, sharing.replicas, sharing.resource) == (
        "time-slicing",
        10,
        "nvidia.com/gpu",
    )
    assert not sharing.fail_requests_greater_than_one


def test_device_plugin_chart_values_share_nothing_by_default() -> None:
    path = FIELD_CORPUS_2_CONTEXT / "nvidia-device-plugin-values.yaml"
    objects = load_paths([str(path)])
    assert [o.kind for o in objects] == ["HelmValues"] and not operators_of(objects)
    assert cluster_sharing(objects) is None


def test_device_plugin_chart_values_read_config_map_at_config_default() -> None:
    values = """\
migStrategy: none
config:
  default: ts
  map:
    plain: |
      version: v1
    ts: |
      version: v1
      sharing:
        mps:
          resources: [{name: nvidia.com/gpu, replicas: 4}]
"""
    sharing = cluster_sharing(load_text(values, "values.yaml"))
    assert sharing is not None and (sharing.strategy, sharing.replicas) == ("mps", 4)
    assert sharing.fail_requests_greater_than_one  # MPS default (api/config/v1/config.go)
    assert "config.map.ts" in sharing.where


def test_gpu_operator_device_plugin_config_names_the_config_map() -> None:
    op = """\
apiVersion: nvidia.com/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec: {devicePlugin: {config: {name: dp-config, default: any}}}
"""
    objects = load_text("---\n".join([op, sharing_map("timeSlicing", 3)]), "c.yaml")
    sharing = cluster_sharing(objects)
    assert sharing is not None and sharing.replicas == 3
    assert "ConfigMap/gpu-operator/dp-config:any" in sharing.where


@pytest.mark.parametrize(
    ("extra", "renamed"),
    [("renameByDefault: true", "nvidia.com/gpu.shared"), ("", "nvidia.com/gpu")],
)
def test_rename_by_default_changes_the_resource_pods_ask_for(extra: str, renamed: str) -> None:
    sharing = parse_config(
        f"version: v1\nsharing:\n  timeSlicing:\n    {extra or 'failRequestsGreaterThanOne: true'}"
        "\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n",
        "x",
    )
    assert sharing is not None and sharing.resource == renamed


def _rules(text: str, rule: str) -> list[str]:
    report = evaluate(load_text(text, "in.yaml"))
    return [f.message for f in report.findings if f.rule == rule]


def test_k005_counts_time_slicing_replicas_on_a_described_pool() -> None:
    alone = _rules("---\n".join([POOL, POD]), "K005")
    assert alone and "1 GPU(s) per node" in alone[0]
    shared = _rules("---\n".join([POOL, POD, sharing_map("timeSlicing", 4)]), "K005")
    assert shared == []


def test_k002_more_than_one_mps_replica_fails_admission() -> None:
    messages = _rules("---\n".join([POOL, POD, sharing_map("mps", 4)]), "K002")
    assert len(messages) == 1 and "UnexpectedAdmissionError" in messages[0]
    assert "mps x4 in ConfigMap/gpu-operator/dp-config:any" in messages[0]
    # time-slicing leaves failRequestsGreaterThanOne off unless it is set
    assert _rules("---\n".join([POOL, POD, sharing_map("timeSlicing", 4)]), "K002") == []
    forced = sharing_map("timeSlicing", 4, "failRequestsGreaterThanOne: true")
    assert len(_rules("---\n".join([POOL, POD, forced]), "K002")) == 1


def test_the_aks_device_plugin_daemonset_is_context_not_a_gpu_workload(tmp_path: Path) -> None:
    path = FIELD_CORPUS_2_CONTEXT / "production-stack-azure-nvidia-device-plugin-ds.yaml"
    report = evaluate(load_paths([str(path)]))
    assert not [f for f in report.findings if f.rule in {"K004", "K005", "K002"}]


def test_values_option_takes_device_plugin_values_whatever_their_keys(tmp_path: Path) -> None:
    from gpustrata_policies.inputs.manifests import load_values

    path = tmp_path / "dp.yaml"  # no key of the chart's own: only the option says whose
    path.write_text(
        "config:\n  map:\n    default: |\n      version: v1\n      sharing:\n"
        "        timeSlicing:\n          resources: [{name: nvidia.com/gpu, replicas: 2}]\n",
        encoding="utf-8",
    )
    objects = load_values(f"nvidia-device-plugin={path}")
    sharing = cluster_sharing(objects)
    assert sharing is not None and sharing.replicas == 2 and "config.map.default" in sharing.where
    assert not operators_of(objects)


def test_k005_takes_a_nodes_sharing_from_its_own_labels() -> None:
    node = """\
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {pool: l4, nvidia.com/gpu.product: NVIDIA-L4, nvidia.com/gpu.count: "1"}
status:
  allocatable: {cpu: "7", memory: 28Gi, nvidia.com/gpu: "1"}
"""
    config = sharing_map("timeSlicing", 4)
    assert _rules("---\n".join([node, POD, config]), "K005")  # no replicas label: not shared
    shared = node.replace('count: "1"}', 'count: "1", nvidia.com/gpu.replicas: "4"}')
    assert _rules("---\n".join([shared, POD, config]), "K005") == []
