"""The cluster side of the stack spec: the cluster and its network, GPU node pools
(managed node groups, Karpenter), the GPU Operator, KubeRay, monitoring, KEDA and the
add-ons a stack installs when its models need them (LeaderWorkerSet, a DRA driver)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from gpustrata.catalog.inputs import Taint, TaintEffect
from gpustrata.spec.fields import (
    EVICTION_SIGNALS,
    EVICTION_THRESHOLD,
    Name,
    Quantity,
    SpecModel,
    Version,
)

ClusterMode = Literal["create", "existing"]
CapacityType = Literal["ON_DEMAND", "SPOT"]
Provisioner = Literal["managed-node-group", "karpenter"]
MigStrategy = Literal["none", "single", "mixed"]
SharingStrategy = Literal["none", "time-slicing", "mps"]
TolerationOperator = Literal["Equal", "Exists"]
OperatorComponent = Literal["driver", "toolkit", "device_plugin", "dcgm_exporter"]
GpuAllocation = Literal["device-plugin", "dra"]
DraDriverWay = Literal["nvidia-chart", "kubernetes-sigs-chart", "gpu-operator"]
NatGateways = Literal["single", "per-az"]
MonitoringMode = Literal["none", "install", "existing"]


class NetworkSpec(SpecModel):
    """The VPC created for the cluster (create mode, no subnet_ids)."""

    vpc_cidr: str = Field(
        default="10.0.0.0/16",
        pattern=r"^[0-9]{1,3}(\.[0-9]{1,3}){3}/(1[6-9]|2[0-2])$",
        description="IPv4 CIDR of the VPC (/16 to /22); split into one public and one "
        "private subnet per availability zone.",
    )
    availability_zones: int = Field(
        default=2,
        ge=2,
        le=4,
        description="How many of the region's availability zones get subnets (EKS needs "
        "two). Node groups use the private subnets of the zones that offer their "
        "instance type.",
    )
    nat_gateways: NatGateways = Field(
        default="single",
        description="'single': one NAT gateway for every private subnet (cheaper; an AZ "
        "outage cuts egress); 'per-az': one per zone.",
    )

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        import ipaddress

        try:
            ipaddress.ip_network(value, strict=True)
        except ValueError as exc:
            raise ValueError(
                f"{value!r} is not a network address ({exc}); use e.g. 10.0.0.0/16"
            ) from None
        return value


class SystemPoolSpec(SpecModel):
    """The untainted node group for controllers and Ray heads."""

    instance_type: str = Field(
        default="m7i.xlarge",
        min_length=1,
        max_length=64,
        description="EC2 instance type. m7i.xlarge (4 vCPU, 16 GiB) holds a Ray head "
        "(2 CPU, 8 GiB) beside the controllers.",
    )
    capacity_type: CapacityType = Field(
        default="ON_DEMAND", description="ON_DEMAND: controllers should not be interrupted."
    )
    min_size: int = Field(
        default=2, ge=1, le=100, description="Minimum nodes (2: controllers survive a node)."
    )
    max_size: int = Field(default=3, ge=1, le=100, description="Maximum nodes.")
    disk_size_gib: int = Field(default=50, ge=20, le=1024, description="Root volume (GiB).")

    @model_validator(mode="after")
    def _bounds(self) -> SystemPoolSpec:
        if self.min_size > self.max_size:
            raise ValueError(
                f"min_size {self.min_size} is above max_size {self.max_size}; raise max_size"
            )
        return self


class ClusterSpec(SpecModel):
    """The Kubernetes cluster: an EKS cluster to create, or an existing one to reach."""

    name: Name = Field(description="Cluster name (the EKS cluster name in create mode).")
    mode: ClusterMode = Field(
        default="create",
        description="'create' provisions an EKS cluster; 'existing' targets a cluster reached "
        "through a kubeconfig and context (node pools are then described, not created).",
    )
    kubernetes_version: str = Field(
        pattern=r"^1\.[0-9]{2}$",
        examples=["1.33"],
        description="Kubernetes minor version, e.g. '1.33'. Rules check operator support "
        "against it.",
    )
    region: str = Field(
        default="us-west-2",
        examples=["us-west-2"],
        description="AWS region of the cluster and its node groups (create mode).",
    )
    subnet_ids: list[str] = Field(
        default_factory=list,
        description="Private subnets (with a route to a NAT gateway) for the cluster and "
        "node groups (create mode). Empty: the stack creates a VPC (see network).",
    )
    network: NetworkSpec = Field(
        default_factory=lambda: NetworkSpec(),
        description="The VPC the stack creates in create mode when subnet_ids is empty.",
    )
    system_pool: SystemPoolSpec = Field(
        default_factory=lambda: SystemPoolSpec(),
        description="The untainted node group that runs every controller (GPU Operator, "
        "NFD, KubeRay, Karpenter, KEDA, CoreDNS) and the Ray heads (create mode). GPU pools "
        "carry a GPU taint, so without it those Pods have no node.",
    )
    kubeconfig: str | None = Field(
        default=None,
        description="Path to a kubeconfig file (existing mode). Empty: the ambient "
        "KUBECONFIG of the Pulumi run.",
    )
    context: str | None = Field(
        default=None, description="kubeconfig context to use (existing mode)."
    )

    @model_validator(mode="after")
    def _mode_fields(self) -> ClusterSpec:
        if self.mode == "create" and (self.kubeconfig or self.context):
            raise ValueError(
                "kubeconfig/context are only used with mode 'existing'; set mode: existing "
                "or remove them"
            )
        return self


def _default_gpu_taints() -> list[Taint]:
    return [Taint(key="nvidia.com/gpu", value="true", effect="NoSchedule")]


class KubeletSpec(SpecModel):
    """Kubelet reservations on the pool's nodes (rendered into nodeadm NodeConfig)."""

    system_reserved: dict[str, Quantity] = Field(
        default_factory=dict,
        description="systemReserved (keys: cpu, memory, ephemeral-storage, pid). Empty: "
        "gpustrata's default, shown with its source by `plan`.",
    )
    kube_reserved: dict[str, Quantity] = Field(
        default_factory=dict,
        description="kubeReserved (keys: cpu, memory, ephemeral-storage, pid). Empty: sized "
        "from the instance's vCPU and max pods the way the EKS AMI computes it.",
    )
    eviction_hard: dict[str, str] = Field(
        default_factory=dict,
        description="evictionHard thresholds, e.g. {'memory.available': '500Mi'}. Empty: the "
        "kubelet default (memory.available<100Mi, nodefs.available<10%, ...).",
    )
    max_pods: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="maxPods. Empty: the EKS value for the instance type (catalogue).",
    )

    @field_validator("eviction_hard")
    @classmethod
    def _eviction_thresholds(cls, value: dict[str, str]) -> dict[str, str]:
        for key, threshold in value.items():
            if key not in EVICTION_SIGNALS:
                raise ValueError(
                    f"{key[:40]!r} is not a kubelet eviction signal; use one of "
                    f"{', '.join(EVICTION_SIGNALS)}"
                )
            if not EVICTION_THRESHOLD.match(threshold):
                raise ValueError(
                    f"{key}: {threshold[:40]!r} is not a threshold; use a quantity such as "
                    "'500Mi' or a percentage such as '10%'"
                )
        return value

    @field_validator("system_reserved", "kube_reserved")
    @classmethod
    def _reservation_keys(cls, value: dict[str, str]) -> dict[str, str]:
        allowed = ("cpu", "memory", "ephemeral-storage", "pid")
        for key in value:
            if key not in allowed:
                raise ValueError(
                    f"'{key}' cannot be reserved; the kubelet accepts only "
                    f"{', '.join(allowed)} (GPUs are not reservable: remove it)"
                )
        return value


class KarpenterPoolSpec(SpecModel):
    """What a Karpenter-provisioned pool's NodePool and EC2NodeClass add to the pool."""

    instance_types: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(
        default_factory=list,
        max_length=20,
        examples=[["g6e.24xlarge"]],
        description="Further EC2 instance types the NodePool may launch besides "
        "instance_type, each with the same GPU model and count (the planner sizes the "
        "kubelet reservations so they hold for every type, and `plan` names the type the "
        "Pod sizes assume: instance_type).",
    )
    ami_alias: str = Field(
        default="al2023@latest",
        pattern=r"^(al2023|bottlerocket)@(latest|v[0-9][0-9A-Za-z.]*)$",
        examples=["al2023@v20240807", "bottlerocket@v1.20.4"],
        description="EC2NodeClass amiSelectorTerms alias: the EKS AL2023 or Bottlerocket "
        "image (Karpenter picks its NVIDIA variant for GPU types; the driver is "
        "preinstalled). Pin a version in production: 'latest' drifts nodes on each release.",
    )
    consolidate_after: str = Field(
        default="10m",
        pattern=r"^([0-9]+(s|m|h))+$",
        examples=["10m"],
        description="NodePool disruption.consolidateAfter: how long an empty GPU node is "
        "kept (consolidationPolicy is WhenEmpty: a node with an engine is never "
        "consolidated).",
    )


class KarpenterSpec(SpecModel):
    """The Karpenter controller (installed when a pool has provisioner karpenter)."""

    chart_version: Version | None = Field(
        default=None,
        examples=["1.14.1"],
        description="karpenter chart version (oci://public.ecr.aws/karpenter). Empty: the "
        "newest release in the compatibility catalogue; another must be catalogued.",
    )
    namespace: Name = Field(
        default="kube-system", description="Namespace of the controller (upstream default)."
    )


class NodePoolSpec(SpecModel):
    """A GPU node pool: an EKS managed node group (create mode) or a described pool."""

    name: Name = Field(description="Pool name; models refer to it.")
    instance_type: str = Field(
        examples=["g6e.xlarge", "p5.48xlarge"],
        description="EC2 instance type; GPU model, count, vCPU and memory come from the "
        "hardware catalogue (or `catalog.instances` in this stack).",
    )
    capacity_type: CapacityType = Field(default="ON_DEMAND", description="EKS capacity type.")
    min_size: int = Field(default=0, ge=0, le=1000, description="Minimum node count.")
    max_size: int = Field(default=1, ge=1, le=1000, description="Maximum node count.")
    desired_size: int | None = Field(
        default=None, ge=0, le=1000, description="Initial node count (default: min_size)."
    )
    disk_size_gib: int = Field(
        default=200,
        ge=20,
        le=16384,
        description="Root volume size in GiB (container images and downloaded weights; "
        "plan refuses one smaller than an engine Pod's ephemeral storage on the pool).",
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Extra node labels (GPU labels are added)."
    )
    taints: list[Taint] = Field(
        default_factory=_default_gpu_taints,
        description="Node taints. Default: nvidia.com/gpu=true:NoSchedule, so CPU Pods "
        "cannot take GPU nodes.",
    )
    kubelet: KubeletSpec = Field(
        default_factory=KubeletSpec, description="Kubelet reservations and limits."
    )
    provisioner: Provisioner = Field(
        default="managed-node-group",
        description="What creates the nodes: an EKS managed node group, or Karpenter "
        "(a NodePool and an EC2NodeClass; create mode).",
    )
    karpenter: KarpenterPoolSpec | None = Field(
        default=None, description="NodePool settings (provisioner karpenter; empty: defaults)."
    )
    gpu_allocation: GpuAllocation = Field(
        default="device-plugin",
        description="Who allocates the pool's GPUs: the GPU Operator's device plugin "
        "(nvidia.com/gpu limits), or the NVIDIA DRA driver (Kubernetes 1.34+: a "
        "ResourceClaimTemplate of TP x PP gpu.nvidia.com devices per engine; the device "
        "plugin is kept off these nodes, rule O008).",
    )

    @model_validator(mode="after")
    def _sizes(self) -> NodePoolSpec:
        if self.karpenter is not None and self.provisioner != "karpenter":
            raise ValueError(
                "karpenter settings need provisioner: karpenter; set it or remove karpenter"
            )
        if self.provisioner == "karpenter" and self.min_size > 0:
            raise ValueError(
                f"min_size {self.min_size} on a karpenter pool: Karpenter keeps no standing "
                "nodes (it launches them for pending Pods, up to the NodePool's limit), so the "
                "plan's node counts and cost would assume nodes that never exist; set "
                "min_size 0, or use a managed-node-group pool for standing capacity"
            )
        if self.provisioner == "karpenter" and self.gpu_allocation == "dra":
            raise ValueError(
                "gpu_allocation dra on a karpenter pool: Karpenter does not yet provision "
                "nodes for Pods with ResourceClaims (kubernetes-sigs/karpenter#2384), so the "
                "engines would stay Pending; use provisioner managed-node-group for DRA"
            )
        if self.min_size > self.max_size:
            raise ValueError(
                f"min_size {self.min_size} is above max_size {self.max_size}; "
                "raise max_size or lower min_size"
            )
        if self.desired_size is not None and not (
            self.min_size <= self.desired_size <= self.max_size
        ):
            raise ValueError(
                f"desired_size {self.desired_size} is outside min_size..max_size "
                f"({self.min_size}..{self.max_size}); pick a value in that range"
            )
        return self


class GpuSharingSpec(SpecModel):
    """GPU sharing through the device plugin (time-slicing or MPS)."""

    strategy: SharingStrategy = Field(default="none", description="Sharing strategy.")
    replicas: int = Field(
        default=1, ge=1, le=64, description="Advertised replicas per physical GPU."
    )


class Toleration(SpecModel):
    """A Kubernetes toleration (Kubernetes spelling of the effect)."""

    key: str = Field(
        default="", examples=["nvidia.com/gpu"], description="Taint key ('' with Exists: all)."
    )
    operator: TolerationOperator = Field(default="Equal", description="Equal or Exists.")
    value: str = Field(default="", description="Taint value (Equal only).")
    effect: TaintEffect | None = Field(
        default=None, description="Effect to tolerate (empty: every effect)."
    )

    @model_validator(mode="after")
    def _exists_has_no_value(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError(
                f"operator Exists takes no value (got '{self.value}'); remove value or use Equal"
            )
        if self.operator == "Equal" and not self.key:
            raise ValueError("operator Equal needs a key; set key or use Exists")
        return self


class GpuOperatorSpec(SpecModel):
    """The NVIDIA GPU Operator Helm release with pinned component versions."""

    enabled: bool = Field(default=True, description="Install the GPU Operator.")
    chart_version: Version | None = Field(
        default=None,
        examples=["v25.10.0"],
        description="GPU Operator Helm chart version (pinned); required when enabled.",
    )
    namespace: Name = Field(default="gpu-operator", description="Namespace of the operator.")
    driver_enabled: bool = Field(
        default=False,
        description="Let the operator install the driver. EKS NVIDIA AMIs ship one, so the "
        "default is false.",
    )
    driver_version: Version | None = Field(
        default=None,
        examples=["570.172.08"],
        description="Driver version: the operator's when driver_enabled, else the version "
        "preinstalled in the node image (for compatibility checks).",
    )
    toolkit_version: Version | None = Field(
        default=None, description="NVIDIA Container Toolkit version (empty: chart default)."
    )
    device_plugin_version: Version | None = Field(
        default=None, description="k8s-device-plugin version (empty: chart default)."
    )
    dcgm_exporter_version: Version | None = Field(
        default=None, description="DCGM exporter version (empty: chart default)."
    )
    mig_strategy: MigStrategy = Field(
        default="none",
        description="MIG strategy of the device plugin and GFD (ClusterPolicy mig.strategy): "
        "'none' ignores MIG, 'single' advertises each MIG instance of a partitioned GPU as "
        "nvidia.com/gpu, 'mixed' advertises nvidia.com/mig-<profile>. Pools are partitioned "
        "by their nvidia.com/mig.config label (rule O005 checks the pair).",
    )
    sharing: GpuSharingSpec = Field(
        default_factory=GpuSharingSpec, description="Time-slicing / MPS sharing."
    )
    service_monitor: bool | None = Field(
        default=None,
        description="Create a ServiceMonitor for the DCGM exporter. Empty: when the stack "
        "has monitoring (its CRDs are needed).",
    )
    tolerations: list[Toleration] | None = Field(
        default=None,
        description="Tolerations of the operator's DaemonSets and the NFD worker "
        "(daemonsets.tolerations, node-feature-discovery.worker.tolerations). Empty: exactly "
        "the node pools' taints (rule O006 checks that every pool taint is tolerated).",
    )
    declared_overrides: list[OperatorComponent] = Field(
        default_factory=list,
        description="Components whose version (driver_version with driver_enabled, "
        "toolkit_version, device_plugin_version, dcgm_exporter_version) deliberately differs "
        "from the chart release's tested set (rule O004 accepts them).",
    )

    @model_validator(mode="after")
    def _pinned_when_enabled(self) -> GpuOperatorSpec:
        if self.enabled and self.chart_version is None:
            raise ValueError(
                "chart_version is required while enabled is true; pin a release such as "
                "v25.10.0, or set enabled: false when the cluster already runs the operator"
            )
        return self

    @property
    def pinned_chart_version(self) -> str:
        """The chart version of an enabled operator (the validator made it present)."""
        if self.chart_version is None:
            raise ValueError("gpu_operator.chart_version is unset: the operator is disabled")
        return self.chart_version


class KubeRaySpec(SpecModel):
    """The KubeRay operator (needed when a model runs on the 'rayservice' runtime)."""

    enabled: bool = Field(default=False, description="Install the KubeRay operator.")
    chart_version: Version = Field(
        default="1.4.2", examples=["1.4.2"], description="kuberay-operator chart version."
    )
    namespace: Name = Field(default="kuberay", description="Namespace of the operator.")
    ray_version: str = Field(
        default="2.46.0",
        pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$",
        description="Ray version of the clusters (`rayVersion` and the image tag).",
    )


class MonitoringSpec(SpecModel):
    """Prometheus for vLLM's metrics: ServiceMonitors and KEDA read it."""

    mode: MonitoringMode = Field(
        default="none",
        description="'install': the stack installs kube-prometheus-stack (Prometheus "
        "Operator CRDs, a Prometheus selecting every ServiceMonitor); 'existing': the "
        "cluster already serves the monitoring.coreos.com CRDs and a Prometheus at "
        "prometheus_url; 'none': no ServiceMonitor is created and KEDA cannot be used.",
    )
    chart_version: Version | None = Field(
        default=None,
        description="kube-prometheus-stack chart version (mode install). Empty: the newest "
        "in the chart catalogue.",
    )
    namespace: Name = Field(default="monitoring", description="Namespace of the release.")
    prometheus_url: str | None = Field(
        default=None,
        max_length=512,
        pattern=r"^https?://[^\s@]+$",
        description="Prometheus the autoscalers query. Empty with mode install: the "
        "Prometheus the chart creates (prometheus-operated in the namespace, port 9090).",
    )

    @model_validator(mode="after")
    def _url(self) -> MonitoringSpec:
        if self.mode == "existing" and not self.prometheus_url:
            raise ValueError(
                "mode existing needs prometheus_url (e.g. "
                "http://prometheus-operated.monitoring.svc:9090); or use mode: install"
            )
        return self

    @property
    def enabled(self) -> bool:
        """Whether the Prometheus Operator CRDs exist in the cluster (installed or stated)."""
        return self.mode != "none"

    @property
    def url(self) -> str | None:
        """The Prometheus URL autoscalers query, or None without monitoring."""
        if self.prometheus_url:
            return self.prometheus_url
        if self.mode == "install":
            return f"http://prometheus-operated.{self.namespace}.svc:9090"
        return None


class KedaSpec(SpecModel):
    """KEDA, for models with autoscaling kind keda."""

    enabled: bool = Field(
        default=False,
        description="Install KEDA (its CRDs and operator) on the system pool. Needed by "
        "autoscaling kind keda unless the cluster already runs it (installed: true).",
    )
    installed: bool = Field(
        default=False,
        description="KEDA already runs in the cluster (existing clusters); nothing installed.",
    )
    chart_version: Version | None = Field(
        default=None,
        description="keda chart version. Empty: the newest in the chart catalogue.",
    )
    namespace: Name = Field(default="keda", description="Namespace of the release.")


class LwsSpec(SpecModel):
    """The LeaderWorkerSet controller, installed when a model spans nodes."""

    chart_version: Version | None = Field(
        default=None,
        examples=["0.10.0"],
        description="lws chart version (empty: the catalogued release).",
    )
    namespace: Name = Field(default="lws-system", description="Namespace of the controller.")


class DraSpec(SpecModel):
    """Which DRA driver publishes the GPUs of the pools with ``gpu_allocation: dra``."""

    driver: DraDriverWay = Field(
        default="nvidia-chart",
        description="'nvidia-chart': NVIDIA's nvidia-dra-driver-gpu chart (NGC); "
        "'kubernetes-sigs-chart': the same driver after its move to kubernetes-sigs "
        "(dra-driver-nvidia-gpu, oci://registry.k8s.io/dra-driver-nvidia/charts); "
        "'gpu-operator': the GPU Operator's own DRA stack (v26.7.0+, gpuCluster.deployCR "
        "with clusterPolicy.deployCR off: a GPUCluster CR instead of the ClusterPolicy, so "
        "every pool must use gpu_allocation dra). The chart versions are the catalogue's "
        "(catalog/data/dra-driver.yaml, each cited).",
    )
