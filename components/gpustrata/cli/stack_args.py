"""The stack a command works on: ``--stack`` / ``--file`` / ``--project-dir``, read and planned.

Shared by ``plan``, ``render`` and ``capacity``. Planning here imports no Pulumi.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpustrata.core.errors import InputError

if TYPE_CHECKING:
    from gpustrata.catalog.model_sources import ModelSources
    from gpustrata.planning.plan_types import StackPlan

__all__ = [
    "MODELS_HELP",
    "add_models_arg",
    "add_stack_args",
    "load_stack",
    "model_sources_of",
    "stack_file_of",
]

_PROJECT_DIR_HELP = (
    "the Pulumi project folder: its Pulumi.yaml (validated), program and stackConfigDir; "
    "default: current dir"
)


def add_stack_args(
    parser: argparse.ArgumentParser, project_dir_help: str = _PROJECT_DIR_HELP
) -> None:
    """Add ``--stack NAME | --file PATH`` and ``--project-dir DIR`` to a sub-command."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-s",
        "--stack",
        help="stack name: reads Pulumi.<stack>.yaml in the project's stackConfigDir "
        "(Pulumi.yaml; default: the project folder)",
    )
    group.add_argument("-f", "--file", type=Path, help="path of a Pulumi stack file")
    parser.add_argument("-C", "--project-dir", type=Path, default=Path("."), help=project_dir_help)
    add_models_arg(parser)


MODELS_HELP = (
    "folder of models' own files (<org>/<name>/config.json, <name>/config.json or a Hugging "
    "Face cache layout): a model found there is sized from its config.json and "
    "model.safetensors.index.json, before the Hugging Face cache (HF_HUB_CACHE, HF_HOME) and "
    "the model catalogue; nothing is downloaded"
)


def add_models_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--models DIR`` (:func:`model_sources_of` reads it)."""
    parser.add_argument("--models", type=Path, metavar="DIR", help=MODELS_HELP)


def model_sources_of(args: argparse.Namespace, *, stack: bool = True) -> ModelSources | None:
    """The ``--models DIR`` folder with the Hugging Face cache. Without the flag: None for
    a *stack* (its own ``catalog.models_dir`` then applies), else the Hugging Face cache
    alone. Raises :class:`InputError` for a folder that does not exist."""
    from gpustrata.catalog.model_sources import ModelSources  # no pydantic: `check` stays light

    folder = getattr(args, "models", None)
    if folder is None:
        return None if stack else ModelSources.from_environment()
    try:
        return ModelSources.from_environment(Path(folder))
    except ValueError as exc:  # ModelCatalogError: no such folder
        raise InputError(str(exc)) from None


def stack_file_of(args: argparse.Namespace) -> tuple[Path, str]:
    """The stack file the flags name, and the stack's name (``dev`` for an odd file name)."""
    from gpustrata.spec.project import read_project

    project = read_project(Path(args.project_dir))  # a broken Pulumi.yaml: exit 2
    if args.file is not None:
        path = Path(args.file)
        name = path.name
        stack = name[len("Pulumi.") : -len(".yaml")] if name.startswith("Pulumi.") else "dev"
        return path, stack
    if not args.stack:
        raise InputError("name a stack with --stack dev|staging|prod or a file with --file")
    return project.stack_file(args.stack), args.stack


def load_stack(args: argparse.Namespace) -> tuple[Path, str, StackPlan, dict[str, Any]]:
    """Validate and plan the stack file (errors carry line numbers); keep its document.

    Returns the file, the stack's name, the plan and the file's parsed YAML document.
    """
    from gpustrata.planning.build import plan_spec
    from gpustrata.spec.loader import read_stack_file

    path, stack = stack_file_of(args)
    spec, document = read_stack_file(path)
    sources = model_sources_of(args)
    plan = plan_spec(spec, str(path), base_dir=Path(args.project_dir), sources=sources)
    return path, stack, plan, document
