"""Validate and plan a stack: the pure half of :class:`~gpustrata.components.InferenceStack`.

No Pulumi import here, so ``render``, ``capacity``, ``compare`` and ``docs`` can plan a
stack without loading the Pulumi SDK or its providers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpustrata.catalog.architectures import ModelCatalogError
from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.catalog.model_sources import ModelSources, active_model_sources
from gpustrata.core.errors import Problem, StackError
from gpustrata.planning.plan import plan_stack
from gpustrata.planning.plan_types import PlanError, StackPlan
from gpustrata.planning.ray_layout import plan_kuberay
from gpustrata.spec.fields import is_model_path
from gpustrata.spec.loader import line_in_file, validate_stack
from gpustrata.spec.stack import StackSpec

__all__ = ["build_plan", "plan_spec", "stack_model_sources"]


def build_plan(stack: dict[str, Any], source: str | None = None) -> StackPlan:
    """Validate and plan a stack document; raises StackError before anything registers."""
    spec = validate_stack(stack, file=source)
    return plan_spec(spec, source, lines=False)  # the document may not be the file's


def plan_spec(
    spec: StackSpec,
    source: str | None = None,
    *,
    lines: bool = True,
    base_dir: Path | None = None,
    sources: ModelSources | None = None,
) -> StackPlan:
    """Plan a validated spec with the catalogue plus the stack's own entries.

    A planning error names the line of its config path in the file *source* (when
    *lines*: the spec was read from that file). A model's config.json path resolves
    against, and must stay inside, *base_dir* (the project; default the working folder).
    Models' own files are looked for in *sources* (``--models``), else in the command's
    active sources, else in the stack's ``catalog.models_dir`` and the Hugging Face cache."""
    hardware = load_hardware_catalog().extended(spec.catalog.gpus, spec.catalog.instances)
    try:
        found = sources or active_model_sources() or stack_model_sources(spec, base_dir)
        plan = plan_stack(spec, hardware, base_dir=base_dir, sources=found)
        plan.derived.extend(plan_kuberay(spec))  # the operator release against the Ray version
        return plan
    except PlanError as exc:
        raise StackError(
            [Problem(exc.path, str(exc), line_in_file(source, exc.path) if lines else None)], source
        ) from None


def rule_model_sources(
    spec: StackSpec, base_dir: Path | None, sources: ModelSources | None
) -> ModelSources | None:
    """The model sources the rules read a stack's objects with: the plan's *sources*, and
    where they name no models folder, the folder above the first stack model given as a
    local path (``acme-13b/config.json`` or its folder, inside the project), so the rules
    find it where the Pods name it by its folder (``/root/.cache/acme-13b``) rather than
    call it "not in the model catalogue"."""
    if sources is not None and sources.models_dir is not None:
        return sources
    found = _local_model_root(spec, base_dir)
    if found is None:
        return sources
    hf_cache = sources.hf_cache if sources is not None else None
    return ModelSources(found[0], found[1], hf_cache)


def _local_model_root(spec: StackSpec, base_dir: Path | None) -> tuple[Path, str] | None:
    """The folder above the first stack model given as a local path inside the project,
    and how to name it in reasons; None when no model is such a path."""
    root = (base_dir or Path.cwd()).resolve()
    for i, model in enumerate(spec.models):
        if not is_model_path(model.model):
            continue
        path = root / model.model
        folder = path.parent if path.name == "config.json" else path
        try:
            target = folder.resolve()
        except (OSError, RuntimeError):
            continue
        if (target / "config.json").is_file() and root in target.parents:
            return target.parent, f"the folder of gpustrata:stack.models[{i}].model"
    return None


def stack_model_sources(spec: StackSpec, base_dir: Path | None) -> ModelSources:
    """The stack's ``catalog.models_dir`` (inside the project *base_dir*) and the Hugging
    Face cache. Raises :class:`PlanError` for a folder that is missing or leaves the
    project."""
    key = "gpustrata:stack.catalog.models_dir"
    named = spec.catalog.models_dir
    if named is None:
        return ModelSources.from_environment()
    root = (base_dir or Path.cwd()).resolve()
    folder = (base_dir or Path.cwd()) / named
    try:
        target = folder.resolve()
    except (OSError, RuntimeError):
        raise PlanError(key, f"{named[:60]!r} cannot be resolved; name a folder") from None
    if target != root and root not in target.parents:
        raise PlanError(
            key,
            f"{named[:60]!r} leads outside the project (through a symbolic link); name a "
            "folder inside the project, or pass `--models DIR`",
        )
    try:
        return ModelSources.from_environment(folder, "catalog.models_dir")
    except ModelCatalogError as exc:
        raise PlanError(key, str(exc)) from None
