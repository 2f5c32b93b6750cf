"""K001 gpu-requests-equal-limits."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.core.quantity import parse_quantity
from gpustrata.core.unknown import known
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._common import (
    fmt,
)
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.objects import K8sObject, is_gpu_resource


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """Every GPU request has a limit, and equals it."""
    extra = ctx.config.gpu_resources
    for c in obj.containers():
        limits, requests = c.resources("limits"), c.resources("requests")
        for name in sorted(requests):
            if not is_gpu_resource(name, extra):
                continue
            req = known(requests[name], f"requests.{name} of {c.label}")
            path = (*c.path, "resources", "requests", name)
            if name not in limits:
                yield ctx.violation(
                    obj,
                    f"{c.label} requests {name}: {fmt(req)} but sets no limit; the API server "
                    "rejects it (Limit must be set for non overcommitable resources)",
                    path,
                )
                continue
            lim = known(limits[name], f"limits.{name} of {c.label}")
            q_req, q_lim = parse_quantity(req), parse_quantity(lim)
            if q_req is None or q_lim is None:  # .nan, "abc": no comparison means anything
                bad = sorted({fmt(v) for v, q in ((req, q_req), (lim, q_lim)) if q is None})
                yield ctx.violation(
                    obj,
                    f"{c.label} requests {name}: {fmt(req)} and limits it to {fmt(lim)}; "
                    f"{' and '.join(bad)} is not a quantity, so the API server rejects it",
                    path,
                )
                continue
            if q_req != q_lim:
                yield ctx.violation(
                    obj,
                    f"{c.label} requests {name}: {fmt(req)} but limits it to {fmt(lim)}; the API "
                    f"server rejects it (must be equal to {name} limit of {fmt(lim)})",
                    path,
                )


RULE = folder_rule(__name__, check)
