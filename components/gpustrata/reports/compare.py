"""What a change to a stack file does: the base stack file, and head against base.

``gpustrata plan --base BASE`` reads the base stack file one of two ways:

* ``BASE`` names an existing file: that file (``--base old/Pulumi.prod.yaml``);
* otherwise ``BASE`` is a git revision (``origin/main``, a tag, a commit), and the CLI
  runs ``git show BASE:./<stack file>`` in the stack file's directory, i.e. the same
  path at that revision. Write ``./NAME`` to force a file, ``refs/heads/NAME`` to force
  a branch when a file of the same name exists.

A stack file that does not exist at the revision is a new stack: everything is added.
The base is planned and checked with the current code and catalogues, so the
comparison isolates what the stack file change does.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpustrata.core.errors import GpustrataError, InputError, StackError
from gpustrata.planning.plan_types import StackPlan

__all__ = [
    "MISSING",
    "BaseStack",
    "Change",
    "Comparison",
    "compare",
    "flatten",
    "read_base",
]


class _Missing:
    """Marks a setting that one side does not have."""

    def __repr__(self) -> str:
        return "(absent)"


MISSING: Any = _Missing()


@dataclass(frozen=True)
class BaseStack:
    """The base stack file: where it came from and its text (None: not at that revision)."""

    label: str
    """``origin/main:stacks/Pulumi.prod.yaml`` or the file path, for the report."""
    text: str | None


def read_base(base: str, head_file: Path) -> BaseStack:
    """Read the base of ``head_file``: the file ``base``, or ``head_file`` at revision ``base``.

    Raises :class:`InputError` when ``base`` is neither a readable file nor a revision
    git knows.
    """
    candidate = Path(base)
    if candidate.is_file():
        try:
            return BaseStack(str(candidate), candidate.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"--base {base}: cannot read the file ({exc})") from None
    return _read_at_revision(base, head_file)


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(
            f"--base: git is not usable here ({exc}); pass the base stack file as a path"
        ) from None


def _read_at_revision(revision: str, head_file: Path) -> BaseStack:
    directory = head_file.resolve().parent
    if revision.startswith("-"):
        raise InputError(f"--base {revision}: not a file and not a git revision")
    verify = _git(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], directory)
    if verify.returncode != 0:
        reason = verify.stderr.strip().splitlines()[-1] if verify.stderr.strip() else ""
        raise InputError(
            f"--base {revision}: not a file and not a git revision in {directory}"
            + (f" ({reason})" if reason else "")
            + "; pass a branch, tag or commit (e.g. origin/main) or the path of a stack file"
        )
    top = _git(["rev-parse", "--show-toplevel"], directory).stdout.strip()
    relative = head_file.resolve().relative_to(Path(top).resolve()) if top else head_file
    label = f"{revision}:{relative.as_posix()}"
    shown = _git(["show", f"{revision}:./{head_file.name}"], directory)
    if shown.returncode != 0:
        return BaseStack(label, None)  # the stack file is new in this change
    return BaseStack(label, shown.stdout)


@dataclass(frozen=True)
class Change:
    """One value that differs between base and head (``MISSING`` on the side without it)."""

    path: str
    before: Any
    after: Any
    why: str = ""


@dataclass
class Comparison:
    """Head against base: settings, derived values, resources and findings."""

    base: BaseStack
    base_plan: StackPlan | None = None
    base_error: str | None = None
    """Why the base could not be planned (then only the settings are compared)."""
    settings: list[Change] = field(default_factory=list)
    derived: list[Change] = field(default_factory=list)
    resources_added: list[str] = field(default_factory=list)
    resources_removed: list[str] = field(default_factory=list)
    resources_changed: list[str] = field(default_factory=list)
    base_findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def new_stack(self) -> bool:
        """The stack file does not exist on the base."""
        return self.base.text is None


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{"models[llama-8b].engine.max_model_len": 8192, ...}``: lists of named maps are
    keyed by name, so reordering is not a change and an entry added or removed is one."""
    out: dict[str, Any] = {}
    if isinstance(value, dict) and value:
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list) and value and all(_named(v) for v in value):
        names = [v["name"] for v in value]
        if len(set(names)) == len(names):
            for item in value:
                rest = {k: v for k, v in item.items() if k != "name"}
                out.update(flatten(rest or {}, f"{prefix}[{item['name']}]"))
        else:
            out[prefix] = value
    else:
        out[prefix] = value
    return out


def _named(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("name"), str)


def _entries(flat: dict[str, Any]) -> set[str]:
    """Named entries (``models[llama-8b]``) present in a flattened document."""
    found = set()
    for path in flat:
        head = path.split("]", 1)[0]
        if "[" in head:
            found.add(head + "]")
    return found


def settings_changes(before: dict[str, Any] | None, after: dict[str, Any]) -> list[Change]:
    """Changed settings; a named entry added or removed whole is one change."""
    old, new = flatten(before or {}), flatten(after)
    changes: list[Change] = []
    old_entries, new_entries = _entries(old), _entries(new)
    for entry in sorted(new_entries - old_entries):
        changes.append(Change(entry, MISSING, "added"))
    for entry in sorted(old_entries - new_entries):
        changes.append(Change(entry, "present", MISSING))
    whole = new_entries ^ old_entries
    for path in [*new, *(k for k in old if k not in new)]:  # the head file's order
        if any(path.startswith(e) for e in whole):
            continue
        a, b = old.get(path, MISSING), new.get(path, MISSING)
        if a != b:
            changes.append(Change(path, a, b))
    return changes


def _derived(plan: StackPlan) -> dict[str, tuple[Any, str]]:
    return {d.key: (d.value, d.why) for d in plan.derived}


def compare(
    base: BaseStack,
    head_document: dict[str, Any],
    head_plan: StackPlan,
    head_resources: list[Any],
    *,
    stack: str,
    project_dir: Path,
) -> Comparison:
    """Plan and check the base like the head, and list what differs."""
    comparison = Comparison(base=base)
    if base.text is None:
        return comparison  # a new stack file: everything is added
    try:
        base_document, base_plan, base_report = _plan_base(base, stack, project_dir)
    except GpustrataError as exc:
        comparison.base_error = str(exc)
        return comparison
    comparison.base_plan = base_plan
    comparison.settings = settings_changes(base_document, head_document)
    before, after = _derived(base_plan), _derived(head_plan)
    for key in [*after, *(k for k in before if k not in after)]:
        old = before.get(key, (MISSING, ""))[0]
        new, why = after.get(key, (MISSING, before.get(key, (None, ""))[1]))
        if old != new:
            comparison.derived.append(Change(key, old, new, why))
    old_res = {(r.type, r.name): r.inputs for r in base_report.resources}
    new_res = {(r.type, r.name): r.inputs for r in head_resources}
    label = _resource_label
    comparison.resources_added = [label(k) for k in new_res if k not in old_res]
    comparison.resources_removed = [label(k) for k in old_res if k not in new_res]
    comparison.resources_changed = [
        label(k) for k in new_res if k in old_res and old_res[k] != new_res[k]
    ]
    comparison.base_findings = base_report.findings
    return comparison


def _resource_label(key: tuple[str, str]) -> str:
    """``RayService gpustrata-llama-70b-rayservice`` from a Pulumi type token and name."""
    token, name = key
    kind = token.rsplit(":", 1)[-1]
    return f"{kind} {name}"


def _plan_base(base: BaseStack, stack: str, project_dir: Path) -> tuple[dict[str, Any], Any, Any]:
    from gpustrata.planning.build import plan_spec
    from gpustrata.reports.text import plan_report
    from gpustrata.spec.loader import read_stack_file

    assert base.text is not None
    with tempfile.TemporaryDirectory(prefix="gpustrata-base-") as tmp:
        path = Path(tmp) / f"Pulumi.{stack}.yaml"
        path.write_text(base.text, encoding="utf-8")
        try:
            spec, document = read_stack_file(path)
            plan = plan_spec(spec, base.label)
        except StackError as exc:
            raise StackError(exc.problems, base.label) from None
        # Read from the base's own file: its secret config decides which Secrets exist.
        report = plan_report(path, stack, plan, document, project_dir, label=base.label)
    return document, plan, report
