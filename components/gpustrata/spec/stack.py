"""The typed stack: one pydantic model per concern, upstream names where they exist.

A stack file declares all three layers (Kubernetes node pools and GPU software,
KubeRay, vLLM engines). Closed sets are ``Literal`` aliases so that the JSON
Schema and the error messages list the accepted values. Every field carries a
description; ``examples`` feed the "use ..." hint of an error message.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from gpustrata.catalog.hardware import GpuModel, InstanceType
from gpustrata.catalog.inputs import (
    GP3_BASELINE_MIBPS,
    StorageKind,
    StrictModel,
    Taint,
    TaintEffect,
    WeightSource,
)
from gpustrata.catalog.vllm_releases import load_vllm_releases, minor_release
from gpustrata.core.environments import Environment
from gpustrata.core.vllm_choices import BlockSize, KvCacheDtype, ModelDtype

_VLLM = load_vllm_releases()
"""The vLLM release catalogue (its reference release's defaults are quoted below)."""

ClusterMode = Literal["create", "existing"]
CapacityType = Literal["ON_DEMAND", "SPOT"]
Provisioner = Literal["managed-node-group", "karpenter"]
MigStrategy = Literal["none", "single", "mixed"]
SharingStrategy = Literal["none", "time-slicing", "mps"]
TolerationOperator = Literal["Equal", "Exists"]
OperatorComponent = Literal["driver", "toolkit", "device_plugin", "dcgm_exporter"]
Runtime = Literal["deployment", "rayservice"]
Autoscaler = Literal["none", "hpa", "keda"]
GpuAllocation = Literal["device-plugin", "dra"]
DraDriverWay = Literal["nvidia-chart", "kubernetes-sigs-chart", "gpu-operator"]
NatGateways = Literal["single", "per-az"]
MonitoringMode = Literal["none", "install", "existing"]

# vLLM flags that carry credentials: --api-key (vllm/entrypoints/openai/cli_args.py) and
# --hf-token (vllm/config/model.py ModelConfig.hf_token), and anything named like them.
SECRET_FLAG = re.compile(r"(^|[_-])(api[_-]?key|token|secret|password|passwd)$")
# vLLM's own flag grammar (EngineArgs field names, --kebab-case on the command line).
FLAG_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
# Any part of a flag name that hints at a credential (hf-tokens, auth_header, ...).
SECRET_PART = re.compile(
    r"(^|[_-])(api[_-]?keys?|hf[_-]?tokens?)([_-]|$)"
    r"|(^|[_-])(secrets?|passwords?|passwd|credentials?|auth[a-z]*|bearer)$"
)
# Values that look like a credential whatever the flag is called.
TOKEN_VALUE = re.compile(
    r"(^|[\s=:])(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})|^\s*bearer\s",
    re.IGNORECASE,
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
# An image reference (distribution/reference grammar, simplified):
# [host[:port]/]path[:tag][@digest].
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
# A release version: 580.173.02, v26.7.0, 4.2.3-4.1.3-ubuntu22.04 (no '/', no '..').
_VERSION = re.compile(r"^v?[0-9]+(?:\.[0-9A-Za-z]+)*(?:[-+][0-9A-Za-z]+(?:[.-][0-9A-Za-z]+)*)?$")
# kubelet evictionHard: a quantity or a percentage (k8s.io/kubelet eviction signals).
_THRESHOLD = re.compile(r"^[0-9]+(\.[0-9]+)?(%|Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
)
# Longest name one path component may have (NAME_MAX on Linux and macOS), in bytes.
NAME_MAX = 255
MODEL_MAX = 1024


def model_path_problem(model: str) -> str | None:
    """Why *model* (a Hugging Face id or a path to a config.json) cannot be used, or None.

    A stack file from a pull request must not make ``plan`` open files outside the
    project (``/proc/self/environ``, ``../../etc/passwd``): absolute paths, ``~`` and
    ``..`` are refused, and so are names no file system accepts (a component over 255
    bytes raised ``OSError: File name too long``).
    """
    if len(model.encode("utf-8")) > MODEL_MAX:
        return f"is {len(model.encode('utf-8'))} bytes long (at most {MODEL_MAX}); use the model id"
    if any(len(part.encode("utf-8")) > NAME_MAX for part in model.replace("\\", "/").split("/")):
        return (
            f"has a path component over {NAME_MAX} bytes (no file system takes it); "
            "use the Hugging Face id (org/name) or a shorter path"
        )
    if model.startswith(("/", "~", "\\")) or re.match(r"^[A-Za-z]:", model):
        return (
            "is an absolute path; a stack may only name a config.json inside the project "
            "(a stack from a pull request must not read the runner's files): use a path "
            "relative to the project"
        )
    if ".." in model.replace("\\", "/").split("/"):
        return (
            "leaves the project through '..'; a stack may only name a config.json inside "
            "the project: use a path relative to the project without '..'"
        )
    return None


def is_model_path(model: str) -> bool:
    """Does *model* name a file or folder in the project (``acme-13b/config.json``,
    ``models/acme/``, ``./acme``) rather than a Hugging Face id (``org/name``)? A Hub id
    has at most one ``/`` and no ``.json`` suffix."""
    text = model.replace("\\", "/")
    return text.endswith((".json", "/")) or text.startswith("./") or text.count("/") > 1


Name = Annotated[
    str,
    Field(
        min_length=1,
        max_length=40,
        pattern=_DNS_LABEL.pattern,
        examples=["gpu-h100"],
        description="A lowercase DNS label (RFC 1123): letters, digits and '-'.",
    ),
]
Quantity = Annotated[
    str,
    Field(
        pattern=_QUANTITY.pattern,
        examples=["500m", "2Gi"],
        description="A Kubernetes resource quantity such as '500m' or '2Gi'.",
    ),
]


Version = Annotated[
    str,
    Field(
        max_length=64,
        pattern=_VERSION.pattern,
        examples=["580.173.02"],
        description="A release version such as '580.173.02' or 'v26.7.0'.",
    ),
]


class _Model(StrictModel):
    """Base of the stack's models (:class:`~gpustrata.catalog.inputs.StrictModel`: unknown
    keys, loose types and hidden characters are errors)."""


class NetworkSpec(_Model):
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


class SystemPoolSpec(_Model):
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


class ClusterSpec(_Model):
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


class KubeletSpec(_Model):
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
            if not _THRESHOLD.match(threshold):
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


class KarpenterPoolSpec(_Model):
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


class KarpenterSpec(_Model):
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


class NodePoolSpec(_Model):
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


class GpuSharingSpec(_Model):
    """GPU sharing through the device plugin (time-slicing or MPS)."""

    strategy: SharingStrategy = Field(default="none", description="Sharing strategy.")
    replicas: int = Field(
        default=1, ge=1, le=64, description="Advertised replicas per physical GPU."
    )


class Toleration(_Model):
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


class GpuOperatorSpec(_Model):
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


class KubeRaySpec(_Model):
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


class MonitoringSpec(_Model):
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


class KedaSpec(_Model):
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


class WeightsSpec(_Model):
    """Where the engine loads its weights from (drives the startup estimate)."""

    source: WeightSource = Field(
        default="huggingface", description="Weight source for the startup estimate."
    )
    uri: str | None = Field(
        default=None,
        max_length=2048,
        description="s3:// URI or path on the PVC / NVMe (source-specific).",
    )
    pvc_name: str | None = Field(
        default=None, description="PersistentVolumeClaim holding the weights (source pvc)."
    )
    service_account: Name | None = Field(
        default=None,
        description="ServiceAccount the engines run under to read uri (source s3), bound "
        "to a cloud identity you manage (IRSA, Pod Identity). Empty in create mode: the "
        "stack creates '<model>-weights' with an EKS Pod Identity association to a role "
        "that may only read the uri's prefix.",
    )
    cache_size_gib: int = Field(
        default=0,
        ge=0,
        le=65536,
        description="Size of a model cache volume to create (0: an emptyDir sized by "
        "ephemeral storage).",
    )
    load_gbps: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        examples=[1.0],
        description="Measured weight load bandwidth in GB/s (10^9 bytes/s) from this source "
        "into the engine, for the startup estimate. Empty: the median fitted on published "
        "vLLM startup logs of the source (huggingface: a cold Hub download; s3: the Run:ai "
        "Model Streamer; local-nvme), or gpustrata's cited 0.3 for pvc; shown with its "
        "source by `plan` and `capacity`.",
    )

    storage: StorageKind | None = Field(
        default=None,
        description="What vLLM's loader reads the weights from, for the startup estimate: "
        "local-disk (instance NVMe or the node's own disk), ebs (an EBS volume), "
        "network-volume (EFS, NFS, FSx). Each has a load bandwidth fitted on published vLLM "
        "startup logs. Empty: local-disk for source local-nvme, ebs for a pvc with "
        "cache_size_gib (the stack's gp3 volume), else not stated (plan shows a range).",
    )
    volume_throughput_mibps: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="The volume's provisioned read throughput in MiB/s (gp3: 125 to 1,000; "
        "io2: up to 4,000), which caps the load. Empty with the stack's own gp3 cache "
        "volume: gp3's baseline 125 MiB/s.",
    )

    def storage_facts(self) -> tuple[str | None, float | None]:
        """(storage kind, read cap in GB/s) the startup estimate uses: as stated, else
        derived from the source (:attr:`storage`)."""
        kind = self.storage
        mibps = self.volume_throughput_mibps
        if kind is None and self.source == "local-nvme":
            kind = "local-disk"
        if kind is None and self.source == "pvc" and self.cache_size_gib > 0:
            kind = "ebs"
            mibps = mibps or GP3_BASELINE_MIBPS
        return kind, (mibps * (1 << 20) / 1e9 if mibps else None)

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        if value is None:
            return value
        # userinfo (s3://KEY:SECRET@bucket) is refused for every string (_Model)
        scheme, sep, rest = value.partition("://")
        if sep and not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
            raise ValueError(f"{value[:60]!r} has no valid scheme; use s3://bucket/key")
        if any(c.isspace() for c in value) or ".." in (rest if sep else value).split("/"):
            raise ValueError(
                f"{value[:60]!r} contains whitespace or a '..' segment; use s3://bucket/key "
                "or a path on the volume without '..'"
            )
        return value


class SecretRef(_Model):
    """A reference to a key of a Kubernetes Secret: no secret value lives in the stack."""

    name: Name = Field(description="Secret name.")
    key: str = Field(default="token", min_length=1, description="Key inside the Secret.")
    existing: bool = Field(
        default=False,
        description="The Secret is created outside the stack (kubectl, External Secrets) "
        "before the model starts. False: the stack creates it from the Pulumi secret "
        "gpustrata:hfToken, which must then be set.",
    )


class EngineSpec(_Model):
    """vLLM engine settings, named exactly as vLLM's EngineArgs names them."""

    tensor_parallel_size: int = Field(
        default=1, ge=1, le=64, description="vLLM --tensor-parallel-size."
    )
    pipeline_parallel_size: int = Field(
        default=1, ge=1, le=64, description="vLLM --pipeline-parallel-size."
    )
    max_model_len: int | None = Field(
        default=None,
        ge=16,
        le=10_485_760,
        description="vLLM --max-model-len (empty: the model's maximum).",
    )
    gpu_memory_utilization: float = Field(
        default=0.9,
        gt=0.0,
        le=1.0,
        examples=[0.9],
        json_schema_extra={"fix": "use a fraction such as 0.9"},
        description="vLLM --gpu-memory-utilization: fraction of GPU memory for the engine. "
        "gpustrata always passes it; its default 0.9 leaves more headroom than vLLM "
        f"{minor_release(_VLLM.reference)}'s own default of "
        f"{_VLLM.gpu_memory_utilization.value} (vllm/config/cache.py) for memory vLLM does "
        "not count "
        "(CUDA context, NCCL buffers).",
    )
    dtype: ModelDtype = Field(default="auto", description="vLLM --dtype.")
    kv_cache_dtype: KvCacheDtype = Field(default="auto", description="vLLM --kv-cache-dtype.")
    block_size: BlockSize | None = Field(
        default=None, description="vLLM --block-size (empty: the backend's default, 16 on CUDA)."
    )
    max_num_seqs: int | None = Field(
        default=None, ge=1, le=65536, description="vLLM --max-num-seqs."
    )
    max_num_batched_tokens: int | None = Field(
        default=None, ge=1, le=10_485_760, description="vLLM --max-num-batched-tokens."
    )
    enable_chunked_prefill: bool | None = Field(
        default=None, description="vLLM --enable-chunked-prefill (empty: vLLM's default)."
    )
    enable_prefix_caching: bool | None = Field(
        default=None, description="vLLM --enable-prefix-caching (empty: vLLM's default)."
    )
    enforce_eager: bool = Field(
        default=False, description="vLLM --enforce-eager (no CUDA graphs; slower decode)."
    )
    quantization: str | None = Field(
        default=None, examples=["fp8", "awq"], description="vLLM --quantization."
    )
    trust_remote_code: bool = Field(default=False, description="vLLM --trust-remote-code.")
    extra_args: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Further vLLM flags by their EngineArgs name (rendered as --flag value). "
        "Never secrets (api_key, hf_token): flags are readable in the Pod spec.",
    )

    @field_validator("extra_args")
    @classmethod
    def _no_secret_flags(cls, value: dict[str, object]) -> dict[str, object]:
        for key in value:
            # Names outside vLLM's grammar ('hf-token ', 'api-k\u0435y', 'api-key=hf_...')
            # could slip a credential past the name check; neither they nor values are quoted.
            if not FLAG_NAME.match(key) or len(key) > 64:
                raise ValueError(
                    "a flag name is not of vLLM's form (lowercase letters, digits, '-' and '_', "
                    "at most 64; the name is not shown: it may hold a secret): use the "
                    "EngineArgs name, e.g. max_num_seqs"
                )
            if SECRET_FLAG.search(key) or SECRET_PART.search(key):
                raise ValueError(
                    f"'{key[:40]}' would put a secret on the vLLM command line, readable by "
                    "anyone who can read the Pod; remove it and use hf_token (a Secret "
                    "reference) for the Hugging Face token"
                )
            if isinstance(value[key], str) and TOKEN_VALUE.search(str(value[key])):
                raise ValueError(
                    f"the value of '{key[:40]}' looks like a token (not shown); flags are "
                    "readable in the Pod spec: remove it and use a Secret reference"
                )
        return value

    @property
    def gpus_per_engine(self) -> int:
        """GPUs one engine replica occupies: TP x PP."""
        return self.tensor_parallel_size * self.pipeline_parallel_size


class AutoscalingSpec(_Model):
    """Replica autoscaling for a model (one autoscaler per workload)."""

    kind: Autoscaler = Field(
        default="none",
        description="'hpa' or 'keda' for the deployment runtime; Ray Serve autoscaling is "
        "used on the rayservice runtime whenever max_replicas > min_replicas.",
    )
    min_replicas: int = Field(default=1, ge=0, le=1000, description="Minimum replicas.")
    max_replicas: int = Field(default=1, ge=1, le=1000, description="Maximum replicas.")
    target_waiting_requests: int = Field(
        default=5,
        ge=1,
        le=10000,
        description="Scale out when vllm:num_requests_waiting per replica exceeds this.",
    )
    target_ongoing_requests: int = Field(
        default=32,
        ge=1,
        le=100000,
        description="Ray Serve target_ongoing_requests per replica (rayservice runtime).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingSpec:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas {self.min_replicas} is above max_replicas {self.max_replicas}; "
                "raise max_replicas or lower min_replicas"
            )
        return self


class WorkloadSpec(_Model):
    """What a model serves: the workload ``plan`` predicts latency for and ``size`` sizes.

    The defaults are the reference workload (a chat turn, every replica full): 1,024 prompt
    and 256 output tokens at a concurrency of max_num_seqs per replica. Give at most one of
    ``concurrency`` (closed loop, all replicas together), ``request_rate`` (open loop) or
    ``burst`` (N requests at once). ``gpustrata size --input-tokens ... --concurrency ...``
    with the same fields predicts the same figures (it writes this section in its snippet).
    """

    input_tokens: int = Field(
        default=1024, ge=1, le=10_000_000, description="Prompt tokens per request."
    )
    output_tokens: int = Field(
        default=256, ge=1, le=10_000_000, description="Generated tokens per request."
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Requests in flight over all replicas (closed loop, as `vllm bench "
        "serve --max-concurrency`). Empty with no request_rate or burst: max_num_seqs per "
        "replica (every engine full).",
    )
    request_rate: float | None = Field(
        default=None,
        gt=0,
        le=1e9,
        description="Requests per second arriving over all replicas (open loop, as `vllm "
        "bench serve --request-rate`).",
    )
    burst: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Requests sent at once and not replaced (as `vllm bench serve "
        "--num-prompts N` at request rate inf), over all replicas.",
    )
    ttft_seconds: float | None = Field(
        default=None, gt=0, le=86400, description="TTFT target in seconds (SLO); empty: none."
    )
    tpot_seconds: float | None = Field(
        default=None,
        gt=0,
        le=3600,
        description="TPOT (inter-token latency) target in seconds (SLO); empty: none.",
    )

    @model_validator(mode="after")
    def _one_load(self) -> WorkloadSpec:
        given = [
            k for k in ("concurrency", "request_rate", "burst") if getattr(self, k) is not None
        ]
        if len(given) > 1:
            raise ValueError(
                f"{' and '.join(given)} are both set; give one of concurrency, request_rate "
                "or burst"
            )
        return self


# --------------------------------------------------------------------------- routing
# The serving edge (issue 36): how clients reach a model's replicas. Kept in its own
# section: ModelSpec.routing and StackSpec.inference_gateway are the only fields elsewhere.

RoutingMode = Literal["service", "inference-gateway"]
EppScorer = Literal["queue", "kv-cache-utilization", "prefix-cache"]
FailureMode = Literal["FailOpen", "FailClose"]
GatewayServiceType = Literal["ClusterIP", "LoadBalancer"]


class ScorerSpec(_Model):
    """One scorer of the endpoint picker's scheduling profile, with its weight."""

    name: EppScorer = Field(
        description="'prefix-cache': prefer the replica that already holds the prompt's "
        "prefix in its KV cache (prefix-cache-scorer); 'kv-cache-utilization': prefer the "
        "replica with the most free KV cache (kv-cache-utilization-scorer, from vLLM's "
        "vllm:kv_cache_usage_perc); 'queue': prefer the shortest waiting queue "
        "(queue-scorer, vllm:num_requests_waiting)."
    )
    weight: int = Field(default=1, ge=1, le=100, description="Weight in the profile's sum.")


def _default_scorers() -> list[ScorerSpec]:
    # The inferencepool chart's own default profile at GAIE v1.5.0
    # (config/charts/epplib/templates/_config.yaml): queue 2, kv-cache-utilization 2,
    # prefix-cache 3.
    return [
        ScorerSpec(name="queue", weight=2),
        ScorerSpec(name="kv-cache-utilization", weight=2),
        ScorerSpec(name="prefix-cache", weight=3),
    ]


class ModelRoutingSpec(_Model):
    """How clients reach one model's replicas."""

    mode: RoutingMode = Field(
        default="service",
        description="'service': the model's Kubernetes Service balances connections "
        "(kube-proxy, no knowledge of the engines); 'inference-gateway': a Gateway API "
        "Gateway and HTTPRoute to an InferencePool whose endpoint picker chooses the replica "
        "per request from the engines' metrics (Gateway API Inference Extension; deployment "
        "runtime only).",
    )
    scorers: list[ScorerSpec] = Field(
        default_factory=_default_scorers,
        min_length=1,
        max_length=3,
        description="The endpoint picker's scorers and weights (inference-gateway). Default: "
        "the inferencepool chart's profile (queue 2, kv-cache-utilization 2, prefix-cache 3).",
    )
    failure_mode: FailureMode = Field(
        default="FailOpen",
        description="InferencePool endpointPickerRef.failureMode: 'FailOpen' sends requests "
        "on when the picker is down, 'FailClose' refuses them.",
    )
    picker_replicas: int = Field(
        default=1,
        ge=1,
        le=10,
        description="Endpoint picker replicas (more than one uses leader election; the "
        "prefix-cache index lives in the leader).",
    )
    picker_cpu: Quantity = Field(
        default="1",
        description="CPU request of the endpoint picker. The chart's default (4) does not fit "
        "a 4-vCPU system node; raise it with the system pool for high request rates.",
    )
    picker_memory: Quantity = Field(
        default="2Gi",
        description="Memory request of the endpoint picker (the limit is twice it).",
    )
    request_timeout: str | None = Field(
        default=None,
        pattern=r"^([0-9]{1,5}(h|m|s|ms)){1,4}$",  # GEP-2257, as the HTTPRoute CRD
        examples=["1h", "0s"],
        description="HTTPRoute timeouts.request. Empty: derived from the model's longest "
        "generation (max_model_len - 1 tokens at the planner's decode step with every "
        "sequence slot busy), so rule G001 holds; '0s' disables it.",
    )

    @field_validator("scorers")
    @classmethod
    def _distinct(cls, value: list[ScorerSpec]) -> list[ScorerSpec]:
        names = [s.name for s in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"scorer {', '.join(twice)} is listed twice; give each scorer once with its weight"
            )
        return value


class InferenceGatewaySpec(_Model):
    """The inference gateway installed for models with routing mode inference-gateway:
    Gateway API and Inference Extension CRDs, and the gateway implementation, at the
    catalogued releases (``catalog/data/gateway.yaml``)."""

    namespace: Name = Field(
        default="istio-system", description="Namespace of the gateway controller (istiod)."
    )
    gateway_name: Name = Field(
        default="inference-gateway",
        description="Name of the Gateway created in each namespace that has such a model "
        "(its proxy Service is '<name>-istio', port 80).",
    )
    install: bool = Field(
        default=True,
        description="Install the CRDs and the gateway controller. False: the cluster already "
        "runs them (existing clusters); the Gateways, routes and pools are still created.",
    )
    service_type: GatewayServiceType = Field(
        default="ClusterIP",
        description="Type of the Service istiod creates for each Gateway's proxy. "
        "'ClusterIP' (default): reached inside the cluster only (the stack's endpoints "
        "output); 'LoadBalancer': Istio's own default, which on EKS provisions a cloud load "
        "balancer for it.",
    )


# --- Multi-node engines (LeaderWorkerSet) ------------------------------------------------
# One engine across several nodes: TP within a node, PP across nodes, served by a
# LeaderWorkerSet (kubernetes-sigs/lws). Kept in its own section (spec merges).

MultiNodeExecutor = Literal["ray", "mp"]
EfaMode = Literal["auto", "off"]


class MultiNodeSpec(_Model):
    """An engine that spans nodes: one LeaderWorkerSet group of ``nodes`` Pods, each taking
    every GPU of its node (tensor parallel within the node, pipeline parallel across nodes,
    as vLLM's multi-node guide sets them)."""

    nodes: int | None = Field(
        default=None,
        ge=2,
        le=64,
        description="Nodes (Pods) per engine = pipeline_parallel_size. Empty: the fewest "
        "nodes of the pool whose GPUs hold the weights and one max_model_len sequence.",
    )
    executor: MultiNodeExecutor = Field(
        default="ray",
        description="vLLM --distributed-executor-backend across the nodes: 'ray' (the leader "
        "starts a Ray head, the workers join it: vLLM's multi-node-serving.sh) or 'mp' "
        "(multiprocessing: every Pod runs `vllm serve --nnodes N --node-rank R "
        "--master-addr <leader>`, the workers with --headless).",
    )
    efa: EfaMode = Field(
        default="auto",
        description="'auto': on instance types with Elastic Fabric Adapter interfaces, each "
        "Pod requests all of its node's (vpc.amazonaws.com/efa) and sets the Libfabric "
        "environment NCCL needs (FI_PROVIDER=efa), and a managed node group the stack "
        "creates attaches the interfaces (launch template, cluster placement group; a "
        "Karpenter pool gets none); 'off': NCCL over TCP sockets.",
    )


class LwsSpec(_Model):
    """The LeaderWorkerSet controller, installed when a model spans nodes."""

    chart_version: Version | None = Field(
        default=None,
        examples=["0.10.0"],
        description="lws chart version (empty: the catalogued release).",
    )
    namespace: Name = Field(default="lws-system", description="Namespace of the controller.")


# --- end of multi-node engines -----------------------------------------------------------


class DraSpec(_Model):
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


class ModelSpec(_Model):
    """A served model: what runs, where, and with which vLLM engine settings."""

    name: Name = Field(description="Name of the served model (Kubernetes object names).")
    model: str = Field(
        min_length=1,
        examples=["meta-llama/Llama-3.1-8B-Instruct"],
        description="Hugging Face model id (or a path, inside the project, for a local "
        "model's config.json).",
    )
    served_model_name: str | None = Field(
        default=None, description="Name clients use in the OpenAI API (default: model)."
    )
    runtime: Runtime = Field(
        default="deployment",
        description="'deployment' runs `vllm serve` in a Deployment; 'rayservice' runs Ray "
        "Serve LLM on a KubeRay RayService.",
    )
    pool: Name = Field(description="Name of the node pool the engines run on.")
    namespace: Name = Field(default="inference", description="Namespace of the workload.")
    image: str = Field(
        max_length=512,
        pattern=_IMAGE.pattern,
        examples=["vllm/vllm-openai:v0.11.0"],
        description="Container image, pinned by tag or digest.",
    )
    replicas: int = Field(
        default=1, ge=0, le=1000, description="Engine replicas (without autoscaling)."
    )
    engine: EngineSpec = Field(default_factory=EngineSpec, description="vLLM engine settings.")
    weights: WeightsSpec = Field(default_factory=WeightsSpec, description="Weight source.")
    hf_token: SecretRef | None = Field(
        default=None, description="Secret holding the Hugging Face token (gated models)."
    )
    autoscaling: AutoscalingSpec = Field(
        default_factory=AutoscalingSpec, description="Autoscaling."
    )
    workload: WorkloadSpec = Field(
        default_factory=WorkloadSpec,
        description="The workload and SLO targets `plan` predicts serving latency for (and "
        "`size` sizes for); the defaults are the reference workload.",
    )
    cpu: Quantity | None = Field(
        default=None,
        description="CPU request per engine Pod. Empty: the Pod's share of a node's "
        "allocatable CPU (its GPUs' share of the node's GPUs, 90% of it), shown by plan.",
    )
    memory: Quantity | None = Field(
        default=None,
        description="Memory request and limit per Pod. Empty: the Pod's share of a node's "
        "allocatable memory (its GPUs' share of the node's GPUs, 95% of it), shown by plan.",
    )
    shm_size: Quantity = Field(
        default="8Gi",
        description="Size of the memory-backed /dev/shm (NCCL needs more than the 64 MB "
        "container default when an engine spans GPUs).",
    )
    service_monitor: bool | None = Field(
        default=None,
        description="Create a Prometheus Operator ServiceMonitor for vLLM's /metrics "
        "(deployment runtime). Empty: when the stack has monitoring (mode install or "
        "existing), whose CRDs it needs.",
    )
    multi_node: MultiNodeSpec | None = Field(
        default=None,
        description="Serve one engine across several nodes with a LeaderWorkerSet (TP = GPUs "
        "per node, PP = nodes; deployment runtime). Empty: one node per engine, unless the "
        "engine's TP and PP are left unset and the weights and one max_model_len sequence do "
        "not fit one node of the pool: then the planner spans nodes and says so.",
    )
    startup_init_s: int | None = Field(
        default=None,
        ge=1,
        le=86400,
        description="Engine initialisation time in seconds after the weights are loaded "
        "(profiling, KV allocation, torch.compile, CUDA graph capture), for the startup "
        "estimate. Empty: fitted on published vLLM startup logs (a base, + torch.compile "
        "per decoder layer and CUDA graph capture without enforce_eager, + MoE kernel "
        "warm-up for MoE models).",
    )

    routing: ModelRoutingSpec = Field(
        default_factory=ModelRoutingSpec,
        description="How clients reach the replicas: the Service (default) or an inference "
        "gateway.",
    )

    @model_validator(mode="after")
    def _routing_runtime(self) -> ModelSpec:
        if self.routing.mode == "inference-gateway" and self.runtime != "deployment":
            raise ValueError(
                f"routing.mode inference-gateway needs runtime deployment (got {self.runtime}): "
                "an InferencePool selects vLLM Pods, and a RayService's Pods are Ray workers "
                "behind Ray Serve's proxy; use runtime: deployment or routing.mode: service"
            )
        return self

    @field_validator("model")
    @classmethod
    def _model_id_or_path(cls, value: str) -> str:
        problem = model_path_problem(value)
        if problem:
            raise ValueError(f"{value[:60]!r} {problem}")
        return value

    @model_validator(mode="after")
    def _multi_node_runtime(self) -> ModelSpec:
        if self.multi_node is not None and self.runtime != "deployment":
            raise ValueError(
                f"multi_node needs runtime 'deployment' (a LeaderWorkerSet of vLLM Pods), not "
                f"{self.runtime!r}: set runtime: deployment or remove multi_node"
            )
        return self


class CatalogExtensions(_Model):
    """Catalogue entries added by this stack (a custom GPU, an instance type not listed)."""

    gpus: list[GpuModel] = Field(
        default_factory=list, description="Extra GPU models (override by id)."
    )
    instances: list[InstanceType] = Field(
        default_factory=list, description="Extra instance types (override by name)."
    )
    models_dir: str | None = Field(
        default=None,
        max_length=MODEL_MAX,
        examples=["models"],
        description="Folder in the project holding models' own files (<org>/<name>/"
        "config.json, <name>/config.json or a Hugging Face cache layout): a model found there "
        "is sized from its config.json (and model.safetensors.index.json) before the Hugging "
        "Face cache and the model catalogue. `--models DIR` overrides it.",
    )

    @field_validator("models_dir")
    @classmethod
    def _models_dir_in_project(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.replace("\\", "/")
        if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text):
            raise ValueError(
                f"{value[:60]!r} is an absolute path; a stack may only name a folder inside "
                "the project: use a path relative to the project (or `--models DIR`)"
            )
        if ".." in text.split("/"):
            raise ValueError(
                f"{value[:60]!r} leaves the project through '..'; use a folder inside the "
                "project (or `--models DIR`)"
            )
        return value


MAX_MODELS = 200
"""The most models one stack serves: ``plan`` takes ~44 ms a model (200: ~9 s); 10,000
did not finish in two minutes. Split a larger fleet into stacks."""
MAX_NODE_POOLS = 100
"""The most GPU node pools of one stack (EKS allows 30 managed node groups per cluster by
default)."""


class StackSpec(_Model):
    """A whole gpustrata stack: one environment, one cluster, its pools, software and models."""

    environment: Environment = Field(description="Environment; sets rule enforcement.")
    cluster: ClusterSpec = Field(description="The Kubernetes cluster.")
    node_pools: list[NodePoolSpec] = Field(
        min_length=1,
        max_length=MAX_NODE_POOLS,
        description=f"GPU node pools (at most {MAX_NODE_POOLS}).",
    )
    gpu_operator: GpuOperatorSpec = Field(description="NVIDIA GPU Operator.")
    kuberay: KubeRaySpec = Field(default_factory=KubeRaySpec, description="KubeRay operator.")
    karpenter: KarpenterSpec = Field(
        default_factory=KarpenterSpec, description="Karpenter (pools with provisioner karpenter)."
    )
    monitoring: MonitoringSpec = Field(
        default_factory=MonitoringSpec,
        description="Prometheus (for ServiceMonitors and KEDA).",
    )
    keda: KedaSpec = Field(default_factory=KedaSpec, description="KEDA (autoscaling kind keda).")
    lws: LwsSpec = Field(
        default_factory=LwsSpec,
        description="LeaderWorkerSet controller (installed when a model spans nodes).",
    )
    dra: DraSpec = Field(
        default_factory=DraSpec,
        description="DRA driver of the pools with gpu_allocation dra (installed when any).",
    )
    models: list[ModelSpec] = Field(
        default_factory=list,
        max_length=MAX_MODELS,
        description=f"Served models (at most {MAX_MODELS}: a stack is one team's serving fleet).",
    )
    catalog: CatalogExtensions = Field(
        default_factory=CatalogExtensions,
        description="Catalogue entries this stack adds, without code changes.",
    )
    inference_gateway: InferenceGatewaySpec = Field(
        default_factory=InferenceGatewaySpec,
        description="The inference gateway (used by models with routing.mode inference-gateway).",
    )
