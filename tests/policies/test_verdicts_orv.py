"""The O, R and V rules split as ``judge -> Verdict`` + ``message`` (issue 32): their decisions
as data on their own rule-folder fixtures. Each test asserts the decision, the reason and the
figures read from the fixture (or the thresholds and catalogue facts they are judged against);
the prose stays pinned by each folder's ``expected.yaml``. R003, R004 and R005 are covered in
test_rule_verdicts.py."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from test_rule_verdicts import _verdicts

from gpustrata.catalog.vllm_releases import flag_releases, load_vllm_releases, reference_release
from gpustrata.vllm.capacity import STARTUP_SAFETY_FACTOR
from gpustrata_policies.evaluate import find_rule
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.nodes import GPU_OPERATOR_PLATFORMS


def _defaults(rule_id: str) -> dict[str, Any]:
    """The rule's thresholds at their meta.yaml defaults."""
    rule = find_rule(rule_id)
    assert rule is not None
    return {key: default for key, (_, default) in rule.meta.thresholds.items()}


def test_o001_kubernetes_outside_the_operators_matrix() -> None:
    from gpustrata_policies.rules.o001_operator_supports_cluster.rule import judge

    [v] = _verdicts("O001", "bad-kubernetes-too-new.yaml", judge)[
        "HelmRelease/gpu-operator/gpu-operator"
    ]
    assert (v.decision, v.reason) == ("violation", "kubernetes-unsupported")
    assert (v.values["kubernetes"], v.values["pools"]) == ("1.37", ("o001-new",))
    release = catalogs.operator_release(str(v.values["operator"]))
    assert release is not None and release.eks_kubernetes is not None and v.values["on_eks"]
    assert v.thresholds == {
        "min_kubernetes": release.eks_kubernetes.min,
        "max_kubernetes": release.eks_kubernetes.max,
    }
    assert v.sources == (GPU_OPERATOR_PLATFORMS,)
    assert v.path == ("spec", "chart", "spec", "version")
    assert _verdicts("O001", "good-supported-version.yaml", judge) == {}


def test_o003_driver_twice_and_none() -> None:
    from gpustrata_policies.rules.o003_driver_source_consistent.rule import judge

    [twice] = _verdicts("O003", "bad-two-drivers.yaml", judge)[
        "HelmRelease/o003-default/gpu-operator"
    ]
    assert (twice.reason, twice.values["driver_enabled"]) == ("driver-twice", True)
    assert twice.values["origin"] == ", the chart default"
    assert twice.values["pools"] == (("o003-twice", "AL2023_x86_64_NVIDIA"),)
    [none] = _verdicts("O003", "bad-no-driver.yaml", judge)[
        "HelmRelease/o003-nodriver/gpu-operator"
    ]
    assert (none.reason, none.values["driver_enabled"]) == ("no-driver", False)
    assert none.path == ("spec", "values", "driver", "enabled")


def test_o004_unpinned_chart_and_untested_components() -> None:
    from gpustrata_policies.rules.o004_components_pinned.rule import judge

    found = _verdicts("O004", "bad-unpinned-and-untested.yaml", judge)
    [floating] = found["HelmRelease/o004-floating/gpu-operator"]
    assert (floating.reason, floating.values["version"]) == ("chart-unpinned", ">=25.3.0")
    [untested] = found["HelmRelease/o004-untested/gpu-operator"]
    assert untested.reason == "untested-components"
    overrides = untested.values["overrides"]
    assert [o[:2] for o in overrides] == [("driver", "550.54.15"), ("toolkit", "v1.16.2")]  # type: ignore[union-attr]
    release = catalogs.operator_release("v26.7.0")
    assert release is not None
    assert overrides[1][2] == release.container_toolkit.tag  # type: ignore[index]
    assert overrides[0][2] == ", ".join(release.tested_drivers)  # type: ignore[index]


def test_o005_mig_requests_against_strategy_and_pools() -> None:
    from gpustrata_policies.rules.o005_mig_strategy_matches_requests.rule import judge

    [single] = _verdicts("O005", "bad-strategy-single.yaml", judge)["Job/llm/o005-wrong-resource"]
    assert (single.reason, single.values["resource"]) == (
        "mig-request-unserved",
        "nvidia.com/mig-1g.10gb",
    )
    assert single.thresholds == {"strategy": "single"}
    problems = single.values["problems"]
    assert problems[0] == ("strategy", "single")  # type: ignore[index]
    assert problems[1][0] == "no-mig" and problems[1][2] == "pool o005-no-mig"  # type: ignore[index]
    found = _verdicts("O005", "bad-mixed-on-partitioned-pool.yaml", judge)
    [whole] = found["Job/llm/o005-whole-on-mig"]
    assert whole.reason == "whole-gpu-on-mig-pool"
    assert (whole.values["pool"], whole.values["partition"]) == ("o005-partitioned", "all-3g.40gb")
    assert whole.thresholds == {"strategy": "mixed"}
    [other] = found["Job/llm/o005-other-profile"]
    assert other.values["problems"] == (("other-partition", "o005-partitioned", "all-3g.40gb"),)


def test_o006_untolerated_taints_per_component() -> None:
    from gpustrata_policies.rules.o006_operator_tolerates_gpu_taints.rule import judge

    found = _verdicts("O006", "bad-untolerated-taints.yaml", judge)
    daemonsets, nfd = found["HelmRelease/o006-defaults/gpu-operator"]
    assert (daemonsets.reason, daemonsets.values["component"]) == (
        "taints-not-tolerated",
        "daemonsets",
    )
    assert daemonsets.values["untolerated"] == (("o006-llm", ("dedicated=llm:NoSchedule",)),)
    assert daemonsets.values["default"] == ", the chart default"
    assert nfd.values["component"] == "nfd"
    assert nfd.path[-3:] == ("node-feature-discovery", "worker", "tolerations")
    [policy] = found["ClusterPolicy/-/o006-cluster-policy"]
    assert policy.values["default"] == ""  # the ClusterPolicy states its own tolerations
    assert policy.values["tolerations"] == (
        "nvidia.com/gpu=present:NoSchedule (Equal)",
        "dedicated (Exists)",
    )


def test_o007_bf16_and_fp8_below_compute_capability_8() -> None:
    from gpustrata_policies.rules.o007_gpu_supports_dtype.rule import judge

    bf16, fp8 = _verdicts("O007", "bad-bf16-and-fp8-on-t4.yaml", judge)["Deployment/llm/o007-t4"]
    for v in (bf16, fp8):
        assert (v.reason, v.values["compute_capability"]) == ("gpu-lacks-kernels", "7.5")
        assert v.thresholds == {"min_compute_capability": "8.0"}
    assert bf16.values["problems"] == (("bf16", "bfloat16"),)
    assert fp8.values["problems"] == (("fp8", "--quantization", "fp8"),)


def test_o008_two_allocators_and_dra_v1() -> None:
    from gpustrata_policies.rules.o008_one_gpu_allocator.rule import judge

    found = _verdicts("O008", "bad-device-plugin-and-dra.yaml", judge)
    validator, both = found["HelmRelease/nvidia-dra-driver-gpu/nvidia-dra-driver-gpu"]
    assert (validator.reason, validator.values["pools"]) == ("validator-on-dra-pools", ("gpu-dra",))
    assert (both.reason, both.values["pools"]) == ("plugin-overlaps-dra", ("gpu-plugin",))
    [claim] = found["ResourceClaimTemplate/llm/one-gpu"]
    assert (claim.reason, claim.values["kubernetes"]) == ("dra-v1-unserved", ("1.33",))
    assert claim.thresholds == {"min_kubernetes": "1.34"}
    assert claim.path == ("apiVersion",)
    other = _verdicts("O008", "bad-dra-arrives-other-ways.yaml", judge)
    [crs] = other["HelmRelease/gpu-operator-dra/gpu-operator-dra"]
    assert crs.reason == "both-crs-deployed" and crs.path[-2:] == ("gpuCluster", "deployCR")


def test_r001_num_gpus_against_the_container_limit() -> None:
    from gpustrata_policies.rules.r001_ray_gpus_match_container.rule import judge

    found = _verdicts("R001", "bad-num-gpus-mismatch.yaml", judge)["RayCluster/ray/llm"]
    figures = [(v.values["advertised"], v.thresholds["limit"]) for v in found]
    assert figures == [
        (Fraction(8), Fraction(4)),
        (Fraction(2), Fraction(0)),
        (Fraction(1), Fraction(2)),
    ]
    assert {v.reason for v in found} == {"num-gpus-mismatch"}
    assert found[2].values["where"] == "resources.GPU: 1"
    assert found[0].path == ("spec", "workerGroupSpecs", 0, "rayStartParams")


def test_r002_head_requests_advertises_or_reaches_gpus() -> None:
    from gpustrata_policies.rules.r002_ray_head_keeps_off_gpus.rule import judge

    found = _verdicts("R002", "bad-head-gpus.yaml", judge)
    [requests] = found["RayCluster/ray/gpu-head"]
    assert (requests.reason, requests.values["requested"]) == ("head-requests-gpus", Fraction(1))
    [advertises] = found["RayCluster/ray/advertises"]
    assert (advertises.reason, advertises.values["advertised"]) == (
        "head-advertises-gpus",
        Fraction(1),
    )
    [reaches] = found["RayCluster/ray/unset"]
    assert (reaches.reason, reaches.values["reach"]) == ("head-reaches-gpu-nodes", "toleration")


def test_r007_target_against_max_num_seqs() -> None:
    from gpustrata_policies.rules.r007_serve_autoscaling_matches_engine.rule import judge

    [v] = _verdicts("R007", "bad-target-far-above-batch.yaml", judge)[
        "RayService/ray/qwen-r007-bad"
    ]
    assert (v.decision, v.reason) == ("violation", "target-above-batch")
    assert (v.values["key"], v.values["target"], v.values["max_num_seqs"]) == (
        "target_ongoing_requests",
        512.0,
        32,
    )
    assert v.values["admitted"] == ("max_ongoing_requests", 600.0)
    assert v.thresholds == {"max_target_batch_ratio": _defaults("R007")["max_target_batch_ratio"]}


def test_v002_tp_and_pp_against_the_model() -> None:
    from gpustrata_policies.rules.v002_parallelism_fits_model.rule import judge

    found = _verdicts("V002", "bad-parallel-sizes.yaml", judge)
    [llama] = found["Deployment/llm/llama-70b"]
    assert (llama.values["tp"], llama.values["heads"], llama.values["cases"]) == (
        3,
        64,
        ("tp-splits-heads",),
    )
    assert 3 not in llama.thresholds["valid_tp_sizes"]  # type: ignore[operator]
    [qwen] = found["Deployment/llm/qwen-7b"]
    assert (qwen.values["tp"], qwen.values["kv_heads"], qwen.values["cases"]) == (
        7,
        4,
        ("tp-splits-kv-heads",),
    )
    [deepseek] = found["RayService/ray/deepseek"]
    assert (deepseek.values["pp"], deepseek.values["mla"]) == (64, True)
    assert deepseek.values["cases"] == ("pp-outside-layers",)
    assert deepseek.thresholds["max_pp"] == deepseek.values["layers"] == 61


def test_v006_block_sizes_refused_by_the_release() -> None:
    from gpustrata_policies.rules.v006_block_size_valid.rule import judge

    found = _verdicts("V006", "bad-block-size.yaml", judge)
    [small] = found["Deployment/llm/small-blocks"]
    assert (small.reason, small.values["block_size"]) == ("block-size-refused", 8)
    assert small.values["version"] == reference_release()
    assert [g for g, _ in small.values["gpus"]] == ["NVIDIA L4 Tensor Core GPU"]  # type: ignore[union-attr]
    [big] = found["Deployment/llm/big-blocks"]
    assert big.values["block_size"] == 256
    assert "--block-size only takes" in str(big.values["why"])
    assert big.path[-1] == "args"


def test_v007_fraction_range_time_slicing_and_ray_bundles() -> None:
    from gpustrata_policies.rules.v007_memory_fraction_valid.rule import judge

    found = _verdicts("V007", "bad-fractions.yaml", judge)
    [over] = found["Deployment/llm/over"]
    assert (over.reason, over.values["utilization"]) == ("fraction-out-of-range", "1.2")
    [sliced] = found["Deployment/llm/sliced"]
    assert sliced.reason == "time-sliced-gpu-oversubscribed"
    assert (sliced.values["pods"], sliced.values["exact"], sliced.values["fraction"]) == (
        4,
        True,
        0.9,
    )
    [halves] = found["RayService/ray/halves"]
    assert (halves.values["bundle_gpus"], halves.values["per_gpu"]) == (Fraction(1, 2), 2)
    assert halves.values["utilization"] is None  # unset: vLLM's default floor
    assert halves.thresholds == {"max_utilization": 0.5}


def test_v008_enforce_eager_on_containers_and_ray_serve() -> None:
    from gpustrata_policies.rules.v008_no_eager_in_production.rule import judge

    found = _verdicts("V008", "bad-eager.yaml", judge)
    [container] = found["Deployment/llm/vllm"]
    assert (container.reason, container.values["how"]) == ("enforce-eager", "--enforce-eager")
    [ray] = found["RayService/ray/llm"]
    assert ray.values["how"] == "engine_kwargs enforce_eager: true"
    assert ray.path == ("spec", "serveConfigV2")


def test_v009_startup_window_against_the_estimate() -> None:
    from gpustrata_policies.rules.v009_startup_window_covers_load.rule import judge

    found = _verdicts("V009", "bad-70b-in-300s.yaml", judge)
    [llama] = found["Deployment/llm/llama-70b"]
    assert (llama.decision, llama.reason, llama.values["probe"]) == (
        "violation",
        "window-too-short",
        "startupProbe",
    )
    assert llama.values["window_s"] == 0 + 9 * 10  # initialDelaySeconds + failureThreshold x period
    assert llama.values["needed_s"] > llama.values["window_s"]  # type: ignore[operator]
    assert llama.thresholds == {"safety_factor": STARTUP_SAFETY_FACTOR}
    [mistral] = found["Deployment/llm/mistral-7b"]
    # No startupProbe: the liveness window (150 + 3 x 10 s) is judged, and at the fastest
    # published load it would suffice: advisory.
    assert (mistral.decision, mistral.values["probe"], mistral.values["window_s"]) == (
        "advisory",
        "livenessProbe",
        180,
    )
    assert mistral.values["optimistic"]


def test_v010_probe_floor_serve_checks_and_v0_heartbeat() -> None:
    from gpustrata_policies.rules.v010_liveness_outlasts_longest_step.rule import judge

    floor = _defaults("V010")
    [probe] = _verdicts("V010", "bad-one-second-one-failure.yaml", judge)["Deployment/llm/qwen-7b"]
    assert (probe.decision, probe.reason) == ("advisory", "probe-below-floor")
    assert (probe.values["timeout"], probe.values["failures"], probe.values["period"]) == (1, 1, 10)
    assert probe.values["problems"] == ("timeout", "failures", "tolerance")
    assert probe.thresholds == floor
    [serve] = _verdicts("V010", "bad-ray-serve-health-check.yaml", judge)["RayService/ray/qwen"]
    assert (serve.values["timeout"], serve.values["period"]) == (1.0, 2.0)
    assert serve.values["problems"] == ("timeout", "tolerance")  # 3 failures are Ray Serve's
    found = _verdicts("V010", "bad-v0-step-marks-engine-dead.yaml", judge)
    [step] = found["Deployment/llm/llama-8b"]
    limit = load_vllm_releases().health.v0_dead_after_s.value
    assert (step.reason, step.thresholds) == ("step-outlasts-v0-heartbeat", {"dead_after_s": limit})
    assert step.values["step_s"] >= limit  # type: ignore[operator]
    assert step.sources


def test_v011_readiness_probe_cases() -> None:
    from gpustrata_policies.rules.v011_readiness_gates_traffic.rule import judge

    none, tcp = _verdicts("V011", "bad-no-readiness.yaml", judge)["Deployment/llm/vllm"]
    assert (none.reason, none.values["probe"]) == ("no-probe", None)
    assert (tcp.reason, tcp.values["probe"], tcp.thresholds["port"]) == ("tcp-port", "8000", 8001)
    assert tcp.path[-2:] == (1, "readinessProbe")


def test_v013_options_the_release_refuses() -> None:
    from gpustrata_policies.rules.v013_engine_flags_accepted.rule import judge

    found = _verdicts("V013", "bad-flags.yaml", judge)
    [block] = found["Deployment/llm/block-manager"]
    assert (block.reason, block.values["written"]) == ("option-refused", "--use-v2-block-manager")
    assert block.values["why"] == "unrecognized arguments: --use-v2-block-manager"
    last = block.values["last_accepting"]
    assert last in flag_releases() and last != block.values["version"]
    assert block.values["instead"] and block.sources  # the catalogue's replacement, cited
    ambiguous = [v for v in found["Deployment/llm/chunked"] if v.values["written"] == "--max-num"]
    assert str(ambiguous[0].values["why"]).startswith("ambiguous option: --max-num could match")
    [kwargs] = found["RayService/ray/llm"]
    assert (kwargs.values["written"], kwargs.values["engine_kwargs"]) == (
        "num_scheduler_steps",
        True,
    )
    # The upstream image by digest is judged under every read release: some accept the
    # flag and later ones refuse it, so the split is named; LMCache's build stays unknown.
    unknown = found["Deployment/llm/unknown-release"]
    assert {(v.decision, v.reason) for v in unknown} == {
        ("not_evaluated", "releases-split"),
        ("not_evaluated", "release-unknown"),
    }
