"""K001 gpu-requests-equal-limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from gpustrata.core.quantity import parse_quantity
from gpustrata.core.unknown import known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import fmt
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.objects import K8sObject, is_gpu_resource


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Every GPU request has a limit, and equals it."""
    extra = ctx.config.gpu_resources
    for c in obj.containers():
        limits, requests = c.resources("limits"), c.resources("requests")
        for name in sorted(requests):
            if not is_gpu_resource(name, extra):
                continue
            req = known(requests[name], f"requests.{name} of {c.label}")
            path = (*c.path, "resources", "requests", name)
            values: dict[str, Value] = {"container": c.label, "resource": name, "request": fmt(req)}
            if name not in limits:
                yield Verdict("violation", "no-limit", values=values, path=path)
                continue
            lim = known(limits[name], f"limits.{name} of {c.label}")
            q_req, q_lim = parse_quantity(req), parse_quantity(lim)
            values = {**values, "limit": fmt(lim), "request_q": q_req, "limit_q": q_lim}
            if q_req is None or q_lim is None:  # .nan, "abc": no comparison means anything
                bad = sorted({fmt(v) for v, q in ((req, q_req), (lim, q_lim)) if q is None})
                values = {**values, "not_quantities": tuple(bad)}
                yield Verdict("violation", "not-a-quantity", values=values, path=path)
                continue
            if q_req != q_lim:
                yield Verdict("violation", "request-not-limit", values=values, path=path)


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K001 message quotes beyond its values: the values that are no quantity."""
    return {"bad": " and ".join(cast(tuple[str, ...], verdict.values.get("not_quantities", ())))}


RULE = folder_rule(__name__, worded(judge, fields))
