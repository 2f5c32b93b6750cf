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
from gpustrata.core.errors import GpustrataError

if TYPE_CHECKING:
    from gpustrata.planning.plan import StackPlan


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
    plan.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="markdown: a pull-request comment (with --base: what the change did)",
    )
    plan.add_argument(
        "--base",
        metavar="REF|FILE",
        help="compare with a base stack file (markdown only): an existing FILE, or else a git "
        "revision REF whose copy of the stack file is read with `git show REF:./<file>`",
    )
    plan.add_argument(
        "--diagram",
        type=Path,
        metavar="FILE.svg",
        help="also draw the stack as SVG: pools and GPUs, Ray workers and placement groups, "
        "vLLM engines and their GPU memory",
    )
    plan.add_argument(
        "--verify-placement",
        action="store_true",
        help="also ask Ray's scheduler, on a local cluster mirroring each RayService's worker "
        "groups, whether every engine's placement groups fit (needs the engines extra)",
    )
    plan.set_defaults(func=_cmd_plan)

    render = sub.add_parser("render", help="print the Kubernetes objects a stack deploys (YAML)")
    _stack_args(render)
    render.set_defaults(func=_cmd_render)

    schema = sub.add_parser("schema", help="print the JSON Schema of a stack (for editors)")
    schema.set_defaults(func=_cmd_schema)

    from gpustrata.reports.capacity import register_capacity_command

    register_capacity_command(sub)

    from gpustrata.cli.check import register_commands

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
    from gpustrata.core.errors import InputError
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
    from gpustrata.planning.build import plan_spec
    from gpustrata.spec.loader import read_stack_file

    path, stack = _stack_file(args)
    spec, document = read_stack_file(path)
    return path, stack, plan_spec(spec, str(path)), document


def _cmd_schema(args: argparse.Namespace) -> int:
    from gpustrata.spec.stack import StackSpec

    schema = StackSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpustrata stack (config key gpustrata:stack)"
    print(json.dumps(schema, indent=2))
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    from gpustrata.planning.build import plan_spec
    from gpustrata.render.from_plan import operator_object, pool_object, workload_objects
    from gpustrata.spec.loader import load_stack_file

    path, _ = _stack_file(args)
    plan = plan_spec(load_stack_file(path), str(path))
    operator = operator_object(plan)
    objects = [pool_object(p, plan.spec) for p in plan.pools.values()]
    objects += ([operator] if operator else []) + workload_objects(plan)
    print(yaml.safe_dump_all(objects, sort_keys=False), end="")
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from gpustrata.reports.text import plan_report

    if args.verify_placement:
        from gpustrata.runtime.placement import INSTALL_HINT, EnginesMissing, ray_available

        if not ray_available():  # before the plan runs: the flag cannot be honoured
            raise EnginesMissing(
                f"--verify-placement needs Ray, which is not installed: {INSTALL_HINT}"
            )
    if args.base is not None and args.format != "markdown":
        from gpustrata.core.errors import InputError

        raise InputError("--base compares in the markdown report; add --format markdown")
    path, stack, plan, document = _load(args)
    report = plan_report(path, stack, plan, document, Path(args.project_dir))
    placement = None
    if args.verify_placement:
        from gpustrata.runtime.placement import mirror_clusters, verify_placement

        placement = verify_placement(mirror_clusters(plan))
    if args.format == "json":
        data = report.as_dict()
        if placement is not None:
            data["placement"] = placement.as_dict()
        print(json.dumps(data, indent=2, default=str))
    elif args.format == "markdown":
        from gpustrata.reports.markdown import markdown_report

        lines = placement.lines() if placement is not None else None
        print(markdown_report(report, document, args.base, args.project_dir, lines), end="")
    else:
        print(report.text())
        if placement is not None:
            print("\n" + "\n".join(placement.lines()))
    if args.diagram is not None:
        from gpustrata.reports.diagram import write_diagram

        write_diagram(plan, args.diagram)
    return max(report.exit_code, placement.exit_code if placement else 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
