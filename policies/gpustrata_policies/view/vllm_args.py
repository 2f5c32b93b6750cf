"""Parse vLLM engine flags and versions from containers and RayService configs.

Spellings understood (all normalised to vLLM's underscore names):

* ``vllm serve MODEL --flag v`` / ``--flag=v`` / ``--flag_with_underscores v``;
* ``python -m vllm.entrypoints.openai.api_server --model M``;
* the ``vllm/vllm-openai`` image without a command (its entrypoint is the API
  server, so ``args`` are the flags);
* shell strings (``sh -c "...; vllm serve ..."``), with ``$(VAR)``/``$VAR``
  expanded from literal env values;
* env-driven launchers: flags in ``VLLM_ADDITIONAL_ARGS`` (KServe);
* Ray Serve LLM ``serveConfigV2``: ``applications[].args.llm_configs[]`` with
  ``engine_kwargs``, ``model_loading_config``, ``deployment_config``,
  ``placement_group_config``, ``accelerator_type``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml

from gpustrata.core.unknown import UNKNOWN, UnknownInput, memoised
from gpustrata.core.yamlguard import YamlShapeError
from gpustrata.core.yamlio import safe_load
from gpustrata.vllm.flags import int_setting, parse_flags
from gpustrata_policies.view.objects import ContainerRef, K8sObject, dig

__all__ = [
    "OTHER_PUBLISHERS",
    "SERVE_CONFIG_TYPE_SOURCE",
    "EngineArgs",
    "ServeConfig",
    "image_publisher",
    "ray_version",
    "serve_config",
    "split_image",
    "vllm_engine",
    "vllm_tagged_image",
    "vllm_version",
]

_API_SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")
_VAR = re.compile(
    r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)
_SEPARATORS = re.compile(r"\s*(?:;|&&|\|\||\n)\s*")


@dataclass(slots=True)
class EngineArgs:
    """Engine settings of one vLLM engine, with where they were read."""

    source: str
    model: str | None = None
    values: dict[str, Any] = field(default_factory=dict)
    complete: bool = True
    """False when flags may come from elsewhere (``$@``, unresolved variables)."""
    port: int | None = None
    written: list[str] = field(default_factory=list)
    """The options as written (``--max_model_len``, ``-tp``; Ray: ``engine_kwargs`` keys),
    for the check that the release accepts them."""

    def get(self, key: str) -> Any:
        """A setting by vLLM name (dashes or underscores)."""
        return self.values.get(key.replace("-", "_"))

    def get_int(self, key: str) -> int | None:
        """An integer setting as vLLM reads it (:func:`gpustrata.vllm.flags.int_setting`),
        ``None`` when absent or not an integer."""
        value = int_setting(self.values, key.replace("-", "_"), self.source)
        return value if isinstance(value, int) else None

    def gpus_per_engine(self) -> int | None:
        """TP x PP, or ``None`` when a factor is unreadable (defaults are 1)."""
        tp = self.get_int("tensor_parallel_size") if self.get("tensor_parallel_size") else 1
        pp = self.get_int("pipeline_parallel_size") if self.get("pipeline_parallel_size") else 1
        if tp is None or pp is None:
            return None
        return tp * pp


def _expand(text: str, env: Mapping[str, str]) -> tuple[str, bool]:
    unresolved = False

    def sub(match: re.Match[str]) -> str:
        nonlocal unresolved
        name = match.group(1) or match.group(2) or match.group(3)
        if name in env:
            return env[name]
        unresolved = True
        return match.group(0)

    return _VAR.sub(sub, text), unresolved


def _tokens(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def _vllm_invocation(tokens: list[str]) -> list[str] | None:
    """The flags after ``vllm serve`` / ``-m vllm.entrypoints...``, else ``None``."""
    for i, tok in enumerate(tokens):
        base = tok.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(tokens) and tokens[i + 1] == "serve":
            return tokens[i + 2 :]
        if tok == "-m" and i + 1 < len(tokens) and tokens[i + 1] in _API_SERVER_MODULES:
            return tokens[i + 2 :]
    return None


@lru_cache(maxsize=8192)  # a cluster's few images, asked for by every rule
def split_image(image: str) -> tuple[str, str | None, str | None]:
    """``repo[:tag][@digest]`` -> (repo, tag, digest); a registry port is not a tag."""
    digest = None
    if "@" in image:
        image, digest = image.split("@", 1)
    tag = None
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        image, tag = image.rsplit(":", 1)
    return image, tag, digest


def _is_vllm_image(image: Any) -> bool:
    """An image that runs the vLLM server (any owner's ``vllm-openai``)."""
    if not isinstance(image, str):
        return False
    repo = split_image(image)[0]
    return repo.rsplit("/", 1)[-1] in {"vllm-openai", "vllm-tpu", "vllm-openai-rocm"}


def vllm_tagged_image(image: Any) -> bool:
    """An image whose tag is a vLLM release (``vllm/vllm-openai``), not another project's
    version (``lmcache/vllm-openai:v0.3.9`` is LMCache 0.3.9)."""
    if not _is_vllm_image(image):
        return False
    return image_publisher(image) is None


def image_publisher(image: Any) -> str | None:
    """The other project whose versions a ``vllm-openai`` image's tags are (``LMCache``)."""
    if not isinstance(image, str):
        return None
    parts = split_image(image)[0].split("/")
    owner = parts[-2].lower() if len(parts) >= 2 else ""
    return OTHER_PUBLISHERS.get(owner)


def vllm_engine(container: ContainerRef) -> EngineArgs | None:
    """vLLM engine settings of a container that runs the vLLM server, else ``None``.

    Read once per container (kept in ``container.memo``; the rules do not change it):
    a dozen rules ask for the same container's engine.
    """
    return memoised(container.memo, "vllm_engine", lambda: _read_engine(container))


def _read_engine(container: ContainerRef) -> EngineArgs | None:
    raw = container.raw
    command = raw.get("command")
    args = raw.get("args")
    if command is UNKNOWN or args is UNKNOWN:
        raise UnknownInput(f"command/args of {container.label}")
    command = [str(c) for c in command] if isinstance(command, list) else []
    args = [str(a) for a in args] if isinstance(args, list) else []
    env = container.literal_env()
    argv = command + args
    flags: list[str] | None = None
    complete = True
    if argv and argv[0].rsplit("/", 1)[-1] in {"sh", "bash", "dash", "ash", "zsh"} and "-c" in argv:
        script = " ".join(argv[argv.index("-c") + 1 :])
        script = script.replace("\\\n", " ")
        for part in _SEPARATORS.split(script):
            expanded, unresolved = _expand(part, env)
            found = _vllm_invocation(_tokens(expanded))
            if found is not None:
                flags, complete = found, not unresolved
                break
    elif argv:
        expanded_argv = []
        for tok in argv:
            text, unresolved = _expand(tok, env)
            complete = complete and not unresolved
            expanded_argv.append(text)
        flags = _vllm_invocation(expanded_argv)
        if flags is None and not command and _is_vllm_image(container.image):
            flags = expanded_argv
    elif _is_vllm_image(container.image):
        flags = []
    if flags is None:
        return None
    if "$@" in flags or '"$@"' in flags:
        complete = False
        flags = [f for f in flags if f not in {"$@", '"$@"'}]
    engine = EngineArgs(source=container.label, complete=complete)
    engine.model = parse_flags(flags, engine.values, engine.written)
    extra = env.get("VLLM_ADDITIONAL_ARGS")
    if extra:
        parse_flags(_tokens(extra), engine.values, engine.written)
    if isinstance(engine.values.get("model"), str):
        engine.model = engine.values["model"]
    port = engine.get_int("port")
    engine.port = port if port is not None else 8000
    return engine


@dataclass(slots=True)
class ServeConfig:
    """What a RayService ``serveConfigV2`` says about Ray Serve LLM engines."""

    engines: list[EngineArgs] = field(default_factory=list)
    llm_configs: list[Mapping[str, Any]] = field(default_factory=list)
    applications: list[Mapping[str, Any]] = field(default_factory=list)
    error: str | None = None
    not_a_string: str | None = None
    """What ``serveConfigV2`` is when it is not a string (``a mapping``): the API server
    rejects such a RayService (:data:`SERVE_CONFIG_TYPE_SOURCE`)."""


SERVE_CONFIG_TYPE_SOURCE = "ray-project/kuberay@v1.7.0:ray-operator/apis/ray/v1/rayservice_types.go"
"""Where KubeRay declares ``RayServiceSpec.ServeConfigV2`` a ``string`` (its CRD schema
says ``type: string``)."""

_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (Mapping, "a mapping"),
    (list, "a list"),
)


def serve_config(obj: K8sObject) -> ServeConfig | None:
    """Parse a RayService's ``serveConfigV2``; ``None`` if it has none."""
    text = dig(obj.raw, "spec", "serveConfigV2")
    if text is UNKNOWN:
        raise UnknownInput(f"spec.serveConfigV2 of {obj.resource}")
    if text is None:
        return None
    if not isinstance(text, str):
        what = next((name for t, name in _TYPE_NAMES if isinstance(text, t)), "not text")
        return ServeConfig(error=f"serveConfigV2 is {what}, not a string", not_a_string=what)
    return _parse_serve_config(text)


@lru_cache(maxsize=256)
def _parse_serve_config(text: str) -> ServeConfig:
    """Parse once per distinct string (callers treat the result as read-only)."""
    try:
        data = safe_load(text)
    except YamlShapeError as exc:  # the guards a file gets: duplicate keys, alias bombs
        where = f" (line {exc.line} of the string)" if exc.line else ""
        return ServeConfig(error=f"serveConfigV2 is not valid YAML{where}: {exc}")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1} of the string)" if mark else ""
        return ServeConfig(error=f"serveConfigV2 is not valid YAML{where}")
    out = ServeConfig()
    apps = data.get("applications") if isinstance(data, Mapping) else None
    for app_index, app in enumerate(apps if isinstance(apps, list) else []):
        if not isinstance(app, Mapping):
            continue
        out.applications.append(app)
        args = app.get("args")
        if not isinstance(args, Mapping):
            continue
        configs = args.get("llm_configs")
        if not isinstance(configs, list):
            single = args.get("llm_config")
            configs = [single] if single is not None else []
        for index, cfg in enumerate(configs):
            label = f"serveConfigV2 applications[{app_index}].args.llm_configs[{index}]"
            if not isinstance(cfg, Mapping):  # a path to a config file: not readable here
                out.engines.append(EngineArgs(source=label, complete=False))
                continue
            out.llm_configs.append(cfg)
            kwargs = cfg.get("engine_kwargs")
            values = (
                {str(k).replace("-", "_"): v for k, v in kwargs.items()}
                if isinstance(kwargs, Mapping)
                else {}
            )
            model = dig(cfg, "model_loading_config", "model_id")
            out.engines.append(
                EngineArgs(
                    source=label,
                    model=model if isinstance(model, str) else None,
                    values=values,
                    written=[str(k) for k in kwargs] if isinstance(kwargs, Mapping) else [],
                )
            )
    return out


_VERSION = re.compile(r"v?(\d+\.\d+(?:\.\d+){0,2}(?:\.post\d+)?)(?:-cu\d{3})?")
"""A vLLM image tag: ``v0.8.5``, ``v0.10.1.1``, ``v0.8.5.post1``, ``v0.20.2-cu129``."""
_VLLM_REPOS = frozenset({"vllm-openai", "vllm-tpu", "vllm-openai-rocm"})
OTHER_PUBLISHERS = {"lmcache": "LMCache"}
"""Owners of a ``vllm-openai`` image whose tags are their own project's versions
(``lmcache/vllm-openai:v0.3.9`` is LMCache 0.3.9, built on some vLLM); a mirror
(``registry.example.com/mirror/vllm-openai:v0.8.5``) keeps vLLM's tags."""


def vllm_version(image: Any) -> str | None:
    """vLLM version from a ``vllm/vllm-openai:v0.8.5``-style image tag (``v0.10.1.1``,
    ``-cu129`` suffixes); None for another publisher's tag or a tag that is no release."""
    return _vllm_version(image) if isinstance(image, str) else None


@lru_cache(maxsize=8192)
def _vllm_version(image: str) -> str | None:
    if not vllm_tagged_image(image):
        return None
    tag = split_image(image)[1]
    match = _VERSION.fullmatch(tag or "")
    return match.group(1) if match else None


def ray_version(obj: K8sObject, images: Iterator[Any]) -> str | None:
    """Ray version from ``rayVersion`` or a ``rayproject/ray*:2.46.0-...`` image tag."""
    for path in (
        ("spec", "rayVersion"),
        ("spec", "rayClusterConfig", "rayVersion"),
        ("spec", "rayClusterSpec", "rayVersion"),
    ):
        value = dig(obj.raw, *path)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return str(value)
    for image in images:
        if isinstance(image, str) and split_image(image)[0].startswith("rayproject/ray"):
            match = re.search(r"(?:^|ray-)(\d+\.\d+\.\d+)", split_image(image)[1] or "")
            if match:
                return match.group(1)
    return None
