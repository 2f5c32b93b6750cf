"""Issue 30, session 20: the engine a KServe preset writes for an LLMInferenceService that
states no command is judged by the rules whose verdict needs no vLLM release (V001 to V004),
its model the one ``spec.model.uri`` names (KServe puts it at ``/mnt/models``, the path the
preset serves: kserve/kserve@v0.20.0:pkg/controller/v1alpha2/llmisvc/workload_storage.go);
the release-dependent rules (V005 to V013) stay "not evaluated" in the object's record.

Each case is KServe's own single-node sample (tests/data/field-corpus-1/
kserve-kserve-llmisvc-qwen2-7b-gpu.yaml, kserve/kserve@d3b0024) with the one field the case
needs changed: a GPU selector, ``spec.parallelism``, how ``VLLM_ADDITIONAL_ARGS`` is given."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import find_rule, load_config, to_objects
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view.engines import engine_sites
from gpustrata_policies.view.launchers import llmisvc_engine, llmisvc_models
from gpustrata_policies.view.objects import K8sObject

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLE = DATA / "field-corpus-1" / "kserve-kserve-llmisvc-qwen2-7b-gpu.yaml"


def _sample() -> dict[str, Any]:
    (obj,) = load_paths([str(SAMPLE)])
    return copy.deepcopy(dict(obj.raw))


def _on(product: str, doc: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sample pinned to a GPU by its GPU Feature Discovery product label."""
    doc = doc or _sample()
    doc["spec"]["template"]["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return doc


def _main(doc: dict[str, Any]) -> dict[str, Any]:
    main: dict[str, Any] = doc["spec"]["template"]["containers"][0]
    return main


def _report(doc: dict[str, Any]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(findings, not-evaluated reasons) by rule."""
    report = evaluate(to_objects([doc]))
    found: dict[str, list[str]] = {}
    for f in report.findings:
        found.setdefault(f.rule, []).append(f.message)
    unjudged: dict[str, list[str]] = {}
    for n in report.not_evaluated:
        unjudged.setdefault(n.rule, []).append(n.reason)
    return found, unjudged


def test_weights_too_large_for_the_gpu_the_service_selects() -> None:
    """Qwen2.5-7B (15.2 GB of bf16 weights) on one T4 (15 GiB): V003, with the model read
    from spec.model.uri and the preset named in the message."""
    found, unjudged = _report(_on("Tesla-T4"))
    (message,) = found["V003"]
    assert "Qwen/Qwen2.5-7B-Instruct" in message
    assert "the KServe preset's vLLM command (template" in message
    assert "spec.model.uri hf://Qwen/Qwen2.5-7B-Instruct" in message
    assert "V003" not in unjudged


def test_the_sample_fits_an_l4_and_the_release_rules_stay_in_its_record() -> None:
    found, unjudged = _report(_on("NVIDIA-L4"))
    assert not {"V001", "V002", "V003", "V004"} & (set(found) | set(unjudged))
    (record,) = unjudged["*"]
    assert "V001 to V004 and V007 judge that engine" in record
    assert "V005, V006 and V008 to V013 (release-dependent) are not evaluated on it" in record
    assert "set versions.kserve in the cluster profile" in record


def test_without_a_gpu_the_memory_rules_say_which_gpus_it_fits() -> None:
    """The corpus sample itself: no GPU selector, so V003 is judged on every catalogued GPU
    and splits (the 16 GiB ones are too small); V004 passes wherever the weights fit."""
    _, unjudged = _report(_sample())
    (reason,) = unjudged["V003"]
    assert "it fails (weights-too-large) on t4, v100-pcie-16gb and v100-sxm-16gb" in reason
    assert "set gpu_products or pools in the cluster profile" in reason
    assert "V004" not in unjudged


def test_tensor_parallel_size_beyond_the_pods_gpus() -> None:
    """spec.parallelism.tensor 2 becomes the preset's --tensor-parallel-size 2; the Pod asks
    for 1 GPU: V001."""
    doc = _on("NVIDIA-L4")
    doc["spec"]["parallelism"] = {"tensor": 2}
    found, _ = _report(doc)
    (message,) = found["V001"]
    assert "tensor_parallel_size 2" in message and "the KServe preset's vLLM command" in message


def test_tensor_parallel_size_that_does_not_divide_the_heads() -> None:
    """Qwen2.5-7B has 28 attention heads: TP 3 over 3 GPUs does not divide them (V002)."""
    doc = _on("NVIDIA-L4")
    doc["spec"]["parallelism"] = {"tensor": 3}
    for section in ("limits", "requests"):
        _main(doc)["resources"][section]["nvidia.com/gpu"] = "3"
    found, _ = _report(doc)
    assert "V002" in found and "V001" not in found


@pytest.mark.parametrize(
    "given",
    [
        {"env": [{"name": "VLLM_ADDITIONAL_ARGS", "valueFrom": {"configMapKeyRef": {}}}]},
        {"envFrom": [{"configMapRef": {"name": "vllm-args"}}]},
    ],
    ids=["valueFrom", "envFrom"],
)
def test_additional_args_the_cluster_holds_leave_the_settings_unknown(
    given: dict[str, Any],
) -> None:
    """VLLM_ADDITIONAL_ARGS from a ConfigMap: the preset's command may take any flag, so the
    memory rules say so instead of reading vLLM's defaults."""
    doc = _on("NVIDIA-L4")
    _main(doc).update(copy.deepcopy(given))
    engine = llmisvc_engine(K8sObject(doc))
    assert engine is not None and not engine.complete
    _, unjudged = _report(doc)
    assert any("may take further flags from outside" in r for r in unjudged["V003"])


def test_an_unset_additional_args_is_empty() -> None:
    """No preset of a catalogued KServe release sets VLLM_ADDITIONAL_ARGS, so a container
    that does not list it runs the preset's command without it (the sample)."""
    engine = llmisvc_engine(K8sObject(_sample()))
    assert engine is not None and engine.complete and engine.values == {}


def test_model_names_from_the_uri() -> None:
    doc = _sample()
    assert llmisvc_models(K8sObject(doc)) == ("Qwen/Qwen2.5-7B-Instruct",)
    doc["spec"]["model"]["uri"] = "hf://Qwen/Qwen2.5-7B-Instruct:a09a354"  # a revision
    assert llmisvc_models(K8sObject(doc)) == ("Qwen/Qwen2.5-7B-Instruct",)
    doc["spec"]["model"]["uri"] = "pvc://models/qwen"  # served under spec.model.name
    assert llmisvc_models(K8sObject(doc)) == ("pvc://models/qwen", "Qwen/Qwen2.5-7B-Instruct")


def test_release_dependent_rules_are_not_handed_the_preset_engine() -> None:
    """Only a rule that asks (presets=True) sees the preset's engine."""
    objs = to_objects([_on("NVIDIA-L4")])
    (obj,) = objs
    ctx = RuleContext(find_rule("V001").meta, load_config(None), objs)
    assert engine_sites(ctx, obj) == []
    (site,) = engine_sites(ctx, obj, presets=True)
    assert site.preset and site.models == ("Qwen/Qwen2.5-7B-Instruct",)


def _dp_sites(doc: dict[str, Any]) -> list[Any]:
    objs = to_objects([doc])
    ctx = RuleContext(find_rule("V001").meta, load_config(None), objs)
    return engine_sites(ctx, objs[0], presets=True)


def test_the_data_parallel_preset_is_one_engine_on_identical_pods() -> None:
    """KServe's DP/EP sample (tests/data/launchers, kserve/kserve docs/samples/llmisvc/dp-ep):
    template and worker run the same preset command on the same GPUs, so the rules judge it
    once for both Pods; a worker pinned to another GPU is judged on its own."""
    (obj,) = load_paths(
        [str(DATA / "launchers" / "kserve-llmisvc-dp-ep-deepseek-r1-gpu-naive.yaml")]
    )
    doc = copy.deepcopy(dict(obj.raw))
    (site,) = _dp_sites(doc)
    assert "(template and worker;" in site.label and len(site.pods) == 2
    doc["spec"]["worker"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    template, worker = _dp_sites(doc)
    assert "(template;" in template.label and "(worker;" in worker.label


def test_memory_fraction_out_of_range_in_the_additional_args() -> None:
    """V007 needs no release: vLLM refuses gpu_memory_utilization 1.5 in every release."""
    doc = _on("NVIDIA-L4")
    _main(doc)["env"] = [{"name": "VLLM_ADDITIONAL_ARGS", "value": "--gpu-memory-utilization 1.5"}]
    found, _ = _report(doc)
    (message,) = found["V007"]
    assert "1.5" in message


def test_a_main_container_read_as_its_own_engine_is_not_judged_twice() -> None:
    """A vllm-openai image with args and no command is already an engine site of its own
    (read as before this change): no second, preset site for the same container."""
    doc = _on("NVIDIA-L4")
    _main(doc).update({"image": "vllm/vllm-openai:v0.10.1", "args": ["--max-model-len", "4096"]})
    (site,) = _dp_sites(doc)
    assert not site.preset
