"""The serving-layer rules (R001-R006, V001, V007, V008) on their fixtures.

Bad fixtures give exactly the expected (resource, enforcement, message) triples for their
rule; good fixtures give nothing for these rules, and nothing is "not evaluated".
``EXPECTED`` has the shape of ``test_rules.EXPECTED`` plus the enforcement.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustrata_policies import evaluate, find_rule
from gpustrata_policies.inputs.manifests import load_paths

FIXTURES = Path(__file__).resolve().parent / "fixtures"

RULES = {
    "R001": "ray-gpus-match-container",
    "R002": "ray-head-keeps-off-gpus",
    "R003": "placement-fits-workers",
    "R004": "ray-versions-match",
    "R005": "ray-path-tolerates-model-load",
    "R006": "upgrade-capacity",
    "V001": "parallelism-matches-gpus",
    "V007": "memory-fraction-valid",
    "V008": "no-eager-in-production",
}
ADVISORY = {"R002", "R006"}

EXPECTED: dict[str, list[tuple[str, str, str]]] = {
    "R001/bad-num-gpus-mismatch.yaml": [
        (
            "RayCluster/ray/llm",
            "mandatory",
            "worker group 'too-many' tells Ray it has 8 GPU(s) per Pod (rayStartParams.num-gpus: "
            "\"8\") but its Ray container 'ray-worker' has 4 GPU(s) in its limits; Ray places 8 "
            "GPU workers on each Pod but only 4 GPU(s) exist there; the extra workers fail to "
            "start",
        ),
        (
            "RayCluster/ray/llm",
            "mandatory",
            "worker group 'no-gpu' tells Ray it has 2 GPU(s) per Pod (rayStartParams.num-gpus: "
            "\"2\") but its Ray container 'ray-worker' has 0 GPU(s) in its limits; Ray schedules "
            "GPU engine workers onto Pods that have no GPU, and CUDA fails when they start",
        ),
        (
            "RayCluster/ray/llm",
            "mandatory",
            "worker group 'resources-override' tells Ray it has 1 GPU(s) per Pod (resources.GPU: "
            "1) but its Ray container 'ray-worker' has 2 GPU(s) in its limits; 1 GPU(s) of each "
            "Pod stay idle, and placement groups sized to the Pod do not fit",
        ),
    ],
    "R002/bad-head-gpus.yaml": [
        (
            "RayCluster/ray/gpu-head",
            "advisory",
            "head group requests 1 GPU(s); Ray then schedules engine workers on the head, next "
            "to GCS, the dashboard and the Serve controller, and a GPU fault or OOM there takes "
            "the whole cluster down",
        ),
        (
            "RayCluster/ray/advertises",
            "advisory",
            'head group advertises 1 GPU(s) (rayStartParams.num-gpus: "1") without requesting '
            "any; Ray places GPU engine workers on the head, where no GPU is allocated to them",
        ),
        (
            "RayCluster/ray/unset",
            "advisory",
            'head group leaves rayStartParams num-gpus unset (not "0") and tolerates the '
            "nvidia.com/gpu taint, so it can be scheduled on a GPU node; there the NVIDIA "
            "runtime can expose the node's GPUs to a container that requests none (CUDA images "
            "set NVIDIA_VISIBLE_DEVICES=all), Ray counts them and places engine workers on the "
            "head",
        ),
    ],
    "R003/bad-replicas-exceed-workers.yaml": [
        (
            "RayService/ray/llm",
            "mandatory",
            "engine 'llama-70b' runs up to 3 replicas of 4 GPUs (autoscaling_config) but only 2 "
            "fit on the worker Pods at their maxReplicas (worker group 'gpu': 2 Pods x 4 GPUs); "
            "the other replicas stay pending",
        ),
    ],
    "R003/bad-pool-max-size-caps-workers.yaml": [
        (
            "RayService/ray/llm",
            "mandatory",
            "engine 'llama-70b' runs up to 4 replicas of 8 GPUs (autoscaling_config) but only 3 "
            "fit on the worker Pods at their maxReplicas and their pools' maxSize (worker group "
            "'gpu': 3 Pods x 8 GPUs (not 4: pool h100 holds 1 per 8-GPU node x maxSize 3 = 3)); "
            "the other replicas stay pending",
        ),
    ],
    "R003/bad-strict-pack-too-big.yaml": [
        (
            "RayService/ray/llm",
            "mandatory",
            "engine 'llama-405b' needs 8 GPU(s) on one Ray node (placement group of 8 bundles, 8 "
            "GPU(s), STRICT_PACK) but the largest worker Pod has 4 (worker group 'gpu'); Ray "
            "cannot create the placement group (INFEASIBLE) and the engine never starts",
        ),
    ],
    "R004/bad-stale-ray-version.yaml": [
        (
            "RayCluster/ray/llm",
            "mandatory",
            "rayVersion 2.46.0 but the Ray image rayproject/ray-llm:2.60.0-py311-cu128 runs Ray "
            "2.60.0; KubeRay switches autoscaler-v2-default (Ray 2.47.0), "
            "unified-http-health-probe (Ray 2.53.0) on rayVersion (gates of KubeRay v1.7.0, the "
            "newest catalogued: the operator version is not in the input), so it configures the "
            "Pods for the wrong Ray",
        ),
        (
            "RayCluster/ray/patch",
            "advisory",
            "rayVersion 2.60.1 but the Ray image rayproject/ray:2.60.0-py311 runs Ray 2.60.0; no "
            "behaviour this object uses switches between them (gates of KubeRay v1.7.0, the "
            "newest catalogued: the operator version is not in the input), but KubeRay reads "
            "rayVersion to choose probes, autoscaler and auth: keep it equal to the image",
        ),
        (
            "RayCluster/ray/mixed",
            "mandatory",
            "the Ray containers run different Ray versions (Ray 2.59.0 in worker group 'old'; "
            "Ray 2.60.0 in head group); Ray refuses to join nodes whose version differs from the "
            "head's",
        ),
    ],
    "R004/bad-support-matrix.yaml": [
        (
            "RayCluster/ray/old-ray",
            "mandatory",
            "Ray 2.9.0 is older than KubeRay v1.4.2 supports (Ray 2.38.0 and later; operator "
            "from HelmRelease/kuberay/kuberay-operator chart kuberay-operator 1.4.2)",
        ),
        (
            "RayService/ray/llm",
            "mandatory",
            "Ray Serve LLM runs vLLM 0.22.0 (serveConfigV2 applications runtime_env pip "
            "vllm==0.22.0) but ray[llm]==2.60.0 requires vllm==0.29.0",
        ),
    ],
    "R005/bad-timeout-shorter-than-load.yaml": [
        (
            "RayService/ray/planned",
            "mandatory",
            "engine 'llama': Ray Serve LLM gives up on the engine after 600 s "
            "(RAYLLM_ENGINE_START_TIMEOUT_S=600 in the llm_config runtime_env) but loading it "
            "needs 1200 s (the planner's startup estimate, annotation "
            "gpustrata.io/startup-estimate-seconds); the replica is killed and restarted before "
            "it ever serves",
        ),
        (
            "RayService/ray/estimated",
            "mandatory",
            "engine 'llama': Ray Serve LLM gives up on the engine after 300 s "
            "(RAYLLM_ENGINE_START_TIMEOUT_S=300 in the worker group 'gpu' env) but loading it "
            "needs 655 s (estimated: 141.1 GB at 0.25 GB/s (gpustrata default) + 90 s engine "
            "init); the replica is killed and restarted before it ever serves",
        ),
        (
            "RayService/ray/old-kuberay",
            "mandatory",
            "serviceUnhealthySecondThreshold: 600 s is less than the 1200 s the engine needs to "
            "load (the planner's startup estimate, annotation "
            "gpustrata.io/startup-estimate-seconds); KubeRay before 1.0 (ray.io/v1alpha1) "
            "replaces the cluster when the application is not RUNNING by then",
        ),
    ],
    "R006/bad-upgrade-exceeds-pool.yaml": [
        (
            "RayService/ray/llm",
            "advisory",
            "upgradeStrategy unset, so KubeRay's default NewCluster brings up a second "
            "RayCluster during an upgrade: the serving cluster at its max holds 16 GPUs and the "
            "new one starts with 8 (worker group 'h100': 4 Pods serving and 2 new, 4 GPUs each), "
            "24 in all, but the pools hold 16 GPUs at maxSize (h100 2 x 8 GPUs); the new "
            "cluster's Pods stay Pending while the serving one is busy and the upgrade stalls",
        ),
    ],
    "V001/bad-parallelism.yaml": [
        (
            "Deployment/llm/short",
            "mandatory",
            "container 'vllm' runs a vLLM engine of tensor_parallel_size 4 x "
            "pipeline_parallel_size 1 = 4 GPUs but its GPU limit is 2; vLLM starts one worker "
            "per GPU and fails at startup when it finds fewer GPUs",
        ),
        (
            "Deployment/llm/idle",
            "mandatory",
            "container 'vllm' runs a vLLM engine of tensor_parallel_size 2 x "
            "pipeline_parallel_size 1 = 2 GPUs but its GPU limit is 8; 6 GPU(s) stay allocated "
            "and idle",
        ),
        (
            "RayService/ray/llm",
            "mandatory",
            "engine 'llama' runs tensor_parallel_size 4 x pipeline_parallel_size 1 = 4 GPU "
            "workers but its placement_group_config bundles hold 2 GPUs; vLLM's Ray executor "
            "places one GPU worker per bundle and fails to start",
        ),
    ],
    "V007/bad-fractions.yaml": [
        (
            "Deployment/llm/over",
            "mandatory",
            "container 'vllm' sets gpu_memory_utilization 1.2; vLLM accepts a fraction in (0, 1] "
            "and refuses to start",
        ),
        (
            "Deployment/llm/sliced",
            "mandatory",
            "container 'vllm' gets a time-sliced GPU (its node selector: "
            "nvidia.com/gpu.replicas=4) that 4 Pods share with no memory isolation, and its "
            "engine takes gpu_memory_utilization 0.9 of the GPU's memory: 4 engines need 3.60 x "
            "the GPU; the second fails with out of memory",
        ),
        (
            "RayService/ray/halves",
            "mandatory",
            "engine 'qwen' places workers in bundles of 0.5 GPU, so Ray can put 2 of them on one "
            "GPU, each taking vLLM's default gpu_memory_utilization (at least 0.9) of its "
            "memory: 1.80 x the GPU; set gpu_memory_utilization to at most 0.5",
        ),
    ],
    "V008/bad-eager.yaml": [
        (
            "Deployment/llm/vllm",
            "mandatory",
            "container 'vllm' runs vLLM with enforce_eager (--enforce-eager): no CUDA graphs and "
            "no torch.compile, so every decode step launches its kernels one by one and serves "
            "fewer tokens per second at higher latency",
        ),
        (
            "RayService/ray/llm",
            "mandatory",
            "engine 'qwen' runs vLLM with enforce_eager (engine_kwargs enforce_eager: true): no "
            "CUDA graphs and no torch.compile, so every decode step launches its kernels one by "
            "one and serves fewer tokens per second at higher latency",
        ),
    ],
}

BAD = sorted(p for rule in RULES for p in (FIXTURES / rule).glob("bad-*.yaml"))
GOOD = sorted(p for rule in RULES for p in (FIXTURES / rule).glob("good-*.yaml"))


def _rel(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


def test_every_rule_has_good_and_bad_fixtures() -> None:
    for rule in RULES:
        assert list((FIXTURES / rule).glob("good-*.yaml")), rule
        assert list((FIXTURES / rule).glob("bad-*.yaml")), rule
    assert sorted(EXPECTED) == [_rel(p) for p in BAD]


@pytest.mark.parametrize(("rule_id", "name"), sorted(RULES.items()))
def test_rule_metadata(rule_id: str, name: str) -> None:
    rule = find_rule(rule_id)
    assert rule is not None and rule.meta.name == name
    assert find_rule(name) is rule
    levels = rule.meta.default_enforcement
    if rule_id in ADVISORY:
        assert set(levels.values()) == {"advisory"}
    elif rule_id == "V008":
        assert levels == {"dev": "advisory", "staging": "advisory", "prod": "mandatory"}
    else:
        assert set(levels.values()) == {"mandatory"}
    assert rule.meta.references and rule.meta.rationale and rule.meta.fix


@pytest.mark.parametrize("path", BAD, ids=_rel)
def test_bad_fixture_gives_exactly_the_expected_findings(path: Path) -> None:
    rule_id = path.parent.name
    report = evaluate(load_paths([str(path)]))
    got = [(f.resource, f.enforcement, f.message) for f in report.findings if f.rule == rule_id]
    assert got == EXPECTED[_rel(path)]
    assert all(f.file == str(path) and f.line for f in report.findings if f.rule == rule_id)


@pytest.mark.parametrize("path", GOOD, ids=_rel)
def test_good_fixture_is_clean(path: Path) -> None:
    report = evaluate(load_paths([str(path)]))
    assert [(f.rule, f.message) for f in report.findings] == []
    assert report.not_evaluated == []


def test_eager_is_advisory_outside_production() -> None:
    path = str(FIXTURES / "V008" / "bad-eager.yaml")
    for env, level in (("dev", "advisory"), ("staging", "advisory"), ("prod", "mandatory")):
        report = evaluate(load_paths([path]), environment=env)
        assert {f.enforcement for f in report.findings if f.rule == "V008"} == {level}


def test_advisory_downgrade_stays_advisory_when_configured_mandatory() -> None:
    # R004's advisory case (no gate crossed) stays advisory even where R004 is mandatory.
    path = str(FIXTURES / "R004" / "bad-stale-ray-version.yaml")
    report = evaluate(load_paths([path]), config={"rules": {"R004": "mandatory"}})
    levels = {f.resource: f.enforcement for f in report.findings if f.rule == "R004"}
    assert levels == {
        "RayCluster/ray/llm": "mandatory",
        "RayCluster/ray/patch": "advisory",
        "RayCluster/ray/mixed": "mandatory",
    }


def test_allow_head_gpus_threshold_silences_r002() -> None:
    path = str(FIXTURES / "R002" / "bad-head-gpus.yaml")
    report = evaluate(load_paths([path]), config={"rules": {"R002": {"allow_head_gpus": True}}})
    assert [f for f in report.findings if f.rule == "R002"] == []


def test_deprecated_thresholds_are_noted_not_violations() -> None:
    path = str(FIXTURES / "R005" / "bad-timeout-shorter-than-load.yaml")
    report = evaluate(load_paths([path]))
    notes = [n.reason for n in report.not_evaluated if n.rule == "R005"]
    assert notes == [
        "serviceUnhealthySecondThreshold: 1800 has no effect: KubeRay ignores it in ray.io/v1 "
        "since 1.1 (https://github.com/ray-project/kuberay/issues/1685); the engine start "
        "timeout is what bounds a model load"
    ]


@pytest.mark.parametrize(
    "sharing",
    ["time-slicing label", "MIG label", "device-plugin ConfigMap"],
)
def test_r003_does_not_cap_workers_by_a_pool_whose_gpus_may_be_shared(sharing: str) -> None:
    """With time-slicing, MPS or MIG a node advertises more nvidia.com/gpu than it holds,
    so the pool's maxSize x physical GPUs is no bound on the worker Pods."""
    import copy

    import yaml

    path = FIXTURES / "R003" / "bad-pool-max-size-caps-workers.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert [f.rule for f in evaluate(docs).findings if f.rule == "R003"] == ["R003"]
    docs = copy.deepcopy(docs)
    pool = next(d for d in docs if d["kind"] == "GpuNodePool")
    if sharing == "time-slicing label":
        pool["spec"]["labels"] = {"nvidia.com/gpu.replicas": "4"}
    elif sharing == "MIG label":
        pool["spec"]["labels"] = {"nvidia.com/mig.config": "all-1g.10gb"}
    else:
        config = {
            "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}
        }
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "time-slicing", "namespace": "gpu-operator"},
                "data": {"any": yaml.safe_dump(config)},
            }
        )
    assert [f for f in evaluate(docs).findings if f.rule == "R003"] == []
