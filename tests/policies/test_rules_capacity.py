"""The capacity rules V003, V004, V009, V010 and V012: the planner's numbers behind their
messages, the inputs they read from manifests, and the reference stacks. Their fixtures and
exact findings: the rule folders, run by ``test_rule_folders.py``."""

from __future__ import annotations

import copy
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from _release import REFERENCE_IMAGE
from conftest import REPO, fixture, fixture_files, fixture_id

from gpustrata_policies import evaluate
from gpustrata_policies.config import ConfigError
from gpustrata_policies.evaluate import find_rule, load_config, to_objects
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import capacity as _capacity

sys.path.insert(0, str(REPO / "tests"))
from _stacks import STACKS

RULE_IDS = ("V003", "V004", "V009", "V010", "V012")


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def _findings(docs: list[dict[str, Any]], rule: str, config: Any = None) -> list[str]:
    report = evaluate(docs, config=config)
    return [f.message for f in report.findings if f.rule == rule]


def _not_evaluated(docs: list[dict[str, Any]], rule: str) -> list[str]:
    return [n.reason for n in evaluate(docs).not_evaluated if n.rule == rule]


def _inputs(docs: list[dict[str, Any]]) -> list[_capacity.Inputs]:
    """The capacity inputs of every engine in *docs* (all must be evaluable)."""
    objs = to_objects(docs)
    rule = find_rule("V003")
    assert rule is not None
    ctx = RuleContext(rule.meta, load_config(None), objs)
    out: list[_capacity.Inputs] = []
    for obj in objs:
        for site in _capacity.engine_sites(ctx, obj):
            found = _capacity.capacity_inputs(ctx, site)
            assert not isinstance(found, str), found
            out.extend(found)
    return out


def _container(docs: list[dict[str, Any]], index: int = 0) -> dict[str, Any]:
    c: dict[str, Any] = docs[index]["spec"]["template"]["spec"]["containers"][0]
    return c


def _set_flag(docs: list[dict[str, Any]], flag: str, value: str, index: int = 0) -> None:
    c = _container(docs, index)
    key = "command" if "command" in c else "args"
    argv = c[key]
    argv[argv.index(flag) + 1] = value


# --------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize("path", fixture_files("good", RULE_IDS), ids=fixture_id)
def test_good_fixture_is_really_evaluated(path: Path) -> None:
    """The folder runner checks that these good fixtures are clean and nothing is "not
    evaluated"; here: they do reach the capacity estimate (an engine is sized)."""
    assert _inputs(_docs(path)), "no engine was evaluated"


# --------------------------------------------------------------------------- the planner's numbers


def test_v003_numbers_and_fix_come_from_the_planner() -> None:
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.vllm.capacity import estimate_capacity, gib

    arch = load_model_catalog().get("meta-llama/Llama-3.1-70B-Instruct")
    l4 = load_hardware_catalog().gpu("NVIDIA-L4")
    assert arch is not None and l4 is not None
    est = estimate_capacity(arch, l4, max_model_len=8192)
    [message] = _findings(_docs(fixture("V003", "bad-70b-on-one-l4.yaml")), "V003")
    assert not est.weights_fit
    assert f"weights take {gib(est.weights.bytes_per_gpu)} per GPU" in message
    # The fix names the smallest TP that fits: 4 does not, 8 does.
    assert not estimate_capacity(arch, l4, max_model_len=8192, tensor_parallel_size=4).weights_fit
    tp8 = estimate_capacity(arch, l4, max_model_len=8192, tensor_parallel_size=8)
    assert tp8.weights_fit
    assert f"tensor_parallel_size 8 on {l4.name} ({gib(tp8.weights.bytes_per_gpu)}" in message


def test_v004_largest_max_model_len_is_the_boundary() -> None:
    docs = _docs(fixture("V004", "bad-full-context-on-l4.yaml"))[:1]
    [inp] = _inputs(docs)
    largest = inp.estimate.kv.largest_max_model_len
    [message] = _findings(docs, "V004")
    assert f"set max_model_len to at most {largest:,}" in message
    _set_flag(docs, "--max-model-len", str(largest))
    assert _findings(docs, "V004") == []
    _set_flag(docs, "--max-model-len", str(largest + 1))
    assert len(_findings(docs, "V004")) == 1


def test_v004_leaves_weights_that_do_not_fit_to_v003() -> None:
    docs = _docs(fixture("V003", "bad-70b-on-one-l4.yaml"))
    assert _findings(docs, "V004") == [] and len(_findings(docs, "V003")) == 1


def test_v012_fix_is_the_largest_reachable_max_num_seqs() -> None:
    docs = _docs(fixture("V012", "bad-1024-seqs-on-l4.yaml"))
    [message] = _findings(docs, "V012")
    best = int(message.split("set max_num_seqs to at most ")[1].split(" ")[0])
    assert 1 < best < 1024
    _set_flag(docs, "--max-num-seqs", str(best))
    assert _findings(docs, "V012") == []
    _set_flag(docs, "--max-num-seqs", str(best + 1))
    assert len(_findings(docs, "V012")) == 1


def test_v012_search_from_the_held_sequences_is_the_binary_search() -> None:
    """V012 searches upward from the sequences the KV cache holds at the stated max_num_seqs:
    for every threshold, bound and start (passing or not), the binary search's answer, in
    fewer probes when the answer is near the start."""
    from gpustrata.vllm.capacity import largest_passing
    from gpustrata_policies.rules.v012_concurrency_within_kv.rule import _largest_from

    for high in range(0, 40):
        for threshold in range(0, high + 1):
            for start in range(-1, high + 2):
                probes: list[int] = []

                def holds(n: int, t: int = threshold, seen: list[int] = probes) -> bool:
                    seen.append(n)
                    return n <= t

                def below(n: int, t: int = threshold) -> bool:
                    return n <= t

                expected = largest_passing(below, high)
                assert _largest_from(holds, start, high, largest_passing) == expected
                if 1 <= start <= threshold:  # about 2 log2(distance) probes, not log2(high)
                    bound = 2 * (threshold - start + 1).bit_length() + 1
                    assert len(probes) <= bound, (high, threshold, start, probes)


def test_v012_typical_length_is_configurable_and_validated() -> None:
    docs = _docs(fixture("V012", "bad-1024-seqs-on-l4.yaml"))
    config = {"rules": {"concurrency-within-kv": {"typical_sequence_tokens": 512}}}
    [message] = _findings(docs, "V012", config)
    assert "sequences of 512 tokens (typical_sequence_tokens 512, 32 blocks each)" in message
    with pytest.raises(ConfigError, match="typical_sequence_tokens: 'long' is not an integer"):
        load_config({"rules": {"V012": {"typical_sequence_tokens": "long"}}})
    assert (
        load_config({"rules": {"V012": {"typical_sequence_tokens": 4096.0}}}).threshold(
            "V012", "typical_sequence_tokens", 0
        )
        == 4096
    )


def test_v012_on_a_short_context_counts_max_model_len_sequences() -> None:
    docs = _docs(fixture("V012", "bad-1024-seqs-on-l4.yaml"))
    _set_flag(docs, "--max-model-len", "1024")
    [message] = _findings(docs, "V012")
    assert (
        "sequences of 1,024 tokens (max_model_len, below typical_sequence_tokens 2,048" in message
    )


def test_v009_safety_factor_is_the_planners() -> None:
    from gpustrata.vllm.capacity import STARTUP_SAFETY_FACTOR
    from gpustrata_policies.rules.v009_startup_window_covers_load.rule import RULE

    # The threshold's default lives in the rule folder's meta.yaml; it must be the planner's.
    assert RULE.meta.thresholds["safety_factor"] == ("number", STARTUP_SAFETY_FACTOR)


def test_v009_window_against_safety_factor_threshold() -> None:
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.vllm.capacity import startup_estimate, weights_estimate

    arch = load_model_catalog().get("meta-llama/Llama-3.3-70B-Instruct")
    assert arch is not None
    est = startup_estimate(arch, weights_estimate(arch, tensor_parallel_size=4))
    docs = _docs(fixture("V009", "bad-70b-in-300s.yaml"))[:1]
    window = math.ceil(est.total_s / 10) + 1  # just past the estimate, short of x1.5
    assert window * 10 < est.budget_s
    _container(docs)["startupProbe"]["failureThreshold"] = window
    assert len(_findings(docs, "V009")) == 1
    relaxed = {"rules": {"V009": {"safety_factor": 1.0}}}
    assert _findings(docs, "V009", relaxed) == []


def test_v009_uses_the_planners_annotation() -> None:
    docs = _docs(fixture("V009", "bad-70b-in-300s.yaml"))[:1]
    _container(docs)["startupProbe"]["failureThreshold"] = 30  # a 300 s window
    docs[0]["metadata"]["annotations"] = {_capacity.STARTUP_ESTIMATE_ANNOTATION: "190"}
    assert _findings(docs, "V009") == []  # 190 s x 1.5 = 285 s < 300 s
    docs[0]["metadata"]["annotations"][_capacity.STARTUP_ESTIMATE_ANNOTATION] = "300"
    [message] = _findings(docs, "V009")
    assert "the planner's estimate 300 s (annotation gpustrata.io/startup-estimate-seconds)" in (
        message
    )


def test_v009_reads_the_load_conditions_the_manifest_states() -> None:
    """hf_transfer, the streamer's distributed mode and the captured sizes change the
    estimate V009 prints; each comes from the container's env or the vLLM flags."""

    def message(**container: Any) -> str:
        doc = _deployment("meta-llama/Llama-3.3-70B-Instruct", **container)
        doc["spec"]["template"]["spec"]["containers"][0]["startupProbe"] = {
            "httpGet": {"path": "/health", "port": 8000},
            "periodSeconds": 10,
            "failureThreshold": 3,
        }
        [found] = _findings([doc], "V009")
        return found

    def estimate(text: str) -> int:
        return int(text.split("needs an estimated ")[1].split(" s")[0])

    tp = ["--tensor-parallel-size", "4"]
    plain = message(flags=tp)
    assert "(hf-download)" in plain
    fast = message(flags=tp, env=[{"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "1"}])
    assert "(hf-download-fast)" in fast and estimate(fast) < estimate(plain)
    few = message(flags=[*tp, "--compilation-config", '{"cudagraph_capture_sizes": [1, 2, 4]}'])
    assert estimate(few) < estimate(plain)
    capped = _capacity.startup_conditions(
        {},
        _site(
            _deployment("m", flags=["--compilation-config", '{"max_cudagraph_capture_size": 64}'])
        ).engine,
    )
    assert capped.capture_sizes == 3 + 8  # 1, 2, 4, then 8 to 64 in steps of 8
    flags = ["--load-format", "runai_streamer", "--model-loader-extra-config"]
    split = _capacity.startup_conditions(
        {}, _site(_deployment("m", flags=[*flags, '{"distributed": true}'])).engine
    )
    whole = _capacity.startup_conditions(
        {}, _site(_deployment("m", flags=[*flags, '{"concurrency": 16}'])).engine
    )
    assert split.streamer_distributed and not whole.streamer_distributed


def _deployment(model: str, **container: Any) -> dict[str, Any]:
    pod = container.pop("pod", {})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "m", "namespace": "llm"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"},
                    **pod,
                    "containers": [
                        {
                            "name": "vllm",
                            "image": container.pop("image", REFERENCE_IMAGE),
                            "command": [
                                "vllm",
                                "serve",
                                container.pop("command_model", model),
                                *container.pop("flags", []),
                            ],
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                            **container,
                        }
                    ],
                }
            }
        },
    }


def _site(doc: dict[str, Any]) -> _capacity.EngineSite:
    objs = to_objects([doc])
    rule = find_rule("V009")
    assert rule is not None
    [site] = _capacity.engine_sites(RuleContext(rule.meta, load_config(None), objs), objs[0])
    return site


@pytest.mark.parametrize(
    ("model", "mounts", "volumes", "source"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", [], [], "huggingface"),
        (
            "Qwen/Qwen2.5-7B-Instruct",
            [{"name": "c", "mountPath": "/root/.cache"}],
            [{"name": "c", "persistentVolumeClaim": {"claimName": "hf"}}],
            "pvc",
        ),
        (
            "Qwen/Qwen2.5-7B-Instruct",
            [{"name": "c", "mountPath": "/root/.cache"}],
            [{"name": "c", "emptyDir": {}}],
            "huggingface",
        ),
        (
            "/models/qwen",
            [{"name": "w", "mountPath": "/models"}],
            [{"name": "w", "hostPath": {"path": "/mnt/nvme/qwen"}}],
            "local-nvme",
        ),
        ("s3://bucket/qwen", [], [], "s3"),
    ],
)
def test_v009_weight_source_from_the_manifest(
    model: str, mounts: list[Any], volumes: list[Any], source: str
) -> None:
    doc = _deployment(
        model,
        flags=["--served-model-name", "Qwen/Qwen2.5-7B-Instruct"],
        volumeMounts=mounts,
        pod={"volumes": volumes},
    )
    site = _site(doc)
    ref = _capacity.resolve_model(site)
    assert isinstance(ref, _capacity.ModelRef) and ref.arch.id == "Qwen/Qwen2.5-7B-Instruct"
    assert _capacity.weights_source(site, ref)[0] == source


# --------------------------------------------------------------------------- V010 versions


@pytest.mark.parametrize(
    ("image", "env", "v0"),
    [
        (REFERENCE_IMAGE, {}, False),
        ("vllm/vllm-openai:v0.7.3", {}, True),
        ("vllm/vllm-openai:v0.8.5", {}, False),
        ("vllm/vllm-openai:v0.8.5", {"VLLM_USE_V1": "0"}, True),
        ("vllm/vllm-openai:v0.11.0", {"VLLM_USE_V1": "0"}, False),
        ("vllm/vllm-openai:v0.5.4", {}, True),
        ("vllm/vllm-openai:latest", {}, False),
        ("rayproject/ray-llm:2.60.0-py311-cu128", {}, False),
    ],
)
def test_engine_generation_from_image_and_env(image: str, env: dict[str, str], v0: bool) -> None:
    doc = _deployment(
        "Qwen/Qwen2.5-7B-Instruct",
        image=image,
        env=[{"name": k, "value": v} for k, v in env.items()],
    )
    assert _capacity.engine_version(_site(doc)).v0 is v0


def test_ray_llm_image_reads_the_pinned_vllm() -> None:
    doc = _deployment("Qwen/Qwen2.5-7B-Instruct", image="rayproject/ray-llm:2.60.0-py311-cu128")
    version = _capacity.engine_version(_site(doc))
    assert version.version == "0.29.0" and "pinned by Ray 2.60.0" in version.where


def test_ray_serve_llm_capacity_uses_the_pinned_release_defaults() -> None:
    """A Ray Serve LLM engine on ray-llm 2.60.0 is sized with vLLM 0.29.0's defaults (Ray's
    pin), not the reference release's: the figures say which release they come from."""
    docs = _docs(fixture("V004", "bad-ray-full-context.yaml"))
    config = yaml.safe_load(docs[0]["spec"]["serveConfigV2"])
    engine = config["applications"][0]["args"]["llm_configs"][0]["engine_kwargs"]
    del engine["gpu_memory_utilization"]
    docs[0]["spec"]["serveConfigV2"] = yaml.safe_dump(config)
    [inputs] = _inputs(docs)
    note = inputs.settings.defaults["gpu_memory_utilization"]
    assert "vLLM 0.29.0's default 0.92 (vllm@v0.29.0:vllm/config/cache.py)" in note, note


def test_v010_thresholds_are_configurable() -> None:
    docs = _docs(fixture("V010", "bad-one-second-one-failure.yaml"))
    config = {"rules": {"V010": {"min_timeout_seconds": 1}}}
    [message] = _findings(docs, "V010", config)
    assert "timeoutSeconds 1 < " not in message and "failureThreshold 1 < 2" in message


def test_v010_skips_tcp_and_missing_liveness() -> None:
    docs = _docs(fixture("V010", "bad-one-second-one-failure.yaml"))
    live = _container(docs)["livenessProbe"]
    live.pop("httpGet")
    live["tcpSocket"] = {"port": 8000}
    assert _findings(docs, "V010") == []
    _container(docs).pop("livenessProbe")
    assert _findings(docs, "V010") == []


def test_v010_v0_step_uses_chunked_prefill_when_set() -> None:
    # The vLLM 0.6.3 engine (its /health is tied to the engine loop), not the 0.7.3 one.
    docs = _docs(fixture("V010", "bad-v0-step-marks-engine-dead.yaml"))[:1]
    [before] = _inputs(docs)
    _container(docs)["args"] += ["--enable-chunked-prefill", "--max-num-batched-tokens", "2048"]
    [after] = _inputs(docs)
    assert after.estimate.longest_step.tokens == 2048 < before.estimate.longest_step.tokens
    assert _findings(docs, "V010") == []


# --------------------------------------------------------------------------- inputs


def test_karpenter_gpu_name_needs_memory_to_tell_a100s_apart() -> None:
    doc = _deployment("Qwen/Qwen2.5-7B-Instruct", flags=["--max-model-len", "8192"])
    selector = doc["spec"]["template"]["spec"]["nodeSelector"]
    selector.clear()
    selector["karpenter.k8s.aws/instance-gpu-name"] = "a100"
    [reason] = _not_evaluated([doc], "V004")
    assert "karpenter.k8s.aws/instance-gpu-name=a100 is not in the hardware catalogue" in reason
    selector["karpenter.k8s.aws/instance-gpu-memory"] = "81920"
    [inp] = _inputs([doc])
    assert inp.gpu.gpu.id == "a100-sxm-80gb"


def test_gke_accelerator_label_names_the_gpu() -> None:
    doc = _deployment("Qwen/Qwen2.5-7B-Instruct", flags=["--max-model-len", "8192"])
    doc["spec"]["template"]["spec"]["nodeSelector"] = {
        "cloud.google.com/gke-accelerator": "nvidia-l4"
    }
    [inp] = _inputs([doc])
    assert inp.gpu.gpu.id == "l4"


def test_volcengine_gpu_name_label_names_the_gpu() -> None:
    """AIBrix's heterogeneous samples pin each Deployment by Volcengine VKE's GPU label
    (field corpus 2): a full product name resolves, a family name alone does not."""
    path = REPO / "tests/data/field-corpus-2/aibrix-deepseek-coder-7b-l20.yaml"
    docs = _docs(path)
    [inp] = _inputs(docs)
    assert inp.gpu.gpu.id == "l20"
    assert inp.gpu.where == "machine.cluster.vke.volcengine.com/gpu-name=NVIDIA-L20"
    assert inp.model.arch.id == "deepseek-ai/deepseek-coder-6.7b-instruct"
    v100 = _docs(REPO / "tests/data/field-corpus-2/aibrix-deepseek-coder-7b-v100.yaml")
    [reason] = _not_evaluated(v100, "V003")
    # Tesla-V100 names the V100 family; V003 differs between its 16 GB and 32 GB variants on
    # this engine, so the record names the variants and the profile key, not a missing GPU.
    assert "gpu-name=Tesla-V100 is not one GPU" in reason
    for name in ("V100 16GB (SXM2)", "V100 32GB (SXM2)", "V100 16GB (PCIe)"):
        assert name in reason
    assert reason.endswith("(set gpu_products in the cluster profile)")


def test_gpu_family_value_lists_its_catalogued_variants() -> None:
    from gpustrata_policies.view.nodes import gpu_variants_named

    ids = [g.id for g in gpu_variants_named("Tesla-V100")]
    assert ids == ["v100-pcie-16gb", "v100-sxm-16gb", "v100-sxm-32gb"]
    assert gpu_variants_named("Tesla-V100-SXM2-16GB") == []  # a full product name
    assert gpu_variants_named("NVIDIA") == []  # any GPU, not a family


def test_described_pool_gives_the_gpu() -> None:
    pool = {
        "apiVersion": "gpustrata.io/v1alpha1",
        "kind": "GpuNodePool",
        "metadata": {"name": "big"},
        "spec": {"instanceType": "p5.48xlarge", "gpuCount": 8, "labels": {"pool": "big"}},
    }
    doc = _deployment("Qwen/Qwen2.5-7B-Instruct", flags=["--max-model-len", "8192"])
    doc["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "big"}
    [inp] = _inputs([pool, doc])
    assert inp.gpu.gpu.id == "h100-sxm-80gb" and inp.gpu.where == "pool big"


@pytest.mark.parametrize(("text", "value"), [("32k", 32000), ("32K", 32768), ("8192", 8192)])
def test_human_readable_max_model_len(text: str, value: int) -> None:
    doc = _deployment("Qwen/Qwen2.5-7B-Instruct", flags=["--max-model-len", text])
    [inp] = _inputs([doc])
    assert inp.estimate.max_model_len == value


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (
            {"command": ["sh", "-c", "vllm serve Qwen/Qwen2.5-7B-Instruct $@"]},
            "may take further flags from outside the manifest",
        ),
        (
            {"command": ["vllm", "serve", "acme/private-llm"]},
            "model 'acme/private-llm' is not in the model catalogue",
        ),
        (
            {"command": ["vllm", "serve", "Qwen/Qwen2.5-7B-Instrct"]},
            "model 'Qwen/Qwen2.5-7B-Instrct' is not in the model catalogue, so its size and "
            "shape are unknown (nearest catalogue ids: Qwen/Qwen2.5-7B-Instruct",
        ),
        (
            {"resources": {"limits": {"nvidia.com/mig-3g.40gb": 1}}},
            "gets a MIG slice nvidia.com/mig-3g.40gb, which the hardware catalogue does not list "
            "for NVIDIA L40S",
        ),
        (
            {"command": ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "big"]},
            "max_model_len 'big' is not an integer",
        ),
        (
            {"command": ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "-tp", "3"]},
            "tensor_parallel_size 3 does not divide",
        ),
    ],
)
def test_missing_inputs_are_not_evaluated(change: dict[str, Any], reason: str) -> None:
    doc = _deployment("Qwen/Qwen2.5-7B-Instruct")
    _container([doc]).update(change)
    for rule in ("V003", "V004", "V012"):
        reasons = _not_evaluated([doc], rule)
        assert len(reasons) == 1 and reason in reasons[0], (rule, reasons)
        assert _findings([doc], rule) == []


def test_unknown_values_during_preview_are_not_evaluated() -> None:
    from gpustrata_policies import UNKNOWN, objects_from_pulumi

    doc = _deployment("Qwen/Qwen2.5-7B-Instruct", flags=["--max-model-len", "8192"])
    doc["spec"]["template"]["spec"]["containers"][0]["command"] = UNKNOWN
    objs = objects_from_pulumi([("kubernetes:apps/v1:Deployment", "m", doc)])
    report = evaluate(objs)
    assert not [f for f in report.findings if f.rule in RULE_IDS]
    assert any(
        n.rule == "V003" and "unknown until the deployment runs" in n.reason
        for n in report.not_evaluated
    )


def test_defaults_are_named_in_the_message() -> None:
    docs = _docs(fixture("V004", "bad-full-context-on-l4.yaml"))[1:]
    [message] = _findings(docs, "V004")
    assert "max_model_len unset: vLLM uses the model's max_position_embeddings 131072" in message
    release = _container(docs)["image"].rpartition(":v")[2]  # the fixture's, not REFERENCE
    assert f"gpu_memory_utilization unset: vLLM {release}'s default 0.92" in message


# --------------------------------------------------------------------------- reference stacks


def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    from gpustrata.cli.app import main

    main(["plan", *args, "--project-dir", str(REPO), "--format", "json"])
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


@pytest.mark.parametrize("env", STACKS)
def test_reference_stacks_pass_the_mandatory_capacity_rules(
    env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _plan(capsys, "--stack", env)
    mine = [f for f in data["findings"] if f["rule"] in RULE_IDS]
    assert [f for f in mine if f["rule"] != "V012"] == []
    # V012 is advisory; where it fires on a reference stack it is a real observation
    # (vLLM's default max_num_seqs above what the KV cache holds), reported to the lead.
    assert all(f["enforcement"] == "advisory" for f in mine)
    skipped = [n for n in data["not_evaluated"] if n["rule"] in RULE_IDS]
    assert all("is not in the model catalogue" in n["reason"] for n in skipped), skipped


def test_plan_reports_a_context_the_kv_cache_cannot_hold(
    mutated_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = mutated_stack("max_model_len: 8192", "max_model_len: 131072", env="staging")
    data = _plan(capsys, "--file", str(path))
    [finding] = [f for f in data["findings"] if f["rule"] == "V004"]
    assert finding["resource"] == "Deployment/inference/llama-8b"
    assert "with max_model_len 131,072" in finding["message"]


def test_planner_and_v009_agree_on_the_startup_window(
    mutated_stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # The prod 8B model read from the Hub instead of S3: the planner lengthens the
    # startup probe and V009, reading the manifest alone, agrees.
    path = mutated_stack(
        "source: s3\n          uri: s3://gpustrata-prod-models/llama-3.1-8b-instruct/",
        "source: huggingface",
    )
    data = _plan(capsys, "--file", str(path))
    assert [f for f in data["findings"] if f["rule"] == "V009"] == []
    deployment = next(r for r in data["resources"] if r["type"] == "kubernetes:apps/v1:Deployment")
    probe = deployment["inputs"]["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
    shorter = copy.deepcopy(deployment["inputs"])
    shorter["kind"], shorter["apiVersion"] = "Deployment", "apps/v1"
    shorter["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["failureThreshold"] = (
        math.ceil(probe["failureThreshold"] * 0.8)
    )
    shorter["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    # The 8B model's pool allocates by DRA: its GPUs are in the claim template beside it.
    claims = [
        {**r["inputs"], "kind": "ResourceClaimTemplate", "apiVersion": "resource.k8s.io/v1"}
        for r in data["resources"]
        if r["type"] == "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
    ]
    assert len(_findings([*claims, shorter], "V009")) == 1


@pytest.mark.parametrize("value", ["auto", "-1"])
def test_auto_fit_max_model_len_takes_the_largest_that_fits(value: str) -> None:
    docs = _docs(fixture("V004", "bad-full-context-on-l4.yaml"))[:1]
    [full] = _inputs(docs)
    _set_flag(docs, "--max-model-len", value)
    [fitted] = _inputs(docs)
    assert fitted.estimate.max_model_len == full.estimate.kv.largest_max_model_len
    assert fitted.estimate.fits and _findings(docs, "V004") == []
    assert "max_model_len auto: vLLM fits it to the KV cache" in fitted.default_notes(
        "max_model_len"
    )


def test_a_zero_probe_period_is_the_kubernetes_default() -> None:
    """SetDefaults_Probe turns periodSeconds/failureThreshold 0 into 10/3; a 0 crashed V009
    with a ZeroDivisionError (found by the robustness suite)."""
    docs = _docs(fixture("V009", "bad-70b-in-300s.yaml"))
    zeroed = copy.deepcopy(docs)
    for doc in zeroed:
        for c in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            for kind in ("startupProbe", "livenessProbe"):
                if isinstance(c.get(kind), dict):
                    c[kind]["periodSeconds"] = 0
                    c[kind]["failureThreshold"] = 0
    as_default = copy.deepcopy(docs)
    for doc in as_default:
        for c in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            for kind in ("startupProbe", "livenessProbe"):
                if isinstance(c.get(kind), dict):
                    c[kind].pop("periodSeconds", None)
                    c[kind].pop("failureThreshold", None)
    rule = [find_rule("V009"), find_rule("V010")]
    got = evaluate(to_objects(zeroed), rules=rule)
    want = evaluate(to_objects(as_default), rules=rule)
    assert not [f for f in got.findings if f.internal]
    assert want.findings  # the fixture is a V009/V010 case either way
    assert [(f.rule, f.enforcement, f.message) for f in got.findings] == [
        (f.rule, f.enforcement, f.message) for f in want.findings
    ]


# ------------------------------------------------- Ray Serve LLM accelerator_type as the GPU


def _deepseek_ray_service(accelerator: str) -> str:
    """Corpus 1's KubeRay DeepSeek-R1 sample (TP 8 x PP 2, no GPU selector), with its
    ``accelerator_type: "H100"`` replaced."""
    from conftest import FIELD_CORPUS

    path = FIELD_CORPUS / "ray-project-kuberay-ray-service-deepseek.yaml"
    if not path.is_file():
        pytest.skip(f"field corpus not found at {FIELD_CORPUS}")
    text = path.read_text(encoding="utf-8")
    assert 'accelerator_type: "H100"' in text
    return text.replace('accelerator_type: "H100"', f'accelerator_type: "{accelerator}"')


def _capacity_outcomes(text: str) -> tuple[list[str], list[str]]:
    from gpustrata_policies.evaluate import evaluate
    from gpustrata_policies.inputs.manifests import load_text

    report = evaluate(load_text(text, "ray.yaml"))
    rules = {"V003", "V004", "V012"}
    found = [f"{f.rule} {f.message}" for f in report.findings if f.rule in rules]
    skipped = [f"{n.rule} {n.reason}" for n in report.not_evaluated if n.rule in rules]
    return found, skipped


def test_accelerator_type_names_the_gpu_when_nothing_else_does() -> None:
    found, skipped = _capacity_outcomes(_deepseek_ray_service("H100"))
    assert skipped == [] and found == []  # 671 GB of FP8 over 16 H100s fits every variant
    found, skipped = _capacity_outcomes(_deepseek_ray_service("L4"))
    assert skipped == []
    v003 = [m for m in found if m.startswith("V003")]
    assert v003 and "Ray Serve LLM accelerator_type L4" in v003[0]


def test_an_accelerator_type_ray_does_not_detect_leaves_the_gpu_unknown() -> None:
    _, skipped = _capacity_outcomes(_deepseek_ray_service("NOT-A-GPU"))
    assert skipped and all("GPU model is unknown" in s for s in skipped)


# --------------------------------------------------------------------------- per-release


def test_gpt_oss_on_h100_follows_the_images_release_and_sampler_env() -> None:
    """vLLM 0.10.1's image (FlashInfer sampler): V004, one sequence does not fit. With
    VLLM_USE_FLASHINFER_SAMPLER=0 its sampler warm-up sorts the logits and, as in
    vllm#23278, no KV memory is left: V003. The reference release's image fits."""
    docs = _docs(fixture("V004", "bad-gpt-oss-v0101-h100.yaml"))
    [inp] = _inputs(docs)
    assert inp.settings.release == "0.10.1" and inp.settings.flashinfer_sampler is None
    assert "on Marlin" in inp.estimate.weights.explanation
    assert _findings(docs, "V004") and not _findings(docs, "V003")
    _container(docs)["env"] = [{"name": "VLLM_USE_FLASHINFER_SAMPLER", "value": "0"}]
    [inp] = _inputs(docs)
    assert inp.settings.flashinfer_sampler is False
    assert inp.estimate.memory.available_kv_bytes < 0
    assert _findings(docs, "V003") and not _findings(docs, "V004")
    _container(docs)["env"] = []
    _container(docs)["image"] = f"vllm/vllm-openai:v{_capacity.REFERENCE_VLLM}"
    assert not _findings(docs, "V004") and not _findings(docs, "V003")
