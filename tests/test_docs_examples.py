"""Docs examples pass the project's own rules: every stack example in docs/ and the
README (how-to snippets merged into the reference stack they extend, full stack files,
the YAML program's stack) is planned under Pulumi's mocks and checked, and every
manifest example is checked; a mandatory finding fails. docs/rules.md is left out: its
examples violate their rule on purpose."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from _stacks import ROOT, stack_doc

from gpustrata.runtime.mockrun import run_program
from gpustrata.runtime.provider import provider
from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.inputs.pulumi import objects_from_pulumi

PAGES = [
    *sorted(p for p in (ROOT / "docs").rglob("*.md") if p.name != "rules.md"),
    ROOT / "README.md",
]
SNIPPET = re.compile(r"^    [a-z_]+:\s*(#.*)?$")


def _blocks() -> list[tuple[str, str, str]]:
    """(page, kind, YAML text) of every YAML block: snippet, stack, program or manifest."""
    found = []
    for page in PAGES:
        rel = str(page.relative_to(ROOT))
        for block in re.findall(r"```ya?ml\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            if "gpustrata:stack:" in block:
                found.append((rel, "stack", block))
            elif re.search(r"^apiVersion:", block, re.M) and re.search(r"^kind:", block, re.M):
                found.append((rel, "manifest", block))
            elif re.search(r"^\s*type: gpustrata:index:InferenceStack", block, re.M):
                found.append((rel, "program", block))
            elif SNIPPET.match(block.splitlines()[0]):
                found.append((rel, "snippet", block))
    return found


def _merge(fragment: Any, doc: Any) -> Any:
    """The reference stack with the snippet merged in, as the how-tos tell the reader to
    edit it: mappings key by key, lists of named entries by name (an entry of the same
    name is replaced, a new one appended), anything else replaced."""
    if isinstance(fragment, dict) and isinstance(doc, dict):
        out = copy.deepcopy(doc)
        for key, value in fragment.items():
            out[key] = _merge(value, doc[key]) if key in doc else value
        return out
    if isinstance(fragment, list) and isinstance(doc, list):
        out_list = copy.deepcopy(doc)
        names = {item.get("name"): i for i, item in enumerate(doc) if isinstance(item, dict)}
        for item in fragment:
            if isinstance(item, dict) and item.get("name") in names:
                out_list[names[item["name"]]] = item
            else:
                out_list.append(item)
        return out_list
    return fragment


# The examples issue 16 found failing: they must be clean, not only free of mandatory findings.
CLEAN = {"docs/howto/add-a-model.md", "docs/howto/other-languages.md"}


def _findings_of_stack(doc: dict[str, Any], stack: str, every: bool) -> list[str]:
    resources = run_program(doc, stack=stack, program=ROOT / "__main__.py")
    objects = objects_from_pulumi((r.type, r.name, r.inputs) for r in resources)
    report = evaluate(objects, environment=doc.get("environment", stack))
    return [
        f"{f.rule} {f.resource}: {f.message}"
        for f in report.findings
        if every or f.enforcement == "mandatory"
    ]


BLOCKS = _blocks()


def test_the_examples_are_found() -> None:
    kinds = {(page, kind) for page, kind, _ in BLOCKS}
    assert ("docs/howto/other-languages.md", "program") in kinds
    assert ("docs/howto/add-a-model.md", "snippet") in kinds


@pytest.mark.parametrize(
    ("page", "kind", "block"), BLOCKS, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(BLOCKS)]
)
def test_example_has_no_mandatory_finding(page: str, kind: str, block: str, tmp_path: Path) -> None:
    data = yaml.safe_load(block)
    if kind == "manifest":
        path = tmp_path / "example.yaml"
        path.write_text(block)
        report = evaluate(load_paths([str(path)]))
        bad = [f"{f.rule} {f.resource}: {f.message}" for f in report.findings]
        assert not [f for f in report.findings if f.enforcement == "mandatory"], (page, bad)
        return
    if kind == "stack":
        docs = [(data["config"]["gpustrata:stack"], "dev")]
    elif kind == "program":  # schema names, mapped as the provider maps a Construct
        args = provider().component_args("InferenceStack", data["resources"]["llm"]["properties"])
        docs = [(json.loads(json.dumps(args["stack"])), "dev")]
    else:  # a snippet extends the reference stack its page plans (`--stack X`)
        text = (ROOT / page).read_text(encoding="utf-8")
        named = re.search(r"gpustrata plan --stack (dev|staging|prod)", text)
        env = named.group(1) if named else "prod"
        docs = [(_merge(data, stack_doc(env)), env)]
    for doc, stack in docs:
        found = _findings_of_stack(doc, stack, every=page in CLEAN)
        assert not found, (page, stack, found)
