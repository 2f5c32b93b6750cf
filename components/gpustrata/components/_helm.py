"""The Helm release every component installs its chart with."""

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from gpustrata.components._options import child_options


def pinned_release(
    parent: pulumi.Resource,
    name: str,
    opts: pulumi.ResourceOptions | None,
    *,
    release: str,
    chart: str,
    version: str,
    namespace: pulumi.Input[str],
    values: dict[str, Any],
    repository: str | None = None,
    depends_on: list[pulumi.Resource] | None = None,
) -> k8s.helm.v3.Release:
    """Helm release *release* of *chart* pinned at *version*, a child of *parent* (its
    options from :func:`~gpustrata.components._options.child_options`), that waits for its
    resources (``skip_await`` off, 15 minutes), so what depends on it waits for the chart's
    Pods. *repository* is the chart repository; None where *chart* names the chart itself
    (an OCI reference, a repository-qualified name)."""
    return k8s.helm.v3.Release(
        name,
        name=release,
        chart=chart,
        version=version,
        namespace=namespace,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=repository) if repository else None,
        values=values,
        skip_await=False,
        timeout=900,
        opts=child_options(parent, opts, depends_on),
    )
