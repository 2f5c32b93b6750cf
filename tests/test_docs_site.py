"""The docs site: reference pages are current, examples validate, mkdocs builds strictly."""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from _stacks import ROOT, stack_doc

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.catalog.compat import load_compat_catalog
from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.cli import app as cli
from gpustrata.cli import docs as docgen
from gpustrata.cli.docs_catalogue import catalogue_markdown
from gpustrata.planning.build import plan_spec
from gpustrata.spec.loader import validate_stack
from gpustrata.spec.stack import StackSpec

DOCS = ROOT / "docs"


def _docs_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m gpustrata.cli.docs ARGS`` in a fresh interpreter, as ``tools/regen.py``
    and a contributor run it: the component schema is built by Pulumi's analyzer, which
    reads field descriptions from source, and in a process that has run hundreds of other
    tests it was seen (session 18) to drop one description; the pages are a product of
    the command, so the command is what is checked."""
    return subprocess.run(
        [sys.executable, "-m", "gpustrata.cli.docs", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("docs")
    done = _docs_cli("--docs-dir", str(out))
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.parametrize("rel", sorted(docgen.PAGES))
def test_generated_page_is_current(rel: str, generated: Path) -> None:
    path = DOCS / rel
    assert path.exists(), f"{path} missing: run python -m gpustrata.cli.docs"
    assert path.read_text(encoding="utf-8") == (generated / rel).read_text(encoding="utf-8"), (
        f"{path} is stale: run python -m gpustrata.cli.docs"
    )


def test_check_mode_reports_stale_pages(tmp_path: Path) -> None:
    first = _docs_cli("--check", "--docs-dir", str(tmp_path))
    assert first.returncode == 1 and "regenerate with" in first.stderr
    assert _docs_cli("--docs-dir", str(tmp_path)).returncode == 0
    assert _docs_cli("--check", "--docs-dir", str(tmp_path)).returncode == 0
    page = tmp_path / "reference" / "cli.md"
    page.write_text(page.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    assert _docs_cli("--check", "--docs-dir", str(tmp_path)).returncode == 1


def _section(page: str, heading: str) -> str:
    """The text of a `## heading` section up to the next `## `."""
    start = page.index(f"\n## {heading}\n")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else len(page)]


def test_spec_reference_documents_every_field() -> None:
    page = docgen.spec_markdown()
    schema = StackSpec.model_json_schema()
    models: dict[str, Any] = {"StackSpec": schema, **schema["$defs"]}
    for name, model in models.items():
        section = _section(page, name)
        for field, prop in model["properties"].items():
            row = next(line for line in section.splitlines() if line.startswith(f"| `{field}` |"))
            if prop.get("description"):
                assert prop["description"].split()[0] in row, (name, field)
            for value in prop.get("enum", []):
                assert f"`{value}`" in row, (name, field, value)


def test_cli_reference_lists_every_command_and_option() -> None:
    page = docgen.cli_markdown()
    parser = cli.build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert subs
    for sub in subs:
        for name, command in sub.choices.items():
            section = _section(page, f"gpustrata {name}")
            for action in command._actions:
                for option in action.option_strings:
                    if option not in ("-h", "--help"):
                        assert f"`{option}`" in section, (name, option)
                for choice in action.choices or ():
                    assert f"`{choice}`" in section, (name, choice)


def test_catalogue_reference_cites_every_entry() -> None:
    page = catalogue_markdown()
    hardware = load_hardware_catalog()
    entries: list[tuple[str, list[str]]] = [
        *((f"`{g.id}`", g.sources) for g in hardware.gpus.values()),
        *((f"`{i.name}`", i.sources) for i in hardware.instances.values()),
        *((f"`{m.id}`", m.sources) for m in load_model_catalog()),
        *((f"`{r.version}`", r.sources) for r in load_compat_catalog().gpu_operator_releases()),
    ]
    for key, sources in entries:
        row = next((line for line in page.splitlines() if line.startswith(f"| {key} |")), None)
        assert row is not None, key
        first = sources[0].split()[0]
        assert first in row or first.replace("|", "\\|") in row, (key, first)


def _stack_snippets() -> list[tuple[str, str]]:
    """YAML blocks of the how-tos that are parts of a `gpustrata:stack` (4-space keys)."""
    found = []
    for page in sorted((DOCS / "howto").glob("*.md")):
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            first = block.splitlines()[0]
            if re.match(r"^    [a-z_]+:\s*(#.*)?$", first):
                found.append((page.name, block))
    return found


def test_howto_snippets_exist() -> None:
    pages = {name for name, _ in _stack_snippets()}
    assert {"add-a-model.md", "add-a-gpu-pool.md", "move-a-model-to-ray.md"} <= pages


@pytest.mark.parametrize(
    "page,block", _stack_snippets(), ids=[f"{n}-{i}" for i, (n, _) in enumerate(_stack_snippets())]
)
def test_howto_stack_snippet_validates_and_plans(page: str, block: str) -> None:
    """Each snippet, merged into the prod stack (lists by name), validates and plans."""
    fragment = yaml.safe_load(block)
    doc = copy.deepcopy(stack_doc("prod"))
    for key, value in fragment.items():
        if isinstance(value, list) and isinstance(doc.get(key), list):
            names = {item["name"]: i for i, item in enumerate(doc[key]) if "name" in item}
            for item in value:
                if item.get("name") in names:
                    doc[key][names[item["name"]]] = item
                else:
                    doc[key].append(item)
        elif isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    spec = validate_stack(doc, file=f"docs/howto/{page}")
    plan = plan_spec(spec, f"docs/howto/{page}")
    for model in fragment.get("models", []):
        assert model["name"] in plan.models


def test_yaml_program_example_stack_validates() -> None:
    text = (DOCS / "howto" / "other-languages.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(name: llm.*?)```", text, re.S)
    assert block is not None
    program = yaml.safe_load(block.group(1))
    resource = program["resources"]["llm"]
    assert resource["type"] == "gpustrata:index:InferenceStack"
    # Schema names (camelCase), mapped to the spec's as the provider maps a Construct.
    from gpustrata.runtime.provider import provider

    args = provider().component_args("InferenceStack", resource["properties"])
    document = json.loads(json.dumps(args["stack"]))
    plan_spec(validate_stack(document, file="other-languages.md"))


def _mkdocs(cwd: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # No --quiet: it raises mkdocs' log level above WARNING, and --strict then counts no
    # warnings at all (a broken link builds "successfully"; see the test below).
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="docs extra: pip install -c constraints.txt -e '.[docs]'")
    result = _mkdocs(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("quickstart", "concepts/schedulers", "reference/spec", "rules"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page
    # The workflow file is included verbatim (snippets), so the page shows what is tested.
    ci_page = (tmp_path / "site" / "howto" / "ci" / "index.html").read_text(encoding="utf-8")
    assert "upload-sarif" in ci_page and "gpustrata-check" in ci_page


def test_mkdocs_strict_fails_on_a_broken_link(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="docs extra: pip install -c constraints.txt -e '.[docs]'")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "quickstart.md"
    page.write_text(
        page.read_text(encoding="utf-8") + "\n[gone](reference/spec.md#no-such-section)\n",
        encoding="utf-8",
    )
    result = _mkdocs(tmp_path, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-section" in result.stdout + result.stderr
