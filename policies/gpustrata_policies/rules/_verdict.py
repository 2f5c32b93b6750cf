"""A rule's decision as data (not a rule: the registry skips ``_`` modules).

A rule split as ``judge(...) -> Verdict`` and ``message(verdict) -> str`` decides with typed
values (numbers, versions, thresholds, sources) and renders prose separately, so tests assert
the decision and its figures, not the wording (issue 32).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from gpustrata_policies.findings import CheckFn, Outcome, Path, RuleContext
from gpustrata_policies.view.objects import K8sObject

Decision = Literal["violation", "advisory", "not_evaluated"]
Judge = Callable[[RuleContext, K8sObject], Iterable["Verdict"]]
"""A rule's decisions on one object (the subject; ``ctx.objects`` holds all objects)."""
Value = str | int | float | Fraction | bool | None | tuple["Value", ...]


@dataclass(frozen=True)
class Verdict:
    """One decision of a rule on one object.

    *reason* names the case (a rule-local key such as ``"mixed-images"``); *values* are the
    figures read from the input, *thresholds* what they are judged against, *sources* where a
    value or threshold came from (a field path, a catalogue release, an operator's image).
    *path* points at the offending field (a violation's line number).
    """

    decision: Decision
    reason: str
    values: Mapping[str, Value] = field(default_factory=dict)
    thresholds: Mapping[str, Value] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    path: Path = ()


def outcomes(
    ctx: RuleContext,
    obj: K8sObject,
    verdicts: Iterable[Verdict],
    message: Callable[[Verdict], str],
) -> Iterator[Outcome]:
    """The findings and not-evaluated records of *verdicts*, worded by *message*."""
    for verdict in verdicts:
        text = message(verdict)
        if verdict.decision == "not_evaluated":
            yield ctx.not_evaluated(obj, text)
        else:
            yield ctx.violation(obj, text, verdict.path, advisory=verdict.decision == "advisory")


@dataclass(frozen=True)
class Worded:
    """A judge whose verdicts its folder's ``meta.yaml`` words: one ``messages`` template per
    verdict reason, filled from the verdict's values and thresholds (and *fields*, for text
    they do not hold as such), as ESLint rules word a report by ``messageId`` and ``data``.
    ``RULE = folder_rule(__name__, worded(judge))``; :func:`~gpustrata_policies.rules._meta.
    folder_rule` reads the templates."""

    judge: Judge
    fields: Callable[[Verdict], Mapping[str, object]] | None = None


def worded(judge: Judge, fields: Callable[[Verdict], Mapping[str, object]] | None = None) -> Worded:
    """*judge*, to be worded by the ``messages`` of its folder's ``meta.yaml``; *fields*
    (optional) adds derived text to a verdict's values and thresholds (replacing one of the
    same name) before its template is filled."""
    return Worded(judge, fields)


def judged(judge: Judge, message: Callable[[Verdict], str]) -> CheckFn:
    """The check of a rule split as *judge* + *message*: its verdicts as findings and
    not-evaluated records (``RULE = folder_rule(__name__, judged(judge, message))``)."""

    def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
        return outcomes(ctx, obj, judge(ctx, obj), message)

    check.__module__ = judge.__module__  # the rule's own module, as a plain check's
    check.__doc__ = f"The findings of {judge.__module__}: its judge worded by its message."
    return check
