"""Shared paths and helpers for the policy tests.

Each rule's fixtures sit in its folder, ``policies/gpustrata_policies/rules/<id>_<name>/``,
beside ``rule.py`` and ``expected.yaml``: :func:`fixture` names one, :func:`fixture_files`
lists them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RULES_DIR = REPO / "policies" / "gpustrata_policies" / "rules"
FIELD_CORPUS = REPO / "tests" / "data" / "field-corpus-1"  # a copy of ../shared/field-corpus
FIELD_CORPUS_2 = REPO / "tests" / "data" / "field-corpus-2"
"""The second field corpus (issue 20): 23 public manifests kept in the repository."""
FIELD_CORPUS_2_REFUSED = REPO / "tests" / "data" / "field-corpus-2-refused"
FIELD_CORPUS_2_CONTEXT = REPO / "tests" / "data" / "field-corpus-2-context"

for extra in (REPO / "components", REPO / "policies"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))


def rule_dir(rule_id: str) -> Path:
    """The folder of rule *rule_id*: ``K001`` -> ``rules/k001_gpu_requests_equal_limits``."""
    (found,) = (p for p in RULES_DIR.glob(f"{rule_id.lower()}_*") if p.is_dir())
    return found


def fixture(rule_id: str, name: str) -> Path:
    """One fixture file of a rule, e.g. ``fixture("K001", "good-limits-only.yaml")``."""
    path = rule_dir(rule_id) / name
    assert path.is_file(), path
    return path


def fixture_files(kind: str = "*", rules: tuple[str, ...] | None = None) -> list[Path]:
    """The ``good-*.yaml`` (*kind* ``good``), ``bad-*.yaml`` (``bad``) or all fixture files
    of every rule folder (or of *rules*), sorted by path."""
    kinds = ("good", "bad") if kind == "*" else (kind,)
    folders = [rule_dir(r) for r in rules] if rules is not None else [RULES_DIR]
    pattern = "{}-*.yaml" if rules is not None else "*/{}-*.yaml"
    return sorted(p for d in folders for k in kinds for p in d.glob(pattern.format(k)))


def fixture_id(path: Path) -> str:
    """A short test id for a fixture: ``K001/bad-request-without-limit.yaml``."""
    return f"{path.parent.name.split('_', 1)[0].upper()}/{path.name}"


def deployment_of(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A Deployment ``llm/vllm`` (label ``app: vllm``) whose Pod template is *pod_spec*:
    the wrapper inline test manifests share."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "llm"},
        "spec": {
            "selector": {"matchLabels": {"app": "vllm"}},
            "template": {"metadata": {"labels": {"app": "vllm"}}, "spec": pod_spec},
        },
    }
