"""The Pods the KAITO controller builds for a preset Workspace or InferenceSet, from what
:func:`~gpustrata_policies.view.kaito.kaito_fill` read (kaito-project/kaito@v0.12.0:
pkg/workspace/inference/preset_inferences.go ``GeneratePresetInference``), so the rules
judge them like any vLLM Pod."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpustrata_policies.view.kaito import KaitoFill, kaito_config_flags
from gpustrata_policies.view.objects import K8sObject, Path, PodRef
from gpustrata_policies.view.shell import MARK

__all__ = [
    "KAITO_LAUNCHER",
    "KAITO_POD_SHAPES",
    "KAITO_POD_SOURCE",
    "KAITO_POD_VALUES",
    "KAITO_ROLES",
    "builds_pods",
    "preset_pods",
    "startup_timeout_s",
    "unbuilt",
]

KAITO_POD_VALUES = frozenset(
    {
        "image",
        "model",
        "gpus",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "nodes",
        "gpu_memory_utilization",
    }
)
"""What a preset's Pods need read before gpustrata builds them."""
KAITO_LAUNCHER = ("python3", "/workspace/vllm/inference_api.py")
"""How KAITO's Pods start vLLM (``buildVLLMInferenceCommand``, :data:`KAITO_PARALLELISM_SOURCE`):
KAITO's wrapper, whose flags other than ``--kaito-*`` are vLLM's engine arguments."""
KAITO_WEIGHTS = "/workspace/weights"
"""Where KAITO downloads a preset's weights (``--download-dir``, ``DefaultWeightsVolumePath``
in pkg/utils/common_preset.go): a PersistentVolumeClaim of the chart's
``kaito-local-nvme-disk`` storage class on sizes whose SKU-table row says
``NVMeDiskEnabled`` (every size with ``kaito_gpu_memory_gib`` in gpustrata's catalogue),
``GenerateModelWeightsCacheVolume``."""
KAITO_PORT = 5000
"""``consts.PortInferenceServer``: the port KAITO's probes and Service use."""
KAITO_ROLES = ("leader", "worker")
"""The Pods of a preset engine that spans nodes: Pod 0 runs vLLM, the others Ray workers
(one StatefulSet, ``resource.count``/the estimator's node count Pods)."""


def builds_pods(fill: KaitoFill) -> bool:
    """Whether everything the preset's Pods need is read (:data:`KAITO_POD_VALUES`, the
    ConfigMap ``inference.config`` names, where it names one, and a release whose Pod
    shape is read, :data:`KAITO_POD_SHAPES`)."""
    return (
        fill.values.keys() >= KAITO_POD_VALUES
        and "config" not in fill.unknown
        and fill.values.get("release") in KAITO_POD_SHAPES
    )


KAITO_POD_SOURCE = "kaito-project/kaito@v0.12.0:pkg/workspace/inference/preset_inferences.go"
"""Where the Pods built here (probes, volumes, tolerations) were read."""
KAITO_POD_SHAPES = (KAITO_POD_SOURCE.partition("@v")[2].partition(":")[0],)
"""The KAITO releases whose Pods gpustrata builds: the one :data:`KAITO_POD_SOURCE` read."""
_MINUTE = 60
# readinessTimeoutForModelSize (presets/workspace/models/vllm_model.go, v0.12.0): 15 min
# + 18 s per GiB of model files, within [30 min, 180 min].
_STARTUP_BASE, _STARTUP_PER_GIB = 15 * _MINUTE, 18
_STARTUP_FLOOR, _STARTUP_CAP = 30 * _MINUTE, 180 * _MINUTE
_HEALTH_CHECK = "python3 /workspace/vllm/multi-node-health-check.py"
"""``DefaultVLLMMultiNodeHealthCheckCommand``: the exec probe of a multi-node engine."""


def startup_timeout_s(size: str | None) -> int:
    """The startup window KAITO 0.12.0 gives a preset whose model files are *size*
    (``131.42Gi``; None: unknown, the floor), in seconds."""
    if size is None or not size.endswith("Gi"):
        return _STARTUP_FLOOR
    try:
        gib = float(size.removesuffix("Gi"))
    except ValueError:
        return _STARTUP_FLOOR
    return int(min(max(_STARTUP_BASE + gib * _STARTUP_PER_GIB, _STARTUP_FLOOR), _STARTUP_CAP))


def _kaito_probe(**fields: int) -> dict[str, Any]:
    return {"httpGet": {"path": "/health", "port": KAITO_PORT}, **fields}


def _kaito_exec_probe(kind: str, **fields: int) -> dict[str, Any]:
    command = f"{_HEALTH_CHECK} {kind}"
    return {"exec": {"command": ["/bin/sh", "-c", command]}, **fields}


def _kaito_probes(fill: KaitoFill) -> dict[str, Any]:
    """KAITO 0.12.0's probes: HTTP /health on one node (``defaultLivenessProbe``,
    ``defaultReadinessProbe``, ``buildStartupProbe``), its health-check script across
    nodes (``SetDistributedInferenceProbe``); the startup window by model size."""
    window = -(-startup_timeout_s(fill.values.get("model_size")) // 10)
    if fill.values["nodes"] == 1:
        return {
            "livenessProbe": _kaito_probe(periodSeconds=10, failureThreshold=3),
            "readinessProbe": _kaito_probe(initialDelaySeconds=30, periodSeconds=10),
            "startupProbe": _kaito_probe(periodSeconds=10, failureThreshold=window),
        }
    return {
        "livenessProbe": _kaito_exec_probe(
            "liveness",
            initialDelaySeconds=60,
            periodSeconds=10,
            timeoutSeconds=5,
            failureThreshold=1,
        ),
        "readinessProbe": _kaito_exec_probe(
            "readiness", periodSeconds=10, timeoutSeconds=1, failureThreshold=1
        ),
        "startupProbe": _kaito_exec_probe(
            "readiness", periodSeconds=10, timeoutSeconds=1, failureThreshold=window
        ),
    }


def preset_pods(obj: K8sObject, base: Path, fill: KaitoFill, replicas: Any) -> Iterator[PodRef]:
    """The Pods KAITO builds for a preset (kaito-project/kaito@v0.12.0:
    pkg/workspace/inference/preset_inferences.go ``GeneratePresetInference``): the preset's
    image, KAITO's launcher with ``--model``/``--code-revision``, the layout flags and
    ``--gpu-memory-utilization``, then the ``inference.config`` ConfigMap's ``vllm:`` keys
    as ``--key value`` (:data:`~gpustrata_policies.view.kaito.KAITO_CONFIG_SOURCE`), every
    GPU of the node, /dev/shm in memory (``ConfigSHMVolume``), its probes
    (:func:`_kaito_probes`) and the GPU tolerations (``defaultTolerations``). The
    weights go to ``--download-dir`` on KAITO's NVMe claim (:data:`KAITO_WEIGHTS`). The
    ``max-model-len`` is ``auto`` where the release passes that, else KAITO's own figure,
    unknown here, unless the ConfigMap states one;
    flags KAITO adds of its own (served model name, KV events, compilation passes) are
    not built."""
    v = fill.values
    args = [f"--model={v['model']}"]
    if "revision" in v:
        args.append(f"--code-revision={v['revision']}")
    layout = (
        ("tensor-parallel-size", v["tensor_parallel_size"]),
        ("pipeline-parallel-size", v.get("pipeline_parallel_size", 1)),
        ("data-parallel-size", v.get("data_parallel_size", 1)),
    )
    args.extend(f"--{k}={n}" for k, n in layout if k == "tensor-parallel-size" or n != 1)
    args.append(f"--gpu-memory-utilization={v['gpu_memory_utilization']}")
    args.append(f"--download-dir={KAITO_WEIGHTS}")
    config = kaito_config_flags(obj)
    if "max-model-len" not in config:  # KAITO's: auto, or its own figure (not read)
        args.append(f"--max-model-len={v.get('max_model_len', MARK)}")
    for key, value in config.items():
        args.extend((f"--{key}", str(value)))
    gpus = {"nvidia.com/gpu": v["gpus"]}
    container: dict[str, Any] = {
        "name": obj.name or "inference",
        "image": v["image"],
        "command": list(KAITO_LAUNCHER),
        "args": args,
        "ports": [{"containerPort": KAITO_PORT}],
        "resources": {"requests": gpus, "limits": gpus},
        **_kaito_probes(fill),
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "model-weights-volume", "mountPath": KAITO_WEIGHTS},
        ],
    }
    pod: dict[str, Any] = {
        "containers": [container],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            {
                "name": "model-weights-volume",
                "persistentVolumeClaim": {"claimName": "model-weights-volume"},
            },
        ],
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        ],
    }
    path = (*base, "inference", "preset")
    if v["nodes"] == 1:
        yield PodRef(obj, path, pod, "", replicas=replicas)
        return
    yield PodRef(obj, path, pod, KAITO_ROLES[0], replicas=replicas)
    # one StatefulSet: Pod 0 leads, the others join its Ray cluster (same probes and GPUs)
    worker = {**container, "command": ["ray", "start", "--block"], "args": []}
    yield PodRef(obj, path, {**pod, "containers": [worker]}, KAITO_ROLES[1], replicas=replicas)


def unbuilt(fill: KaitoFill) -> str:
    """Why the Pods of a preset whose values are all read are not built."""
    release = fill.values.get("release")
    if release is not None and release not in KAITO_POD_SHAPES:
        return (
            f"the Pods KAITO {release} builds (probes, volumes) are not read; gpustrata builds "
            f"those of KAITO {', '.join(KAITO_POD_SHAPES)}"
        )
    return "gpustrata does not build its Pods"
