"""Namespaces that repeat one another are judged once (issue 35), with the same report.

A cluster with one chart per tenant holds the same objects in many namespaces; the
evaluator judges the first copy and replays its outcomes onto the others
(:meth:`~gpustrata_policies.index.EvaluationIndex.replicas`). These tests copy inputs into
several namespaces, as such a cluster has them, and assert that the report is the one
judging every copy gives, finding for finding (file and line included) and record for
record, in the same order.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import FIELD_CORPUS, FIELD_CORPUS_2, REPO, fixture_files

from gpustrata.core.errors import InputError
from gpustrata_policies import evaluate
from gpustrata_policies.findings import Report
from gpustrata_policies.index import EvaluationIndex
from gpustrata_policies.inputs.manifests import load_paths, load_text
from gpustrata_policies.view.objects import K8sObject

FIELD_CORPUS_3 = REPO / "tests" / "data" / "field-corpus-3"


def _copied(objects: list[K8sObject], copies: int) -> list[K8sObject]:
    """*objects*, then each namespaced object again in namespaces ``<ns>-copy-<i>``
    (cluster-scoped objects once), each copy keeping its file and lines."""
    out = list(objects)
    for i in range(copies):
        for obj in objects:
            meta = obj.raw.get("metadata")
            if obj.namespace == "-" or not isinstance(meta, dict):
                continue
            raw = copy.deepcopy(dict(obj.raw))
            raw["metadata"]["namespace"] = f"{obj.namespace}-copy-{i}"
            out.append(K8sObject(raw, obj.file, obj.line, obj.lines, plain=obj.plain))
    return out


def _shape(report: Report) -> dict[str, Any]:
    return {
        "findings": [
            (f.rule, f.enforcement, f.resource, f.message, f.file, f.line, f.internal)
            for f in report.findings
        ],
        "not_evaluated": [(n.rule, n.resource, n.reason) for n in report.not_evaluated],
        "warnings": report.warnings,
    }


def _same_both_ways(objects: list[K8sObject]) -> int:
    """Evaluate *objects* judging every copy and judging copies once; assert equal
    reports; return how many subjects were replayed."""
    every = evaluate(objects, judge_replicas_once=False)
    once = evaluate(objects)
    assert _shape(once) == _shape(every)
    return len(EvaluationIndex(objects).replicas())


CORPORA = {
    "field-corpus-1": FIELD_CORPUS,
    "field-corpus-2": FIELD_CORPUS_2,
    "field-corpus-3": FIELD_CORPUS_3,
}


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_a_field_corpus_copied_into_namespaces_reports_the_same(name: str) -> None:
    # each file checked alone and copied (one sample per tenant), as field_corpus_share does
    replayed = 0
    for path in sorted(CORPORA[name].glob("*.y*ml")):
        try:
            objects = load_paths([str(path)])
        except InputError:  # a file check refuses (tested in test_field_corpus_3)
            continue
        replayed += _same_both_ways(_copied(objects, 2))
    assert replayed > 0  # the copies were replayed, not all judged again


def test_every_fixture_copied_together_reports_the_same() -> None:
    objects = load_paths([str(p) for p in fixture_files()])
    assert _same_both_ways(_copied(objects, 2)) > 0


def test_each_fixture_copied_reports_the_same() -> None:
    replayed = 0
    for path in fixture_files():
        replayed += _same_both_ways(_copied(load_paths([str(path)]), 1))
    assert replayed > 0


def _objects(text: str) -> list[K8sObject]:
    return load_text(text, "tenants.yaml")


_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm, namespace: {ns}}}
spec:
  selector: {{matchLabels: {{app: vllm}}}}
  template:
    metadata: {{labels: {{app: vllm}}}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.6.3
        args: [--model, meta-llama/Llama-3.1-8B-Instruct, --tensor-parallel-size, "2"{extra}]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


def _tenants(*namespaces: str, extra: str = "") -> str:
    return "---".join(_DEPLOYMENT.format(ns=ns, extra=extra) for ns in namespaces)


def test_equal_namespaces_are_one_class_and_the_copy_is_reported_as_itself() -> None:
    objects = _objects(_tenants("team-a", "team-b", "team-c"))
    replicas = EvaluationIndex(objects).replicas()
    assert set(replicas) == {id(objects[1]), id(objects[2])}
    assert replicas[id(objects[2])].of is objects[0]
    report = evaluate(objects)
    v001 = [f for f in report.findings if f.rule == "V001"]
    # TP 2 on one GPU: one finding per tenant, each naming its own Deployment and line
    assert [f.resource for f in v001] == [
        "Deployment/team-a/vllm",
        "Deployment/team-b/vllm",
        "Deployment/team-c/vllm",
    ]
    assert len({f.line for f in v001}) == 3
    assert _shape(report) == _shape(evaluate(objects, judge_replicas_once=False))


def test_a_namespace_that_differs_is_judged_on_its_own() -> None:
    text = _tenants("team-a", "team-b") + "---" + _tenants("team-c", extra=", --enforce-eager")
    objects = _objects(text)
    assert set(EvaluationIndex(objects).replicas()) == {id(objects[1])}


def test_a_namespace_named_in_its_own_objects_is_not_a_copy() -> None:
    # the DNS name of a Service in team-a: its copy in team-b still points at team-a
    extra = ", --kv-transfer-config, http://vllm.team-a.svc.cluster.local"
    text = _tenants("team-a", extra=extra) + "---" + _tenants("team-b", extra=extra)
    assert EvaluationIndex(_objects(text)).replicas() == {}


def test_objects_without_a_namespace_and_context_namespaces_are_not_copies() -> None:
    no_namespace = _DEPLOYMENT.replace(", namespace: {ns}", "").format(extra="")
    objects = _objects(no_namespace + "---" + _tenants("default"))
    assert EvaluationIndex(objects).replicas() == {}
    objects = _objects(_tenants("team-a", "team-b"))
    context = _objects(_tenants("team-b").replace("vllm", "other", 1))
    assert EvaluationIndex(objects, context).replicas() == {}


def test_objects_built_in_code_group_as_read_ones_do() -> None:
    # objects from the policy pack or a program: plain dicts, no lines
    raw = _objects(_tenants("team-a", "team-b"))
    built = [K8sObject(dict(o.raw)) for o in raw]
    assert len(EvaluationIndex(built).replicas()) == 1
    assert _shape(evaluate(built)) == _shape(evaluate(built, judge_replicas_once=False))


_TENANT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm, namespace: {ns}, labels: {{app: vllm}}}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: vllm}}}}
  template:
    metadata: {{labels: {{app: vllm}}}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.1
        args: [--model, meta-llama/Llama-3.1-8B-Instruct, --port, "8000"]
        ports: [{{containerPort: 8000}}]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: vllm, namespace: {ns}}}
spec:
  selector: {{app: vllm}}
  ports: [{{port: 80, targetPort: 8000}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: vllm, namespace: {ns}}}
spec:
  parentRefs: [{{name: inference, namespace: gateway}}]
  rules:
  - backendRefs: [{{name: vllm, port: 80{backend_ns}}}]
    timeouts: {{request: 10s}}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: vllm, namespace: {ns}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: vllm}}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 60}}}}
"""

_GATEWAY = """
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: inference, namespace: gateway}
spec:
  gatewayClassName: istio
  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [g6.xlarge]}
      taints: [{key: nvidia.com/gpu, effect: NoSchedule}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  limits: {nvidia.com/gpu: 4}
"""


def _tenant(ns: str, backend_ns: str = "") -> str:
    return _TENANT.format(ns=ns, backend_ns=f", namespace: {backend_ns}" if backend_ns else "")


def test_tenants_behind_a_shared_gateway_and_pool_report_as_judged_one_by_one() -> None:
    # Routes into a shared gateway namespace, HPAs and Services in each tenant, one GPU pool
    # all tenants share (K008 and K016 sum or list every tenant's Pods), and one tenant's
    # route sending traffic to team-a's Service: team-a is named there, so it is judged on
    # its own (routes reach its Service that reach no other tenant's), team-b and team-c
    # stay one class, and so do the two tenants that name team-a.
    text = "---".join(
        [
            _GATEWAY,
            _tenant("team-a"),
            _tenant("team-b"),
            _tenant("team-c"),
            _tenant("team-d", backend_ns="team-a"),
            _tenant("team-e", backend_ns="team-a"),
        ]
    )
    objects = _objects(text)
    replicas = EvaluationIndex(objects).replicas()
    namespaces = {o.namespace for o in objects if id(o) in replicas}
    assert namespaces == {"team-c", "team-e"}
    every = evaluate(objects, judge_replicas_once=False)
    once = evaluate(objects)
    assert _shape(once) == _shape(every)
    # the shared pool's demand counts every tenant (K008: 5 tenants x 4 Pods > 4 GPUs)
    assert {f.resource for f in once.findings if f.rule == "K008"} == {
        f"Deployment/team-{t}/vllm" for t in "abcde"
    }
