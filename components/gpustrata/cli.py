"""The `gpustrata` command: plan, render, schema (and check/explain from the policy package).

Exit codes: 0 fine, 1 a mandatory finding, 2 unusable input (named with file and path).
Bad input never shows a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gpustrata import __version__
from gpustrata.errors import GpustrataError

if TYPE_CHECKING:
    from gpustrata.planning.plan import StackPlan

ENVIRONMENTS = ("dev", "staging", "prod")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except GpustrataError as exc:
        print(f"gpustrata: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpustrata",
        description="LLM inference on GPUs in Kubernetes: plan, render and check all three "
        "layers (nodes, KubeRay, vLLM) from one typed stack.",
    )
    parser.add_argument("--version", action="version", version=f"gpustrata {__version__}")
    sub = parser.add_subparsers(metavar="COMMAND")

    plan = sub.add_parser(
        "plan",
        help="run the stack's Pulumi program offline (Pulumi mocks) and show what it registers",
    )
    _stack_args(plan)
    plan.add_argument("--format", choices=("text", "json"), default="text")
    plan.set_defaults(func=_cmd_plan)

    render = sub.add_parser("render", help="print the Kubernetes objects a stack deploys (YAML)")
    _stack_args(render)
    render.set_defaults(func=_cmd_render)

    schema = sub.add_parser("schema", help="print the JSON Schema of a stack (for editors)")
    schema.set_defaults(func=_cmd_schema)

    from gpustrata_policies.cli import register_commands

    register_commands(sub)
    return parser


def _stack_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--stack", help="stack name: reads stacks/Pulumi.<stack>.yaml")
    group.add_argument("--file", type=Path, help="path of a Pulumi stack file")
    parser.add_argument(
        "--project-dir",
        type=Path,
        default=Path("."),
        help="the Pulumi project (Pulumi.yaml, __main__.py, stacks/); default: current dir",
    )


def _stack_file(args: argparse.Namespace) -> tuple[Path, str]:
    from gpustrata.errors import InputError
    from gpustrata.spec.loader import stack_file

    if args.file is not None:
        path = Path(args.file)
        name = path.name
        stack = name[len("Pulumi.") : -len(".yaml")] if name.startswith("Pulumi.") else "dev"
        return path, stack
    if not args.stack:
        raise InputError("name a stack with --stack dev|staging|prod or a file with --file")
    return stack_file(args.stack, Path(args.project_dir) / "stacks"), args.stack


def _load(args: argparse.Namespace) -> tuple[Path, str, StackPlan, dict[str, Any]]:
    """Validate and plan the stack file (errors carry line numbers); keep its document."""
    from gpustrata.components.stack import plan_spec
    from gpustrata.spec.loader import read_stack_file

    path, stack = _stack_file(args)
    spec, document = read_stack_file(path)
    return path, stack, plan_spec(spec, str(path)), document


def _cmd_schema(args: argparse.Namespace) -> int:
    from gpustrata.spec.models import StackSpec

    schema = StackSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpustrata stack (config key gpustrata:stack)"
    print(json.dumps(schema, indent=2))
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    from gpustrata.components.stack import plan_spec
    from gpustrata.render.from_plan import pool_object, workload_objects
    from gpustrata.spec.loader import load_stack_file

    path, _ = _stack_file(args)
    plan = plan_spec(load_stack_file(path), str(path))
    objects = [pool_object(p) for p in plan.pools.values()] + workload_objects(plan)
    print(yaml.safe_dump_all(objects, sort_keys=False), end="")
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from gpustrata.report import plan_report

    path, stack, plan, document = _load(args)
    report = plan_report(path, stack, plan, document, Path(args.project_dir))
    if args.format == "json":
        print(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        print(report.text())
    return report.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
