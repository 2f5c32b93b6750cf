"""Issue 30, session 21: records that said "the GPU model is unknown" where naming the GPU
would not have decided them, or where every GPU the engine may run on gives one verdict.

- V010 on an engine whose vLLM release is known (a V0 release) and whose GPU is not: the
  longest step is judged on every candidate GPU (as V003/V004 do), decided where all agree.
- R007 on a Ray Serve LLM engine whose release is known and GPU is not: the default
  max_num_seqs on every candidate GPU against the autoscaling target, decided where all agree.
- V003/V004/V012 on an engine whose model or settings are unknown too: the record names
  that cause first (``--models DIR``, the flags), the GPU's after it.

Each case is a field-corpus sample (tests/data/field-corpus-*/, the file named in each test)
with the one field it needs changed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import to_objects
from gpustrata_policies.inputs.manifests import load_paths

DATA = Path(__file__).resolve().parents[1] / "data"
OPENSHIFT = DATA / "field-corpus-3" / "llm-on-openshift-vllm-gpu-deployment.yaml"
V010_BAD = (
    Path(__file__).resolve().parents[2]
    / "policies/gpustrata_policies/rules/v010_liveness_outlasts_longest_step"
    / "bad-v0-step-marks-engine-dead.yaml"
)
SERVE_LLM = DATA / "field-corpus-1" / "ray-project-kuberay-ray-service-llm-serve.yaml"
KTHENA = DATA / "field-corpus-3" / "kthena-booster-deepseek-r1-distill-llama-8b.yaml"
GIE = DATA / "field-corpus-3" / "production-stack-gie-gpu-deployment.yaml"
GPU_REASON = "the GPU model is unknown: the Pod selects no nvidia.com/gpu.product"


def _first(path: Path, kind: str) -> dict[str, Any]:
    obj = next(o for o in load_paths([str(path)]) if o.kind == kind)
    return copy.deepcopy(dict(obj.raw))


def _report(doc: dict[str, Any], rule: str) -> tuple[list[str], list[str]]:
    """(finding messages, not-evaluated reasons) of *rule* on *doc* alone."""
    report = evaluate(to_objects([doc]))
    found = [f.message for f in report.findings if f.rule == rule]
    unjudged = [n.reason for n in report.not_evaluated if n.rule == rule]
    return found, unjudged


def test_v010_v0_step_short_on_every_gpu_passes() -> None:
    """rh-aiservices-bu's Deployment: vLLM 0.4.2 (V0, the image pins vllm==0.4.2), Mistral-7B
    at --max-model-len 6144 with no GPU named: the longest step is seconds on every GPU it
    starts on, far below the V0 engine's limit, so V010 passes (before: "GPU unknown")."""
    found, unjudged = _report(_first(OPENSHIFT, "Deployment"), "V010")
    assert found == [] and unjudged == []


def test_v010_v0_step_depends_on_the_gpu() -> None:
    """V010's own bad sample (vLLM 0.6.3.post1, Llama-3.1-8B, 131072 tokens, chunked prefill
    off) without its instance type: the step outlasts the heartbeat on the A100 80GB and RTX
    PRO 6000, not on H100 and larger; the GPUs it does not start on are named apart."""
    doc = _first(V010_BAD, "Deployment")
    del doc["spec"]["template"]["spec"]["nodeSelector"]
    found, (reason,) = _report(doc, "V010")
    assert found == []
    assert reason.startswith("container 'vllm': " + GPU_REASON)
    assert "fails (step-outlasts-v0-heartbeat) on a100-pcie-80gb, a100-sxm-80gb" in reason
    assert "passes on h100-pcie-80gb" in reason
    assert "does not start (V003/V004) on the other 14" in reason
    assert reason.endswith("(set gpu_products or pools in the cluster profile)")


def test_v010_with_the_gpu_named_is_unchanged() -> None:
    """The bad sample as it is (g6e.2xlarge): still V010's finding on that GPU."""
    found, _ = _report(_first(V010_BAD, "Deployment"), "V010")
    assert len(found) == 1 and "on the V0 engine" in found[0]


def _serve(target: int) -> dict[str, Any]:
    doc = _first(SERVE_LLM, "RayService")
    config = yaml.safe_load(doc["spec"]["serveConfigV2"])
    llm = config["applications"][0]["args"]["llm_configs"][0]
    llm["deployment_config"]["autoscaling_config"]["target_ongoing_requests"] = target
    doc["spec"]["serveConfigV2"] = yaml.safe_dump(config)
    return doc


def test_r007_target_below_every_gpus_default_batch_passes() -> None:
    """KubeRay's Ray Serve LLM sample (ray-llm 2.50.1, vLLM 0.10.2; no GPU named): target 64
    is within twice the default max_num_seqs on every GPU (256 or 1024), so R007 passes
    (before: "its default on this GPU is not known")."""
    found, unjudged = _report(_serve(64), "R007")
    assert found == [] and unjudged == []


def test_r007_target_between_the_defaults_names_the_gpus() -> None:
    """Target 600: above twice 256 (the smaller GPUs' default), below twice 1024 (the larger
    ones'): not evaluated, naming both sides and the profile key."""
    found, (reason,) = _report(_serve(600), "R007")
    assert found == []
    assert "whether the target sits near its default batch depends on the GPU: " in reason
    assert "fails (target-above-batch) on" in reason and "passes on h100-pcie-80gb" in reason
    assert "set gpu_products or pools in the cluster profile" in reason


def test_r007_target_above_every_default_is_a_finding_naming_the_set() -> None:
    """Target 3000: above twice 1024, the largest default, on every GPU it starts on."""
    (message,), unjudged = _report(_serve(3000), "R007")
    assert unjudged == []
    assert "on every catalogued GPU it can start on (23 models" in message
    assert "max_num_seqs 1024" in message


def test_model_unknown_too_is_named_first() -> None:
    """kthena's ModelBooster with a modelURI that names no catalogued model (the sample's
    names DeepSeek-R1-Distill-Llama-8B, read since session 22): naming the GPU would not
    decide V003, so the record names --models DIR first, the GPU key after."""
    doc = _first(KTHENA, "ModelBooster")
    doc["spec"]["backend"]["modelURI"] = "s3://model-bucket/our-finetune"
    _, (reason,) = _report(doc, "V003")
    model = reason.index("is not in the model catalogue")
    assert model < reason.index(GPU_REASON)
    assert "check --models DIR" in reason


def test_flags_outside_the_manifest_too_are_named_first() -> None:
    """The gateway-api-inference-extension sample passes "$@" to vLLM: the flags decide V003
    before the GPU does."""
    _, (reason,) = _report(_first(GIE, "Deployment"), "V003")
    assert reason.index("further flags from outside the manifest") < reason.index(GPU_REASON)


def test_gpu_alone_unknown_keeps_its_reason() -> None:
    """A known model and settings with no GPU: the record is the GPU's sweep, as before."""
    _, (reason,) = _report(_first(OPENSHIFT, "Deployment"), "V003")
    assert reason.startswith("container 'server': " + GPU_REASON)
    assert "it fails (weights-too-large) on t4, v100-pcie-16gb and v100-sxm-16gb" in reason


AIBRIX_FLEET = DATA / "field-corpus-2" / "aibrix-deepseek-r1-huggingface.yaml"


def _fleet(**worker: Any) -> dict[str, Any]:
    """AIBrix's DeepSeek-R1 RayClusterFleet (vllm-project/aibrix samples): the head runs
    `vllm serve --tensor-parallel-size 16 --distributed-executor-backend ray` with 8 GPUs, one
    worker group of 1 Pod with 8; *worker* overrides that group's fields."""
    doc = _first(AIBRIX_FLEET, "RayClusterFleet")
    doc["spec"]["template"]["spec"]["workerGroupSpecs"][0].update(worker)
    return doc


def test_v001_ray_head_whose_cluster_holds_exactly_the_engine_passes() -> None:
    """Head 8 + 1 worker x 8 = 16 = TP 16: the engine's workers fill the cluster (before:
    "the GPUs beyond its own 8 come from the Ray cluster it joins")."""
    found, unjudged = _report(_fleet(), "V001")
    assert found == [] and unjudged == []


def test_v001_ray_head_with_more_or_varying_cluster_gpus_stays_not_evaluated() -> None:
    """Two workers (24 GPUs), or an autoscaled group from 0 to 1: the cluster's other GPUs
    may serve other work, so the record stands (no finding is made up)."""
    for doc in (_fleet(replicas=2, minReplicas=2, maxReplicas=2), _autoscaled()):
        found, (reason,) = _report(doc, "V001")
        assert found == [] and "come from the Ray cluster it joins" in reason


def _autoscaled() -> dict[str, Any]:
    doc = _fleet(replicas=1, minReplicas=0, maxReplicas=1)
    doc["spec"]["template"]["spec"]["enableInTreeAutoscaling"] = True
    return doc


def test_v001_ray_head_whose_cluster_cannot_hold_the_engine() -> None:
    """No worker Pods (replicas 0): the cluster advertises the head's 8 GPUs for TP 16, so the
    placement group never fits: V001's finding (was "not evaluated")."""
    (message,), unjudged = _report(_fleet(replicas=0, minReplicas=0, maxReplicas=0), "V001")
    assert unjudged == []
    assert "advertise at most 8 GPUs" in message and "never fits" in message


def test_v001_ray_head_with_ray_address_keeps_its_record() -> None:
    """A RAY_ADDRESS may point the engine at another cluster: not counted."""
    doc = _fleet(replicas=0, minReplicas=0, maxReplicas=0)
    head = doc["spec"]["template"]["spec"]["headGroupSpec"]["template"]["spec"]
    head["containers"][0]["env"].append({"name": "RAY_ADDRESS", "value": "ray://other:10001"})
    found, (reason,) = _report(doc, "V001")
    assert found == [] and "come from the Ray cluster it joins" in reason
