"""V008 no-eager-in-production."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
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


def _message(where: str, how: str) -> str:
    return (
        f"{where} runs vLLM with enforce_eager ({how}): no CUDA graphs and no torch.compile, "
        "so every decode step launches its kernels one by one and serves fewer tokens per "
        "second at higher latency"
    )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """enforce_eager is off (production: mandatory)."""
    for site in engine_sites(ctx, obj, ray_pods=True):
        if not site.flag_on("enforce_eager") or _graphs_off_anyway(site):
            continue
        if site.container is not None:
            yield ctx.violation(
                obj, _message(site.label, "--enforce-eager"), (*site.container.path, "args")
            )
            continue
        model = site.engine.model
        yield ctx.violation(
            obj,
            _message(
                f"engine '{model}'" if model else site.label, "engine_kwargs enforce_eager: true"
            ),
            ("spec", "serveConfigV2"),
        )


RULE = folder_rule(__name__, check)
