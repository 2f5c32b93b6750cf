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
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi_policy.policy
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from gpustrata.core.collector import fewer_collections, no_automatic_collections
from gpustrata.core.environments import ENVIRONMENTS, enforced_environment
from gpustrata.core.terminal import clipped
from gpustrata_policies.config import ConfigError, PolicyConfig, camel, policy_properties
from gpustrata_policies.evaluate import all_rules, evaluate, load_config, load_policy_config
from gpustrata_policies.findings import Report, Rule
from gpustrata_policies.inputs.pulumi import object_from_pulumi
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


def _config(rule: Rule, settings: Mapping[str, Any]) -> PolicyConfig:
    # Pulumi resolves enforcementLevel itself; what is left are the policy's properties.
    data = {k: v for k, v in settings.items() if k not in {"enforcementLevel", "enforcement"}}
    props, top, notes = policy_properties(rule.meta, data, rule.meta.name)
    for note in notes:
        if note not in _REPORTED:  # once per pack process, not once per resource
            _REPORTED.add(note)
            print(f"gpustrata: warning: {note}", file=sys.stderr)
    env = top.pop("environment", ENVIRONMENT)
    top = {k: list(v) for k, v in top.items()}
    return load_config({**top, "rules": {rule.meta.id: props} if props else {}}, env)


def _report(
    report: Report, report_violation: ReportViolation, urns: Mapping[str, str], args: Any
) -> None:
    for f in report.findings:
        report_violation(
            f"[{f.rule}] {f.resource}: {f.message}\nFix: {f.fix}", urns.get(f.resource)
        )
    if not report.findings and report.not_evaluated:
        args.not_applicable("; ".join(f"{n.resource}: {n.reason}" for n in report.not_evaluated))


def _resource_policy(rule: Rule, **common: Any) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        obj = object_from_pulumi(args.resource_type, args.name, _raw(args.props))
        if obj is None:
            return
        cfg = _config(rule, args.get_config())
        report = evaluate(
            [obj], config=cfg, environment=cfg.environment, rules=[rule], report_unknown_kinds=False
        )
        _report(report, report_violation, {}, args)

    return ResourceValidationPolicy(validate=validate, **common)


# The last AnalyzeStack request's resources as the adapter reads them: (request key,
# [(manifest, urn)]). pulumi-policy hands every StackValidationPolicy its own freshly
# deserialised copy of the same request, so without this each of the stack policies
# re-walked every resource through the unknown-checking proxies. One entry: a preview
# sends one request; the next request replaces it.
_STACK_READ: list[tuple[object, list[tuple[dict[str, Any], str]]]] = []
# The AnalyzeStack request this thread serves, marked by _serving_marked (pulumi-policy
# runs a request's policies one after another in the thread that received it).
_SERVING = threading.local()


def _serving_marked(analyze: Any) -> Any:
    """pulumi-policy's ``AnalyzeStack`` marking the request it serves with a fresh token,
    so that its 33 stack policies know each other's copy of the resources for one request
    without comparing their content (a JSON dump of every resource per policy: about 2.6 s
    per 1,000 resources, and it grew faster than the request).

    The request runs inside :func:`fewer_collections`: pulumi-policy deserialises every
    resource again for each stack policy (``MessageToDict`` and its proxies), so the heap
    held about a million live containers at 5,000 resources and the collector's full
    collections, 64 of them in one request, walked all of it each time: 28 of 74 s CPU,
    against 0.06 s at 1,000 resources (issue 18). Each stack policy frees its own views
    with :func:`_release`, whose collection is the request's only one
    (:func:`no_automatic_collections`): the copies are acyclic, freed by reference
    counting, yet their allocations still set off the automatic collections, 594 young
    and 33 middle-generation ones at 5,000 resources (13.6 of 57 s CPU; 1.5 of 10.6 s at
    1,000, with no middle-generation one: they grew faster than the request)."""

    def marked(self: Any, request: Any, context: Any) -> Any:
        _SERVING.token = object()
        try:
            with fewer_collections(), no_automatic_collections():
                return analyze(self, request, context)
        finally:
            _SERVING.token = None

    marked.gpustrata_marked = True  # type: ignore[attr-defined]
    return marked


_SERVICER: Any = getattr(pulumi_policy.policy, "_PolicyAnalyzerServicer", None)
if callable(getattr(_SERVICER, "AnalyzeStack", None)) and not getattr(
    _SERVICER.AnalyzeStack, "gpustrata_marked", False
):
    _SERVICER.AnalyzeStack = _serving_marked(_SERVICER.AnalyzeStack)


def _config_checked(configure: Any) -> Any:
    """pulumi-policy's ``Configure`` refusing a config no policy can use, at load: an
    unknown policy name, an unknown property, a threshold that is no value of its type
    (``minShmSize: 4GB``, ``.inf``, ``[1, 2]``, ``-4Gi``). The gRPC error names the
    policy, the property, the value and the fix (``check --config`` reads the same
    file through the same :func:`load_policy_config`); pulumi-policy itself keeps a
    config for any name and leaves the rule "not evaluated" on every resource."""

    def checked(self: Any, request: Any, context: Any) -> Any:
        import grpc  # type: ignore[import-untyped]
        from google.protobuf import json_format  # type: ignore[import-untyped]

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


if callable(getattr(_SERVICER, "Configure", None)) and not getattr(
    _SERVICER.Configure, "gpustrata_checked", False
):
    _SERVICER.Configure = _config_checked(_SERVICER.Configure)


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


def _stack_objects(resources: Sequence[Any]) -> list[tuple[dict[str, Any], str]]:
    """(manifest, urn) for every resource the adapter understands, read once per request:
    keyed by the request's token where pulumi-policy's servicer marks it, else by content."""
    token = getattr(_SERVING, "token", None)
    key: object = token if token is not None else _fingerprint(resources)
    if _STACK_READ and (_STACK_READ[0][0] is key or _STACK_READ[0][0] == key):
        return _STACK_READ[0][1]
    read = []
    for res in resources:
        raw = object_from_pulumi(res.resource_type, res.name, _raw(res.props))
        if raw is not None:
            read.append((raw, res.urn))
    _STACK_READ[:] = [(key, read)]
    return read


def _release(objects: Sequence[K8sObject]) -> None:
    """Free what one stack policy's evaluation derived from *objects* now.

    Inside :func:`fewer_collections` the evaluation froze these objects (they were built
    before it began), so the cycles their derived views form (an object's pods point
    back at it, a pod's containers at the pod) stayed out of every collection until the
    request ended: 33 policies' views at once, 600 instead of 320 MiB at 5,000
    resources. Dropping each object's derived views (:meth:`K8sObject.forget_derived`:
    the references from the frozen objects into the views; the policy is done with them)
    leaves the views unreachable, and one collection, which skips the frozen objects,
    frees them.
    """
    for obj in objects:
        obj.forget_derived()
    gc.collect()


def _stack_policy(rule: Rule, **common: Any) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        objects, urns = [], {}
        # Fresh K8sObjects per policy (their derived views stay per evaluation); the
        # manifests are shared read-only, as `check` shares them across all rules.
        for raw, urn in _stack_objects(args.resources):
            obj = K8sObject(raw)
            objects.append(obj)
            urns[obj.resource] = urn
        try:
            cfg = _config(rule, args.get_config())
            report = evaluate(
                objects,
                config=cfg,
                environment=cfg.environment,
                rules=[rule],
                report_unknown_kinds=False,
            )
            _report(report, report_violation, urns, args)  # raises when not applicable
        finally:
            if getattr(_SERVING, "token", None) is not None:
                _release(objects)

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
    PolicyPack(
        name="gpustrata",
        policies=build_policies(),  # type: ignore[arg-type]
        description="GPU, Ray and vLLM checks for LLM inference on Kubernetes (gpustrata rules).",
    )
