"""Validate a ``serveConfigV2`` with Ray Serve's own schema, plus unknown keys.

Ray's ``ServeDeploySchema`` (``python/ray/serve/schema.py``) validates types but ignores
keys it does not know, and ``args`` of an application is a free dict that only the
builder reads when the application deploys. So, with Ray installed (the engines extra):

1. ``ServeDeploySchema.model_validate`` on the whole config (Ray's validation);
2. every key is checked against the fields of the schema model at its place, walking
   nested models (``applications[].deployments[]``, ``http_options`` ...);
3. for ``ray.serve.llm:build_openai_app`` applications, ``args`` against the fields of
   Ray Serve LLM's ``LLMServingArgs`` and each ``llm_configs[]`` against ``LLMConfig`` and
   ``ModelLoadingConfig``. Those classes import the vLLM/pyarrow stack, so their field
   names are read from the installed Ray's source (``ast``), not copied here;
   ``deployment_config`` against Serve's ``DeploymentSchema`` fields and
   ``AutoscalingConfig`` (validated by it), ``placement_group_config`` by Ray's own
   ``PlacementGroupConfig`` and ``runtime_env`` by Ray's ``RuntimeEnv``.

Each problem is one line naming the path in the config.
"""

from __future__ import annotations

import ast
import importlib.util
import typing
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["LLM_APP", "llm_source_fields", "ray_accelerator_types", "validate_serve_config"]

LLM_APP = "ray.serve.llm:build_openai_app"
_SOURCES = {
    "LLMServingArgs": "llm/_internal/serve/core/ingress/builder.py",
    "LLMConfig": "llm/_internal/serve/core/configs/llm_config.py",
    "ModelLoadingConfig": "llm/_internal/serve/core/configs/llm_config.py",
}
# Serve deployment options LLMServer sets itself from placement_group_config (llm_server.py).
_LLM_FORBIDDEN_DEPLOYMENT = {"placement_group_bundles", "placement_group_strategy"}


@cache
def llm_source_fields(cls: str) -> frozenset[str]:
    """Field names of a Ray Serve LLM pydantic model, read from the installed Ray source."""
    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("ray is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / _SOURCES[cls]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return frozenset(
                stmt.target.id
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and not stmt.target.id.startswith("_")
            )
    raise LookupError(f"class {cls} not found in {path}")


@cache
def ray_accelerator_types() -> frozenset[str]:
    """The accelerator types Ray Serve LLM accepts: its ``AcceleratorType`` enum is built
    from the constants of ``ray.util.accelerators.accelerators``."""
    import ray.util.accelerators.accelerators as accelerators

    return frozenset(v for k, v in vars(accelerators).items() if k.isupper() and isinstance(v, str))


def _models_in(annotation: Any) -> Iterator[type]:
    """Pydantic model classes inside an annotation (Optional, List, Union, ...)."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models_in(arg)


def _strict(data: Any, model: type, path: str) -> Iterator[str]:
    """Keys of ``data`` that ``model`` does not define, recursively."""
    if not isinstance(data, Mapping):
        return
    fields = model.model_fields  # type: ignore[attr-defined]
    names = {n for n, f in fields.items()} | {f.alias for f in fields.values() if f.alias}
    for key, value in data.items():
        if key not in names:
            yield f"{path}.{key}: unknown key (not a field of Ray's {model.__name__})"
            continue
        nested = list(_models_in(fields[key].annotation))
        if not nested:
            continue
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            where = f"{path}.{key}[{i}]" if isinstance(value, list) else f"{path}.{key}"
            yield from _strict(item, nested[0], where)


def _keys(data: Any, allowed: frozenset[str], path: str, what: str) -> Iterator[str]:
    if not isinstance(data, Mapping):
        yield f"{path}: expected a mapping, got {type(data).__name__}"
        return
    for key in data:
        if key not in allowed:
            yield f"{path}.{key}: unknown key (not a field of Ray Serve LLM's {what})"


def _llm_config(llm: Any, path: str) -> Iterator[str]:
    from ray.llm._internal.common.placement import PlacementGroupConfig
    from ray.runtime_env import RuntimeEnv
    from ray.serve.config import AutoscalingConfig
    from ray.serve.schema import DeploymentSchema

    yield from _keys(llm, llm_source_fields("LLMConfig"), path, "LLMConfig")
    if not isinstance(llm, Mapping):
        return
    accelerator = llm.get("accelerator_type")
    if accelerator is not None and accelerator not in ray_accelerator_types():
        yield (
            f"{path}.accelerator_type: {accelerator!r} is not one of Ray Serve LLM's accelerator "
            "types (ray.util.accelerators.accelerators)"
        )
    loading = llm.get("model_loading_config")
    yield from _keys(
        loading,
        llm_source_fields("ModelLoadingConfig"),
        f"{path}.model_loading_config",
        "ModelLoadingConfig",
    )
    deployment = llm.get("deployment_config") or {}
    allowed = frozenset(DeploymentSchema.model_fields) - _LLM_FORBIDDEN_DEPLOYMENT
    yield from _keys(deployment, allowed, f"{path}.deployment_config", "deployment_config")
    auto = deployment.get("autoscaling_config") if isinstance(deployment, Mapping) else None
    if auto is not None:
        where = f"{path}.deployment_config.autoscaling_config"
        yield from _strict(auto, AutoscalingConfig, where)
        yield from _ray_says(where, lambda: AutoscalingConfig.model_validate(auto))
    pg = llm.get("placement_group_config")
    if pg is not None:
        yield from _ray_says(f"{path}.placement_group_config", lambda: PlacementGroupConfig(**pg))
    runtime_env = llm.get("runtime_env")
    if runtime_env is not None:
        yield from _ray_says(f"{path}.runtime_env", lambda: RuntimeEnv(**runtime_env))


def _ray_says(where: str, validate: Callable[[], object]) -> Iterator[str]:
    """What Ray's own validation (*validate*) says of the section at *where*, on one line."""
    try:
        validate()
    except Exception as exc:
        yield f"{where}: {' '.join(str(exc).split())}"


def validate_serve_config(config: Mapping[str, Any]) -> list[str]:
    """Every problem Ray's schema and the key checks find in one serve config (dict)."""
    from ray.serve.schema import ServeDeploySchema

    problems: list[str] = []
    problems.extend(_ray_says("serveConfigV2", lambda: ServeDeploySchema.model_validate(config)))
    problems.extend(_strict(config, ServeDeploySchema, "serveConfigV2"))
    for i, app in enumerate(config.get("applications") or []):
        if not isinstance(app, Mapping) or app.get("import_path") != LLM_APP:
            continue
        path = f"serveConfigV2.applications[{i}].args"
        args = app.get("args") or {}
        problems.extend(_keys(args, llm_source_fields("LLMServingArgs"), path, "LLMServingArgs"))
        configs = args.get("llm_configs") if isinstance(args, Mapping) else None
        for j, llm in enumerate(configs if isinstance(configs, list) else []):
            problems.extend(_llm_config(llm, f"{path}.llm_configs[{j}]"))
    return problems
