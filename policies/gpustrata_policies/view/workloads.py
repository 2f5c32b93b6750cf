"""Where the Pods are in each kind an object may be: Kubernetes' workloads, Ray's and
KServe's kinds (a predictor merged over its ServingRuntime), and the controller kinds of
:mod:`~gpustrata_policies.view.controllers`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata_policies.view.controllers import _controller_pods
from gpustrata_policies.view.kinds import (
    BUILTIN_KINDS,
    CONTROLLER_KINDS,
    FOREIGN_KINDS,
    _kubernetes_group,
    api_group,
    is_read_kind,
)
from gpustrata_policies.view.objects import K8sObject, PodRef, as_list, as_map, dig
from gpustrata_policies.view.templates import _ray_cluster, _template, strategic_merge

__all__ = ["llmisvc_spec"]


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
        whole = llmisvc_spec(obj)
        for path, role in (
            (("spec", "template"), "template"),
            (("spec", "worker"), "worker"),
            (("spec", "prefill", "template"), "prefill template"),
            (("spec", "prefill", "worker"), "prefill worker"),
        ):
            spec = dig(whole, *path[1:])
            if isinstance(spec, Mapping):
                yield PodRef(obj, path, spec, role, replicas=dig(whole, "replicas"))


def llmisvc_spec(obj: K8sObject) -> Any:
    """A KServe LLMInferenceService's spec as its controller uses it: merged over the
    LLMInferenceServiceConfigs its ``spec.baseRefs`` name where they are among the checked
    objects (:func:`~gpustrata_policies.view.launchers.attach_partners`), else as written."""
    return obj.merged_with if obj.merged_with is not None else obj.raw.get("spec")


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
