"""The serving-layer rules (R001-R006, V001, V007, V008): metadata, enforcement by
environment and settings, on their fixtures and variants of them.

Their fixtures and exact findings: the rule folders, run by ``test_rule_folders.py``.
"""

from __future__ import annotations

import pytest
from conftest import fixture

from gpustrata.catalog.compat import load_compat_catalog
from gpustrata_policies import evaluate, find_rule
from gpustrata_policies.inputs.manifests import load_paths

RULES = {
    "R001": "ray-gpus-match-container",
    "R002": "ray-head-keeps-off-gpus",
    "R003": "placement-fits-workers",
    "R004": "ray-versions-match",
    "R005": "ray-path-tolerates-model-load",
    "R006": "upgrade-capacity",
    "V001": "parallelism-matches-gpus",
    "V007": "memory-fraction-valid",
    "V008": "no-eager-in-production",
}
ADVISORY = {"R002", "R006"}


@pytest.mark.parametrize(("rule_id", "name"), sorted(RULES.items()))
def test_rule_metadata(rule_id: str, name: str) -> None:
    rule = find_rule(rule_id)
    assert rule is not None and rule.meta.name == name
    assert find_rule(name) is rule
    levels = rule.meta.default_enforcement
    if rule_id in ADVISORY:
        assert set(levels.values()) == {"advisory"}
    elif rule_id == "V008":
        assert levels == {"dev": "advisory", "staging": "advisory", "prod": "mandatory"}
    else:
        assert set(levels.values()) == {"mandatory"}
    assert rule.meta.references and rule.meta.rationale and rule.meta.fix


def test_eager_is_advisory_outside_production() -> None:
    path = str(fixture("V008", "bad-eager.yaml"))
    for env, level in (("dev", "advisory"), ("staging", "advisory"), ("prod", "mandatory")):
        report = evaluate(load_paths([path]), environment=env)
        assert {f.enforcement for f in report.findings if f.rule == "V008"} == {level}


def test_advisory_downgrade_stays_advisory_when_configured_mandatory() -> None:
    # R004's advisory case (no gate crossed) stays advisory even where R004 is mandatory.
    path = str(fixture("R004", "bad-stale-ray-version.yaml"))
    report = evaluate(load_paths([path]), config={"rules": {"R004": "mandatory"}})
    levels = {f.resource: f.enforcement for f in report.findings if f.rule == "R004"}
    assert levels == {
        "RayCluster/ray/llm": "mandatory",
        "RayCluster/ray/patch": "advisory",
        "RayCluster/ray/mixed": "mandatory",
    }


def test_allow_head_gpus_threshold_silences_r002() -> None:
    path = str(fixture("R002", "bad-head-gpus.yaml"))
    report = evaluate(load_paths([path]), config={"rules": {"R002": {"allow_head_gpus": True}}})
    assert [f for f in report.findings if f.rule == "R002"] == []


def test_deprecated_thresholds_are_decided_without_a_kuberay_release() -> None:
    """ray.io/v1 is served from KubeRay 1.0, which never counts a loading application against
    the thresholds, and 1.1 on ignore them: the same on every release, so R005 decides (an
    advisory to drop the field) instead of asking for versions.kuberay."""
    path = str(fixture("R005", "bad-timeout-shorter-than-load.yaml"))
    report = evaluate(load_paths([path]))
    assert [n.reason for n in report.not_evaluated if n.rule == "R005"] == []
    noted = [
        f
        for f in report.findings
        if f.rule == "R005" and f.message.startswith("serviceUnhealthySecondThreshold: 1800")
    ]
    assert [(f.resource, f.enforcement) for f in noted] == [
        ("RayService/ray/estimated", "advisory")
    ]
    assert "never bounds a model load" in noted[0].message


def test_thresholds_under_a_kuberay_1_1_release_are_advisory() -> None:
    """A stated KubeRay 1.1.1 (the data-on-eks shape) ignores both fields (kuberay#1685)."""
    path = str(fixture("R005", "bad-kuberay-1-1-threshold-no-effect.yaml"))
    report = evaluate(load_paths([path]))
    assert [n.reason for n in report.not_evaluated if n.rule == "R005"] == []
    found = [(f.enforcement, f.message.split(":")[0]) for f in report.findings if f.rule == "R005"]
    assert found == [
        ("advisory", "serviceUnhealthySecondThreshold"),
        ("advisory", "deploymentUnhealthySecondThreshold"),
    ]


def test_kuberay_1_1_minimum_ray_is_catalogued() -> None:
    """docs.ray.io: KubeRay v1.1.0 supports Ray 2.8.0 and later; v1.1.1 is v1.1.0 plus four
    bug-fix cherry-picks. data-on-eks's Ray 2.24.0 under chart 1.1.1 is decided, not skipped."""
    for tag in ("v1.1.0", "v1.1.1"):
        release = load_compat_catalog().kuberay(tag)
        assert release is not None and release.min_ray == "2.8.0"
        assert release.supports_ray("2.24.0") and release.supports_ray("2.7.0") is False


def test_kuberay_1_0_threshold_is_not_called_without_effect() -> None:
    """KubeRay 1.0.0 still reads the thresholds (rayservice_controller.go at v1.0.0)."""
    path = str(fixture("R005", "good-kuberay-1-0-threshold.yaml"))
    report = evaluate(load_paths([path]))
    assert [n.reason for n in report.not_evaluated if n.rule == "R005"] == []
    release = load_compat_catalog().kuberay("v1.0.0")
    assert release is not None and release.unhealthy_thresholds_honoured
    later = load_compat_catalog().kuberay("v1.1.0")
    assert later is not None and not later.unhealthy_thresholds_honoured


@pytest.mark.parametrize(
    "sharing",
    ["time-slicing label", "MIG label", "device-plugin ConfigMap"],
)
def test_r003_does_not_cap_workers_by_a_pool_whose_gpus_may_be_shared(sharing: str) -> None:
    """With time-slicing, MPS or MIG a node advertises more nvidia.com/gpu than it holds,
    so the pool's maxSize x physical GPUs is no bound on the worker Pods."""
    import copy

    import yaml

    path = fixture("R003", "bad-pool-max-size-caps-workers.yaml")
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert [f.rule for f in evaluate(docs).findings if f.rule == "R003"] == ["R003"]
    docs = copy.deepcopy(docs)
    pool = next(d for d in docs if d["kind"] == "GpuNodePool")
    if sharing == "time-slicing label":
        pool["spec"]["labels"] = {"nvidia.com/gpu.replicas": "4"}
    elif sharing == "MIG label":
        pool["spec"]["labels"] = {"nvidia.com/mig.config": "all-1g.10gb"}
    else:
        config = {
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
        }
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "time-slicing", "namespace": "gpu-operator"},
                "data": {"any": yaml.safe_dump(config)},
            }
        )
    assert [f for f in evaluate(docs).findings if f.rule == "R003"] == []
