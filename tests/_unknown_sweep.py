"""The preview sweep: every node of every rule fixture, in turn, made unknown.

During ``pulumi preview`` any value may be unknown (Pulumi's sentinel, turned into
:data:`~gpustrata.core.unknown.UNKNOWN` by the pack). A rule whose input is unknown is not
applicable, never violated. This module replaces each node of each fixture object (every
mapping value and list item, so whole subtrees as well as leaves) with ``UNKNOWN``,
evaluates the fixture's objects again and reports each mandatory finding the all-known
fixture did not produce (same rule, resource and message). Used by
``tests/policies/test_preview_unknowns.py``, in process and through the gRPC pack.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _fuzz import get

from gpustrata.core.unknown import UNKNOWN
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view.objects import K8sObject

NodePath = tuple[str | int, ...]
FindingKey = tuple[str, str, str]  # rule, resource, message


def node_paths(data: Any, prefix: NodePath = ()) -> Iterator[NodePath]:
    """Every mapping value and list item under *data*, parents before their children."""
    if isinstance(data, Mapping):
        items: Iterator[tuple[str | int, Any]] = iter(data.items())
    elif isinstance(data, list):
        items = iter(enumerate(data))
    else:
        return
    for key, value in items:
        path = (*prefix, key)
        yield path
        yield from node_paths(value, path)


def leaf_paths(data: Any) -> list[NodePath]:
    """The paths of :func:`node_paths` that hold a scalar (not a mapping or list)."""
    return [p for p in node_paths(data) if not isinstance(get(data, p), Mapping | list)]


def replaced(data: Any, path: NodePath, value: Any) -> Any:
    """A copy of *data* with the node at *path* set to *value* (only the path is copied)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, Mapping):
        out = dict(data)
        out[str(head)] = replaced(data[head], rest, value)
        return out
    items = list(data)
    assert isinstance(head, int)
    items[head] = replaced(items[head], rest, value)
    return items


def mandatory(objects: list[K8sObject], known: list[K8sObject] | None = None) -> set[FindingKey]:
    """The mandatory findings (rule, resource, message) of *objects*, as ``check`` runs
    (environment prod, default config). With *known* (the same objects, all values known),
    each resource is named as in *known*: an unknown ``metadata.name`` renames the object
    (``Deployment/default/?``) but does not make its findings new."""
    report = evaluate(objects)
    names = {o.resource: k.resource for o, k in zip(objects, known or objects, strict=True)}
    return {
        (f.rule, names.get(f.resource, f.resource), f.message)
        for f in report.findings
        if f.enforcement == "mandatory"
    }


@dataclass(frozen=True, slots=True)
class Trial:
    """One node of one object of one fixture made unknown."""

    fixture: Path
    index: int
    """Which object of the fixture."""
    path: NodePath

    def objects(self, known: list[K8sObject]) -> list[K8sObject]:
        """The fixture's objects with this trial's node unknown."""
        out = list(known)
        obj = known[self.index]
        out[self.index] = K8sObject(
            replaced(obj.raw, self.path, UNKNOWN), obj.file, obj.line, obj.lines
        )
        return out

    @property
    def label(self) -> str:
        """``K004/good-x.yaml#1 spec.template.spec.tolerations[0]``."""
        where = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in self.path)
        rule = self.fixture.parent.name.split("_", 1)[0].upper()
        return f"{rule}/{self.fixture.name}#{self.index} {where.lstrip('.')}"


@dataclass(slots=True)
class SweepResult:
    """What a sweep tried and what it found."""

    trials: int = 0
    fixtures: int = 0
    new: dict[str, set[FindingKey]] | None = None
    """Trial label -> mandatory findings the known fixture did not produce."""

    def rules(self) -> dict[str, int]:
        """New findings per rule id."""
        out: dict[str, int] = {}
        for found in (self.new or {}).values():
            for rule, _, _ in found:
                out[rule] = out.get(rule, 0) + 1
        return dict(sorted(out.items()))


def trials(fixture: Path, objects: list[K8sObject], *, leaves_only: bool = False) -> list[Trial]:
    """Every trial of one fixture (or only its scalar leaves)."""
    return [
        Trial(fixture, index, path)
        for index, obj in enumerate(objects)
        for path in (leaf_paths(obj.raw) if leaves_only else list(node_paths(obj.raw)))
    ]


def sweep(fixtures: list[Path]) -> SweepResult:
    """Run every trial of every fixture in process."""
    result = SweepResult(new={})
    assert result.new is not None
    for fixture in fixtures:
        objects = load_paths([str(fixture)])
        before = mandatory(objects)
        result.fixtures += 1
        for trial in trials(fixture, objects):
            result.trials += 1
            extra = mandatory(trial.objects(objects), objects) - before
            if extra:
                result.new[trial.label] = extra
    return result
