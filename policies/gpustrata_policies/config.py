"""Policy configuration: enforcement overrides and thresholds, one file for the
CrossGuard pack (``--policy-pack-config``, Pulumi Cloud) and ``gpustrata check --config``.

The format is Pulumi's policy-pack-config (JSON, or YAML for ``check``): policy names as
keys, each an enforcement level or a mapping with ``enforcementLevel`` and the policy's
camelCase properties; ``all`` sets the level of every policy::

    {
      "all": "advisory",
      "pinned-images": "mandatory",
      "shm-for-multi-gpu": {"enforcementLevel": "advisory", "minShmSize": "2Gi"},
      "concurrency-within-kv": {"typicalSequenceTokens": 4096},
      "gpu-requests-equal-limits": {"gpuResources": ["amd.com/gpu"]},
      "no-secret-literals-in-env": {"secretEnvNames": ["MY_TOKEN"]}
    }

Properties: the rule's thresholds (``gpustrata explain RULE`` lists them, camelCased),
``environment`` (dev|staging|prod: the pack's environment for that policy; ``check``
uses ``--environment``), ``gpuResources`` (extra extended resources that are GPUs) and,
for K014, ``secretEnvNames``; ``check`` applies the last two, from any policy, to every
rule. Enforcement is ``mandatory``, ``advisory`` or ``disabled``. ``dev`` and
``staging`` may relax any rule; ``prod`` never relaxes a rule that is mandatory in
production: ``check`` ignores such an override and warns (the pack leaves enforcement
levels to Pulumi).

Deprecated but still read (each use is reported): rule ids as keys, snake_case property
names, ``enforcement`` for ``enforcementLevel``, per-environment blocks inside a policy
(``dev: {enforcementLevel: advisory}``), and the former gpustrata-only layout
(``environment``/``gpu_resources``/``secret_env_names``/``rules:`` at the top level).
:class:`PolicyConfig.from_mapping` takes that former layout, which is also the
internal form the Pulumi format is translated to.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from gpustrata.core.environments import ENVIRONMENTS, Environment
from gpustrata.core.errors import InputError
from gpustrata.core.quantity import parse_quantity
from gpustrata.core.terminal import clipped, printable, quoted
from gpustrata_policies.findings import ENFORCEMENTS, Enforcement, RuleMeta

__all__ = [
    "ConfigError",
    "PolicyConfig",
    "camel",
    "from_pulumi_format",
    "is_legacy_format",
    "parse_environment",
    "policy_properties",
]

_TOP_KEYS = {"environment", "gpu_resources", "secret_env_names", "rules"}


class ConfigError(InputError, ValueError):
    """Invalid policy configuration; the message names the key and the fix (exit 2).

    One line: what the file controls (a key, a value with a line break) is escaped."""

    def __init__(self, message: str) -> None:
        super().__init__(printable(message))


def parse_environment(value: object, where: str = "environment") -> Environment:
    """Validate an environment name."""
    if value not in ENVIRONMENTS:
        raise ConfigError(
            f"{where}: {clipped(quoted(value))} is not one of {', '.join(ENVIRONMENTS)}"
        )
    return value


def _enforcement(value: object, where: str) -> Enforcement:
    if value not in ENFORCEMENTS:
        raise ConfigError(
            f"{where}: {clipped(quoted(value))} is not one of {', '.join(ENFORCEMENTS)}"
        )
    return value


def _names(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {clipped(quoted(value))}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Resolved configuration for one evaluation."""

    environment: Environment = "prod"
    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    gpu_resources: tuple[str, ...] = ()
    secret_env_names: tuple[str, ...] = ()
    deprecations: tuple[str, ...] = ()
    """Deprecated spellings the file used, one sentence each (callers print them)."""

    @classmethod
    def from_mapping(
        cls,
        data: Mapping[str, Any] | None,
        *,
        environment: str | None = None,
        resolve_rule: Callable[[str], RuleMeta | None] | None = None,
    ) -> PolicyConfig:
        """Validate a config mapping; *environment* (e.g. from ``--environment``) wins.

        *resolve_rule* maps a rule id or name to its metadata so that rule keys
        and their thresholds can be checked; unknown keys are errors.
        """
        data = data or {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"policy config: expected a mapping, got {type(data).__name__}")
        extra = set(data) - _TOP_KEYS
        if extra:
            raise ConfigError(
                f"policy config: unknown key(s) {', '.join(sorted(extra))}; "
                f"allowed: {', '.join(sorted(_TOP_KEYS))}"
            )
        env = parse_environment(
            environment if environment is not None else data.get("environment", "prod")
        )
        rules: dict[str, dict[str, Any]] = {}
        raw_rules = data.get("rules") or {}
        if not isinstance(raw_rules, Mapping):
            raise ConfigError("rules: expected a mapping of rule id or name to settings")
        for key, settings in raw_rules.items():
            meta = resolve_rule(str(key)) if resolve_rule else None
            if resolve_rule and meta is None:
                raise ConfigError(f"rules.{clipped(str(key))}: no rule with that id or name")
            rule_id = meta.id if meta else str(key)
            rules[rule_id] = _rule_settings(settings, f"rules.{key}", meta)
        return cls(
            environment=env,
            rules=rules,
            gpu_resources=_names(data.get("gpu_resources", []), "gpu_resources"),
            secret_env_names=_names(data.get("secret_env_names", []), "secret_env_names"),
        )

    def with_environment(self, environment: Environment) -> PolicyConfig:
        """The same configuration for another environment."""
        return PolicyConfig(
            environment, self.rules, self.gpu_resources, self.secret_env_names, self.deprecations
        )

    def _lookup(self, rule_id: str, key: str) -> Any:
        settings = self.rules.get(rule_id, {})
        per_env = settings.get(self.environment, {})
        if key in per_env:
            return per_env[key]
        return settings.get(key)

    def enforcement(self, meta: RuleMeta) -> tuple[Enforcement, str | None]:
        """Effective enforcement of *meta* in this environment, and a warning if an
        override was refused (prod never relaxes a rule that is mandatory there)."""
        default = meta.default_enforcement[self.environment]
        override = self._lookup(meta.id, "enforcement")
        if override is None or override == default:
            return default, None
        if self.environment == "prod" and default == "mandatory":
            return default, (
                f"{meta.id} ({meta.name}) is mandatory in prod; the configured "
                f"enforcement {override!r} was ignored"
            )
        return cast(Enforcement, override), None

    def threshold(self, rule_id: str, key: str, default: Any) -> Any:
        """A rule threshold: per-environment value, then rule value, then *default*."""
        value = self._lookup(rule_id, key)
        return default if value is None else value


def _rule_settings(settings: object, where: str, meta: RuleMeta | None) -> dict[str, Any]:
    if isinstance(settings, str):  # shorthand: `K013: mandatory`
        return {"enforcement": _enforcement(settings, where)}
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{where}: expected a mapping or an enforcement level")
    allowed = {"enforcement", *(meta.thresholds if meta else ())}
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key in ENVIRONMENTS:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}.{key}: expected a mapping")
            out[key] = _flat_settings(value, f"{where}.{key}", allowed, meta)
        else:
            out.update(_flat_settings({key: value}, where, allowed, meta))
    return out


def _flat_settings(
    settings: Mapping[str, Any], where: str, allowed: set[str], meta: RuleMeta | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if meta is not None and key not in allowed:
            raise ConfigError(
                f"{where}.{clipped(str(key))}: unknown setting; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
        if key == "enforcement":
            out[key] = _enforcement(value, f"{where}.{key}")
        elif meta is not None and key in meta.thresholds:
            out[key] = _threshold(value, meta.thresholds[key][0], key, f"{where}.{key}")
        else:
            out[key] = value
    return out


def _threshold(value: Any, kind: str, key: str, where: str) -> Any:
    """A threshold checked against its declared JSON-schema type: a boolean, a finite
    number from 1 (every numeric threshold is a count, a duration or a factor that rules
    read as >= 1), a positive Kubernetes quantity for a ``*_size`` string.

    A value a rule cannot use is refused here, naming it and the fix, rather than
    turning the rule into "not evaluated" everywhere (``minShmSize: 4GB``)."""
    shown = clipped(quoted(value))
    if kind == "boolean":
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {shown} is not a boolean; write true or false")
        return value
    if kind in {"integer", "number"}:
        if isinstance(value, float) and value.is_integer() and kind == "integer":
            value = int(value)  # CrossGuard passes every config number as a double
            shown = quoted(value)
        wanted = int if kind == "integer" else int | float
        what = "an integer" if kind == "integer" else "a number"
        if isinstance(value, bool) or not isinstance(value, wanted):
            raise ConfigError(f"{where}: {shown} is not {what}; write {what} such as 2")
        if not math.isfinite(value) or value < 1 or value > _MAX_THRESHOLD:
            raise ConfigError(
                f"{where}: {shown} is out of range; write {what} from 1 to "
                f"{_MAX_THRESHOLD:,} (to switch the check off: enforcementLevel: disabled)"
            )
        return value
    if kind == "string" and key.endswith("_size"):
        amount = parse_quantity(value) if isinstance(value, str) else None
        if amount is None or amount <= 0:
            hint = (
                f" ({value[:-1]} or {value[:-1]}i: Kubernetes writes no B)"
                if isinstance(value, str) and value.endswith("B") and len(value) > 2
                else ""
            )
            raise ConfigError(
                f"{where}: {shown} is not a positive Kubernetes quantity{hint}; write one "
                "such as 4Gi"
            )
        return value
    if kind == "string" and not isinstance(value, str):
        raise ConfigError(f"{where}: {shown} is not a string")
    return value


_MAX_THRESHOLD = 10**9
"""The largest numeric threshold (seconds, tokens, failures, a factor): larger is a typo."""


_LEVELS = {"enforcementLevel", "enforcement"}
_LISTS = {"gpuResources": "gpu_resources", "secretEnvNames": "secret_env_names"}


def camel(name: str) -> str:
    """A snake_case threshold name as a Pulumi policy property: ``min_shm_size`` ->
    ``minShmSize``."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def is_legacy_format(data: Mapping[str, Any]) -> bool:
    """Whether *data* is the former gpustrata-only layout (top-level ``rules`` etc.)."""
    return any(key in data for key in _TOP_KEYS)


def policy_properties(
    meta: RuleMeta, settings: Mapping[str, Any], where: str
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """One policy's Pulumi-format properties, translated: (rule settings in the internal
    form, run-wide settings ``environment``/``gpu_resources``/``secret_env_names``,
    deprecation notices). ``enforcementLevel`` becomes the rule's ``enforcement``."""
    rule: dict[str, Any] = {}
    top: dict[str, Any] = {}
    notes: list[str] = []
    by_camel = {camel(k): k for k in meta.thresholds}
    for key, value in settings.items():
        if key in _LEVELS:
            if key == "enforcement":
                notes.append(f"{where}.enforcement is deprecated; use enforcementLevel")
            rule["enforcement"] = _enforcement(value, f"{where}.{key}")
        elif key == "environment":
            top["environment"] = parse_environment(value, f"{where}.environment")
        elif key in _LISTS:
            top[_LISTS[key]] = _names(value, f"{where}.{key}")
        elif key in _LISTS.values():
            new = next(k for k, v in _LISTS.items() if v == key)
            notes.append(f"{where}.{key} is deprecated; use {new}")
            top[key] = _names(value, f"{where}.{key}")
        elif key in by_camel:
            name = by_camel[key]
            rule[name] = _threshold(value, meta.thresholds[name][0], name, f"{where}.{key}")
        elif key in meta.thresholds:
            notes.append(f"{where}.{key} is deprecated; use {camel(key)}")
            rule[key] = _threshold(value, meta.thresholds[key][0], key, f"{where}.{key}")
        elif key in ENVIRONMENTS and isinstance(value, Mapping):
            notes.append(
                f"{where}.{key}: per-environment blocks are deprecated; use one config "
                "file per environment (a Pulumi policy group per environment)"
            )
            inner, _, more = policy_properties(meta, value, f"{where}.{key}")
            notes += more
            rule[key] = inner
        else:
            allowed = sorted(
                {"enforcementLevel", "environment", "gpuResources", *by_camel}
                | ({"secretEnvNames"} if meta.id == "K014" else set())
            )
            raise ConfigError(
                f"{where}.{clipped(str(key))}: unknown property; allowed: {', '.join(allowed)}"
            )
    return rule, top, notes


def from_pulumi_format(
    data: Mapping[str, Any],
    *,
    environment: str | None,
    resolve_rule: Callable[[str], RuleMeta | None],
    all_rules: Callable[[], list[RuleMeta]],
) -> PolicyConfig:
    """A :class:`PolicyConfig` from Pulumi's policy-pack-config format (or the former
    layout, with a deprecation notice); *environment* (``--environment``) wins."""
    if is_legacy_format(data):
        cfg = PolicyConfig.from_mapping(data, environment=environment, resolve_rule=resolve_rule)
        note = (
            "this policy config uses the former gpustrata layout (environment, "
            "gpu_resources, secret_env_names, rules); it is deprecated: use Pulumi's "
            "policy-pack-config format (policy names as keys, enforcementLevel, camelCase "
            "properties), which the policy pack reads too"
        )
        return _with_notes(cfg, [note])
    rules: dict[str, Any] = {}
    gpu: list[str] = []
    secrets: list[str] = []
    envs: set[str] = set()
    notes: list[str] = []
    default_level: object = None
    for key, value in data.items():
        where = str(key)
        if key == "all":
            level = value.get("enforcementLevel") if isinstance(value, Mapping) else value
            default_level = _enforcement(level, "all")
            continue
        meta = resolve_rule(where)
        if meta is None:
            raise ConfigError(
                f"{clipped(where)}: no policy with that name; `gpustrata explain` lists them"
            )
        if where != meta.name:
            notes.append(f"{where}: rule ids as keys are deprecated; use the name {meta.name}")
        if isinstance(value, str):
            value = {"enforcementLevel": value}
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected an enforcement level or a mapping")
        rule, top, more = policy_properties(meta, value, where)
        notes += more
        gpu += top.get("gpu_resources", ())
        secrets += top.get("secret_env_names", ())
        if "environment" in top:
            envs.add(top["environment"])
        rules[meta.id] = rule
    if default_level is not None:
        for meta in all_rules():
            rule = rules.setdefault(meta.id, {})
            rule.setdefault("enforcement", default_level)
    env = environment
    if env is None and len(envs) == 1:
        env = envs.pop()
    cfg = PolicyConfig.from_mapping(
        {
            "rules": rules,
            "gpu_resources": list(dict.fromkeys(gpu)),
            "secret_env_names": list(dict.fromkeys(secrets)),
        },
        environment=env,
        resolve_rule=resolve_rule,
    )
    return _with_notes(cfg, notes)


def _with_notes(cfg: PolicyConfig, notes: list[str]) -> PolicyConfig:
    return PolicyConfig(
        cfg.environment,
        cfg.rules,
        cfg.gpu_resources,
        cfg.secret_env_names,
        tuple(dict.fromkeys([*cfg.deprecations, *notes])),
    )
