"""Issue 15 items 4-5: a DRA pool in the stack, and DRA claims read by the rules.

prod's gpu-l40s pool allocates its GPUs with the NVIDIA DRA driver (gpu_allocation: dra):
the plan under Pulumi's mocks registers the driver's pinned chart and a ResourceClaimTemplate
of exactly TP x PP devices per engine; the rules read the claims as the Pods' GPUs and are
clean on what was registered; a Ray engine on a DRA pool keeps num-gpus equal to its claim.
"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
import yaml
from _stacks import ROOT, stack_doc

from gpustrata.catalog.dra import dra_driver_release
from gpustrata.core.contract import DEVICE_PLUGIN_DEPLOY_LABEL
from gpustrata.core.errors import StackError
from gpustrata.core.unknown import UNKNOWN
from gpustrata.runtime.mockrun import run_program
from gpustrata.spec.loader import validate_stack
from gpustrata_policies import evaluate, objects_from_pulumi


def _registered(doc: dict[str, Any]) -> list[dict[str, Any]]:
    resources = run_program(doc, stack="prod", program=ROOT / "__main__.py")
    return objects_from_pulumi((r.type, r.name, r.inputs) for r in resources)


def _of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def _claim_count(template: dict[str, Any]) -> int:
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert request["exactly"]["allocationMode"] == "ExactCount"
    count: int = request["exactly"]["count"]
    return count


def _engine_gpus(model: dict[str, Any]) -> int:
    engine = model.get("engine", {})
    tp: int = engine.get("tensor_parallel_size", 1)
    pp: int = engine.get("pipeline_parallel_size", 1)
    return tp * pp


def _ray_on_dra() -> dict[str, Any]:
    """prod with the 70B Ray engine's pool (gpu-h100) on DRA too."""
    doc = copy.deepcopy(stack_doc("prod"))
    for pool in doc["node_pools"]:
        pool["gpu_allocation"] = "dra"
    return doc


def test_prod_plan_registers_the_driver_chart_and_claim_templates() -> None:
    doc = stack_doc("prod")
    objects = _registered(doc)
    releases = [
        o for o in _of_kind(objects, "HelmRelease") if o["spec"]["chart"] == "nvidia-dra-driver-gpu"
    ]
    (release,) = releases
    pinned = dra_driver_release()
    assert release["spec"]["version"] == pinned.version
    assert release["spec"]["repositoryOpts"]["repo"] == pinned.repository
    values = release["spec"]["values"]
    assert values["resources"]["gpus"]["enabled"] is True
    assert values["gpuResourcesEnabledOverride"] is True
    dra_pools = [p["name"] for p in doc["node_pools"] if p.get("gpu_allocation") == "dra"]
    assert dra_pools == ["gpu-l40s"]
    (term,) = values["kubeletPlugin"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == dra_pools
    # The DRA pool keeps the device plugin off; the other pool does not.
    off = {
        p["metadata"]["name"]
        for p in _of_kind(objects, "GpuNodePool")
        if p["spec"]["labels"].get(DEVICE_PLUGIN_DEPLOY_LABEL) == "false"
    }
    assert off == set(dra_pools)
    # One ResourceClaimTemplate per engine on the DRA pool, of exactly TP x PP devices.
    model = next(m for m in doc["models"] if m["pool"] == "gpu-l40s")
    (template,) = _of_kind(objects, "ResourceClaimTemplate")
    assert template["apiVersion"] == "resource.k8s.io/v1"
    assert _claim_count(template) == _engine_gpus(model)
    (deployment,) = [
        d for d in _of_kind(objects, "Deployment") if d["metadata"]["name"] == model["name"]
    ]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [
        {"name": "gpus", "resourceClaimTemplateName": template["metadata"]["name"]}
    ]
    (container,) = pod["containers"]
    assert container["resources"]["claims"] == [{"name": "gpus"}]
    for section in ("limits", "requests"):
        assert "nvidia.com/gpu" not in container["resources"][section]


def test_rules_are_clean_on_the_registered_dra_stack() -> None:
    report = evaluate(_registered(stack_doc("prod")), environment="prod")
    assert [f.rule for f in report.findings] == []
    assert not [n for n in report.not_evaluated if n.rule in {"O008", "V001", "K005"}]


def test_o008_catches_the_device_plugin_left_on_a_dra_pool() -> None:
    objects = _registered(stack_doc("prod"))
    for pool in _of_kind(objects, "GpuNodePool"):
        pool["spec"]["labels"].pop(DEVICE_PLUGIN_DEPLOY_LABEL, None)
    report = evaluate(objects, environment="prod")
    (finding,) = [f for f in report.findings if f.rule == "O008"]
    assert finding.resource.startswith("HelmRelease/nvidia-dra-driver-gpu/")
    assert "gpu-l40s" in finding.message


def test_v001_reads_the_claim_count() -> None:
    objects = _registered(stack_doc("prod"))
    (template,) = _of_kind(objects, "ResourceClaimTemplate")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    report = evaluate(objects, environment="prod")
    v001 = [f for f in report.findings if f.rule == "V001"]
    assert len(v001) == 1 and "GPU limit is 2" in v001[0].message


def test_an_unknown_claim_count_is_not_a_violation() -> None:
    objects = _registered(stack_doc("prod"))
    (template,) = _of_kind(objects, "ResourceClaimTemplate")
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = UNKNOWN
    report = evaluate(objects, environment="prod")
    assert not [f for f in report.findings if f.rule in {"V001", "K005", "K001"}]
    assert [n for n in report.not_evaluated if n.rule == "V001"]


def test_ray_workers_advertise_their_claim() -> None:
    doc = _ray_on_dra()
    objects = _registered(doc)
    model = next(m for m in doc["models"] if m["runtime"] == "rayservice")
    (service,) = _of_kind(objects, "RayService")
    (group,) = service["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    pod = group["template"]["spec"]
    (claim,) = pod["resourceClaims"]
    templates = {t["metadata"]["name"]: t for t in _of_kind(objects, "ResourceClaimTemplate")}
    count = _claim_count(templates[claim["resourceClaimTemplateName"]])
    assert count == _engine_gpus(model)  # STRICT_PACK: the whole engine on one worker
    assert group["rayStartParams"]["num-gpus"] == str(count)
    assert "nvidia.com/gpu" not in pod["containers"][0]["resources"]["limits"]
    assert [f.rule for f in evaluate(objects, environment="prod").findings] == []


@pytest.mark.parametrize("doc", [stack_doc("prod"), _ray_on_dra()], ids=["prod", "ray-on-dra"])
def test_claim_templates_validate_against_the_kubernetes_openapi(doc: dict[str, Any]) -> None:
    # kubernetes-validate ships the resource.k8s.io/v1 definitions of Kubernetes 1.34.
    version = doc["cluster"]["kubernetes_version"]
    templates = _of_kind(_registered(doc), "ResourceClaimTemplate")
    assert templates
    for template in templates:
        kubernetes_validate.validate(template, version, strict=True)


def test_dra_needs_kubernetes_1_34() -> None:
    doc = copy.deepcopy(stack_doc("prod"))
    doc["cluster"]["kubernetes_version"] = "1.33"
    with pytest.raises(StackError) as info:
        validate_stack(doc)
    text = str(info.value)
    assert "node_pools[1].gpu_allocation" in text
    assert "1.34" in text and "1.33" in text and "device-plugin" in text


FIXTURE = ROOT / "policies/gpustrata_policies/rules/v001_parallelism_matches_gpus/good-dra.yaml"


@pytest.mark.parametrize(("product", "gpu_known"), [("NVIDIA L4", True), (None, False)])
def test_a_claim_selector_names_the_gpu_model(product: str | None, gpu_known: bool) -> None:
    # No node selector: only the claim's productName CEL selector says which GPU it is.
    docs = list(yaml.safe_load_all(FIXTURE.read_text(encoding="utf-8")))
    del docs[1]["spec"]["template"]["spec"]["nodeSelector"]
    exactly = docs[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    if product is None:
        del exactly["selectors"]
    else:
        exactly["selectors"][0]["cel"]["expression"] = (
            f"device.attributes['gpu.nvidia.com'].productName == '{product}'"
        )
    report = evaluate(docs, environment="prod")
    unknown_gpu = {n.rule for n in report.not_evaluated if "GPU model is unknown" in n.reason}
    # Without the selector V003 differs between the candidate GPUs (V004 may not: it is
    # decided where every candidate agrees).
    assert ("V003" not in unknown_gpu) is gpu_known
    if gpu_known:  # 64 sequences of 8k tokens do not fit a 70B model's KV cache on 8 x L4
        assert any(
            f.rule == "V012" and "productName=NVIDIA-L4" in f.message for f in report.findings
        )
