"""StackPlan -> component args and Kubernetes objects (pure; no Pulumi)."""

from __future__ import annotations

from typing import Any

from gpustrata.planning.plan import ModelPlan, PoolPlan, StackPlan
from gpustrata.render.args import (
    AutoscalingArgs,
    ProbeArgs,
    RayLlmServiceArgs,
    SecretRefArgs,
    TolerationArgs,
    VllmDeploymentArgs,
    WeightsArgs,
)
from gpustrata.render.nodes import kubelet_config, pool_description
from gpustrata.render.workloads import ray_service_object, vllm_deployment_objects
from gpustrata.spec.models import EngineSpec, ModelSpec

# Engine settings rendered as vLLM flags; the model id and port are positional/fixed.
_ENGINE_FIELDS = (
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "max_model_len",
    "gpu_memory_utilization",
    "dtype",
    "kv_cache_dtype",
    "block_size",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "enforce_eager",
    "quantization",
    "trust_remote_code",
)
_DEFAULTS_LEFT_OUT: dict[str, Any] = {
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "dtype": "auto",
    "kv_cache_dtype": "auto",
    "enforce_eager": False,
    "trust_remote_code": False,
}


def engine_args(engine: EngineSpec) -> dict[str, Any]:
    """The engine settings the stack states, by vLLM EngineArgs name (unset ones omitted)."""
    out: dict[str, Any] = {}
    for name in _ENGINE_FIELDS:
        value = getattr(engine, name)
        if value is None or _DEFAULTS_LEFT_OUT.get(name, object()) == value:
            continue
        out[name] = value
    out.update(engine.extra_args)
    return out


def pool_tolerations(pool: PoolPlan) -> list[TolerationArgs]:
    """Tolerations for exactly the pool's taints."""
    return [
        TolerationArgs(key=t.key, operator="Equal", value=t.value, effect=t.effect)
        if t.value
        else TolerationArgs(key=t.key, operator="Exists", value="", effect=t.effect)
        for t in pool.spec.taints
    ]


def pool_selector(pool: PoolPlan) -> dict[str, str]:
    """Node selector that lands Pods on the pool."""
    return {"gpustrata.io/pool": pool.name}


def probe_args(mp: ModelPlan) -> ProbeArgs:
    """Probe timing from the plan."""
    p = mp.probes
    return ProbeArgs(
        startup_period_s=p.startup_period_s,
        startup_failure_threshold=p.startup_failure_threshold,
        liveness_period_s=p.liveness_period_s,
        liveness_failure_threshold=p.liveness_failure_threshold,
        readiness_period_s=p.readiness_period_s,
        timeout_s=p.timeout_s,
    )


def _weights(model: ModelSpec) -> WeightsArgs:
    w = WeightsArgs(source=model.weights.source)
    if model.weights.uri:
        w["uri"] = model.weights.uri
    if model.weights.pvc_name:
        w["pvc_name"] = model.weights.pvc_name
    return w


def _secret(model: ModelSpec) -> SecretRefArgs | None:
    if model.hf_token is None:
        return None
    return SecretRefArgs(name=model.hf_token.name, key=model.hf_token.key)


def vllm_deployment_args(mp: ModelPlan) -> VllmDeploymentArgs:
    """Args of the VllmDeployment component for a 'deployment' model."""
    m = mp.spec
    auto = m.autoscaling
    args = VllmDeploymentArgs(
        name=m.name,
        namespace=m.namespace,
        model=m.weights.uri if m.weights.source == "s3" and m.weights.uri else m.model,
        served_model_name=m.served_model_name or m.model,
        image=m.image,
        replicas=m.replicas,
        gpus=mp.gpus_per_replica,
        cpu=m.cpu,
        memory=m.memory,
        shm_size=m.shm_size,
        ephemeral_storage=f"{max(50, m.weights.cache_size_gib)}Gi",
        engine_args=engine_args(m.engine),
        node_selector=pool_selector(mp.pool),
        tolerations=pool_tolerations(mp.pool),
        probes=probe_args(mp),
        autoscaling=AutoscalingArgs(
            kind=auto.kind,
            min_replicas=mp.min_replicas,
            max_replicas=mp.max_replicas,
            target_waiting_requests=auto.target_waiting_requests,
        ),
        weights=_weights(m),
    )
    secret = _secret(m)
    if secret:
        args["hf_token"] = secret
    return args


def ray_llm_service_args(mp: ModelPlan, ray_version: str) -> RayLlmServiceArgs:
    """Args of the RayLlmService component for a 'rayservice' model."""
    m, ray = mp.spec, mp.ray
    assert ray is not None, "ray_llm_service_args needs a model on the rayservice runtime"
    kwargs = engine_args(m.engine)
    args = RayLlmServiceArgs(
        name=m.name,
        namespace=m.namespace,
        image=m.image,
        ray_version=ray_version,
        models=[
            {
                "model_id": m.served_model_name or m.model,
                "model_source": m.weights.uri
                if m.weights.source == "s3" and m.weights.uri
                else m.model,
                "engine_kwargs": kwargs,
                "min_replicas": mp.min_replicas,
                "max_replicas": mp.max_replicas,
                "target_ongoing_requests": m.autoscaling.target_ongoing_requests,
                "placement_strategy": ray.placement_strategy,
                "bundles": ray.bundles,
            }
        ],
        worker_groups=[
            {
                "group_name": f"{mp.pool.name}-workers",
                "replicas": ray.min_workers,
                "min_replicas": ray.min_workers,
                "max_replicas": ray.max_workers,
                "gpus": ray.gpus_per_worker,
                "cpu": m.cpu,
                "memory": m.memory,
                "shm_size": m.shm_size,
                "node_selector": pool_selector(mp.pool),
                "tolerations": pool_tolerations(mp.pool),
            }
        ],
        head_cpu="4",
        head_memory="16Gi",
        probes=probe_args(mp),
    )
    secret = _secret(m)
    if secret:
        args["hf_token"] = secret
    return args


def pool_object(pool: PoolPlan) -> dict[str, Any]:
    """The GpuNodePool description of a planned pool."""
    spec = pool.spec
    return pool_description(
        name=pool.name,
        instance_type=pool.instance.name,
        gpu_product=pool.gfd_product,
        gpu_count=pool.instance.gpu_count,
        vcpu=pool.instance.vcpu,
        memory_mib=pool.instance.memory_mib,
        labels=pool.labels,
        taints=[t.model_dump() for t in spec.taints],
        kubelet=kubelet_config(
            max_pods=pool.max_pods,
            system_reserved=pool.system_reserved,
            kube_reserved=pool.kube_reserved,
            eviction_hard=pool.eviction_hard,
        ),
        min_size=spec.min_size,
        max_size=spec.max_size,
    )


def workload_objects(plan: StackPlan) -> list[dict[str, Any]]:
    """Every Kubernetes workload object the stack deploys, in registration order."""
    objects: list[dict[str, Any]] = []
    for mp in plan.models.values():
        if mp.spec.runtime == "rayservice":
            objects.append(
                ray_service_object(ray_llm_service_args(mp, plan.spec.kuberay.ray_version))
            )
        else:
            objects.extend(vllm_deployment_objects(vllm_deployment_args(mp)))
    return objects
