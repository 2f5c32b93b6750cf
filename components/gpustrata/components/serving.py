"""VllmDeployment and RayLlmService: the serving layer as Kubernetes objects."""

from typing import Any, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from gpustrata.components._inputs import Placeholders
from gpustrata.components._options import child_options
from gpustrata.core.contract import API_VERSION
from gpustrata.render.workload_args import RayLlmServiceArgs, VllmDeploymentArgs
from gpustrata.render.workloads import (
    SERVE_PORT,
    SERVICE_PORT,
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


_Args = TypeVar("_Args", VllmDeploymentArgs, RayLlmServiceArgs)


def _plain_names(inputs: Placeholders, args: _Args) -> _Args:
    """*args* with ``name`` and ``namespace`` plain strings (placeholders for Outputs), as
    the pure renderers take them; :meth:`Placeholders.restore` puts the Outputs back."""
    plain = args.copy()
    plain["name"] = inputs.plain(args["name"])
    plain["namespace"] = inputs.plain(args["namespace"])
    return plain


def _description(inputs: Placeholders, service: Any, namespace: Any, port: int) -> Any:
    """The ``ModelEndpoint`` the rules read (K021): the URL the component exports and the
    Service it names, so the pack sees both."""
    return inputs.restore(
        {
            "apiVersion": API_VERSION,
            "kind": "ModelEndpoint",
            "metadata": {"name": service, "namespace": namespace},
            "spec": {
                "url": f"http://{service}.{namespace}.svc.cluster.local:{port}/v1",
                "service": service,
                "namespace": namespace,
            },
        }
    )


def register_object(
    name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    """Register one rendered Kubernetes object with its typed pulumi_kubernetes class."""
    kind, meta, api = obj["kind"], obj["metadata"], obj["apiVersion"]
    if kind == "Deployment":
        return k8s.apps.v1.Deployment(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "Service":
        return k8s.core.v1.Service(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "ConfigMap":
        return k8s.core.v1.ConfigMap(name, metadata=meta, data=obj["data"], opts=opts)
    if kind == "PersistentVolumeClaim":
        return k8s.core.v1.PersistentVolumeClaim(name, metadata=meta, spec=obj["spec"], opts=opts)
    if kind == "StorageClass":
        return k8s.storage.v1.StorageClass(
            name,
            metadata=meta,
            provisioner=obj["provisioner"],
            volume_binding_mode=obj.get("volumeBindingMode"),
            reclaim_policy=obj.get("reclaimPolicy"),
            parameters=obj.get("parameters"),
            opts=opts,
        )
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
    """In-cluster OpenAI API base URL at the Service's port
    (``http://<service>.<namespace>.svc.cluster.local:80/v1``)."""

    def __init__(
        self, name: str, args: VllmDeploymentArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        inputs = Placeholders()
        plain = _plain_names(inputs, args)
        description = _description(inputs, plain["name"], plain["namespace"], SERVICE_PORT)
        super().__init__("gpustrata:index:VllmDeployment", name, {"description": description}, opts)
        child = child_options(self, opts)
        for obj in vllm_deployment_objects(plain):
            suffix = obj["kind"].lower()
            register_object(f"{name}-{suffix}", inputs.restore(obj), child)
        self.service_name = pulumi.Output.from_input(args["name"])
        # The Service's port, not the container's: clients reach the Service (K021).
        self.endpoint = _endpoint(args["name"], args["namespace"], SERVICE_PORT)
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
        inputs = Placeholders()
        plain = _plain_names(inputs, args)
        description = _description(
            inputs, f"{plain['name']}-serve-svc", plain["namespace"], SERVE_PORT
        )
        super().__init__("gpustrata:index:RayLlmService", name, {"description": description}, opts)
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
