"""Rule metadata, findings and reports: the vocabulary every adapter shares."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from gpustrata.core.environments import Environment
from gpustrata_policies.index import EvaluationIndex

if TYPE_CHECKING:
    from gpustrata_policies.config import PolicyConfig
    from gpustrata_policies.view.objects import K8sObject

__all__ = [
    "ENFORCEMENTS",
    "LAYERS",
    "SEVERITIES",
    "Enforcement",
    "Finding",
    "Layer",
    "NotEvaluated",
    "Outcome",
    "Report",
    "Rule",
    "RuleContext",
    "RuleMeta",
    "Scope",
    "Severity",
    "Violation",
]

Enforcement = Literal["mandatory", "advisory", "disabled"]
ENFORCEMENTS: tuple[Enforcement, ...] = ("mandatory", "advisory", "disabled")
Severity = Literal["critical", "high", "medium", "low"]
SEVERITIES: tuple[Severity, ...] = ("critical", "high", "medium", "low")
Layer = Literal["kubernetes", "gpu-operator", "ray", "vllm", "routing"]
LAYERS: tuple[Layer, ...] = ("kubernetes", "gpu-operator", "ray", "vllm", "routing")
Scope = Literal["resource", "stack"]
"""``resource``: the rule reads one object at a time; ``stack``: it relates several."""

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class RuleMeta:
    """Public metadata of a rule (RULES.md). ``id`` and ``name`` never change meaning."""

    id: str
    name: str
    title: str
    layer: Layer
    severity: Severity
    default_enforcement: dict[Environment, Enforcement]
    rationale: str
    fix: str
    references: tuple[str, ...]
    scope: Scope = "resource"
    thresholds: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """Configurable thresholds: key -> (JSON-schema type, default value)."""


@dataclass(frozen=True, slots=True)
class Violation:
    """What a rule reports: the object, a message quoting the bad values, where."""

    obj: K8sObject
    message: str
    path: Path = ()
    advisory: bool = False
    """Reported as advisory even where the rule is mandatory (RULES.md: a rule whose row
    makes some cases advisory, e.g. R004 for a Ray version mismatch that crosses nothing)."""


@dataclass(frozen=True, slots=True)
class NotEvaluated:
    """A rule could not decide for one object; ``reason`` says which input is missing."""

    rule: str
    resource: str
    reason: str

    def to_json(self) -> dict[str, str]:
        """The ``not_evaluated`` entry of the JSON output contract."""
        return {"rule": self.rule, "resource": self.resource, "reason": self.reason}


Outcome = Violation | NotEvaluated


@dataclass(frozen=True, slots=True)
class Finding:
    """A violation with the rule's metadata and the effective enforcement applied."""

    rule: str
    name: str
    severity: Severity
    enforcement: Enforcement
    resource: str
    message: str
    fix: str
    file: str | None = None
    line: int | None = None
    internal: bool = False
    """The rule crashed on the object (an internal error), see ``engine.internal_error``."""

    def to_json(self) -> dict[str, str]:
        """The ``findings`` entry of the JSON output contract (RULES.md), exactly."""
        return {
            "rule": self.rule,
            "name": self.name,
            "severity": self.severity,
            "enforcement": self.enforcement,
            "resource": self.resource,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass(slots=True)
class Report:
    """Everything one evaluation found."""

    findings: list[Finding] = field(default_factory=list)
    not_evaluated: list[NotEvaluated] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    objects: int = 0

    @property
    def exit_code(self) -> int:
        """0 without a mandatory finding, 1 with one or more (RULES.md)."""
        return 1 if any(f.enforcement == "mandatory" for f in self.findings) else 0

    def to_json(self) -> dict[str, list[dict[str, str]]]:
        """The JSON output contract of ``gpustrata check``."""
        return {
            "findings": [f.to_json() for f in self.findings],
            "not_evaluated": [n.to_json() for n in self.not_evaluated],
        }


class RuleContext:
    """What a rule's check function gets besides the object: config, the evaluation's
    :class:`~gpustrata_policies.index.EvaluationIndex` and helpers."""

    __slots__ = ("_not_evaluated", "config", "index", "meta", "objects")

    def __init__(
        self,
        meta: RuleMeta,
        config: PolicyConfig,
        objects: Sequence[K8sObject] = (),
        *,
        index: EvaluationIndex | None = None,
    ) -> None:
        """*index* is the evaluation's (the evaluator passes it); without one, an index
        of *objects* is built (a rule called on its own, in a test)."""
        self.meta = meta
        self.config = config
        self.index = index if index is not None else EvaluationIndex(objects)
        self.objects: Sequence[K8sObject] = self.index.objects
        """Every object of the evaluation (the index's), for rules that look across them."""
        self._not_evaluated: dict[tuple[str, str], NotEvaluated] = {}

    def memo(self, key: Hashable, factory: Callable[[], Any]) -> Any:
        """A value computed once per evaluation (indexes over all objects), kept in the
        index (:meth:`~gpustrata_policies.index.EvaluationIndex.derived`). The unknown
        values its factory read count as read by every caller
        (:func:`~gpustrata.core.unknown.replay_reads`)."""
        return self.index.derived(key, factory)

    def threshold(self, key: str) -> Any:
        """The configured value of one of this rule's thresholds."""
        return self.config.threshold(self.meta.id, key, self.meta.thresholds[key][1])

    def violation(
        self, obj: K8sObject, message: str, path: Path = (), *, advisory: bool = False
    ) -> Violation:
        """A violation on *obj*; *path* points at the offending field for line numbers.

        ``advisory=True`` caps this finding's enforcement at advisory.
        """
        return Violation(obj, message, path, advisory)

    def not_evaluated(self, obj: K8sObject, reason: str) -> NotEvaluated:
        """A not-evaluated record for *obj* (records are values: a rule that gives one
        reason many times for an object, once per container, gets the one record)."""
        key = (obj.resource, reason)
        found = self._not_evaluated.get(key)
        if found is None:
            found = self._not_evaluated[key] = NotEvaluated(
                self.meta.id, obj.resource, self.index.text(reason)
            )
        return found


CheckFn = Callable[[RuleContext, "K8sObject"], Iterable[Outcome]]
"""A check: called once per object (the subject); ``ctx.objects`` holds all objects."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule: metadata plus a pure check function, called once per object."""

    meta: RuleMeta
    check: CheckFn
