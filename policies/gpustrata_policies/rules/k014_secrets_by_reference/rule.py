"""K014 secrets-by-reference."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.objects import ContainerRef, K8sObject, as_map
from gpustrata_policies.view.vllm_args import serve_config

KNOWN_SECRET_ENV = frozenset(
    {
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HUGGINGFACE_TOKEN",
        "HUGGINGFACEHUB_API_TOKEN",
        "VLLM_API_KEY",
        "OPENAI_API_KEY",
        "WANDB_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "NGC_API_KEY",
    }
)
SECRET_SUFFIX = re.compile(
    r"(?:^|_)(?:TOKEN|API_KEY|APIKEY|SECRET|SECRET_KEY|PASSWORD|PASSWD|ACCESS_KEY)$"
)
PLACEHOLDER = re.compile(r"^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$|^<.*>$")
SECRET_FLAGS = ("api_key", "hf_token")


def _is_secret_name(name: str, extra: tuple[str, ...]) -> bool:
    upper = name.upper()
    return upper in KNOWN_SECRET_ENV or name in extra or bool(SECRET_SUFFIX.search(upper))


def _literal(value: Any) -> dict[str, Value]:
    """What a secret's value is, without the secret: a placeholder's text, or its length."""
    text = str(value)
    placeholder = text if PLACEHOLDER.match(text) else None
    return {"placeholder": placeholder, "length": len(text)}


def _literal_text(v: Mapping[str, Value]) -> str:
    if v["placeholder"] is not None:
        return (
            f"the placeholder {v['placeholder']!r} (substituted before apply, the secret is "
            "stored in the object; applied as is, the container gets the placeholder)"
        )
    return f"a literal value ({v['length']} characters)"


_FLAG = re.compile(r"^--(api[-_]key|hf[-_]token)(?:=(.*))?$", re.DOTALL)
_FLAG_STARTS = ("--api", "--hf")
"""How every token :data:`_FLAG` matches starts."""


def _literal_flag(value: str) -> bool:
    return bool(value) and "$" not in value


def _flag_values(tokens: list[str]) -> list[tuple[str, str]]:
    """(flag, value) of every ``--api-key``/``--hf-token`` in *tokens*, in order."""
    found: list[tuple[str, str]] = []
    for index, token in enumerate(tokens):
        if not token.startswith(_FLAG_STARTS):  # most tokens: no regex call
            continue
        match = _FLAG.match(token)
        if not match:
            continue
        value = match.group(2)
        if value is None:
            following = tokens[index + 1] if index + 1 < len(tokens) else ""
            value = "" if following.startswith("--") else following
        found.append((match.group(1).replace("_", "-"), value))
    return found


def _command_line_flags(c: Any) -> Iterator[tuple[str, str, bool]]:
    """(flag, value, in_shell) for secret flags the engine reader does not count.

    The engine reader keeps one value per flag: a second ``--api-key`` in the same
    arguments, and flags inside a shell string (``sh -c "vllm serve --api-key ..."``),
    are found here.
    """
    tokens: list[str] = []
    for part in ("command", "args"):
        raw = c.raw.get(part)
        tokens += [t for t in raw if isinstance(t, str)] if isinstance(raw, list) else []
    direct = _flag_values(tokens)
    seen: set[str] = set()
    for flag, value in direct:
        if flag in seen and _literal_flag(value):
            yield flag, value, False
        seen.add(flag)
    for token in tokens:
        # The substring test first: it is C, the whitespace test a loop over characters.
        if ("--api" in token or "--hf" in token) and any(ch.isspace() for ch in token):
            try:
                words = shlex.split(token)
            except ValueError:
                words = token.split()
            for flag, value in _flag_values(words):
                if _literal_flag(value):
                    yield flag, value, True


def _judge_container(
    c: ContainerRef, site: EngineSite | None, extra: tuple[str, ...]
) -> Iterator[Verdict]:
    """Secrets in one container's env and command line."""
    for index, entry in enumerate(c.env()):
        name, value = entry.get("name"), entry.get("value")
        if isinstance(name, str) and value not in (None, "") and _is_secret_name(name, extra):
            values = {"container": c.label, "name": name, **_literal(value)}
            yield Verdict("violation", "env-literal", values, path=(*c.path, "env", index, "value"))
    for flag in SECRET_FLAGS:
        value = site.flag(flag) if site else None
        if isinstance(value, str) and value and "$" not in value:
            values = {"container": c.label, "flag": flag.replace("_", "-"), **_literal(value)}
            yield Verdict("violation", "flag-literal", values, path=(*c.path, "args"))
    for flag, value, in_shell in _command_line_flags(c):
        values = {"container": c.label, "flag": flag, "in_shell": in_shell, **_literal(value)}
        yield Verdict("violation", "flag-elsewhere", values, path=(*c.path, "args"))


def _judge_serve_config(
    ctx: RuleContext, obj: K8sObject, extra: tuple[str, ...]
) -> Iterator[Verdict]:
    """Secrets in a RayService's serveConfigV2: runtime_env env_vars and engine_kwargs."""
    cfg = serve_config(obj)
    scopes: list[Mapping[str, Any]] = [
        *(cfg.applications if cfg else []),
        *(cfg.llm_configs if cfg else []),
    ]
    for scope in scopes:
        env_vars = as_map(
            as_map(scope.get("runtime_env"), "runtime_env").get("env_vars"), "env_vars"
        )
        for name, value in env_vars.items():
            if value not in (None, "") and _is_secret_name(str(name), extra):
                values = {"name": str(name), **_literal(value)}
                yield Verdict(
                    "violation", "runtime-env-literal", values, path=("spec", "serveConfigV2")
                )
    for site in engine_sites(ctx, obj):
        kwargs = site.llm_config.get("engine_kwargs") if site.ray else None
        for name, value in kwargs.items() if isinstance(kwargs, Mapping) else ():
            secret = str(name).replace("-", "_") in SECRET_FLAGS
            if secret and isinstance(value, str) and _literal_flag(value):
                values = {"name": str(name), **_literal(value)}
                yield Verdict(
                    "violation", "engine-kwargs-literal", values, path=("spec", "serveConfigV2")
                )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Secret-bearing env vars and flags come from Secrets."""
    extra = ctx.config.secret_env_names
    sites = {
        id(s.container): s for s in engine_sites(ctx, obj, ray_pods=True) if s.container is not None
    }
    for c in obj.containers():
        yield from _judge_container(c, None if c.init else sites.get(id(c)), extra)
    if obj.kind == "RayService":
        yield from _judge_serve_config(ctx, obj, extra)


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K014 message quotes beyond its values: the literal (or placeholder) and
    where a repeated flag is."""
    v = verdict.values
    where = "in a shell command" if v.get("in_shell") else "a second time"
    return {"literal": _literal_text(v), "where": where}


RULE = folder_rule(__name__, worded(judge, fields))
