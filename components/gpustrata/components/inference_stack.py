"""InferenceStack: one StackSpec -> cluster, GPU pools, operators and served models."""

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from gpustrata.catalog.dra import dra_driver_release
from gpustrata.components._inputs import StackInputError
from gpustrata.components.cluster import EksCluster, EksClusterArgs
from gpustrata.components.identity import WeightsIdentity
from gpustrata.components.karpenter import Karpenter, KarpenterNodePool, subnet_terms
from gpustrata.components.nodepool import GpuNodePool, GpuNodePoolArgs, pool_plan_args
from gpustrata.components.operators import DraDriver, GpuOperator, KubeRayOperator, SystemChart
from gpustrata.components.routing import InferenceGateway, InferenceRoute
from gpustrata.components.serving import RayLlmService, VllmDeployment, register_object
from gpustrata.components.stack_args import StackArgs
from gpustrata.core.errors import Problem, StackError
from gpustrata.planning.build import build_plan
from gpustrata.planning.plan_types import ModelPlan, PoolPlan, StackPlan
from gpustrata.render import karpenter as karpenter_names
from gpustrata.render import routing
from gpustrata.render.foundation import (
    KEDA_CHART,
    KEDA_REPO,
    MONITORING_CHART,
    MONITORING_REPO,
    addon_versions,
    cache_claim,
    cache_storage_class,
    chart_version,
    monitoring_values,
    needs_ebs_csi,
    system_values,
)
from gpustrata.render.from_plan import (
    DRA_DRIVER_NAMESPACE,
    dra_driver_args,
    efa_device_plugin_chart,
    efa_pools,
    karpenter_values,
    kuberay_operator_values,
    lws_chart,
    node_class_object,
    node_image_driver,
    node_pool_object,
    operator_values,
    ray_llm_service_args,
    service_monitor_on,
    vllm_deployment_args,
    weights_service_account,
)
from gpustrata.render.operators import device_plugin_sharing_config
from gpustrata.render.workloads import MANAGED_BY
from gpustrata.spec.stack import StackSpec

if TYPE_CHECKING:  # a document loaded from a stack file (YAML) is validated the same way
    _StackDocument = StackArgs | Mapping[str, Any]
else:  # what Pulumi's analyzer reads: the typed stack, so the schema has its types
    _StackDocument = StackArgs


class InferenceStackArgs(TypedDict):
    """Inputs of :class:`InferenceStack`."""

    stack: _StackDocument
    """The stack document (what `gpustrata:stack` holds in a stack file), validated by
    the spec at construction (``gpustrata schema`` prints its JSON Schema)."""
    source: NotRequired[str]
    """Where the stack came from, for error messages (e.g. stacks/Pulumi.prod.yaml)."""
    hf_token_value: NotRequired[pulumi.Input[str]]
    """The Hugging Face token as a Pulumi secret (config ``gpustrata:hfToken``, set with
    ``pulumi config set --secret``). gpustrata then creates the Secrets the models'
    ``hf_token`` references name; without it those Secrets must already exist."""


class InferenceStack(pulumi.ComponentResource):
    """All three layers of an LLM inference stack from one typed spec.

    Registers the EKS cluster (create mode) or a provider for an existing cluster, one
    GpuNodePool per pool, the GPU Operator, the KubeRay operator when a model needs it,
    and one VllmDeployment or RayLlmService per model, in dependency order.
    """

    _secret_outputs = ("kubeconfig",)  # marked secret in the component schema

    kubeconfig: pulumi.Output[str]
    """Kubeconfig of the cluster, a secret ('' for an existing cluster reached by
    kubeconfig)."""
    provider: k8s.Provider
    """The Kubernetes provider every Kubernetes resource of the stack uses: pass it to
    your own resources (``providers={"kubernetes": stack.provider}``)."""
    cluster_name: pulumi.Output[str]
    """Name of the cluster (the EKS cluster's name in create mode)."""
    service_names: pulumi.Output[dict[str, str]]
    """Model name -> the Kubernetes Service clients call (``<name>-serve-svc`` for Ray)."""
    endpoints: pulumi.Output[dict[str, str]]
    """Model name -> in-cluster OpenAI API base URL (``http://svc.ns.svc.cluster.local:8000/v1``)."""
    node_group_names: pulumi.Output[dict[str, str]]
    """Pool name -> EKS node group name ('' for a pool that is only described)."""

    def __init__(
        self, name: str, args: InferenceStackArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        # Validate and plan before registering anything: a bad stack registers nothing.
        try:
            self._plan = build_plan(_document(args["stack"]), args.get("source"))
            token = args.get("hf_token_value")
            token_secrets = _token_secrets(self._plan.spec, token is not None)
            versions = _chart_versions(self._plan.spec)
        except StackError as exc:
            raise StackInputError(exc) from None
        super().__init__("gpustrata:index:InferenceStack", name, {}, opts)
        spec = self.plan.spec
        cluster_spec = spec.cluster
        eks: EksCluster | None = None
        if cluster_spec.mode == "create":
            eks = EksCluster(
                f"{name}-cluster",
                _cluster_args(spec, pulumi.Config("aws").get("profile")),
                opts=pulumi.ResourceOptions(parent=self),
            )
            subnets: pulumi.Input[Sequence[str]] = eks.subnet_ids
            provider = eks.provider(f"{name}-k8s")
            self.kubeconfig = pulumi.Output.secret(eks.kubeconfig)
            self.cluster_name = eks.cluster_name
        else:
            provider = k8s.Provider(
                f"{name}-k8s",
                # A path: the provider reads it when it configures (nothing read here).
                kubeconfig=_kubeconfig_path(cluster_spec.kubeconfig),
                context=cluster_spec.context,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.kubeconfig = pulumi.Output.secret("")
            self.cluster_name = pulumi.Output.from_input(cluster_spec.name)
        self.provider = provider

        k8s_opts = pulumi.ResourceOptions(parent=self, providers={"kubernetes": provider})
        # Controllers wait for the system nodes and the add-ons that make them usable:
        # a release's 15-minute wait must not start before its Pods can have a node.
        system: list[pulumi.Resource] = list(eks.ready) if eks is not None else []
        system_opts = pulumi.ResourceOptions.merge(
            k8s_opts, pulumi.ResourceOptions(depends_on=system)
        )
        crd_charts: dict[str, list[pulumi.Resource]] = {}  # what a model's CRs wait for

        def system_chart(
            key: str,
            suffix: str,
            chart: str,
            repository: str,
            namespace: str,
            version: str,
            values: dict[str, Any],
        ) -> None:
            # A pinned chart on the system pool that a model's CRs of *key* wait for.
            crd_charts[key] = [
                SystemChart(
                    f"{name}-{suffix}",
                    {
                        "chart": chart,
                        "repository": repository,
                        "namespace": namespace,
                        "chart_version": version,
                        "values": values,
                    },
                    system_opts,
                )
            ]

        if spec.monitoring.mode == "install":
            version = versions["monitoring"]
            values = monitoring_values()
            if eks is not None:
                values = system_values(MONITORING_CHART, version, values)
            ns = spec.monitoring.namespace
            system_chart(
                "monitoring", "monitoring", MONITORING_CHART, MONITORING_REPO, ns, version, values
            )
        if spec.keda.enabled:
            version = versions["keda"]
            values = system_values(KEDA_CHART, version, {}) if eks is not None else {}
            system_chart(
                "keda", "keda", KEDA_CHART, KEDA_REPO, spec.keda.namespace, version, values
            )
        lws = lws_chart(self.plan)
        if lws is not None:  # a model spans nodes: the LeaderWorkerSet controller and CRD
            chart, version, values = lws
            repository = chart.rsplit("/", 1)[0]
            system_chart("lws", "lws", chart, repository, spec.lws.namespace, version, values)
        efa = efa_device_plugin_chart(self.plan)
        if efa is not None:  # engines ask for EFA: the plugin that advertises it
            chart, version, repository, ns, values = efa
            system_chart("efa", "efa-device-plugin", chart, repository, ns, version, values)
        pools: list[pulumi.Resource] = []
        pool_of: dict[str, GpuNodePool] = {}
        nodes_of: dict[str, pulumi.Resource] = {}  # what a model's Pods wait for
        controller = (
            self._karpenter(name, eks, system_opts)
            if eks is not None and self.plan.karpenter is not None
            else None
        )
        efa_pools_of = efa_pools(self.plan)
        for pool in self.plan.pools.values():
            pool_args = _pool_args(pool, spec, create=eks is not None)
            if eks is not None:
                pool_args["cluster_name"] = eks.cluster_name
                pool_args["node_role_arn"] = eks.node_role_arn
                pool_args["subnet_ids"] = eks.subnets_offering(pool.instance.name)
                if pool.name in efa_pools_of and pool.spec.provisioner != "karpenter":
                    # Engines ask for EFA: the node group attaches the interfaces.
                    pool_args["efa_interfaces"] = (
                        efa_pools_of[pool.name].instance.efa_interfaces or 0
                    )
                    pool_args["vpc_id"] = eks.vpc_id
                    pool_args["cluster_security_group_id"] = eks.cluster_security_group_id
            pool_of[pool.name] = GpuNodePool(
                f"{name}-{pool.name}", pool_args, pulumi.ResourceOptions(parent=self)
            )
            nodes_of[pool.name] = pool_of[pool.name]
            if controller is not None and eks is not None and pool.spec.provisioner == "karpenter":
                nodes_of[pool.name] = KarpenterNodePool(
                    f"{name}-{pool.name}-karpenter",
                    {
                        "node_class": node_class_object(pool, spec, subnet_terms(subnets)),
                        "node_pool": node_pool_object(pool),
                    },
                    pulumi.ResourceOptions.merge(
                        k8s_opts,
                        # After the whole controller (its release and the instance profile
                        # the EC2NodeClass names); destroyed before it, so the controller
                        # still terminates the NodeClaims' instances (the NodePool's
                        # finalizer).
                        pulumi.ResourceOptions(depends_on=[controller, *system]),
                    ),
                )
            pools.append(nodes_of[pool.name])
        gpu_ready: list[pulumi.Resource] = []
        if spec.gpu_operator.enabled:
            gpu_ready.append(
                GpuOperator(
                    f"{name}-gpu-operator",
                    {
                        "namespace": spec.gpu_operator.namespace,
                        "chart_version": spec.gpu_operator.pinned_chart_version,
                        "values": operator_values(self.plan),
                        "device_plugin_config": device_plugin_sharing_config(spec.gpu_operator)
                        or {},
                        "declared_overrides": list(spec.gpu_operator.declared_overrides),
                    },
                    pulumi.ResourceOptions.merge(
                        k8s_opts,
                        # Its DCGM ServiceMonitor needs the monitoring CRDs first.
                        pulumi.ResourceOptions(
                            depends_on=[*system, *pools, *crd_charts.get("monitoring", [])]
                        ),
                    ),
                )
            )
        dra = dra_driver_args(self.plan)
        if dra is not None:  # DRA pools: their GPUs are the DRA driver's to advertise
            gpu_ready.append(
                DraDriver(
                    f"{name}-dra-driver",
                    {
                        "namespace": DRA_DRIVER_NAMESPACE,
                        "chart_version": dra_driver_release(spec.dra.driver).version,
                        "values": dra[1],
                    },
                    pulumi.ResourceOptions.merge(
                        k8s_opts,
                        pulumi.ResourceOptions(depends_on=[*system, *pools, *gpu_ready]),
                    ),
                )
            )
        kuberay: list[pulumi.Resource] = []
        if spec.kuberay.enabled:
            kuberay.append(
                KubeRayOperator(
                    f"{name}-kuberay",
                    {
                        "namespace": spec.kuberay.namespace,
                        "chart_version": spec.kuberay.chart_version,
                        "values": kuberay_operator_values(self.plan),
                    },
                    system_opts,
                )
            )
        namespaces: dict[str, pulumi.Resource] = {}
        for model in spec.models:
            if model.namespace not in namespaces:
                # Retained: the namespace also holds what gpustrata does not own (the
                # hf_token Secret, model-cache PVCs); deleting it would delete them too.
                namespaces[model.namespace] = k8s.core.v1.Namespace(
                    f"{name}-ns-{model.namespace}",
                    metadata={"name": model.namespace},
                    opts=pulumi.ResourceOptions.merge(
                        k8s_opts, pulumi.ResourceOptions(retain_on_delete=True)
                    ),
                )
        gateways = self._gateways(name, k8s_opts, namespaces, system)
        volumes = self._cache_volumes(name, k8s_opts, namespaces, system)
        identities: dict[str, pulumi.Resource] = {}
        for mp in self.plan.models.values():
            account = weights_service_account(mp.spec, spec)
            uri = mp.spec.weights.uri
            if eks is None or account is None or mp.spec.weights.service_account or not uri:
                continue
            identities[mp.name] = WeightsIdentity(
                f"{name}-{mp.name}-weights",
                {
                    "cluster_name": eks.cluster_name,
                    "namespace": mp.spec.namespace,
                    "service_account": account,
                    "uri": uri,
                },
                pulumi.ResourceOptions.merge(
                    k8s_opts,
                    pulumi.ResourceOptions(depends_on=[namespaces[mp.spec.namespace], *system]),
                ),
            )
        created: dict[tuple[str, str], pulumi.Resource] = {}
        for (namespace, secret_name), keys in token_secrets.items():
            assert token is not None  # token_secrets is empty without a token
            # The token stays a Pulumi secret: encrypted in state, never in plan output.
            value: pulumi.Output[str] = pulumi.Output.secret(token)
            created[(namespace, secret_name)] = k8s.core.v1.Secret(
                # "." cannot occur in a namespace (a DNS label): no two pairs share a name.
                f"{name}-secret-{namespace}.{secret_name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=secret_name, namespace=namespace, labels=MANAGED_BY
                ),
                type="Opaque",
                string_data=dict.fromkeys(keys, value),
                opts=pulumi.ResourceOptions.merge(
                    k8s_opts, pulumi.ResourceOptions(depends_on=[namespaces[namespace]])
                ),
            )
        services: dict[str, pulumi.Output[str]] = {}
        endpoints: dict[str, pulumi.Output[str]] = {}
        for mp in self.plan.models.values():
            # GPU nodes and a ready GPU Operator (its release awaits its pods) come first.
            deps = [
                nodes_of[mp.pool.name],
                *gpu_ready,
                namespaces[mp.spec.namespace],
                *system,
                *([identities[mp.name]] if mp.name in identities else []),
                *([volumes[mp.name]] if mp.name in volumes else []),
                *(crd_charts.get("monitoring", []) if service_monitor_on(mp.spec, spec) else []),
                *(crd_charts.get("keda", []) if mp.spec.autoscaling.kind == "keda" else []),
                # The LWS webhooks (failurePolicy Fail) admit nothing before the controller.
                *(crd_charts.get("lws", []) if mp.multi_node is not None else []),
                *(
                    crd_charts.get("efa", [])
                    if mp.multi_node is not None and mp.multi_node.efa_interfaces
                    else []
                ),
            ]
            ref = mp.spec.hf_token
            if ref is not None and (mp.spec.namespace, ref.name) in created:
                deps.append(created[(mp.spec.namespace, ref.name)])
            workload: RayLlmService | VllmDeployment
            if mp.spec.runtime == "rayservice":
                workload = RayLlmService(
                    f"{name}-{mp.name}",
                    ray_llm_service_args(mp, spec),
                    pulumi.ResourceOptions.merge(
                        k8s_opts, pulumi.ResourceOptions(depends_on=[*deps, *kuberay])
                    ),
                )
            else:
                workload = VllmDeployment(
                    f"{name}-{mp.name}",
                    vllm_deployment_args(mp, spec),
                    pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=deps)),
                )
            services[mp.name] = (
                pulumi.Output.concat(workload.service_name, "-serve-svc")
                if isinstance(workload, RayLlmService)
                else workload.service_name
            )
            endpoints[mp.name] = workload.endpoint
            if mp.spec.namespace in gateways:  # routed through the inference gateway
                endpoints[mp.name] = self._route(name, mp, workload, gateways, k8s_opts)
        self.service_names = _output_map(services)
        self.endpoints = _output_map(endpoints)
        self.node_group_names = _output_map(
            {p: pool.node_group_name for p, pool in pool_of.items()}
        )
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "clusterName": self.cluster_name,
                "serviceNames": self.service_names,
                "endpoints": self.endpoints,
                "nodeGroupNames": self.node_group_names,
            }
        )

    @property
    def plan(self) -> StackPlan:
        """The resolved plan (every derived value with its provenance)."""
        return self._plan

    # ----------------------------------------------------------------- routing

    def _gateways(
        self,
        name: str,
        k8s_opts: pulumi.ResourceOptions,
        namespaces: Mapping[str, pulumi.Resource],
        system: list[pulumi.Resource],
    ) -> dict[str, list[pulumi.Resource]]:
        """Namespace -> what a model's InferenceRoute there waits for: the gateway's CRDs
        and controller (once, on the system pool) and the namespace's Gateway."""
        plan = self.plan
        spec = plan.spec.inference_gateway
        if not routing.gateway_namespaces(plan):
            return {}
        after = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=system))
        ready: list[pulumi.Resource] = []
        if spec.install:
            release = routing.release()
            ready = InferenceGateway(
                f"{name}-inference-gateway",
                {
                    "namespace": spec.namespace,
                    "crds": routing.crd_objects(),
                    "repository": release.implementation_repository,
                    "chart_version": release.implementation_version,
                    "crd_chart": release.crd_chart,
                    "controller_chart": release.controller_chart,
                    "controller_values": routing.controller_values(plan),
                },
                after,
            ).ready
        out: dict[str, list[pulumi.Resource]] = {}
        for obj in routing.gateway_objects(plan):
            ns = obj["metadata"]["namespace"]
            before = out.get(ns, [])  # a Gateway's overlay ConfigMap comes first
            suffix = "" if obj["kind"] == "Gateway" else f"-{obj['kind'].lower()}"
            depends = [*ready, namespaces[ns], *system, *before]
            out[ns] = [
                *before,
                register_object(
                    f"{name}-gateway-{ns}{suffix}",
                    obj,
                    pulumi.ResourceOptions.merge(
                        k8s_opts, pulumi.ResourceOptions(depends_on=depends)
                    ),
                ),
            ]
        return {ns: [*ready, *objs] for ns, objs in out.items()}

    def _route(
        self,
        name: str,
        mp: ModelPlan,
        workload: pulumi.Resource,
        gateways: Mapping[str, list[pulumi.Resource]],
        k8s_opts: pulumi.ResourceOptions,
    ) -> pulumi.Output[str]:
        """The model's InferencePool, endpoint picker and HTTPRoute, after its engines and
        its namespace's Gateway; returns the Gateway's in-cluster URL."""
        plan = self.plan
        spec = plan.spec.inference_gateway
        release = routing.release()
        ns = mp.spec.namespace
        InferenceRoute(
            f"{name}-{mp.name}-route",
            {
                "namespace": ns,
                "chart": release.chart,
                "chart_version": release.extension_version,
                "repository": release.repository,
                "values": routing.pool_values(mp, plan),
                "pool": routing.inference_pool_object(mp),
                "route": routing.http_route_object(mp, spec.gateway_name),
            },
            pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=[workload, *gateways[ns]])
            ),
        )
        return pulumi.Output.from_input(routing.gateway_endpoint(spec.gateway_name, ns))

    def _cache_volumes(
        self,
        name: str,
        k8s_opts: pulumi.ResourceOptions,
        namespaces: Mapping[str, pulumi.Resource],
        system: list[pulumi.Resource],
    ) -> dict[str, pulumi.Resource]:
        """Model name -> the model-cache claim the stack creates (pvc source with
        cache_size_gib, create mode), after the EBS CSI add-on (in *system*) and a gp3
        StorageClass; destroyed before them, so the CSI controller deletes the volume."""
        spec = self.plan.spec
        if not needs_ebs_csi(spec):
            return {}
        after = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=system))
        storage = register_object(f"{name}-cache-storage-class", cache_storage_class(), after)
        out: dict[str, pulumi.Resource] = {}
        for model in spec.models:
            weights = model.weights
            if weights.source != "pvc" or not weights.cache_size_gib or not weights.pvc_name:
                continue
            out[model.name] = register_object(
                f"{name}-{model.name}-cache",
                cache_claim(weights.pvc_name, model.namespace, weights.cache_size_gib),
                pulumi.ResourceOptions.merge(
                    k8s_opts,
                    pulumi.ResourceOptions(
                        depends_on=[storage, namespaces[model.namespace], *system]
                    ),
                ),
            )
        return out

    def _karpenter(self, name: str, eks: EksCluster, k8s_opts: pulumi.ResourceOptions) -> Karpenter:
        """The Karpenter controller and its AWS side, for the plan's Karpenter pools."""
        plan, spec = self.plan, self.plan.spec
        assert plan.karpenter is not None
        release = plan.karpenter.release
        cluster = spec.cluster.name
        return Karpenter(
            f"{name}-karpenter",
            {
                "cluster_name": eks.cluster_name,
                "cluster_arn": eks.cluster_arn,
                "region": spec.cluster.region,
                "node_role_name": eks.node_role_name,
                "node_role_arn": eks.node_role_arn,
                "instance_profile_name": karpenter_names.instance_profile_name(cluster),
                "queue_name": karpenter_names.interruption_queue_name(cluster),
                "namespace": spec.karpenter.namespace,
                "service_account": karpenter_names.SERVICE_ACCOUNT,
                "chart": release.chart,
                "chart_version": release.version,
                "values": karpenter_values(plan),
                # EksCluster installs the agent add-on with the cluster.
                "install_pod_identity_agent": False,
            },
            k8s_opts,
        )


def _pool_args(pool: PoolPlan, stack: StackSpec, *, create: bool) -> GpuNodePoolArgs:
    args = pool_plan_args(pool, create=create, kubernetes_version=stack.cluster.kubernetes_version)
    driver = node_image_driver(stack)
    if driver:
        args["driver_version"] = driver
    return args


def _token_secrets(spec: StackSpec, token_set: bool) -> dict[tuple[str, str], list[str]]:
    """(namespace, Secret name) -> keys of the Secrets the stack creates from
    ``gpustrata:hfToken``: every model's ``hf_token`` reference but those that exist
    outside the stack (``existing: true``). Without the token such a reference is an
    error: the Pod would wait forever in CreateContainerConfigError."""
    out: dict[tuple[str, str], list[str]] = {}
    problems: list[Problem] = []
    for i, model in enumerate(spec.models):
        ref = model.hf_token
        if ref is None or ref.existing:
            continue
        if not token_set:
            problems.append(
                Problem(
                    f"gpustrata:stack.models[{i}].hf_token",
                    f"names Secret '{ref.name}', which the stack creates from the Pulumi "
                    "secret gpustrata:hfToken, and that is not set; run `pulumi config set "
                    "--secret gpustrata:hfToken hf_...`, or set hf_token.existing: true and "
                    f"create the Secret yourself (kubectl -n {model.namespace} create secret "
                    f"generic {ref.name} --from-literal={ref.key}=...)",
                )
            )
            continue
        keys = out.setdefault((model.namespace, ref.name), [])
        if ref.key not in keys:
            keys.append(ref.key)
    if problems:
        raise StackError(problems)
    if token_set and not out:
        raise StackError(
            [
                Problem(
                    "gpustrata:hfToken",
                    "is set but no model names a Secret in hf_token for the stack to create; "
                    "add hf_token: {name: hf-token} to the models that need the token, or "
                    "remove the config",
                )
            ]
        )
    return out


def _chart_versions(spec: StackSpec) -> dict[str, str]:
    """Pinned versions of the system charts the stack installs (monitoring, KEDA)."""
    out: dict[str, str] = {}
    try:
        if spec.monitoring.mode == "install":
            out["monitoring"] = chart_version(
                MONITORING_CHART,
                spec.monitoring.chart_version,
                "gpustrata:stack.monitoring.chart_version",
            )
        if spec.keda.enabled:
            out["keda"] = chart_version(
                KEDA_CHART, spec.keda.chart_version, "gpustrata:stack.keda.chart_version"
            )
    except ValueError as exc:
        path, _, message = str(exc).partition(": ")
        raise StackError([Problem(path, message)]) from None
    return out


def _cluster_args(spec: StackSpec, profile: str | None) -> EksClusterArgs:
    """:class:`EksCluster` inputs of a create-mode stack: the VPC (or the stack's
    subnets), the system pool and the pinned add-ons."""
    cluster = spec.cluster
    pool = cluster.system_pool
    args = EksClusterArgs(
        cluster_name=cluster.name,
        kubernetes_version=cluster.kubernetes_version,
        region=cluster.region,
        system_pool={
            "instance_type": pool.instance_type,
            "capacity_type": pool.capacity_type,
            "min_size": pool.min_size,
            "max_size": pool.max_size,
            "disk_size_gib": pool.disk_size_gib,
        },
        addons=addon_versions(cluster.kubernetes_version, csi=needs_ebs_csi(spec)),
    )
    if cluster.subnet_ids:
        args["subnet_ids"] = list(cluster.subnet_ids)
    else:
        net = cluster.network
        args["network"] = {
            "vpc_cidr": net.vpc_cidr,
            "availability_zones": net.availability_zones,
            "nat_gateways": net.nat_gateways,
        }
    if profile:
        args["profile"] = profile
    return args


def _document(value: Any) -> Any:
    """The stack as plain data: the component provider hands enum inputs over as the
    generated Enum members (``ClusterMode.CREATE``); the spec, strict, takes their values."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {k: _document(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_document(v) for v in value]
    return value


def _output_map(values: dict[str, pulumi.Output[str]]) -> pulumi.Output[dict[str, str]]:
    """One Output of a name -> Output mapping ({} when empty)."""
    if not values:
        return pulumi.Output.from_input({})
    return pulumi.Output.all(**values)


def _kubeconfig_path(path: str | None) -> str | None:
    """The kubeconfig file for the provider (``~`` expanded), or None for its default
    (``KUBECONFIG``, then ``~/.kube/config``)."""
    if not path:
        return None
    from pathlib import Path

    return str(Path(path).expanduser())
