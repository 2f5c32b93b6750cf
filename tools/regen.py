"""Every generated file of the repository, regenerated (or checked) by one command.

    python tools/regen.py              # rewrite every stale generated file, say which
    python tools/regen.py --check      # write nothing; exit 1 naming each stale file
    python tools/regen.py --list       # the generators and the files each owns
    python tools/regen.py --only docs,rules-md

Run from anywhere; it works on the repository it lives in. A stale file after a change
you meant is rewritten here: review its diff before committing. The generators:

- ``catalog-cache``: ``catalog/data/cache/*.json``, each ``catalog/data/*.yaml`` parsed
  once (what the catalogues read at start instead of the YAML, when the digest it records
  matches; :mod:`gpustrata.catalog.packaged`);
- ``docs``: the reference pages of ``docs/`` (``python -m gpustrata.cli.docs``);
- ``rules-md``: ``docs/rules.md`` (``python -m gpustrata_policies.output.docs``);
- ``stack-args``: the package ``components/gpustrata/components/stack_args/`` from the spec
  (``python -m gpustrata.cli.codegen``);
- ``vllm-flags``: ``catalog/data/vllm-flags.txt`` packed again from its own per-release
  sets (``tools/vllm_flags.py --pack``; a new release is extracted from its sources with
  ``tools/vllm_flags.py``, which needs the release's sdist or git tag, and added with
  ``tools/vllm_flags.py --add``);
- ``pulumi-template``: ``pulumi-template/`` (``gpustrata init --pulumi-template``; it
  names the reference release's vLLM image);
- ``expected``: each rule folder's ``expected.yaml`` from what its fixtures give now
  (``python tests/policies/test_rule_folders.py --update RULE``), compared as data;
- ``findings``: ``tests/snapshots/findings.json`` (field corpora and every fixture);
- ``markdown-report``: ``tests/snapshots/plan-staging-raise-max-model-len.md`` (through
  its test, with ``GPUSTRATA_UPDATE_SNAPSHOTS=1``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Result:
    """What one generator found: the files it would write (``stale``) and wrote."""

    stale: list[Path]
    written: bool


def _module(path: Path, name: str) -> ModuleType:
    """Import a file that is not in a package (a tool or a test module)."""
    for folder in (str(path.parent),):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _texts(files: dict[Path, str], check: bool) -> Result:
    """Compare (and unless *check*, write) whole-text files."""
    stale = [p for p, text in files.items() if not p.is_file() or p.read_text("utf-8") != text]
    if not check:
        for path in stale:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[path], encoding="utf-8")
    return Result(stale, not check and bool(stale))


CATALOG_DATA = ROOT / "components/gpustrata/catalog/data"


def catalog_cache(check: bool, data: Path = CATALOG_DATA) -> Result:
    """The JSON cache of each catalogue YAML file in *data*; a cache whose YAML file is
    gone is stale too (deleted when writing)."""
    from gpustrata.catalog.packaged import cache_name, cache_text

    files: dict[Path, str] = {}
    for source in sorted(data.glob("*.yaml")):
        name = cache_name(f"data/{source.name}")
        assert name is not None
        files[data.parent / name] = cache_text(f"data/{source.name}", source.read_text("utf-8"))
    folder = data / "cache"
    orphans = sorted(set(folder.glob("*.json")) - set(files)) if folder.is_dir() else []
    result = _texts(files, check)
    if not check:
        for path in orphans:
            path.unlink()
    return Result(result.stale + orphans, result.written or (not check and bool(orphans)))


def docs(check: bool) -> Result:
    from gpustrata.cli import docs as pages

    folder = ROOT / "docs"
    return _texts({folder / rel: render() for rel, render in pages.PAGES.items()}, check)


def rules_md(check: bool) -> Result:
    from gpustrata_policies.output.docs import rules_markdown

    return _texts({ROOT / "docs" / "rules.md": rules_markdown()}, check)


def stack_args(check: bool) -> Result:
    from gpustrata.cli import codegen

    stale = codegen.stale_files()
    if not check:
        codegen.generate()
    return Result(stale, not check and bool(stale))


def vllm_flags(check: bool) -> Result:
    """vllm-flags.txt is the packer's output of its own per-release sets."""
    import tempfile

    from gpustrata.catalog.vllm_releases import accepted_flags, flag_releases

    tool = _module(ROOT / "tools" / "vllm_flags.py", "_regen_vllm_flags")
    target = ROOT / "components/gpustrata/catalog/data/vllm-flags.txt"
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for version in flag_releases():
            (found,) = accepted_flags(version) or ()
            path = Path(tmp) / f"{version}.txt"
            header = f"# from {target.name}; read: {found.provenance}\n"
            path.write_text(header + "\n".join(sorted(found.flags)) + "\n", encoding="utf-8")
            files.append(path)
        packed = tool.pack(files)
    # the "# from" lines name the extraction's own input files: kept as they are
    current = target.read_text("utf-8").splitlines()
    kept = iter(line for line in current if line.startswith("# from"))
    lines = [
        next(kept, line) if line.startswith("# from") else line for line in packed.splitlines()
    ]
    return _texts({target: "\n".join(lines) + "\n"}, check)


def expected(check: bool) -> Result:
    """Each rule folder's expected.yaml, rewritten only where its data differ."""
    runner = _module(ROOT / "tests/policies/test_rule_folders.py", "_regen_rule_folders")
    from gpustrata_policies.evaluate import all_rules

    stale = []
    for rule in all_rules():
        target = runner._folder(rule) / "expected.yaml"
        text = runner._dump_expected(rule)
        if not target.exists() or _outcomes(yaml.safe_load(text)) != _outcomes(
            yaml.safe_load(target.read_text("utf-8"))
        ):  # a new rule's folder has none yet: write it
            stale.append(target)
            if not check:
                target.write_text(text, encoding="utf-8")
    return Result(stale, not check and bool(stale))


def _outcomes(data: dict[str, Any]) -> dict[str, Any]:
    """expected.yaml as the runner reads it: an empty list and a missing entry are alike
    (a fixture's findings are always listed)."""
    out = {
        section: {name: value for name, value in (entries or {}).items() if value}
        for section, entries in data.items()
        if section != "findings"
    }
    return {k: v for k, v in out.items() if v} | {"findings": data.get("findings") or {}}


def findings(check: bool) -> Result:
    snapshot = _module(ROOT / "tests/policies/test_findings_snapshot.py", "_regen_findings")
    text = json.dumps(snapshot.current(), indent=0, sort_keys=True) + "\n"
    target = snapshot.SNAPSHOT
    if target.is_file() and json.loads(target.read_text("utf-8")) == json.loads(text):
        return Result([], False)
    return _texts({target: text}, check)


def pulumi_template(check: bool) -> Result:
    """pulumi-template/ as ``gpustrata init --pulumi-template`` writes it (through its test's
    arguments, keeping the folder's requirement line)."""
    runner = _module(ROOT / "tests/test_init.py", "_regen_test_init")
    folder = ROOT / "pulumi-template"
    return _texts({folder / rel: text for rel, text in runner.template_files().items()}, check)


_REPORT_TEST = ("-k", "snapshot", "tests/test_markdown_report.py")


def markdown_report(check: bool) -> Result:
    target = ROOT / "tests/snapshots/plan-staging-raise-max-model-len.md"
    before = target.read_text("utf-8") if target.is_file() else None
    env = dict(os.environ)
    if check:
        env.pop("GPUSTRATA_UPDATE_SNAPSHOTS", None)
    else:
        env["GPUSTRATA_UPDATE_SNAPSHOTS"] = "1"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_REPORT_TEST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    after = target.read_text("utf-8") if target.is_file() else None
    if check:
        return Result([] if run.returncode == 0 else [target], False)
    if run.returncode != 0:
        sys.stderr.write(run.stdout[-2000:] + run.stderr[-2000:])
        raise SystemExit(f"regen: {target} could not be written (its test failed above)")
    return Result([target] if after != before else [], after != before)


GENERATORS: dict[str, tuple[Callable[[bool], Result], str]] = {
    "catalog-cache": (catalog_cache, "components/gpustrata/catalog/data/cache/*.json"),
    "docs": (docs, "docs/reference/*.md, docs/images/prod-stack.svg"),
    "rules-md": (rules_md, "docs/rules.md"),
    "stack-args": (stack_args, "components/gpustrata/components/stack_args/"),
    "vllm-flags": (vllm_flags, "components/gpustrata/catalog/data/vllm-flags.txt"),
    "pulumi-template": (pulumi_template, "pulumi-template/"),
    "expected": (expected, "policies/gpustrata_policies/rules/*/expected.yaml"),
    "findings": (findings, "tests/snapshots/findings.json"),
    "markdown-report": (markdown_report, "tests/snapshots/plan-staging-raise-max-model-len.md"),
}
"""In order: the code generators first, then what reads their output."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/regen.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if stale")
    parser.add_argument("--list", action="store_true", help="list the generators")
    parser.add_argument("--only", help=f"comma-separated names: {', '.join(GENERATORS)}")
    args = parser.parse_args(argv)
    if args.list:
        for name, (_, owns) in GENERATORS.items():
            print(f"{name:16} {owns}")
        return 0
    names = [n.strip() for n in args.only.split(",")] if args.only else list(GENERATORS)
    unknown = [n for n in names if n not in GENERATORS]
    if unknown:
        parser.error(f"unknown generator {', '.join(unknown)} (known: {', '.join(GENERATORS)})")
    any_stale = False
    for name in names:
        result: Any = GENERATORS[name][0](args.check)
        for path in result.stale:
            verb = "stale" if args.check else "wrote"
            print(f"{verb}: {path.relative_to(ROOT)} ({name})")
        any_stale = any_stale or bool(result.stale)
    if args.check and any_stale:
        print("regenerate with: python tools/regen.py (and review the diff)", file=sys.stderr)
        return 1
    if not any_stale:
        print("every generated file is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
