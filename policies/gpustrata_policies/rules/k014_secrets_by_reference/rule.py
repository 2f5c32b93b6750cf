"""K014 secrets-by-reference."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.rules._common import MANDATORY
from gpustrata_policies.view.objects import K8sObject, as_map
from gpustrata_policies.view.vllm_args import serve_config, vllm_engine

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


def _literal(value: Any) -> str:
    text = str(value)
    if PLACEHOLDER.match(text):
        return (
            f"the placeholder {text!r} (substituted before apply, the secret is stored in the "
            "object; applied as is, the container gets the placeholder)"
        )
    return f"a literal value ({len(text)} characters)"


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """Secret-bearing env vars and flags come from Secrets."""
    extra = ctx.config.secret_env_names
    for c in obj.containers():
        for index, entry in enumerate(c.env()):
            name, value = entry.get("name"), entry.get("value")
            if isinstance(name, str) and value not in (None, "") and _is_secret_name(name, extra):
                yield ctx.violation(
                    obj,
                    f"{c.label} sets {name} to {_literal(value)}; secrets in a spec are readable "
                    "by anyone who can read the object",
                    (*c.path, "env", index, "value"),
                )
        engine = None if c.init else vllm_engine(c)
        for flag in SECRET_FLAGS:
            value = engine.get(flag) if engine else None
            if isinstance(value, str) and value and "$" not in value:
                yield ctx.violation(
                    obj,
                    f"{c.label} passes --{flag.replace('_', '-')} as {_literal(value)} on its "
                    "command line",
                    (*c.path, "args"),
                )
    if obj.kind == "RayService":
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
                    yield ctx.violation(
                        obj,
                        f"serveConfigV2 runtime_env sets {name} to {_literal(value)}",
                        ("spec", "serveConfigV2"),
                    )


RULE = Rule(
    RuleMeta(
        id="K014",
        name="secrets-by-reference",
        title="Tokens and keys come from Secrets",
        layer="kubernetes",
        severity="high",
        default_enforcement=MANDATORY,
        rationale=(
            "A Hugging Face token or API key written into a Deployment, RayService or "
            "serveConfigV2 is stored in plain text in etcd, in Git, in Helm release history "
            "and in every `kubectl get -o yaml`; RBAC on Secrets no longer protects it."
        ),
        fix=(
            "Put the value in a Secret and reference it: env: [{name: HF_TOKEN, valueFrom: "
            "{secretKeyRef: {name: hf-token, key: token}}}]; for vLLM flags use "
            "--api-key $(VLLM_API_KEY) with that env var from a Secret."
        ),
        references=(
            "https://kubernetes.io/docs/concepts/configuration/secret/#using-secrets-as-environment-variables",
            "https://kubernetes.io/docs/concepts/security/secrets-good-practices/",
            "https://docs.vllm.ai/en/latest/deployment/k8s.html",
        ),
    ),
    check,
)
