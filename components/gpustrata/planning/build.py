"""Validate and plan a stack: the pure half of :class:`~gpustrata.components.InferenceStack`.

No Pulumi import here, so ``render``, ``capacity``, ``compare`` and ``docs`` can plan a
stack without loading the Pulumi SDK or its providers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.core.errors import Problem, StackError
from gpustrata.planning.plan import PlanError, StackPlan, plan_stack
from gpustrata.planning.ray_layout import plan_kuberay
from gpustrata.spec.loader import line_in_file, validate_stack
from gpustrata.spec.stack import StackSpec

__all__ = ["build_plan", "plan_spec"]


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
) -> StackPlan:
    """Plan a validated spec with the catalogue plus the stack's own entries.

    A planning error names the line of its config path in the file *source* (when
    *lines*: the spec was read from that file). A model's config.json path resolves
    against, and must stay inside, *base_dir* (the project; default the working folder)."""
    hardware = load_hardware_catalog().extended(spec.catalog.gpus, spec.catalog.instances)
    try:
        plan = plan_stack(spec, hardware, base_dir=base_dir)
        plan.derived.extend(plan_kuberay(spec))  # the operator release against the Ray version
        return plan
    except PlanError as exc:
        raise StackError(
            [Problem(exc.path, str(exc), line_in_file(source, exc.path) if lines else None)], source
        ) from None
