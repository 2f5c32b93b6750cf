"""V008 no-eager-in-production."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Verdict, worded
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.objects import K8sObject

DEEPEP_HT = "deepep_high_throughput"


def _graphs_off_anyway(site: EngineSite) -> bool:
    """vLLM turns CUDA graphs off itself for DeepEP high-throughput with data parallelism
    (config/compilation.py), so enforce_eager changes nothing there."""
    env = site.container.literal_env() if site.container is not None else {}
    backend = site.flag("all2all_backend") or env.get("VLLM_ALL2ALL_BACKEND")
    dp = site.int_flag("data_parallel_size") if site.flag("data_parallel_size") else 1
    return str(backend) == DEEPEP_HT and isinstance(dp, int) and dp > 1


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """enforce_eager is off (production: mandatory)."""
    for site in engine_sites(ctx, obj, ray_pods=True):
        if not site.flag_on("enforce_eager") or _graphs_off_anyway(site):
            continue
        if site.container is not None:
            yield Verdict(
                "violation",
                "enforce-eager",
                values={"engine": site.label, "how": "--enforce-eager"},
                path=(*site.container.path, "args"),
            )
            continue
        model = site.engine.model
        yield Verdict(
            "violation",
            "enforce-eager",
            values={
                "engine": f"engine '{model}'" if model else site.label,
                "how": "engine_kwargs enforce_eager: true",
            },
            path=("spec", "serveConfigV2"),
        )


RULE = folder_rule(__name__, worded(judge))
