"""Which Kubernetes kinds the view reads, and in which API groups.

Kubernetes' own kinds count only in one of Kubernetes' API groups; a controller's kind
only in its controller's group (:func:`is_read_kind`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpustrata_policies.view.objects import K8sObject

__all__ = [
    "BUILTIN_KINDS",
    "CLUSTER_SCOPED_KINDS",
    "CONTROLLER_KINDS",
    "FOREIGN_KINDS",
    "KNOWN_KINDS",
    "POD_KINDS",
    "RAY_KINDS",
    "api_group",
    "is_builtin",
    "is_read_kind",
]

WORKLOAD_KINDS = frozenset(
    {"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}
)
RAY_KINDS = frozenset({"RayCluster", "RayService", "RayJob", "RayClusterFleet"})
"""KubeRay's kinds, and AIBrix's RayClusterFleet (a Deployment-like set of RayClusters)."""
KSERVE_KINDS = frozenset(
    {
        "ServingRuntime",
        "ClusterServingRuntime",
        "InferenceService",
        "LLMInferenceService",
        "LLMInferenceServiceConfig",  # presets merged into the services naming it (baseRefs)
    }
)
K8S_KINDS = frozenset(
    {
        "Service",
        "ConfigMap",
        "Secret",
        "Namespace",
        "ServiceAccount",
        "PersistentVolumeClaim",
        "Node",
        "Ingress",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "DeviceClass",
        "CustomResourceDefinition",  # what makes a custom resource's kind exist (K018)
    }
)
"""Kubernetes' own kinds other than workloads that gpustrata reads (or knows to be
irrelevant)."""
OTHER_KINDS = K8S_KINDS | frozenset(
    {
        "LeaderWorkerSet",
        "ScaledObject",
        "VerticalPodAutoscaler",
        "ServiceMonitor",
        "PodMonitor",
        "PodMonitoring",  # GKE managed Prometheus scrape config: no Pods, no rule reads it
        "GpuNodePool",
        "NodePool",
        "EC2NodeClass",
        "GpuOperator",
        "HelmRelease",
        "HelmValues",
        "ClusterPolicy",
        "NVIDIADriver",
        "PodIdentityAssociation",  # EKS Pod Identity (K019)
        "HTTPRoute",  # Gateway API (K021)
        "ModelEndpoint",  # a serving component's exported endpoint (K021)
        "EksAddon",  # an EKS add-on (CoreDNS: K017, the deploy rehearsal)
        "InferencePool",  # Gateway API Inference Extension (G001, G002)
        # Gateway API Gateway: the standard channel gives it no timeout (its routes and
        # the policies on it carry them: G001); its CRD and class are K018's.
        "Gateway",
        "VirtualService",  # Istio route timeouts (G001)
        "BackendTrafficPolicy",  # Envoy Gateway timeouts (G001)
        "ClientTrafficPolicy",  # Envoy Gateway idle timeouts (G001)
        "GPUCluster",  # the GPU Operator's DRA enablement CR (O008)
    }
)
CONTROLLER_KINDS = {
    "Workspace": "kaito.sh",
    "InferenceSet": "kaito.sh",
    "NIMService": "apps.nvidia.com",
    "NIMCache": "apps.nvidia.com",  # a model download into a PVC: no serving Pods
    "Rollout": "argoproj.io",
    "JobSet": "jobset.x-k8s.io",
    "RayClusterFleet": "orchestration.aibrix.ai",
    "DynamoGraphDeployment": "nvidia.com",
    "Model": "kubeai.org",
    "Playground": "inference.llmaz.io",
    "OpenModel": "llmaz.io",  # a model description Playgrounds claim: no Pods of its own
    "RoleBasedGroup": "workloads.x-k8s.io",
    "RoleBasedGroupSet": "workloads.x-k8s.io",
    "StormService": "orchestration.aibrix.ai",  # AIBrix: roles of RoleBasedGroup's shape
    "ModelServing": "workload.serving.volcano.sh",  # kthena: roles of entry + worker Pods
    "ModelBooster": "workload.serving.volcano.sh",  # kthena: converted into a ModelServing
    "VLLMRuntime": "production-stack.vllm.ai",  # production-stack operator: one Deployment
}
"""Kinds of other projects whose controllers create the Pods, by API group: read only in
that group (a ``Workspace`` of another project is not KAITO's)."""
OWNED_KINDS = {kind: "ray.io" for kind in ("RayCluster", "RayService", "RayJob")} | {
    kind: "serving.kserve.io" for kind in KSERVE_KINDS
}
"""KubeRay's and KServe's kinds by API group: where an object names a group, read only in
that one (fusioninfer.io has an ``InferenceService`` of another shape, whose Pods its
controller makes from ``spec.roles``)."""
KNOWN_KINDS = WORKLOAD_KINDS | RAY_KINDS | KSERVE_KINDS | OTHER_KINDS | frozenset(CONTROLLER_KINDS)
"""Kinds gpustrata reads (or knows to be irrelevant); others are "not evaluated"."""

POD_KINDS = (
    WORKLOAD_KINDS
    | RAY_KINDS
    | frozenset(CONTROLLER_KINDS)
    | frozenset(
        {
            "LeaderWorkerSet",
            "ServingRuntime",
            "ClusterServingRuntime",
            "InferenceService",
            "LLMInferenceService",
            "Service",  # a Knative Service (FOREIGN_KINDS); a core Service has no Pods
        }
    )
)
"""Every kind whose objects may hold a pod spec (:meth:`K8sObject.pods
<gpustrata_policies.view.objects.K8sObject.pods>` is empty for any other kind): what a
rule that reads only Pods, containers or engines reads (see
:data:`gpustrata_policies.rules._kinds.SUBJECT_KINDS`)."""

BUILTIN_KINDS = WORKLOAD_KINDS | K8S_KINDS
"""Kubernetes' own kinds: read as such only in one of Kubernetes' API groups (see
:func:`is_builtin`); another project's kind of the same name is that project's."""
KNATIVE_SERVING = "serving.knative.dev"
FOREIGN_KINDS = {("Service", KNATIVE_SERVING): "Knative Service"}
"""Kinds of other projects named like a Kubernetes kind, by (kind, API group), that
gpustrata reads: a Knative ``Service`` is a workload (its ``spec.template`` is a pod
template, knative/serving pkg/apis/serving/v1/service_types.go), not a core Service."""


CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "ClusterServingRuntime",
        "GpuNodePool",
        "Node",
        "NodePool",
        "EC2NodeClass",
        "HelmValues",
        "ClusterPolicy",
        "NVIDIADriver",
        "ClusterRole",
        "ClusterRoleBinding",
        "DeviceClass",
    }
)


def api_group(obj: K8sObject) -> str:
    """The API group of *obj*'s ``apiVersion`` (``apps`` of ``apps/v1``; ``""`` for the core
    group's ``v1`` and for an object that names none)."""
    api = obj.api_version
    return api.split("/", 1)[0] if "/" in api else ""


def _kubernetes_group(group: str) -> bool:
    """One of Kubernetes' API groups: the core group, a dot-less built-in one (``apps``,
    ``batch``, ``policy``, ``autoscaling``, ``extensions``) or ``*.k8s.io``."""
    return "." not in group or group.endswith(".k8s.io")


def is_builtin(obj: K8sObject, kind: str | None = None) -> bool:
    """Is *obj* Kubernetes' own kind (of name *kind* when given), not another project's kind
    of the same name (a Knative ``serving.knative.dev`` Service is no core Service)?"""
    if kind is not None and obj.kind != kind:
        return False
    return obj.kind in BUILTIN_KINDS and _kubernetes_group(api_group(obj))


def is_read_kind(obj: K8sObject) -> bool:
    """Is *obj* of a kind gpustrata reads (a controller kind only in its own API group; a
    Kubernetes kind name in another project's group only where :data:`FOREIGN_KINDS` has it)?"""
    group = api_group(obj)
    if obj.kind in BUILTIN_KINDS and not _kubernetes_group(group):
        return (obj.kind, group) in FOREIGN_KINDS
    controller = CONTROLLER_KINDS.get(obj.kind)
    if controller is not None:
        return group == controller
    owner = OWNED_KINDS.get(obj.kind)
    if owner is not None and "/" in obj.api_version:  # no group named: read by kind
        return group == owner
    return obj.kind in KNOWN_KINDS
