"""``gpustrata plan``, ``render`` and ``schema``: what a stack registers, deploys and accepts.

``render`` and ``schema`` only plan (no Pulumi import); ``plan`` runs the stack's Pulumi
program under Pulumi's mocks.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gpustrata.cli.command import add_command
from gpustrata.cli.stack_args import add_stack_args, load_stack, model_sources_of, stack_file_of
from gpustrata.core.errors import InputError

__all__ = ["plan_command", "register", "render_command", "schema_command"]


def register(sub: Any) -> None:
    """Add ``plan``, ``render`` and ``schema`` to the ``gpustrata`` sub-command parser."""
    plan = add_command(sub, "plan", plan_command)
    add_stack_args(plan)
    plan.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="text: also every resource by layer, pool costs, the serving layer and every "
        "derived value with its working",
    )
    plan.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="text: print only findings, deploy blockers and warnings (nothing when clean)",
    )
    plan.add_argument(
        "-o",
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

    render = add_command(sub, "render", render_command)
    add_stack_args(render)

    schema = add_command(sub, "schema", schema_command)
    schema.add_argument(
        "--profile",
        action="store_true",
        help="the cluster profile's schema (.gpustrata/cluster.yaml) instead of the stack's",
    )


def schema_command(args: argparse.Namespace) -> int:
    """print the JSON Schema of a stack, or of a cluster profile (for editors)

    Print the JSON Schema of the gpustrata:stack document, or with --profile of the cluster
    profile. Exit 0.
    """
    if getattr(args, "profile", False):
        from gpustrata.spec.profile_file import profile_json_schema

        print(json.dumps(profile_json_schema(), indent=2))
        return 0
    from gpustrata.spec.stack import StackSpec

    schema = StackSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "gpustrata stack (config key gpustrata:stack)"
    print(json.dumps(schema, indent=2))
    return 0


def render_command(args: argparse.Namespace) -> int:
    """print the Kubernetes objects a stack deploys (YAML)

    Print the Kubernetes objects the stack deploys, as YAML documents, including the GpuNodePool
    descriptions the rules read (pipe them to `gpustrata check -`). Exit 0: printed; 2: an
    unusable stack file.
    """
    import yaml

    from gpustrata.planning.build import plan_spec
    from gpustrata.render.from_plan import (
        dra_driver_object,
        karpenter_objects,
        operator_object,
        pool_object,
        system_chart_objects,
        weights_identity_objects,
        workload_objects,
    )
    from gpustrata.render.routing import routing_objects
    from gpustrata.spec.loader import load_stack_file

    path, _ = stack_file_of(args)
    plan = plan_spec(
        load_stack_file(path),
        str(path),
        base_dir=Path(args.project_dir),
        sources=model_sources_of(args),
    )
    operator = operator_object(plan)
    objects = [pool_object(p, plan.spec) for p in plan.pools.values()]
    objects += system_chart_objects(plan) + karpenter_objects(plan)
    objects += ([operator] if operator else []) + weights_identity_objects(plan)
    objects += workload_objects(plan)
    dra = dra_driver_object(plan)
    objects += [dra] if dra else []
    objects += routing_objects(plan)
    print(yaml.safe_dump_all(objects, sort_keys=False), end="")
    return 0


def plan_command(args: argparse.Namespace) -> int:
    """run the stack's Pulumi program offline (Pulumi mocks) and show what it registers

    Run the stack's Pulumi program under Pulumi's mocks (no cloud credentials, no Pulumi CLI),
    check what it registers with every rule and rehearse the deploy. Prints the models' three
    layers side by side, the rehearsal and the findings (--verbose: every resource and derived
    value with its working). Exit 0: no mandatory finding; 1: a mandatory finding or a deploy
    blocker; 2: an unusable stack file or Pulumi.yaml (one line naming file, line, key and fix).
    """
    from gpustrata.reports.text import plan_report

    if args.verify_placement:
        from gpustrata.runtime.placement import INSTALL_HINT, EnginesMissing, ray_available

        if not ray_available():  # before the plan runs: the flag cannot be honoured
            raise EnginesMissing(
                f"--verify-placement needs Ray, which is not installed: {INSTALL_HINT}"
            )
    if args.base is not None and args.format != "markdown":
        raise InputError("--base compares in the markdown report; add --format markdown")
    path, stack, plan, document = load_stack(args)
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
    elif args.quiet:
        text = report.quiet_text()
        if text:
            print(text)
    else:
        print(report.text(verbose=args.verbose))
        if placement is not None:
            print("\n" + "\n".join(placement.lines()))
    if args.diagram is not None:
        from gpustrata.reports.diagram import write_diagram

        write_diagram(plan, args.diagram)
    return max(report.exit_code, placement.exit_code if placement else 0)
