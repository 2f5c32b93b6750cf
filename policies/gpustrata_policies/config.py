"""Policy configuration: environment, enforcement overrides, thresholds.

File format (YAML or JSON), every key optional::

    environment: prod            # dev | staging | prod (the CLI flag wins)
    gpu_resources: [amd.com/gpu] # extra extended resources that are GPUs
    secret_env_names: [MY_TOKEN] # extra env var names that carry secrets
    rules:
      K013: {enforcement: mandatory}          # rule id or name; all environments
      shm-for-multi-gpu:
        min_shm_size: 2Gi                     # a threshold, all environments
        dev: {enforcement: advisory, min_shm_size: 512Mi}   # per environment
      concurrency-within-kv:                  # V012
        typical_sequence_tokens: 4096         # prompt + output tokens (default 2048)

Enforcement is ``mandatory``, ``advisory`` or ``disabled``. ``dev`` and
``staging`` may relax any rule; ``prod`` never relaxes a rule that is mandatory
in production: such an override is ignored and reported as a warning.

Thresholds are those a rule declares (``gpustrata explain RULE`` lists them with their
defaults); ``integer`` and ``number`` thresholds must be numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from gpustrata.core.environments import ENVIRONMENTS, Environment
from gpustrata.core.errors import InputError
from gpustrata_policies.findings import ENFORCEMENTS, Enforcement, RuleMeta

__all__ = ["ConfigError", "PolicyConfig", "parse_environment"]

_TOP_KEYS = {"environment", "gpu_resources", "secret_env_names", "rules"}


class ConfigError(InputError, ValueError):
    """Invalid policy configuration; the message names the key and the fix (exit 2)."""


def parse_environment(value: object, where: str = "environment") -> Environment:
    """Validate an environment name."""
    if value not in ENVIRONMENTS:
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(ENVIRONMENTS)}")
    return value


def _enforcement(value: object, where: str) -> Enforcement:
    if value not in ENFORCEMENTS:
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(ENFORCEMENTS)}")
    return value


def _names(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Resolved configuration for one evaluation."""

    environment: Environment = "prod"
    rules: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    gpu_resources: tuple[str, ...] = ()
    secret_env_names: tuple[str, ...] = ()

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
                raise ConfigError(f"rules.{key}: no rule with that id or name")
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
        return PolicyConfig(environment, self.rules, self.gpu_resources, self.secret_env_names)

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
                f"{where}.{key}: unknown setting; allowed: {', '.join(sorted(allowed))}"
            )
        if key == "enforcement":
            out[key] = _enforcement(value, f"{where}.{key}")
        elif meta is not None and key in meta.thresholds:
            out[key] = _number(value, meta.thresholds[key][0], f"{where}.{key}")
        else:
            out[key] = value
    return out


def _number(value: Any, kind: str, where: str) -> Any:
    """A numeric threshold checked against its declared JSON-schema type (others as given)."""
    if kind not in {"integer", "number"}:
        return value
    if isinstance(value, float) and value.is_integer() and kind == "integer":
        value = int(value)  # CrossGuard passes every config number as a double
    wanted = int if kind == "integer" else int | float
    if isinstance(value, bool) or not isinstance(value, wanted):
        raise ConfigError(
            f"{where}: {value!r} is not {'an integer' if kind == 'integer' else 'a number'}"
        )
    return value
