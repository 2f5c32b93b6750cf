"""A read-only view of Kubernetes-shaped objects: where the Pods are in every kind.

Objects are plain dicts (parsed YAML, Pulumi inputs). The view knows where the
pod template sits in each workload kind, which containers ask for GPUs, and
which node labels a pod selects. Unknown values (:data:`~.unknown.UNKNOWN`)
pass through; accessors that need them raise :class:`~.unknown.UnknownInput`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gpustrata.core.quantity import ZERO, exact_sum, exceeds, parse_quantity
from gpustrata.core.unknown import (
    ABSENT,
    TAINTED,
    UNKNOWN,
    UnknownInput,
    is_tracked,
    memoised,
)

__all__ = [
    "BUILTIN_KINDS",
    "CLUSTER_SCOPED_KINDS",
    "CONTROLLER_KINDS",
    "FOREIGN_KINDS",
    "KNOWN_KINDS",
    "RAY_KINDS",
    "ContainerRef",
    "K8sObject",
    "PodRef",
    "api_group",
    "as_list",
    "as_map",
    "controller_fills",
    "dig",
    "is_builtin",
    "is_gpu_resource",
    "is_read_kind",
    "kubeai_image",
    "kubeai_profile",
    "multi_pod_role",
    "rbg_group",
    "strategic_merge",
]

Path = tuple[str | int, ...]

WORKLOAD_KINDS = frozenset(
    {"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}
)
RAY_KINDS = frozenset({"RayCluster", "RayService", "RayJob", "RayClusterFleet"})
"""KubeRay's kinds, and AIBrix's RayClusterFleet (a Deployment-like set of RayClusters)."""
KSERVE_KINDS = frozenset(
    {"ServingRuntime", "ClusterServingRuntime", "InferenceService", "LLMInferenceService"}
)
OTHER_KINDS = frozenset(
    {
        "LeaderWorkerSet",
        "HorizontalPodAutoscaler",
        "ScaledObject",
        "VerticalPodAutoscaler",
        "PodDisruptionBudget",
        "ServiceMonitor",
        "PodMonitor",
        "GpuNodePool",
        "Node",
        "NodePool",
        "EC2NodeClass",
        "GpuOperator",
        "HelmRelease",
        "HelmValues",
        "ClusterPolicy",
        "NVIDIADriver",
        "Service",
        "ConfigMap",
        "Secret",
        "Namespace",
        "ServiceAccount",
        "PersistentVolumeClaim",
        "Ingress",
        "NetworkPolicy",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "ResourceClaimTemplate",
        "ResourceClaim",
        "DeviceClass",
        "PodIdentityAssociation",  # EKS Pod Identity (K019)
        "HTTPRoute",  # Gateway API (K021)
        "ModelEndpoint",  # a serving component's exported endpoint (K021)
        "EksAddon",  # an EKS add-on (CoreDNS: K017, the deploy rehearsal)
        "CustomResourceDefinition",  # what makes a custom resource's kind exist (K018)
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

BUILTIN_KINDS = WORKLOAD_KINDS | frozenset(
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
        "CustomResourceDefinition",
    }
)
"""Kubernetes' own kinds: read as such only in one of Kubernetes' API groups (see
:func:`is_builtin`); another project's kind of the same name is that project's."""
KNATIVE_SERVING = "serving.knative.dev"
FOREIGN_KINDS = {("Service", KNATIVE_SERVING): "Knative Service"}
"""Kinds of other projects named like a Kubernetes kind, by (kind, API group), that
gpustrata reads: a Knative ``Service`` is a workload (its ``spec.template`` is a pod
template, knative/serving pkg/apis/serving/v1/service_types.go), not a core Service."""

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

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

CLAIMED_GPU_RESOURCE = "nvidia.com/gpu"
"""The resource name under which a container's DRA-claimed GPUs are counted."""


def dig(data: Any, *path: str | int) -> Any:
    """Walk *path* into nested dicts/lists; ``None`` when absent, UNKNOWN when unknown."""
    cur = data
    for key in path:
        if type(cur) is dict and type(key) is str:  # the common case, without the ABC check
            cur = cur.get(key)
            continue
        if cur is None:  # an absent field: neither a list nor a mapping (no ABC check)
            return None
        if cur is UNKNOWN:
            return UNKNOWN
        if isinstance(key, int):
            if not isinstance(cur, list) or not -len(cur) <= key < len(cur):
                return None
            cur = cur[key]
        else:
            if not isinstance(cur, Mapping):
                return None
            cur = cur.get(key)
    return cur


def as_list(value: Any, what: str) -> list[Any]:
    """A list field, ``[]`` if absent or odd; raises UnknownInput if unknown."""
    if value is UNKNOWN:
        raise UnknownInput(what)
    return value if isinstance(value, list) else []


def as_map(value: Any, what: str) -> Mapping[str, Any]:
    """A mapping field, ``{}`` if absent or odd; raises UnknownInput if unknown."""
    if type(value) is dict:  # the common case, without the ABC check
        return value
    if value is None:  # an absent field, again without the ABC check
        return {}
    if value is UNKNOWN:
        raise UnknownInput(what)
    return value if isinstance(value, Mapping) else {}


def is_gpu_resource(name: str, extra: Sequence[str] = ()) -> bool:
    """``nvidia.com/gpu``, renamed shared GPUs (``nvidia.com/gpu.shared``), MIG
    profiles (``nvidia.com/mig-1g.10gb``) and configured others."""
    return (
        name == "nvidia.com/gpu"
        or name.startswith(("nvidia.com/gpu.", "nvidia.com/mig-"))
        or name in extra
    )


@dataclass(slots=True)
class K8sObject:
    """One Kubernetes-shaped object and where it came from."""

    raw: Mapping[str, Any]
    file: str | None = None
    line: int | None = None
    lines: Mapping[Path, int] | None = None
    """Line of each mapping key / list item, by path (from the YAML loader)."""
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    _resource: str | None = field(default=None, repr=False, compare=False)
    _kind: str | None = field(default=None, repr=False, compare=False)
    _namespace: str | None = field(default=None, repr=False, compare=False)
    claims: Mapping[tuple[str, str, str], Any] = field(
        default_factory=dict, repr=False, compare=False
    )
    """The evaluation's DRA claims by (kind, namespace, name), set by
    :func:`~gpustrata_policies.view.dra.attach_claims`."""
    merged_with: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    """The spec of the object whose controller builds this one's Pods from both, set by
    :func:`~gpustrata_policies.view.launchers.attach_partners`: a KServe InferenceService's
    ServingRuntime or ClusterServingRuntime, an llmaz Playground's claimed OpenModel (None:
    not among the objects, or another kind)."""
    _pods: list[PodRef] | None = field(default=None, repr=False, compare=False)
    _all_containers: list[ContainerRef] | None = field(default=None, repr=False, compare=False)
    _app_containers: list[ContainerRef] | None = field(default=None, repr=False, compare=False)

    # What the rules ask of an object, read once: the rules are pure functions of
    # ``raw``, which nothing mutates once it is wrapped (issue 18: 40 rules asked each
    # object for its containers, GPUs and name again and again).

    @property
    def kind(self) -> str:
        """``kind``, or ``""``."""
        found = self._kind
        if found is not None:
            return found
        kind = self.raw.get("kind")
        if is_tracked(self.raw):
            return kind if isinstance(kind, str) else ""  # each read of an unknown counts
        found = self._kind = kind if isinstance(kind, str) else ""
        return found

    @property
    def memo(self) -> dict[Any, Any]:
        """What the view derived from this object, read once (see
        :func:`~gpustrata.core.unknown.memoised`): pods, Ray Serve LLM placements."""
        return self._memo

    def forget_derived(self) -> None:
        """Drop every view derived from this object (memo, DRA claims, pods, containers):
        the views point back at the object, so an evaluation that is done with them frees
        them this way without waiting for the cycle collector (the pack, issue 18).

        The pod and container views' own memos are emptied too: a pod's keeps its
        containers, which point back at the pod, and a container's keeps readings that
        point at the container; those cycles were most of what the pack's collection
        after each stack policy freed (217 of 280 k objects at 1,000 resources)."""
        _forget_views(self._memo.values())
        self._memo.clear()
        self.claims = {}
        self._pods = self._all_containers = self._app_containers = None

    @property
    def api_version(self) -> str:
        """``apiVersion``, or ``""``."""
        value = self.raw.get("apiVersion")
        return value if isinstance(value, str) else ""

    @property
    def name(self) -> str:
        """``metadata.name`` (``generateName`` or ``?`` as fallbacks)."""
        meta = self.raw.get("metadata")
        if type(meta) is dict or isinstance(meta, Mapping):
            for key in ("name", "generateName"):
                value = meta.get(key)
                if isinstance(value, str) and value:
                    return value
        return "?"

    @property
    def namespace(self) -> str:
        """``metadata.namespace``; ``default`` when unset (``-`` for cluster-scoped kinds)."""
        found = self._namespace
        if found is not None:
            return found
        if self.kind in CLUSTER_SCOPED_KINDS:
            found = "-"
        else:
            value = dig(self.raw, "metadata", "namespace")
            found = value if isinstance(value, str) and value else "default"
        if not is_tracked(self.raw):  # each read of an unknown counts
            self._namespace = found
        return found

    @property
    def resource(self) -> str:
        """``Kind/namespace/name`` as in the output contract (computed once)."""
        found = self._resource
        if found is not None:
            return found
        resource = f"{self.kind or '?'}/{self.namespace}/{self.name}"
        if is_tracked(self.raw):
            return resource  # each read of an unknown counts
        self._resource = resource
        return resource

    @property
    def labels(self) -> Mapping[str, Any]:
        """``metadata.labels``."""
        return as_map(dig(self.raw, "metadata", "labels"), "metadata.labels")

    def line_of(self, path: Path) -> int | None:
        """Line of the longest known prefix of *path*, else the object's line."""
        if self.lines:
            for end in range(len(path), 0, -1):
                line = self.lines.get(path[:end])
                if line is not None:
                    return line
        return self.line

    def pods(self) -> list[PodRef]:
        """Every pod spec this object creates (read once: later calls are a field read
        unless the first read met an unknown value, which every call then replays)."""
        found = self._pods
        if found is not None:
            return found
        pods: list[PodRef] = memoised(self._memo, "pods", lambda: list(_pod_refs(self)))
        if self._memo.get("pods") is pods:  # kept bare: read without an unknown
            self._pods = pods
        return pods

    def containers(self, *, init: bool = True) -> Iterator[ContainerRef]:
        """Every container of every pod spec (init containers too unless ``init=False``).

        Gathered once when every pod spec's containers read without an unknown value;
        until then (and for an object with one) the pods are walked as they are read, so
        an unknown container raises where it sits."""
        found = self._all_containers if init else self._app_containers
        if found is not None:
            return iter(found)
        return self._walk_containers(init)

    def _walk_containers(self, init: bool) -> Iterator[ContainerRef]:
        refs: list[ContainerRef] = []
        for pod in self.pods():
            for ref in pod.containers(init=init):
                refs.append(ref)
                yield ref
        if self._pods is None:
            return  # the pods read an unknown: every walk replays it
        key = _CONTAINERS[init]
        for pod in self._pods:
            found = pod.memo.get(key)
            if type(found) is not tuple or found[1] is not None:
                return  # read with an unknown value, or an unknown container
        if init:
            self._all_containers = refs
        else:
            self._app_containers = refs


def _forget_views(values: Iterable[Any]) -> None:
    """Empty the memo of every pod and container view among *values*, and among the
    lists, tuples and :func:`memoised` entries that they or those memos hold."""
    stack = list(values)
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is PodRef or kind is ContainerRef:
            stack.extend(value.memo.values())
            value.memo.clear()
        elif kind is list or kind is tuple:
            stack.extend(value)
        elif kind is TAINTED:
            stack.append(value.value)


# PodRef.containers' and ContainerRef.resources' memo keys.
_CONTAINERS: dict[bool, tuple[str, bool]] = {b: ("containers", b) for b in (True, False)}
_NONE = Fraction(0)
_PART_APP, _PART_INIT, _PART_MODEL = ("part", "containers"), ("part", "init"), ("part", "model")
_RESOURCES: dict[str, tuple[str, str]] = {s: ("resources", s) for s in ("limits", "requests")}


@dataclass(frozen=True, slots=True)
class PodRef:
    """A pod spec inside an object: its path, role and (for Ray) its group spec."""

    obj: K8sObject
    path: Path
    spec: Mapping[str, Any]
    role: str = ""
    labels: Mapping[str, Any] = field(default_factory=dict)
    ray_group: Mapping[str, Any] | None = None
    replicas: Any = None
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """What the view derived from this pod spec, read once (containers, GPU counts)."""

    @property
    def where(self) -> str:
        """``" (worker group 'gpu')"`` style suffix for messages, or ``""``."""
        return f" ({self.role})" if self.role else ""

    @property
    def is_ray(self) -> bool:
        """True for a RayCluster head or worker group (also inside RayService/RayJob)."""
        return self.ray_group is not None

    def containers(self, *, init: bool = True) -> Iterator[ContainerRef]:
        """Containers (and init containers) of this pod spec.

        Built once: later calls yield the same :class:`ContainerRef` objects (so what is
        cached on them is shared), and an unknown list or container raises where it did.
        """

        key = _CONTAINERS[init]
        found = self.memo.get(key)
        if type(found) is tuple and found[1] is None:
            return iter(found[0])  # read before, all known: the same refs, no generator
        return self._containers(key, init)

    def _containers(self, key: Any, init: bool) -> Iterator[ContainerRef]:
        refs, error = memoised(self.memo, key, lambda: self._read_containers(init))
        yield from refs
        if error is not None:
            raise error

    def _read_containers(self, init: bool) -> tuple[list[ContainerRef], UnknownInput | None]:
        # The containers before an unknown one are still yielded, then it raises. Both
        # lists are made of the same refs, each part read once (so is what the refs keep).
        memo = self.memo
        found, error = memoised(memo, _PART_APP, lambda: self._part("containers"))
        refs = list(found)
        if error is None and init:
            found, error = memoised(memo, _PART_INIT, lambda: self._part("initContainers"))
            refs.extend(found)
        if error is None:
            refs.extend(memoised(memo, _PART_MODEL, self._model))
        return refs, error

    def _part(self, key: str) -> tuple[list[ContainerRef], UnknownInput | None]:
        refs: list[ContainerRef] = []
        try:
            items = as_list(self.spec.get(key), f"{key} of {self.obj.resource}")
            for index, raw in enumerate(items):
                if raw is UNKNOWN:
                    raise UnknownInput(f"{key}[{index}] of {self.obj.resource}")
                if isinstance(raw, Mapping):
                    refs.append(
                        ContainerRef(self, (*self.path, key, index), raw, key == "initContainers")
                    )
        except UnknownInput as exc:
            return refs, exc
        return refs, None

    def _model(self) -> list[ContainerRef]:
        model = self.spec.get("model") if self.obj.kind == "InferenceService" else None
        if isinstance(model, Mapping):
            return [ContainerRef(self, (*self.path, "model"), model, False)]
        return []

    def volumes(self) -> dict[str, Mapping[str, Any]]:
        """Volumes by name."""
        out: dict[str, Mapping[str, Any]] = {}
        for vol in as_list(self.spec.get("volumes"), f"volumes of {self.obj.resource}"):
            if isinstance(vol, Mapping) and isinstance(vol.get("name"), str):
                out[vol["name"]] = vol
        return out

    def gpu_count(self, extra: Sequence[str] = ()) -> Fraction:
        """GPUs the pod asks for (sum over app containers; max with init containers)."""
        key = ("gpu_count", extra if type(extra) is tuple else tuple(extra))
        found = self.memo.get(key, ABSENT)
        if found is not ABSENT and type(found) is not TAINTED:
            known: Fraction = found
            return known
        return memoised(self.memo, key, lambda: self._gpu_count(extra))

    def _gpu_count(self, extra: Sequence[str]) -> Fraction:
        # As sum() and max() of the limits, without Fraction arithmetic on the zeros.
        app = _NONE
        for c in self.containers(init=False):
            limit = c.gpu_limit(extra)
            if limit:
                app = app + limit if app else limit
        init: Fraction | None = None
        for c in self.containers():
            if c.init:
                limit = c.gpu_limit(extra)
                if init is None or exceeds(limit, init):
                    init = limit
        if init is None:
            init = _NONE  # max(..., default=0)
        return init if exceeds(init, app) else app

    def node_selector(self) -> dict[str, Any]:
        """``nodeSelector`` labels."""
        return dict(as_map(self.spec.get("nodeSelector"), "nodeSelector"))

    def required_affinity_terms(self) -> list[list[Mapping[str, Any]]]:
        """Required node affinity: a list of OR-ed terms, each a list of AND-ed expressions."""
        terms = dig(
            self.spec,
            "affinity",
            "nodeAffinity",
            "requiredDuringSchedulingIgnoredDuringExecution",
            "nodeSelectorTerms",
        )
        out = []
        for term in as_list(terms, "nodeSelectorTerms"):
            exprs = as_list(dig(term, "matchExpressions"), "matchExpressions")
            out.append([e for e in exprs if isinstance(e, Mapping)])
        return out

    def selected_labels(self) -> dict[str, Any]:
        """Labels the pod pins by nodeSelector or single-valued ``In`` affinity."""
        labels = self.node_selector()
        for term in self.required_affinity_terms()[:1]:
            for expr in term:
                values = expr.get("values")
                if expr.get("operator") == "In" and isinstance(values, list) and len(values) == 1:
                    labels.setdefault(str(expr.get("key")), values[0])
        return labels


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """A container inside a pod spec."""

    pod: PodRef
    path: Path
    raw: Mapping[str, Any]
    init: bool = False
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    """What the view derived from this container, read once (GPU limits, its engine)."""

    @property
    def name(self) -> str:
        """Container name (or ``?``)."""
        name = self.raw.get("name")
        return name if isinstance(name, str) else "?"

    @property
    def label(self) -> str:
        """``container 'x'`` plus the pod role, for messages."""
        kind = "init container" if self.init else "container"
        return f"{kind} '{self.name}'{self.pod.where}"

    @property
    def image(self) -> Any:
        """``image`` (may be UNKNOWN or None)."""
        return self.raw.get("image")

    def resources(self, section: str) -> Mapping[str, Any]:
        """``resources.limits`` or ``resources.requests``; the GPUs the container claims
        through DRA (``resources.claims``) count as ``nvidia.com/gpu`` in both. Read once
        per section (a dozen rules ask); treat the mapping as read-only."""
        key = _RESOURCES.get(section) or ("resources", section)
        found = self.memo.get(key, ABSENT)
        if found is not ABSENT and type(found) is not TAINTED:
            known: Mapping[str, Any] = found
            return known
        read: Mapping[str, Any] = memoised(self.memo, key, lambda: self._resources(section))
        return read

    def _resources(self, section: str) -> Mapping[str, Any]:
        value = dig(self.raw, "resources", section)
        if value is UNKNOWN:  # the message is built only when it is needed
            raise UnknownInput(f"resources.{section} of {self.label}")
        found = value if type(value) is dict or isinstance(value, Mapping) else {}
        claimed = self.claimed_gpus() if section in ("limits", "requests") else 0
        if not claimed:
            return found
        merged = dict(found)
        total = (parse_quantity(found.get(CLAIMED_GPU_RESOURCE)) or 0) + claimed
        # Claims count whole devices; written the way a limit is (an int, as YAML gives it).
        merged[CLAIMED_GPU_RESOURCE] = int(total) if total.denominator == 1 else str(total)
        return merged

    def claimed_gpus(self) -> Fraction:
        """GPUs this container's ``resources.claims`` get from the Pod's DRA claims (the
        ``gpu.nvidia.com`` requests of the ResourceClaim or ResourceClaimTemplate each
        names); 0 without claims or when the claim is not among the objects."""
        found = self.memo.get("claimed_gpus", ABSENT)
        if found is not ABSENT and type(found) is not TAINTED:
            known: Fraction = found
            return known
        return memoised(self.memo, "claimed_gpus", self._claimed_gpus)

    def _claimed_gpus(self) -> Fraction:
        refs = dig(self.raw, "resources", "claims")
        if refs is UNKNOWN:
            raise UnknownInput(f"resources.claims of {self.label}")
        if not refs or not isinstance(refs, list):
            return ZERO
        pod_claims = as_list(self.pod.spec.get("resourceClaims"), "resourceClaims")
        if any(
            c is UNKNOWN or (isinstance(c, Mapping) and c.get("name") is UNKNOWN)
            for c in pod_claims
        ):
            raise UnknownInput(f"resourceClaims of {self.pod.obj.resource}")
        by_name = {
            c["name"]: c
            for c in pod_claims
            if isinstance(c, Mapping) and isinstance(c.get("name"), str)
        }
        total = Fraction(0)
        for ref in refs:
            if ref is UNKNOWN or (isinstance(ref, Mapping) and ref.get("name") is UNKNOWN):
                raise UnknownInput(f"resources.claims of {self.label}")
            name = ref.get("name") if isinstance(ref, Mapping) else None
            claim = by_name.get(name) if isinstance(name, str) else None
            if claim is None:
                continue
            for key, kind in (
                ("resourceClaimTemplateName", "ResourceClaimTemplate"),
                ("resourceClaimName", "ResourceClaim"),
            ):
                name = claim.get(key)
                if name is UNKNOWN:
                    raise UnknownInput(f"resourceClaims.{key} of {self.pod.obj.resource}")
                if not isinstance(name, str):
                    continue
                found = self.pod.obj.claims.get((kind, self.pod.obj.namespace, name))
                if found is None and ("*", "*", "*") in self.pod.obj.claims:
                    found = UNKNOWN  # an object the index could not name may be this claim
                if found is UNKNOWN:
                    raise UnknownInput(f"{kind} {name} of {self.label}")
                if found is None:  # another stack or file may hold it: its GPUs are unknown
                    raise UnknownInput(
                        f"the GPUs of {kind} {name} (not among the checked objects) of {self.label}"
                    )
                if found is not None:
                    request = ref.get("request")
                    total += found.count(request if isinstance(request, str) else None)
        return total

    def gpu_limit(self, extra: Sequence[str] = ()) -> Fraction:
        """Sum of GPU resources in limits (requests default to limits for these)."""
        key = ("gpu_limit", extra if type(extra) is tuple else tuple(extra))
        found = self.memo.get(key, ABSENT)
        if found is not ABSENT and type(found) is not TAINTED:
            known: Fraction = found
            return known
        return memoised(self.memo, key, lambda: self._gpu_limit(extra))

    def _gpu_limit(self, extra: Sequence[str]) -> Fraction:
        limits = self.resources("limits")
        requests = self.resources("requests")
        if not limits and not requests:  # most containers: no resources at all
            return ZERO
        parts: list[Fraction] = []
        for name in {*limits, *requests}:
            if is_gpu_resource(name, extra):
                raw = limits.get(name, requests.get(name))
                if raw is UNKNOWN:
                    raise UnknownInput(f"{name} of {self.label}")
                amount = parse_quantity(raw)
                if amount is not None:
                    parts.append(amount)
        return exact_sum(parts)

    def env(self) -> list[Mapping[str, Any]]:
        """``env`` entries."""
        value = self.raw.get("env")
        if value is UNKNOWN:
            raise UnknownInput(f"env of {self.label}")
        if not isinstance(value, list):
            return []
        return [e for e in value if type(e) is dict or isinstance(e, Mapping)]

    def literal_env(self) -> dict[str, str]:
        """Env vars with literal string values (for ``$(VAR)`` expansion)."""
        out: dict[str, str] = {}
        for entry in self.env():
            name, value = entry.get("name"), entry.get("value")
            if isinstance(name, str) and isinstance(value, str | int | float):
                out[name] = str(value)
        return out

    def memory_limit(self) -> Fraction | None:
        """``resources.limits.memory`` in bytes, or ``None``."""
        return parse_quantity(self.resources("limits").get("memory"))

    def memory_request(self) -> Fraction | None:
        """``resources.requests.memory`` in bytes, or ``None``."""
        return parse_quantity(self.resources("requests").get("memory"))


def _template(obj: K8sObject, path: Path, role: str = "", **kw: Any) -> Iterator[PodRef]:
    yield from _template_at(obj, dig(obj.raw, *path), path, role, **kw)


def _template_at(
    obj: K8sObject, template: Any, path: Path, role: str = "", **kw: Any
) -> Iterator[PodRef]:
    """The pod *template* found (or, for a kind whose template is assembled from parts,
    merged) at *path*, as a :class:`PodRef` of its ``spec``."""
    if template is UNKNOWN:
        raise UnknownInput(f"{'.'.join(map(str, path))} of {obj.resource}")
    if not isinstance(template, Mapping):
        return
    spec = template.get("spec")
    if spec is UNKNOWN:
        raise UnknownInput(f"{'.'.join(map(str, path))}.spec of {obj.resource}")
    if isinstance(spec, Mapping):
        labels = as_map(dig(template, "metadata", "labels"), "template labels")
        yield PodRef(obj, (*path, "spec"), spec, role, labels, **kw)


def _ray_cluster(obj: K8sObject, base: Path) -> Iterator[PodRef]:
    head = dig(obj.raw, *base, "headGroupSpec")
    if isinstance(head, Mapping):
        yield from _template(obj, (*base, "headGroupSpec", "template"), "head", ray_group=head)
    groups = as_list(dig(obj.raw, *base, "workerGroupSpecs"), "workerGroupSpecs")
    for index, group in enumerate(groups):
        if isinstance(group, Mapping):
            name = group.get("groupName", index)
            yield from _template(
                obj,
                (*base, "workerGroupSpecs", index, "template"),
                f"worker group '{name}'",
                ray_group=group,
                replicas=group.get("replicas"),
            )


def _pod_refs(obj: K8sObject) -> Iterator[PodRef]:
    kind, raw = obj.kind, obj.raw
    if kind in BUILTIN_KINDS and not _kubernetes_group(api_group(obj)):
        if FOREIGN_KINDS.get((kind, api_group(obj))) == "Knative Service":
            yield from _template(obj, ("spec", "template"))  # replicas: Knative's autoscaler
        return
    if kind == "Pod":
        spec = raw.get("spec")
        if isinstance(spec, Mapping):
            yield PodRef(obj, ("spec",), spec, "", obj.labels)
    elif kind in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}:
        yield from _template(obj, ("spec", "template"), replicas=dig(raw, "spec", "replicas"))
    elif kind == "CronJob":
        yield from _template(obj, ("spec", "jobTemplate", "spec", "template"))
    elif kind == "LeaderWorkerSet":
        base = ("spec", "leaderWorkerTemplate")
        replicas = dig(raw, "spec", "replicas")
        leader = dig(raw, *base, "leaderTemplate")
        if isinstance(leader, Mapping):
            yield from _template(obj, (*base, "leaderTemplate"), "leader", replicas=replicas)
            yield from _template(obj, (*base, "workerTemplate"), "worker", replicas=replicas)
        else:  # without a leaderTemplate the workerTemplate is used for every pod
            yield from _template(obj, (*base, "workerTemplate"), "", replicas=replicas)
    elif kind in CONTROLLER_KINDS:
        if is_read_kind(obj):
            yield from _controller_pods(obj)
    elif kind == "RayCluster":
        yield from _ray_cluster(obj, ("spec",))
    elif kind == "RayService":
        yield from _ray_cluster(obj, ("spec", "rayClusterConfig"))
    elif kind == "RayJob":
        yield from _ray_cluster(obj, ("spec", "rayClusterSpec"))
    elif kind in {"ServingRuntime", "ClusterServingRuntime"}:
        spec = raw.get("spec")
        if isinstance(spec, Mapping):
            yield PodRef(obj, ("spec",), spec, "")
            worker = spec.get("workerSpec")
            if isinstance(worker, Mapping):
                yield PodRef(obj, ("spec", "workerSpec"), worker, "workerSpec")
    elif kind == "InferenceService":
        predictor = dig(raw, "spec", "predictor")
        if isinstance(predictor, Mapping) and obj.merged_with is not None:
            yield _with_runtime(obj, predictor, obj.merged_with)
        elif isinstance(predictor, Mapping):
            yield PodRef(obj, ("spec", "predictor"), predictor, "predictor")
            worker = predictor.get("workerSpec")
            if isinstance(worker, Mapping):
                yield PodRef(obj, ("spec", "predictor", "workerSpec"), worker, "workerSpec")
    elif kind == "LLMInferenceService":
        for path, role in (
            (("spec", "template"), "template"),
            (("spec", "worker"), "worker"),
            (("spec", "prefill", "template"), "prefill template"),
            (("spec", "prefill", "worker"), "prefill worker"),
        ):
            spec = dig(raw, *path)
            if isinstance(spec, Mapping):
                yield PodRef(obj, path, spec, role, replicas=dig(raw, "spec", "replicas"))


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


def _with_instance_type(pod: PodRef, instance_type: Any) -> PodRef:
    """The pod spec as on the nodes KAITO provisions: of ``resource.instanceType``
    (kaito-project/kaito api/v1beta1/workspace_types.go ``ResourceSpec.InstanceType``),
    which the view reads as a node selector on the instance-type label."""
    if not isinstance(instance_type, str) or not instance_type:
        return pod
    selector = {**as_map(pod.spec.get("nodeSelector"), "nodeSelector")}
    selector.setdefault(INSTANCE_TYPE_LABEL, instance_type)
    spec = {**pod.spec, "nodeSelector": selector}
    return PodRef(pod.obj, pod.path, spec, pod.role, pod.labels, pod.ray_group, pod.replicas)


def _kaito(obj: K8sObject, base: Path, replicas: Any) -> Iterator[PodRef]:
    """A KAITO Workspace (``resource``/``inference`` at the top) or an InferenceSet's
    ``spec.template``: the Pods of ``inference.template``, on ``resource.instanceType``."""
    instance_type = dig(obj.raw, *base, "resource", "instanceType")
    if instance_type is UNKNOWN:
        raise UnknownInput(f"resource.instanceType of {obj.resource}")
    for pod in _template(obj, (*base, "inference", "template"), replicas=replicas):
        yield _with_instance_type(pod, instance_type)


def _nim_pod(obj: K8sObject) -> Iterator[PodRef]:
    """The Pod a NIMService's operator runs: its image, resources, env, probes and
    scheduling as the NIMService states them (NVIDIA/k8s-nim-operator
    api/apps/v1alpha1/nimservice_types.go); the rest is the operator's."""
    spec = dig(obj.raw, "spec")
    if spec is UNKNOWN:
        raise UnknownInput(f"spec of {obj.resource}")
    if not isinstance(spec, Mapping):
        return
    repo, tag = dig(spec, "image", "repository"), dig(spec, "image", "tag")
    if repo is UNKNOWN or tag is UNKNOWN:
        raise UnknownInput(f"spec.image of {obj.resource}")
    container: dict[str, Any] = {"name": "nim"}
    if isinstance(repo, str):
        container["image"] = f"{repo}:{tag}" if isinstance(tag, str | int | float) else repo
    for key in ("resources", "env", "envFrom"):
        if key in spec:
            container[key] = spec[key]
    for key in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = dig(spec, key, "probe")
        if probe is not None:
            container[key] = probe
    pod: dict[str, Any] = {"containers": [container]}
    for key in ("nodeSelector", "tolerations", "affinity", "runtimeClassName"):
        if key in spec:
            pod[key] = spec[key]
    labels = as_map(dig(spec, "labels"), "spec.labels")
    yield PodRef(obj, ("spec",), pod, "", labels, replicas=spec.get("replicas"))


DYNAMO_GPU = "gpu"
"""The key of a DynamoGraphDeployment service's ``resources.limits`` that the Dynamo operator
turns into ``nvidia.com/gpu`` (ai-dynamo/dynamo deploy/operator api/v1alpha1 ``Resources``)."""


def _dynamo_pods(obj: K8sObject) -> Iterator[PodRef]:
    """Each service of a DynamoGraphDeployment as the Pod the Dynamo operator runs: its
    ``extraPodSpec`` with ``mainContainer`` as the first container, which gets the service's
    ``resources`` (``gpu`` as ``nvidia.com/gpu``, per Pod: a multinode service runs
    ``multinode.nodeCount`` such Pods per replica)."""
    services = as_map(dig(obj.raw, "spec", "services"), "spec.services")
    for name, service in services.items():
        if not isinstance(service, Mapping):
            continue
        extra = as_map(service.get("extraPodSpec"), f"extraPodSpec of service {name}")
        main = as_map(extra.get("mainContainer"), f"mainContainer of service {name}")
        container: dict[str, Any] = {"name": "main", **main}
        resources: dict[str, Any] = {}
        for section in ("limits", "requests"):
            stated = as_map(dig(service, "resources", section), f"resources of service {name}")
            out = {("nvidia.com/gpu" if k == DYNAMO_GPU else k): v for k, v in stated.items()}
            if out:
                resources[section] = out
        if resources:
            container["resources"] = resources
        others = as_list(extra.get("containers"), f"containers of service {name}")
        pod = {k: v for k, v in extra.items() if k != "mainContainer"}
        pod["containers"] = [container, *others]
        yield PodRef(
            obj,
            ("spec", "services", name, "extraPodSpec"),
            pod,
            f"service '{name}'",
            replicas=service.get("replicas"),
        )


KUBEAI_VLLM_COMMAND = ("python3", "-m", "vllm.entrypoints.openai.api_server")
KUBEAI_SOURCE = "substratusai/kubeai@2f32ef4:internal/modelcontroller/engine_vllm.go"
"""Where KubeAI builds a vLLM Model's Pod: this command, ``--model=<url>``,
``--served-model-name=<name>``, then ``spec.args``; startup, readiness and liveness probes on
``/health``; a memory-backed ``/dev/shm``."""


def _kubeai_model_flag(url: Any) -> str | None:
    """The ``--model`` KubeAI passes for a Model's ``url`` (``hf://org/name`` -> ``org/name``,
    ``pvc://...`` -> ``/model``, ``s3://`` and others as written); None when unstated."""
    if not isinstance(url, str) or not url:
        return None
    if url.startswith("pvc://"):
        return "/model"
    for scheme in ("hf://", "ollama://"):
        if url.startswith(scheme):
            return url[len(scheme) :]
    return url


def kubeai_profile(obj: K8sObject) -> tuple[str, int] | None:
    """A KubeAI Model's ``resourceProfile`` as (profile, count): ``nvidia-gpu-l4:1`` ->
    (``nvidia-gpu-l4``, 1); None when it is not of that form."""
    profile = dig(obj.raw, "spec", "resourceProfile")
    if not isinstance(profile, str) or ":" not in profile:
        return None
    name, _, count = profile.rpartition(":")
    return (name, int(count)) if count.isdigit() else None


def kubeai_image(obj: K8sObject) -> str | None:
    """A KubeAI Model's own ``spec.image`` (the server image KubeAI runs instead of the
    installation's, :data:`KUBEAI_SOURCE` ``lookupServerImage``), or None."""
    image = dig(obj.raw, "spec", "image")
    return image if isinstance(image, str) and image.strip() else None


def _kubeai_probe(period: int, timeout: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def _kubeai_pod(obj: K8sObject) -> Iterator[PodRef]:
    """The Pod KubeAI runs for a ``spec.engine: VLLM`` Model (:data:`KUBEAI_SOURCE`).

    The image is ``spec.image`` where the Model states one, else the installation's, as are
    the tolerations (unknown: what depends on them is not evaluated, its vLLM release is
    never guessed); the node selector its resource
    profile's (unstated); a ``nvidia-gpu-*:N`` profile gives the Pod N ``nvidia.com/gpu``
    (the chart's profiles give one GPU per unit;
    :func:`~gpustrata_policies.view.launchers.launcher_fills` says so)."""
    spec = as_map(dig(obj.raw, "spec"), f"spec of {obj.resource}")
    if spec.get("engine") != "VLLM":
        return
    model = _kubeai_model_flag(spec.get("url"))
    args = [f"--model={model}"] if model else []
    args.append(f"--served-model-name={obj.name}")
    args.extend(str(a) for a in as_list(spec.get("args"), f"spec.args of {obj.resource}"))
    env = as_map(spec.get("env"), f"spec.env of {obj.resource}")
    container: dict[str, Any] = {
        "name": "server",
        # spec.image when stated, else the installation's modelServers.VLLM.images, chosen
        # at deploy time (lookupServerImage, internal/modelcontroller/model_controller.go)
        "image": kubeai_image(obj) or UNKNOWN,
        "command": list(KUBEAI_VLLM_COMMAND),
        "args": args,
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "ports": [{"containerPort": 8000, "name": "http", "protocol": "TCP"}],
        "startupProbe": _kubeai_probe(2, 2, 5400),
        "readinessProbe": _kubeai_probe(10, 2, 3),
        "livenessProbe": _kubeai_probe(30, 3, 3),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    profile = kubeai_profile(obj)
    if profile is not None and profile[0].startswith("nvidia-gpu-"):
        gpus = {"nvidia.com/gpu": profile[1]}
        container["resources"] = {"limits": gpus, "requests": dict(gpus)}
    pod: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        "tolerations": UNKNOWN,  # the resource profile's (the chart's GPU profiles add some)
    }
    replicas = spec.get("replicas", spec.get("minReplicas"))
    yield PodRef(obj, ("spec",), pod, "", replicas=replicas)


LLMAZ_SOURCE = "InftyAI/llmaz@3c13ff3"
"""Where llmaz builds a Playground's Pod: ``pkg/controller/inference/playground_controller.go``
``buildTemplate`` (the BackendRuntime's command, args, probes and /dev/shm; the claimed
OpenModel's path), ``service_controller.go`` ``injectModelFlavor`` (the first flavor's
limits and node selector), and the chart's default vLLM BackendRuntime
``chart/templates/backends/vllm.yaml`` (its ``default`` recommended config)."""
LLMAZ_MODEL_DIR = "/workspace/models/"
"""Where llmaz's model loader puts a model hub model (``modelsource/modelhub.go``)."""


def _llmaz_probe(delay: int, period: int, failures: int) -> dict[str, Any]:
    probe: dict[str, Any] = {
        "httpGet": {"path": "/health", "port": 8080},
        "periodSeconds": period,
        "failureThreshold": failures,
    }
    if delay:
        probe["initialDelaySeconds"] = delay
    return probe


def _llmaz_pod(obj: K8sObject) -> Iterator[PodRef]:
    """The Pod llmaz runs for a Playground of one model on the default vLLM BackendRuntime
    (:data:`LLMAZ_SOURCE`), once :func:`~gpustrata_policies.view.launchers.attach_partners`
    has given it its OpenModel. The image is the installation's (unknown); a Playground of
    several models (speculative decoding) or another backend is not built."""
    model = obj.merged_with
    spec = as_map(dig(obj.raw, "spec"), f"spec of {obj.resource}")
    config = as_map(spec.get("backendRuntimeConfig"), "spec.backendRuntimeConfig")
    if model is None or config.get("backendName", "vllm") != "vllm" or "modelClaims" in spec:
        return
    model_id = dig(model, "source", "modelHub", "modelID")
    if not isinstance(model_id, str) or dig(model, "source", "modelHub", "filename"):
        return
    skip = dig(obj.raw, "metadata", "annotations", "llmaz.io/skip-model-loader") == "true"
    path = model_id if skip else f"{LLMAZ_MODEL_DIR}models--{model_id.replace('/', '--')}"
    name = dig(spec, "modelClaim", "modelName")
    args = ["--model", path, "--served-model-name", str(name), "--host", "0.0.0.0"]
    args += ["--port", "8080", *(str(a) for a in as_list(config.get("args"), "args"))]
    container: dict[str, Any] = {
        "name": "model-runner",
        "image": UNKNOWN,  # the BackendRuntime's image and version: the installation's
        "command": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": args,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "startupProbe": _llmaz_probe(0, 10, 30),
        "livenessProbe": _llmaz_probe(15, 10, 3),
        "readinessProbe": _llmaz_probe(5, 5, 3),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    pod: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}],
    }
    flavors = as_list(dig(model, "inferenceConfig", "flavors"), "inferenceConfig.flavors")
    flavor = flavors[0] if flavors and isinstance(flavors[0], Mapping) else {}
    limits = as_map(flavor.get("limits"), "flavor limits")
    if limits:
        container["resources"] = {"limits": dict(limits)}
    selector = as_map(flavor.get("nodeSelector"), "flavor nodeSelector")
    if selector:
        pod["nodeSelector"] = dict(selector)
    yield PodRef(obj, ("spec",), pod, "", replicas=spec.get("replicas"))


def strategic_merge(base: Any, patch: Any) -> Any:
    """*patch* merged into *base* as a Kubernetes strategic merge patch does for pod
    templates: mappings key by key, lists of named mappings (containers, volumes, env) item
    by ``name``, other values replaced."""
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        out = dict(base)
        for key, value in patch.items():
            out[key] = strategic_merge(base[key], value) if key in base else value
        return out
    if isinstance(base, list) and isinstance(patch, list) and _named(base) and _named(patch):
        merged = list(base)
        index = {item["name"]: i for i, item in enumerate(merged)}
        for item in patch:
            at = index.get(item["name"])
            if at is None:
                merged.append(item)
            else:
                merged[at] = strategic_merge(merged[at], item)
        return merged
    return patch


def _named(items: list[Any]) -> bool:
    return bool(items) and all(
        isinstance(i, Mapping) and isinstance(i.get("name"), str) for i in items
    )


def _rbg_template(obj: K8sObject, source: Mapping[str, Any], group: Path) -> Any:
    """A RoleBasedGroup role's pod template: ``template``, or the ``roleTemplates`` entry
    ``templateRef.name`` names with ``templateRef.patch`` merged in (sgl-project/rbg
    api/workloads/v1alpha2 ``TemplateSource``); None when neither is stated."""
    template = source.get("template")
    if template is not None:
        return template
    ref = source.get("templateRef")
    if not isinstance(ref, Mapping):
        return None
    templates = as_list(dig(obj.raw, *group, "roleTemplates"), "roleTemplates")
    base = next(
        (
            t.get("template")
            for t in templates
            if isinstance(t, Mapping) and t.get("name") == ref.get("name")
        ),
        None,
    )
    if not isinstance(base, Mapping):
        return None
    patch = ref.get("patch")
    return strategic_merge(base, patch) if isinstance(patch, Mapping) else base


def rbg_group(obj: K8sObject) -> Path:
    """Where a RoleBasedGroup's spec is in *obj*: ``spec`` of a RoleBasedGroup, the group
    template of a RoleBasedGroupSet (v1alpha2 ``spec.groupTemplate.spec``, v1alpha1
    ``spec.template``), an AIBrix StormService's ``spec.template.spec`` (its RoleSet template:
    ``roles[].template``, vllm-project/aibrix api/orchestration/v1alpha1)."""
    if obj.kind == "RoleBasedGroupSet":
        if dig(obj.raw, "spec", "groupTemplate") is not None:
            return ("spec", "groupTemplate", "spec")
        return ("spec", "template")
    if obj.kind == "StormService":
        return ("spec", "template", "spec")
    return ("spec",)


def multi_pod_role(role: Mapping[str, Any]) -> bool:
    """An AIBrix StormService role whose instances are ``podGroupSize`` > 1 Pods (one engine
    across them, which the view does not assemble)."""
    size = role.get("podGroupSize")
    return isinstance(size, int) and not isinstance(size, bool) and size > 1


def _rbg_pods(obj: K8sObject, group: Path = ("spec",)) -> Iterator[PodRef]:
    """Each role of a RoleBasedGroup whose spec is at *group* (v1alpha1 ``template``,
    v1alpha2 ``standalonePattern`` / ``leaderWorkerPattern``, a ``templateRef`` merged with
    its patch): the leader of a leader-worker role is its template with
    ``leaderTemplatePatch``, the workers with ``workerTemplatePatch``."""
    roles = as_list(dig(obj.raw, *group, "roles"), "roles")
    for index, role in enumerate(roles):
        if not isinstance(role, Mapping):
            continue
        name, replicas = role.get("name", index), role.get("replicas")
        base: Path = (*group, "roles", index)
        if multi_pod_role(role):
            continue  # one instance spans several Pods: launcher_fills says it is not read
        lws = role.get("leaderWorkerPattern")
        if isinstance(lws, Mapping):
            template = _rbg_template(obj, lws, group)
            for part, patch_key in (
                ("leader", "leaderTemplatePatch"),
                ("worker", "workerTemplatePatch"),
            ):
                patch = lws.get(patch_key)
                merged = (
                    strategic_merge(template, patch) if isinstance(patch, Mapping) else template
                )
                where = (*base, "leaderWorkerPattern", "template")
                yield from _template_at(
                    obj, merged, where, f"role '{name}' {part}", replicas=replicas
                )
            continue
        source = role.get("standalonePattern")
        at: Path = (*base, "standalonePattern")
        if not isinstance(source, Mapping):
            source, at = role, base
        template = _rbg_template(obj, source, group)
        yield from _template_at(
            obj, template, (*at, "template"), f"role '{name}'", replicas=replicas
        )


RUNTIME_POD_FIELDS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "volumes",
    "imagePullSecrets",
    "schedulerName",
    "resourceClaims",
)
"""What KServe takes of a ServingRuntime's pod spec besides its containers
(kserve/kserve@aaac4e2 pkg/controller/v1beta1/inferenceservice/utils/utils.go
``MergePodSpec``)."""
PREDICTOR_POD_FIELDS = (
    *RUNTIME_POD_FIELDS,
    "serviceAccountName",
    "runtimeClassName",
    "priorityClassName",
    "securityContext",
    "hostIPC",
    "hostNetwork",
    "initContainers",
    "topologySpreadConstraints",
)
"""Pod-spec fields an InferenceService's predictor states that override the runtime's."""
MODEL_ONLY_FIELDS = frozenset(
    {"modelFormat", "runtime", "storageUri", "storage", "protocolVersion"}
)


def _with_runtime(
    obj: K8sObject, predictor: Mapping[str, Any], runtime: Mapping[str, Any]
) -> PodRef:
    """The predictor Pod as KServe builds it from a ServingRuntime: the runtime's pod fields
    with the predictor's merged over them (``MergePodSpec``), and the runtime's first
    container with ``predictor.model`` merged in, its args after the runtime's
    (``MergeRuntimeContainers``); ``{{.Name}}`` in the runtime's args is the
    InferenceService's name."""
    pod = strategic_merge(
        {k: runtime[k] for k in RUNTIME_POD_FIELDS if k in runtime},
        {k: predictor[k] for k in PREDICTOR_POD_FIELDS if k in predictor},
    )
    containers = [
        dict(c)
        for c in as_list(runtime.get("containers"), "runtime containers")
        if isinstance(c, Mapping)
    ]
    model = as_map(predictor.get("model"), "predictor.model")
    if containers:
        first = containers[0]
        own = {k: v for k, v in model.items() if k not in MODEL_ONLY_FIELDS}
        merged = dict(strategic_merge(first, own))
        args = [*as_list(first.get("args"), "runtime args"), *as_list(own.get("args"), "args")]
        if args:
            merged["args"] = [
                a.replace("{{.Name}}", obj.name) if isinstance(a, str) else a for a in args
            ]
        containers[0] = merged
    pod["containers"] = containers
    return PodRef(
        obj, ("spec", "predictor"), pod, "predictor", replicas=predictor.get("minReplicas")
    )


def _controller_pods(obj: K8sObject) -> Iterator[PodRef]:
    kind, raw = obj.kind, obj.raw
    if kind == "Rollout":  # argoproj.io: spec.template as a Deployment's
        yield from _template(obj, ("spec", "template"), replicas=dig(raw, "spec", "replicas"))
    elif kind == "JobSet":
        jobs = as_list(dig(raw, "spec", "replicatedJobs"), "spec.replicatedJobs")
        for index, job in enumerate(jobs):
            if isinstance(job, Mapping):
                yield from _template(
                    obj,
                    ("spec", "replicatedJobs", index, "template", "spec", "template"),
                    f"replicated job '{job.get('name', index)}'",
                    replicas=job.get("replicas"),
                )
    elif kind == "RayClusterFleet":  # AIBrix: spec.template.spec is a RayCluster spec
        yield from _ray_cluster(obj, ("spec", "template", "spec"))
    elif kind == "Workspace":
        yield from _kaito(obj, (), None)
    elif kind == "InferenceSet":
        yield from _kaito(obj, ("spec", "template"), dig(raw, "spec", "replicas"))
    elif kind == "NIMService":
        yield from _nim_pod(obj)
    elif kind == "DynamoGraphDeployment":
        yield from _dynamo_pods(obj)
    elif kind == "Model":
        yield from _kubeai_pod(obj)
    elif kind == "Playground":
        yield from _llmaz_pod(obj)
    elif kind in {"RoleBasedGroup", "RoleBasedGroupSet", "StormService"}:
        yield from _rbg_pods(obj, rbg_group(obj))


def controller_fills(obj: K8sObject) -> list[str]:
    """What a controller kind's controller decides and the manifest does not state:
    reasons those parts are not evaluated (empty for the other kinds)."""
    if obj.kind not in CONTROLLER_KINDS or not is_read_kind(obj):
        return []
    raw, out = obj.raw, []
    if obj.kind in {"Workspace", "InferenceSet"}:
        base: Path = () if obj.kind == "Workspace" else ("spec", "template")
        preset = dig(raw, *base, "inference", "preset", "name")
        if isinstance(preset, str):
            out.append(
                f"KAITO preset {preset!r}: the KAITO controller chooses the image, the engine "
                "and its flags and the GPUs per replica from the preset, which the manifest does "
                "not state; they are not evaluated"
            )
        if dig(raw, *base, "tuning") is not None:
            out.append("KAITO tuning: the controller builds the tuning Job; it is not evaluated")
        if dig(raw, *base, "resource", "instanceType") is None:
            out.append(
                "no resource.instanceType: the GPU nodes are the ones resource.labelSelector "
                "finds (bring-your-own nodes); without their Node objects the GPU is unknown"
            )
    elif obj.kind == "NIMService":
        out.append(
            "NIMService: the NIM image picks its engine and engine settings (its model "
            "profile) and the NIM operator builds the Deployment (a LeaderWorkerSet with "
            "multiNode), its probes, /dev/shm and volumes; only what the NIMService states "
            "(image, GPU resources, env, scheduling) is evaluated"
        )
    elif obj.kind == "Rollout" and dig(raw, "spec", "workloadRef") is not None:
        ref = dig(raw, "spec", "workloadRef", "name")
        out.append(
            f"Rollout takes its pod template from workloadRef {ref!r}: the referenced "
            "Deployment is evaluated where it is among the inputs"
        )
    return out
