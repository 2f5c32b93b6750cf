"""The cluster profile: what a cluster is, stated once by its users, for ``gpustrata check``.

Manifests say what they ask for, not what the cluster they land on is: which GPU a site
label (``gpuspecs=A100_40GB``) or an instance type stands for, the taints GPU nodes carry,
whether the ExtendedResourceToleration admission plugin is on, the node pools and their
sizes, driver and KubeRay versions, the vLLM release inside a private image, the CRDs
already installed and how fast model weights load. A profile states those facts in one
YAML file (``.gpustrata/cluster.yaml`` next to the manifests, or ``check --profile FILE``;
``gpustrata profile --from-nodes`` writes one from ``kubectl get nodes -o yaml``).

The models live in the catalogue layer because the rules' view reads them (it imports
only core, catalogue and vLLM) and because a profile is the site's own catalogue: its GPU
ids are the hardware catalogue's. The file is read with line numbers by
:mod:`gpustrata.spec.profile_file`; the rules get the profile through
``gpustrata_policies.view.profile`` and its pools as ``GpuNodePool`` descriptions
(:meth:`ClusterProfile.pool_objects`), the form the view already reads.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from gpustrata.catalog.inputs import StorageKind, StrictModel, Taint, WeightSource
from gpustrata.core.contract import API_VERSION, CLUSTER_PROFILE_ANNOTATION, CLUSTER_PROFILE_FILE

__all__ = [
    "CLUSTER_PROFILE_FILE",
    "AdmissionProfile",
    "ClusterProfile",
    "Distribution",
    "GpuProduct",
    "ImageRelease",
    "PoolProfile",
    "StorageProfile",
    "VersionsProfile",
]

Distribution = Literal["eks", "gke", "aks", "kubeadm", "openshift", "rke2", "k3s", "other"]

_LABEL_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SELECTOR = re.compile(rf"^(?P<key>{_LABEL_KEY})=(?P<value>[-A-Za-z0-9_.]*)$")
_VERSION = r"^v?\d+(\.\d+){0,3}([-+.][0-9A-Za-z.-]+)?$"
_CRD = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/([A-Z][A-Za-z0-9]*|\*)$")


def _known_gpu(value: str) -> str:
    """*value* when the hardware catalogue knows it (an id or a GFD product label)."""
    from gpustrata.catalog.hardware import load_hardware_catalog

    catalog = load_hardware_catalog()
    if catalog.gpu(value) is None:
        known = ", ".join(sorted(catalog.gpus))
        raise ValueError(
            f"{value!r} is not a GPU of the hardware catalogue; use one of its ids ({known}) "
            "or a GPU Feature Discovery nvidia.com/gpu.product value"
        )
    return value


class _Model(StrictModel):
    """Base of the profile's models: the stack's strict input rules, frozen."""

    model_config = ConfigDict(frozen=True, validate_assignment=False)


class GpuProduct(_Model):
    """Which GPU the nodes with one label value, or of one instance type, carry."""

    node_label: str | None = Field(
        default=None,
        description="A node label as KEY=VALUE that only nodes of this GPU carry, e.g. "
        "gpuspecs=A100_40GB (a site's own label). Pods that select it get this GPU.",
        examples=["gpuspecs=A100_40GB"],
        json_schema_extra={"fix": "write it as KEY=VALUE, e.g. gpuspecs=A100_40GB"},
    )
    instance_type: str | None = Field(
        default=None,
        min_length=1,
        description="An instance type (node.kubernetes.io/instance-type) whose GPU the "
        "hardware catalogue does not list, e.g. a new cloud size or an on-premises server.",
    )
    gpu: str = Field(
        description="The GPU: a hardware catalogue id (h100-sxm-80gb, a100-sxm-40gb, l4, ...) "
        "or a GPU Feature Discovery nvidia.com/gpu.product value.",
        examples=["a100-sxm-40gb"],
    )
    gpus_per_node: int | None = Field(
        default=None, ge=1, le=64, description="GPUs on each such node, when known."
    )

    @field_validator("node_label")
    @classmethod
    def _selector(cls, value: str | None) -> str | None:
        if value is not None and not _SELECTOR.match(value):
            raise ValueError(
                f"{value!r} is not a node label as KEY=VALUE; write it like gpuspecs=A100_40GB"
            )
        return value

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str) -> str:
        return _known_gpu(value)

    @model_validator(mode="after")
    def _one_key(self) -> GpuProduct:
        if (self.node_label is None) == (self.instance_type is None):
            raise ValueError(
                "state exactly one of node_label (KEY=VALUE) and instance_type for this GPU"
            )
        return self

    @property
    def label(self) -> tuple[str, str] | None:
        """``(key, value)`` of :attr:`node_label`."""
        if self.node_label is None:
            return None
        key, _, value = self.node_label.partition("=")
        return key, value


class AdmissionProfile(_Model):
    """The cluster's admission plugins that change how GPU Pods are admitted."""

    extended_resource_toleration: bool | None = Field(
        default=None,
        description="Is the ExtendedResourceToleration admission plugin on (it gives a Pod "
        "requesting nvidia.com/gpu a toleration for taints keyed nvidia.com/gpu)? Unset: "
        "the distribution's default where gpustrata cites one (EKS, GKE, AKS: on; "
        "kubeadm: off), else unknown.",
    )


class PoolProfile(_Model):
    """A node pool, read by the rules as a GpuNodePool description."""

    name: str = Field(
        min_length=1,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Pool name (a DNS-1123 name, like the node group's).",
        json_schema_extra={"fix": "use lowercase letters, digits, '-' and '.'"},
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Labels every node of the pool carries."
    )
    instance_type: str | None = Field(
        default=None, description="The nodes' node.kubernetes.io/instance-type."
    )
    gpu: str | None = Field(
        default=None,
        description="The nodes' GPU: a hardware catalogue id or a GFD product value. Unset: "
        "from the instance type, the labels or gpu_products.",
    )
    gpus_per_node: int | None = Field(
        default=None, ge=0, le=64, description="GPUs per node (0 for a CPU pool)."
    )
    taints: list[Taint] | None = Field(
        default=None,
        description="The nodes' taints. Unset: gpu_taints for a GPU pool, none for a CPU pool.",
    )
    min_size: int | None = Field(default=None, ge=0, description="Fewest nodes.")
    max_size: int | None = Field(default=None, ge=0, description="Most nodes.")
    driver_version: str | None = Field(
        default=None,
        pattern=_VERSION,
        description="NVIDIA driver on the nodes. Unset: versions.nvidia_driver.",
    )

    @field_validator("gpu")
    @classmethod
    def _gpu(cls, value: str | None) -> str | None:
        return None if value is None else _known_gpu(value)

    @model_validator(mode="after")
    def _sizes(self) -> PoolProfile:
        low, high = self.min_size, self.max_size
        if low is not None and high is not None and low > high:
            raise ValueError(
                f"min_size {low} is above max_size {high}; swap them or raise max_size"
            )
        return self


class VersionsProfile(_Model):
    """Versions of what runs on the cluster."""

    kubernetes: str | None = Field(
        default=None,
        pattern=r"^v?1\.\d+(\.\d+)?$",
        description="Kubernetes version of the nodes (kubelet), e.g. 1.31.",
        examples=["1.31"],
    )
    nvidia_driver: str | None = Field(
        default=None,
        pattern=_VERSION,
        description="NVIDIA driver version on the GPU nodes, e.g. 570.133.20.",
        examples=["570.133.20"],
    )
    gpu_operator: str | None = Field(
        default=None,
        pattern=_VERSION,
        description="NVIDIA GPU Operator release, e.g. v25.3.0 (recorded; the rules read "
        "the operator's configuration from its installation objects).",
        examples=["v25.3.0"],
    )
    kuberay: str | None = Field(
        default=None,
        pattern=_VERSION,
        description="KubeRay operator release, e.g. 1.3.2.",
        examples=["1.3.2"],
    )
    kserve: str | None = Field(
        default=None,
        pattern=_VERSION,
        description="KServe release installed, e.g. 0.20.0: its well-known "
        "LLMInferenceServiceConfig presets (image, probes, /dev/shm) are merged under each "
        "LLMInferenceService as the controller does.",
        examples=["0.20.0"],
    )
    kubeai: str | None = Field(
        default=None,
        pattern=_VERSION,
        description="KubeAI Helm chart release installed with its default values, e.g. "
        "0.21.0: its resourceProfiles (GPUs per unit, tolerations, node selector) and "
        "modelServers.VLLM.images (so the vLLM release) complete each KubeAI Model as the "
        "controller does.",
        examples=["0.21.0"],
    )
    llmaz: str | None = Field(
        default=None,
        pattern=_VERSION,
        description="llmaz release installed with its chart's default vLLM BackendRuntime, "
        "e.g. 0.1.4: the image (so the vLLM release) each Playground on backend vllm runs.",
        examples=["0.1.4"],
    )
    kaito: str | None = Field(
        default=None,
        pattern=_VERSION,
        description="KAITO release installed, e.g. 0.12.0: the image (so the vLLM release), "
        "--gpu-memory-utilization, engine layout and node count (its node estimator) it gives "
        "a preset Workspace or InferenceSet, and for 0.12.0 the Pods it builds.",
        examples=["0.12.0"],
    )


class ImageRelease(_Model):
    """The vLLM release inside images whose reference the tag does not reveal."""

    pattern: str = Field(
        min_length=1,
        description="Image references it applies to, as a shell glob over the whole "
        "reference (registry/repository:tag), e.g. registry.example.com/ml/vllm:*.",
        examples=["registry.example.com/ml/vllm:*"],
    )
    vllm: str = Field(
        pattern=r"^v?\d+\.\d+(\.\d+){0,2}$",
        description="The vLLM release those images run, e.g. 0.8.5.",
        examples=["0.8.5"],
        json_schema_extra={"fix": "write the release as 0.8.5"},
    )

    def matches(self, image: str) -> bool:
        """Does *image* match :attr:`pattern`?"""
        return fnmatch.fnmatchcase(image, self.pattern)


class StorageProfile(_Model):
    """How fast the nodes read model weights, per source (GB/s)."""

    load_gbps: dict[WeightSource, float] = Field(
        default_factory=dict,
        description="Sustained read bandwidth in GB/s per weight source (huggingface: "
        "download from the Hub or its mirror; s3: object store; pvc: a PersistentVolume; "
        "local-nvme: instance storage). Replaces the fitted default in V009's startup "
        "estimate.",
        examples=[{"pvc": 1.2}],
    )

    kind: dict[WeightSource, StorageKind] = Field(
        default_factory=dict,
        description="What vLLM's loader reads each weight source from (local-disk, ebs, "
        "network-volume): the startup estimate takes the load bandwidth fitted on published "
        "logs of that storage. Unset: a range from the slowest to the fastest kind.",
        examples=[{"pvc": "network-volume"}],
    )

    @field_validator("load_gbps")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        for source, gbps in value.items():
            if not 0 < gbps <= 1000:
                raise ValueError(
                    f"load_gbps of {source}: {gbps} GB/s is not in (0, 1000]; state the "
                    "measured read bandwidth in GB/s"
                )
        return value


class ClusterProfile(_Model):
    """What the manifests cannot say about the cluster they are for. Every key is optional:
    a fact left out stays unknown, and rules that need it say "not evaluated"."""

    kind: Literal["ClusterProfile"] = Field(
        default="ClusterProfile",
        description="Always ClusterProfile (so the file is recognised when checked as a manifest).",
    )
    distribution: Distribution = Field(
        default="other",
        description="Kubernetes distribution; gives the admission defaults gpustrata "
        "cites (eks, gke, aks: ExtendedResourceToleration on; kubeadm: off).",
    )
    admission: AdmissionProfile = Field(
        default_factory=AdmissionProfile,
        description="Admission plugins that change how GPU Pods are admitted.",
    )
    gpu_products: list[GpuProduct] = Field(
        default_factory=list,
        description="GPU per site node label (KEY=VALUE) or per instance type.",
    )
    gpu_taints: list[Taint] | None = Field(
        default=None,
        description="The taints GPU nodes carry (the default of each GPU pool's taints). "
        "An empty list: GPU nodes are not tainted.",
    )
    pools: list[PoolProfile] = Field(
        default_factory=list, description="Node pools, with their sizes and GPUs."
    )
    versions: VersionsProfile = Field(
        default_factory=VersionsProfile,
        description="Driver, operator, KubeRay and KServe versions.",
    )
    images: list[ImageRelease] = Field(
        default_factory=list,
        description="The vLLM release of private or vendor images; the first matching "
        "pattern wins.",
    )
    crds: list[str] | None = Field(
        default=None,
        description="CustomResourceDefinitions installed in the cluster, as group/Kind "
        "(ray.io/RayService) or group/* for every kind of a group: `kubectl get crd -o "
        "jsonpath='{range .items[*]}{.spec.group}/{.spec.names.kind}{\"\\n\"}{end}'`. "
        "Unset: unknown; an empty list: none.",
    )
    device_classes: list[str] | None = Field(
        default=None,
        description="DRA DeviceClasses the cluster has (gpu.nvidia.com once the NVIDIA DRA "
        "driver runs), by name: `kubectl get deviceclass -o "
        "jsonpath='{.items[*].metadata.name}'`. Unset: unknown; an empty list: none.",
    )
    kubeai_values: list[Annotated[str, Field(pattern=r"^values-[\w.-]+\.yaml$")]] = Field(
        default_factory=list,
        description="The KubeAI chart's own values files the installation was made with, in "
        "order (helm -f), e.g. values-gke.yaml or values-eks.yaml: merged over the chart's "
        "defaults of versions.kubeai, they give each resource profile its node selector (so "
        "the GPU model).",
        examples=[["values-gke.yaml"]],
    )
    storage: StorageProfile = Field(
        default_factory=StorageProfile, description="Model-loading bandwidth."
    )

    @field_validator("crds")
    @classmethod
    def _crds(cls, value: list[str] | None) -> list[str] | None:
        for crd in value or []:
            if not _CRD.match(crd):
                raise ValueError(
                    f"{crd!r} is not group/Kind; write it like ray.io/RayService or "
                    "monitoring.coreos.com/*"
                )
        return value

    @model_validator(mode="after")
    def _pools(self) -> ClusterProfile:
        names = [p.name for p in self.pools]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"pool names repeat ({', '.join(repeated)}); give each pool one")
        if self.gpu_taints is None:
            for obj in self.pool_objects():
                if obj["spec"].get("taintsUnknown"):
                    raise ValueError(
                        f"pool {obj['metadata']['name']} has GPUs but neither its taints nor "
                        "gpu_taints are stated; state them ([] for untainted nodes)"
                    )
        return self

    # ------------------------------------------------------------------ look-ups

    def gpu_of_labels(self, labels: Mapping[str, Any]) -> GpuProduct | None:
        """The ``gpu_products`` entry whose node label *labels* select, or ``None``."""
        for product in self.gpu_products:
            pair = product.label
            if pair is not None and labels.get(pair[0]) == pair[1]:
                return product
        return None

    def gpu_of_instance(self, instance_type: str) -> GpuProduct | None:
        """The ``gpu_products`` entry of *instance_type*, or ``None``."""
        for product in self.gpu_products:
            if product.instance_type == instance_type:
                return product
        return None

    def image_release(self, image: str) -> ImageRelease | None:
        """The first ``images`` entry whose pattern matches *image*, or ``None``."""
        return next((entry for entry in self.images if entry.matches(image)), None)

    def crd_installed(self, group_kind: str) -> bool | None:
        """Does the profile list *group_kind* (``group/Kind``)? ``None`` when it lists no
        CRDs at all (unknown)."""
        if self.crds is None:
            return None
        group = group_kind.rsplit("/", 1)[0]
        return group_kind in self.crds or f"{group}/*" in self.crds

    def pool_objects(self, file: str | None = None) -> list[dict[str, Any]]:
        """The pools as ``GpuNodePool`` descriptions (``gpustrata.io/v1alpha1``), the form
        the view reads pools in. A pool's GPU and count not stated come from
        ``gpu_products`` (its instance type or labels), else the hardware catalogue's
        instance type; a GPU pool without taints of its own gets ``gpu_taints``."""
        out = []
        for pool in self.pools:
            gpu = pool.gpu
            count = pool.gpus_per_node
            if pool.instance_type is not None and (gpu is None or count is None):
                product = self.gpu_of_instance(pool.instance_type)
                if product is not None:
                    gpu = gpu or product.gpu
                    count = count if count is not None else product.gpus_per_node
                else:  # the hardware catalogue's instance types
                    from gpustrata.catalog.hardware import load_hardware_catalog

                    inst = load_hardware_catalog().instance(pool.instance_type)
                    if inst is not None:
                        gpu = gpu or inst.gpu
                        count = count if count is not None else inst.gpu_count
            if gpu is None:
                product = self.gpu_of_labels(pool.labels)
                if product is not None:
                    gpu = product.gpu
                    count = count if count is not None else product.gpus_per_node
            has_gpus = bool(gpu) or bool(count)
            taints = pool.taints
            if taints is None:
                taints = (self.gpu_taints or []) if has_gpus else []
            spec: dict[str, Any] = {
                "labels": dict(pool.labels),
                "taints": [t.model_dump() for t in taints],
                "source": "ClusterProfile",
            }
            if has_gpus and pool.taints is None and self.gpu_taints is None:
                spec["taintsUnknown"] = True  # refused by validation
            optional = {
                "instanceType": pool.instance_type,
                "gpuProduct": gpu,
                "gpuCount": count,
                "minSize": pool.min_size,
                "maxSize": pool.max_size,
                "kubernetesVersion": self.versions.kubernetes,
                "driverVersion": pool.driver_version or self.versions.nvidia_driver,
            }
            spec.update({k: v for k, v in optional.items() if v is not None})
            annotations = {CLUSTER_PROFILE_ANNOTATION: file} if file else {}
            out.append(
                {
                    "apiVersion": API_VERSION,
                    "kind": "GpuNodePool",
                    "metadata": {"name": pool.name, "annotations": annotations},
                    "spec": spec,
                }
            )
        return out
