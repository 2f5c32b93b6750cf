"""Render a :class:`~.model.Report` as text, JSON (RULES.md contract) or SARIF 2.1.0."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, TextIO

from gpustrata.core import jsonio
from gpustrata.core.terminal import printable
from gpustrata_policies.evaluate import all_rules
from gpustrata_policies.findings import Finding, Report

__all__ = ["render", "to_sarif", "to_text", "write"]

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL_URI = "https://github.com/gpustrata/gpustrata"


def _where(f: Finding) -> str:
    file = printable(f.file) if f.file else ""
    if file and f.line:
        return f"{file}:{f.line}: "
    return f"{file}: " if file else ""


def to_text(report: Report, quiet: bool = False) -> str:
    """A human-readable listing, one finding per paragraph, then a summary (*quiet*: the
    findings only, nothing when there is none). What the input controls (names, quoted
    values, paths) is printed with control and bidi characters escaped
    (:func:`gpustrata.core.terminal.printable`)."""
    p = printable
    lines: list[str] = []
    for f in report.findings:
        lines.append(
            f"{_where(f)}{f.rule} {f.name} [{f.enforcement}, {f.severity}] {p(f.resource)}"
        )
        lines.append(f"  {p(f.message)}")
        lines.append(f"  fix: {p(f.fix)}")
    if quiet:
        return "".join(f"{line}\n" for line in lines)
    if report.not_evaluated:
        lines.append("not evaluated:")
        lines.extend(f"  {n.rule} {p(n.resource)}: {p(n.reason)}" for n in report.not_evaluated)
    lines.extend(f"warning: {p(w)}" for w in report.warnings)
    mandatory = sum(f.enforcement == "mandatory" for f in report.findings)
    lines.append(
        f"{report.objects} object(s) checked: {mandatory} mandatory, "
        f"{len(report.findings) - mandatory} advisory finding(s), "
        f"{len(report.not_evaluated)} not evaluated"
    )
    return "\n".join(lines) + "\n"


def _uri(file: str) -> str:
    path = Path(file)
    if path.is_absolute():
        try:
            path = path.relative_to(Path.cwd())
        except ValueError:
            return path.as_uri()
    return path.as_posix() if os.sep == "/" else str(path).replace(os.sep, "/")


def to_sarif(report: Report) -> dict[str, Any]:
    """SARIF 2.1.0 for GitHub code scanning: one run, every rule in the driver."""
    rules = all_rules()
    index = {r.meta.id: i for i, r in enumerate(rules)}
    driver_rules = []
    for rule in rules:
        m = rule.meta
        level = "error" if m.default_enforcement["prod"] == "mandatory" else "warning"
        driver_rules.append(
            {
                "id": m.id,
                "name": m.name,
                "shortDescription": {"text": m.title},
                "fullDescription": {"text": m.rationale},
                "help": {
                    "text": f"{m.fix}\n\nReferences: {' '.join(m.references)}",
                    "markdown": f"{m.fix}\n\n" + "\n".join(f"- <{u}>" for u in m.references),
                },
                "helpUri": m.references[0],
                "defaultConfiguration": {"level": level},
                "properties": {"tags": [m.layer, m.severity], "precision": "high"},
            }
        )
    results = []
    for f in report.findings:
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": "error" if f.enforcement == "mandatory" else "warning",
            "message": {"text": f"{f.resource}: {f.message}"},
        }
        if f.rule in index:  # a rule passed to evaluate() directly is not in the driver
            result["ruleIndex"] = index[f.rule]
        if f.file and not f.file.startswith("<"):
            location: dict[str, Any] = {"artifactLocation": {"uri": _uri(f.file)}}
            if f.line:
                location["region"] = {"startLine": f.line}
            result["locations"] = [{"physicalLocation": location}]
        results.append(result)
    crashed = [
        {
            "level": "error",
            "message": {"text": f"{f.rule} on {f.resource}: {f.message}"},
            "descriptor": {"id": f.rule},
        }
        for f in report.findings
        if f.internal
    ]
    notes = [
        {
            "level": "note",
            "message": {"text": f"{n.rule} not evaluated on {n.resource}: {n.reason}"},
        }
        for n in report.not_evaluated
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpustrata",
                        "informationUri": TOOL_URI,
                        "version": "0.1.0",
                        "rules": driver_rules,
                    }
                },
                "invocations": [
                    {
                        # A crashed rule (internal error) means the run did not check everything.
                        "executionSuccessful": not crashed,
                        "toolExecutionNotifications": crashed + notes,
                    }
                ],
                "results": results,
            }
        ],
    }


def write(report: Report, fmt: str, out: TextIO, quiet: bool = False) -> None:
    """Write :func:`render`'s output to *out*; JSON and SARIF are streamed, not built as
    one string first (a large input's report is tens of MB). *quiet*: text lists only
    the findings."""
    if fmt == "text" and quiet:
        out.write(to_text(report, quiet=True))
    elif fmt in ("json", "sarif"):
        # json.dump's bytes at C speed (json indents with its pure-Python encoder).
        jsonio.dump_indented(report.to_json() if fmt == "json" else to_sarif(report), out)
        out.write("\n")
    else:
        out.write(render(report, fmt))


def render(report: Report, fmt: str) -> str:
    """``text``, ``json``, ``sarif`` or ``markdown`` (a pull-request comment)."""
    if fmt in ("json", "sarif"):  # the bytes write() streams
        out = io.StringIO()
        write(report, fmt, out)
        return out.getvalue()
    if fmt == "markdown":
        from gpustrata_policies.output.markdown import to_markdown

        return to_markdown(report)
    return to_text(report)
