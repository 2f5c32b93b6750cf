"""InferenceGateway and InferenceRoute: the serving edge of models behind the Gateway API
Inference Extension (objects and values from :mod:`gpustrata.render.routing`)."""

from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from gpustrata.components._helm import pinned_release
from gpustrata.components._options import child_options
from gpustrata.components.serving import register_object


class InferenceGatewayArgs(TypedDict):
    """Inputs of :class:`InferenceGateway`."""

    namespace: str
    """Namespace of the gateway controller."""
    crds: list[dict[str, Any]]
    """CustomResourceDefinitions to apply first (Gateway API, then GAIE)."""
    repository: str
    """Helm repository of the implementation's charts."""
    chart_version: str
    """Version of the implementation's charts (pinned)."""
    crd_chart: str
    """The implementation's chart that installs its own CRDs (``base``)."""
    controller_chart: str
    """The implementation's controller chart (``istiod``)."""
    controller_values: dict[str, Any]
    """Values of the controller chart (inference extension on, system pool)."""


class InferenceGateway(pulumi.ComponentResource):
    """The gateway's CRDs and controller: Gateway API and GAIE CRDs, then the
    implementation's CRD chart, then its controller (a release that waits for its Pods)."""

    ready: list[pulumi.Resource]
    """What Gateways and InferencePools must wait for."""

    def __init__(
        self, name: str, args: InferenceGatewayArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpustrata:index:InferenceGateway", name, {}, opts)
        crds: list[pulumi.Resource] = []
        for crd in args["crds"]:
            crds.append(
                k8s.apiextensions.v1.CustomResourceDefinition(
                    f"{name}-crd-{crd['metadata']['name']}",
                    metadata=crd["metadata"],
                    spec=crd["spec"],
                    opts=child_options(self, opts),
                )
            )
        ns = k8s.core.v1.Namespace(
            f"{name}-ns", metadata={"name": args["namespace"]}, opts=child_options(self, opts)
        )

        def release(
            chart: str, values: dict[str, Any], after: list[pulumi.Resource]
        ) -> k8s.helm.v3.Release:
            """A chart of the implementation, from its repository at the pinned version."""
            return pinned_release(
                self,
                f"{name}-{chart}",
                opts,
                release=chart,
                chart=chart,
                version=args["chart_version"],
                namespace=args["namespace"],
                values=values,
                repository=args["repository"],
                depends_on=after,
            )

        base = release(args["crd_chart"], {}, [ns])
        controller = release(args["controller_chart"], args["controller_values"], [ns, base, *crds])
        self.ready = [*crds, base, controller]
        self.register_outputs({})


class InferenceRouteArgs(TypedDict):
    """Inputs of :class:`InferenceRoute`."""

    namespace: str
    """Namespace of the model."""
    chart: str
    """GAIE's inferencepool chart."""
    chart_version: str
    """Its version (the GAIE release)."""
    repository: str
    """Where the chart is published (OCI)."""
    values: dict[str, Any]
    """Chart values (render.routing.pool_values)."""
    pool: dict[str, Any]
    """The InferencePool the chart renders (the rules read it: G001, G002)."""
    route: dict[str, Any]
    """The HTTPRoute from the Gateway to the pool."""


class InferenceRoute(pulumi.ComponentResource):
    """One model behind the inference gateway: GAIE's inferencepool release (its
    InferencePool and endpoint picker, awaited) and the HTTPRoute to the pool.

    Its ``description`` input is the InferencePool the chart creates, so the rules check
    the pool's selector and port against the engines (G002) and follow the route to them
    (G001)."""

    def __init__(
        self, name: str, args: InferenceRouteArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(
            "gpustrata:index:InferenceRoute", name, {"description": args["pool"]}, opts
        )
        release = pinned_release(
            self,
            f"{name}-release",
            opts,
            release=args["pool"]["metadata"]["name"],
            chart=f"{args['repository']}/{args['chart']}",
            version=args["chart_version"],
            namespace=args["namespace"],
            values=args["values"],
        )
        register_object(f"{name}-httproute", args["route"], child_options(self, opts, [release]))
        self.register_outputs({})
