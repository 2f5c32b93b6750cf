"""Resource options shared by the components."""

import pulumi


def child_options(
    parent: pulumi.Resource,
    opts: pulumi.ResourceOptions | None,
    depends_on: list[pulumi.Resource] | None = None,
) -> pulumi.ResourceOptions:
    """Options for a component's child: parented to it, and carrying the component's own
    ``depends_on`` (plus *depends_on*) itself, so the order (GPU nodes, operators, CRDs
    first) is an edge of every custom resource in the engine's graph, which ``pulumi
    destroy`` and the state keep too, not only implied by the parent's registration."""
    inherited = pulumi.ResourceOptions(parent=parent, depends_on=opts.depends_on if opts else None)
    return pulumi.ResourceOptions.merge(inherited, pulumi.ResourceOptions(depends_on=depends_on))
