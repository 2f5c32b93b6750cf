"""What the KAITO controller fills into a preset Workspace or InferenceSet
(``inference.preset.name``): the preset's model and revision, the image (so the vLLM
release), the GPUs per node and ``--tensor-parallel-size`` it derives from
``resource.instanceType``, ``--gpu-memory-utilization`` and the node count, from the
catalogued releases (:mod:`gpustrata.catalog.kaito`).

The release is the cluster profile's ``versions.kaito``. Where it is not stated, a value is
read only where every catalogued release that has the preset and serves the object's kind at
its API version gives the same one (the record says which releases those are); a value that
differs across them stays unknown, naming the releases and ``versions.kaito``. The ConfigMap
``inference.config`` names, where it is among the inputs, overrides KAITO's flags
(:data:`KAITO_CONFIG_SOURCE`). From v0.7.0 the node count is the controller's estimator's,
which is not ported: no Pod is built, and the object's record says what was read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gpustrata.catalog.kaito import (
    DEFAULT_CONTEXT,
    ESTIMATOR_SOURCES,
    KaitoRelease,
    defining,
    estimate_nodes,
    kaito_release,
    kaito_releases,
)
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.core.yamlio import safe_load
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.agreement import agreement
from gpustrata_policies.view.objects import K8sObject, Path, dig
from gpustrata_policies.view.profile import active_profile, profile_hint, release_spans

__all__ = [
    "KAITO_CONFIG_SOURCE",
    "KAITO_PARALLELISM_SOURCE",
    "NO_INSTANCE",
    "KaitoFill",
    "attach_kaito_configs",
    "kaito_base",
    "kaito_config_flags",
    "kaito_fill",
]

KAITO_PARALLELISM_SOURCE = "kaito-project/kaito@v0.12.0:pkg/model/interface.go"
"""``buildVLLMInferenceCommand``: ``--tensor-parallel-size`` from ``SKUNumGPUs`` (the
instance type's GPU count; ``configureParallelism`` from v0.10.0), ``--model`` /
``--code-revision`` from the preset's ``version``; the Pod requests every GPU of the node
(``GenerateInferencePodSpec`` in pkg/workspace/inference/preset_inferences.go)."""

KAITO_CONFIG_SOURCE = (
    "kaito-project/kaito@v0.12.0:presets/workspace/inference/vllm/inference_api.py"
)
"""``KAITOArgumentParser.parse_args``: the ``vllm:`` keys of the ConfigMap's
``inference_config.yaml`` (``inference.config``) appended as ``--key value`` after KAITO's
own flags, so they win (the same in every catalogued release)."""

_MEMO = "kaito-fill"
_CONFIG = "kaito-config"
NO_INSTANCE = "no resource.instanceType"
"""How the reason for a Workspace without an instance type starts."""


def kaito_base(obj: K8sObject) -> Path:
    """Where a KAITO object's ``resource`` and ``inference`` are: the top of a Workspace,
    ``spec.template`` of an InferenceSet."""
    return () if obj.kind == "Workspace" else ("spec", "template")


@dataclass(frozen=True, slots=True)
class KaitoFill:
    """What the KAITO controller gives a preset Workspace or InferenceSet."""

    preset: str
    """``inference.preset.name``."""
    values: Mapping[str, Any]
    """``model``, ``revision``, ``image``, ``vllm``, ``gpus`` (per node),
    ``tensor_parallel_size``, ``pipeline_parallel_size``, ``data_parallel_size``,
    ``nodes``, ``gpu_memory_utilization``, ``max_model_len`` (``auto``), ``model_size``
    (KAITO's figure, ``131.42Gi``), ``release`` (the stated one): the known ones."""
    filled: tuple[str, ...]
    """Each known value, worded (``image mcr.microsoft.com/...``)."""
    unknown: Mapping[str, str]
    """Value -> why it is not known (with :attr:`where`, which names the releases read and
    ``versions.kaito`` when none is stated)."""
    where: str
    """Whose facts were read, or ``""`` when none (:attr:`unknown` says why)."""


def _span(rows: tuple[KaitoRelease, ...]) -> str:
    first, last = rows[0].release, rows[-1].release
    return first if first == last else f"{first} to {last}"


class _Resolver:
    """The releases one object is read against, and how a value is read across them (the
    reasons of values that differ leave naming ``versions.kaito`` to :attr:`where`)."""

    def __init__(self, preset: str, rows: tuple[KaitoRelease, ...], stated: str | None):
        self.preset, self.rows, self.stated = preset, rows, stated

    @property
    def where(self) -> str:
        if self.stated is not None:
            return f"KAITO {self.stated} ({self.rows[0].source})"
        return (
            f"every catalogued KAITO release with the preset '{self.preset}' that serves the kind "
            f"({_span(self.rows)}, e.g. {self.rows[-1].source}; the installed release is not "
            f"stated {profile_hint('versions.kaito')})"
        )

    def fact(self, read: Callable[[KaitoRelease], Any]) -> tuple[bool, Any]:
        """(known, value): the value *read* gives on every one of :attr:`rows`, known where
        they agree on one that is not None."""
        found = agreement(self.rows, read).value
        return found is not None, found

    def differs(self, what: str, read: Callable[[KaitoRelease], Any]) -> str:
        listed = release_spans((str(read(r)), r.release) for r in self.rows)
        return f"{what} differs across those releases ({listed})"


def _rows(obj: K8sObject, preset: str) -> tuple[tuple[KaitoRelease, ...], str | None, str | None]:
    """(the releases to read, the stated release, why none is read)."""
    profile = active_profile()
    stated = profile.versions.kaito if profile is not None else None
    known = kaito_releases()
    span = f"{known[0]} to {known[-1]}" if known else "none"
    served = f"{obj.api_version} {obj.kind}"
    if stated is not None:
        stated = stated.removeprefix("v")
        found = kaito_release(stated)
        if found is None:
            why = f"KAITO {stated} (cluster profile versions.kaito) is not catalogued"
            return (), stated, f"{why} (catalogued: {span})"
        if not found.serves(obj.api_version, obj.kind):
            return (), stated, f"KAITO {stated} serves no {served} ({found.source})"
        if preset not in found.presets:
            return (), stated, f"KAITO {stated} has no preset '{preset}' ({found.source})"
        return (found,), stated, None
    rows = defining(preset, obj.api_version, obj.kind)
    if not rows:
        return (
            (),
            None,
            (f"no catalogued KAITO release ({span}) has the preset '{preset}' and serves {served}"),
        )
    return rows, None, None


def attach_kaito_configs(objects: Iterable[K8sObject]) -> None:
    """Give each KAITO Workspace / InferenceSet whose ``inference.config`` names a ConfigMap
    among *objects* (same namespace) that ConfigMap's ``inference_config.yaml`` ``vllm:``
    keys, or the reason they cannot be read."""
    every = list(objects)
    maps = {
        (o.namespace, o.name): o for o in every if o.kind == "ConfigMap" and o.api_version == "v1"
    }
    for obj in every:
        if obj.kind not in {"Workspace", "InferenceSet"} or obj.api_version.split("/")[0] != (
            "kaito.sh"
        ):
            continue
        name = dig(obj.raw, *kaito_base(obj), "inference", "config")
        found = maps.get((obj.namespace, name)) if isinstance(name, str) else None
        obj.memo.pop(_MEMO, None)  # read again with what is attached now
        if found is not None:
            obj.memo[_CONFIG] = _config_flags(found)
        else:
            obj.memo.pop(_CONFIG, None)


def kaito_config_flags(obj: K8sObject) -> Mapping[str, Any]:
    """The ``vllm:`` keys of the ConfigMap *obj*'s ``inference.config`` names, as read by
    :func:`attach_kaito_configs`; empty where none is named or read."""
    flags = obj.memo.get(_CONFIG)
    return flags if isinstance(flags, Mapping) else {}


def _config_flags(config: K8sObject) -> Mapping[str, Any] | str:
    """The ``vllm:`` mapping of a ConfigMap's ``inference_config.yaml``, or why not."""
    text = dig(config.raw, "data", "inference_config.yaml")
    at = f" ({config.file}:{config.line})" if config.file and config.line else ""
    where = f"ConfigMap {config.name!r}{at}"
    if text is UNKNOWN:
        return f"{where}: inference_config.yaml is known only at deploy time"
    if not isinstance(text, str):
        return f"{where} has no data key inference_config.yaml"
    try:
        doc = safe_load(text)
    except yaml.YAMLError as exc:
        return f"{where}: inference_config.yaml is no YAML ({exc.__class__.__name__})"
    flags = doc.get("vllm") if isinstance(doc, Mapping) else None
    if flags is None:
        return {}
    if not isinstance(flags, Mapping):
        return f"{where}: inference_config.yaml's vllm is not a mapping"
    return {str(k): v for k, v in flags.items()}


def _config(
    obj: K8sObject, base: Path, values: dict[str, Any], filled: list[str], unknown: dict[str, str]
) -> None:
    """Apply what ``inference.config`` names: the ConfigMap's ``vllm:`` keys win over the
    flags KAITO passes (:data:`KAITO_CONFIG_SOURCE`)."""
    name = dig(obj.raw, *base, "inference", "config")
    if not isinstance(name, str) or not name:
        return
    flags = obj.memo.get(_CONFIG)
    if flags is None:
        unknown["config"] = (
            f"inference.config names ConfigMap {name!r}, which is not among the inputs: its "
            f"vllm: keys follow KAITO's flags and override them ({KAITO_CONFIG_SOURCE})"
        )
        return
    if isinstance(flags, str):
        unknown["config"] = f"{flags}, so what it sets is not known"
        return
    for key, value in flags.items():
        attr = key.replace("-", "_")
        if attr in ("gpu_memory_utilization", "tensor_parallel_size"):
            values[attr] = value  # the ConfigMap's flag wins over KAITO's
            unknown.pop(attr, None)
            filled[:] = [f for f in filled if not f.startswith(f"--{key} ")]
    if flags:
        shown = ", ".join(f"--{k} {v}" for k, v in flags.items())
        filled.append(f"{shown} (ConfigMap {name!r}, appended after KAITO's flags)")


def _gmu(release: KaitoRelease, gpu_name: str | None) -> str | None:
    if release.gpu_memory_utilization_by_gpu:
        if gpu_name is None:
            return None
        lowered = gpu_name.lower()
        for name, value in release.gpu_memory_utilization_by_gpu.items():
            # KAITO's SKU table says "NVIDIA A10"; gpustrata "NVIDIA A10 Tensor Core GPU"
            if lowered == name.lower() or lowered.startswith(name.lower() + " "):
                return value
    return release.gpu_memory_utilization


@dataclass(frozen=True, slots=True)
class KaitoLayout:
    """How KAITO lays one engine out: TP x PP over *nodes* Pods, DP within one."""

    tp: int
    pp: int | None
    """None: how the release spreads one engine over its nodes is not read."""
    dp: int
    nodes: int

    def __str__(self) -> str:
        parts = [f"--tensor-parallel-size {self.tp}"]
        if self.pp is None:
            parts.append("(how KAITO spreads it over the nodes is not read)")
        elif self.pp > 1:
            parts.append(f"--pipeline-parallel-size {self.pp}")
        if self.dp > 1:
            parts.append(f"--data-parallel-size {self.dp}")
        return f"{' '.join(parts)} on {self.nodes} node(s)"


_UNSTATED_CONTEXT = "unstated"


def _context(obj: K8sObject) -> int | str | None:
    """The context the node estimator sizes the KV cache for: the ``max-model-len`` of
    the inference ConfigMap's ``vllm:`` keys when it states a positive integer
    (``ParseExplicitMaxModelLen`` in kaito-project/kaito@v0.12.0:pkg/utils/config_parser.go,
    the same from v0.7.0), None for the estimator's own default; ``_UNSTATED_CONTEXT``
    where a ConfigMap is named that is not read."""
    name = dig(obj.raw, *kaito_base(obj), "inference", "config")
    if not isinstance(name, str) or not name:
        return None
    flags = obj.memo.get(_CONFIG)
    if not isinstance(flags, Mapping):
        return _UNSTATED_CONTEXT
    value = flags.get("max-model-len")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True, slots=True)
class _Shape:
    """What the engine layout of one Workspace depends on besides the release."""

    preset: str
    gpus: int
    memory_gib: int | None
    """KAITO's SKU table's GPU memory of the instance type (all its GPUs)."""
    context: int | str | None
    count: Any
    """``resource.count`` as written."""

    def nodes(self, release: KaitoRelease) -> int | str:
        """The node count *release* gives one replica, or why it is not known."""
        if release.node_count == "resource.count":
            return self.count if isinstance(self.count, int) and self.count > 0 else 1
        inputs = release.presets[self.preset].estimator
        if release.estimator is None or inputs is None:
            return (
                f"KAITO {release.release}'s node estimator has no model size for the preset "
                f"({release.source})"
            )
        if self.memory_gib is None:
            return (
                "the node count is KAITO's node estimator's, which sizes with KAITO's SKU "
                "table's GPU memory, and the instance type has none in gpustrata's catalogue "
                "(kaito_gpu_memory_gib)"
            )
        if self.context == _UNSTATED_CONTEXT:
            return (
                "the node count is KAITO's node estimator's, which reads max-model-len from "
                "the inference ConfigMap, not among the inputs"
            )
        context = self.context if isinstance(self.context, int) else None
        found = estimate_nodes(release.estimator, inputs, self.memory_gib, self.gpus, context)
        if isinstance(found, str):
            return (
                f"KAITO {release.release}'s node estimator refuses the Workspace ({found}; "
                f"{ESTIMATOR_SOURCES[release.estimator]}), so it builds no Pod"
            )
        return found

    def layout(self, release: KaitoRelease) -> KaitoLayout | str:
        """The engine layout *release* builds (``configureParallelism`` in
        pkg/model/interface.go: TP = the node's GPUs; from v0.10.0 TP 1 with DP = the
        GPUs when one node serves and the model's files take under half of one GPU's
        memory; PP = the nodes where the preset supports distributed inference)."""
        nodes = self.nodes(release)
        if isinstance(nodes, str):
            return nodes
        if release.node_count == "resource.count":  # all-gpus TP in those releases
            return KaitoLayout(self.gpus, 1 if nodes == 1 else None, 1, nodes)
        inputs = release.presets[self.preset].estimator
        distributed = nodes > 1 and inputs is not None and inputs.distributed
        tp, dp = self.gpus, 1
        if release.parallelism != "all-gpus" and not distributed and self.gpus > 1:
            if inputs is None or self.memory_gib is None:
                return (
                    f"KAITO {release.release} runs TP 1 with DP {self.gpus} when the model's "
                    "files take under half of one GPU's memory, and their size (or KAITO's "
                    "figure for the GPU) is not catalogued"
                )
            if inputs.size_bytes * self.gpus * 2 < self.memory_gib * (1 << 30):
                tp, dp = 1, self.gpus
        return KaitoLayout(tp, nodes if distributed else 1, dp, nodes)

    def why(self, release: KaitoRelease) -> str:
        """Where the layout comes from, worded for the record."""
        if release.node_count == "resource.count":
            return f"resource.count; {KAITO_PARALLELISM_SOURCE}"
        context = self.context if isinstance(self.context, int) else DEFAULT_CONTEXT
        inputs = release.presets[self.preset].estimator
        size = inputs.size if inputs is not None else "?"
        return (
            f"KAITO {release.release}'s node estimator: the preset's {size} of model files against "
            f"{self.memory_gib}Gi over {self.gpus} GPU(s) with a {context}-token context, "
            f"{ESTIMATOR_SOURCES[release.estimator or 'kv-overhead']}"
        )


def kaito_fill(obj: K8sObject) -> KaitoFill | None:
    """What KAITO fills into *obj* (a Workspace or InferenceSet naming a preset), once per
    object; None when it names no preset. Raises
    :class:`~gpustrata.core.unknown.UnknownInput` for a value known only at deploy time."""
    found = obj.memo.get(_MEMO)
    if isinstance(found, KaitoFill):
        return found
    base = kaito_base(obj)
    preset = dig(obj.raw, *base, "inference", "preset", "name")
    instance_type = dig(obj.raw, *base, "resource", "instanceType")
    if preset is UNKNOWN or instance_type is UNKNOWN:
        raise UnknownInput(f"inference.preset.name / resource.instanceType of {obj.resource}")
    if not isinstance(preset, str):
        return None
    rows, stated, problem = _rows(obj, preset)
    values: dict[str, Any] = {}
    filled: list[str] = []
    unknown: dict[str, str] = {}
    if problem is not None:
        why = f"the preset is KAITO's: {problem}"
        unknown = dict.fromkeys(("model", "image", "tensor_parallel_size"), why)
        result = KaitoFill(preset, {}, (), unknown, "")
        obj.memo[_MEMO] = result
        return result
    read = _Resolver(preset, rows, stated)
    for key, what, getter in (
        ("model", "the model", lambda r: r.presets[preset].model),
        ("revision", "the model revision", lambda r: r.presets[preset].revision),
        ("image", "the image (so the vLLM release)", lambda r: r.base_image),
    ):
        known, value = read.fact(getter)
        if known:
            values[key] = value
        else:
            unknown[key] = read.differs(what, getter)
    if "model" in values:
        at = f"@{values['revision'][:7]}" if "revision" in values else ""
        filled.append(f"model {values['model']}{at} (the preset's version)")
    if "image" in values:
        known, vllm = read.fact(lambda r: r.vllm)
        values["vllm"] = vllm
        filled.append(f"image {values['image']} (vLLM {vllm})")
    if stated is not None:
        values["release"] = stated
    known, size = read.fact(lambda r: r.presets[preset].estimator)
    if known:
        values["model_size"] = size.size
    known, context = read.fact(lambda r: r.max_model_len)
    if known and context == "auto":
        values["max_model_len"] = context
        filled.append("--max-model-len=auto")
    _gpus(obj, base, instance_type, read, values, filled, unknown, preset)
    _config(obj, base, values, filled, unknown)
    result = KaitoFill(preset, values, tuple(filled), unknown, read.where)
    obj.memo[_MEMO] = result
    return result


def _gpus(
    obj: K8sObject,
    base: Path,
    instance_type: Any,
    read: _Resolver,
    values: dict[str, Any],
    filled: list[str],
    unknown: dict[str, str],
    preset: str,
) -> None:
    """The GPUs per node, the engine layout (TP, PP, DP, nodes), ``--gpu-memory-utilization``,
    from the instance type and the releases' rules and node estimators."""
    hint = "GPUs per node"
    if instance_type is not None and not isinstance(instance_type, str):
        why = f"resource.instanceType {instance_type!r} is not an instance type name"
        unknown.update(dict.fromkeys(("gpus", "tensor_parallel_size"), why))
        return
    if not instance_type:
        why = (
            f"{NO_INSTANCE}: KAITO reads the GPU count from the nodes "
            "resource.labelSelector finds (bring-your-own nodes), which are not among the inputs"
        )
        unknown.update(dict.fromkeys(("gpus", "tensor_parallel_size"), why))
        return
    found = catalogs.instance(instance_type)
    if found is None:
        why = f"instance type {instance_type!r} is not in gpustrata's catalogue"
        unknown.update(dict.fromkeys(("gpus", "tensor_parallel_size"), why))
        return
    gpus = found.gpu_count
    gpu = catalogs.hardware().gpu(found.gpu)
    gpu_name = gpu.name if gpu is not None else None
    values["gpus"] = gpus
    filled.append(f"{gpus} nvidia.com/gpu per Pod ({hint} of {instance_type})")
    count = dig(obj.raw, *base, "resource", "count")
    shape = _Shape(preset, gpus, found.kaito_gpu_memory_gib, _context(obj), count)
    known, layout = read.fact(shape.layout)
    if known and isinstance(layout, KaitoLayout):
        values.update(tensor_parallel_size=layout.tp, data_parallel_size=layout.dp)
        values["nodes"] = layout.nodes
        if layout.pp is not None:
            values["pipeline_parallel_size"] = layout.pp
        filled.append(f"{layout} ({shape.why(read.rows[-1])})")
    else:
        why = layout if known else read.differs("the engine layout", shape.layout)
        unknown.update(dict.fromkeys(("tensor_parallel_size", "nodes"), str(why)))
    known, gmu = read.fact(lambda r: _gmu(r, gpu_name))
    if known:
        values["gpu_memory_utilization"] = gmu
        filled.append(f"--gpu-memory-utilization {gmu}")
    else:
        unknown["gpu_memory_utilization"] = read.differs(
            "--gpu-memory-utilization", lambda r: _gmu(r, gpu_name) or "computed from the GPU"
        )
