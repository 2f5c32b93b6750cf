"""Every core Kubernetes object a stack registers validates against the official schema.

`kubernetes-validate` ships the Kubernetes OpenAPI schemas per release; the strict ones
also reject unknown fields. Each stack is checked at its own `cluster.kubernetes_version`
(all reference stacks: 1.34, which kubernetes-validate has). Custom resources (RayService,
ScaledObject, ServiceMonitor) have no schema there and are listed explicitly, so a core
object can never be skipped by accident.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from _stacks import ROOT, STACKS, stack_doc

from gpustrata.runtime.mockrun import run_program
from gpustrata_policies import objects_from_pulumi

CUSTOM_GROUPS = {"ray.io", "keda.sh", "monitoring.coreos.com", "gpustrata.io", "helm.sh"}


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
