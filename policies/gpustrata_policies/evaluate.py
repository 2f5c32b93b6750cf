"""The rule registry and :func:`evaluate`: every adapter ends here."""

from __future__ import annotations

import importlib
import importlib.resources
import pkgutil
import sysconfig
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import cache, partial
from importlib.resources.abc import Traversable
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpustrata.core.collector import fewer_collections
from gpustrata.core.terminal import clipped, redact_userinfo
from gpustrata.core.unknown import (
    UNKNOWN,
    UnknownInput,
    is_tracked,
    reading_unknowns,
    track_unknowns,
)
from gpustrata_policies.config import PolicyConfig, from_pulumi_format, parse_environment
from gpustrata_policies.findings import (
    Enforcement,
    Finding,
    NotEvaluated,
    Outcome,
    Report,
    Rule,
    RuleContext,
    RuleMeta,
    Violation,
)
from gpustrata_policies.index import EvaluationIndex, Replica
from gpustrata_policies.rules._kinds import NAMESPACE_ORDER_READERS, subject_kinds
from gpustrata_policies.view.controllers import controller_fills
from gpustrata_policies.view.dra import attach_claims
from gpustrata_policies.view.gpu_operator import operator_view
from gpustrata_policies.view.kinds import is_read_kind
from gpustrata_policies.view.launchers import (
    attach_partners,
    filled_note,
    installation_reason,
    launcher_fills,
)
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.profile import using_profile

if TYPE_CHECKING:
    from gpustrata.catalog.profile import ClusterProfile

__all__ = [
    "INTERNAL_ERROR",
    "all_rules",
    "evaluate",
    "find_rule",
    "internal_error",
    "load_config",
    "load_policy_config",
    "rule_folder",
    "to_objects",
]


@cache
def _discover() -> dict[str, tuple[str, Rule]]:
    """Rule id -> (package of its folder, the rule), for every folder of
    :mod:`gpustrata_policies.rules`."""
    from gpustrata_policies import rules as package

    found: dict[str, tuple[str, Rule]] = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_") or not info.ispkg:
            continue
        folder = f"{package.__name__}.{info.name}"
        module = importlib.import_module(f"{folder}.rule")
        rule = getattr(module, "RULE", None)
        if not isinstance(rule, Rule):
            raise TypeError(
                f"{module.__name__} does not define RULE = folder_rule(__name__, check)"
            )
        if rule.meta.id in found:
            raise TypeError(f"rule id {rule.meta.id} in both {found[rule.meta.id][0]} and {folder}")
        found[rule.meta.id] = (folder, rule)
    return found


@cache
def all_rules() -> tuple[Rule, ...]:
    """Every rule folder in :mod:`gpustrata_policies.rules` (``<id>_<name>/rule.py`` exports
    ``RULE``), by id."""
    return tuple(rule for _, rule in sorted(_discover().values(), key=lambda e: e[1].meta.id))


def rule_folder(rule: Rule) -> Traversable:
    """The folder of *rule* (``rule.py``, ``good-*.yaml`` and ``bad-*.yaml`` fixtures,
    ``expected.yaml``) as package resources: readable the same from a source tree or an
    installed wheel."""
    folder, _ = _discover()[rule.meta.id]
    return importlib.resources.files(folder)


def find_rule(key: str) -> Rule | None:
    """A rule by id (``K001``, case-insensitive) or kebab-case name."""
    wanted = key.strip()
    for rule in all_rules():
        if rule.meta.id.lower() == wanted.lower() or rule.meta.name == wanted:
            return rule
    return None


def _find_meta(key: str) -> RuleMeta | None:
    rule = find_rule(key)
    return rule.meta if rule else None


def load_config(data: Mapping[str, Any] | None, environment: str | None = None) -> PolicyConfig:
    """Validate a policy-config mapping against the registered rules."""
    return PolicyConfig.from_mapping(data, environment=environment, resolve_rule=_find_meta)


def load_policy_config(
    data: Mapping[str, Any] | None, environment: str | None = None
) -> PolicyConfig:
    """Validate a policy config file's mapping: Pulumi's policy-pack-config format (the
    one the pack reads), or the former layout; deprecated spellings are listed in the
    result's ``deprecations``."""
    return from_pulumi_format(
        data or {},
        environment=environment,
        resolve_rule=_find_meta,
        all_rules=lambda: [r.meta for r in all_rules()],
    )


def to_objects(objects: Iterable[K8sObject | Mapping[str, Any]]) -> list[K8sObject]:
    """Wrap plain dicts as :class:`K8sObject` (objects already wrapped pass through); an
    object holding an unknown value is read through
    :func:`~gpustrata.core.unknown.track_unknowns` (one read from text holds none:
    :attr:`~gpustrata_policies.view.objects.K8sObject.plain`)."""
    out = []
    for o in objects:
        obj = o if isinstance(o, K8sObject) else K8sObject(o)
        if obj.plain:
            out.append(obj)
            continue
        tracked = track_unknowns(obj.raw, obj.resource)
        out.append(obj if tracked is obj.raw else K8sObject(tracked, obj.file, obj.line, obj.lines))
    return out


def _read(obj: K8sObject) -> bool:
    """Is *obj* of a kind gpustrata reads? An Argo CD Application is when it installs a
    chart the view reads (the GPU Operator)."""
    if is_read_kind(obj):
        return True
    if obj.kind != "Application":
        return False
    try:
        return operator_view(obj) is not None
    except UnknownInput:
        return True  # the rules say "not evaluated" with the reason


INTERNAL_ERROR = "internal error"
"""How the message of a finding for a crashed rule starts (see :func:`internal_error`)."""


def internal_error(
    meta: RuleMeta, enforcement: Enforcement, obj: K8sObject, exc: BaseException
) -> Finding:
    """The finding for a rule that raised on *obj*: fail closed, say where, leak nothing.

    It keeps the rule's enforcement (a mandatory rule that could not check an object
    must not let it pass silently). The message names the exception type and the
    line of gpustrata code that raised, never the exception text, which may quote
    values from the object (a token, say).
    """
    # The innermost frame of the rule's own code: not this engine, not a library.
    libraries = {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if f.filename != __file__ and not any(f.filename.startswith(d) for d in libraries)
    ]
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return Finding(
        meta.id,
        meta.name,
        meta.severity,
        enforcement,
        _redacted(obj.resource, MAX_RESOURCE_CHARS),
        f"{INTERNAL_ERROR}: rule {meta.id} raised {type(exc).__name__}{where} on this object "
        "and could not check it",
        "This is a gpustrata bug, not necessarily a problem in the object: report it with "
        "the object and the gpustrata version. Until it is fixed the object is not checked "
        "by this rule; outside prod the rule can be set to advisory in the policy config.",
        obj.file,
        obj.line,
        internal=True,
    )


MAX_MESSAGE_CHARS = 8000
"""The longest finding message or not-evaluated reason (the corpus's longest: ~4,000)."""
MAX_RESOURCE_CHARS = 400
"""The longest ``Kind/namespace/name`` (Kubernetes names: 253 characters at most)."""


def _may_hold_userinfo(text: str) -> bool:
    """Can *text* hold a URI with credentials (``s3://KEY:SECRET@bucket``)? Not without
    both ``://`` and ``@``: the cheap test before :func:`redact_userinfo`'s regex, which
    costs ~30 us on a long message (1,475 messages of the corpus hold an ``@``, 115 a URI)."""
    return "@" in text and "://" in text


def _redacted(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """:func:`redact_userinfo` of *text*, its regex run only where it may find something,
    then cut to *limit* characters (a 10 MB object name is not echoed whole into a
    diagnostic; redacted first, so a cut cannot hide a credential from the regex)."""
    return clipped(redact_userinfo(text) if _may_hold_userinfo(text) else text, limit)


def _outcomes(
    check: Any,
    ctx: RuleContext,
    obj: K8sObject,
    meta: RuleMeta,
    enforcement: Enforcement,
    findings: list[Finding],
    tracking: bool = False,
) -> list[Outcome]:
    """What *check* reports on *obj*. With *tracking* (some object holds an unknown value)
    its reads are logged, and a violation that read an unknown makes the rule not
    evaluated on *obj* (with what it reported before); without, no read log is kept."""
    outcomes: list[Outcome] = []
    try:
        if tracking:
            with reading_unknowns() as reads:
                # One at a time: what a rule reported before it stopped is kept.
                for outcome in check(ctx, obj):
                    if reads and isinstance(outcome, Violation):
                        # It read a value known only at deploy time: not applicable.
                        raise UnknownInput(reads[0])
                    outcomes.append(outcome)
        else:
            # list.extend keeps the items it took from a generator that raised
            outcomes.extend(check(ctx, obj))
    except UnknownInput as exc:
        outcomes.append(NotEvaluated(meta.id, obj.resource, installation_reason(obj, exc)))
    except Exception as exc:  # a rule bug: report it, run the other rules
        findings.append(internal_error(meta, enforcement, obj, exc))
    return outcomes


def _judged_once(
    judge: Callable[[K8sObject], list[Outcome]],
    firsts: Sequence[K8sObject],
    index: EvaluationIndex,
    replicas: Mapping[int, Replica],
    findings: list[Finding],
) -> list[tuple[list[Outcome], Replica | None]]:
    """The outcomes that are not empty of a rule's subjects, in input order: *firsts* (the
    subjects that are no copy) judged, and each one's copies (:meth:`~gpustrata_policies.
    index.EvaluationIndex.copies`) given its outcomes with the copy's :class:`Replica`
    (the caller moves each onto the copy) where they can move (:func:`_movable`), else
    judged too; a copy of a first copy that reported nothing reports nothing."""
    found: list[tuple[int, list[Outcome], Replica | None]] = []
    for obj in firsts:
        errors = len(findings)
        outcomes = judge(obj)
        if outcomes:
            found.append((index.position(obj), outcomes, None))
        mine = index.copies(obj)
        if not mine or (not outcomes and len(findings) == errors):
            continue
        if len(findings) != errors:  # it crashed on the first copy: each copy its own error
            found.extend((index.position(copy), judge(copy), None) for copy in mine)
            continue
        movable: bool | None = None
        for copy in mine:
            replica = replicas[id(copy)]
            if movable is None:
                movable = _movable(outcomes, replica)
            if movable:
                found.append((index.position(copy), outcomes, replica))
            else:
                found.append((index.position(copy), judge(copy), None))
    found.sort(key=itemgetter(0))
    return [(outcomes, replica) for _, outcomes, replica in found]


def _movable(first: list[Outcome], replica: Replica) -> bool:
    """Can each of *first* move to another copy of the namespace? Not where its text names
    a namespace of the class (it refers to that copy) or it is about an object of another
    copy."""
    mentions = replica.mentions
    for outcome in first:
        if isinstance(outcome, Violation):
            about = outcome.obj
            if id(about) not in replica.peers and about.namespace in replica.names:
                return False  # about an object of another copy
            text = outcome.message
        else:
            if outcome.resource != replica.of.resource and mentions(outcome.resource):
                return False
            text = outcome.reason
        if mentions(text):
            return False
    return True


def evaluate(
    objects: Iterable[K8sObject | Mapping[str, Any]],
    *,
    environment: str = "prod",
    config: PolicyConfig | Mapping[str, Any] | None = None,
    rules: Sequence[Rule] | None = None,
    report_unknown_kinds: bool = True,
    context: Iterable[K8sObject | Mapping[str, Any]] = (),
    profile: ClusterProfile | None = None,
    profile_file: str | None = None,
    judge_replicas_once: bool = True,
) -> Report:
    """Run *rules* (default: all) over *objects* and collect findings.

    *context* holds what the cluster says (Nodes, GPU Operator values, NodePools) given
    apart from the manifests under review (``gpustrata check --context``): the rules read
    it with the rest, but nothing is reported on it, not even its unread kinds.

    *profile* is the cluster profile (read from *profile_file*): its pools join *context*
    as ``GpuNodePool`` descriptions, and the view reads its other facts while the rules
    run (:mod:`gpustrata_policies.view.profile`).

    Where namespaces repeat one another (one chart per tenant: every object equal but
    for its namespace, :meth:`~gpustrata_policies.index.EvaluationIndex.replicas`), each
    rule judges the first copy and replays its outcomes onto the others, each about its
    own copy's objects (``judge_replicas_once=False`` judges every copy; the report is
    the same, ``tests/policies/test_replicas.py``).

    Never raises on odd input: an unknown value (Pulumi preview) becomes a "not
    evaluated" record with the reason; a rule that crashes becomes an internal-error
    finding for that rule and object (:func:`internal_error`), and the other rules
    still run.
    """
    if profile is not None:
        where = profile_file or "cluster profile"
        pools = [K8sObject(p, where) for p in profile.pool_objects(profile_file)]
        context = [*context, *pools]
    # the objects and the view's caches live until the end
    with fewer_collections(), using_profile(profile):
        return _evaluate(
            objects, environment, config, rules, report_unknown_kinds, context, judge_replicas_once
        )


def _evaluate(
    objects: Iterable[K8sObject | Mapping[str, Any]],
    environment: str,
    config: PolicyConfig | Mapping[str, Any] | None,
    rules: Sequence[Rule] | None,
    report_unknown_kinds: bool,
    context: Iterable[K8sObject | Mapping[str, Any]],
    judge_replicas_once: bool,
) -> Report:
    if isinstance(config, PolicyConfig):
        cfg = config.with_environment(parse_environment(environment))
    else:
        cfg = load_config(config, environment)
    objs = to_objects(objects)
    background = [o for o in to_objects(context) if _read(o)]
    attach_partners([*objs, *background])  # an InferenceService's runtime, a Playground's model
    report = Report(objects=len(objs))
    known: list[K8sObject] = []
    for obj in objs:
        if _read(obj) or obj.raw.get("kind") is UNKNOWN:
            # An unknown kind may be any kind: rules that look across objects see it.
            known.append(obj)
            # What another project's controller decides (and a launcher's preset writes).
            for reason in [*controller_fills(obj), *launcher_fills(obj)]:
                report.not_evaluated.append(
                    NotEvaluated(
                        "*", _redacted(obj.resource, MAX_RESOURCE_CHARS), _redacted(reason)
                    )
                )
        elif report_unknown_kinds:
            what = f"kind {obj.kind} ({obj.api_version})" if obj.kind else "a document without kind"
            report.not_evaluated.append(
                NotEvaluated(
                    "*",
                    _redacted(obj.resource, MAX_RESOURCE_CHARS),
                    f"{what} is not one gpustrata reads",
                )
            )
    # A rule that walks pods x pools x containers can give one reason many times for the
    # same object (O002: the same unknown driver for every container): kept once.
    seen = {(n.rule, n.resource, n.reason) for n in report.not_evaluated}
    findings, not_evaluated = report.findings, report.not_evaluated
    attach_claims([*known, *background])  # DRA: containers read the GPUs their claims ask for
    # The evaluation's objects, resolved once (nothing changes them after this): every rule
    # reads this one index.
    index = EvaluationIndex(known, background)
    # Only a tracked object (one holding an unknown) notes reads: without one, the
    # per-check read log is skipped (a context variable set and reset per rule and object),
    # and so is the Python loop over each check's outcomes.
    tracking = any(is_tracked(o.raw) for o in index.objects)
    # Copies of a namespace (one chart per tenant) are judged once, then replayed.
    replicas = {} if tracking or not judge_replicas_once else index.replicas()
    if replicas:
        index.fold_copies()  # what rules sum over every object counts a first copy per copy
    firsts_of: dict[frozenset[str] | None, tuple[K8sObject, ...]] = {}
    for rule in rules if rules is not None else all_rules():
        meta = rule.meta
        enforcement, warning = cfg.enforcement(meta)
        if warning:
            report.warnings.append(warning)
        if enforcement == "disabled":
            continue
        ctx = RuleContext(meta, cfg, index=index)
        judge = partial(
            _outcomes,
            rule.check,
            ctx,
            meta=meta,
            enforcement=enforcement,
            findings=findings,
            tracking=tracking,
        )
        kinds = subject_kinds(meta.id)
        subjects = index.of_kinds(kinds)
        if replicas and meta.id not in NAMESPACE_ORDER_READERS:
            firsts = firsts_of.get(kinds)
            if firsts is None:  # a copy has its first copy's kind: it is among these too
                firsts = firsts_of[kinds] = tuple(o for o in subjects if id(o) not in replicas)
            per_object: Iterable[tuple[list[Outcome], Replica | None]] = _judged_once(
                judge, firsts, index, replicas, findings
            )
        else:
            per_object = zip(map(judge, subjects), repeat(None))
        for outcomes, replica in per_object:
            if not outcomes:  # the common case: nothing to report on this object
                continue
            # a copy's outcomes are its first copy's, each moved onto the copy: about the
            # same object of its namespace, or the same object outside the class
            peers = None if replica is None else replica.peers
            for outcome in outcomes:
                if isinstance(outcome, Violation):
                    about = outcome.obj
                    if peers is not None:
                        about = peers.get(id(about), about)
                    if index.in_context(about):
                        continue  # about a context object: not under review
                    resource, message = about.resource, outcome.message + filled_note(about)
                    findings.append(
                        Finding(
                            meta.id,
                            meta.name,
                            meta.severity,
                            "advisory" if outcome.advisory else enforcement,
                            _redacted(resource, MAX_RESOURCE_CHARS),
                            index.text(_redacted(message)),
                            meta.fix,
                            about.file,
                            about.line_of(outcome.path),
                        )
                    )
                    continue
                if replica is not None and outcome.resource == replica.of.resource:
                    mine = replica.peers[id(replica.of)]
                    outcome = NotEvaluated(outcome.rule, mine.resource, outcome.reason)
                if (
                    _may_hold_userinfo(outcome.reason)
                    or _may_hold_userinfo(outcome.resource)
                    or len(outcome.reason) > MAX_MESSAGE_CHARS
                    or len(outcome.resource) > MAX_RESOURCE_CHARS
                ):
                    outcome = replace(
                        outcome,
                        resource=_redacted(outcome.resource, MAX_RESOURCE_CHARS),
                        reason=_redacted(outcome.reason),
                    )
                key = (outcome.rule, outcome.resource, outcome.reason)
                if key not in seen:
                    seen.add(key)
                    not_evaluated.append(outcome)
    report.findings.sort(key=lambda f: (f.file or "", f.line or 0, f.rule, f.resource))
    index.release()
    return report
