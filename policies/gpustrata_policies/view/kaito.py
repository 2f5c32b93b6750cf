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

from gpustrata.catalog.kaito import KaitoRelease, defining, kaito_release, kaito_releases
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
    ``tensor_parallel_size``, ``gpu_memory_utilization``, ``nodes``: the known ones."""
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
    _gpus(obj, base, instance_type, read, values, filled, unknown)
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
) -> None:
    """The GPUs per node, ``--tensor-parallel-size``, ``--gpu-memory-utilization`` and the
    node count, from the instance type and the releases' rules."""
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
    if gpus == 1:
        values["tensor_parallel_size"] = 1
        filled.append("--tensor-parallel-size 1 (one GPU per node)")
    else:
        known, rule = read.fact(lambda r: r.parallelism)
        if known and rule == "all-gpus":
            values["tensor_parallel_size"] = gpus
            filled.append(f"--tensor-parallel-size {gpus} (every GPU of the node)")
        elif known:
            unknown["tensor_parallel_size"] = (
                f"--tensor-parallel-size is 1 with --data-parallel-size {gpus} when the "
                f"model's files take under half of one GPU's memory, else {gpus} "
                f"({KAITO_PARALLELISM_SOURCE} configureParallelism), and KAITO's model file "
                "size is not read"
            )
        else:
            unknown["tensor_parallel_size"] = read.differs(
                "how --tensor-parallel-size is derived", lambda r: r.parallelism
            )
    known, gmu = read.fact(lambda r: _gmu(r, gpu_name))
    if known:
        values["gpu_memory_utilization"] = gmu
        filled.append(f"--gpu-memory-utilization {gmu}")
    else:
        unknown["gpu_memory_utilization"] = read.differs(
            "--gpu-memory-utilization", lambda r: _gmu(r, gpu_name) or "computed from the GPU"
        )
    known, rule = read.fact(lambda r: r.node_count)
    count = dig(obj.raw, *base, "resource", "count")
    if known and rule == "resource.count":
        values["nodes"] = count if isinstance(count, int) else 1
        filled.append(f"{values['nodes']} node(s) (resource.count)")
    elif known:
        unknown["nodes"] = (
            "the node count (so whether one engine spans several nodes with "
            "--pipeline-parallel-size) is set by KAITO's node estimator from the model size "
            "and GPU memory, not read by gpustrata"
        )
    else:
        unknown["nodes"] = read.differs(
            "who sets the node count",
            lambda r: "resource.count" if r.node_count == "resource.count" else "its estimator",
        )
