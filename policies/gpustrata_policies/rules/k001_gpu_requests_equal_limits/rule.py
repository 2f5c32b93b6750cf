"""K001 gpu-requests-equal-limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from gpustrata.core.quantity import parse_quantity
from gpustrata.core.unknown import known
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import fmt
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, judged
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


def message(verdict: Verdict) -> str:
    """The prose of a K001 verdict."""
    v = verdict.values
    head = f"{v['container']} requests {v['resource']}: {v['request']}"
    if verdict.reason == "no-limit":
        return (
            f"{head} but sets no limit; the API server rejects it (Limit must be set for non "
            "overcommitable resources)"
        )
    if verdict.reason == "not-a-quantity":
        bad = " and ".join(cast(tuple[str, ...], v["not_quantities"]))
        return (
            f"{head} and limits it to {v['limit']}; {bad} is not a quantity, so the API server "
            "rejects it"
        )
    return (
        f"{head} but limits it to {v['limit']}; the API server rejects it (must be equal to "
        f"{v['resource']} limit of {v['limit']})"
    )


RULE = folder_rule(__name__, judged(judge, message))
