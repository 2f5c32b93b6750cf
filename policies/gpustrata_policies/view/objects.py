"""A read-only view of Kubernetes-shaped objects, their pod specs and containers.

Objects are plain dicts (parsed YAML, Pulumi inputs). The view knows which
containers ask for GPUs and which node labels a pod selects (where the pod
template sits in each kind: :mod:`~gpustrata_policies.view.workloads`). Unknown
values (:data:`~.unknown.UNKNOWN`) pass through; accessors that need them raise
:class:`~.unknown.UnknownInput`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from gpustrata.core.quantity import ZERO, exact_sum, exceeds, parse_quantity
from gpustrata.core.unknown import TAINTED, UNKNOWN, UnknownInput, is_tracked, memoised
from gpustrata_policies.view.kinds import CLUSTER_SCOPED_KINDS

__all__ = [
    "CLAIM_SOURCES",
    "ContainerRef",
    "K8sObject",
    "PodRef",
    "as_list",
    "as_map",
    "dig",
    "is_gpu_resource",
]

Path = tuple[str | int, ...]


CLAIMED_GPU_RESOURCE = "nvidia.com/gpu"
"""The resource name under which a container's DRA-claimed GPUs are counted."""

CLAIM_SOURCES = (
    ("resourceClaimTemplateName", "ResourceClaimTemplate"),
    ("resourceClaimName", "ResourceClaim"),
)
"""The keys by which a Pod's ``resourceClaims`` entry names its claim, each with the kind
of the object it names."""


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
    plain: bool = field(default=False, repr=False, compare=False)
    """*raw* was read from YAML or JSON text (:func:`~gpustrata_policies.inputs.manifests.
    load_text`), so it holds no value unknown until deployment: :func:`~gpustrata_policies.
    evaluate.to_objects` skips the walk that looks for one (issue 35: 5,000 objects, ~45 ms)."""
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
        # Where each kind keeps its Pods reads these views: imported here, not above.
        from gpustrata_policies.view.workloads import _pod_refs

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
        return memoised(self.memo, key, self._gpu_count, extra)

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
        return memoised(self.memo, key, self._resources, section)

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
            for key, kind in CLAIM_SOURCES:
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
        return memoised(self.memo, key, self._gpu_limit, extra)

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
