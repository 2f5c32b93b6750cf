"""A rule's metadata from the ``meta.yaml`` of its folder (not a rule: the registry skips
``_`` modules).

Rule metadata is data: id, name, title, layer, severity, default enforcement, scope,
rationale, fix, references and thresholds sit in ``meta.yaml`` beside the rule's fixtures,
and ``rule.py`` holds the logic only::

    RULE = folder_rule(__name__, judged(judge, message))
    RULE = folder_rule(__name__, check, facts={"until": HEALTH.v0_engine_loop_until})

A text field may cite a value the code knows (a catalogued release, a pinned source URL) as
``${name}``: the name is one of :data:`SHARED_FACTS` or of the rule's own *facts*. A
``references`` item that is exactly ``${name}`` of a tuple stands for all its URLs. The file
may word its rule's verdicts: ``messages`` maps each verdict reason to a template filled
with ``str.format`` from the verdict's values and thresholds (``{pod}``, ``{gpus:,}``; a name
in both is an error) and the rule's *fields*, which take precedence, for a rule registered as
``folder_rule(__name__, worded(judge, fields))``. The file
is validated on load; a mistake stops the import with the file, the key, the bad value and
the fix (:class:`RuleMetaError`).
"""

from __future__ import annotations

import importlib.resources
import re
import string
from collections.abc import Callable, Mapping
from typing import Any, get_args

import yaml

from gpustrata.core.environments import ENVIRONMENTS, Environment
from gpustrata.core.yamlio import SAFE_LOADER
from gpustrata_policies.findings import (
    ENFORCEMENTS,
    LAYERS,
    SEVERITIES,
    CheckFn,
    Enforcement,
    Rule,
    RuleMeta,
    Scope,
)
from gpustrata_policies.rules._verdict import Verdict, Worded, judged
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.capacity import VLLM_SRC
from gpustrata_policies.view.ray import KUBERAY_V170, RAY_V2600

__all__ = ["META_FILE", "SHARED_FACTS", "Fact", "RuleMetaError", "folder_rule", "meta_from"]

META_FILE = "meta.yaml"

Fact = str | tuple[str, ...]
"""A value a text field cites: one string, or (in ``references`` only) several URLs."""

SHARED_FACTS: Mapping[str, Fact] = {
    "reference_vllm": catalogs.reference_vllm(),
    "reference_vllm_minor": catalogs.reference_vllm_minor(),
    "VLLM_SRC": VLLM_SRC,
    "RAY_V2600": RAY_V2600,
    "KUBERAY_V170": KUBERAY_V170,
    "K8S_SCHEDULING_GPUS": "https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/",
    "K8S_RESOURCE_VALIDATION": (
        "https://github.com/kubernetes/kubernetes/blob/master/pkg/apis/core/validation/validation.go"
    ),
}
"""Values any rule's ``meta.yaml`` may cite: the reference vLLM release and the pinned
upstream sources several rules read."""

_REQUIRED = (
    "id",
    "name",
    "title",
    "layer",
    "severity",
    "default_enforcement",
    "rationale",
    "fix",
    "references",
)
_OPTIONAL = ("scope", "thresholds", "messages")
_SCOPES: tuple[Scope, ...] = get_args(Scope)
_THRESHOLD_TYPES: Mapping[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
}
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
_ID = re.compile(r"[A-Z][0-9]{3}")


class RuleMetaError(ValueError):
    """A rule folder's ``meta.yaml`` is missing, unreadable or invalid."""


def folder_rule(
    module: str, check: CheckFn | Worded, facts: Mapping[str, Fact] | None = None
) -> Rule:
    """The rule of the folder holding *module* (a rule's ``__name__``): its ``meta.yaml``
    with ``${name}`` resolved from :data:`SHARED_FACTS` and *facts*, and *check* (a
    :class:`Worded` judge is worded by the file's ``messages``)."""
    package = module.rpartition(".")[0]
    where = f"{package.replace('.', '/')}/{META_FILE}"
    try:
        text = (importlib.resources.files(package) / META_FILE).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RuleMetaError(
            f"{where}: missing; every rule folder holds a {META_FILE} with its "
            f'{", ".join(_REQUIRED)} (CONTRIBUTING.md, "A rule")'
        ) from None
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)  # libyaml: 51 files per start
    except yaml.YAMLError as exc:
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        what = " ".join(str(getattr(exc, k, "") or "") for k in ("context", "problem")).strip()
        raise RuleMetaError(f"{at}: not valid YAML ({what or exc}); fix the syntax") from None
    used: set[str] = set()
    meta, templates = _read(data, where, package.rpartition(".")[2], facts or {}, used)
    if isinstance(check, Worded):
        if not templates:
            raise RuleMetaError(
                f"{where}: messages is missing; a rule registered with worded(judge) words "
                "each verdict reason there (reason: template)"
            )
        check = judged(check.judge, _Wording(templates, check.fields, where, meta.id))
    elif templates:
        raise RuleMetaError(
            f"{where}: messages is given but rule.py words its findings itself; register "
            "folder_rule(__name__, worded(judge)) or drop messages"
        )
    _unused(facts or {}, used, where)
    return Rule(meta, check)


class _Wording:
    """A worded rule's ``message(verdict)``: its reason's template filled from the verdict's
    values and thresholds (no name in both), then from its *fields*, which win: they word
    a figure the template cannot (a byte count as ``1Gi``, a tuple as a list)."""

    def __init__(
        self,
        templates: Mapping[str, str],
        fields: Callable[[Verdict], Mapping[str, object]] | None,
        where: str,
        rule_id: str,
    ) -> None:
        self.templates, self.fields, self.where, self.rule_id = templates, fields, where, rule_id

    def __call__(self, verdict: Verdict) -> str:
        template = self.templates.get(verdict.reason)
        if template is None:
            raise RuleMetaError(
                f"{self.where}: messages has no {verdict.reason!r}, a reason the rule's judge "
                "gives; add its template"
            )
        shared = sorted(verdict.thresholds.keys() & verdict.values.keys())
        if shared:
            raise RuleMetaError(
                f"{self.where}: messages.{verdict.reason}: {self.rule_id}'s verdict has "
                f"{shared[0]!r} both as a value and as a threshold; a template names each once, "
                "so rename one in the rule's judge"
            )
        values: dict[str, object] = {**verdict.values, **verdict.thresholds}
        if self.fields is not None:
            values.update(self.fields(verdict))
        try:
            return template.format_map(values)
        except (KeyError, IndexError, ValueError) as exc:
            raise RuleMetaError(
                f"{self.where}: messages.{verdict.reason}: {exc!r} does not fill from the "
                f"verdict's values ({', '.join(sorted(values))})"
            ) from None


def _messages(
    data: Mapping[str, Any], known: Mapping[str, Fact], used: set[str], where: str
) -> dict[str, str]:
    value = data.get("messages", {})
    if not isinstance(value, Mapping):
        raise RuleMetaError(
            f"{where}: messages: expected a mapping of verdict reason to template, got "
            f"{_kind(value)}"
        )
    out: dict[str, str] = {}
    for reason, template in value.items():
        at = f"{where}: messages.{reason}"
        if not isinstance(template, str):
            raise RuleMetaError(f"{at}: expected a template (text), got {_kind(template)}")
        text = _resolve(template, known, used, at)
        try:
            list(string.Formatter().parse(text))
        except ValueError as exc:
            raise RuleMetaError(
                f"{at}: {exc}; write a str.format template ({{name}}, {{{{ for a brace)"
            ) from None
        out[str(reason)] = text
    return out


def _unused(facts: Mapping[str, Fact], used: set[str], where: str) -> None:
    unused = sorted(set(facts) - used)
    if unused:
        raise RuleMetaError(
            f"{where}: the rule passes fact {unused[0]!r} but no field cites ${{{unused[0]}}}; "
            "cite it or drop it from folder_rule(facts=...)"
        )


def meta_from(
    data: Any,
    where: str,
    folder: str,
    facts: Mapping[str, Fact],
    used: set[str] | None = None,
) -> RuleMeta:
    """Validate the parsed ``meta.yaml`` *data* of rule folder *folder* (``k003_gpu_pool_
    tainted``; *where* names the file in errors), its ``messages`` included, and build its
    :class:`RuleMeta`. *used* collects the facts cited; without it, a fact of *facts* no
    field cites is an error."""
    check_unused = used is None
    used = set() if used is None else used
    meta, _ = _read(data, where, folder, facts, used)
    if check_unused:
        _unused(facts, used, where)
    return meta


def _read(
    data: Any, where: str, folder: str, facts: Mapping[str, Fact], used: set[str]
) -> tuple[RuleMeta, dict[str, str]]:
    """The :class:`RuleMeta` and the ``messages`` templates of *data* (see :func:`meta_from`),
    their ``${name}`` resolved from one mapping of the known facts."""
    if not isinstance(data, Mapping):
        raise RuleMetaError(f"{where}: expected a mapping of keys, got {_kind(data)}")
    unknown = sorted(set(map(str, data)) - {*_REQUIRED, *_OPTIONAL})
    if unknown:
        raise RuleMetaError(
            f"{where}: unknown key {unknown[0]!r}; the keys are "
            f"{', '.join((*_REQUIRED, *_OPTIONAL))}"
        )
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise RuleMetaError(
            f"{where}: {missing[0]} is missing; add it (a rule needs all of {', '.join(_REQUIRED)})"
        )
    known = {**SHARED_FACTS, **facts}

    def text(key: str) -> str:
        value = data.get(key, "")
        if not isinstance(value, str):
            raise RuleMetaError(f"{where}: {key}: expected text, got {_kind(value)}")
        return _resolve(value, known, used, f"{where}: {key}")

    def choice(key: str, allowed: tuple[str, ...]) -> Any:
        value = data.get(key)
        if value not in allowed:
            raise RuleMetaError(
                f"{where}: {key}: {value!r} is not one of {', '.join(allowed)}; use one of them"
            )
        return value

    rule_id, name = text("id"), text("name")
    if not _ID.fullmatch(rule_id) or folder != f"{rule_id.lower()}_{name.replace('-', '_')}":
        raise RuleMetaError(
            f"{where}: id {rule_id!r} and name {name!r} do not match the folder {folder!r}; "
            "the folder is <id in lower case>_<name with underscores> (ids are a letter and "
            "three digits, e.g. K003 gpu-pool-tainted in k003_gpu_pool_tainted)"
        )
    meta = RuleMeta(
        id=rule_id,
        name=name,
        title=text("title"),
        layer=choice("layer", LAYERS),
        severity=choice("severity", SEVERITIES),
        default_enforcement=_enforcement(data["default_enforcement"], where),
        rationale=text("rationale"),
        fix=text("fix"),
        references=_references(data["references"], known, used, where),
        scope=choice("scope", _SCOPES) if "scope" in data else "resource",
        thresholds=_thresholds(data.get("thresholds", {}), where),
    )
    return meta, _messages(data, known, used, where)


def _resolve(value: str, known: Mapping[str, Fact], used: set[str], where: str) -> str:
    def one(match: re.Match[str]) -> str:
        key = match.group(1)
        fact = known.get(key)
        if not isinstance(fact, str):
            what = (
                "stands for several URLs (only a whole references item may)"
                if fact
                else ("is not a known fact")
            )
            raise RuleMetaError(
                f"{where}: ${{{key}}} {what}; the facts are {', '.join(sorted(known))} "
                "(a rule adds its own with folder_rule(facts=...))"
            )
        used.add(key)
        return fact

    return _PLACEHOLDER.sub(one, value)


def _references(
    value: Any, known: Mapping[str, Fact], used: set[str], where: str
) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise RuleMetaError(f"{where}: references: expected a list of URLs, got {_kind(value)}")
    out: list[str] = []
    for i, item in enumerate(value):
        at = f"{where}: references[{i}]"
        if not isinstance(item, str):
            raise RuleMetaError(f"{at}: expected a URL, got {_kind(item)}")
        whole = _PLACEHOLDER.fullmatch(item)
        fact = known.get(whole.group(1)) if whole else None
        if whole and isinstance(fact, tuple):
            used.add(whole.group(1))
            out.extend(fact)
        else:
            out.append(_resolve(item, known, used, at))
    return tuple(out)


def _enforcement(value: Any, where: str) -> dict[Environment, Enforcement]:
    at = f"{where}: default_enforcement"
    if isinstance(value, str):
        value = dict.fromkeys(ENVIRONMENTS, value)
    if not isinstance(value, Mapping) or set(value) != set(ENVIRONMENTS):
        raise RuleMetaError(
            f"{at}: {value!r} is neither one enforcement ({', '.join(ENFORCEMENTS)}) nor a "
            f"mapping of every environment ({', '.join(ENVIRONMENTS)}) to one"
        )
    bad = [env for env in ENVIRONMENTS if value[env] not in ENFORCEMENTS]
    if bad:
        raise RuleMetaError(
            f"{at}.{bad[0]}: {value[bad[0]]!r} is not one of {', '.join(ENFORCEMENTS)}"
        )
    return {env: value[env] for env in ENVIRONMENTS}


def _thresholds(value: Any, where: str) -> dict[str, tuple[str, Any]]:
    if not isinstance(value, Mapping):
        raise RuleMetaError(f"{where}: thresholds: expected a mapping, got {_kind(value)}")
    out: dict[str, tuple[str, Any]] = {}
    for key, spec in value.items():
        at = f"{where}: thresholds.{key}"
        if not isinstance(spec, Mapping) or set(spec) != {"type", "default"}:
            raise RuleMetaError(f"{at}: expected {{type: ..., default: ...}}, got {spec!r}")
        types = _THRESHOLD_TYPES.get(spec["type"])
        if types is None:
            raise RuleMetaError(
                f"{at}.type: {spec['type']!r} is not one of {', '.join(_THRESHOLD_TYPES)}"
            )
        default = spec["default"]
        if not isinstance(default, types) or (bool in types) != isinstance(default, bool):
            raise RuleMetaError(
                f"{at}.default: {default!r} is not of type {spec['type']}; write a "
                f"{spec['type']} value"
            )
        out[str(key)] = (str(spec["type"]), default)
    return out


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:80]
