"""Load a stack from a Pulumi stack file or from Pulumi config, with one-line errors.

A stack lives under the structured Pulumi config key ``gpustrata:stack`` in
``stacks/Pulumi.<env>.yaml``. Every problem is reported as
``file:line: gpustrata:stack.path: bad value ...; fix`` and nothing is returned
(so nothing can be half applied) until the whole stack is valid.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from gpustrata.catalog.charts import gpu_cluster_values
from gpustrata.core.errors import Problem, StackError
from gpustrata.core.textfiles import TextFileError, read_text_file
from gpustrata.core.yamlio import error_line
from gpustrata.spec.fields import SECRET_FLAG, is_model_path
from gpustrata.spec.serving import ModelSpec
from gpustrata.spec.stack import StackSpec

CONFIG_KEY = "gpustrata:stack"
SECRET_CONFIG_KEY = "gpustrata:hfToken"
"""The Hugging Face token, only ever as a Pulumi secret (``secure:`` in the stack file)."""
_MAX_VALUE_CHARS = 60


def stack_file(stack: str, stacks_dir: str | Path = "stacks") -> Path:
    """The stack file Pulumi reads for ``stack`` (``stackConfigDir: stacks``)."""
    return Path(stacks_dir) / f"Pulumi.{stack}.yaml"


def load_stack_file(path: str | Path) -> StackSpec:
    """Read and validate the stack in a Pulumi stack file.

    Raises :class:`StackError` naming the file, line, config path, value and fix.
    """
    return read_stack_file(path)[0]


def read_stack_file(path: str | Path) -> tuple[StackSpec, dict[str, Any]]:
    """Like :func:`load_stack_file`, also returning the raw `gpustrata:stack` document
    (what Pulumi hands the program as config)."""
    file = str(path)
    root, document = compose_document(_read(Path(path)), file)
    if not isinstance(document, dict) or not isinstance(document.get("config"), dict):
        config_line = _key_line(root, "config") or 1
        raise StackError(
            [
                Problem(
                    "config",
                    "missing; a Pulumi stack file has a top-level 'config:' map",
                    config_line,
                )
            ],
            file,
        )
    if CONFIG_KEY not in document["config"]:
        near = difflib.get_close_matches(CONFIG_KEY, [str(k) for k in document["config"]], 1)
        hint = f"; did you mean '{near[0]}'?" if near else f"; add '{CONFIG_KEY}:' under config"
        at = _key_line(_child(root, "config"), near[0]) if near else _key_line(root, "config")
        raise StackError([Problem(f"config.{CONFIG_KEY}", "missing" + hint, at)], file)
    token = document["config"].get(SECRET_CONFIG_KEY)
    if token is not None and not (isinstance(token, dict) and set(token) == {"secure"}):
        key_line = _key_line(_child(root, "config"), SECRET_CONFIG_KEY)
        raise StackError(
            [
                Problem(
                    f"config.{SECRET_CONFIG_KEY}",
                    "is stored in plaintext in the stack file, readable by anyone with the "
                    "repository (the value is not shown); remove it and run `pulumi config "
                    f"set --secret {SECRET_CONFIG_KEY}` so that Pulumi encrypts it",
                    key_line,
                )
            ],
            file,
        )
    lines = LineIndex(root, ("config", CONFIG_KEY))
    stack = document["config"][CONFIG_KEY]
    return validate_stack(stack, file=file, lines=lines), stack


def compose_document(text: str, file: str) -> tuple[yaml.Node | None, Any]:
    """The composed node tree (for line numbers) and the document of YAML *text*, with the
    guards of :mod:`gpustrata.core.yamlguard`; a :class:`StackError` naming *file* and the
    line otherwise (stack files and cluster profiles)."""
    from gpustrata.core.yamlguard import YamlShapeError, check_node, check_unique_keys

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if root is not None:
            check_node(root)  # alias loops and alias bombs, before anything walks it
            check_unique_keys(root)
        document = yaml.safe_load(text)
    except YamlShapeError as exc:
        raise StackError([Problem("", f"cannot be used: {exc}", exc.line)], file) from None
    except yaml.reader.ReaderError as exc:  # a control character YAML does not allow
        line = error_line(exc, text)
        raise StackError(
            [
                Problem(
                    "",
                    f"holds the control character U+{exc.character:04X}, which YAML does not "
                    "allow; remove it",
                    line,
                )
            ],
            file,
        ) from None
    except yaml.YAMLError as exc:
        line = error_line(exc, text)
        problem = getattr(exc, "problem", None) or str(exc)
        raise StackError(
            [Problem("", f"is not valid YAML ({problem}); fix the syntax", line)], file
        ) from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise StackError(
            [Problem("", "is nested too deeply to read; the file is a few levels deep")],
            file,
        ) from None
    return root, document


def validate_stack(
    value: Any, *, file: str | None = None, lines: LineIndex | None = None
) -> StackSpec:
    """Validate a stack config value (already parsed) into a :class:`StackSpec`."""
    if not isinstance(value, dict):
        raise StackError(
            [
                Problem(
                    CONFIG_KEY,
                    f"{_show(value)} is not a map; write the stack as a YAML map",
                    lines.line(CONFIG_KEY) if lines else None,
                )
            ],
            file,
        )
    try:
        spec = StackSpec.model_validate(value)
    except ValidationError as exc:
        raise StackError(validation_problems(exc, STACK_SCHEMA, lines), file) from None
    problems = reference_problems(spec)
    if problems:
        raise StackError(
            [Problem(p.path, p.message, lines.line(p.path) if lines else None) for p in problems],
            file,
        )
    return spec


def reference_problems(spec: StackSpec) -> list[Problem]:
    """Cross-references pydantic cannot see: unique names, pools that exist, KubeRay on."""
    problems: list[Problem] = []
    pools = [p.name for p in spec.node_pools]
    for what, names in (("node_pools", pools), ("models", [m.name for m in spec.models])):
        seen: set[str] = set()
        for i, name in enumerate(names):
            if name in seen:
                problems.append(
                    Problem(
                        f"{CONFIG_KEY}.{what}[{i}].name",
                        f"'{name}' is used twice; give each entry a unique name",
                    )
                )
            seen.add(name)
    problems += _dra_problems(spec)
    problems += _routing_problems(spec)
    if spec.gpu_operator.service_monitor and not spec.monitoring.enabled:
        problems.append(
            Problem(
                f"{CONFIG_KEY}.gpu_operator.service_monitor",
                "true needs the Prometheus Operator's monitoring.coreos.com CRDs, which "
                "nothing in the stack installs; set monitoring.mode: install (or existing), "
                "or remove service_monitor",
            )
        )
    for i, model in enumerate(spec.models):
        if model.pool not in pools:
            choices = ", ".join(repr(p) for p in pools)
            problems.append(
                Problem(
                    f"{CONFIG_KEY}.models[{i}].pool",
                    f"'{model.pool}' is not a pool in node_pools; use one of {choices}",
                )
            )
        problems += _serving_dependencies(spec, i, model)
        problems += _local_model_problems(i, model)
        if model.runtime == "rayservice" and not spec.kuberay.enabled:
            problems.append(
                Problem(
                    f"{CONFIG_KEY}.models[{i}].runtime",
                    "'rayservice' needs the KubeRay operator; set kuberay.enabled: true "
                    "or use runtime 'deployment'",
                )
            )
    return problems


def _local_model_problems(i: int, model: ModelSpec) -> list[Problem]:
    """A model named by a path in the project (its config.json sizes it) is served from
    where its weights are at run time: an s3 URI, or a folder on a PVC. The Pods cannot
    read the project's files, so ``vllm serve acme-13b/config.json`` would never start."""
    if not is_model_path(model.model):
        return []
    w = model.weights
    if (w.source == "s3" and w.uri) or (w.source == "pvc" and w.pvc_name and w.uri):
        return []
    return [
        Problem(
            f"{CONFIG_KEY}.models[{i}].weights",
            f"model {model.model[:80]!r} is a path in the project, which the engine Pods "
            "cannot read; say where the weights are when it runs: weights.source: s3 with "
            "weights.uri: s3://BUCKET/PREFIX/, or weights.source: pvc with weights.pvc_name "
            "and weights.uri (the folder on the volume); or use the Hugging Face id",
        )
    ]


def _serving_dependencies(spec: StackSpec, i: int, model: ModelSpec) -> list[Problem]:
    """What a model's objects need in the cluster: the CRDs of a ServiceMonitor or a KEDA
    ScaledObject and the Prometheus it queries, a volume its replicas can share."""
    at = f"{CONFIG_KEY}.models[{i}]"
    problems: list[Problem] = []
    if model.service_monitor and not spec.monitoring.enabled:
        problems.append(
            Problem(
                f"{at}.service_monitor",
                "true needs the Prometheus Operator's monitoring.coreos.com CRDs, which "
                "nothing in the stack installs (the API server would answer 'no matches for "
                "kind ServiceMonitor'); set monitoring.mode: install (or existing), or "
                "remove service_monitor",
            )
        )
    if model.autoscaling.kind == "keda":
        if not (spec.keda.enabled or spec.keda.installed):
            problems.append(
                Problem(
                    f"{at}.autoscaling.kind",
                    "'keda' needs KEDA's keda.sh CRDs and operator, which nothing installs; "
                    "set keda.enabled: true (or keda.installed: true if the cluster runs it)",
                )
            )
        if spec.monitoring.url is None:
            problems.append(
                Problem(
                    f"{at}.autoscaling.kind",
                    "'keda' scales on vllm:num_requests_waiting from Prometheus, and the "
                    "stack has none; set monitoring.mode: install (or existing with "
                    "prometheus_url)",
                )
            )
    weights = model.weights
    most = max(model.replicas, model.autoscaling.max_replicas)
    if weights.source == "pvc" and weights.cache_size_gib > 0 and most > 1:
        problems.append(
            Problem(
                f"{at}.weights.cache_size_gib",
                f"{weights.cache_size_gib} asks the stack for a ReadWriteOnce EBS volume, "
                f"which attaches to one node, but up to {most} replicas spread over nodes "
                "(Multi-Attach error); use weights.source: s3 (each replica streams the "
                "weights), or a ReadWriteMany claim you create (EFS) named in pvc_name with "
                "cache_size_gib: 0",
            )
        )
    if weights.source == "pvc" and not weights.pvc_name:
        problems.append(
            Problem(
                f"{at}.weights.pvc_name",
                "is missing for source pvc; name the PersistentVolumeClaim (created by the "
                "stack when cache_size_gib > 0, else one that exists in the namespace)",
            )
        )
    return problems


def _routing_problems(spec: StackSpec) -> list[Problem]:
    """An inference gateway the stack does not install needs a cluster that has one: a
    created cluster has no Gateway API or GAIE CRDs, so its Gateway, InferencePool and
    HTTPRoute would be refused ('no matches for kind')."""
    routed = any(m.routing.mode == "inference-gateway" for m in spec.models)
    if not routed or spec.inference_gateway.install or spec.cluster.mode != "create":
        return []
    return [
        Problem(
            f"{CONFIG_KEY}.inference_gateway.install",
            "false on a cluster the stack creates: nothing else installs the Gateway API and "
            "Inference Extension CRDs or a gateway controller, so the Gateway, InferencePool "
            "and HTTPRoute would be refused; set install: true (or routing.mode: service)",
        )
    ]


DRA_MIN_KUBERNETES = (1, 34)
"""resource.k8s.io/v1 (DRA GA) is served from Kubernetes 1.34."""


def _dra_problems(spec: StackSpec) -> list[Problem]:
    """A DRA pool needs a cluster that serves resource.k8s.io/v1; the GPU Operator's own
    DRA stack needs an operator release that has one, and DRA on every pool."""
    problems = _operator_dra_problems(spec)
    version = tuple(int(p) for p in spec.cluster.kubernetes_version.split("."))
    if version >= DRA_MIN_KUBERNETES:
        return problems
    return problems + [
        Problem(
            f"{CONFIG_KEY}.node_pools[{i}].gpu_allocation",
            f"'dra' needs Kubernetes 1.34 or later (resource.k8s.io/v1), but "
            f"cluster.kubernetes_version is {spec.cluster.kubernetes_version}; raise "
            "kubernetes_version to 1.34 or use gpu_allocation 'device-plugin'",
        )
        for i, pool in enumerate(spec.node_pools)
        if pool.gpu_allocation == "dra"
    ]


def _operator_dra_problems(spec: StackSpec) -> list[Problem]:
    """``dra.driver: gpu-operator``: the operator installs a GPUCluster instead of its
    ClusterPolicy, so it must be enabled at a release that can (v26.7.0+, catalogued), and
    no pool may rely on the device plugin the ClusterPolicy would have run."""
    if spec.dra.driver != "gpu-operator":
        return []
    at = f"{CONFIG_KEY}.dra.driver"
    operator = spec.gpu_operator
    if not operator.enabled or operator.chart_version is None:
        return [
            Problem(
                at,
                "'gpu-operator' needs the GPU Operator the stack installs, but "
                "gpu_operator.enabled is false; enable it (chart_version v26.7.0 or later) "
                "or use dra.driver 'kubernetes-sigs-chart'",
            )
        ]
    problems = []
    if gpu_cluster_values(operator.chart_version) is None:
        problems.append(
            Problem(
                at,
                f"'gpu-operator' needs a GPU Operator release with its own DRA stack "
                f"(gpuCluster.deployCR, v26.7.0 and later), but gpu_operator.chart_version is "
                f"{operator.chart_version}; raise it to v26.7.0 or use dra.driver "
                "'kubernetes-sigs-chart'",
            )
        )
    problems += [
        Problem(
            f"{CONFIG_KEY}.node_pools[{i}].gpu_allocation",
            f"is '{pool.gpu_allocation}', but dra.driver 'gpu-operator' replaces the "
            "operator's ClusterPolicy (its device plugin) with a GPUCluster: no device plugin "
            "would advertise this pool's GPUs; set gpu_allocation 'dra' on every pool, or use "
            "dra.driver 'kubernetes-sigs-chart'",
        )
        for i, pool in enumerate(spec.node_pools)
        if pool.gpu_allocation != "dra"
    ]
    return problems


# --- pydantic error -> one line -------------------------------------------------------------


@dataclass(frozen=True)
class Schema:
    """What a config document is validated against: the pydantic model, the config path
    its errors start with, and the command that prints its JSON Schema."""

    model: type[BaseModel]
    prefix: str
    command: str


STACK_SCHEMA = Schema(StackSpec, CONFIG_KEY, "gpustrata schema")


def validation_problems(
    exc: ValidationError, schema: Schema, lines: LineIndex | None
) -> list[Problem]:
    """One :class:`Problem` per invalid config path of *exc* (the first error of each),
    quoting the value (never a secret-like one) and ending with the fix."""
    return _dedupe(_problem(err, lines, schema) for err in exc.errors())


def _problem(err: ErrorDetails, lines: LineIndex | None, schema: Schema = STACK_SCHEMA) -> Problem:
    loc = _clean_loc(err["loc"], schema.model)
    path = _path(loc, schema.prefix)
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    field = _field_at(loc, schema.model)
    shown = _SECRET_SHOWN if _secret_loc(loc) else _show(value)
    if kind == "extra_forbidden":
        key = str(loc[-1])
        message = f"unknown key {_show(key)}; " + _nearest_key(
            key, _model_at(loc[:-1], schema.model)
        )
    elif kind == "missing":
        message = f"required key '{loc[-1]}' is missing; add it"
        if field is not None and field.description:
            message += f" ({_first_sentence(field.description)})"
    elif kind in ("less_than_equal", "less_than"):
        bound = ctx.get("le", ctx.get("lt"))
        message = f"{shown} is above {bound}; {_fix(field, schema.command)}"
    elif kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        word = "below" if kind == "greater_than_equal" else "not above"
        message = f"{shown} is {word} {bound}; {_fix(field, schema.command)}"
    elif kind == "literal_error" or kind == "enum":
        message = f"{shown} is not one of {ctx.get('expected')}; use one of them"
    elif kind == "string_pattern_mismatch":
        message = f"{shown} is not in the expected form; {_fix(field, schema.command)}"
    elif kind in ("too_short", "string_too_short"):
        message = f"{shown} is too short; {_fix(field, schema.command)}"
    elif kind in ("too_long", "string_too_long"):
        message = f"{shown} is too long; {_fix(field, schema.command)}"
    elif kind.endswith("_type") or kind.endswith("_parsing"):
        expected = _TYPE_WORDS.get(kind.split("_")[0], kind.split("_")[0])
        message = f"{shown} is not {expected}; {_fix(field, schema.command)}"
    elif kind == "value_error":
        message = str(ctx.get("error", err["msg"]))
    else:
        message = f"{shown}: {err['msg']}; {_fix(field, schema.command)}"
    return Problem(path, message, lines.line(path) if lines else None)


_TYPE_WORDS = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "string": "a string",
    "dict": "a map",
    "list": "a list",
    "model": "a map",
    "literal": "an accepted value",
}


def _dedupe(problems: Iterator[Problem]) -> list[Problem]:
    out: dict[str, Problem] = {}
    for problem in problems:
        out.setdefault(problem.path, problem)
    return list(out.values())


def _clean_loc(loc: Sequence[int | str], model: type[BaseModel]) -> tuple[int | str, ...]:
    """Drop the union-member tags pydantic adds (``'str'``, ``'function-after[...]'``)."""
    out: list[int | str] = []
    for part in loc:
        if (
            isinstance(part, str)
            and _model_at(tuple(out), model) is None
            and _is_tag(part, out, model)
        ):
            continue
        out.append(part)
    return tuple(out)


def _is_tag(part: str, parent: list[int | str], model: type[BaseModel]) -> bool:
    if part in ("str", "int", "float", "bool", "none") or "[" in part:
        # A dict key could be literally "str"; only treat it as a tag under a union value.
        return _annotation_at(tuple(parent), model) is not None and _is_union(
            _annotation_at(tuple(parent), model)
        )
    return False


def _path(loc: Sequence[int | str], prefix: str = CONFIG_KEY) -> str:
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else _key_part(part)
    return out


def _key_part(key: str) -> str:
    """``.key`` for a plain key, else ``['key']`` (quoted, shortened: keys come from users)."""
    if key.replace("_", "").isalnum() and len(key) <= _MAX_VALUE_CHARS:
        return f".{key}"
    return f"[{_show(key)}]"


_SECRET_SHOWN = "the value (not shown: it may be a secret)"


def _secret_loc(loc: Sequence[int | str]) -> bool:
    """A place where a misplaced credential may sit: its value is never quoted back."""
    return any(
        part == "hf_token" or (isinstance(part, str) and SECRET_FLAG.search(part.lower()))
        for part in loc
    )


def _show(value: Any) -> str:
    if isinstance(value, str):
        text = repr(value)
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, dict):
        text = "a map"
    elif isinstance(value, list):
        text = "a list"
    else:
        text = str(value)
    if len(text) > _MAX_VALUE_CHARS:
        text = text[: _MAX_VALUE_CHARS - 3] + "..."
    return text


def _fix(field: FieldInfo | None, command: str = "gpustrata schema") -> str:
    if field is None:
        return f"see `{command}` for the accepted values"
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("fix"), str):
        return str(extra["fix"])
    if field.examples:
        return f"use a value such as {_show(field.examples[0])}"
    if field.description:
        return f"expected: {_first_sentence(field.description)}"
    return f"see `{command}` for the accepted values"


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".")


def _nearest_key(key: str, model: type[BaseModel] | None) -> str:
    if model is None:
        return "remove it"
    valid = list(model.model_fields)
    near = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if near:
        return f"did you mean '{near[0]}'?"
    return "valid keys are " + ", ".join(valid)


# --- walking the spec types along a config path ---------------------------------------------


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _strip(annotation: Any) -> Any:
    """Unwrap Annotated and Optional[X] down to X."""
    while True:
        origin = get_origin(annotation)
        if origin is typing.Annotated:
            annotation = get_args(annotation)[0]
        elif _is_union(annotation):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _annotation_at(loc: Sequence[int | str], model: type[BaseModel] = StackSpec) -> Any:
    annotation: Any = model
    for part in loc:
        annotation = _strip(annotation)
        origin = get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            info = annotation.model_fields.get(str(part))
            if info is None:
                return None
            annotation = info.annotation
        elif origin in (list, tuple) and isinstance(part, int):
            annotation = get_args(annotation)[0]
        elif origin is dict:
            annotation = get_args(annotation)[1]
        else:
            return None
    return annotation


def _model_at(
    loc: Sequence[int | str], root: type[BaseModel] = StackSpec
) -> type[BaseModel] | None:
    annotation = _strip(_annotation_at(loc, root))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _field_at(loc: Sequence[int | str], root: type[BaseModel] = StackSpec) -> FieldInfo | None:
    if not loc or not isinstance(loc[-1], str):
        return None
    model = _model_at(loc[:-1], root)
    return model.model_fields.get(loc[-1]) if model else None


class LineIndex:
    """Maps config paths to line numbers in the YAML file, from the composed node tree:
    the node at the mapping keys *prefix* is the config path *root_path*."""

    def __init__(
        self, root: yaml.Node | None, prefix: Sequence[str], root_path: str = CONFIG_KEY
    ) -> None:
        self._lines: dict[str, int] = {}
        node = root
        for key in prefix:
            node = _child(node, key)
        if node is not None:
            self._walk(node, root_path)

    def _walk(self, root: yaml.Node, root_path: str) -> None:
        # Iterative: a deeply nested file must not exhaust the interpreter's stack.
        todo: list[tuple[yaml.Node, str, int]] = [(root, root_path, root.start_mark.line + 1)]
        while todo:
            node, path, line = todo.pop()
            self._lines[path] = line  # a map value is found at its key's line
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    child = path + _key_part(str(key_node.value))
                    todo.append((value_node, child, key_node.start_mark.line + 1))
            elif isinstance(node, yaml.SequenceNode):
                for i, item in enumerate(node.value):
                    todo.append((item, f"{path}[{i}]", item.start_mark.line + 1))

    def line(self, path: str) -> int | None:
        """Line of ``path``, or of its nearest ancestor present in the file."""
        while path:
            if path in self._lines:
                return self._lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            if cut <= 0:
                return None
            path = path[:cut]
        return None


def _key_line(node: yaml.Node | None, key: str) -> int | None:
    """The line of *key* in the mapping *node*."""
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            if key_node.value == key:
                return int(key_node.start_mark.line) + 1
    return None


def _read(path: Path) -> str:
    """The stack file's text: a regular UTF-8 file without NUL bytes (a FIFO or
    ``/dev/zero`` is refused unread), else a :class:`StackError` naming the line."""
    try:
        return read_text_file(path)
    except TextFileError as exc:
        if not path.exists() and not path.is_symlink():
            exc.reason = "no such file; create it or pick a stack from stacks/"
        raise StackError([Problem("", exc.reason, exc.line)], str(path)) from None


_SECRET_WORDS = frozenset(
    {"secret", "secrets", "password", "passwd", "token", "tokens", "credential", "credentials"}
)
_SECRET_PAIRS = ("api-key", "apikey", "private-key", "access-key", "client-secret")


def secret_like_config_key(key: str) -> bool:
    """Does a Pulumi config key (``aws:secretKey``, ``gpustrata:apiKey``) name a credential?

    The name after the namespace, camelCase split into words: any word such as ``secret``,
    ``password`` or ``token``, or ``api-key``, ``access-key``, ``private-key``."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", key.rpartition(":")[2]).lower()
    name = name.replace("_", "-")
    return bool(_SECRET_WORDS & set(name.split("-"))) or any(p in name for p in _SECRET_PAIRS)


def plaintext_secret_warnings(path: str | Path) -> list[str]:
    """One warning per stack config key named like a credential whose value is not a
    Pulumi secret (``secure:``), naming the file and line, never the value.

    ``gpustrata:hfToken`` in plaintext is an error (:func:`read_stack_file`); other keys
    belong to other providers (``aws:secretKey``), so ``plan`` warns and goes on."""
    try:
        root = yaml.compose(read_text_file(Path(path)), Loader=yaml.SafeLoader)
    except (TextFileError, yaml.YAMLError, RecursionError):
        return []
    config = _child(root, "config")
    out: list[str] = []
    for key_node, value_node in config.value if isinstance(config, yaml.MappingNode) else []:
        key = str(key_node.value)
        secure = isinstance(value_node, yaml.MappingNode) and [
            str(k.value) for k, _ in value_node.value
        ] == ["secure"]
        if key == CONFIG_KEY or secure or not secret_like_config_key(key):
            continue
        problem = Problem(
            f"config.{key}",
            "is named like a credential but stored in plaintext in the stack file, readable "
            "by anyone with the repository (the value is not shown); if it is one, run "
            f"`pulumi config set --secret {key}` so that Pulumi encrypts it",
            key_node.start_mark.line + 1,
        )
        out.append(problem.render(str(path)))
    return out


def line_in_file(file: str | None, path: str) -> int | None:
    """The line of config *path* (``gpustrata:stack.node_pools[0].instance_type``) in the
    stack file *file*, for errors found after validation (the planner's); ``None`` when the
    file cannot be read again or has no such path."""
    if file is None:
        return None
    try:
        root = yaml.compose(_read(Path(file)), Loader=yaml.SafeLoader)
    except (StackError, yaml.YAMLError, RecursionError):
        return None
    return LineIndex(root, ("config", CONFIG_KEY)).line(path)


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if key_node.value == key:
                return value_node  # type: ignore[no-any-return]
    return None
