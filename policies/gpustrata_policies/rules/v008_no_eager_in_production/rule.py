"""V008 no-eager-in-production."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.catalog.vllm_releases import vllm_file_url
from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.rules._common import MANDATORY_IN_PROD
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.ray import container_engines, flag_is_on
from gpustrata_policies.view.vllm_args import EngineArgs, serve_config

VLLM_CONFIG = vllm_file_url(catalogs.reference_vllm(), "vllm/config")
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


RULE = Rule(
    RuleMeta(
        id="V008",
        name="no-eager-in-production",
        title="enforce_eager is off in production",
        layer="vllm",
        severity="medium",
        default_enforcement=MANDATORY_IN_PROD,
        rationale=(
            "enforce_eager disables torch.compile and CUDA graph capture "
            f"(vLLM {catalogs.reference_vllm_minor()} "
            "config/vllm.py): every decode step then launches each kernel from Python, which "
            "costs most at the small batches of interactive serving. It shortens startup and "
            "helps debugging, so it is advisory in dev and staging and mandatory in prod. "
            "Engines where vLLM disables CUDA graphs itself (DeepEP high-throughput all2all "
            "with data parallelism) are not reported."
        ),
        fix="Remove --enforce-eager (engine_kwargs enforce_eager) from production engines.",
        references=(
            f"{VLLM_CONFIG}/vllm.py",
            f"{VLLM_CONFIG}/model.py",
            f"{VLLM_CONFIG}/compilation.py",
            "https://docs.vllm.ai/en/latest/configuration/optimization.html",
        ),
    ),
    check,
)
