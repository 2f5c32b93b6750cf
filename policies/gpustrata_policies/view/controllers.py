"""Where the Pods are in controller kinds (KAITO, NIM, Dynamo, KubeAI, llmaz,
RoleBasedGroup, Kthena, AIBrix, the vLLM production stack, JobSet, Argo Rollouts), and
what those controllers decide that their manifests do not state."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from gpustrata.core.quantity import parse_quantity
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.view.kaito import NO_INSTANCE, KaitoFill, kaito_base, kaito_fill
from gpustrata_policies.view.kaito_pods import KAITO_ROLES, builds_pods, preset_pods, unbuilt
from gpustrata_policies.view.kinds import CONTROLLER_KINDS, is_read_kind
from gpustrata_policies.view.kubeai import kubeai_fill
from gpustrata_policies.view.llmaz import llmaz_fill, llmaz_image
from gpustrata_policies.view.objects import K8sObject, Path, PodRef, as_list, as_map, dig
from gpustrata_policies.view.templates import _ray_cluster, _template, _template_at, strategic_merge

__all__ = [
    "BOOSTER_COMMAND",
    "KTHENA_SOURCE",
    "controller_fills",
    "multi_pod_role",
    "pod_group",
    "rbg_group",
]


INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


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
    ``spec.template``: the Pods of ``inference.template``, else those KAITO builds for its
    preset (:func:`_kaito_preset_pods`), on ``resource.instanceType``."""
    instance_type = dig(obj.raw, *base, "resource", "instanceType")
    if instance_type is UNKNOWN:
        raise UnknownInput(f"resource.instanceType of {obj.resource}")
    if dig(obj.raw, *base, "inference", "template") is not None:
        for pod in _template(obj, (*base, "inference", "template"), replicas=replicas):
            yield _with_instance_type(pod, instance_type)
        return
    try:
        fill = kaito_fill(obj)
    except UnknownInput:
        return  # a Pulumi preview: controller_fills says what is not read
    if fill is not None and builds_pods(fill):
        for pod in preset_pods(obj, base, fill, replicas):
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


def _kubeai_probe(period: int, timeout: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": "/health", "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def _kubeai_pod(obj: K8sObject) -> Iterator[PodRef]:
    """The Pod KubeAI runs for a ``spec.engine: VLLM`` Model (:data:`KUBEAI_SOURCE`).

    The image is ``spec.image`` where the Model states one, else the installation's; the
    resources (the profile's times its multiple), tolerations and node placement are the
    resource profile's: both from the chart's default values
    (:func:`~gpustrata_policies.view.kubeai.kubeai_fill`), unknown where the installed
    release is not stated and the releases differ, so nothing is guessed."""
    spec = as_map(dig(obj.raw, "spec"), f"spec of {obj.resource}")
    if spec.get("engine") != "VLLM":
        return
    model = _kubeai_model_flag(spec.get("url"))
    args = [f"--model={model}"] if model else []
    args.append(f"--served-model-name={obj.name}")
    args.extend(str(a) for a in as_list(spec.get("args"), f"spec.args of {obj.resource}"))
    env = as_map(spec.get("env"), f"spec.env of {obj.resource}")
    fill = kubeai_fill(obj)
    container: dict[str, Any] = {
        "name": "server",
        "image": fill.container["image"],
        "command": list(KUBEAI_VLLM_COMMAND),
        "args": args,
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "ports": [{"containerPort": 8000, "name": "http", "protocol": "TCP"}],
        "startupProbe": _kubeai_probe(2, 2, 5400),
        "readinessProbe": _kubeai_probe(10, 2, 3),
        "livenessProbe": _kubeai_probe(30, 3, 3),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    resources = fill.container.get("resources")
    if resources is UNKNOWN or resources:
        container["resources"] = resources
    pod: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
        **fill.pod,
    }
    replicas = spec.get("replicas", spec.get("minReplicas"))
    yield PodRef(obj, ("spec",), pod, "", replicas=replicas)


LLMAZ_SOURCE = "InftyAI/llmaz@3c13ff3"
"""Where llmaz builds a Playground's Pod: ``pkg/controller/inference/playground_controller.go``
``buildTemplate`` (the BackendRuntime's command, args, probes and /dev/shm; the claimed
OpenModel's path), ``service_controller.go`` ``injectModelFlavor`` (the first flavor's
limits and node selector); the chart's default vLLM BackendRuntime per release is
:mod:`gpustrata.catalog.llmaz` (its ``default`` recommended config)."""
LLMAZ_MODEL_DIR = "/workspace/models/"
"""Where llmaz's model loader puts a model hub model (``modelsource/modelhub.go``)."""


LLMAZ_RESOURCES = "InftyAI/llmaz@v0.1.4:pkg/controller/inference/playground_controller.go"
"""``buildTemplate``: the recommended config's resources, each of the Playground's own
``backendRuntimeConfig.resources`` replacing the config's of the same name
(``util.MergeResources``), CPU and memory limits raised to their requests; then
``service_controller.go`` ``injectModelFlavor`` writes the flavor's limits as both request
and limit."""


def _llmaz_resources(base: Any, own: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The container resources llmaz writes before the flavor (:data:`LLMAZ_RESOURCES`),
    from the config's *base* (UNKNOWN or None: only the Playground's own) and *own*."""
    config = base if isinstance(base, Mapping) else {}
    out: dict[str, dict[str, Any]] = {}
    for section in ("requests", "limits"):
        merged = {
            **as_map(config.get(section), section),
            **as_map(own.get(section), f"backendRuntimeConfig.resources.{section}"),
        }
        if merged:
            out[section] = merged
    if own:
        for key in ("cpu", "memory"):
            request = parse_quantity(out.get("requests", {}).get(key))
            limit = parse_quantity(out.get("limits", {}).get(key))
            if request is not None and limit is not None and request > limit:
                out["limits"][key] = out["requests"][key]
    return out


def _llmaz_pod(obj: K8sObject) -> Iterator[PodRef]:
    """The Pod llmaz runs for a Playground of one model on the default vLLM BackendRuntime
    (:data:`LLMAZ_SOURCE`), once :func:`~gpustrata_policies.view.launchers.attach_partners`
    has given it its OpenModel. The image, command, args, probes and /dev/shm are the chart's
    default BackendRuntime's where the release is known or every catalogued release agrees
    (:func:`llmaz_image`, :func:`llmaz_fill`), else UNKNOWN; a Playground of
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
    fill = llmaz_fill(obj)
    own = [str(a) for a in as_list(config.get("args"), "args")]
    filled = {"{{ .ModelPath }}": path, "{{ .ModelName }}": str(name)}
    args = fill.args
    if args is not UNKNOWN:  # the recommended config's, its placeholders filled, then its own
        args = [filled.get(str(a), str(a)) for a in args or []] + own
    container: dict[str, Any] = {
        "name": "model-runner",
        "image": llmaz_image(obj).image,  # the chart's default BackendRuntime's, or UNKNOWN
        "command": fill.command,
        "args": args,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
    }
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        value = UNKNOWN if fill.probes is UNKNOWN else fill.probes.get(probe)
        if value is not None:
            container[probe] = value
    pod: dict[str, Any] = {"containers": [container]}
    if fill.shm is UNKNOWN:
        container["volumeMounts"] = UNKNOWN
    elif fill.shm is not None:  # playground_controller.go: a memory-backed dshm of that size
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        pod["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": fill.shm}}]
    flavors = as_list(dig(model, "inferenceConfig", "flavors"), "inferenceConfig.flavors")
    flavor = flavors[0] if flavors and isinstance(flavors[0], Mapping) else {}
    resources = _llmaz_resources(fill.resources, as_map(config.get("resources"), "resources"))
    for key, value in as_map(flavor.get("limits"), "flavor limits").items():
        for section in ("requests", "limits"):  # injectModelFlavor overwrites both
            resources.setdefault(section, {})[key] = value
    if resources:
        container["resources"] = resources
    selector = as_map(flavor.get("nodeSelector"), "flavor nodeSelector")
    if selector:
        pod["nodeSelector"] = dict(selector)
    yield PodRef(obj, ("spec",), pod, "", replicas=spec.get("replicas"))


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


KTHENA_SOURCE = "volcano-sh/kthena@3cc0572"
"""Where kthena's ModelServing roles are defined (``pkg/apis/workload/v1alpha1/
servinggroup_types.go``: each of a role's ``replicas`` is one entry Pod from
``entryTemplate`` and ``workerReplicas`` Pods from ``workerTemplate``; ``spec.replicas``
ServingGroups) and how a ModelBooster becomes one (``pkg/model-booster-controller/convert/
model_serving.go`` ``buildCommands``, ``templates/vllm.yaml``)."""


def _times(a: Any, b: Any) -> Any:
    """``a x b`` replicas where both are stated integers (None, kthena's default, is 1)."""
    a, b = (1 if v is None else v for v in (a, b))
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b))
    return a * b if ok else None


def _kthena_pods(obj: K8sObject) -> Iterator[PodRef]:
    """Each role of a kthena ModelServing (:data:`KTHENA_SOURCE`): its entry Pod, and its
    worker Pods where ``workerReplicas`` > 0 (one engine across the role's Pods:
    :func:`pod_group`)."""
    base: Path = ("spec", "template", "roles")
    groups = dig(obj.raw, "spec", "replicas")
    for index, role in enumerate(as_list(dig(obj.raw, *base), "roles")):
        if not isinstance(role, Mapping):
            continue
        name, replicas = role.get("name", index), _times(groups, role.get("replicas"))
        workers = role.get("workerReplicas")
        yield from _template(
            obj, (*base, index, "entryTemplate"), f"role '{name}' entry", replicas=replicas
        )
        if isinstance(workers, int) and workers > 0:
            yield from _template(
                obj,
                (*base, index, "workerTemplate"),
                f"role '{name}' worker",
                replicas=_times(replicas, workers),
            )


def pod_group(pod: PodRef) -> tuple[int, PodRef] | None:
    """(Pods in the group, one worker Pod) where *pod* leads a group of Pods that run one
    engine together: a LeaderWorkerSet's leader (``size``), a kthena ModelServing role's
    entry Pod (1 + ``workerReplicas``) or the leader of a KAITO preset that spans nodes
    (its node count); None otherwise."""
    obj = pod.obj
    if obj.kind == "LeaderWorkerSet" and pod.role == "leader":
        size = dig(obj.raw, "spec", "leaderWorkerTemplate", "size")
        worker = "worker"
    elif obj.kind == "ModelServing" and pod.role.endswith(" entry") and is_read_kind(obj):
        name = pod.role.removesuffix(" entry").removeprefix("role ")
        roles = as_list(dig(obj.raw, "spec", "template", "roles"), "roles")
        found = [r for r in roles if isinstance(r, Mapping) and repr(r.get("name")) == name]
        workers = found[0].get("workerReplicas") if found else None
        size = workers + 1 if isinstance(workers, int) and not isinstance(workers, bool) else None
        worker = f"role {name} worker"
    elif obj.kind in {"Workspace", "InferenceSet"} and pod.role == KAITO_ROLES[0]:
        fill = kaito_fill(obj)  # read when the Pods were built
        size = fill.values.get("nodes") if fill is not None else None
        worker = KAITO_ROLES[1]
    else:
        return None
    if not isinstance(size, int) or isinstance(size, bool) or size <= 1:
        return None
    peers = [p for p in obj.pods() if p.role == worker]
    return (size, peers[0]) if peers else None


BOOSTER_COMMAND = ("python3", "-m", "vllm.entrypoints.openai.api_server")
"""The command kthena writes for a ModelBooster's vLLM server (:data:`KTHENA_SOURCE`
``buildCommands``): this, ``--model <cache path><model path>``, then each ``config`` key as
``--<key with _ as ->`` and its value, keys sorted."""


def _booster_model_path(backend: Mapping[str, Any]) -> str:
    """Where kthena downloads a ModelBooster's model (:data:`KTHENA_SOURCE`
    ``GetCachePath`` + ``GetMountPath``): the cache URI's host and path, then ``/`` and the
    MD5 of the model URI."""
    cache = backend.get("cacheURI")
    parts = urlsplit(cache) if isinstance(cache, str) else None
    root = (parts.netloc + parts.path).strip("/") if parts and parts.scheme else ""
    digest = hashlib.md5(str(backend.get("modelURI")).encode(), usedforsecurity=False)
    return ("/" + root if root else "") + "/" + digest.hexdigest()


def downloaded_model(obj: K8sObject) -> str | None:
    """The model a controller downloads to the path its engine serves, as the manifest names
    it: a kthena ModelBooster's ``spec.backend.modelURI`` (its engine serves the cache path
    of :func:`_booster_model_path`, which names no model), or None."""
    if obj.kind != "ModelBooster" or not is_read_kind(obj):
        return None
    uri = dig(obj.raw, "spec", "backend", "modelURI")
    return uri if isinstance(uri, str) and uri else None


def _booster_pod(obj: K8sObject) -> Iterator[PodRef]:
    """The engine Pod kthena builds for a ``type: vLLM`` ModelBooster's ``server`` worker of
    one Pod (``pods`` <= 1; several Pods run a Ray cluster the view does not assemble, and
    :func:`~gpustrata_policies.view.launchers.launcher_fills` says so): its image, the
    command of :data:`BOOSTER_COMMAND`, its resources, affinity and tolerations; the runtime
    sidecar (the installation's image) and the model path are left out."""
    backend = as_map(dig(obj.raw, "spec", "backend"), f"spec.backend of {obj.resource}")
    if backend.get("type") != "vLLM":
        return
    workers = as_list(backend.get("workers"), "spec.backend.workers")
    index, server = next(
        (
            (i, w)
            for i, w in enumerate(workers)
            if isinstance(w, Mapping) and w.get("type", "server") == "server"
        ),
        (0, None),
    )
    if server is None or (isinstance(server.get("pods"), int) and server["pods"] > 1):
        return
    config = as_map(server.get("config"), "config")
    args = ["--model", _booster_model_path(backend)]
    for key in sorted(config):
        value = config[key]
        args.append("--" + str(key).replace("_", "-"))
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if text:
            args.append(text)
    container: dict[str, Any] = {
        "name": "engine",
        "image": server.get("image"),
        "command": [*BOOSTER_COMMAND, *args],
        "env": as_list(backend.get("env"), "spec.backend.env"),
        "resources": as_map(server.get("resources"), "resources"),
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": 8000},
            "initialDelaySeconds": 180,
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
    }
    pod: dict[str, Any] = {"containers": [container]}
    for key in ("affinity", "tolerations"):
        if server.get(key):
            pod[key] = server[key]
    where: Path = ("spec", "backend", "workers", index)
    yield PodRef(
        obj, where, pod, "server", replicas=_times(backend.get("replicas"), server.get("replicas"))
    )


VLLMRUNTIME_SOURCE = (
    "vllm-project/production-stack@a6c01db:operator/internal/controller/vllmruntime_controller.go"
)
"""Where the production-stack operator builds a VLLMRuntime's Deployment
(``deploymentForVLLMRuntime``): ``/opt/venv/bin/vllm serve <modelURL>`` with flags from
``model`` and ``vllmConfig``, the image ``registry/name``, GPUs ``resources.gpu`` of
``gpuType``, ``toleration``, ``nodeSelectorTerms`` as required node affinity, /dev/shm only
with ``shmSize``, probes on /health."""


def _runtime_flag(args: list[str], flag: str, value: Any) -> None:
    if isinstance(value, bool):
        if value:
            args.append(flag)
    elif (isinstance(value, int) and value > 0) or (isinstance(value, str) and value):
        args += [flag, str(value)]


def _vllmruntime_pod(obj: K8sObject) -> Iterator[PodRef]:
    """The Pod of the Deployment the production-stack operator builds for a VLLMRuntime
    (:data:`VLLMRUNTIME_SOURCE`); the optional sidecar (LMCache's) is left out."""
    spec = as_map(dig(obj.raw, "spec"), f"spec of {obj.resource}")
    model = as_map(spec.get("model"), "spec.model")
    vllm = as_map(spec.get("vllmConfig"), "spec.vllmConfig")
    deploy = as_map(spec.get("deploymentConfig"), "spec.deploymentConfig")
    port = vllm.get("port", 8000)
    args = [str(model.get("modelURL")), "--host", "0.0.0.0", "--port", str(port)]
    _runtime_flag(args, "--enable-lora", model.get("enableLoRA") is True)
    _runtime_flag(args, "--enable-auto-tool-choice", model.get("enableTool") is True)
    _runtime_flag(args, "--tool-call-parser", model.get("toolCallParser"))
    chunked, prefix = vllm.get("enableChunkedPrefill"), vllm.get("enablePrefixCaching")
    args.append("--enable-chunked-prefill" if chunked is True else "--no-enable-chunked-prefill")
    args.append("--enable-prefix-caching" if prefix is True else "--no-enable-prefix-caching")
    _runtime_flag(args, "--max-model-len", model.get("maxModelLen"))
    _runtime_flag(args, "--dtype", model.get("dtype"))
    _runtime_flag(args, "--tensor-parallel-size", vllm.get("tensorParallelSize"))
    _runtime_flag(args, "--max-num-seqs", model.get("maxNumSeqs"))
    _runtime_flag(args, "--gpu_memory_utilization", vllm.get("gpuMemoryUtilization"))
    _runtime_flag(args, "--max_loras", vllm.get("maxLoras"))
    args += [str(a) for a in as_list(vllm.get("extraArgs"), "vllmConfig.extraArgs")]
    env: list[Mapping[str, Any]] = [
        {"name": "VLLM_USE_V1", "value": "1" if vllm.get("v1") is True else "0"}
    ]
    if model.get("enableLoRA") is True:
        env.append({"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"})
    if dig(spec, "lmCacheConfig", "enabled") is True:  # and LMCache's own env (not read)
        connector = "LMCacheConnectorV1" if vllm.get("v1") is True else "LMCacheConnector"
        args += ["--kv-transfer-config", f'{{"kv_connector":"{connector}","kv_role":"kv_both"}}']
    env += [e for e in as_list(vllm.get("env"), "vllmConfig.env") if isinstance(e, Mapping)]
    secret = as_map(model.get("hfTokenSecret"), "spec.model.hfTokenSecret")
    if secret.get("hfTokenSecretName"):
        ref = {"name": secret["hfTokenSecretName"], "key": secret.get("hfTokenKeyName")}
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": ref}})
    res = as_map(deploy.get("resources"), "deploymentConfig.resources")
    limits: dict[str, Any] = {}
    for key, name in (("cpu", "cpu"), ("memory", "memory")):
        if res.get(key):
            limits[name] = res[key]
    if res.get("gpu"):
        limits[str(res.get("gpuType") or "nvidia.com/gpu")] = res["gpu"]
    image = dig(deploy, "image", "registry"), dig(deploy, "image", "name")
    probe = {"httpGet": {"path": "/health", "port": port}, "periodSeconds": 20}
    container: dict[str, Any] = {
        "name": "vllm",
        "image": f"{image[0]}/{image[1]}" if all(isinstance(i, str) for i in image) else None,
        "command": ["/opt/venv/bin/vllm", "serve"],
        "args": args,
        "env": env,
        "resources": {"limits": limits, "requests": dict(limits)},
        "readinessProbe": {
            **probe,
            "initialDelaySeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 10,
        },
        "livenessProbe": {
            **probe,
            "initialDelaySeconds": 10,
            "timeoutSeconds": 3,
            "failureThreshold": 10,
        },
        "startupProbe": {
            **probe,
            "initialDelaySeconds": 120,
            "timeoutSeconds": 3,
            "failureThreshold": 100,
        },
    }
    pod: dict[str, Any] = {"containers": [container], "volumes": []}
    container["volumeMounts"] = []
    storage = as_map(spec.get("storageConfig"), "spec.storageConfig")
    if storage.get("enabled") is True:  # a PVC named after the VLLMRuntime
        name = storage.get("volumeName") or "pvc-storage"
        container["volumeMounts"].append(
            {"name": name, "mountPath": storage.get("mountPath") or "/data"}
        )
        pod["volumes"].append({"name": name, "persistentVolumeClaim": {"claimName": obj.name}})
    if deploy.get("shmSize"):
        container["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
        pod["volumes"].append(
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": deploy["shmSize"]}}
        )
    if deploy.get("toleration"):
        pod["tolerations"] = deploy["toleration"]
    if deploy.get("nodeSelectorTerms"):
        pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": deploy["nodeSelectorTerms"]
                }
            }
        }
    yield PodRef(obj, ("spec",), pod, "", replicas=deploy.get("replicas", 1))


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
    elif kind == "ModelServing":
        yield from _kthena_pods(obj)
    elif kind == "ModelBooster":
        yield from _booster_pod(obj)
    elif kind == "VLLMRuntime":
        yield from _vllmruntime_pod(obj)


def _kaito_preset_text(fill: KaitoFill) -> str:
    """The record of a KAITO preset: what the controller fills, read from the catalogued
    releases, and what stays unknown."""
    read = f"read with {fill.where}: {'; '.join(fill.filled)}; " if fill.filled else ""
    # the bring-your-own-nodes reason has a record of its own (below)
    gaps = "; ".join(
        why for why in dict.fromkeys(fill.unknown.values()) if not why.startswith(NO_INSTANCE)
    )
    return (
        f"KAITO preset {fill.preset!r}: the KAITO controller builds the vLLM Pods from the "
        f"preset (image, model, engine flags, GPUs per Pod, node count); {read}"
        f"the vLLM engine is not evaluated: {gaps or unbuilt(fill)}"
    )


def controller_fills(obj: K8sObject) -> list[str]:
    """What a controller kind's controller decides and the manifest does not state:
    reasons those parts are not evaluated (empty for the other kinds)."""
    if obj.kind not in CONTROLLER_KINDS or not is_read_kind(obj):
        return []
    raw, out = obj.raw, []
    if obj.kind in {"Workspace", "InferenceSet"}:
        base = kaito_base(obj)
        try:
            fill = kaito_fill(obj)
        except UnknownInput as exc:  # a Pulumi preview: known at deploy time
            out.append(f"KAITO preset: {exc.reason}, so what the controller builds is not read")
        else:
            if fill is not None and not builds_pods(fill):  # built: the rules judge them
                out.append(_kaito_preset_text(fill))
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
