"""Markdown for pull-request comments: escaping, findings by severity, ``check`` reports.

Every string that comes from a user (resource names, model ids, messages quoting stack
values) goes through :func:`escape`, so it renders as the same literal text on GitHub
(cmark-gfm), in CommonMark renderers and in Python-Markdown: no emphasis, links, HTML,
table breaks, math or @-mentions can be smuggled in. Markdown produced here is wrapped
in :class:`Md`, which marks it as trusted so it is not escaped twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpustrata.core.terminal import printable
from gpustrata_policies.findings import SEVERITIES, Report

__all__ = [
    "Md",
    "code",
    "escape",
    "findings_markdown",
    "not_evaluated_markdown",
    "plural",
    "status_line",
    "to_markdown",
]


class Md(str):
    """A string that is already Markdown (escaped where needed): emit as is."""

    __slots__ = ()


# Inline specials: emphasis, code, links/images, tables, strikethrough, math, escapes.
_INLINE = re.compile(r"([\\`*_\[\]|~$])")
# Only special at the start of a line or cell: headings, lists, quotes, setext/thematic.
_LEADING = re.compile(r"^([#+\-=>])")
_ORDERED = re.compile(r"^(\d+)([.)])(?=\s|$)")
_BLANKS = re.compile(r"\s+")


def escape(text: object) -> Md:
    """``text`` as literal Markdown text on one line.

    Backslash-escapes the inline specials (``\\ ` * _ [ ] | ~ $``), writes ``&`` and
    ``<`` as entities (Python-Markdown has no backslash escape for them), escapes a
    leading block marker, collapses line breaks, and breaks ``@`` mentions with a
    zero-width space the way Renovate does, so a name like ``@org/team`` pings no one.
    """
    if isinstance(text, Md):
        return text
    s = printable(_BLANKS.sub(" ", str(text)).strip())
    s = s.replace("&", "&amp;").replace("<", "&lt;")
    s = _INLINE.sub(r"\\\1", s)
    s = _LEADING.sub(r"\\\1", s)
    s = _ORDERED.sub(r"\1\\\2", s)
    s = s.replace("@", "@&#8203;")
    return Md(s)


def code(text: object) -> Md:
    """``text`` as an inline code span; plain escaped text when a code span cannot hold it.

    A backtick, a ``|`` (a table would split the span) or a line break falls back to
    :func:`escape`.
    """
    s = str(text)
    if not s or any(c in s for c in "`|\n\r") or printable(s) != s:
        return escape(s)
    return Md(f"`{s}`")


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 finding`` / ``3 findings``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


_SEVERITY_TITLES = {
    "critical": "🔴 Critical",
    "high": "🟠 High",
    "medium": "🟡 Medium",
    "low": "⚪ Low",
}


def status_line(findings: Sequence[Mapping[str, Any]], exit_code: int) -> Md:
    """``❌ **Fails**: 1 mandatory finding`` / ``✅ **Passes** ...``: the first thing read."""
    mandatory = sum(f.get("enforcement") == "mandatory" for f in findings)
    advisory = len(findings) - mandatory
    if exit_code:
        rules = dict.fromkeys(
            f"{f['rule']} {f.get('name', '')}".strip()
            for f in findings
            if f.get("enforcement") == "mandatory"
        )
        head = (
            f"❌ **Fails: {plural(mandatory, 'mandatory finding')}** ({escape(', '.join(rules))})"
        )
        rest = f", {plural(advisory, 'advisory finding')}" if advisory else ""
    elif advisory:
        head, rest = "✅ **Passes**", f" with {plural(advisory, 'advisory finding')}"
    else:
        head, rest = "✅ **Passes**", ": no findings"
    return Md(head + rest)


def _occurrence(f: Mapping[str, Any]) -> str:
    tags = " (**internal error**: the rule crashed here; report it)" if f.get("internal") else ""
    if f.get("status") == "new":
        tags += " (**new in this change**)"
    elif f.get("status") == "existing":
        tags += " (already on the base)"
    where = f" at {code(_location(f))}" if f.get("file") else ""
    return f"{code(f['resource'])}{where}{tags}: {escape(f['message'])}"


def _rule_lines(group: Sequence[Mapping[str, Any]]) -> list[str]:
    """One bullet per rule and enforcement with the fix once, then its occurrences.

    The rule's general fix is left out when every message already gives its own,
    computed one ("Fix: set max_model_len to at most 21,456")."""
    first = group[0]
    head = f"- **{escape(first['rule'])} {escape(first.get('name', ''))}** ({first['enforcement']})"
    own = all(" Fix: " in f["message"] for f in group)
    if len(group) == 1:
        fix = "" if own else f"<br>**Fix:** {escape(first['fix'])}"
        return [f"{head} on {_occurrence(first)}{fix}"]
    fix = "" if own else f" **Fix:** {escape(first['fix'])}"
    lines = [f"{head}, {len(group)} times.{fix}"]
    return lines + [f"  - on {_occurrence(f)}" for f in group]


def _location(f: Mapping[str, Any]) -> str:
    return f"{f['file']}:{f['line']}" if f.get("line") else str(f["file"])


def findings_markdown(
    findings: Sequence[Mapping[str, Any]],
    *,
    level: int = 3,
    resolved: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """Findings grouped by severity (critical first), mandatory before advisory, each
    with its fix. ``findings`` are ``Finding.to_json()`` dicts, optionally with ``file``,
    ``line`` and ``status`` (``new`` / ``existing`` against a base); ``resolved`` lists
    findings of the base that this change removes."""
    hashes = "#" * level
    lines = [f"{hashes} Findings ({len(findings)})", ""]
    if not findings:
        lines += ["No rule found anything to fix.", ""]
    order = {"mandatory": 0, "advisory": 1}
    for severity in SEVERITIES:
        group = [f for f in findings if f.get("severity") == severity]
        if not group:
            continue
        lines += [f"{hashes}# {_SEVERITY_TITLES[severity]} ({len(group)})", ""]
        by_rule: dict[tuple[int, str, str], list[Mapping[str, Any]]] = {}
        for f in group:
            enforcement = str(f.get("enforcement"))
            by_rule.setdefault((order.get(enforcement, 2), f["rule"], enforcement), []).append(f)
        for key in sorted(by_rule):
            lines += _rule_lines(by_rule[key])
        lines.append("")
    if resolved:
        lines += [f"{hashes}# No longer reported after this change ({len(resolved)})", ""]
        lines += [
            f"- ~~{escape(f['rule'])} {escape(f.get('name', ''))}~~ on {code(f['resource'])}"
            for f in resolved
        ]
        lines.append("")
    return lines


def not_evaluated_markdown(
    items: Iterable[Mapping[str, Any]], *, title: str = "Not evaluated"
) -> list[str]:
    """A collapsed table of what was not evaluated and why (``rule``/``resource``/``reason``)."""
    rows = list(items)
    if not rows:
        return []
    lines = [
        f"<details><summary>{title} ({len(rows)}): inputs gpustrata did not have</summary>",
        "",
        "| rule | resource | why |",
        "|---|---|---|",
    ]
    lines += [
        f"| {escape(r['rule'])} | {code(r['resource'])} | {escape(r['reason'])} |" for r in rows
    ]
    lines += ["", "</details>", ""]
    return lines


def to_markdown(report: Report) -> str:
    """``gpustrata check --format markdown``: a pull-request comment for manifests."""
    findings: list[dict[str, Any]] = []
    for f in report.findings:
        entry: dict[str, Any] = dict(f.to_json())
        if f.file and not f.file.startswith("<"):
            entry["file"], entry["line"] = f.file, f.line
        if getattr(f, "internal", False):
            entry["internal"] = True
        findings.append(entry)
    lines = [
        "## gpustrata check",
        "",
        f"{status_line(findings, report.exit_code)} · {plural(report.objects, 'object')} "
        f"checked · {len(report.not_evaluated)} not evaluated",
        "",
    ]
    lines += findings_markdown(findings)
    lines += not_evaluated_markdown(n.to_json() for n in report.not_evaluated)
    if report.warnings:
        lines += ["**Warnings**", ""]
        lines += [f"- {escape(w)}" for w in report.warnings]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
