"""Every stack example in stacks/examples/ (one per feature: multi-node engines, DRA by the
kubernetes-sigs chart and by the GPU Operator, KV-cache offload) plans clean: no finding,
a deploy rehearsal without a blocker, and every object it registers valid against the
pinned schemas: core objects (DRA's ResourceClaimTemplate included) against the Kubernetes
OpenAPI of the stack's version (kubernetes-validate, strict), LeaderWorkerSet and Karpenter
objects against the CRDs in tests/schemas/, Gateway API and InferencePool objects against
the catalogued gateway CRDs. Objects of other groups have no pinned schema
and are listed, so none is skipped by accident. Each feature's example is also shown to do
what it says (a mutation that breaks it is reported)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from _schemas import KARPENTER_CRDS, LWS_CRDS, crd_validators, schema_errors, validators_of
from _stacks import ROOT

from gpustrata.catalog.gateway import gateway_crds
from gpustrata.core.errors import StackError
from gpustrata.planning.build import plan_spec
from gpustrata.reports.text import PlanReport, plan_report
from gpustrata.spec.loader import read_stack_file, validate_stack
from gpustrata_policies import evaluate, objects_from_pulumi
from gpustrata_policies.rehearsal import rehearse

EXAMPLES_DIR = ROOT / "stacks" / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.rglob("Pulumi.*.yaml"))
CRD_VALIDATORS = {**crd_validators(KARPENTER_CRDS, LWS_CRDS), **validators_of(gateway_crds())}
UNPINNED_GROUPS = {"ray.io", "keda.sh", "monitoring.coreos.com", "gpustrata.io", "helm.sh"}
"""Groups whose objects no pinned schema covers here (Helm releases are Pulumi's input)."""


def _stack(path: Path) -> str:
    return path.name.removeprefix("Pulumi.").removesuffix(".yaml")


@functools.cache
def _report(path: Path) -> PlanReport:
    spec, document = read_stack_file(path)
    plan = plan_spec(spec, str(path), base_dir=ROOT)
    return plan_report(path, _stack(path), plan, document, ROOT)


@pytest.fixture(params=EXAMPLES, ids=[str(p.relative_to(EXAMPLES_DIR)) for p in EXAMPLES])
def example(request: pytest.FixtureRequest) -> tuple[Path, PlanReport]:
    path: Path = request.param
    return path, _report(path)


def _example(name: str) -> PlanReport:
    return _report(ROOT / "stacks" / "examples" / f"Pulumi.{name}.yaml")


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def test_every_feature_has_an_example() -> None:
    names = {str(p.relative_to(EXAMPLES_DIR)) for p in EXAMPLES}
    assert names >= {
        "Pulumi.multinode.yaml",
        "Pulumi.dra.yaml",
        "Pulumi.dra-operator.yaml",
        "Pulumi.kv-offload.yaml",
        "inference-gateway/Pulumi.staging.yaml",
    }


def test_example_plans_clean(example: tuple[Path, PlanReport]) -> None:
    path, report = example
    assert report.findings == [], [f["message"] for f in report.findings]
    assert report.exit_code == 0
    assert report.rehearsal is not None
    assert report.rehearsal.blockers == [], [s.as_dict() for s in report.rehearsal.blockers]
    assert report.rehearsal.steps, f"{path.name}: the rehearsal replayed no step"


def test_example_objects_validate(example: tuple[Path, PlanReport]) -> None:
    path, report = example
    objects = objects_from_pulumi((r.type, r.name, r.inputs) for r in report.resources)
    version = report.plan.spec.cluster.kubernetes_version
    checked = 0
    for obj in objects:
        where = f"{path.name}: {obj['kind']}/{obj['metadata']['name']}"
        key = (obj["apiVersion"], obj["kind"])
        if key in CRD_VALIDATORS:
            assert schema_errors(CRD_VALIDATORS[key], obj) == [], where
        elif _group(obj["apiVersion"]) in UNPINNED_GROUPS:
            continue
        else:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{where} at Kubernetes {version}: {exc}")
        checked += 1
    assert checked >= 5, f"{path.name}: only {checked} objects validated"


def _objects(report: PlanReport) -> list[dict[str, Any]]:
    return objects_from_pulumi((r.type, r.name, r.inputs) for r in report.resources)


def _of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_dra_example_installs_the_kubernetes_sigs_chart() -> None:
    report = _example("dra")
    objects = _objects(report)
    charts = {o["spec"]["chart"]: o for o in _of(objects, "HelmRelease")}
    release = charts["oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu"]
    assert release["spec"]["version"] == "0.4.1"
    assert "repositoryOpts" not in release["spec"]  # an OCI reference names the chart itself
    assert release["spec"]["values"]["gpuResourcesEnabledOverride"] is True
    assert not any(
        c.endswith("/nvidia-dra-driver-gpu") or c == "nvidia-dra-driver-gpu" for c in charts
    )
    (claim,) = _of(objects, "ResourceClaimTemplate")
    assert claim["metadata"]["name"] == "llama-8b-dra-gpus"
    # The same driver beside a device plugin on its nodes is O008's finding.
    broken = copy.deepcopy(objects)
    for o in broken:
        if o["kind"] == "HelmRelease" and o["spec"]["chart"].endswith("/dra-driver-nvidia-gpu"):
            o["spec"]["values"].pop("kubeletPlugin")
    assert "O008" in {f.rule for f in evaluate(broken).findings}


def test_operator_dra_example_deploys_a_gpu_cluster_only() -> None:
    report = _example("dra-operator")
    objects = _objects(report)
    charts = {o["spec"]["chart"]: o for o in _of(objects, "HelmRelease")}
    assert not any("dra-driver" in c for c in charts)  # no DRA chart of its own
    (operator,) = [o for o in objects if o["kind"] == "GpuOperator"]
    values = operator["spec"]["values"]
    assert values["gpuCluster"] == {"deployCR": True}
    assert values["clusterPolicy"] == {"deployCR": False}
    assert values["draDriver"]["computeDomains"]["enabled"] is False
    assert len(_of(objects, "ResourceClaimTemplate")) == 1
    # Both CRs at once is O008's finding.
    broken = copy.deepcopy(objects)
    for o in broken:
        if o["kind"] == "GpuOperator":
            o["spec"]["values"]["clusterPolicy"]["deployCR"] = True
    assert "O008" in {f.rule for f in evaluate(broken).findings}


def _doc(name: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "stacks" / "examples" / f"Pulumi.{name}.yaml").read_text())
    doc: dict[str, Any] = data["config"]["gpustrata:stack"]
    return doc


@pytest.mark.parametrize(
    ("change", "path", "says"),
    [
        (
            lambda d: d["node_pools"][0].update(gpu_allocation="device-plugin"),
            "node_pools[0].gpu_allocation",
            "no device plugin",
        ),
        (lambda d: d["gpu_operator"].update(chart_version="v26.3.3"), "dra.driver", "v26.7.0"),
        (
            lambda d: d["gpu_operator"].update(enabled=False),
            "dra.driver",
            "gpu_operator.enabled is false",
        ),
    ],
    ids=["device-plugin-pool", "old-operator", "no-operator"],
)
def test_operator_dra_refused_where_it_cannot_work(change: Any, path: str, says: str) -> None:
    doc = _doc("dra-operator")
    change(doc)
    with pytest.raises(StackError) as err:
        validate_stack(doc, file="stacks/examples/Pulumi.dra-operator.yaml")
    text = str(err.value)
    assert f"gpustrata:stack.{path}" in text and says in text, text


def test_kv_offload_example_counts_the_host_buffers() -> None:
    report = _example("kv-offload")
    objects = _objects(report)
    args = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"][0]["command"]
        for o in _of(objects, "Deployment")
    }
    assert "--kv-offloading-size" in " ".join(map(str, args["llama-8b"]))
    assert "OffloadingConnector" in " ".join(map(str, args["llama-8b-connector"]))
    # Limits below the buffers (64 GiB and 20 GiB) are K020's findings, one per engine.
    broken = copy.deepcopy(objects)
    for o in _of(broken, "Deployment"):
        resources = o["spec"]["template"]["spec"]["containers"][0]["resources"]
        resources["limits"]["memory"] = resources["requests"]["memory"] = "16Gi"
    k020 = [f for f in evaluate(broken).findings if f.rule == "K020"]
    assert sorted(f.resource.split("/")[-1] for f in k020) == ["llama-8b", "llama-8b-connector"]


def test_the_dra_page_states_the_examples_plans() -> None:
    """docs/concepts/dra-as-it-ships.md states each DRA example's resources and rehearsal
    steps (as `plan` counts them: the stack itself left out); they are recomputed here."""
    page = (ROOT / "docs" / "concepts" / "dra-as-it-ships.md").read_text(encoding="utf-8")
    for name in ("dra", "dra-operator"):
        report = _example(name)
        assert report.rehearsal is not None
        ok = sum(s.status == "ok" for s in report.rehearsal.steps)
        assert f"the {name} example registers {len(report.resources) - 1} resources ({ok}" in (
            " ".join(page.split())
        ), name


def _without_dra_driver(report: PlanReport) -> list[Any]:
    """The dra example's registered resources less its DRA driver chart."""
    kept = [
        r
        for r in report.resources
        if not str(r.inputs.get("chart", "")).endswith("/dra-driver-nvidia-gpu")
    ]
    assert len(kept) == len(report.resources) - 1, "the dra example has one DRA driver chart"
    return kept


def test_dra_claims_without_a_driver_are_reported() -> None:
    """With no DRA driver, nothing creates the gpu.nvidia.com DeviceClass: the rehearsal
    says the claim's Pods hang, K018 names the claim, the class and the stack key."""
    kept = _without_dra_driver(_example("dra"))
    blockers = rehearse(kept).blockers
    assert [(s.type, s.status) for s in blockers] == [
        ("kubernetes:resource.k8s.io/v1:ResourceClaimTemplate", "would-hang")
    ]
    message = blockers[0].message
    assert "llama-8b-dra-gpus" in message and "DeviceClass gpu.nvidia.com" in message
    assert "dra.driver" in blockers[0].fix
    objects = objects_from_pulumi((r.type, r.name, r.inputs) for r in kept)
    k018 = [f for f in evaluate(objects).findings if f.rule == "K018"]
    assert [f.resource.split("/")[-1] for f in k018] == ["llama-8b-dra-gpus"]
    assert "DeviceClass gpu.nvidia.com" in k018[0].message and "dra.driver" in k018[0].message
    # A DeviceClass object in the input is the class itself: nothing to report.
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
    }
    assert "K018" not in {f.rule for f in evaluate([*objects, device_class]).findings}


def test_operator_dra_without_its_gpu_cluster_is_reported() -> None:
    """The GPU Operator with gpuCluster.deployCR off installs no DRA driver."""
    objects = copy.deepcopy(_objects(_example("dra-operator")))
    for o in objects:
        if o["kind"] == "GpuOperator":
            o["spec"]["values"]["gpuCluster"]["deployCR"] = False
    k018 = [f for f in evaluate(objects).findings if f.rule == "K018"]
    assert [f.resource.split("/")[-1] for f in k018] == ["llama-8b-gpus"], k018
