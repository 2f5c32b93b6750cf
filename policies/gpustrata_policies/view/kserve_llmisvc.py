"""The engine a KServe LLMInferenceService's presets write when the service states no
command: its words from ``spec.parallelism`` and the ``main`` container's
``VLLM_ADDITIONAL_ARGS`` (:func:`llmisvc_engine`), its model from ``spec.model``
(:func:`llmisvc_models`), and what the object's record says the rules judge of it.
Split from :mod:`gpustrata_policies.view.launchers`, which re-exports it; read by
:mod:`gpustrata_policies.view.engines` (the preset's engine sites)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.vllm.flags import parse_flags
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig
from gpustrata_policies.view.vllm_args import EngineArgs, preset_engine
from gpustrata_policies.view.workloads import llmisvc_spec

__all__ = [
    "KSERVE_ADDITIONAL_ARGS",
    "KSERVE_MODEL_MOUNT",
    "KSERVE_PRESET_SOURCE",
    "KSERVE_STORAGE",
    "PRESET_RULES",
    "UNJUDGED_RULES",
    "llmisvc_engine",
    "llmisvc_models",
    "main_container",
    "preset_judged",
    "preset_unjudged",
]

KSERVE_PRESET_SOURCE = "kserve/kserve@aaac4e2:config/llmisvcconfig"
"""Where KServe's LLMInferenceServiceConfig presets write the vLLM command line
(``config-llm-template.yaml``: ``vllm serve /mnt/models --served-model-name ... [--tensor-
parallel-size <parallelism.tensor>] ${VLLM_ADDITIONAL_ARGS}``;
``config-llm-worker-data-parallel.yaml``: also ``--data-parallel-size <data or 1>
--data-parallel-size-local <dataLocal or 1>`` and ``--enable-expert-parallel``), the image,
the probes and ``/dev/shm``."""


def main_container(spec: Any) -> Mapping[str, Any]:
    for c in as_list(dig(spec, "containers"), "containers"):
        if isinstance(c, Mapping) and c.get("name") == "main":
            return c
    return {}


def llmisvc_engine(obj: K8sObject, part: str = "template") -> EngineArgs | None:
    """The engine a KServe LLMInferenceService runs in ``spec.<part>`` (``template`` or
    ``worker``) when it states no command of its own: the preset's command line
    (:data:`KSERVE_PRESET_SOURCE`) with ``spec.parallelism`` and the main container's
    ``VLLM_ADDITIONAL_ARGS``; None where the manifest states the command (then the
    container is read as written) or has no such part."""
    whole = llmisvc_spec(obj)
    spec = dig(whole, part)
    if not isinstance(spec, Mapping):
        return None
    main = main_container(spec)
    if main.get("command") is not None:
        return None
    parallelism = as_map(dig(whole, "parallelism"), "spec.parallelism")
    words = ["vllm", "serve", "/mnt/models"]
    tensor = parallelism.get("tensor")
    if tensor:
        words += ["--tensor-parallel-size", str(tensor)]
    if dig(whole, "worker") is not None:
        if not (parallelism.get("data") or parallelism.get("dataLocal")):
            return None  # the pipeline-parallel worker preset: not read
        # the data-parallel worker preset
        if parallelism.get("expert") is True:
            words.append("--enable-expert-parallel")
        words += ["--data-parallel-size", str(parallelism.get("data") or 1)]
        words += ["--data-parallel-size-local", str(parallelism.get("dataLocal") or 1)]
    env = {
        str(e["name"]): str(e["value"])
        for e in as_list(main.get("env"), "env")
        if isinstance(e, Mapping) and isinstance(e.get("name"), str)
        if isinstance(e.get("value"), str | int | float)
    }
    if _additional_args_unset(whole, main):
        env["VLLM_ADDITIONAL_ARGS"] = ""  # unset: the preset's ${VLLM_ADDITIONAL_ARGS} is empty
    script = " ".join(words) + " ${VLLM_ADDITIONAL_ARGS}"
    uri = dig(whole, "model", "uri")
    held = f"; /mnt/models holds spec.model.uri {uri}" if isinstance(uri, str) and uri else ""
    engine = preset_engine(f"the KServe preset's vLLM command ({part}{held})", script, env)
    if engine is not None:
        args = main.get("args")
        if isinstance(args, list):  # the template's args reach `vllm serve` as "$@"
            parse_flags([str(a) for a in args], engine.values, engine.written)
    return engine


KSERVE_STORAGE = "kserve/kserve@v0.20.0:pkg/controller/v1alpha2/llmisvc/workload_storage.go"
"""Where the controller attaches ``spec.model.uri`` at ``/mnt/models`` (for messages;
:data:`KSERVE_MODEL_MOUNT` gives the whole trail)."""
KSERVE_MODEL_MOUNT = (
    "kserve/kserve@v0.20.0:pkg/controller/v1alpha2/llmisvc/workload_storage.go "
    "(attachModelArtifacts: spec.model.uri to constants.DefaultModelLocalMountPath, "
    "/mnt/models, pkg/constants/constants.go) and python/storage/kserve_storage/"
    "kserve_storage.py (_download_hf: hf://owner/model[:revision] is the Hub repository "
    "owner/model)"
)
"""Where KServe puts an LLMInferenceService's ``spec.model.uri`` at ``/mnt/models``, the
path its presets serve: an ``hf://`` model is downloaded there by the storage initializer,
a ``pvc://`` one mounted there."""


def llmisvc_models(obj: K8sObject) -> tuple[str, ...]:
    """The names the model a KServe preset serves from ``/mnt/models`` goes by
    (:data:`KSERVE_MODEL_MOUNT`): the Hugging Face repository of an ``hf://owner/model
    [:revision]`` URI; for any other URI (``pvc://``, ``s3://``) the URI itself, then
    ``spec.model.name``, the name the preset serves it under (``--served-model-name``), as
    a path served under its Hugging Face name is read for any engine
    (:func:`~gpustrata_policies.view.capacity.resolve_model`)."""
    model = as_map(dig(llmisvc_spec(obj), "model"), "spec.model")
    uri, name = model.get("uri"), model.get("name")
    if uri is UNKNOWN or name is UNKNOWN:
        raise UnknownInput("spec.model of the LLMInferenceService")
    if not isinstance(uri, str) or not uri:
        return ()
    if uri.startswith("hf://"):
        parts = uri.removeprefix("hf://").split("/")
        if len(parts) == 2 and all(parts):
            return (f"{parts[0]}/{parts[1].partition(':')[0]}",)
        return (uri,)
    return (uri, name) if isinstance(name, str) and name else (uri,)


KSERVE_ADDITIONAL_ARGS = (
    "kserve/kserve@v0.16.0..v0.20.0:config/llmisvcconfig (no preset sets VLLM_ADDITIONAL_ARGS); "
    "kserve/kserve@v0.20.0:pkg/controller/v1alpha2/llmisvc/workload_lora.go (the controller "
    "reads it for LoRA adapters)"
)
"""Where ``VLLM_ADDITIONAL_ARGS`` comes from: the service's ``main`` container alone (no
preset of a catalogued release sets it), so a container that states it neither in ``env``
nor through ``envFrom`` runs the preset's command with it empty."""


def _additional_args_unset(spec: Mapping[str, Any], main: Mapping[str, Any]) -> bool:
    """Is ``VLLM_ADDITIONAL_ARGS`` empty for a ``main`` container that does not list it
    (:data:`KSERVE_ADDITIONAL_ARGS`)? Not where an ``envFrom`` may set it, nor where
    ``spec.model`` names more than its URI and name (LoRA adapters, a speculator: the
    controller writes flags for those into the container)."""
    model = dig(spec, "model")
    extra = isinstance(model, Mapping) and any(k not in ("uri", "name") for k in model)
    listed = any(
        isinstance(e, Mapping) and e.get("name") == "VLLM_ADDITIONAL_ARGS"
        for e in as_list(main.get("env"), "env")
    )  # with a value, or a valueFrom only the cluster resolves
    return not listed and not main.get("envFrom") and not extra


PRESET_RULES = "V001 to V004 and V007"
"""The rules handed a KServe preset's engine (``presets=True`` in :func:`~gpustrata_policies.
view.engines.engine_sites`): GPUs per Pod, the model's heads and layers, its weights and
one sequence against GPU memory, gpu_memory_utilization's range and a shared GPU; none
needs the vLLM release."""
UNJUDGED_RULES = "V005, V006 and V008 to V013"
"""The engine rules not handed a preset's engine: their verdicts read the vLLM release's
defaults and flags, the preset's probes, or what its script adds at run time."""


def preset_judged(spec: Any) -> str:
    """What the release-independent rules judge of a preset's engine, and where its model
    comes from."""
    uri = dig(spec, "model", "uri")
    model = (
        f"the model spec.model.uri {uri}, which KServe puts at /mnt/models ({KSERVE_STORAGE})"
        if isinstance(uri, str) and uri
        else "no spec.model.uri, so no model"
    )
    return f"{PRESET_RULES} judge that engine (the GPUs it needs; {model})"


def preset_unjudged(spec: Any) -> str:
    """Why the release-dependent engine rules do not judge a preset's engine: the image the
    template states (an llm-d build: no vLLM release mapped) or that it states none."""
    image = main_container(dig(spec, "template")).get("image")
    if image is UNKNOWN:
        raise UnknownInput("image of the LLMInferenceService's main container")
    if isinstance(image, str) and "/llm-d/" in image:
        why = (
            f"its image {image} is an llm-d build whose vLLM is mapped to no release (llm-d "
            "builds it from a fork commit: catalogue note in vllm-releases.yaml)"
        )
    elif isinstance(image, str):
        why = f"the flags the preset's script adds depend on the release it finds in {image}"
    else:
        why = "the image is the preset's"
    return f"{UNJUDGED_RULES} (release-dependent) are not evaluated on it: {why}"
