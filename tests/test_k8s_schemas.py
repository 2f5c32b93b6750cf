"""Every core Kubernetes object a stack registers validates against the official schema.

`kubernetes-validate` ships the Kubernetes OpenAPI schemas per release; the strict ones
also reject unknown fields. Each stack is checked at its own `cluster.kubernetes_version`
(all reference stacks: 1.34, which kubernetes-validate has). Custom resources (RayService,
ScaledObject, ServiceMonitor) have no schema there and are listed explicitly, so a core
object can never be skipped by accident.

Karpenter's NodePool and EC2NodeClass validate against the openAPIV3Schema of the CRDs of
the catalogued release (tests/schemas/karpenter-v1.14.1/, see SOURCE.md there), with unknown
fields rejected: the API server would prune them silently.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from _schemas import KARPENTER_CRDS, crd_validators
from _schemas import strict as _strict  # noqa: F401  (tests/test_routing.py imports it here)
from _stacks import ROOT, STACKS, stack_doc, stack_path

from gpustrata.catalog.compat import load_compat_catalog
from gpustrata.planning.build import plan_spec
from gpustrata.render.from_plan import karpenter_objects
from gpustrata.runtime.mockrun import run_program
from gpustrata.spec.loader import validate_stack
from gpustrata_policies import objects_from_pulumi

KARPENTER_GROUPS = {"karpenter.sh", "karpenter.k8s.aws"}
CUSTOM_GROUPS = {
    "ray.io",
    "keda.sh",
    "monitoring.coreos.com",
    "gpustrata.io",
    "helm.sh",
    *KARPENTER_GROUPS,
}


def _variants() -> list[tuple[str, dict[str, Any]]]:
    out = [(env, stack_doc(env)) for env in STACKS]
    hpa = stack_doc("prod")  # the 8B model scaled by an HPA instead of KEDA
    hpa["models"][1]["autoscaling"]["kind"] = "hpa"
    out.append(("prod-hpa", hpa))
    return out


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


@pytest.mark.parametrize(("name", "doc"), _variants(), ids=[n for n, _ in _variants()])
def test_core_objects_validate(name: str, doc: dict[str, Any]) -> None:
    version = doc["cluster"]["kubernetes_version"]
    assert kubernetes_validate.utils.major_minor(version) <= kubernetes_validate.latest_version()
    resources = run_program(doc, stack=name.split("-")[0], program=ROOT / "__main__.py")
    objects = objects_from_pulumi((r.type, r.name, r.inputs) for r in resources)
    core = [o for o in objects if _group(o["apiVersion"]) not in CUSTOM_GROUPS]
    kinds = {o["kind"] for o in core}
    assert {"Deployment", "Service", "Namespace"} <= kinds
    if name == "prod":
        assert "PodDisruptionBudget" in kinds
    if name == "prod-hpa":
        assert "HorizontalPodAutoscaler" in kinds
    for obj in core:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} at Kubernetes {version}: {exc}")


VALIDATORS = crd_validators(KARPENTER_CRDS)


def _errors(obj: dict[str, Any]) -> list[str]:
    validator = VALIDATORS[(obj["apiVersion"], obj["kind"])]
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)
    ]


def test_catalogued_release_is_the_schemas_release() -> None:
    release = load_compat_catalog().karpenter_releases()[0]
    assert KARPENTER_CRDS.name == f"karpenter-v{release.version}"
    assert {api for api, _ in VALIDATORS} == set(release.api_versions)


def _karpenter_stacks() -> list[tuple[str, dict[str, Any]]]:
    out = [(env, stack_doc(env)) for env in STACKS]
    rocket = stack_doc("staging")  # the Bottlerocket image (OS and data volumes)
    rocket["node_pools"][0]["karpenter"]["ami_alias"] = "bottlerocket@v1.20.4"
    rocket["cluster"]["subnet_ids"] = ["subnet-0a1b2c3d"]
    out.append(("staging-bottlerocket", rocket))
    return out


@pytest.mark.parametrize(
    ("name", "doc"), _karpenter_stacks(), ids=[n for n, _ in _karpenter_stacks()]
)
def test_karpenter_objects_validate(name: str, doc: dict[str, Any]) -> None:
    stack = name.split("-")[0]
    resources = run_program(doc, stack=stack, program=ROOT / "__main__.py")
    registered = [
        o
        for o in objects_from_pulumi((r.type, r.name, r.inputs) for r in resources)
        if _group(o["apiVersion"]) in KARPENTER_GROUPS
    ]
    rendered = karpenter_objects(plan_spec(validate_stack(doc, file=str(stack_path(stack)))))
    karpenter_pools = sum(p.get("provisioner") == "karpenter" for p in doc["node_pools"])
    for objects in (registered, rendered):
        assert sorted(o["kind"] for o in objects) == sorted(
            ["EC2NodeClass", "NodePool"] * karpenter_pools
        )
        for obj in objects:
            problems = _errors(obj)
            assert not problems, f"{obj['kind']}/{obj['metadata']['name']}: {problems}"


def test_karpenter_schema_rejects_what_the_api_server_would() -> None:
    doc = stack_doc("staging")
    node_class, node_pool = karpenter_objects(plan_spec(validate_stack(doc)))
    assert not _errors(node_class) and not _errors(node_pool)
    node_pool["spec"]["disruption"]["consolidationPolicy"] = "WhenIdle"
    node_class["spec"]["kubelet"]["reservedCpus"] = "0-1"  # not an EC2NodeClass field
    assert any("consolidationPolicy" in e for e in _errors(node_pool))
    assert any("reservedCpus" in e for e in _errors(node_class))
