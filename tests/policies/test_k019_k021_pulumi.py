"""K019 and K021 on what a Pulumi program registers (issue 29 findings 8 and 9).

The adapters turn ``aws:eks/podIdentityAssociation:PodIdentityAssociation`` into a
``PodIdentityAssociation`` object and the serving components' ``description`` into a
``ModelEndpoint``; the rules read both as they read manifests.
"""

from __future__ import annotations

from typing import Any

from gpustrata_policies import evaluate
from gpustrata_policies.inputs.pulumi import objects_from_pulumi

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
ACCOUNT = "kubernetes:core/v1:ServiceAccount"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"


def _deployment(account: str | None, model: str = "s3://weights/llama-3.1-8b/") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "containers": [
            {
                "name": "vllm",
                "image": "vllm/vllm-openai:v0.10.1.1",
                "args": ["--model", model, "--port", "8000"],
                "ports": [{"name": "http", "containerPort": 8000}],
                "resources": {"limits": {"nvidia.com/gpu": 1}},
            }
        ],
    }
    if account:
        spec["serviceAccountName"] = account
    return {
        "metadata": {"name": "llm", "namespace": "serving"},
        "spec": {
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {"metadata": {"labels": {"app": "llm"}}, "spec": spec},
        },
    }


def _service(port: int = 80) -> dict[str, Any]:
    return {
        "metadata": {"name": "llm", "namespace": "serving"},
        "spec": {"selector": {"app": "llm"}, "ports": [{"port": port, "targetPort": "http"}]},
    }


def _account() -> dict[str, Any]:
    return {"metadata": {"name": "weights", "namespace": "serving"}}


def _association(account: str = "weights") -> dict[str, Any]:
    return {
        "clusterName": "inference",
        "namespace": "serving",
        "serviceAccount": account,
        "roleArn": "arn:aws:iam::111122223333:role/weights",
    }


def _endpoint(port: int) -> dict[str, Any]:
    url = f"http://llm.serving.svc.cluster.local:{port}/v1"
    return {
        "description": {
            "apiVersion": "gpustrata.io/v1alpha1",
            "kind": "ModelEndpoint",
            "metadata": {"name": "llm", "namespace": "serving"},
            "spec": {"url": url, "service": "llm", "namespace": "serving"},
        }
    }


def _findings(resources: list[tuple[str, str, dict[str, Any]]], rule: str) -> list[str]:
    report = evaluate(objects_from_pulumi(resources))
    return [f.message for f in report.findings if f.rule == rule]


def test_the_association_converts_to_a_pod_identity_association() -> None:
    (obj,) = objects_from_pulumi([(ASSOCIATION, "weights-association", _association())])
    assert obj["kind"] == "PodIdentityAssociation"
    assert obj["spec"]["namespace"] == "serving"
    assert obj["spec"]["serviceAccount"] == "weights"


def test_the_serving_components_register_a_model_endpoint() -> None:
    for token in ("gpustrata:index:VllmDeployment", "gpustrata:index:RayLlmService"):
        (obj,) = objects_from_pulumi([(token, "llm", _endpoint(80))])
        assert obj["kind"] == "ModelEndpoint"


def test_s3_weights_under_the_default_account_are_a_violation() -> None:
    found = _findings([(DEPLOYMENT, "llm", _deployment(None))], "K019")
    assert len(found) == 1 and "default ServiceAccount" in found[0]


def test_an_association_for_the_account_binds_it() -> None:
    resources = [
        (DEPLOYMENT, "llm", _deployment("weights")),
        (ACCOUNT, "weights", _account()),
        (ASSOCIATION, "weights-association", _association()),
    ]
    assert _findings(resources, "K019") == []


def test_a_program_account_without_association_is_a_violation() -> None:
    # A Pulumi program shows every association it makes: none for this account is a finding.
    resources = [
        (DEPLOYMENT, "llm", _deployment("weights")),
        (ACCOUNT, "weights", _account()),
        (ASSOCIATION, "other", _association("other")),
    ]
    (message,) = _findings(resources, "K019")
    assert "ServiceAccount 'weights'" in message


def test_an_account_outside_the_program_is_not_evaluated() -> None:
    report = evaluate(objects_from_pulumi([(DEPLOYMENT, "llm", _deployment("weights"))]))
    assert [f for f in report.findings if f.rule == "K019"] == []
    assert [n.rule for n in report.not_evaluated if n.rule == "K019"] == ["K019"]


def test_hugging_face_weights_need_no_cloud_identity() -> None:
    resources = [(DEPLOYMENT, "llm", _deployment(None, "meta-llama/Llama-3.1-8B-Instruct"))]
    assert _findings(resources, "K019") == []


def test_endpoint_port_8000_against_service_port_80_is_finding_9() -> None:
    resources = [
        (DEPLOYMENT, "llm", _deployment("weights")),
        (SERVICE, "llm", _service(80)),
        ("gpustrata:index:VllmDeployment", "llm", _endpoint(8000)),
    ]
    (message,) = _findings(resources, "K021")
    assert "(port 8000)" in message and "exposes 80" in message


def test_endpoint_at_the_service_port_passes() -> None:
    resources = [
        (DEPLOYMENT, "llm", _deployment("weights")),
        (SERVICE, "llm", _service(80)),
        ("gpustrata:index:VllmDeployment", "llm", _endpoint(80)),
    ]
    assert _findings(resources, "K021") == []


def test_endpoint_without_its_service_in_the_input_is_silent() -> None:
    resources = [("gpustrata:index:VllmDeployment", "llm", _endpoint(8000))]
    assert _findings(resources, "K021") == []
