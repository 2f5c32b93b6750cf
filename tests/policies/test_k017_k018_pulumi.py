"""K017 and K018 on what the reference stacks register under Pulumi's mocks (issue 29
findings 1-3 and 7).

Each stack in stacks/ is run with :func:`gpustrata.runtime.mockrun.run_program`, its
resources converted by the Pulumi adapter as the pack sees them, and evaluated: the
stacks have an untainted system node group and install the CRDs of their custom
resources, so neither rule finds anything. Each stack is then changed the way the
pre-foundation stacks were (no system pool, a GPU pool of minimum size 0 with nothing
that scales it, a chart left out) to show the rules are evaluated there, not silent.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from _stacks import STACKS, stack_doc

from gpustrata.runtime.mockrun import run_program
from gpustrata_policies.evaluate import evaluate, find_rule
from gpustrata_policies.inputs.pulumi import objects_from_pulumi

Objects = list[dict[str, Any]]
_CACHE: dict[str, Objects] = {}


def _objects(env: str) -> Objects:
    """The stack's resources as the adapter converts them (a fresh copy per call)."""
    if env not in _CACHE:
        records = run_program(stack_doc(env), stack=env)
        _CACHE[env] = [
            dict(o) for o in objects_from_pulumi((r.type, r.name, r.inputs) for r in records)
        ]
    return copy.deepcopy(_CACHE[env])


def _outcomes(objects: Objects, env: str, rule: str) -> tuple[list[str], list[str]]:
    found = find_rule(rule)
    assert found is not None
    report = evaluate(objects, environment=env, rules=[found])
    findings = [f"{f.resource}: {f.message}" for f in report.findings if f.rule == rule]
    skipped = [f"{n.resource}: {n.reason}" for n in report.not_evaluated if n.rule == rule]
    return findings, skipped


def _without(objects: Objects, keep: Callable[[dict[str, Any]], bool]) -> Objects:
    return [o for o in objects if keep(o)]


def _is(obj: dict[str, Any], kind: str, name: str) -> bool:
    return bool(obj.get("kind") == kind and obj.get("metadata", {}).get("name") == name)


@pytest.mark.parametrize("env", STACKS)
def test_reference_stack_has_a_node_for_every_pod(env: str) -> None:
    findings, skipped = _outcomes(_objects(env), env, "K017")
    assert findings == [], "\n".join(findings)
    assert skipped == [], "\n".join(skipped)


@pytest.mark.parametrize("env", STACKS)
def test_reference_stack_installs_every_crd_it_uses(env: str) -> None:
    findings, skipped = _outcomes(_objects(env), env, "K018")
    assert findings == [], "\n".join(findings)
    assert skipped == [], "\n".join(skipped)


@pytest.mark.parametrize("env", STACKS)
def test_without_the_system_pool_the_controllers_have_no_node(env: str) -> None:
    """Finding 1: every remaining pool is GPU-tainted; CoreDNS and the GPU Operator's
    controllers (which every stack installs) are named with the taint and the fix."""
    objects = _without(_objects(env), lambda o: not _is(o, "GpuNodePool", "system"))
    findings, _ = _outcomes(objects, env, "K017")
    coredns = [m for m in findings if m.startswith("EksAddon/") and "coredns" in m]
    assert coredns and "nvidia.com/gpu=true:NoSchedule not tolerated" in coredns[0]
    assert "add an untainted system node group" in coredns[0]
    operator = [m for m in findings if m.startswith("HelmRelease/gpu-operator/gpu-operator:")]
    assert operator and "set gpu-operator values operator.nodeSelector" in operator[0]


@pytest.mark.parametrize("env", [e for e in STACKS if e != "dev"])
def test_without_the_system_pool_the_ray_head_has_no_node(env: str) -> None:
    """Finding 7: the Ray head tolerates no GPU taint; with only GPU pools it stays Pending."""
    objects = _without(_objects(env), lambda o: not _is(o, "GpuNodePool", "system"))
    findings, _ = _outcomes(objects, env, "K017")
    assert any(m.startswith("RayService/") and "(head)" in m for m in findings), findings
    assert any(m.startswith("HelmRelease/kuberay/kuberay-operator:") for m in findings), findings


def test_dev_gpu_pool_of_min_size_zero_gets_no_node() -> None:
    """Finding 2: dev's GPU group at minimum size 0, and nothing that scales it."""
    objects = _objects("dev")
    for obj in objects:
        if _is(obj, "GpuNodePool", "gpu-l4"):
            obj["spec"]["minSize"] = 0
    findings, _ = _outcomes(objects, "dev", "K017")
    assert findings, "a GPU pool of minimum size 0 with no autoscaler went unreported"
    assert all("pool gpu-l4: min size 0 and nothing scales it up" in m for m in findings)
    assert all("give pool(s) gpu-l4 a minimum size of 1" in m for m in findings)


@pytest.mark.parametrize(
    ("chart", "resource", "owner"),
    [
        ("kube-prometheus-stack", "ServiceMonitor/inference/", "prometheus-operator CRDs"),
        ("keda", "ScaledObject/inference/", "KEDA"),
    ],
)
def test_prod_without_the_chart_has_no_crd(chart: str, resource: str, owner: str) -> None:
    """Finding 3: prod's ServiceMonitor and ScaledObject need the charts that own their CRDs."""
    objects = _without(_objects("prod"), lambda o: not _is(o, "HelmRelease", chart))
    findings, _ = _outcomes(objects, "prod", "K018")
    assert [m.split(":", 1)[0].rsplit("/", 1)[0] + "/" for m in findings] == [resource]
    assert '"no matches for kind' in findings[0] and owner in findings[0]
