"""StackPlan -> component args and Kubernetes objects (pure; no Pulumi)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, cast

from gpustrata.catalog.aws import efa_facts
from gpustrata.catalog.charts import chart_release, gpu_cluster_values
from gpustrata.catalog.dra import DRA_CHART_WAYS, dra_driver_release
from gpustrata.core.contract import API_VERSION, POOL_LABEL
from gpustrata.core.helmmerge import merge_helm_values
from gpustrata.planning.plan import engine_disk_gib
from gpustrata.planning.plan_types import ModelPlan, PoolPlan, StackPlan
from gpustrata.render import karpenter
from gpustrata.render.dra import dra_driver_values
from gpustrata.render.foundation import (
    chart_version,
    system_pool_placement,
    system_values,
)
from gpustrata.render.nodes import kubelet_config, pool_description
from gpustrata.render.operators import (
    gpu_operator_description,
    gpu_operator_values,
    kuberay_values,
)
from gpustrata.render.workload_args import (
    AutoscalingArgs,
    MultiNodeArgs,
    ProbeArgs,
    RayLlmServiceArgs,
    SecretRefArgs,
    TolerationArgs,
    VllmDeploymentArgs,
    WeightsArgs,
)
from gpustrata.render.workloads import (
    MANAGED_BY,
    RAY_CACHE_DIR,
    VLLM_CACHE_DIR,
    ray_claim_templates,
    ray_service_object,
    vllm_deployment_objects,
)
from gpustrata.spec.cluster import KarpenterPoolSpec
from gpustrata.spec.fields import is_model_path
from gpustrata.spec.serving import EngineSpec, ModelSpec
from gpustrata.spec.stack import StackSpec

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
    return {POOL_LABEL: pool.name}


def probe_args(mp: ModelPlan) -> ProbeArgs:
    """Probe timing from the plan."""
    # ProbeArgs is Probes as a component input: the same fields (tests/test_planner.py).
    return cast("ProbeArgs", dataclasses.asdict(mp.probes))


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


def served_model(model: ModelSpec, cache_dir: str) -> str:
    """What the engine loads: the s3 URI of streamed weights; for a model named by a path
    in the project, its folder on the PVC mounted at *cache_dir* (the loader refused any
    other source); else the Hugging Face id."""
    w = model.weights
    if w.source == "s3" and w.uri:
        return w.uri
    if is_model_path(model.model) and w.source == "pvc" and w.uri:
        return f"{cache_dir.rstrip('/')}/{w.uri.strip('/')}"
    return model.model


def served_model_name(model: ModelSpec) -> str:
    """The name clients ask for: the stack's ``served_model_name``, else the model id, or
    the stack's model name when the model is a path (a path says nothing to a client)."""
    if model.served_model_name:
        return model.served_model_name
    return model.name if is_model_path(model.model) else model.model


def weights_service_account(model: ModelSpec, stack: StackSpec) -> str | None:
    """The ServiceAccount a model's engines run under: the stack's, else for s3 weights in
    create mode ``<model>-weights`` (bound by EKS Pod Identity, K019), else None."""
    weights = model.weights
    if weights.service_account:
        return weights.service_account
    if weights.source == "s3" and stack.cluster.mode == "create":
        return f"{model.name}-weights"
    return None


def service_monitor_on(model: ModelSpec, stack: StackSpec) -> bool:
    """A model's ServiceMonitor: as stated, else when the stack has monitoring."""
    if model.service_monitor is not None:
        return model.service_monitor
    return stack.monitoring.enabled


def _engine_extras(
    args: VllmDeploymentArgs | RayLlmServiceArgs, mp: ModelPlan, stack: StackSpec
) -> None:
    """The optional inputs both runtimes take alike, set where the model has them: the
    weights' ServiceAccount, the planner's startup estimate and the Hugging Face token."""
    account = weights_service_account(mp.spec, stack)
    if account:
        args["service_account"] = account
    if mp.capacity is not None:
        args["startup_estimate_s"] = math.ceil(mp.capacity.startup.total_s)
    secret = _secret(mp.spec)
    if secret:
        args["hf_token"] = secret


def vllm_deployment_args(mp: ModelPlan, stack: StackSpec) -> VllmDeploymentArgs:
    """Args of the VllmDeployment component for a 'deployment' model."""
    m = mp.spec
    auto = m.autoscaling
    args = VllmDeploymentArgs(
        name=m.name,
        namespace=m.namespace,
        model=served_model(m, VLLM_CACHE_DIR),
        served_model_name=served_model_name(m),
        image=m.image,
        replicas=m.replicas,
        gpus=mp.gpus_per_pod,
        cpu=mp.cpu,
        memory=mp.memory,
        shm_size=m.shm_size,
        ephemeral_storage=weights_storage(mp)[0],
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
        service_monitor=service_monitor_on(m, stack),
    )
    if auto.kind == "keda" and stack.monitoring.url:
        args["autoscaling"]["prometheus_url"] = stack.monitoring.url
    if mp.pool.spec.gpu_allocation == "dra":
        args["gpu_claim"] = True
    _engine_extras(args, mp, stack)
    if mp.multi_node is not None:
        args["multi_node"] = multi_node_args(mp)
    return args


def multi_node_args(mp: ModelPlan) -> MultiNodeArgs:
    """The LeaderWorkerSet layout of a multi-node model, with the catalogued EFA facts."""
    multi = mp.multi_node
    assert multi is not None, "multi_node_args needs a multi-node model"
    efa = efa_facts()
    return MultiNodeArgs(
        nodes=multi.nodes,
        executor=multi.executor,
        efa_interfaces=multi.efa_interfaces,
        efa_resource=efa.resource,
        efa_env=dict(efa.env),
        efa_capabilities=list(efa.capabilities),
    )


LWS_CHART = "lws"


def lws_chart(plan: StackPlan) -> tuple[str, str, dict[str, Any]] | None:
    """The LeaderWorkerSet controller the stack installs (OCI chart reference, version,
    values: the controller image pinned to the release, on the system pool), or None when
    no model spans nodes."""
    if not any(mp.multi_node is not None for mp in plan.models.values()):
        return None
    version = chart_version(LWS_CHART, plan.spec.lws.chart_version, "gpustrata:stack.lws")
    release = chart_release(LWS_CHART, version)
    facts = release.facts if release is not None else {}
    repository = str(facts.get("repository", "oci://registry.k8s.io/lws/charts"))
    # The chart's default image tag is `main` (values.yaml): pin the release's own.
    values = {"image": {"manager": {"tag": f"v{version.removeprefix('v')}"}}}
    return (
        f"{repository}/{LWS_CHART}",
        version,
        _on_system_pool(plan, LWS_CHART, version, values),
    )


def efa_pools(plan: StackPlan) -> dict[str, PoolPlan]:
    """The pools whose engines ask for EFA (``multi_node.efa_interfaces`` > 0), by name: the
    device plugin tolerates them and, in create mode, their node groups attach the
    interfaces (``GpuNodePoolArgs.efa_interfaces``)."""
    return {
        mp.pool.name: mp.pool
        for mp in plan.models.values()
        if mp.multi_node is not None and mp.multi_node.efa_interfaces > 0
    }


def efa_device_plugin_chart(plan: StackPlan) -> tuple[str, str, str, str, dict[str, Any]] | None:
    """The EFA device plugin the stack installs (chart, version, repository, namespace,
    values: tolerating the taints of the pools whose engines ask for EFA, so its DaemonSet
    runs there and advertises ``vpc.amazonaws.com/efa``), or None when no Pod asks."""
    pools = efa_pools(plan)
    if not pools:
        return None
    efa = efa_facts()
    tolerations = [_toleration(t) for p in pools.values() for t in pool_tolerations(p)]
    unique = list({tuple(sorted(t.items())): t for t in tolerations}.values())
    return (
        efa.device_plugin_chart,
        efa.device_plugin_version,
        efa.device_plugin_repository,
        efa.device_plugin_namespace,
        {"tolerations": unique},
    )


def _toleration(t: TolerationArgs) -> dict[str, str]:
    """A Pod-spec toleration from :class:`TolerationArgs`."""
    out = {"key": t["key"], "operator": t["operator"], "effect": t["effect"]}
    if t["operator"] == "Equal":
        out["value"] = t["value"]
    return out


def ray_llm_service_args(mp: ModelPlan, stack: StackSpec) -> RayLlmServiceArgs:
    """Args of the RayLlmService component for a 'rayservice' model."""
    ray_version = stack.kuberay.ray_version
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
                "model_id": served_model_name(m),
                "model_source": served_model(m, RAY_CACHE_DIR),
                "engine_kwargs": kwargs,
                "min_replicas": mp.min_replicas,
                "max_replicas": mp.max_replicas,
                "target_ongoing_requests": m.autoscaling.target_ongoing_requests,
                "placement_strategy": ray.placement_strategy,
                "bundles": ray.bundles,
                "health_check_period_s": ray.health_check_period_s,
                "health_check_timeout_s": ray.health_check_timeout_s,
                "engine_start_timeout_s": ray.engine_start_timeout_s,
            }
        ],
        worker_groups=[
            {
                "group_name": f"{mp.pool.name}-workers",
                "replicas": ray.min_workers,
                "min_replicas": ray.min_workers,
                "max_replicas": ray.max_workers,
                "gpus": ray.gpus_per_worker,
                "cpu": mp.cpu,
                "memory": mp.memory,
                "shm_size": m.shm_size,
                "ephemeral_storage": weights_storage(mp)[0],
                "node_selector": pool_selector(mp.pool),
                "tolerations": pool_tolerations(mp.pool),
            }
        ],
        head_cpu=HEAD_CPU,
        head_memory=HEAD_MEMORY,
        probes=probe_args(mp),
        upgrade_strategy=ray.upgrade_strategy,
        weights=_weights(m),
    )
    if mp.pool.spec.gpu_allocation == "dra":
        args["worker_groups"][0]["gpu_claim"] = True
    if ray.accelerator_type:
        args["models"][0]["accelerator_type"] = ray.accelerator_type
    head = system_pool_placement(stack)
    if head:
        args["head_node_selector"] = head
    _engine_extras(args, mp, stack)
    return args


# The head runs GCS, the dashboard, the Serve controller and the autoscaler, no engine.
# 2 CPU / 8 GiB: it fits beside the controllers on a system node (m7i.xlarge: 4 vCPU,
# 16 GiB); KubeRay's samples give the head 1-2 CPU.
HEAD_CPU = "2"
HEAD_MEMORY = "8Gi"


def weights_storage(mp: ModelPlan) -> tuple[str, str]:
    """Ephemeral storage (and cache emptyDir size) of an engine Pod, and why: the planner's
    :func:`~gpustrata.planning.plan.engine_disk_gib`."""
    gib_, why = engine_disk_gib(mp.spec, mp.capacity, mp.capacity_unavailable)
    return f"{gib_}Gi", why


def operator_values(plan: StackPlan) -> dict[str, Any]:
    """GPU Operator chart values for the plan: its pools' taints tolerated once each."""
    tolerations = [t for p in plan.pools.values() for t in pool_tolerations(p)]
    unique = list({tuple(sorted(t.items())): t for t in tolerations}.values())
    spec = plan.spec
    monitor = spec.gpu_operator.service_monitor
    values = gpu_operator_values(
        spec.gpu_operator, unique, monitor if monitor is not None else spec.monitoring.enabled
    )
    if spec.dra.driver == "gpu-operator" and any(
        p.spec.gpu_allocation == "dra" for p in plan.pools.values()
    ):  # its own DRA stack: a GPUCluster instead of the ClusterPolicy (the loader checked)
        own_dra = gpu_cluster_values(spec.gpu_operator.pinned_chart_version)
        values = merge_helm_values(values, own_dra or {})
    return _on_system_pool(plan, "gpu-operator", spec.gpu_operator.pinned_chart_version, values)


def _on_system_pool(
    plan: StackPlan, chart: str, version: str, values: dict[str, Any]
) -> dict[str, Any]:
    """*values* with the chart's controllers on the system pool (create mode)."""
    if system_pool_placement(plan.spec) is None:
        return values
    return system_values(chart, version, values)


def kuberay_operator_values(plan: StackPlan) -> dict[str, Any]:
    """kuberay-operator chart values: the pinned image, the operator on the system pool."""
    version = plan.spec.kuberay.chart_version
    return _on_system_pool(plan, "kuberay-operator", version, kuberay_values(version))


def operator_object(plan: StackPlan) -> dict[str, Any] | None:
    """The GpuOperator description the GpuOperator component registers (None: not installed)."""
    operator = plan.spec.gpu_operator
    if not operator.enabled:
        return None
    return gpu_operator_description(
        namespace=operator.namespace,
        chart_version=operator.pinned_chart_version,
        values=operator_values(plan),
        declared_overrides=list(operator.declared_overrides),
    )


def dra_driver_args(plan: StackPlan) -> tuple[list[str], dict[str, Any]] | None:
    """The DRA pools and the DRA driver chart's values (None: no pool uses DRA)."""
    pools = [p for p in plan.pools.values() if p.spec.gpu_allocation == "dra"]
    if not pools or plan.spec.dra.driver not in DRA_CHART_WAYS:
        return None  # no DRA pool, or the GPU Operator installs the driver itself
    tolerations = [t for p in pools for t in pool_tolerations(p)]
    unique = list({tuple(sorted(t.items())): t for t in tolerations}.values())
    names = [p.name for p in pools]
    operator = plan.spec.gpu_operator
    driver = operator.enabled and operator.driver_enabled
    values = dra_driver_values(names, unique, operator_driver=driver)
    release = dra_driver_release(plan.spec.dra.driver)
    return names, _on_system_pool(plan, release.chart, release.version, values)


DRA_DRIVER_NAMESPACE = "nvidia-dra-driver-gpu"
"""Namespace of the DRA driver (its chart refuses ``default``: templates/validation.yaml)."""


def dra_driver_object(plan: StackPlan) -> dict[str, Any] | None:
    """The DRA driver's Helm release as the rules read it (the shape a Pulumi Release takes
    in :func:`gpustrata_policies.objects_from_pulumi`); None when no pool uses DRA."""
    dra = dra_driver_args(plan)
    if dra is None:
        return None
    release = dra_driver_release(plan.spec.dra.driver)
    return helm_release_object(
        release.chart_ref, release.version, release.repository, DRA_DRIVER_NAMESPACE, dra[1]
    )


def node_image_driver(stack: StackSpec) -> str | None:
    """The driver preinstalled in the pools' node image, as the stack states it
    (``gpu_operator.driver_version`` when the operator does not install the driver)."""
    operator = stack.gpu_operator
    return operator.driver_version if not operator.driver_enabled else None


def pool_object(pool: PoolPlan, stack: StackSpec | None = None) -> dict[str, Any]:
    """The GpuNodePool description of a planned pool (*stack* adds the cluster's Kubernetes
    version, the node image and its driver, as the GpuNodePool component registers them)."""
    spec = pool.spec
    create = stack is not None and stack.cluster.mode == "create"
    return pool_description(
        name=pool.name,
        instance_type=pool.instance.name,
        gpu_product=pool.gfd_product,
        gpu_count=pool.instance.gpu_count,
        vcpu=pool.instance.vcpu,
        memory_mib=pool.instance.memory_mib,
        labels=pool.labels,
        taints=[t.model_dump() for t in spec.taints],
        kubelet=pool_kubelet(pool),
        min_size=spec.min_size,
        max_size=spec.max_size,
        kubernetes_version=stack.cluster.kubernetes_version if stack else None,
        ami_type=pool.ami_type if create else None,
        driver_version=node_image_driver(stack) if stack else None,
        disk_size_gib=spec.disk_size_gib if create else None,
        provisioner="karpenter" if spec.provisioner == "karpenter" else None,
    )


def pool_kubelet(pool: PoolPlan) -> dict[str, Any]:
    """The planner's kubelet settings of *pool* (user data, EC2NodeClass, description)."""
    return kubelet_config(
        max_pods=pool.max_pods,
        system_reserved=pool.system_reserved,
        kube_reserved=pool.kube_reserved,
        eviction_hard=pool.eviction_hard,
    )


def node_class_object(pool: PoolPlan, stack: StackSpec, subnets: Any = None) -> dict[str, Any]:
    """The EC2NodeClass of a Karpenter pool. *subnets*: subnetSelectorTerms (an Output in a
    Pulumi program); default: the stack's subnet ids, else the discovery tag."""
    cluster = stack.cluster
    if subnets is None and cluster.subnet_ids:
        subnets = [{"id": i} for i in cluster.subnet_ids]
    return karpenter.node_class_object(
        name=pool.name,
        ami_alias=_karpenter_spec(pool).ami_alias,
        instance_profile=karpenter.instance_profile_name(cluster.name),
        cluster_name=cluster.name,
        subnet_ids=subnets,
        disk_size_gib=pool.spec.disk_size_gib,
        kubelet=pool_kubelet(pool),
    )


def node_pool_object(pool: PoolPlan) -> dict[str, Any]:
    """The NodePool of a Karpenter pool (GPU limit: the pool's GPUs at max_size)."""
    spec = pool.spec
    return karpenter.node_pool_object(
        name=pool.name,
        instance_types=list(pool.instance_types),
        arch=pool.instance.arch,
        capacity_type=spec.capacity_type,
        labels=pool.labels,
        taints=[t.model_dump() for t in spec.taints],
        gpu_limit=pool.max_gpus,
        consolidate_after=_karpenter_spec(pool).consolidate_after,
    )


def karpenter_objects(plan: StackPlan) -> list[dict[str, Any]]:
    """EC2NodeClass and NodePool of every Karpenter pool, in pool order."""
    out: list[dict[str, Any]] = []
    for pool in plan.pools.values():
        if pool.spec.provisioner == "karpenter":
            out += [node_class_object(pool, plan.spec), node_pool_object(pool)]
    return out


def karpenter_values(plan: StackPlan) -> dict[str, Any]:
    """Chart values of the Karpenter controller: it runs on the managed pools' nodes."""
    assert plan.karpenter is not None, "karpenter_values needs a pool with provisioner karpenter"
    # On the untainted system pool: no GPU taint to tolerate, and no spot GPU node whose
    # interruption would take the controller that replaces it.
    values = karpenter.controller_values(
        cluster_name=plan.spec.cluster.name,
        interruption_queue=karpenter.interruption_queue_name(plan.spec.cluster.name),
        replicas=plan.karpenter.replicas,
        tolerations=[],
    )
    release = plan.karpenter.release
    return _on_system_pool(plan, "karpenter", release.version, values)


def _karpenter_spec(pool: PoolPlan) -> KarpenterPoolSpec:
    return pool.spec.karpenter or KarpenterPoolSpec()


def workload_objects(plan: StackPlan) -> list[dict[str, Any]]:
    """Every Kubernetes workload object the stack deploys, in registration order."""
    objects: list[dict[str, Any]] = []
    for mp in plan.models.values():
        if mp.spec.runtime == "rayservice":
            args = ray_llm_service_args(mp, plan.spec)
            objects.extend([*ray_claim_templates(args), ray_service_object(args)])
        else:
            objects.extend(vllm_deployment_objects(vllm_deployment_args(mp, plan.spec)))
    return objects


def weights_identity_objects(plan: StackPlan) -> list[dict[str, Any]]:
    """For each model the stack binds to an object-store identity (s3 weights, create
    mode, no ServiceAccount of the stack's own): its ServiceAccount and the EKS Pod
    Identity association as the rules read it (K019); the IAM role is AWS-side."""
    spec = plan.spec
    out: list[dict[str, Any]] = []
    for mp in plan.models.values():
        account = weights_service_account(mp.spec, spec)
        if account is None or mp.spec.weights.service_account:
            continue
        namespace = mp.spec.namespace
        out.append(weights_service_account_object(account, namespace))
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": "PodIdentityAssociation",
                "metadata": {"name": f"{mp.name}-weights"},
                "spec": {
                    "clusterName": spec.cluster.name,
                    "namespace": namespace,
                    "serviceAccount": account,
                },
            }
        )
    return out


def weights_service_account_object(name: str, namespace: str) -> dict[str, Any]:
    """The ServiceAccount engines that read object-store weights run under."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
    }


def helm_release_object(
    chart: str, version: str, repository: str, namespace: str, values: dict[str, Any]
) -> dict[str, Any]:
    """A Helm release as the rules read it (the shape a Pulumi Release takes in
    :func:`gpustrata_policies.objects_from_pulumi`)."""
    return {
        "apiVersion": "helm.sh/v3",
        "kind": "HelmRelease",
        "metadata": {"name": chart.rsplit("/", 1)[-1], "namespace": namespace},
        "spec": {
            "chart": chart,
            "version": version,
            "repositoryOpts": {"repo": repository},
            "namespace": namespace,
            "values": values,
        },
    }


def system_chart_objects(plan: StackPlan) -> list[dict[str, Any]]:
    """The charts the stack installs besides the GPU Operator and the DRA driver (KubeRay,
    Karpenter, kube-prometheus-stack, KEDA), as HelmRelease objects: what `render` prints
    so that `check` sees who installs the CRDs the workloads use (K018)."""
    from gpustrata.render.foundation import (
        KEDA_CHART,
        KEDA_REPO,
        MONITORING_CHART,
        MONITORING_REPO,
        chart_version,
        monitoring_values,
    )
    from gpustrata.render.operators import KUBERAY_REPO

    spec = plan.spec
    out: list[dict[str, Any]] = []
    if spec.kuberay.enabled:
        out.append(
            helm_release_object(
                "kuberay-operator",
                spec.kuberay.chart_version,
                KUBERAY_REPO,
                spec.kuberay.namespace,
                kuberay_operator_values(plan),
            )
        )
    if plan.karpenter is not None:
        release = plan.karpenter.release
        out.append(
            helm_release_object(
                release.chart,
                release.version,
                release.chart,
                spec.karpenter.namespace,
                karpenter_values(plan),
            )
        )
    if spec.monitoring.mode == "install":
        version = chart_version(MONITORING_CHART, spec.monitoring.chart_version, "monitoring")
        out.append(
            helm_release_object(
                MONITORING_CHART,
                version,
                MONITORING_REPO,
                spec.monitoring.namespace,
                _on_system_pool(plan, MONITORING_CHART, version, monitoring_values()),
            )
        )
    lws = lws_chart(plan)
    if lws is not None:
        reference, version, values = lws
        out.append(
            helm_release_object(
                reference, version, reference.rsplit("/", 1)[0], spec.lws.namespace, values
            )
        )
    efa = efa_device_plugin_chart(plan)
    if efa is not None:
        chart, version, repository, namespace, values = efa
        out.append(helm_release_object(chart, version, repository, namespace, values))
    if spec.keda.enabled:
        version = chart_version(KEDA_CHART, spec.keda.chart_version, "keda")
        out.append(
            helm_release_object(
                KEDA_CHART,
                version,
                KEDA_REPO,
                spec.keda.namespace,
                _on_system_pool(plan, KEDA_CHART, version, {}),
            )
        )
    return out
