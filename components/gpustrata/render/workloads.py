"""Pure renderers: component args -> Kubernetes objects (camelCase dicts).

The Pulumi components register exactly these objects, and ``gpustrata render`` prints
them, so ``gpustrata check`` on rendered manifests sees what ``pulumi up`` deploys.
"""

from __future__ import annotations

import copy
import shlex
from typing import Any

import yaml

from gpustrata.core.contract import STARTUP_ESTIMATE_ANNOTATION
from gpustrata.render.dra import gpu_claim_template, use_gpu_claim
from gpustrata.render.workload_args import (
    MultiNodeArgs,
    ProbeArgs,
    RayLlmServiceArgs,
    RayWorkerGroupArgs,
    SecretRefArgs,
    TolerationArgs,
    VllmDeploymentArgs,
    WeightsArgs,
)

VLLM_PORT = 8000
SERVICE_PORT = 80
DEFAULT_PROMETHEUS = "http://prometheus-operated.monitoring.svc:9090"
"""The Prometheus a KEDA trigger queries when the stack names none: the Service the
Prometheus Operator creates for a Prometheus in namespace monitoring."""
"""Port of the Service in front of `vllm serve` (the endpoint the stack exports)."""
SERVE_PORT = 8000
APP_LABEL = "app.kubernetes.io/name"
PART_OF_LABEL = "app.kubernetes.io/part-of"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpustrata"}
"""The planner's engine startup estimate (load + init) on a RayService (rule R005)."""
ENGINE_START_TIMEOUT_ENV = "RAYLLM_ENGINE_START_TIMEOUT_S"
"""Ray Serve LLM: seconds LLMServer waits for the engine (ray/llm/_internal/serve/constants.py)."""
VLLM_CACHE_DIR = "/root/.cache"
"""HF_HOME and vLLM caches of the vllm/vllm-openai image (it runs as root)."""
RAY_CACHE_DIR = "/home/ray/.cache"
"""The same caches in rayproject images (user ray)."""


def _plain(value: object) -> str:
    """A name or namespace as the renderers need it: a string (the components put a
    placeholder in for an ``Output`` before calling them)."""
    if not isinstance(value, str):
        raise TypeError(f"expected a plain string, got {type(value).__name__}")
    return value


def engine_flags(engine_args: dict[str, Any]) -> list[str]:
    """vLLM EngineArgs names -> `vllm serve` flags (``--name value``; booleans as switches)."""
    flags: list[str] = []
    for name, value in engine_args.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            if value:
                flags.append(flag)
            elif name in ("enable_prefix_caching", "enable_chunked_prefill"):
                flags.append("--no-" + name.replace("_", "-"))
            continue
        flags += [flag, str(value)]
    return flags


def _tolerations(tolerations: list[TolerationArgs]) -> list[dict[str, str]]:
    out = []
    for t in tolerations:
        item = {"key": t["key"], "operator": t["operator"]}
        if t["operator"] == "Equal":
            item["value"] = t["value"]
        if t["effect"]:
            item["effect"] = t["effect"]
        out.append(item)
    return out


def _hf_env(secret: SecretRefArgs | None) -> list[dict[str, Any]]:
    if secret is None:
        return []
    ref = {"secretKeyRef": {"name": secret["name"], "key": secret["key"]}}
    return [{"name": "HF_TOKEN", "valueFrom": ref}]


def _probes(probes: ProbeArgs, port: int | str) -> dict[str, Any]:
    timeout = probes["timeout_s"]
    return {
        "startupProbe": {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": probes["startup_period_s"],
            "failureThreshold": probes["startup_failure_threshold"],
            "timeoutSeconds": timeout,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": probes["liveness_period_s"],
            "failureThreshold": probes["liveness_failure_threshold"],
            "timeoutSeconds": timeout,
        },
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": probes["readiness_period_s"],
            "failureThreshold": 3,
            "timeoutSeconds": timeout,
        },
    }


def _shm_volume(size: str) -> dict[str, Any]:
    return {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size}}


def _meta(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": {**labels, **MANAGED_BY}}


def _service(
    name: str, ns: str, labels: dict[str, str], selector: dict[str, str]
) -> dict[str, Any]:
    """The model's Service: its ``http`` port to the selected engines' ``http`` port."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, ns, labels),
        "spec": {
            "selector": selector,
            "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http"}],
        },
    }


def vllm_deployment_objects(args: VllmDeploymentArgs) -> list[dict[str, Any]]:
    """Deployment, Service, and (when needed) PDB and autoscaler for a `vllm serve` engine."""
    name, ns = _plain(args["name"]), _plain(args["namespace"])
    labels = {APP_LABEL: name, PART_OF_LABEL: "gpustrata"}
    selector = {APP_LABEL: name}
    gpus = str(args["gpus"])
    limits = {
        "nvidia.com/gpu": gpus,
        "memory": args["memory"],
        "ephemeral-storage": args["ephemeral_storage"],
    }
    requests = {**limits, "cpu": args["cpu"]}
    command = [
        "vllm",
        "serve",
        args["model"],
        "--served-model-name",
        args["served_model_name"],
        "--port",
        str(VLLM_PORT),
        *engine_flags(args["engine_args"]),
    ]
    volumes = [
        _shm_volume(args["shm_size"]),
        _cache_volume(args["weights"], args["ephemeral_storage"]),
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "model-cache", "mountPath": VLLM_CACHE_DIR},
    ]
    container = {
        "name": "vllm",
        "image": args["image"],
        "command": command,
        "ports": [{"name": "http", "containerPort": VLLM_PORT}],
        "env": _hf_env(args.get("hf_token")),
        "resources": {"requests": requests, "limits": limits},
        "volumeMounts": mounts,
        **_probes(args["probes"], "http"),
    }
    auto = args["autoscaling"]
    replicas = auto["min_replicas"] if auto["kind"] != "none" else args["replicas"]
    max_replicas = auto["max_replicas"] if auto["kind"] != "none" else args["replicas"]
    pod_spec: dict[str, Any] = {
        **({"serviceAccountName": args["service_account"]} if "service_account" in args else {}),
        "containers": [container],
        "volumes": volumes,
        "nodeSelector": dict(args["node_selector"]),
        "tolerations": _tolerations(args["tolerations"]),
        # vLLM drains in-flight requests on SIGTERM; give long generations time to finish.
        "terminationGracePeriodSeconds": 120,
    }
    if max_replicas > 1:
        pod_spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector},
            }
        ]
    multi = args.get("multi_node")
    if multi is not None:
        return _leader_worker_set_objects(args, multi, labels, pod_spec, container, max_replicas)
    claim: list[dict[str, Any]] = []
    if args.get("gpu_claim"):
        use_gpu_claim(pod_spec, container, name)
        claim.append(gpu_claim_template(name, ns, args["gpus"], {**labels, **MANAGED_BY}))
    metadata = _meta(name, ns, labels)
    if "startup_estimate_s" in args:
        # The rules (V009) size the startup window against the planner's own estimate.
        metadata["annotations"] = {STARTUP_ESTIMATE_ANNOTATION: str(args["startup_estimate_s"])}
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            # GPUs are scarce: never surge a second GPU Pod during an update (K008).
            "strategy": (
                {"type": "Recreate"}
                if max_replicas <= 1
                else {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
                }
            ),
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }
    service = _service(name, ns, labels, selector)
    objects = [*claim, deployment, service]
    if max_replicas > 1:
        objects.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta(name, ns, labels),
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector}},
            }
        )
    if auto["kind"] == "keda":
        objects.append(_scaled_object(args, labels))
    elif auto["kind"] == "hpa":
        objects.append(_hpa(args, labels))
    if args["service_monitor"]:
        objects.append(_service_monitor(name, ns, labels, selector))
    return objects


LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
"""Label the LeaderWorkerSet controller puts on every Pod of a set (lws api/leaderworkerset/
v1/leaderworkerset_types.go SetNameLabelKey)."""
ROLE_LABEL = "role"
"""leader / worker, as the LWS vLLM example labels its templates (the Service selects the
leader: only it serves HTTP)."""
MULTI_NODE_SCRIPT = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
"""vLLM's helper in the vllm-openai image: `leader --ray_cluster_size=N` starts a Ray head and
waits until N nodes joined; `worker --ray_address=A` joins (vllm examples/online_serving/
multi-node-serving.sh; the LWS vLLM example runs it the same way)."""


def _quoted(words: list[str]) -> str:
    """A command line for ``sh -c`` (each word single-quoted unless plain)."""
    return " ".join(
        w if w.startswith("$(") or shlex.quote(w) == w else shlex.quote(w) for w in words
    )


def _leader_worker_set_objects(
    args: VllmDeploymentArgs,
    multi: MultiNodeArgs,
    labels: dict[str, str],
    pod_spec: dict[str, Any],
    container: dict[str, Any],
    max_replicas: int,
) -> list[dict[str, Any]]:
    """A LeaderWorkerSet of ``nodes``-Pod groups (the leader runs `vllm serve` and the
    probes, the workers join its engine), the Service in front of the leaders and a PDB."""
    name, ns = _plain(args["name"]), _plain(args["namespace"])
    serve = list(container["command"])
    nodes = multi["nodes"]
    env = list(container["env"])
    if multi["efa_interfaces"] > 0:
        efa = {multi["efa_resource"]: str(multi["efa_interfaces"])}
        for side in ("requests", "limits"):
            container["resources"][side] = {**container["resources"][side], **efa}
        env += [{"name": k, "value": v} for k, v in multi["efa_env"].items()]
        container["securityContext"] = {"capabilities": {"add": list(multi["efa_capabilities"])}}
    container["env"] = env
    backend = ["--distributed-executor-backend", multi["executor"]]
    if multi["executor"] == "ray":
        leader_cmd = (
            f"bash {MULTI_NODE_SCRIPT} leader --ray_cluster_size=$(LWS_GROUP_SIZE); "
            f"exec {_quoted([*serve, *backend])}"
        )
        worker_cmd = f"bash {MULTI_NODE_SCRIPT} worker --ray_address=$(LWS_LEADER_ADDRESS)"
    else:
        ranks = ["--nnodes", str(nodes), "--master-addr", "$(LWS_LEADER_ADDRESS)"]
        leader_cmd = f"exec {_quoted([*serve, *backend, *ranks, '--node-rank', '0'])}"
        worker_cmd = (
            f"exec {_quoted([*serve, *backend, *ranks, '--node-rank', '$(LWS_WORKER_INDEX)'])}"
            " --headless"
        )
    leader = {**container, "command": ["sh", "-c", leader_cmd]}
    worker = {
        key: value
        for key, value in container.items()
        if key not in ("startupProbe", "livenessProbe", "readinessProbe", "ports")
    }
    worker = {**worker, "name": "vllm-worker", "command": ["sh", "-c", worker_cmd]}
    metadata = _meta(name, ns, labels)
    if "startup_estimate_s" in args:
        metadata["annotations"] = {STARTUP_ESTIMATE_ANNOTATION: str(args["startup_estimate_s"])}
    lws = {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": metadata,
        "spec": {
            "replicas": args["replicas"],
            # Workers start with the leader: the leader waits for them (Ray head or
            # torch.distributed), so LeaderReady would never come.
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": {
                "size": nodes,
                # One engine spans the group: a restarted Pod leaves the others' NCCL
                # communicators dead, so the whole group restarts.
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": {
                    "metadata": {"labels": {**labels, ROLE_LABEL: "leader"}},
                    "spec": copy.deepcopy({**pod_spec, "containers": [leader]}),
                },
                "workerTemplate": {
                    "metadata": {"labels": {**labels, ROLE_LABEL: "worker"}},
                    "spec": copy.deepcopy({**pod_spec, "containers": [worker]}),
                },
            },
        },
    }
    selector = {APP_LABEL: name, ROLE_LABEL: "leader"}
    service = _service(name, ns, labels, selector)
    objects: list[dict[str, Any]] = [lws, service]
    if max_replicas > 1:
        objects.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta(name, ns, labels),
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {LWS_NAME_LABEL: name}}},
            }
        )
    if args["service_monitor"]:
        objects.append(_service_monitor(name, ns, labels, selector))
    return objects


def _cache_volume(weights: WeightsArgs, size: str) -> dict[str, Any]:
    """The weights cache: the stack's PVC, else an emptyDir bounded like ephemeral storage."""
    if weights["source"] == "pvc" and weights.get("pvc_name"):
        return {"name": "model-cache", "persistentVolumeClaim": {"claimName": weights["pvc_name"]}}
    return {"name": "model-cache", "emptyDir": {"sizeLimit": size}}


def _service_monitor(
    name: str, namespace: str, labels: dict[str, str], selector: dict[str, str]
) -> dict[str, Any]:
    """A Prometheus Operator ServiceMonitor scraping vLLM's /metrics through the Service."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _meta(name, namespace, labels),
        "spec": {
            "selector": {"matchLabels": selector},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [{"port": "http", "path": "/metrics", "interval": "15s"}],
        },
    }


def _waiting_query(args: VllmDeploymentArgs) -> str:
    return (
        f'sum(vllm:num_requests_waiting{{namespace="{_plain(args["namespace"])}",'
        f'model_name="{args["served_model_name"]}"}})'
    )


def _deployment_ref(args: VllmDeploymentArgs) -> dict[str, str]:
    """The engine Deployment as the target an autoscaler (KEDA or HPA) scales."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": _plain(args["name"])}


def _scaled_object(args: VllmDeploymentArgs, labels: dict[str, str]) -> dict[str, Any]:
    auto = args["autoscaling"]
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _meta(_plain(args["name"]), _plain(args["namespace"]), labels),
        "spec": {
            "scaleTargetRef": _deployment_ref(args),
            "minReplicaCount": auto["min_replicas"],
            "maxReplicaCount": auto["max_replicas"],
            # A new engine needs minutes to load; do not flap on short bursts.
            "cooldownPeriod": 600,
            "triggers": [
                {
                    "type": "prometheus",
                    "metadata": {
                        "serverAddress": auto.get("prometheus_url", DEFAULT_PROMETHEUS),
                        "query": _waiting_query(args),
                        "threshold": str(auto["target_waiting_requests"]),
                    },
                }
            ],
        },
    }


def _hpa(args: VllmDeploymentArgs, labels: dict[str, str]) -> dict[str, Any]:
    auto = args["autoscaling"]
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(_plain(args["name"]), _plain(args["namespace"]), labels),
        "spec": {
            "scaleTargetRef": _deployment_ref(args),
            "minReplicas": max(1, auto["min_replicas"]),
            "maxReplicas": auto["max_replicas"],
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "vllm:num_requests_waiting"},
                        "target": {
                            "type": "AverageValue",
                            "averageValue": str(auto["target_waiting_requests"]),
                        },
                    },
                }
            ],
        },
    }


def serve_config(args: RayLlmServiceArgs) -> dict[str, Any]:
    """The Ray Serve config (``serveConfigV2``) of a Ray Serve LLM application.

    One ``llm_config`` per model, in the names of Ray Serve LLM's ``LLMConfig``
    (ray python/ray/llm/_internal/serve/core/configs/llm_config.py): typed vLLM
    ``engine_kwargs``, ``deployment_config`` with Serve autoscaling on ongoing requests and
    health checks, ``placement_group_config`` (one bundle per GPU worker, strategy from the
    layout), ``accelerator_type`` and the engine start timeout in ``runtime_env``.
    """
    llm_configs = []
    for model in args["models"]:
        config: dict[str, Any] = {
            "model_loading_config": {
                "model_id": model["model_id"],
                "model_source": model["model_source"],
            },
            "engine_kwargs": dict(model["engine_kwargs"]),
            "deployment_config": {
                "autoscaling_config": {
                    "min_replicas": model["min_replicas"],
                    "max_replicas": model["max_replicas"],
                    "target_ongoing_requests": model["target_ongoing_requests"],
                },
                "health_check_period_s": model["health_check_period_s"],
                "health_check_timeout_s": model["health_check_timeout_s"],
            },
            "placement_group_config": {
                "bundles": [dict(b) for b in model["bundles"]],
                "strategy": model["placement_strategy"],
            },
            "runtime_env": {
                "env_vars": {ENGINE_START_TIMEOUT_ENV: str(model["engine_start_timeout_s"])}
            },
        }
        if model.get("accelerator_type"):
            config["accelerator_type"] = model["accelerator_type"]
        llm_configs.append(config)
    return {
        "applications": [
            {
                "name": "llm",
                "route_prefix": "/",
                "import_path": "ray.serve.llm:build_openai_app",
                "args": {"llm_configs": llm_configs},
            }
        ]
    }


def _ray_container(
    name: str,
    image: str,
    requests: dict[str, str],
    gpus: int,
    env: list[dict[str, Any]],
) -> dict[str, Any]:
    """A Ray container: requests = limits (Guaranteed), GPUs only where the group has them."""
    resources: dict[str, dict[str, str]] = {"requests": dict(requests), "limits": dict(requests)}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return {"name": name, "image": image, "env": env, "resources": resources}


def _worker_group(args: RayLlmServiceArgs, group: RayWorkerGroupArgs) -> dict[str, Any]:
    """One KubeRay worker group on one GPU pool; Ray sees exactly the container's GPUs."""
    container = _ray_container(
        "ray-worker",
        args["image"],
        {
            "cpu": group["cpu"],
            "memory": group["memory"],
            "ephemeral-storage": group["ephemeral_storage"],
        },
        group["gpus"],
        _hf_env(args.get("hf_token")),
    )
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    volumes = [_shm_volume(group["shm_size"])]
    weights = args.get("weights")
    if weights is not None and weights["source"] == "pvc" and weights.get("pvc_name"):
        volumes.append(_cache_volume(weights, group["ephemeral_storage"]))
        mounts.append({"name": "model-cache", "mountPath": RAY_CACHE_DIR})
    container["volumeMounts"] = mounts
    pod_spec: dict[str, Any] = {
        **({"serviceAccountName": args["service_account"]} if "service_account" in args else {}),
        "containers": [container],
        "volumes": volumes,
        "nodeSelector": dict(group["node_selector"]),
        "tolerations": _tolerations(group["tolerations"]),
    }
    if group.get("gpu_claim"):
        use_gpu_claim(pod_spec, container, _claim_workload(args, group))
    return {
        "groupName": group["group_name"],
        "replicas": group["replicas"],
        "minReplicas": group["min_replicas"],
        "maxReplicas": group["max_replicas"],
        # Ray advertises exactly the container's GPU limit or claim (R001): KubeRay reads
        # no claims, so num-gpus is what tells Ray about DRA GPUs.
        "rayStartParams": {"num-gpus": str(group["gpus"])},
        "template": {"spec": pod_spec},
    }


def _claim_workload(args: RayLlmServiceArgs, group: RayWorkerGroupArgs) -> str:
    """The name a worker group's claim template is derived from: ``<service>-<group>``."""
    return f"{_plain(args['name'])}-{group['group_name']}"


def ray_claim_templates(args: RayLlmServiceArgs) -> list[dict[str, Any]]:
    """The ResourceClaimTemplate of each DRA worker group (``gpus`` devices per worker Pod)."""
    labels = {APP_LABEL: _plain(args["name"]), PART_OF_LABEL: "gpustrata", **MANAGED_BY}
    return [
        gpu_claim_template(_claim_workload(args, g), _plain(args["namespace"]), g["gpus"], labels)
        for g in args["worker_groups"]
        if g.get("gpu_claim")
    ]


def _head_pod_spec(args: RayLlmServiceArgs, head: dict[str, Any]) -> dict[str, Any]:
    """The head Pod: on the system pool where the stack has one (the GPU pools' taint
    keeps it off them, K017), under the model's ServiceAccount."""
    spec: dict[str, Any] = {"containers": [head]}
    if args.get("head_node_selector"):
        spec["nodeSelector"] = dict(args["head_node_selector"])
    if args.get("service_account"):
        spec["serviceAccountName"] = args["service_account"]
    return spec


def ray_service_object(args: RayLlmServiceArgs) -> dict[str, Any]:
    """A RayService (ray.io/v1) running Ray Serve LLM on a CPU head and GPU workers."""
    labels = {APP_LABEL: _plain(args["name"]), PART_OF_LABEL: "gpustrata"}
    head = _ray_container(
        "ray-head",
        args["image"],
        {"cpu": args["head_cpu"], "memory": args["head_memory"]},
        0,
        _hf_env(args.get("hf_token")),
    )
    head["ports"] = [
        {"name": "gcs", "containerPort": 6379},
        {"name": "dashboard", "containerPort": 8265},
        {"name": "serve", "containerPort": SERVE_PORT},
    ]
    metadata = _meta(_plain(args["name"]), _plain(args["namespace"]), labels)
    if "startup_estimate_s" in args:
        metadata["annotations"] = {STARTUP_ESTIMATE_ANNOTATION: str(args["startup_estimate_s"])}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": metadata,
        "spec": {
            # NewCluster only where the pools hold a second cluster (R006); the deprecated
            # *UnhealthySecondThreshold fields are not set: KubeRay >= 1.1 ignores them.
            "upgradeStrategy": {"type": args["upgrade_strategy"]},
            "serveConfigV2": yaml.safe_dump(serve_config(args), sort_keys=False),
            "rayClusterConfig": {
                "rayVersion": args["ray_version"],
                "enableInTreeAutoscaling": True,
                "headGroupSpec": {
                    # The head schedules no GPU work: keep engines off it (R002).
                    "rayStartParams": {"num-cpus": "0", "num-gpus": "0"},
                    "template": {"spec": _head_pod_spec(args, head)},
                },
                "workerGroupSpecs": [_worker_group(args, g) for g in args["worker_groups"]],
            },
        },
    }
