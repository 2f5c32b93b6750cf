"""The G and K rules split as ``judge -> Verdict`` and ``message(verdict)`` (issue 32): their
decisions as data, on their own rule-folder fixtures. Each test asserts the decision, the
reason and the figures (values, thresholds) a verdict carries; the prose is pinned by each
folder's ``expected.yaml``. K007 and K008 are asserted in test_rule_verdicts.py."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from test_rule_verdicts import _verdicts

from gpustrata.catalog.vllm_releases import reference_release
from gpustrata_policies.evaluate import find_rule
from gpustrata_policies.rules._verdict import Value, Verdict

GIB = 2**30


def _any(value: Value) -> Any:
    """A verdict value as the test reads it (a tuple of figures, a number)."""
    return value


def _reasons(verdicts: list[Verdict]) -> list[tuple[str, str]]:
    return [(v.decision, v.reason) for v in verdicts]


def test_every_g_and_k_rule_is_judge_and_message() -> None:
    """Each G and K rule registers its judge worded by its message (no check of its own)."""
    import importlib

    from conftest import RULES_DIR

    folders = sorted(p for p in RULES_DIR.glob("[gk]0*") if p.is_dir())
    assert len(folders) == 23
    for folder in folders:
        module = importlib.import_module(f"gpustrata_policies.rules.{folder.name}.rule")
        rule = find_rule(folder.name[:4].upper())
        assert rule is not None and rule.check.__module__ == module.__name__
        assert rule.check.__qualname__.startswith("judged."), folder.name
        assert not hasattr(module, "check"), folder.name
        worded_by_meta = "messages" in (folder / "meta.yaml").read_text(encoding="utf-8")
        assert callable(module.judge)
        assert callable(getattr(module, "message", None)) or worded_by_meta, folder.name


def test_k001_request_without_limit_and_unequal_limit() -> None:
    from gpustrata_policies.rules.k001_gpu_requests_equal_limits.rule import judge

    [missing, unequal] = _verdicts("K001", "bad-request-without-limit.yaml", judge)[
        "Deployment/llm/vllm"
    ]
    assert (missing.decision, missing.reason) == ("violation", "no-limit")
    assert (missing.values["container"], missing.values["request"]) == ("container 'vllm'", "1")
    assert "limit" not in missing.values
    assert unequal.reason == "request-not-limit"
    assert (unequal.values["request_q"], unequal.values["limit_q"]) == (1, 2)
    assert unequal.path[-3:] == ("resources", "requests", "nvidia.com/gpu")
    assert _verdicts("K001", "good-limits-only.yaml", judge) == {}


def test_k002_fractions_of_a_gpu() -> None:
    from gpustrata_policies.rules.k002_gpu_whole_units.rule import judge

    found = _verdicts("K002", "bad-fractional-gpu.yaml", judge)["Pod/llm/half-gpu"]
    assert _reasons(found) == [("violation", "not-whole")] * 2
    assert [(v.values["resource"], v.values["value"], v.values["amount"]) for v in found] == [
        ("nvidia.com/gpu", "500m", Fraction(1, 2)),
        ("nvidia.com/mig-1g.10gb", "0.5", Fraction(1, 2)),
    ]


def test_k003_untainted_and_soft_tainted_pools() -> None:
    from gpustrata_policies.rules.k003_gpu_pool_tainted.rule import judge

    found = _verdicts("K003", "bad-untainted-pools.yaml", judge)
    [open_pool] = found["GpuNodePool/-/k003-open"]
    assert (open_pool.reason, open_pool.values["soft_taints"]) == ("no-taint", ())
    [soft] = found["GpuNodePool/-/k003-soft"]
    assert (soft.reason, soft.values["soft_taints"]) == ("only-soft-taints", ("nvidia.com/gpu",))
    assert soft.path == ("spec", "taints")


def test_k004_taints_missed_by_pool_and_admission() -> None:
    from gpustrata_policies.rules.k004_gpu_pod_tolerates_pool.rule import judge

    [kubeadm] = _verdicts("K004", "bad-kubeadm-toleration-value-misses.yaml", judge)[
        "Deployment/llm/vllm"
    ]
    assert (kubeadm.decision, kubeadm.reason) == ("violation", "pool-taints")
    assert kubeadm.values["flavour"] == "kubeadm"
    assert kubeadm.values["extended_resource_toleration"] is False
    [(_, taints)] = _any(kubeadm.values["missing"])
    assert taints == (("nvidia.com/gpu", "present", "NoSchedule"),)
    # The admission plugin adds nvidia.com/gpu on EKS: only the pool's own taint is missed.
    [eks] = _verdicts("K004", "bad-nodepool-taint-missed.yaml", judge)["Deployment/llm/vllm"]
    assert eks.values["extended_resource_toleration"] is True
    assert eks.values["missing"] == (("gpu-l40s", (("dedicated", "inference", "NoSchedule"),)),)
    [unknown] = _verdicts("K004", "bad-untolerated-pool-taint.yaml", judge)["Deployment/llm/vllm"]
    assert (unknown.decision, unknown.reason) == ("advisory", "pool-taints-admission-unknown")
    assert unknown.values["extended_resource_toleration"] is None
    [assumed] = _verdicts("K004", "bad-no-toleration-no-pool.yaml", judge)["RayCluster/ray/llm"]
    assert (assumed.decision, assumed.reason) == ("advisory", "assumed-default-taint")
    assert assumed.values["untolerated"] == (("nvidia.com/gpu", "", "NoSchedule"),)


def test_k005_demand_against_pools_and_selected_instances() -> None:
    from gpustrata_policies.rules.k005_gpu_pod_fits_a_pool.rule import judge

    found = _verdicts("K005", "bad-exceeds-pool.yaml", judge)
    [big] = found["Deployment/llm/k005-too-big"]
    assert (big.reason, big.values["gpus"], big.values["cpu"]) == ("fits-no-pool", 2, 16)
    [(pool, types, largest, short, basis)] = _any(big.values["misses"])
    assert (pool, types, largest) == ("pool k005-small (1 x NVIDIA-L40S)", 0, None)
    assert [what for what, _ in short] == ["gpus", "cpu", "memory"]
    assert short[0] == ("gpus", 1) and short[1][1] < 16  # after kubelet reservations
    assert basis == "allocatable after kubelet reservations"
    [nowhere] = found["Deployment/llm/k005-no-pool"]
    assert nowhere.reason == "no-pool-matches"
    assert (nowhere.values["selected"], nowhere.values["pools"]) == (
        "workload=training",
        ("k005-small",),
    )
    [tp4] = _verdicts("K005", "bad-instance-too-small.yaml", judge)["Pod/llm/k005-tp4-on-g6"]
    assert (tp4.reason, tp4.values["gpus"], tp4.values["shortfalls"]) == (
        "selected-node-too-small",
        4,
        (("gpus", 1),),
    )


def test_k006_kubelet_problems_as_cases() -> None:
    from gpustrata_policies.rules.k006_kubelet_reservations.rule import judge

    [pool] = _verdicts("K006", "bad-reservations.yaml", judge)["GpuNodePool/-/k006-a100"]
    assert pool.reason == "pool-kubelet"
    assert pool.values["problems"] == (
        ("not-reservable", "systemReserved", ("nvidia.com/gpu",)),
        ("unreserved", "systemReserved", ("memory",)),
        ("unreserved", "kubeReserved", ("cpu",)),
        ("no-eviction-floor", "evictionHard", ("memory.available",)),
    )
    assert "nvidia.com/gpu" not in _any(pool.thresholds["reservable"])
    [karpenter] = _verdicts("K006", "bad-unreserved-karpenter-nodeclass.yaml", judge)[
        "EC2NodeClass/-/gpu"
    ]
    assert (karpenter.reason, karpenter.values["pools"]) == ("karpenter-kubelet", ("gpu-a10g",))
    # Karpenter computes kubeReserved when unset: only systemReserved is missing.
    assert karpenter.values["has_kubelet"] is False
    assert [p[1] for p in _any(karpenter.values["problems"])] == [
        "systemReserved",
        "evictionHard",
    ]


def test_k009_vpa_controls_gpus() -> None:
    from gpustrata_policies.rules.k009_vpa_leaves_gpus_alone.rule import judge

    [v] = _verdicts("K009", "bad-vpa-controls-gpu.yaml", judge)["VerticalPodAutoscaler/llm/vllm"]
    assert (v.reason, v.values["mode"], v.values["controlled"]) == (
        "controls-other-resources",
        "Auto",
        ("nvidia.com/gpu",),
    )
    assert v.values["gpu_listed"] is True and v.thresholds["allowed"] == ("cpu", "memory")


def test_k010_two_writers_of_one_replica_count() -> None:
    from gpustrata_policies.rules.k010_one_autoscaler_per_workload.rule import judge

    found = _verdicts("K010", "bad-hpa-and-scaledobject.yaml", judge)
    [hpa] = found["HorizontalPodAutoscaler/llm/vllm"]
    assert (hpa.reason, hpa.values["others"]) == (
        "several-autoscalers",
        ("ScaledObject vllm-keda",),
    )
    [keda] = found["ScaledObject/llm/vllm-keda"]
    assert keda.values["others"] == ("HorizontalPodAutoscaler vllm",)
    [ray] = _verdicts("K010", "bad-hpa-on-autoscaling-raycluster.yaml", judge)[
        "HorizontalPodAutoscaler/ray/llm"
    ]
    assert (ray.reason, ray.values["target"]) == ("ray-in-tree-autoscaler", "RayCluster/llm")


def test_k011_scales_on_cpu_and_gpu_utilisation() -> None:
    from gpustrata_policies.rules.k011_scale_on_inference_metrics.rule import judge

    [v] = _verdicts("K011", "bad-hpa-on-cpu.yaml", judge)["HorizontalPodAutoscaler/llm/vllm"]
    assert (v.reason, v.values["metrics"]) == (
        "no-inference-metric",
        ("cpu", "DCGM_FI_DEV_GPU_UTIL"),
    )
    assert "num_requests_waiting" in str(v.thresholds["inference_metric"])


def test_k012_replicas_without_budget_or_spread() -> None:
    from gpustrata_policies.rules.k012_inference_disruption_budget.rule import judge

    [v] = _verdicts("K012", "bad-three-replicas-no-pdb.yaml", judge)["Deployment/llm/vllm"]
    assert (v.reason, v.values["replicas"]) == ("replicas-exposed", 3)
    assert (v.values["has_pdb"], v.values["spread"]) == (False, False)


def test_k013_moving_tags() -> None:
    from gpustrata_policies.rules.k013_pinned_images.rule import judge

    found = _verdicts("K013", "bad-latest-and-untagged.yaml", judge)
    assert [(v.reason, v.values["tag"]) for v in found["Deployment/llm/vllm"]] == [
        ("latest", "latest"),
        ("no-tag", None),
    ]
    assert [(v.reason, v.values["channel"]) for v in found["Deployment/llm/vllm-nightly"]] == [
        ("moving-tag", "nightly"),
        ("moving-tag", "nightly"),
    ]


def test_k014_verdicts_keep_no_secret() -> None:
    from gpustrata_policies.rules.k014_secrets_by_reference.rule import judge

    found = _verdicts("K014", "bad-literal-token.yaml", judge)
    assert _reasons(found["Deployment/llm/vllm"]) == [
        ("violation", "env-literal"),
        ("violation", "flag-literal"),
    ]
    env, flag = found["Deployment/llm/vllm"]
    assert (env.values["name"], env.values["placeholder"]) == ("HF_TOKEN", None)
    assert flag.values["flag"] == "api-key"
    [ray] = found["RayService/ray/llm"]
    assert (ray.reason, ray.values["name"]) == ("runtime-env-literal", "HUGGING_FACE_HUB_TOKEN")
    # The verdict carries the secret's length, never the secret.
    secrets = {"hf_notarealtoken000000000000000000", "sk-not-a-real-key"}
    assert all(s in _fixture("K014", "bad-literal-token.yaml") for s in secrets)
    assert [(v.values["length"], v.values["placeholder"]) for v in (env, flag, ray)] == [
        (34, None),
        (17, None),
        (34, None),
    ]
    assert not {str(x) for v in (env, flag, ray) for x in v.values.values()} & secrets
    placeholders = _verdicts("K014", "bad-lws-vllm-example.yaml", judge)
    [leader, worker] = placeholders["LeaderWorkerSet/default/vllm"]
    assert leader.values["placeholder"] == worker.values["placeholder"] == "$HF_TOKEN"


def _fixture(rule_id: str, name: str) -> str:
    from conftest import fixture

    return fixture(rule_id, name).read_text(encoding="utf-8")


def test_k015_weights_against_disk() -> None:
    from gpustrata_policies.rules.k015_weights_storage.rule import judge

    found = _verdicts("K015", "bad-no-room-for-weights.yaml", judge)
    none, small, empty = found["Deployment/llm/k015-disk"]
    assert (none.reason, none.values["ephemeral_request"]) == ("no-ephemeral-storage", None)
    assert small.reason == "ephemeral-storage-too-small"
    weights = small.values["weights_bytes"]
    assert isinstance(weights, Fraction) and small.values["ephemeral_request"] == 20 * GIB
    assert weights > 20 * GIB
    assert (empty.reason, empty.values["empty_dir"], empty.values["size_limit"]) == (
        "empty-dir-too-small",
        "cache",
        "8Gi",
    )
    assert empty.thresholds["size_limit_bytes"] == 8 * GIB
    [ray] = found["RayService/ray/k015-ray"]
    assert ray.values["models"] == ("s3://models/llama-3.3-70b-instruct/",)


def test_k016_consolidation_policies() -> None:
    from gpustrata_policies.rules.k016_gpu_pods_survive_consolidation.rule import judge

    [busy] = _verdicts("K016", "bad-consolidates-busy-gpu-nodes.yaml", judge)["NodePool/-/gpu-l40s"]
    assert (busy.reason, busy.values["policy"], busy.values["defaulted"]) == (
        "consolidates-gpu-pods",
        "WhenEmptyOrUnderutilized",
        False,
    )
    assert (busy.values["consolidate_after"], busy.values["exposed"]) == (
        "1m",
        ("Deployment/llm/vllm",),
    )
    [beta] = _verdicts("K016", "bad-v1beta1-default-policy.yaml", judge)["NodePool/-/gpu-h100"]
    assert (beta.values["policy"], beta.values["defaulted"]) == ("WhenUnderutilized", True)
    assert beta.path == ("spec",)


def test_k017_pods_with_no_node_and_their_fix() -> None:
    from gpustrata_policies.rules.k017_every_pod_has_a_node.rule import judge

    found = _verdicts("K017", "bad-all-gpu-tainted-no-system-pool.yaml", judge)
    [chart] = found["HelmRelease/kuberay/kuberay-operator"]
    assert (chart.reason, chart.values["fix"], chart.values["release"]) == (
        "no-node",
        "chart-values",
        True,
    )
    assert (chart.values["chart"], chart.values["values_path"]) == (
        "kuberay-operator",
        "nodeSelector",
    )
    [head] = found["RayService/llm/llama-3-8b"]
    assert (head.values["fix"], head.values["pods"]) == (
        "system-pool",
        ("RayService/llm/llama-3-8b (head)",),
    )
    [zero] = _verdicts("K017", "bad-node-group-min-zero.yaml", judge)[
        "Deployment/default/mistral-7b"
    ]
    assert (zero.values["fix"], zero.values["empty_pools"]) == ("scale-from-zero", ("gpu-l4",))


def test_k018_missing_crds_and_device_class() -> None:
    from gpustrata_policies.rules.k018_custom_resources_have_their_crd.rule import judge

    found = _verdicts("K018", "bad-servicemonitor-and-scaledobject-without-crds.yaml", judge)
    [monitor] = found["ServiceMonitor/inference/llama-8b"]
    assert (monitor.reason, monitor.values["group_kind"]) == (
        "crd-missing",
        "monitoring.coreos.com/ServiceMonitor",
    )
    assert "kube-prometheus-stack" in str(monitor.values["owner"])
    [keda] = found["ScaledObject/inference/llama-8b"]
    assert keda.values["api_version"] == "keda.sh/v1alpha1"
    [claim] = _verdicts("K018", "bad-gpu-claim-without-dra-driver.yaml", judge)[
        "ResourceClaimTemplate/inference/llama-8b-gpus"
    ]
    assert (claim.reason, claim.values["device_class"]) == (
        "device-class-missing",
        "gpu.nvidia.com",
    )


def test_k019_identities_of_object_store_readers() -> None:
    from gpustrata_policies.rules.k019_object_store_weights_have_identity.rule import judge

    found = _verdicts("K019", "bad-node-credentials.yaml", judge)
    [default] = found["Deployment/llm/k019-default"]
    assert (default.reason, default.values["store"], default.values["named"]) == (
        "default-account",
        "s3",
        False,
    )
    [azure] = found["Deployment/llm/k019-azure"]
    assert (azure.reason, azure.values["account"], azure.values["missing"]) == (
        "no-azure-identity",
        "blob-reader",
        ("client-id",),
    )
    [elsewhere] = found["Deployment/llm/k019-elsewhere"]
    assert (elsewhere.decision, elsewhere.reason, elsewhere.values["store"]) == (
        "not_evaluated",
        "account-missing",
        "gcs",
    )


def test_k020_host_memory_and_weights_held() -> None:
    from gpustrata_policies.rules.k020_host_memory_covers_engine.rule import judge

    found = _verdicts("K020", "bad-offload-exceeds-limit.yaml", judge)
    [native] = found["Deployment/llm/native"]
    assert (native.reason, native.values["host_bytes"]) == ("host-memory-exceeds-limit", 64 * GIB)
    assert native.thresholds["memory_limit_bytes"] == 32 * GIB
    assert native.values["kv_tokens"] == 524288
    [lmcache] = found["Deployment/llm/lmcache"]
    assert lmcache.values["shm_unbounded"] is True
    [threads] = _verdicts("K020", "bad-weights-held-at-once.yaml", judge)[
        "Deployment/llm/pt-threads"
    ]
    assert (threads.decision, threads.reason, threads.values["workers"]) == (
        "violation",
        "loader-holds-all",
        2,
    )
    assert threads.values["held_bytes"] == 2 * _any(threads.values["weights_bytes"])
    assert threads.values["reference_vllm"] == reference_release()
    held = _verdicts("K020", "bad-weights-above-limit.yaml", judge)
    assert _reasons(held["Deployment/llm/eager"]) == [("advisory", "loader-holds-files")]
    assert _reasons(held["Deployment/llm/mmap"]) == [("advisory", "loader-holds-pages")]


def test_k021_every_endpoint_case() -> None:
    from gpustrata_policies.rules.k021_stable_endpoint.rule import judge

    found = _verdicts("K021", "bad-ports-disagree.yaml", judge)
    [numeric] = found["Service/llm/mistral-7b"]
    assert (numeric.reason, numeric.values["target"], numeric.values["engine_port"]) == (
        "port-misses-engine",
        8080,
        "8000",
    )
    [named] = found["Service/llm/mistral-7b-named"]
    assert (named.values["target_name"], named.values["target"]) == ("api", None)
    [endpoint] = found["ModelEndpoint/llm/mistral-7b"]
    assert (endpoint.reason, endpoint.values["url_port"], endpoint.values["suggest"]) == (
        "endpoint-port-not-exposed",
        8000,
        "80",
    )
    [ingress] = found["Ingress/llm/mistral-7b"]
    assert (ingress.reason, ingress.values["asked_port"]) == ("backend-port-not-exposed", "8000")
    [route] = found["HTTPRoute/llm/mistral-7b"]
    assert route.reason == "route-no-port"
    [ray] = found["RayService/llm/llm"]
    assert (ray.reason, ray.values["serve_port"], ray.thresholds["proxy_port"]) == (
        "serve-port-not-proxy",
        9000,
        8000,
    )


def test_g001_timeouts_against_the_longest_answer() -> None:
    from gpustrata_policies.rules.g001_gateway_outlasts_generation.rule import judge

    found = _verdicts("G001", "bad-timeouts-cut-long-answers.yaml", judge)
    [route] = found["HTTPRoute/llm/mistral-7b"]
    assert (route.decision, route.reason) == ("violation", "timeout-cuts-answer")
    assert route.thresholds["timeout_seconds"] == 300  # 5m
    seconds = route.values["generation_seconds"]
    assert isinstance(seconds, float) and seconds > 300
    [nginx] = found["Ingress/llm/mistral-7b-nginx"]
    assert (nginx.decision, nginx.reason) == ("advisory", "idle-timeout-cuts-answer")
    assert nginx.thresholds["timeout_seconds"] == 120
    [mesh] = found["VirtualService/llm/mistral-7b"]
    assert mesh.thresholds["timeout_seconds"] == 600 and mesh.path == ("spec", "http", 0, "timeout")


def test_g002_pool_selects_and_targets_the_engines() -> None:
    from gpustrata_policies.rules.g002_inference_pool_matches_servers.rule import judge

    found = _verdicts("G002", "bad-pool-misses-engines.yaml", judge)
    [labels] = found["InferencePool/llm/wrong-labels"]
    assert (labels.reason, labels.values["selector"], labels.values["vllm_labels"]) == (
        "selects-no-pod",
        "app=vllm-mistral-7b",
        "app=mistral-7b",
    )
    [port] = found["InferencePool/llm/wrong-port"]
    assert (port.reason, port.values["engine_port"], port.thresholds["pool_ports"]) == (
        "port-not-served",
        8000,
        (8080,),
    )
    assert port.values["port_stated"] is False
    [metric] = _verdicts("G002", "bad-picker-reads-a-dropped-metric.yaml", judge)[
        "InferencePool/llm/mistral-7b"
    ]
    assert (metric.decision, metric.reason) == ("advisory", "picker-metric-not-exported")
    assert metric.values["metric"] == "vllm:gpu_cache_usage_perc"
    assert metric.path == ("spec", "endpointPickerRef")
