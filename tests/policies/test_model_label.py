"""Issue 30, session 22: a model given as a path that names no catalogued model, read as the
model its Pod label ``ai.gke.io/model`` names (:func:`~gpustrata_policies.view.engines.
labelled_architecture`).

The real-shaped case is GKE's NeMo RL sample (tests/data/field-corpus-2/
gke-nemo-rl-nvidia-vllm-gemma3-27b.yaml): vLLM serves ``/data/nemo_rl_gemma3_27b_3_11/hf3-11``
(a post-trained Gemma 3 27B checkpoint) from Pods labelled ``ai.gke.io/model:
gemma-3-27b-it``. Before, V002/V003/V004/V009/V012 were "not in the model catalogue".

Likewise a kthena ModelBooster's engine serves the cache path kthena downloads
``spec.backend.modelURI`` to, and the model is the one that URI names
(:func:`~gpustrata_policies.view.controllers.downloaded_model`)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import to_objects
from gpustrata_policies.inputs.manifests import load_paths

NEMO_RL = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "field-corpus-2"
    / "gke-nemo-rl-nvidia-vllm-gemma3-27b.yaml"
)
MODEL_RULES = ("V002", "V003", "V004", "V009", "V012")


def _deployment() -> dict[str, Any]:
    obj = next(o for o in load_paths([str(NEMO_RL)]) if o.kind == "Deployment")
    return copy.deepcopy(dict(obj.raw))


def _records(doc: dict[str, Any]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(rule -> finding messages, rule -> not-evaluated reasons) on *doc* alone."""
    report = evaluate(to_objects([doc]))
    found: dict[str, list[str]] = {}
    unjudged: dict[str, list[str]] = {}
    for f in report.findings:
        found.setdefault(f.rule, []).append(f.message)
    for n in report.not_evaluated:
        unjudged.setdefault(n.rule, []).append(n.reason)
    return found, unjudged


def test_labelled_path_is_judged_as_the_labelled_model() -> None:
    """The sample as published: TP 4 divides Gemma 3 27B's 32 heads and 16 KV heads, its
    weights and 4 x 4096 tokens fit 4 H100 80GB: the model rules pass (none is left "not in
    the model catalogue"); V001 (8 GPUs for TP 4) is unchanged."""
    found, unjudged = _records(_deployment())
    assert not any(rule in unjudged for rule in MODEL_RULES), unjudged
    assert not any(rule in found for rule in MODEL_RULES), found
    assert "V001" in found


def test_finding_names_the_label_as_the_models_source() -> None:
    """The same Pod on one L4 (24 GB) with TP 1: Gemma 3 27B's ~51 GiB of weights do not fit,
    and the finding says which model it judged and that the Pod label named it."""
    doc = _deployment()
    pod = doc["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    container = pod["containers"][0]
    container["args"] = [a for a in container["args"] if "tensor-parallel" not in a]
    container["resources"] = {
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"nvidia.com/gpu": "1"},
    }
    found, _ = _records(doc)
    [v003] = found["V003"]
    assert "/data/nemo_rl_gemma3_27b_3_11/hf3-11 (google/gemma-3-27b-it, as its Pod label " in v003
    assert "ai.gke.io/model names it)" in v003


def test_without_the_label_the_path_stays_uncatalogued() -> None:
    """Regression: the label is the only thing that names the model; without it every model
    rule is "not in the model catalogue" as before."""
    doc = _deployment()
    del doc["spec"]["template"]["metadata"]["labels"]["ai.gke.io/model"]
    found, unjudged = _records(doc)
    for rule in MODEL_RULES:
        assert rule not in found
        [reason] = unjudged[rule]
        assert "not in the model catalogue" in reason


def test_label_naming_no_catalogued_model_is_not_read() -> None:
    """A label naming a model the catalogue does not hold decides nothing."""
    doc = _deployment()
    doc["spec"]["template"]["metadata"]["labels"]["ai.gke.io/model"] = "my-own-model-7b"
    _, unjudged = _records(doc)
    assert all("not in the model catalogue" in unjudged[rule][0] for rule in MODEL_RULES)


def test_label_is_not_read_for_a_hub_id() -> None:
    """A Hugging Face id that is not catalogued is a model of its own, not a checkpoint of
    the labelled one: the label is read only for a path or bucket."""
    doc = _deployment()
    for env in doc["spec"]["template"]["spec"]["containers"][0]["env"]:
        if env["name"] == "MODEL_ID":
            env["value"] = "acme/gemma-3-27b-it-remix"
    _, unjudged = _records(doc)
    assert all("not in the model catalogue" in unjudged[rule][0] for rule in MODEL_RULES)


KTHENA = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "field-corpus-3"
    / "kthena-booster-deepseek-r1-distill-llama-8b.yaml"
)


def _booster(product: str | None = None) -> dict[str, Any]:
    obj = next(o for o in load_paths([str(KTHENA)]) if o.kind == "ModelBooster")
    doc = copy.deepcopy(dict(obj.raw))
    if product is not None:
        term = {"key": "nvidia.com/gpu.product", "operator": "In", "values": [product]}
        doc["spec"]["backend"]["workers"][0]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        }
    return doc


def test_kthena_booster_model_is_the_one_its_model_uri_names() -> None:
    """volcano-sh/kthena's ModelBooster sample: the engine serves the cache path
    ``/tmp/test/<md5 of modelURI>``, which names no model; the model is the one
    ``s3://model-bucket/deepseek-r1-distill-llama-8b`` names (last component, as a --model
    path is read). On a T4 its 16 GB of weights do not fit, and the finding says so."""
    found, unjudged = _records(_booster("Tesla-T4"))
    [v003] = found["V003"]
    assert "(deepseek-ai/DeepSeek-R1-Distill-Llama-8B, the model " in v003
    assert "s3://model-bucket/deepseek-r1-distill-llama-8b names)" in v003
    assert not any("not in the model catalogue" in r for rs in unjudged.values() for r in rs)


def test_kthena_booster_model_uri_naming_no_model_stays_unknown() -> None:
    """Regression: a modelURI whose last component names no catalogued model leaves the
    model unknown, and the record names both the cache path and the URI."""
    doc = _booster("Tesla-T4")
    doc["spec"]["backend"]["modelURI"] = "s3://model-bucket/our-finetune"
    _, unjudged = _records(doc)
    [reason] = unjudged["V003"]
    assert "not in the model catalogue" in reason
    assert "'s3://model-bucket/our-finetune'" in reason
