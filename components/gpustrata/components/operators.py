"""GpuOperator and KubeRayOperator: pinned Helm releases."""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
import yaml

from gpustrata.catalog.dra import dra_driver_release_of
from gpustrata.components._helm import pinned_release
from gpustrata.components._inputs import Placeholders
from gpustrata.components._options import child_options
from gpustrata.render.operators import (
    GPU_OPERATOR_REPO,
    KUBERAY_REPO,
    gpu_operator_description,
)


class GpuOperatorArgs(TypedDict):
    """Inputs of :class:`GpuOperator`."""

    namespace: pulumi.Input[str]
    """Namespace of the operator."""
    chart_version: str
    """gpu-operator chart version (pinned)."""
    values: dict[str, Any]
    """Chart values (rendered by gpustrata.render.operators.gpu_operator_values)."""
    device_plugin_config: dict[str, Any]
    """Device-plugin sharing config ({} for none), stored in a ConfigMap."""
    declared_overrides: NotRequired[list[str]]
    """Components whose version differs from the release's tested set on purpose."""


class GpuOperator(pulumi.ComponentResource):
    """The NVIDIA GPU Operator: namespace, optional sharing ConfigMap, Helm release.

    Its ``description`` input is the ``GpuOperator`` object the policy rules read (chart
    version, values, declared overrides), like :class:`GpuNodePool`'s pool description.
    """

    release_name: pulumi.Output[str]
    """Name of the Helm release."""

    def __init__(
        self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        inputs = Placeholders()
        description = inputs.restore(
            gpu_operator_description(
                namespace=inputs.plain(args["namespace"]),
                chart_version=args["chart_version"],
                values=args["values"],
                declared_overrides=list(args.get("declared_overrides", [])),
            )
        )
        super().__init__("gpustrata:index:GpuOperator", name, {"description": description}, opts)
        # Its children wait for what it waits for (the GPU node groups).
        ns = _namespace(self, name, args["namespace"], opts)
        depends: list[pulumi.Resource] = [ns]
        if args["device_plugin_config"]:
            cm = k8s.core.v1.ConfigMap(
                f"{name}-device-plugin-config",
                metadata={"name": "gpustrata-device-plugin-config", "namespace": args["namespace"]},
                data={"shared": yaml.safe_dump(args["device_plugin_config"], sort_keys=False)},
                opts=child_options(self, opts, [ns]),
            )
            depends.append(cm)
        # GPU workloads depend on this release; it waits until the operator's pods are ready.
        release = _release(
            self, f"{name}-release", "gpu-operator", GPU_OPERATOR_REPO, args, opts, depends
        )
        self.release_name = release.name.apply(lambda n: n or "")
        self.register_outputs({"release_name": self.release_name})


class KubeRayOperatorArgs(TypedDict):
    """Inputs of :class:`KubeRayOperator`."""

    namespace: pulumi.Input[str]
    """Namespace of the operator."""
    chart_version: str
    """kuberay-operator chart version (pinned)."""
    values: dict[str, Any]
    """Chart values."""


class KubeRayOperator(pulumi.ComponentResource):
    """The KubeRay operator (and its CRDs) as a pinned Helm release."""

    release_name: pulumi.Output[str]
    """Name of the Helm release."""

    def __init__(
        self, name: str, args: KubeRayOperatorArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:KubeRayOperator", name, {}, opts)
        ns = _namespace(self, name, args["namespace"], opts)
        release = _release(
            self, f"{name}-release", "kuberay-operator", KUBERAY_REPO, args, opts, [ns]
        )
        self.release_name = release.name.apply(lambda n: n or "")
        self.register_outputs({"release_name": self.release_name})


class DraDriverArgs(TypedDict):
    """Inputs of :class:`DraDriver`."""

    namespace: pulumi.Input[str]
    """Namespace of the driver."""
    chart_version: str
    """DRA driver chart version (pinned: a catalogued release of NVIDIA's
    nvidia-dra-driver-gpu or of the kubernetes-sigs dra-driver-nvidia-gpu)."""
    values: dict[str, Any]
    """Chart values (rendered by gpustrata.render.dra.dra_driver_values)."""


class DraDriver(pulumi.ComponentResource):
    """The NVIDIA DRA driver for GPUs (NVIDIA's ``nvidia-dra-driver-gpu`` or the
    kubernetes-sigs ``dra-driver-nvidia-gpu``, by the catalogued release of *chart_version*)
    as a pinned Helm release, for the pools whose GPUs are allocated by DRA
    (``gpu_allocation: dra``)."""

    release_name: pulumi.Output[str]
    """Name of the Helm release."""

    def __init__(
        self, name: str, args: DraDriverArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:DraDriver", name, {}, opts)
        ns = _namespace(self, name, args["namespace"], opts)
        release = dra_driver_release_of(args["chart_version"])
        helm = _release(
            self, f"{name}-release", release.chart_ref, release.repository, args, opts, [ns]
        )
        self.release_name = helm.name.apply(lambda n: n or "")
        self.register_outputs({"release_name": self.release_name})


class SystemChartArgs(TypedDict):
    """Inputs of :class:`SystemChart`."""

    chart: str
    """Chart name."""
    repository: str
    """Chart repository URL."""
    namespace: pulumi.Input[str]
    """Namespace of the release (created)."""
    chart_version: str
    """Chart version (pinned)."""
    values: dict[str, Any]
    """Chart values (its controllers on the system pool)."""


class SystemChart(pulumi.ComponentResource):
    """A pinned chart whose controllers run on the system pool (KEDA, kube-prometheus-stack,
    LeaderWorkerSet; the EFA device plugin's DaemonSet on GPU nodes): namespace (never
    ``kube-system``, which the cluster owns) and a Helm release that waits for its Pods."""

    release: k8s.helm.v3.Release
    """The Helm release (custom resources of the chart's CRDs depend on it)."""

    def __init__(
        self, name: str, args: SystemChartArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:SystemChart", name, {}, opts)
        ns: list[pulumi.Resource] = []
        if args["namespace"] != "kube-system":  # the cluster's own: never created or deleted
            ns.append(_namespace(self, name, args["namespace"], opts))
        self.release = _release(
            self, f"{name}-release", args["chart"], args["repository"], args, opts, ns
        )
        self.register_outputs({})


def _namespace(
    parent: pulumi.Resource,
    name: str,
    namespace: pulumi.Input[str],
    opts: pulumi.ResourceOptions | None,
) -> k8s.core.v1.Namespace:
    """The namespace a release of component *name* installs into (``<name>-ns``)."""
    return k8s.core.v1.Namespace(
        f"{name}-ns", metadata={"name": namespace}, opts=child_options(parent, opts)
    )


def _release(
    parent: pulumi.Resource,
    name: str,
    chart: str,
    repo: str,
    args: GpuOperatorArgs | KubeRayOperatorArgs | DraDriverArgs | SystemChartArgs,
    opts: pulumi.ResourceOptions | None,
    depends_on: list[pulumi.Resource],
) -> k8s.helm.v3.Release:
    """The component's pinned release of *chart* (from *repo*, unless an OCI reference,
    which names the chart itself) at its ``chart_version``, in its ``namespace``."""
    return pinned_release(
        parent,
        name,
        opts,
        release=chart.rsplit("/", 1)[-1],
        chart=chart,
        version=args["chart_version"],
        namespace=args["namespace"],
        values=args["values"],
        repository=None if chart.startswith("oci://") else repo,
        depends_on=depends_on,
    )
