"""VllmDeployment and RayLlmService: the serving layer as Kubernetes objects."""

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpustrata.components._inputs import Placeholders
from gpustrata.components._options import child_options
from gpustrata.render.workload_args import RayLlmServiceArgs, VllmDeploymentArgs
from gpustrata.render.workloads import (
    SERVE_PORT,
    VLLM_PORT,
    ray_claim_templates,
    ray_service_object,
    vllm_deployment_objects,
)

# Pulumi's component analyzer reads the runtime annotations of ``args``. workload_args
# imports no Pulumi, so its names and namespaces are ``StrInput`` = ``pulumi.Input[str]``
# only to a type checker and ``str`` at run time; here, where Pulumi is loaded, they get
# the real annotation, so the component schema marks them as Inputs (not plain) and
# other languages may pass another resource's Output, as Python programs can.
_STR_INPUT = pulumi.Input[str]
for _args in (VllmDeploymentArgs, RayLlmServiceArgs):
    _args.__annotations__.update(name=_STR_INPUT, namespace=_STR_INPUT)


def _endpoint(service: pulumi.Input[str], namespace: pulumi.Input[str], port: int) -> Any:
    return pulumi.Output.concat("http://", service, ".", namespace, f".svc.cluster.local:{port}/v1")


def register_object(
    name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    """Register one rendered Kubernetes object with its typed pulumi_kubernetes class."""
    kind, meta, api = obj["kind"], obj["metadata"], obj["apiVersion"]
    if kind == "Deployment":
        return k8s.apps.v1.Deployment(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "Service":
        return k8s.core.v1.Service(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "PodDisruptionBudget":
        return k8s.policy.v1.PodDisruptionBudget(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "HorizontalPodAutoscaler":
        return k8s.autoscaling.v2.HorizontalPodAutoscaler(
            name, metadata=meta, spec=obj["spec"], opts=opts
        )
    if kind == "ResourceClaimTemplate" and api == "resource.k8s.io/v1":
        return k8s.resource.v1.ResourceClaimTemplate(
            name, metadata=meta, spec=obj["spec"], opts=opts
        )
    # CRDs (RayService, ScaledObject, ...): pass the object through unchanged.
    return k8s.apiextensions.CustomResource(
        name, api_version=api, kind=kind, metadata=meta, spec=obj["spec"], opts=opts
    )


class VllmDeployment(pulumi.ComponentResource):
    """`vllm serve` in a Deployment with its Service, a PDB when it can run more than one
    replica, the one autoscaler the stack asks for (HPA or KEDA) and a ServiceMonitor for
    vLLM's /metrics."""

    service_name: pulumi.Output[str]
    """Name of the Service in front of the engines."""
    endpoint: pulumi.Output[str]
    """In-cluster OpenAI API base URL (``http://<service>.<namespace>.svc.cluster.local:8000/v1``)."""

    def __init__(
        self, name: str, args: VllmDeploymentArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:VllmDeployment", name, {}, opts)
        child = child_options(self, opts)
        inputs = Placeholders()
        plain = VllmDeploymentArgs(
            **{
                **args,
                "name": inputs.plain(args["name"]),
                "namespace": inputs.plain(args["namespace"]),
            }
        )
        for obj in vllm_deployment_objects(plain):
            suffix = obj["kind"].lower()
            register_object(f"{name}-{suffix}", inputs.restore(obj), child)
        self.service_name = pulumi.Output.from_input(args["name"])
        self.endpoint = _endpoint(args["name"], args["namespace"], VLLM_PORT)
        self.register_outputs({"service_name": self.service_name, "endpoint": self.endpoint})


class RayLlmService(pulumi.ComponentResource):
    """A RayService running Ray Serve LLM (``ray.serve.llm:build_openai_app``): a CPU-only
    head, one GPU worker group per pool sized from the plan, placement groups of TP x PP
    bundles, and an upgrade strategy the pool's GPUs can hold."""

    service_name: pulumi.Output[str]
    """Name of the RayService (KubeRay creates `<name>-serve-svc`)."""
    endpoint: pulumi.Output[str]
    """In-cluster OpenAI API base URL of the Serve Service (``<name>-serve-svc``)."""

    def __init__(
        self, name: str, args: RayLlmServiceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:RayLlmService", name, {}, opts)
        inputs = Placeholders()
        plain = RayLlmServiceArgs(
            **{
                **args,
                "name": inputs.plain(args["name"]),
                "namespace": inputs.plain(args["namespace"]),
            }
        )
        claims: list[pulumi.Resource] = [
            register_object(
                f"{name}-{t['metadata']['name']}-claim",
                inputs.restore(t),
                child_options(self, opts),
            )
            for t in ray_claim_templates(plain)
        ]
        obj = inputs.restore(ray_service_object(plain))
        register_object(f"{name}-rayservice", obj, child_options(self, opts, claims))
        self.service_name = pulumi.Output.from_input(args["name"])
        serve_service = pulumi.Output.concat(args["name"], "-serve-svc")
        self.endpoint = _endpoint(serve_service, args["namespace"], SERVE_PORT)
        self.register_outputs({"service_name": self.service_name, "endpoint": self.endpoint})
