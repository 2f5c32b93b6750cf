"""Safe deployment: the dependency graph and resource options, as the engine receives them.

The program runs under Pulumi's mocks; ``gpustrata.runtime.mockrun`` records each
RegisterResourceRequest's ``dependencies`` (explicit ``depends_on`` plus input
dependencies, components expanded to their children), ``protect`` and
``retainOnDelete``. The assertions are on custom resources, so they hold for whatever
objects the components register now or later.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import pytest
from _stacks import STACKS, closure, stack_doc

from gpustrata.runtime.mockrun import Registered, run_program
from gpustrata_policies.evaluate import evaluate, find_rule
from gpustrata_policies.inputs.pulumi import object_from_pulumi
from gpustrata_policies.view.dra import attach_claims
from gpustrata_policies.view.kinds import RAY_KINDS
from gpustrata_policies.view.objects import K8sObject

HELM = "kubernetes:helm.sh/v3:Release"


def _run(doc: dict[str, Any], env: str) -> dict[str, Registered]:
    return {r.name: r for r in run_program(doc, stack=env)}


def _of_type(res: dict[str, Registered], prefix: str) -> list[Registered]:
    return [r for r in res.values() if r.type.startswith(prefix)]


def _release(res: dict[str, Registered], chart: str) -> Registered | None:
    found = [r for r in _of_type(res, HELM) if r.inputs.get("chart") == chart]
    return found[0] if found else None


def _gpu_objects(res: dict[str, Registered]) -> Iterable[tuple[Registered, K8sObject]]:
    pairs = []
    for r in _of_type(res, "kubernetes:"):
        raw = object_from_pulumi(r.type, r.name, r.inputs)
        if raw is not None:
            pairs.append((r, K8sObject(raw)))
    attach_claims(obj for _, obj in pairs)  # DRA pools: the GPUs are in claim templates
    for r, obj in pairs:
        if any(p.gpu_count() > 0 for p in obj.pods()):
            yield r, obj


@pytest.fixture(scope="module", params=STACKS)
def stack(request: pytest.FixtureRequest) -> tuple[str, dict[str, Registered]]:
    env = request.param
    return env, _run(stack_doc(env), env)


def test_dependencies_are_recorded_and_acyclic(stack: tuple[str, dict[str, Registered]]) -> None:
    _, res = stack
    assert any(r.depends_on for r in res.values()), "no dependency recorded at all"
    for r in res.values():
        for dep in r.depends_on:
            assert dep in res, f"{r.name} depends on unregistered {dep}"
        assert r.name not in closure(res, r.name), f"dependency cycle through {r.name}"


def test_crds_and_operators_before_custom_resources(
    stack: tuple[str, dict[str, Registered]],
) -> None:
    _, res = stack
    kuberay = _release(res, "kuberay-operator")
    ray_resources = [
        r for r in _of_type(res, "kubernetes:ray.io/") if r.type.rsplit(":", 1)[1] in RAY_KINDS
    ]
    if ray_resources:
        assert kuberay is not None
    for r in ray_resources:
        # The release installs the RayService CRD and awaits the operator (skip_await off).
        assert kuberay is not None and kuberay.name in closure(res, r.name), r.name
    for release in _of_type(res, HELM):
        assert release.inputs.get("skipAwait") in (None, False), release.name
        namespaces = [
            n.name
            for n in _of_type(res, "kubernetes:core/v1:Namespace")
            if n.inputs.get("metadata", {}).get("name") == release.inputs.get("namespace")
        ]
        assert set(namespaces) <= closure(res, release.name), release.name


def test_gpu_workloads_wait_for_gpu_nodes_and_the_gpu_operator(
    stack: tuple[str, dict[str, Registered]],
) -> None:
    env, res = stack
    operator = _release(res, "gpu-operator")
    assert operator is not None  # every reference stack installs it
    node_groups = {
        r.inputs.get("nodeGroupName"): r.name for r in _of_type(res, "aws:eks/nodeGroup")
    }
    # A Karpenter pool's nodes come from its NodePool (after the chart with its CRDs).
    node_groups |= {
        r.inputs["metadata"]["name"]: r.name for r in _of_type(res, "kubernetes:karpenter.sh/")
    }
    workloads = list(_gpu_objects(res))
    assert workloads, f"{env}: no GPU workload found"
    for r, obj in workloads:
        deps = closure(res, r.name)
        assert operator.name in deps, f"{r.name} does not wait for the GPU Operator"
        pools = {
            str(p.node_selector().get("gpustrata.io/pool")) for p in obj.pods() if p.gpu_count()
        }
        for pool in pools:
            assert node_groups[pool] in deps, f"{r.name} does not wait for the nodes of {pool}"


def test_the_gpu_operator_itself_waits_for_the_gpu_nodes(
    stack: tuple[str, dict[str, Registered]],
) -> None:
    """Each custom resource of the GPU Operator (namespace, ConfigMap, release) carries the
    node-group edges itself, so destroy and the state graph keep the order too."""
    env, res = stack
    node_groups = {r.name for r in _of_type(res, "aws:eks/nodeGroup")}
    assert node_groups or env != "prod"  # prod creates its cluster: the case is exercised
    children = [r for r in res.values() if r.parent and r.custom and _is_operator_child(res, r)]
    assert children
    for r in children:
        assert node_groups <= set(r.depends_on) | closure(res, r.name), r.name


def _is_operator_child(res: dict[str, Registered], r: Registered) -> bool:
    parent = res.get(r.parent or "")
    return parent is not None and parent.type == "gpustrata:index:GpuOperator"


def test_every_namespaced_object_waits_for_its_namespace(
    stack: tuple[str, dict[str, Registered]],
) -> None:
    _, res = stack
    created = {
        n.inputs["metadata"]["name"]: n.name for n in _of_type(res, "kubernetes:core/v1:Namespace")
    }
    for r in _of_type(res, "kubernetes:"):
        ns = (r.inputs.get("metadata") or {}).get("namespace") or r.inputs.get("namespace")
        if ns in created and not r.type.endswith(":Namespace"):
            assert created[ns] in closure(res, r.name), f"{r.name} before namespace {ns}"


def test_data_that_must_survive_is_retained(stack: tuple[str, dict[str, Registered]]) -> None:
    env, res = stack
    model_namespaces = {m.get("namespace", "inference") for m in stack_doc(env)["models"]}
    for n in _of_type(res, "kubernetes:core/v1:Namespace"):
        if n.inputs["metadata"]["name"] in model_namespaces:
            # It holds the hf_token Secret and model-cache PVCs gpustrata does not own.
            assert n.retain_on_delete, n.name
    # A weights PVC the stack does not create (weights.source: pvc without cache_size_gib
    # names an existing claim) is the user's: gpustrata registers none for it, so no update
    # or destroy can delete one. The reference stacks stream weights or download them.
    created = {
        m["weights"]["pvc_name"]
        for m in stack_doc(env)["models"]
        if m.get("weights", {}).get("source") == "pvc" and m["weights"].get("cache_size_gib")
    }
    names = {
        c.inputs["metadata"]["name"]
        for c in _of_type(res, "kubernetes:core/v1:PersistentVolumeClaim")
    }
    assert names == created


def test_rollouts_cannot_deadlock_on_gpus(stack: tuple[str, dict[str, Registered]]) -> None:
    env, res = stack
    for r, obj in _gpu_objects(res):
        if obj.kind == "Deployment":
            strategy = obj.raw["spec"]["strategy"]
            surge = (strategy.get("rollingUpdate") or {}).get("maxSurge")
            assert strategy["type"] == "Recreate" or surge in (0, "0", "0%"), r.name
    # The rules that know pool capacity agree (a surge or second Ray cluster must fit).
    objects = [
        o for r in res.values() if (o := object_from_pulumi(r.type, r.name, r.inputs)) is not None
    ]
    rules = [find_rule("K008"), find_rule("R006")]
    report = evaluate(objects, environment=env, rules=[r for r in rules if r is not None])
    assert [f for f in report.findings if f.enforcement == "mandatory"] == []


@pytest.mark.parametrize("mode", ["operator-disabled", "existing-cluster"])
def test_ordering_holds_in_other_shapes(mode: str) -> None:
    doc = copy.deepcopy(stack_doc("prod"))
    if mode == "operator-disabled":
        doc["gpu_operator"]["enabled"] = False
    else:
        doc["cluster"]["mode"] = "existing"
    res = _run(doc, "prod")
    kuberay = _release(res, "kuberay-operator")
    assert kuberay is not None
    for r in _of_type(res, "kubernetes:ray.io/v1:RayService"):
        assert kuberay.name in closure(res, r.name)
    node_groups = {
        r.inputs.get("nodeGroupName"): r.name for r in _of_type(res, "aws:eks/nodeGroup")
    }
    if mode == "existing-cluster":
        assert node_groups == {}  # described pools: nothing to create, nothing to wait for
        return
    for r, obj in _gpu_objects(res):
        for pod in obj.pods():
            if pod.gpu_count():
                pool = pod.node_selector().get("gpustrata.io/pool")
                assert node_groups[pool] in closure(res, r.name), f"{r.name} before its nodes"


def test_the_recorded_order_is_the_same_every_run() -> None:
    """Pulumi registers concurrently; plan output lists resources parents-first, siblings
    by name, so two plans of one stack compare equal (and `plan --base` diffs are real)."""
    runs = [[r.as_dict() for r in run_program(stack_doc("prod"), stack="prod")] for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    position = {r["name"]: i for i, r in enumerate(runs[0])}
    for r in runs[0]:
        if r["parent"] is not None:
            assert position[r["parent"]] < position[r["name"]], r["name"]
