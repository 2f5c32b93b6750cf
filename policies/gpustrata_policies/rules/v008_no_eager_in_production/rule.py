"""V008 no-eager-in-production."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.ray import container_engines, flag_is_on
from gpustrata_policies.view.vllm_args import EngineArgs, serve_config

DEEPEP_HT = "deepep_high_throughput"


def _graphs_off_anyway(engine: EngineArgs, env: dict[str, str]) -> bool:
    """vLLM turns CUDA graphs off itself for DeepEP high-throughput with data parallelism
    (config/compilation.py), so enforce_eager changes nothing there."""
    backend = engine.get("all2all_backend") or env.get("VLLM_ALL2ALL_BACKEND")
    dp = engine.get_int("data_parallel_size") if engine.get("data_parallel_size") else 1
    return str(backend) == DEEPEP_HT and (dp or 1) > 1


def _message(where: str, how: str) -> str:
    return (
        f"{where} runs vLLM with enforce_eager ({how}): no CUDA graphs and no torch.compile, "
        "so every decode step launches its kernels one by one and serves fewer tokens per "
        "second at higher latency"
    )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """enforce_eager is off (production: mandatory)."""
    for container, engine in container_engines(obj):
        if not flag_is_on(engine.get("enforce_eager")):
            continue
        if _graphs_off_anyway(engine, container.literal_env()):
            continue
        yield ctx.violation(
            obj, _message(container.label, "--enforce-eager"), (*container.path, "args")
        )
    if obj.kind != "RayService":
        return
    cfg = serve_config(obj)
    for engine in cfg.engines if cfg else []:
        if flag_is_on(engine.get("enforce_eager")) and not _graphs_off_anyway(engine, {}):
            where = f"engine '{engine.model}'" if engine.model else engine.source
            yield ctx.violation(
                obj,
                _message(where, "engine_kwargs enforce_eager: true"),
                ("spec", "serveConfigV2"),
            )


RULE = folder_rule(__name__, check)
