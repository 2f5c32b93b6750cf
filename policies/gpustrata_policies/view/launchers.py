"""What launchers of vLLM that build the engine's Pod themselves decide and a manifest does
not state: one "not evaluated" record per object, naming the controller and the fields.

:mod:`gpustrata_policies.view.controllers` reads the Pods such kinds state (a Dynamo service's
``extraPodSpec``, the Pod KubeAI builds for a Model, a RoleBasedGroup's roles); this module
links the objects a controller builds one Pod from (:func:`attach_partners`: a KServe
InferenceService and its ServingRuntime, an llmaz Playground and its OpenModel) and says
what the controllers fill in and what the view could not read, so a file of these kinds is
never silently passed. Where the manifest states the parallelism but the controller
writes the command line (a KServe LLMInferenceService), the engine is read the way the
controller's preset writes it (:func:`~gpustrata_policies.view.vllm_args.preset_engine`) and
the record says what it found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gpustrata.core.unknown import UNKNOWN, UnknownInput, is_tracked
from gpustrata.vllm.flags import parse_flags
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.controllers import (
    BOOSTER_COMMAND,
    KTHENA_SOURCE,
    multi_pod_role,
    rbg_group,
)
from gpustrata_policies.view.kaito import attach_kaito_configs
from gpustrata_policies.view.kinds import is_read_kind
from gpustrata_policies.view.kserve_llmisvc import (
    KSERVE_PRESET_SOURCE,
    llmisvc_engine,
    llmisvc_models,
    main_container,
    preset_judged,
    preset_unjudged,
)
from gpustrata_policies.view.kubeai import kubeai_fill, kubeai_image
from gpustrata_policies.view.llmaz import llmaz_fill, llmaz_image
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig
from gpustrata_policies.view.profile import active_profile, profile_hint
from gpustrata_policies.view.templates import strategic_merge
from gpustrata_policies.view.vllm_args import vllm_engine
from gpustrata_policies.view.workloads import llmisvc_spec

if TYPE_CHECKING:
    from gpustrata.catalog.kserve import KServePreset

__all__ = [
    "KSERVE_PRESET_SOURCE",
    "attach_partners",
    "filled_note",
    "installation_reason",
    "launcher_fills",
    "llmisvc_engine",
    "llmisvc_models",
]

KSERVE_MERGE_SOURCE = "kserve/kserve@aaac4e2:pkg/controller/v1alpha2/llmisvc/config_merge.go"
"""``MergeSpecs``: each LLMInferenceServiceConfig's spec, then the service's, merged in order
as a strategic merge patch (containers by name)."""
KSERVE_CONFIG_LOOKUP = "kserve/kserve@v0.20.0:pkg/controller/v1alpha2/llmisvc/config_merge.go"
"""``getConfig``: a config is looked up by name in the service's namespace, then in
``kserve``; a well-known preset's name found there is used instead of KServe's own."""
LLMAZ_BACKEND = "InftyAI/llmaz@v{release}:chart/templates/backends/vllm.yaml"
"""llmaz's default vLLM BackendRuntime, per release (:mod:`gpustrata.catalog.llmaz`):
``python3 -m vllm.entrypoints.openai.api_server --model <path> --served-model-name <name>
--port 8080`` on the chart's image."""


def installation_reason(obj: K8sObject, exc: UnknownInput) -> str:
    """The "not evaluated" reason for *exc* on *obj*: for a value the Pod gpustrata builds
    for a KubeAI Model or llmaz Playground leaves to the controller's installation (its
    image, tolerations), who sets it and what would decide it; otherwise *exc*'s own
    reason. A value known only at deploy time (a Pulumi preview: *obj* holds unknowns)
    keeps its reason."""
    default = f"{exc.what} is unknown until the deployment runs"
    if exc.reason != default or not is_read_kind(obj) or is_tracked(obj.raw):
        return exc.reason
    if obj.kind == "Model":
        field = exc.what.split(" ", 1)[0].split(".", 1)[0].split("[", 1)[0]
        try:
            why = kubeai_fill(obj).unknown.get(field)
        except UnknownInput:
            return exc.reason
        return f"{exc.what}: {why}, so what depends on it is not evaluated" if why else exc.reason
    if obj.kind != "Playground":
        return exc.reason
    found = llmaz_image(obj).where if exc.what.startswith("image") else None
    for name, key in _LLMAZ_FIELDS:
        if found is None and key in exc.what:
            found = llmaz_fill(obj).unknown.get(name)
    return f"{exc.what}: {found}, so what depends on it is not evaluated" if found else exc.reason


_LLMAZ_FIELDS = (("probes", "Probe"), ("/dev/shm", "volumeMounts"), ("args", "args"))
"""(field of :class:`~gpustrata_policies.view.llmaz.LlmazFill`, a word of the unknown
value's name): which fill an unknown Playground value comes from."""


def filled_note(obj: K8sObject) -> str:
    """What *obj*'s controller filled into the Pod a finding on it judges, from its
    installation's defaults (`` (KubeAI filled ... from ...)``), or ``""``: appended to each
    finding's message so it says which values the manifest did not state."""
    if obj.kind == "Playground" and is_read_kind(obj) and obj.pods():
        image = llmaz_image(obj)
        return f" (llmaz filled {image.where})" if image.known else ""
    if obj.kind != "Model" or not is_read_kind(obj) or dig(obj.raw, "spec", "engine") != "VLLM":
        return ""
    try:
        fill = kubeai_fill(obj)
    except UnknownInput:  # known only at deploy time: its record says so
        return ""
    if not fill.filled:
        return ""
    return f" (KubeAI filled {', '.join(fill.filled)}: {fill.where})"


def launcher_fills(obj: K8sObject) -> list[str]:
    """Reasons the parts of *obj* that its launcher's controller decides are not evaluated
    (empty for kinds that state their whole Pod). A value known only at deploy time makes
    the whole object's launcher part one such record."""
    if not is_read_kind(obj):
        return []
    reader = _READERS.get(obj.kind)
    if reader is None:
        return []
    try:
        return reader(obj)
    except UnknownInput as exc:
        return [f"{obj.kind}: {exc.reason}, so what its controller builds is not evaluated"]


# --------------------------------------------------------------------------- KServe


def _llmisvc(obj: K8sObject) -> list[str]:
    out = []
    refs = _base_refs(obj)
    if refs and obj.merged_with is None:
        out.append(
            f"LLMInferenceService names baseRefs {', '.join(map(repr, refs))}: "
            "LLMInferenceServiceConfigs merged over the presets, which may change the command "
            "line, image and Pods; not among the checked objects, so not evaluated"
        )
    presets = obj.memo.get(_PRESETS)
    if refs and obj.merged_with is not None:
        under = (
            f"under them {_presets_text(obj, presets)}"
            if isinstance(presets, list)
            else f"KServe's own presets under them are not: {presets}"
        )
        out.append(
            f"LLMInferenceService read merged over its baseRefs {', '.join(map(repr, refs))} "
            f"(the LLMInferenceServiceConfigs among the checked objects, in order, then its "
            f"own spec: {KSERVE_MERGE_SOURCE}); {under}"
        )
    read: dict[str, list[str]] = {}  # what each part reads as -> the parts
    whole = llmisvc_spec(obj)
    for part in ("template", "worker"):
        spec = dig(whole, part)
        engine = llmisvc_engine(obj, part)
        if engine is None:
            if isinstance(spec, Mapping) and not main_container(spec).get("command"):
                out.append(
                    f"LLMInferenceService {part}: the KServe controller writes the vLLM "
                    "command line from a multi-node preset gpustrata does not read "
                    "(pipeline parallel); not evaluated"
                )
            continue
        tp = engine.get_int("tensor_parallel_size") or 1
        dp_local = engine.get_int("data_parallel_size_local") or 1
        settings = ", ".join(f"{k}={v}" for k, v in sorted(engine.values.items()))
        text = (
            f"`vllm serve /mnt/models` with {settings or 'no flags'}, i.e. {tp * dp_local} "
            f"GPU(s) per Pod (tensor {tp} x local data parallel {dp_local}) against "
            f"{_stated_gpus(main_container(spec))} nvidia.com/gpu stated"
        )
        read.setdefault(text, []).append(part)
    if read and isinstance(presets, list) and obj.merged_with is not None:
        parts = "; ".join(f"{' and '.join(p)} read as {t}" for t, p in read.items())
        over = "its baseRefs and KServe's presets" if refs else _presets_text(obj, presets)
        out.append(
            f"LLMInferenceService read over {over}; its vLLM command line: {parts}; "
            f"{preset_judged(whole)}; {preset_unjudged(whole)}, and what the preset's script "
            "adds to the command at run time (flags chosen by the vLLM version it finds, RoCE "
            "settings) is not evaluated"
        )
    elif read:
        parts = "; ".join(f"{' and '.join(p)} read as {t}" for t, p in read.items())
        why = presets if isinstance(presets, str) else "not read"
        out.append(
            "LLMInferenceService: the KServe controller writes the vLLM command line from its "
            f"LLMInferenceServiceConfig presets ({KSERVE_PRESET_SOURCE}) with spec.parallelism "
            f"and VLLM_ADDITIONAL_ARGS: {parts}; {preset_judged(whole)}; "
            f"{preset_unjudged(whole)}; the preset's probes and /dev/shm are not evaluated "
            f"either: {why}"
        )
    return out


def _presets_text(obj: K8sObject, presets: list[KServePreset]) -> str:
    """``KServe's presets <sources> (...): the controller filled ...``."""
    return (
        f"KServe's presets {', '.join(p.source for p in presets)} (merged under its spec as "
        f"{KSERVE_MERGE_SOURCE} does): the controller filled {obj.memo.get(_FILLED)}"
    )


def _filled(user: Mapping[str, Any], presets: list[KServePreset]) -> str:
    """What the presets gave the Pods that *user* (the service's spec over its baseRefs)
    leaves out: the ``main`` container's keys and the Pod's, per part (``template: image
    ghcr.io/..., startupProbe``)."""
    said: dict[str, list[str]] = {}
    for preset in presets:
        for part, pod in preset.parts.items():
            stated = dig(user, *part.split("."))
            stated_main = main_container(stated) if isinstance(stated, Mapping) else {}
            keys = said.setdefault(part, [])
            for c in as_list(pod.get("containers"), "containers"):
                for key, value in c.items():
                    if key != "name" and key not in stated_main and key not in keys:
                        keys.append(f"image {value}" if key == "image" else key)
            for key in pod:
                if key != "containers" and not (isinstance(stated, Mapping) and key in stated):
                    keys.append(key)
    return "; ".join(f"{part}: {', '.join(keys)}" for part, keys in said.items() if keys) or (
        "nothing the manifest leaves out"
    )


def _base_refs(obj: K8sObject) -> list[str]:
    return [
        str(r.get("name"))
        for r in as_list(dig(obj.raw, "spec", "baseRefs"), "spec.baseRefs")
        if isinstance(r, Mapping)
    ]


def _merge_base_refs(obj: K8sObject, configs: Mapping[tuple[str, str], K8sObject]) -> None:
    """Merge *obj*'s ``baseRefs`` configs (its namespace first, then KServe's, as
    :data:`KSERVE_MERGE_SOURCE` looks them up) then its own spec, where every one is among
    the checked objects."""
    specs: list[tuple[K8sObject, Mapping[str, Any]]] = []
    for name in _base_refs(obj):
        found = _checked_config(obj, name, configs)
        spec = dig(found.raw, "spec") if found is not None else None
        if found is None or not isinstance(spec, Mapping):
            _merge(obj, None)
            return
        specs.append((found, _rendered(spec, _template_values(obj))))
    own = dig(obj.raw, "spec")
    if not isinstance(own, Mapping):
        _merge(obj, None)
        return
    user: Any = own
    if specs:
        user = specs[0][1]
        for spec in [*(s for _, s in specs[1:]), own]:
            user = strategic_merge(user, spec)
    presets = _well_known_presets(obj, user, configs)
    if not specs and not isinstance(presets, list):
        _merge(obj, None)
        obj.memo[_PRESETS] = presets  # after _merge, which forgets what was derived
        return
    merged: Any = user
    if isinstance(presets, list) and presets:
        base: Any = {}
        for preset in presets:
            for part, pod in preset.parts.items():
                base = strategic_merge(base, _nested(part, pod))
        merged = strategic_merge(base, user)
    _merge(obj, merged)
    obj.memo[_PRESETS] = presets
    if isinstance(presets, list):
        obj.memo[_FILLED] = _filled(user, presets)
    used = [c for c, _ in specs]
    if isinstance(presets, list):
        used += [o for p in presets if (o := _checked_config(obj, p.name, configs)) is not None]
    for config in used:
        config.memo[_USED_BY] = obj.resource


def _checked_config(
    obj: K8sObject, name: str, configs: Mapping[tuple[str, str], K8sObject]
) -> K8sObject | None:
    """The LLMInferenceServiceConfig *name* KServe finds for *obj* among the checked objects:
    the service's namespace first, then ``kserve`` (:data:`KSERVE_CONFIG_LOOKUP`)."""
    return configs.get((obj.namespace, name)) or configs.get(("kserve", name))


_FILLED = "kserve-presets-filled"
"""What those presets gave the Pods that the service and its baseRefs leave out."""
_PRESETS = "kserve-presets"
"""Where :func:`_merge_base_refs` notes the well-known presets it merged under a service
(:func:`_well_known_presets`: a list, or why none)."""


def _nested(part: str, pod: Mapping[str, Any]) -> dict[str, Any]:
    """``{"prefill": {"template": pod}}`` for the part ``prefill.template``."""
    out: dict[str, Any] = dict(pod)
    for key in reversed(part.split(".")):
        out = {key: out}
    return out


def _well_known_presets(
    obj: K8sObject, spec: Mapping[str, Any], configs: Mapping[tuple[str, str], K8sObject]
) -> list[KServePreset] | str:
    """The well-known LLMInferenceServiceConfigs KServe's controller merges under *obj*,
    whose spec (with its baseRefs) is *spec*
    (:data:`gpustrata.catalog.kserve.KSERVE_SELECTION_SOURCE` ``combineBaseRefsConfig``):
    a config of that name among the checked objects (what the
    cluster holds, found as :data:`KSERVE_CONFIG_LOOKUP` finds it), else the catalogue's at
    the cluster profile's ``versions.kserve``; else the reason they are not read."""
    profile = active_profile()
    release = profile.versions.kserve if profile is not None else None

    def data_parallel(node: Any) -> bool:
        p = as_map(dig(node, "parallelism"), "parallelism")
        return any(isinstance(p.get(k), int) and p[k] > 0 for k in ("data", "dataLocal"))

    def pick(node: Any, single: str, dp: str) -> str | None:
        if dig(node, "worker") is None:
            return single
        return dp if data_parallel(node) else None  # pipeline parallel: not catalogued

    prefill = dig(spec, "prefill")
    if prefill is not None:
        names = [
            pick(
                prefill,
                "kserve-config-llm-prefill-template",
                "kserve-config-llm-prefill-worker-data-parallel",
            ),
            pick(
                spec,
                "kserve-config-llm-decode-template",
                "kserve-config-llm-decode-worker-data-parallel",
            ),
        ]
    else:
        names = [pick(spec, "kserve-config-llm-template", "kserve-config-llm-worker-data-parallel")]
    if None in names:
        return (
            "the multi-node pipeline-parallel preset is not catalogued (KServe installs none "
            "under config/llmisvcconfig)"
        )
    presets: list[KServePreset] = []
    for name in map(str, names):
        checked = _checked_config(obj, name, configs)
        if checked is not None:
            presets.append(_as_preset(obj, checked))
            continue
        if release is None:
            return f"the KServe release is not stated {profile_hint('versions.kserve')}"
        found = catalogs.kserve_preset(release, name)
        if found is None:
            known = ", ".join(catalogs.kserve_releases())
            return f"KServe {release}'s presets are not catalogued (catalogued releases: {known})"
        presets.append(found)
    return presets


def _as_preset(obj: K8sObject, config: K8sObject) -> KServePreset:
    """A checked LLMInferenceServiceConfig named like a well-known preset, in the
    catalogue's form (its Pod parts, Go templates rendered from *obj*)."""
    from gpustrata.catalog.kserve import KServePreset

    spec = _rendered(as_map(dig(config.raw, "spec"), "spec"), _template_values(obj))
    parts = {
        ".".join(path): part
        for path in (("template",), ("worker",), ("prefill", "template"), ("prefill", "worker"))
        if isinstance(part := dig(spec, *path), Mapping)
    }
    where = (
        f"LLMInferenceServiceConfig {config.namespace}/{config.name} (among the checked objects)"
    )
    return KServePreset(config.name, where, parts)


def _template_values(obj: K8sObject) -> dict[str, str]:
    """The Go-template fields of the service that KServe renders in a config's text before
    merging it (:data:`KSERVE_MERGE_SOURCE` ``ReplaceVariables``) and that the service
    states; any other template is left as written."""
    values = {"{{ .ObjectMeta.Name }}": obj.name, "{{ .ObjectMeta.Namespace }}": obj.namespace}
    name = dig(obj.raw, "spec", "model", "name")
    if isinstance(name, str):
        values["{{ .Spec.Model.Name }}"] = name
    return values


def _rendered(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for template, text in values.items():
            value = value.replace(template, text)
        return value
    if isinstance(value, Mapping):
        return {k: _rendered(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_rendered(v, values) for v in value]
    return value


def _stated_gpus(container: Mapping[str, Any]) -> str:
    for section in ("limits", "requests"):
        value = dig(container, "resources", section, "nvidia.com/gpu")
        if value is not None:
            return str(value)
    return "no"


def _runtime_index(
    objects: Iterable[K8sObject],
) -> dict[tuple[str, str, str], K8sObject]:
    index: dict[tuple[str, str, str], K8sObject] = {}
    for obj in objects:
        if obj.kind in ("ServingRuntime", "ClusterServingRuntime") and is_read_kind(obj):
            index[(obj.kind, obj.namespace, obj.name)] = obj
    return index


def _formats(runtime: K8sObject) -> list[str]:
    """The model formats a runtime is auto-selected for (``autoSelect: true``)."""
    return [
        str(f.get("name")).casefold()
        for f in as_list(dig(runtime.raw, "spec", "supportedModelFormats"), "formats")
        if isinstance(f, Mapping) and f.get("autoSelect") is True
    ]


def _runtime_of(
    isvc: K8sObject, index: Mapping[tuple[str, str, str], K8sObject]
) -> tuple[K8sObject | None, str]:
    """The runtime KServe runs *isvc*'s ``predictor.model`` with, and how it was chosen (or
    why none is known): ``runtime`` names a ServingRuntime of the namespace, else a
    ClusterServingRuntime; without it, the one runtime auto-selected for its
    ``modelFormat`` (the namespace's first)."""
    model = as_map(dig(isvc.raw, "spec", "predictor", "model"), "predictor.model")
    name = model.get("runtime")
    if isinstance(name, str):
        found = index.get(("ServingRuntime", isvc.namespace, name)) or index.get(
            ("ClusterServingRuntime", "-", name)
        )
        return found, f"runtime {name!r}"
    fmt = dig(model, "modelFormat", "name")
    if not isinstance(fmt, str):
        return None, "no runtime and no modelFormat"
    for kind, namespace in (("ServingRuntime", isvc.namespace), ("ClusterServingRuntime", "-")):
        candidates = [
            o
            for (k, ns, _), o in index.items()
            if k == kind and ns == namespace
            if fmt.casefold() in _formats(o)
        ]
        if len(candidates) == 1:
            return candidates[0], f"modelFormat {fmt!r} (auto-selected)"
        if len(candidates) > 1:
            names = ", ".join(sorted(o.name for o in candidates))
            return None, f"modelFormat {fmt!r}: several runtimes auto-select it ({names})"
    return None, f"modelFormat {fmt!r}"


def attach_partners(objects: Iterable[K8sObject]) -> None:
    """Give each object whose controller builds its Pods from another object among
    *objects* that object's spec (:attr:`K8sObject.merged_with`): a KServe InferenceService
    whose ``predictor.model`` runs on a ServingRuntime (multi-node runtimes, with
    ``workerSpec``, are left unmerged), an llmaz Playground its claimed OpenModel, a KServe
    LLMInferenceService the LLMInferenceServiceConfigs its ``spec.baseRefs`` name (all of
    them among *objects*, else none); a KAITO Workspace the ConfigMap its
    ``inference.config`` names (:func:`~gpustrata_policies.view.kaito.attach_kaito_configs`)."""
    every = list(objects)
    attach_kaito_configs(every)
    index = _runtime_index(every)
    models = {o.name: o for o in every if o.kind == "OpenModel" and is_read_kind(o)}
    configs = {
        (o.namespace, o.name): o
        for o in every
        if o.kind == "LLMInferenceServiceConfig" and is_read_kind(o)
    }
    for obj in every:
        if obj.kind == "LLMInferenceService" and is_read_kind(obj):
            try:
                _merge_base_refs(obj, configs)
            except UnknownInput as exc:  # a Pulumi preview: known only at deploy time
                _merge(obj, None)
                obj.memo[_PRESETS] = exc.reason
            continue
        if obj.kind == "Playground" and is_read_kind(obj):
            claimed = models.get(str(dig(obj.raw, "spec", "modelClaim", "modelName")))
            _merge(obj, dig(claimed.raw, "spec") if claimed is not None else None)
            continue
        if obj.kind != "InferenceService" or not is_read_kind(obj):
            continue
        if dig(obj.raw, "spec", "predictor", "model") is None:
            continue
        try:
            runtime, how = _runtime_of(obj, index)
        except UnknownInput as exc:
            runtime, how = None, exc.reason
        spec = dig(runtime.raw, "spec") if runtime is not None else None
        multi_node = dig(obj.raw, "spec", "predictor", "workerSpec") is not None
        if not isinstance(spec, Mapping) or spec.get("workerSpec") is not None or multi_node:
            spec = None
        _merge(obj, spec)
        obj.memo[_HOW] = how if runtime is not None else f"{how}: not among the checked objects"


def _merge(obj: K8sObject, spec: Any) -> None:
    spec = spec if isinstance(spec, Mapping) else None
    if spec is not obj.merged_with:
        obj.forget_derived()  # its Pods change
        obj.merged_with = spec


_HOW = "kserve-runtime"
"""Where :func:`attach_partners` notes how an InferenceService's runtime was chosen."""


def _isvc(obj: K8sObject) -> list[str]:
    model = dig(obj.raw, "spec", "predictor", "model")
    if not isinstance(model, Mapping):
        return []
    if obj.merged_with is None:
        how = obj.memo.get(_HOW, "runtime unknown")
        return [
            f"InferenceService predictor.model ({how}): the ServingRuntime KServe merges it "
            "with (image, command, the runtime's args) is not read with it (not among the "
            "checked objects, ambiguous, or multi-node); only what the InferenceService "
            "states is evaluated"
        ]
    for pod in obj.pods():
        containers = list(pod.containers(init=False))
        if containers and vllm_engine(containers[0]) is None:
            first = containers[0]
            if first.raw.get("command") is None and "vllm" in str(first.image).lower():
                return [
                    f"InferenceService runs its runtime's image {first.image} without a "
                    "command: that image's entrypoint is not known to gpustrata, so no vLLM "
                    "engine is read from it (the merged Pod's GPUs and scheduling are)"
                ]
    return []


# --------------------------------------------------------------------------- others


def _dynamo(obj: K8sObject) -> list[str]:
    workers = []
    services = as_map(dig(obj.raw, "spec", "services"), "spec.services")
    for name, service in services.items():
        if not isinstance(service, Mapping):
            continue
        main = as_map(dig(service, "extraPodSpec", "mainContainer"), "mainContainer")
        argv = [str(a) for key in ("command", "args") for a in as_list(main.get(key), key)]
        module = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "-m"), None)
        if module is None or not module.startswith("dynamo.") or module == "dynamo.frontend":
            continue
        values: dict[str, Any] = {}
        parse_flags(argv[argv.index(module) + 1 :], values)
        nodes = dig(service, "multinode", "nodeCount")
        gpus = dig(service, "resources", "limits", "gpu")
        spread = f", multinode.nodeCount {nodes}: {nodes} Pods" if nodes else ""
        workers.append(
            f"'{name}' runs `python3 -m {module}` (tensor_parallel_size "
            f"{values.get('tensor_parallel_size', 1)}, {gpus if gpus is not None else 'no'} "
            f"GPU(s) per Pod{spread})"
        )
    if not workers:
        return []
    return [
        f"DynamoGraphDeployment: service {'; '.join(workers)}: Dynamo's workers mix Dynamo's "
        "flags with the engine's and the Dynamo operator builds their Pods (probes, /dev/shm, "
        "multi-node launch), so the engine settings are not evaluated as a vLLM engine; the "
        "Pods' GPUs, images and scheduling are"
    ]


def _kubeai(obj: K8sObject) -> list[str]:
    engine = dig(obj.raw, "spec", "engine")
    if engine is UNKNOWN:
        raise UnknownInput("spec.engine")
    if engine != "VLLM":
        return [
            f"KubeAI Model with engine {engine!r}: only the VLLM engine's Pod is read; the "
            "KubeAI controller builds this one, which is not evaluated"
        ]
    fill = kubeai_fill(obj)
    if not fill.unknown:
        return []  # every value the installation fills is read: the rules' records say so
    stated = dig(obj.raw, "spec", "resourceProfile")
    read = (
        f"read with {fill.where}: {', '.join(fill.filled)}; " if fill.where and fill.filled else ""
    )
    gaps = "; ".join(dict.fromkeys(fill.unknown.values()))
    own = " (its image is spec.image)" if kubeai_image(obj) is not None else ""
    return [
        f"KubeAI Model: the controller builds its Pod from the installation's resource "
        f"profile {stated!r} and vLLM images{own}; {read}not evaluated: {gaps}"
    ]


def _llmaz(obj: K8sObject) -> list[str]:
    claim = dig(obj.raw, "spec", "modelClaim", "modelName")
    claims = [
        m.get("name")
        for m in as_list(dig(obj.raw, "spec", "modelClaims", "models"), "modelClaims")
        if isinstance(m, Mapping)
    ]
    models = ", ".join(repr(m) for m in [claim, *claims] if isinstance(m, str)) or "none named"
    backend = dig(obj.raw, "spec", "backendRuntimeConfig", "backendName") or "vllm"
    if obj.pods():
        image = llmaz_image(obj)
        gaps = list(llmaz_fill(obj).unknown.values())
        if image.known and not gaps:
            return []  # every value is read: each finding says what llmaz filled
        if not image.known:
            gaps.insert(0, image.where)
        return [
            f"llmaz Playground: read as the Pod llmaz builds from the claimed OpenModel "
            f"{models} (its first flavor's limits and node selector) and llmaz's default vLLM "
            f"BackendRuntime (command, args, probes, /dev/shm); not evaluated: "
            f"{'; '.join(dict.fromkeys(gaps))}"
        ]
    return [
        f"llmaz Playground: the llmaz controller builds the inference Pods from the "
        f"BackendRuntime {backend!r} (its image, command and args; llmaz's default vLLM one "
        f"is {LLMAZ_BACKEND}) and the claimed OpenModel(s) {models} (their GPUs and node "
        "selectors, from inferenceConfig.flavors); with the OpenModel not among the checked "
        "objects, several models or another backend, the engine is not evaluated"
    ]


def _rbg(obj: K8sObject) -> list[str]:
    out = []
    group = rbg_group(obj)
    for index, role in enumerate(as_list(dig(obj.raw, *group, "roles"), "roles")):
        if not isinstance(role, Mapping):
            continue
        name = role.get("name", index)
        if multi_pod_role(role):
            out.append(
                f"{obj.kind} role '{name}': each instance is podGroupSize "
                f"{role['podGroupSize']} Pods running one engine across them, which gpustrata "
                "does not assemble; the role is not evaluated"
            )
        if isinstance(role.get("customComponentsPattern"), Mapping):
            out.append(
                f"{obj.kind} role '{name}' uses customComponentsPattern: its Pods are not read"
            )
        if role.get("workload") is not None and role.get("template") is None:
            out.append(f"{obj.kind} role '{name}': its workload's Pods are not stated")
        ref = dig(role, "standalonePattern", "templateRef") or dig(
            role, "leaderWorkerPattern", "templateRef"
        )
        if isinstance(ref, Mapping):
            names = [
                t.get("name")
                for t in as_list(dig(obj.raw, *group, "roleTemplates"), "roleTemplates")
                if isinstance(t, Mapping)
            ]
            if ref.get("name") not in names:
                out.append(
                    f"{obj.kind} role '{name}' takes its template from roleTemplates "
                    f"{ref.get('name')!r}, which this object does not define: not evaluated"
                )
    return out


def _booster(obj: K8sObject) -> list[str]:
    backend = as_map(dig(obj.raw, "spec", "backend"), "spec.backend")
    kind = backend.get("type")
    if kind != "vLLM":
        return [
            f"ModelBooster backend type {kind!r}: only the vLLM backend's Pod is read "
            f"({KTHENA_SOURCE}); kthena builds this one, which is not evaluated"
        ]
    if not obj.pods():
        return [
            "ModelBooster: its server worker spans several Pods (pods > 1), which kthena "
            "joins into one Ray cluster; the engine is not evaluated"
        ]
    return [
        f"ModelBooster: read as the engine Pod kthena builds ({KTHENA_SOURCE}: "
        f"`{' '.join(BOOSTER_COMMAND)} --model <cache path>/<md5 of modelURI>` and each "
        "config key as `--<key>`, verbatim); the runtime sidecar (the installation's image) "
        "and the model download are not evaluated; the model is the one modelURI names"
    ]


_USED_BY = "llmisvc-config-used-by"
"""Where :func:`attach_partners` notes the LLMInferenceService a config is merged into."""


def _llmisvc_config(obj: K8sObject) -> list[str]:
    if obj.memo.get(_USED_BY):
        return []  # read as part of the service that names it
    return [
        "LLMInferenceServiceConfig: presets KServe merges into the LLMInferenceServices "
        "that name it in spec.baseRefs; alone it builds no Pod, so it is not evaluated on "
        "its own (check it with the LLMInferenceService that references it)"
    ]


_READERS: dict[str, Callable[[K8sObject], list[str]]] = {
    "LLMInferenceService": _llmisvc,
    "InferenceService": _isvc,
    "DynamoGraphDeployment": _dynamo,
    "Model": _kubeai,
    "Playground": _llmaz,
    "RoleBasedGroup": _rbg,
    "RoleBasedGroupSet": _rbg,
    "StormService": _rbg,
    "ModelBooster": _booster,
    "LLMInferenceServiceConfig": _llmisvc_config,
}
"""Each launcher kind's reader of what its controller decides (read only in the kind's own
API group: :func:`launcher_fills` asks :func:`~gpustrata_policies.view.kinds.is_read_kind`
first)."""
