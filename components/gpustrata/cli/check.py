"""``gpustrata check`` and ``gpustrata explain``: their part of the one ``gpustrata`` tree.

:mod:`gpustrata.cli.app` calls :func:`register_commands` with its subparsers; each
command sets ``func=handler(args) -> int``. Exit codes (RULES.md): 0 no mandatory
finding, 1 one or more, 2 unreadable input or configuration, printed in the one style
of :mod:`gpustrata.cli.errors`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from gpustrata.cli.command import add_command
from gpustrata.cli.errors import report_error, run_parser, user_error
from gpustrata.cli.stack_args import add_models_arg, model_sources_of
from gpustrata.core import jsonio
from gpustrata.core.collector import fewer_collections
from gpustrata.core.contract import CLUSTER_PROFILE_FILE
from gpustrata.core.environments import ENVIRONMENTS
from gpustrata.core.errors import InputError
from gpustrata.core.jsonio import JsonShapeError
from gpustrata.core.textfiles import read_text_file
from gpustrata.core.yamlguard import YamlShapeError
from gpustrata.core.yamlio import error_line, safe_load
from gpustrata_policies.config import ConfigError, PolicyConfig, camel
from gpustrata_policies.evaluate import (
    all_rules,
    evaluate,
    find_rule,
    load_policy_config,
    rule_folder,
)
from gpustrata_policies.findings import Rule
from gpustrata_policies.inputs.manifests import (
    VALUES_CHARTS,
    find_cluster_profile,
    load_paths,
    load_values,
)

if TYPE_CHECKING:
    from gpustrata.catalog.profile import ClusterProfile

__all__ = ["check_command", "explain_command", "main", "register_commands"]


def _error(message: str) -> int:
    return user_error(message)


_MAX_CONFIG_BYTES = 4 << 20
"""The largest policy config file read (one setting per policy: a few KB)."""


def _read_config(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        # A FIFO or /dev/zero is refused unread; so is a file far larger than any config.
        text = read_text_file(Path(path), max_bytes=_MAX_CONFIG_BYTES)
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    try:
        data = jsonio.loads(text) if path.endswith(".json") else safe_load(text)
    except (JsonShapeError, YamlShapeError) as exc:
        line = f":{exc.line}" if exc.line is not None else ""
        raise ConfigError(f"{path}{line}: invalid config file: {exc}") from None
    except yaml.YAMLError as exc:
        at = error_line(exc, text)
        raise ConfigError(f"{path}{f':{at}' if at else ''}: invalid config file") from None
    except RecursionError:  # json's and PyYAML's decoders nest recursively
        raise ConfigError(
            f"{path}: nested too deeply to read; a policy config is a few levels deep"
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: invalid config file") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def _load_config(path: str | None, environment: str | None) -> PolicyConfig:
    """The policy config of ``--config``; an invalid setting names the file and line."""
    data = _read_config(path)
    try:
        return load_policy_config(data, environment)
    except ConfigError as exc:
        if path is None:
            raise
        where = str(exc).split(": ", 1)[0]
        line = _key_line(read_text_file(Path(path)), where.split("."))
        raise ConfigError(f"{path}:{line or 1}: {exc}") from None


def _key_line(text: str, keys: list[str]) -> int | None:
    """The line of the deepest of *keys* (a path of mapping keys) found in YAML or JSON
    *text*; ``None`` when not even the first is there."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = None
    for key in keys:
        child = next(
            (
                (k, v)
                for k, v in (node.value if isinstance(node, yaml.MappingNode) else [])
                if str(k.value) == key
            ),
            None,
        )
        if child is None:
            break
        line, node = child[0].start_mark.line + 1, child[1]
    return line


def check_command(
    args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None
) -> int:
    """check Kubernetes manifests (files, folders, - for stdin) against the rules

    Check manifests against the gpustrata rules. Exit 0: no mandatory finding; 1: mandatory
    findings; 2: unreadable input, or nothing to check. The cluster's facts (Node objects from
    `kubectl get nodes -o yaml`, GPU Operator values, Karpenter NodePools) are read wherever
    they appear; give them with --context to inform the rules without being reported on. Node
    pools can also be described with kind GpuNodePool (apiVersion gpustrata.io/v1alpha1).
    """
    out = out or sys.stdout
    source = stdin if stdin is not None else sys.stdin
    if "-" in args.paths and "-" in (getattr(args, "context", None) or []):
        return _error("- (stdin) given as a PATH and as --context; stdin can be read once")
    unreadable: list[InputError] = []  # reported at the end; the other files are checked
    try:
        config = _load_config(args.config, args.environment)
        profile, profile_file, how = _load_profile(args)
        sources = model_sources_of(args, stack=False)
        with fewer_collections():  # what is read lives until the report is written
            objects = load_paths(list(args.paths), source, unreadable)
            context = load_paths(list(getattr(args, "context", None) or []), source)
            for spec in getattr(args, "values", None) or []:
                context.extend(load_values(spec))
    except InputError as exc:  # a ConfigError is one too
        return report_error(exc)
    if getattr(args, "check_context", False):
        objects, context = [*objects, *context], []
    if not objects and unreadable:
        for refused in unreadable[:-1]:
            report_error(refused)
        return report_error(unreadable[-1])
    if not objects:
        return _error(
            f"nothing was checked: {', '.join('stdin' if p == '-' else p for p in args.paths)} "
            "held no Kubernetes object (an "
            "empty folder or file, empty stdin, or a folder without .yaml/.yml/.json "
            "files?); a check of nothing must not pass"
        )
    from gpustrata.catalog.model_sources import using_model_sources
    from gpustrata_policies.output.formats import write  # keeps `explain` light

    with using_model_sources(sources):
        report = evaluate(
            objects,
            environment=config.environment,
            config=config,
            context=context,
            profile=profile,
            profile_file=profile_file,
        )
    del objects, context  # the report keeps what it needs; free the manifests before output
    if args.format == "text" and profile is not None:
        out.write(f"Cluster profile: {profile_file} ({how})\n\n")
    with fewer_collections():  # the report's ~23,000 records are not garbage: no full scans
        write(report, args.format, out, quiet=getattr(args, "quiet", False))
    for warning in [*config.deprecations, *report.warnings]:
        print(f"gpustrata: warning: {warning}", file=sys.stderr)
    for refused in unreadable:
        report_error(refused)
    if unreadable:
        print(
            f"gpustrata: {len(unreadable)} file(s) could not be read (above); the others were "
            "checked",
            file=sys.stderr,
        )
        return 2
    return report.exit_code


def _load_profile(args: argparse.Namespace) -> tuple[ClusterProfile | None, str | None, str]:
    """The cluster profile of ``--profile FILE``, else the ``.gpustrata/cluster.yaml`` next
    to the checked paths (unless ``--no-profile``): (profile, its file, how it was found).
    An invalid profile raises its one-line-per-problem error (exit 2)."""
    path = getattr(args, "profile", None)
    how = "--profile"
    if path is None and not getattr(args, "no_profile", False):
        found = find_cluster_profile(list(args.paths))
        path, how = (str(found), "found next to the manifests") if found else (None, "")
    if path is None:
        return None, None, ""
    from gpustrata.spec.profile_file import load_profile_file

    return load_profile_file(path), path, how


def _example(rule: Rule) -> str | None:
    """The first bad fixture in the rule's folder, read as package data (so an installed
    wheel has it too)."""
    names = sorted(
        f.name
        for f in rule_folder(rule).iterdir()
        if f.name.startswith("bad-") and f.name.endswith(".yaml")
    )
    return rule_folder(rule).joinpath(names[0]).read_text(encoding="utf-8") if names else None


def explain_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """explain a rule (id or name); without one, list every rule

    Print a rule's rationale, fix, settings, a manifest that violates it and its references;
    without RULE, list every rule's id, name and title. Exit 0: printed; 2: no such rule (the
    known ones are listed).
    """
    out = out or sys.stdout
    if args.rule is None:  # no argument: the list of rules
        for r in all_rules():
            out.write(f"{r.meta.id}  {r.meta.name:<38} {r.meta.title}\n")
        return 0
    rule = find_rule(args.rule)
    if rule is None:
        known = ", ".join(f"{r.meta.id} {r.meta.name}" for r in all_rules())
        return _error(f"no rule {args.rule!r}; known rules: {known}")
    m = rule.meta
    enforcement = ", ".join(f"{env}: {m.default_enforcement[env]}" for env in ENVIRONMENTS)
    parts = [
        f"{m.id} {m.name}: {m.title}",
        f"layer: {m.layer}   severity: {m.severity}   default enforcement: {enforcement}",
        "",
        "Why:",
        f"  {m.rationale}",
        "",
        "Fix:",
        f"  {m.fix}",
    ]
    if m.thresholds:
        parts += ["", f"Settings (properties of policy {m.name} in the policy config):"]
        parts += [f"  {camel(k)}: default {v[1]!r}" for k, v in m.thresholds.items()]
    example = _example(rule)
    if example:
        parts += ["", "Example that violates it:", *("  " + line for line in example.splitlines())]
    parts += ["", "References:", *(f"  {u}" for u in m.references)]
    out.write("\n".join(parts) + "\n")
    return 0


def register_commands(subparsers: Any) -> None:
    """Add ``check`` and ``explain`` to an argparse subparsers object."""
    check = add_command(subparsers, "check", check_command)
    check.add_argument("paths", nargs="+", metavar="PATH", help="file, folder or - (stdin)")
    check.add_argument(
        "--context",
        action="append",
        metavar="PATH",
        help="cluster dump (file, folder or -) the rules read but do not report on, e.g. "
        "`kubectl get nodes,clusterpolicies,nodepools -o yaml`; repeatable",
    )
    check.add_argument(
        "--check-context",
        action="store_true",
        help="report on the --context objects too",
    )
    check.add_argument(
        "--values",
        action="append",
        metavar="CHART=FILE",
        help="a Helm values file of CHART, read as cluster context (CHART: "
        f"{', '.join(VALUES_CHARTS)}); repeatable",
    )
    check.add_argument(
        "-e",
        "--environment",
        choices=ENVIRONMENTS,
        default="prod",
        help="which rules are mandatory (default prod, the strictest)",
    )
    check.add_argument(
        "-o", "--format", choices=("text", "json", "sarif", "markdown"), default="text"
    )
    check.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="text: print only the findings (nothing when there is none)",
    )
    check.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help="policy config in Pulumi's policy-pack-config format "
        "(YAML or JSON): the file the policy pack reads",
    )
    check.add_argument(
        "--profile",
        metavar="FILE",
        help="cluster profile (YAML; `gpustrata schema --profile`): what the manifests "
        "cannot say about the cluster (GPU per site label or instance type, taints, "
        "admission, pools, versions, private images' vLLM release, CRDs, load bandwidth). "
        f"Default: {CLUSTER_PROFILE_FILE} in a checked folder, if there is one",
    )
    add_models_arg(check)
    check.add_argument(
        "--no-profile",
        action="store_true",
        help=f"do not read {CLUSTER_PROFILE_FILE} next to the manifests",
    )
    explain = add_command(subparsers, "explain", explain_command)
    explain.add_argument(
        "rule", nargs="?", metavar="RULE", help="rule id (K001) or name; omit to list all"
    )


def main(argv: list[str] | None = None) -> int:
    """Light entry point (``python -m gpustrata.cli.check check ...``): these two commands only.

    The same sub-commands and error handling as ``gpustrata check``/``explain``, without
    loading the rest of the tree (the stack models and the capacity model).
    """
    parser = argparse.ArgumentParser(prog="gpustrata")
    register_commands(parser.add_subparsers(dest="command", required=True))
    return run_parser(parser, argv)


if __name__ == "__main__":
    sys.exit(main())
