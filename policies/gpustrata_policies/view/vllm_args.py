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

import posixpath
import re
import shlex
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from typing import Any

import yaml

from gpustrata.catalog.vllm_release_types import Fact, FlagSet
from gpustrata.catalog.vllm_releases import accepted_flags, accepts_abbreviations, flag_releases
from gpustrata.core.unknown import UNKNOWN, UnknownInput, memoised
from gpustrata.core.yamlguard import YamlShapeError
from gpustrata.core.yamlio import safe_load
from gpustrata.vllm.flags import int_setting, parse_flags
from gpustrata_policies.index import EvaluationIndex, content_key
from gpustrata_policies.view.objects import ContainerRef, K8sObject, dig
from gpustrata_policies.view.shell import (
    MARK,
    container_env,
    k8s_expand,
    shell_commands,
    shell_script,
)

__all__ = [
    "API_SERVER_VENDOR_REPOS",
    "OTHER_PUBLISHERS",
    "SERVE_CONFIG_TYPE_SOURCE",
    "EngineArgs",
    "ServeConfig",
    "flags_starting_with",
    "hf_hub_cache",
    "image_publisher",
    "preset_engine",
    "ray_version",
    "serve_config",
    "split_image",
    "vllm_engine",
    "vllm_tagged_image",
    "vllm_version",
]

_API_SERVER_MODULES = ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server")
_CLI_MODULE = "vllm.entrypoints.cli.main"
"""``python -m vllm.entrypoints.cli.main serve``: the module behind the ``vllm`` command."""
_KAITO_LAUNCHER = "/workspace/vllm/inference_api.py"
"""KAITO's vLLM wrapper in its ``kaito-base`` image (kaito-project/kaito@v0.12.0:
presets/workspace/inference/vllm/inference_api.py): it takes its ``--kaito-*`` flags and
hands the rest to vLLM's own argument parser, so they are vLLM's engine flags."""
_VLLM_REPO_PREFIX = "vllm-openai"
_VLLM_REPOS = frozenset({"vllm-tpu"})
"""Image repository names of the vLLM server besides ``vllm-openai*``."""
_SHELL_REF = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*")


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
    ray_start: str | None = None
    """The ``ray start`` command (``ray start --head``) the container's shell script runs
    before the vLLM server: the engine's process is on a node of a Ray cluster."""
    malformed: dict[str, str] = field(default_factory=dict)
    """Settings written as one argument with their value (``"--tensor-parallel-size 2"``
    in one list item): vLLM refuses the word (V013), so the setting is neither that value
    nor its default. Setting name -> the word as written; :attr:`values` holds the word."""

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
        if tok == "-m" and tokens[i + 1 : i + 3] == [_CLI_MODULE, "serve"]:
            return tokens[i + 3 :]
        if tok == _KAITO_LAUNCHER and i and tokens[i - 1].rsplit("/", 1)[-1].startswith("python"):
            return [t for t in tokens[i + 1 :] if not t.startswith("--kaito-")]
    return None


_NAMES_VLLM = re.compile(r"(?:^|[\s;&|(`'\"])vllm(?=[\s;&|)`'\"]|$)|\bvllm\.entrypoints\b")
"""``vllm`` as a command word or the ``vllm.entrypoints`` module; not a path such as
``/vllm-workspace/examples/...`` (a Ray worker script in the vLLM image)."""


def _launch_flags(
    container: ContainerRef, command: list[str], argv: list[str]
) -> tuple[list[str] | None, str | None]:
    """(the flags after the vLLM entrypoint or None, the ``ray start`` command run before
    it or None) of a container's command line, through Kubernetes' ``$(VAR)`` expansion
    and, for ``sh -c`` / ``bash -exc`` scripts, the shell's
    (:mod:`gpustrata_policies.view.shell`). Values the manifest does not state stay
    :data:`~gpustrata_policies.view.shell.MARK`."""
    env, open_env = container_env(container.env(), container.raw.get("envFrom"))
    expanded = [k8s_expand(tok, env, open_env) for tok in argv]
    script = shell_script(expanded)
    if script is not None:
        text, operands = script
        variables = dict(env)
        positional = operands[1:] if operands else None  # operands[0] is $0
        ray_start = None
        for words in shell_commands(text, variables, positional):
            found = _vllm_invocation(words)
            if found is not None:
                return found, ray_start
            if len(words) > 1 and words[0].rsplit("/", 1)[-1] == "ray" and words[1] == "start":
                head = [w for w in words[2:] if w == "--head"]
                ray_start = " ".join(["ray", "start", *head])
        if _NAMES_VLLM.search(text):  # never silent about an engine it could not read
            raise UnknownInput(
                f"the vLLM command line in the shell script of {container.label} (the script"
                " names vllm as a command or module, but no `vllm serve` / `python -m"
                " vllm.entrypoints...` command could be read from it)"
            )
        return None, None
    # No shell: `${VAR}` / `$VAR` reach the program as written; read them as unknown.
    expanded = [_SHELL_REF.sub(MARK, tok) if "$" in tok else tok for tok in expanded]
    flags = _vllm_invocation(expanded)
    if flags is None and not command and _runs_api_server(container.image):
        flags = expanded  # the image's entrypoint is the API server: args are the flags
    if flags is None and not argv and _runs_api_server(container.image):
        flags = []
    return flags, None


def _mark_unknowns(engine: EngineArgs, flags: list[str]) -> None:
    """Values known only where the container runs become UNKNOWN (never read as text);
    an unknown word where a flag may stand means flags may come from elsewhere."""
    for key, value in list(engine.values.items()):
        if isinstance(value, str) and MARK in value:
            engine.values[key] = UNKNOWN
        if MARK in key:
            del engine.values[key]
            engine.complete = False
    if engine.model is not None and MARK in engine.model:
        engine.model = None
    for index, tok in enumerate(flags):
        if MARK not in tok:
            continue
        before = flags[index - 1] if index else ""
        if before.startswith("-") and "=" not in before:
            continue  # the value of the flag before it
        if tok.startswith("-") and MARK not in tok.split("=", 1)[0]:
            continue  # --flag=<unknown>
        engine.complete = False  # an unknown word where flags may stand
    engine.written[:] = [w for w in engine.written if MARK not in w]


def _mark_malformed(engine: EngineArgs) -> None:
    """A flag and its value in one argument (``"--tensor-parallel-size 2"``): argparse
    takes a word with a space for a positional and vLLM stops (V013). Another rule must not
    read the setting as unset (its default): the setting's value becomes the word, which
    no reader takes for a number."""
    for key in [k for k in engine.values if any(c.isspace() for c in k)]:
        base = key.split()[0]
        if base and base not in engine.values:
            word = "--" + key.replace("_", "-")
            engine.values[base] = word
            engine.malformed[base] = word
        del engine.values[key]


def _release_images(container: ContainerRef) -> tuple[Any, ...]:
    """The images whose vLLM release parses *container*'s flags: its own, or where the
    controller's installation sets it and its defaults differ (a KubeAI Model without
    ``spec.image``), each default image it may run
    (:func:`~gpustrata_policies.view.kubeai.kubeai_default_images`)."""
    if container.image is UNKNOWN:
        # Imported here: the KubeAI reader is the engine view's, read only for its Models.
        from gpustrata_policies.view.kubeai import kubeai_default_images

        found = kubeai_default_images(container.pod.obj)
        if found:
            return found
    return (container.image,)


def _resolve_abbreviations(engine: EngineArgs, images: tuple[Any, ...]) -> None:
    """A unique prefix of a long option (``--max-model 4096``) names the option, where
    the vLLM release of each of *images* (the image, or every one it may be) takes
    prefixes (the catalogue's ``abbreviations``, read from the release's parser) and every
    read release around each resolves it the same way. Where that is not known, a prefix
    of some flag makes the engine incomplete."""
    readings = [_release_parser(vllm_version(image)) for image in images]
    takes = all(a is not None and a.value for a, _ in readings)
    parsed = [ss for _, ss in readings]
    sets = tuple(s for ss in parsed if ss for s in ss) if all(parsed) else None
    for written in list(engine.written):
        if not written.startswith("--"):
            continue
        name = "--" + written[2:].replace("_", "-")
        key = name[2:].replace("-", "_")
        if key.startswith("no_"):
            continue
        if key not in engine.values or (
            all(name in s.flags for s in sets) if sets else name in _every_flag()
        ):
            continue
        if sets and takes:
            found = {_unique_prefix(name, s.flags) for s in sets}
            if len(found) == 1 and (full := found.pop()) is not None:
                engine.values.setdefault(full[2:].replace("-", "_"), engine.values.pop(key))
        elif flags_starting_with(name, _every_flag(), 1):
            engine.complete = False  # may name another setting; the release's rule is unknown


@lru_cache(maxsize=256)  # a few releases; each engine of one asks the catalogue again
def _release_parser(version: str | None) -> tuple[Fact | None, tuple[FlagSet, ...] | None]:
    """(does *version*'s parser take abbreviations, the flag sets that judge it), from
    the release catalogue; (None, None) for an unnamed release."""
    if not version:
        return None, None
    return accepts_abbreviations(version), accepted_flags(version)


def _unique_prefix(name: str, flags: frozenset[str]) -> str | None:
    """The one long option of *flags* that *name* abbreviates, else None."""
    if name in flags or not name.startswith("--"):
        return None
    matches = flags_starting_with(name, flags, 2)
    return matches[0] if len(matches) == 1 else None


def flags_starting_with(prefix: str, flags: frozenset[str], most: int) -> list[str]:
    """Up to *most* of *flags* that start with *prefix*, in sorted order (one bisect into
    the sorted flags, cached per flag set): abbreviation look-ups and V013's suggestions."""
    ordered = _sorted_flags(flags)
    out: list[str] = []
    for flag in islice(ordered, bisect_left(ordered, prefix), None):
        if not flag.startswith(prefix) or len(out) == most:
            break
        out.append(flag)
    return out


@lru_cache(maxsize=64)  # the catalogue's flag sets: one per read release, and their union
def _sorted_flags(flags: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(flags))


@lru_cache(maxsize=1)
def _every_flag() -> frozenset[str]:
    """The long options any read release accepts."""
    return frozenset(f for v in flag_releases() for s in accepted_flags(v) or () for f in s.flags)


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


IMAGE_HOME = {"vllm/vllm-openai": "/root", "rayproject/ray-llm": "/home/ray"}
"""The home directory of the user each known image runs as (where ``~`` points)."""


def hf_hub_cache(c: ContainerRef, download_dir: object = None) -> str | None:
    """Where vLLM keeps Hugging Face Hub downloads in container *c*: ``--download-dir``
    (*download_dir*, when a string), else huggingface_hub's HF_HUB_CACHE, $HF_HOME/hub,
    or ~/.cache/huggingface/hub of the container's HOME or of the image's known user;
    None when no home is known (an image not in :data:`IMAGE_HOME` without HOME)."""
    if isinstance(download_dir, str):
        return download_dir
    env = c.literal_env()
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"]
    if env.get("HF_HOME"):
        return posixpath.join(env["HF_HOME"], "hub")
    home = env.get("HOME")
    if home is None and isinstance(c.image, str):
        home = IMAGE_HOME.get(split_image(c.image)[0])
    return posixpath.join(home, ".cache/huggingface/hub") if home else None


MOVING_TAG_WORDS = frozenset(
    {
        "latest",
        "nightly",
        "main",
        "master",
        "stable",
        "dev",
        "devel",
        "edge",
        "canary",
        "gptoss",
        "head",
        "rolling",
        "preview",
        "unstable",
    }
)
"""Tag words that name a branch or a channel, not a release: the image behind them is
replaced by every push (``vllm/vllm-openai:nightly``, ``:gptoss``, ``ray-llm:nightly-py311``)."""
_RELEASE_MARK = re.compile(r"\d+\.\d+|\d{6,}|(?<![a-z])[0-9a-f]{12,40}(?![a-z])")
"""What pins a tag to one build: a version (``2.46.0``), a date (``20250312``), a commit."""


def moving_tag(tag: str | None) -> str | None:
    """The moving word of an image tag (``latest``, ``nightly-cu128`` -> ``nightly``), or
    None for a tag that names a release, a date or a commit. No tag is ``latest``."""
    if tag is None or tag == "":
        return "latest"
    lowered = tag.lower()
    if _RELEASE_MARK.search(lowered):
        return None
    for word in re.split(r"[-_.+]", lowered):
        if word in MOVING_TAG_WORDS:
            return word
    return None


def _is_vllm_image(image: Any) -> bool:
    """An image that runs the vLLM server: any owner's repository named ``vllm-openai`` or
    a variant of it (``vllm-openai-rocm``, ``vllm-openai-cpu``, ``vllm-openai-ubi9``), or
    ``vllm-tpu``; their entrypoint is the OpenAI API server."""
    if not isinstance(image, str):
        return False
    name = split_image(image)[0].rsplit("/", 1)[-1]
    return name.startswith(_VLLM_REPO_PREFIX) or name in _VLLM_REPOS


API_SERVER_VENDOR_REPOS = ("registry.redhat.io/rhaiis/vllm-",)
"""Vendor builds of vLLM whose entrypoint is the OpenAI API server, so ``args`` are its flags,
as the vendor documents (their tags are the vendor's versions, not vLLM's): Red Hat AI
Inference Server runs ``registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.1.0 --model M
--tensor-parallel-size 2`` (https://docs.redhat.com/zh-cn/documentation/red_hat_ai_inference_server/3.1/html-single/vllm_server_arguments/index,
chapter 1; https://access.redhat.com/node/7118070 for 3.0.0)."""


def _runs_api_server(image: Any) -> bool:
    """Is the image's entrypoint vLLM's OpenAI API server (a ``vllm-openai*`` image, or a
    vendor build of :data:`API_SERVER_VENDOR_REPOS`)?"""
    if _is_vllm_image(image):
        return True
    return isinstance(image, str) and split_image(image)[0].startswith(API_SERVER_VENDOR_REPOS)


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


def vllm_engine(container: ContainerRef, index: EvaluationIndex | None = None) -> EngineArgs | None:
    """vLLM engine settings of a container that runs the vLLM server, else ``None``.

    Read once per container (kept in ``container.memo``; the rules do not change it):
    a dozen rules ask for the same container's engine. With the evaluation's *index*,
    containers whose inputs (label, image, command, args, env, envFrom) are equal share
    one read (:func:`~gpustrata_policies.index.content_key`): the engine is a function of
    them alone.
    """
    if index is None or "vllm_engine" in container.memo:
        return memoised(container.memo, "vllm_engine", _read_engine, container)
    raw = container.raw
    key = content_key(
        container.label,
        raw.get("image"),
        raw.get("command"),
        raw.get("args"),
        raw.get("env"),
        raw.get("envFrom"),
    )
    if key is None:  # a value unknown until deployment: read on its own
        return memoised(container.memo, "vllm_engine", _read_engine, container)
    return memoised(
        container.memo,
        "vllm_engine",
        lambda: index.derived(("vllm-engine", key), lambda: _read_engine(container)),
    )


def _read_engine(container: ContainerRef) -> EngineArgs | None:
    raw = container.raw
    command = raw.get("command")
    args = raw.get("args")
    if command is UNKNOWN or args is UNKNOWN:
        raise UnknownInput(f"command/args of {container.label}")
    command = [str(c) for c in command] if isinstance(command, list) else []
    args = [str(a) for a in args] if isinstance(args, list) else []
    if any(
        item is UNKNOWN
        for part in (raw.get("command"), raw.get("args"))
        if isinstance(part, list)  # `args: 5` is no list: read as none, as above
        for item in part
    ):
        raise UnknownInput(f"command/args of {container.label}")  # an item, not just the list
    env = container.literal_env()
    argv = command + args
    flags, ray_start = _launch_flags(container, command, argv)
    if flags is None:
        return None
    complete = True
    if "$@" in flags or '"$@"' in flags:
        complete = False
        flags = [f for f in flags if f not in {"$@", '"$@"'}]
    engine = EngineArgs(source=container.label, complete=complete, ray_start=ray_start)
    engine.model = parse_flags(flags, engine.values, engine.written)
    extra = env.get("VLLM_ADDITIONAL_ARGS")
    if extra:
        parse_flags(_tokens(extra), engine.values, engine.written)
    if isinstance(engine.values.get("model"), str):
        engine.model = engine.values["model"]
    _mark_unknowns(engine, flags)
    _mark_malformed(engine)
    _resolve_abbreviations(engine, _release_images(container))
    if engine.values.get("port") is UNKNOWN:
        engine.port = None  # stated where the container runs
    else:
        port = engine.get_int("port")
        engine.port = port if port is not None else 8000
    return engine


def preset_engine(source: str, script: str, env: Mapping[str, str]) -> EngineArgs | None:
    """The engine of a command line a controller runs from its preset rather than the
    manifest (KServe's ``vllm serve /mnt/models --tensor-parallel-size 2
    ${VLLM_ADDITIONAL_ARGS}``), read with the one shell grammar
    (:func:`~gpustrata_policies.view.shell.shell_commands`) and *env* as its variables;
    None when the script runs no vLLM server."""
    for words in shell_commands(script, dict(env), None):
        flags = _vllm_invocation(words)
        if flags is not None:
            engine = EngineArgs(source=source)
            engine.model = parse_flags(flags, engine.values, engine.written)
            _mark_unknowns(engine, flags)
            return engine
    return None


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
def serve_config_data(text: str) -> Any:
    """A ``serveConfigV2`` string read as YAML (:func:`~gpustrata.core.yamlio.safe_load`,
    its guards and errors), once per distinct string for every reader: the structured
    view here, the HTTP options (:mod:`.endpoints`) and G001's request timeout, which
    parsed it per RayService (631 parses of 36 distinct strings, 0.21 s of a JSON check
    of the 5,000-object corpus, issue 35). Shared: callers must not change the result."""
    return safe_load(text)


@lru_cache(maxsize=256)
def _parse_serve_config(text: str) -> ServeConfig:
    """Parse once per distinct string (callers treat the result as read-only)."""
    try:
        data = serve_config_data(text)
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
        ("spec", "template", "spec", "rayVersion"),  # AIBrix RayClusterFleet
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
