"""The gpustrata CrossGuard policy pack: the same rules as `gpustrata check` / `plan`.

:func:`serve` is the pack's program: the repository's ``policies/__main__.py`` and the
``policy/__main__.py`` that ``gpustrata init`` writes into a user's project both call it,
so a pack needs only the released package, not a copy of this code. This is the one
module of ``gpustrata_policies`` that imports ``pulumi_policy`` (the import contracts
exempt it); the rules it serves import no Pulumi.

Per-object rules are ResourceValidationPolicies, rules that relate several objects
are StackValidationPolicies. Each policy's config (``pulumi preview --policy-pack-config``,
or the config a Pulumi Cloud policy group enables the pack with; the same file
``gpustrata check --config`` reads) accepts ``environment`` (dev|staging|prod), the
rule's thresholds camelCased (``minShmSize``) and ``gpuResources`` (K014 also
``secretEnvNames``); snake_case names still work and are reported on stderr as
deprecated. The default environment comes from ``GPUSTRATA_ENVIRONMENT``, the
stack config key ``gpustrata:environment``, or the stack name (``.../prod``);
otherwise ``prod``. Pulumi's own ``enforcementLevel`` setting decides how a
violation is reported; its default is the rule's enforcement in that environment.
Values unknown during preview make a rule "not applicable" for that resource.
Models' own files are read from the Hugging Face cache of the pack's environment
(``HF_HUB_CACHE``, ``HF_HOME``: :func:`model_sources`), as ``gpustrata check`` reads them
without ``--models``; the model catalogue is the fallback.
"""

from __future__ import annotations

import gc
import heapq
import json
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

import pulumi_policy.policy
from google.protobuf import json_format  # type: ignore[import-untyped]
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import SPECIAL_SIG_KEY, deserialize_properties

from gpustrata.catalog.model_sources import ModelSources, using_model_sources
from gpustrata.core.collector import fewer_collections, no_automatic_collections
from gpustrata.core.environments import ENVIRONMENTS, enforced_environment
from gpustrata.core.terminal import clipped
from gpustrata.core.unknown import contains_unknown, replace_pulumi_unknowns
from gpustrata_policies.config import ConfigError, PolicyConfig, camel, policy_properties
from gpustrata_policies.evaluate import all_rules, evaluate, load_config, load_policy_config
from gpustrata_policies.findings import Finding, NotEvaluated, Report, Rule
from gpustrata_policies.inputs.pulumi import object_from_pulumi
from gpustrata_policies.view.catalogs import preload
from gpustrata_policies.view.objects import K8sObject

_LEVELS = {
    "mandatory": EnforcementLevel.MANDATORY,
    "advisory": EnforcementLevel.ADVISORY,
    "disabled": EnforcementLevel.DISABLED,
}


def startup_environment() -> str:
    """The environment the pack runs for, before any per-policy config.

    ``GPUSTRATA_ENVIRONMENT`` (set by CI) wins. Otherwise a stack named dev, staging or
    prod (``.../prod``), which stack config (``gpustrata:environment``, part of the change
    under review) may make stricter, never more relaxed; a stack named like none follows
    that setting, and counts as prod without one (:func:`enforced_environment`).
    """
    try:
        stack_config = json.loads(os.environ.get("PULUMI_CONFIG") or "{}")
    except ValueError:
        stack_config = {}
    claim = stack_config.get("gpustrata:environment") if isinstance(stack_config, dict) else None
    stack = os.environ.get("PULUMI_STACK", "").rsplit("/", 1)[-1]
    return enforced_environment([claim], stack, os.environ.get("GPUSTRATA_ENVIRONMENT"))


ENVIRONMENT = startup_environment()
"""The environment the pack runs for (recomputed by :func:`serve` at start-up)."""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _raw(value: Any) -> Any:
    """Plain dicts/lists behind pulumi-policy's unknown-checking proxies (which wrap every
    level and raise on unknowns); unknown sentinels stay strings for the adapter."""
    if type(value) in _SCALARS:  # most values: skip the two ABC checks below
        return value
    if isinstance(value, Mapping):
        try:
            target = value["__target"]
        except KeyError:
            target = value
        return {k: _raw(v) for k, v in target.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        try:
            target = value["__target"]  # type: ignore[call-overload]
        except (TypeError, KeyError, IndexError):
            target = value
        return [_raw(v) for v in target]
    return value


_REPORTED: set[str] = set()


def _config(rule: Rule, settings: Mapping[str, Any]) -> tuple[PolicyConfig, bool]:
    """The rule's policy config, and whether it sets something for this rule alone (a
    threshold other than its default), which the pack's shared evaluation cannot hold."""
    # Pulumi resolves enforcementLevel itself; what is left are the policy's properties.
    data = {k: v for k, v in settings.items() if k not in {"enforcementLevel", "enforcement"}}
    props, top, notes = policy_properties(rule.meta, data, rule.meta.name)
    for note in notes:
        if note not in _REPORTED:  # once per pack process, not once per resource
            _REPORTED.add(note)
            print(f"gpustrata: warning: {note}", file=sys.stderr)
    env = top.pop("environment", ENVIRONMENT)
    top = {k: list(v) for k, v in top.items()}
    defaults = rule.meta.thresholds
    own = any(
        key not in defaults
        or type(value) is not type(defaults[key][1])
        or value != defaults[key][1]
        for key, value in props.items()
    )
    cfg = load_config({**top, "rules": {rule.meta.id: props} if props else {}}, env)
    return cfg, own


def _report(
    report: Report, report_violation: ReportViolation, urns: Mapping[str, str], args: Any
) -> None:
    for f in report.findings:
        report_violation(
            f"[{f.rule}] {f.resource}: {f.message}\nFix: {f.fix}", urns.get(f.resource)
        )
    if not report.findings and report.not_evaluated:
        args.not_applicable("; ".join(f"{n.resource}: {n.reason}" for n in report.not_evaluated))


_SOURCES: list[ModelSources] = []


def model_sources() -> ModelSources:
    """Where the pack finds models' own files, as ``gpustrata check`` without ``--models``
    does: the Hugging Face cache of the pack's environment (``HF_HUB_CACHE``, ``HF_HOME``),
    read once; the model catalogue stays the fallback. No network."""
    if not _SOURCES:
        _SOURCES.append(ModelSources.from_environment())
    return _SOURCES[0]


def _evaluate(objects: Sequence[K8sObject | Mapping[str, Any]], **kw: Any) -> Report:
    """:func:`evaluate` with the pack's :func:`model_sources` active."""
    with using_model_sources(model_sources()):
        return evaluate(list(objects), **kw)


def _resource_policy(rule: Rule, **common: Any) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        obj = object_from_pulumi(args.resource_type, args.name, _raw(args.props))
        if obj is None:
            return
        cfg, _ = _config(rule, args.get_config())
        report = _evaluate(
            [obj], config=cfg, environment=cfg.environment, rules=[rule], report_unknown_kinds=False
        )
        _report(report, report_violation, {}, args)

    return ResourceValidationPolicy(validate=validate, **common)


# The AnalyzeStack request this thread serves, marked by _serving_marked (pulumi-policy
# runs a request's policies one after another in the thread that received it): its token,
# the request itself, and the evaluation its stack policies share.
_SERVING = threading.local()


def _serving_marked(analyze: Any) -> Any:
    """pulumi-policy's ``AnalyzeStack`` reading the request's resources once for all stack
    policies: the request is kept for them (:func:`_shared`) and pulumi-policy is handed
    an empty one (``AnalyzeStackRequest`` has no other field), so that it no longer
    deserialises every resource again for each of the 33 stack policies (``MessageToDict``
    and its unknown-checking proxies: most of the pack's cost, issue 35).

    The request runs inside :func:`fewer_collections` and :func:`no_automatic_collections`:
    the evaluation's views form cycles (an object's pods point back at it) and its
    allocations would set off the collector's full collections over the whole heap
    (issue 18); the views are freed with :func:`_release` once the request is done, in
    the request's only collection."""

    def marked(self: Any, request: Any, context: Any) -> Any:
        _SERVING.token, _SERVING.request, _SERVING.shared = object(), request, None
        try:
            with fewer_collections(), no_automatic_collections():
                return analyze(self, type(request)(), context)
        finally:
            shared = _SERVING.shared
            _SERVING.token = _SERVING.request = _SERVING.shared = None
            if shared is not None:
                _release(shared.evaluated)

    marked.gpustrata_marked = True  # type: ignore[attr-defined]
    return marked


_SERVICER: Any = getattr(pulumi_policy.policy, "_PolicyAnalyzerServicer", None)


def _config_checked(configure: Any) -> Any:
    """pulumi-policy's ``Configure`` refusing a config no policy can use, at load: an
    unknown policy name, an unknown property, a threshold that is no value of its type
    (``minShmSize: 4GB``, ``.inf``, ``[1, 2]``, ``-4Gi``). The gRPC error names the
    policy, the property, the value and the fix (``check --config`` reads the same
    file through the same :func:`load_policy_config`); pulumi-policy itself keeps a
    config for any name and leaves the rule "not evaluated" on every resource."""

    def checked(self: Any, request: Any, context: Any) -> Any:
        import grpc  # type: ignore[import-untyped]

        data: dict[str, Any] = {}
        try:
            for name, value in request.policyConfig.items():
                where = clipped(name)
                data[name] = json_format.MessageToDict(value.properties)
            load_policy_config(data, ENVIRONMENT)
        except ConfigError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"gpustrata policy config: {exc}")
        except ValueError:  # Infinity or NaN, which protobuf will not write as JSON
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"gpustrata policy config: {where}: a value that is no JSON number "
                "(.inf or .nan); write a number",
            )
        return configure(self, request, context)

    checked.gpustrata_checked = True  # type: ignore[attr-defined]
    return checked


def _install_servicer_hooks() -> None:
    """Wrap pulumi-policy's servicer (AnalyzeStack marks its request; Configure refuses
    an unusable config) unless already wrapped: at import and again when :func:`serve`
    starts, so a servicer restored by a test (or another pack in the process) is wrapped
    again."""
    if callable(getattr(_SERVICER, "AnalyzeStack", None)) and not getattr(
        _SERVICER.AnalyzeStack, "gpustrata_marked", False
    ):
        _SERVICER.AnalyzeStack = _serving_marked(_SERVICER.AnalyzeStack)
    if callable(getattr(_SERVICER, "Configure", None)) and not getattr(
        _SERVICER.Configure, "gpustrata_checked", False
    ):
        _SERVICER.Configure = _config_checked(_SERVICER.Configure)


_install_servicer_hooks()


def _fingerprint(resources: Sequence[Any]) -> str:
    """The content of *resources* (type, name, URN, properties) as one string; equal for
    the copies pulumi-policy builds of one request, different when any value differs.
    Only where a request is not marked (a pulumi-policy whose servicer is not found)."""
    plain = [(r.resource_type, r.name, r.urn, r.props) for r in resources]
    return json.dumps(plain, sort_keys=True, default=_unproxied)


def _unproxied(value: Any) -> Any:
    """For ``json.dumps``: the dict/list behind one of pulumi-policy's proxies (which wrap
    every nesting level); anything else by its repr."""
    if isinstance(value, Mapping | Sequence):
        try:
            proxy: Any = value
            return proxy["__target"]
        except (TypeError, KeyError, IndexError):
            pass
    return repr(value)


class _Shared:
    """One request's resources as the adapter reads them, and the evaluations of every
    stack rule on them, one per set of pack-wide settings (environment, GPU resources)."""

    __slots__ = ("evaluated", "key", "read", "reports")

    def __init__(self, key: object, read: list[tuple[dict[str, Any], str, bool]]) -> None:
        self.key, self.read = key, read
        self.reports: dict[str, tuple[_ByRule, dict[str, str]]] = {}
        self.evaluated: list[K8sObject] = []

    def objects(self) -> tuple[list[K8sObject], dict[str, str]]:
        """Fresh K8sObjects (their derived views stay per evaluation; the manifests are
        shared read-only, as `check` shares them across all rules) and their URNs."""
        objects, urns = [], {}
        for raw, urn, plain in self.read:
            obj = K8sObject(raw)
            obj.plain = plain  # holds no unknown value (_read_resource)
            objects.append(obj)
            urns[obj.resource] = urn
        self.evaluated.extend(objects)
        return objects, urns


# Where a request is not marked: the last request's reading, keyed by its content.
_LAST: list[_Shared] = []


def _shared(resources: Sequence[Any]) -> _Shared:
    """The request's :class:`_Shared`: from the marked request's protobuf resources, read
    once (as pulumi-policy reads them, without its proxies), else from *resources* (this
    policy's copy), keyed by content."""
    request = getattr(_SERVING, "request", None)
    if request is not None:
        found: _Shared | None = _SERVING.shared
        if found is None:
            read = []
            fields: dict[bytes, Any] = {}
            for res in request.resources:
                raw, plain = _read_resource(res, fields)
                if raw is not None:
                    read.append((raw, res.urn, plain))
            found = _SERVING.shared = _Shared(_SERVING.token, read)
        return found
    key = _fingerprint(resources)
    if not _LAST or _LAST[0].key != key:
        read = []
        for res in resources:
            raw = object_from_pulumi(res.resource_type, res.name, _raw(res.props))
            if raw is not None:
                read.append((raw, res.urn, False))
        _LAST[:] = [_Shared(key, read)]
    return _LAST[0]


def _read_resource(res: Any, fields: dict[bytes, Any]) -> tuple[dict[str, Any] | None, bool]:
    """One protobuf resource of an AnalyzeStack request as :func:`object_from_pulumi` reads
    it. A Kubernetes resource's top-level properties are read one by one, each kept in
    *fields* by its serialised bytes: a request that installs one chart per tenant sends
    the same ``spec`` in every namespace, read once and shared (read-only, as `check`
    shares a repeated document's, inputs/repeats.py). ``MessageToDict``,
    ``deserialize_properties`` and :func:`replace_pulumi_unknowns` all work key by key, so
    the object is the one reading the whole properties gives.

    Also says whether the object holds no value unknown until deployment (each property
    looked at once, with its value): :attr:`~gpustrata_policies.view.objects.K8sObject.
    plain`, so the evaluation does not walk it again looking for one."""
    struct = res.properties
    if not res.type.startswith("kubernetes:") or SPECIAL_SIG_KEY in struct.fields:
        props = deserialize_properties(json_format.MessageToDict(struct))
        return object_from_pulumi(res.type, res.name, props), False
    out: dict[str, Any] = {}
    known = True
    for name, value in struct.fields.items():
        if name == "metadata" and value.HasField("struct_value"):
            # one level deeper: the name and namespace differ per tenant, the labels and
            # annotations do not
            meta = value.struct_value.fields
            if SPECIAL_SIG_KEY not in meta:
                parts = {str(k): _read_value(k, v, fields) for k, v in meta.items()}
                out[str(name)] = {k: v for k, (v, _) in parts.items()}
                known = known and all(ok for _, ok in parts.values())
                continue
        found = _read_value(name, value, fields)
        out[str(name)] = found[0]
        known = known and found[1]
    raw = object_from_pulumi(res.type, res.name, out, replaced=True)
    # what the reading adds (an apiVersion, a name) is plain text: only the properties count
    return raw, known


def _read_value(name: str, value: Any, fields: dict[bytes, Any]) -> tuple[Any, bool]:
    """One protobuf ``Value`` (of property *name*) as the pack reads it, and whether it
    holds no unknown value: read once per serialised value (*fields*), which is what it
    reads as wherever it is (``deserialize_properties`` and
    :func:`replace_pulumi_unknowns` look at values, not at the keys above them)."""
    key = value.SerializeToString(deterministic=True)
    found: tuple[Any, bool] | None = fields.get(key)
    if found is None:
        read = deserialize_properties({name: json_format.MessageToDict(value)})[name]
        replaced = replace_pulumi_unknowns(read)
        found = fields[key] = (replaced, not contains_unknown(replaced))
    return found


def _release(objects: Sequence[K8sObject]) -> None:
    """Free what an evaluation derived from *objects* now.

    Inside :func:`fewer_collections` the evaluation froze these objects (they were built
    before it began), so the cycles their derived views form (an object's pods point
    back at it, a pod's containers at the pod) stay out of every collection. Dropping
    each object's derived views (:meth:`K8sObject.forget_derived`: the references from the
    frozen objects into the views) leaves the views unreachable, and one collection,
    which skips the frozen objects, frees them.
    """
    for obj in objects:
        obj.forget_derived()
    gc.collect()


_ByRule = dict[str, tuple[list[Finding], list[tuple[int, NotEvaluated]]]]


def _by_rule(report: Report) -> _ByRule:
    """*report*'s findings and (numbered) not-evaluated records by rule id (``*``: every
    rule's), each in report order: split once for the 33 stack policies, not filtered
    by each."""
    out: _ByRule = {}
    for finding in report.findings:
        out.setdefault(finding.rule, ([], []))[0].append(finding)
    for number, record in enumerate(report.not_evaluated):
        out.setdefault(record.rule, ([], []))[1].append((number, record))
    return out


def _stack_rules() -> list[Rule]:
    return [r for r in all_rules() if r.meta.scope == "stack"]


def _stack_policy(rule: Rule, **common: Any) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        shared = _shared(args.resources)
        cfg, own = _config(rule, args.get_config())
        if own:  # thresholds of its own: this rule alone, on fresh objects
            objects, urns = shared.objects()
            report = _evaluate(
                objects,
                config=cfg,
                environment=cfg.environment,
                rules=[rule],
                report_unknown_kinds=False,
            )
            if getattr(_SERVING, "token", None) is None:
                _release(objects)
                shared.evaluated.clear()
        else:  # every stack rule once per request and setting (issue 35)
            key = json.dumps([cfg.environment, sorted(cfg.gpu_resources), cfg.secret_env_names])
            if key not in shared.reports:
                objects, urns = shared.objects()
                everything = _evaluate(
                    objects,
                    config=cfg,
                    environment=cfg.environment,
                    rules=_stack_rules(),
                    report_unknown_kinds=False,
                )
                shared.reports[key] = (_by_rule(everything), urns)
            by_rule, urns = shared.reports[key]
            findings, mine = by_rule.get(rule.meta.id, ([], []))
            every = by_rule.get("*", ([], []))[1]
            report = Report(  # its records and every rule's, in report order
                findings=findings,
                not_evaluated=[record for _, record in heapq.merge(every, mine, key=itemgetter(0))],
            )
        _report(report, report_violation, urns, args)  # raises when not applicable

    return StackValidationPolicy(validate=validate, **common)


def build_policies() -> list[ResourceValidationPolicy | StackValidationPolicy]:
    """One CrossGuard policy per rule."""
    policies: list[ResourceValidationPolicy | StackValidationPolicy] = []
    for rule in all_rules():
        m = rule.meta
        properties: dict[str, dict[str, Any]] = {
            "environment": {"type": "string", "enum": list(ENVIRONMENTS), "default": ENVIRONMENT},
            "gpuResources": {"type": "array", "items": {"type": "string"}},
        }
        if m.id == "K014":
            properties["secretEnvNames"] = {"type": "array", "items": {"type": "string"}}
        for key, (kind, default) in m.thresholds.items():
            properties[camel(key)] = {"type": kind, "default": default}
        common = {
            "name": m.name,
            "description": f"{m.id}: {m.title}",
            "enforcement_level": _LEVELS[m.default_enforcement[ENVIRONMENT]],  # type: ignore[index]
            "config_schema": PolicyConfigSchema(properties=properties),
            "severity": Severity(m.severity),
            "remediation_steps": m.fix,
            "url": m.references[0],
            "tags": [m.layer, m.id],
        }
        make = _stack_policy if m.scope == "stack" else _resource_policy
        policies.append(make(rule, **common))
    return policies


def serve() -> None:
    """Start the pack: Pulumi's analyzer runs the pack folder's ``__main__.py``, which
    calls this; :class:`PolicyPack` serves the policies over gRPC until the engine ends."""
    global ENVIRONMENT
    ENVIRONMENT = startup_environment()
    _install_servicer_hooks()
    preload()  # the catalogues, while the program runs: not in the one AnalyzeStack
    pulumi_policy.PolicyPack(  # looked up when serving, so a test can stand in for it
        name="gpustrata",
        policies=build_policies(),  # type: ignore[arg-type]
        description="GPU, Ray and vLLM checks for LLM inference on Kubernetes (gpustrata rules).",
    )
