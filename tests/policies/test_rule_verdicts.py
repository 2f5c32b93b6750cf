"""Rules split as ``judge -> Verdict`` and ``message(verdict)`` (issue 32): their decisions as
data, on their own rule-folder fixtures. The verdicts' figures, thresholds and sources are
asserted here; the prose is pinned by each folder's ``expected.yaml``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml
from conftest import fixture

from gpustrata_policies.evaluate import find_rule, load_config
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.rules._verdict import Verdict
from gpustrata_policies.view.objects import K8sObject

Judge = Callable[[RuleContext, K8sObject], Iterable[Verdict]]


def _verdicts(
    rule_id: str, name: str | Path, judge: Judge, config: Mapping[str, Any] | None = None
) -> dict[str, list[Verdict]]:
    """resource -> the verdicts *judge* gives on fixture *name* of rule *rule_id*."""
    rule = find_rule(rule_id)
    assert rule is not None
    objs = load_paths([str(name if isinstance(name, Path) else fixture(rule_id, name))])
    ctx = RuleContext(rule.meta, load_config(config, "prod"), objs)
    out = {obj.resource: list(judge(ctx, obj)) for obj in objs}
    return {resource: found for resource, found in out.items() if found}


def test_r004_stale_ray_version_names_the_gates_crossed() -> None:
    from gpustrata_policies.rules.r004_ray_versions_match.rule import judge

    found = _verdicts("R004", "bad-stale-ray-version.yaml", judge)
    [stale] = found["RayCluster/ray/llm"]
    assert (stale.decision, stale.reason) == ("violation", "stale-ray-version")
    assert (stale.values["declared"], stale.values["image_ray"]) == ("2.46.0", "2.60.0")
    assert stale.values["crossed"] == (
        ("autoscaler-v2-default", "2.47.0"),
        ("unified-http-health-probe", "2.53.0"),
    )
    assert stale.thresholds["gates"] == ("2.47.0", "2.53.0")
    assert stale.values["operator"] is None and stale.values["operator_catalogued"] is False
    assert stale.path == ("spec", "rayVersion")
    assert stale.sources, "the gates' catalogue sources travel with the verdict"
    # A mismatch crossing no gate in use is advisory, not mandatory.
    [patch] = found["RayCluster/ray/patch"]
    assert (patch.decision, patch.values["crossed"]) == ("advisory", ())
    [mixed] = found["RayCluster/ray/mixed"]
    assert mixed.reason == "mixed-ray-images"
    assert mixed.values["images"] == (
        ("2.59.0", ("worker group 'old'",)),
        ("2.60.0", ("head group",)),
    )
    assert mixed.path == ("spec", "workerGroupSpecs")


def test_r004_support_matrix_thresholds_come_from_the_catalogue() -> None:
    from gpustrata_policies.rules.r004_ray_versions_match.rule import judge

    found = _verdicts("R004", "bad-support-matrix.yaml", judge)
    [old] = found["RayCluster/ray/old-ray"]
    assert old.reason == "ray-older-than-kuberay-supports"
    assert (old.values["ray"], old.values["kuberay"]) == ("2.9.0", "v1.4.2")
    assert old.thresholds == {"min_ray": "2.38.0"}
    [pin] = found["RayService/ray/llm"]
    assert pin.reason == "vllm-outside-ray-llm"
    assert (pin.values["vllm"], pin.values["ray_llm"]) == ("0.22.0", "2.60.0")
    assert pin.thresholds == {"vllm_requirement": "==0.29.0"}
    assert pin.path == ("spec", "serveConfigV2")
    assert _verdicts("R004", "good-versions-match.yaml", judge) == {}


def test_r004_ray_agent_hang_by_who_probes_the_head() -> None:
    """Ray 2.11.0-2.37.x hang the head's dashboard agent once a job exists (ray#47637): mandatory
    where KubeRay probes the head through that agent, advisory where it does not."""
    from gpustrata_policies.rules.r004_ray_versions_match.rule import judge

    found = _verdicts("R004", "bad-ray-agent-hang.yaml", judge)
    [hang] = found["RayService/ray/vllm"]
    assert (hang.decision, hang.reason) == ("violation", "ray-release-defect")
    assert (hang.values["ray"], hang.values["probes"], hang.values["kuberay"]) == (
        "2.24.0",
        "injected",
        "v1.1.1",
    )
    assert hang.thresholds == {"first_ray": "2.11.0", "fixed_ray": "2.38.0"}
    assert any("troubleshooting" in s for s in hang.sources)
    assert hang.path[-1] == "image" and "headGroupSpec" in hang.path
    [own] = found["RayCluster/ray/own-probes"]
    assert (own.decision, own.values["probes"]) == ("advisory", "own")
    found = _verdicts("R004", "bad-ray-agent-hang-kuberay-1-0.yaml", judge)
    [ft] = [v for v in found["RayCluster/ray/ray-2-30"] if v.reason == "ray-release-defect"]
    assert (ft.decision, ft.values["probes"], ft.values["kuberay"]) == (
        "advisory",
        "ft-only",
        "v1.0.0",
    )


def test_r004_ray_agent_hang_range_edges(tmp_path: Path) -> None:
    """2.10.0 and 2.38.0 are clean, 2.11.0 and 2.37.0 are not; a Ray that KubeRay does not
    support at all (v1.4.2: Ray 2.38.0 and later) is reported once, as unsupported."""
    from gpustrata_policies.rules.r004_ray_versions_match.rule import judge

    def reasons(ray: str, kuberay: str = "1.1.1") -> list[str]:
        path = tmp_path / f"ray-{ray}-{kuberay}.yaml"
        path.write_text(
            "apiVersion: helm.sh/v3\nkind: HelmRelease\n"
            "metadata: {name: kuberay-operator, namespace: kuberay}\n"
            f"spec: {{chart: kuberay-operator, version: {kuberay}}}\n---\n"
            "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: c, namespace: ray}\n"
            f"spec:\n  rayVersion: '{ray}'\n  headGroupSpec:\n    rayStartParams: {{}}\n"
            "    template:\n      spec:\n        containers:\n"
            f"        - {{name: ray-head, image: 'rayproject/ray:{ray}-py310'}}\n"
        )
        found = _verdicts("R004", path, judge).get("RayCluster/ray/c", [])
        return [v.reason for v in found if v.decision != "not_evaluated"]

    assert reasons("2.10.0") == [] and reasons("2.38.0") == []
    assert reasons("2.11.0") == ["ray-release-defect"] == reasons("2.37.0")
    assert reasons("2.24.0", "1.4.2") == ["ray-older-than-kuberay-supports"]


def test_r004_field_corpus_ray_2_24_is_reported(tmp_path: Path) -> None:
    """data-on-eks' RayService on Ray 2.24.0 (field corpus) passed R004 silently before. The
    file names no KubeRay release, and v1.0.0 injects the agent probes only with GCS fault
    tolerance, so it is advisory until the operator is known (data-on-eks installs 1.1.1)."""
    from conftest import FIELD_CORPUS

    from gpustrata_policies.rules.r004_ray_versions_match.rule import judge

    corpus_file = FIELD_CORPUS / "awslabs-data-on-eks-ray-service-vllm.yaml"
    [hang] = _verdicts("R004", corpus_file, judge)["RayService/rayserve-vllm/vllm"]
    assert (hang.decision, hang.reason, hang.values["ray"]) == (
        "advisory",
        "ray-release-defect",
        "2.24.0",
    )
    assert hang.values["probes"] == "operator-unknown"
    with_operator = tmp_path / "with-operator.yaml"
    with_operator.write_text(
        "apiVersion: helm.sh/v3\nkind: HelmRelease\n"
        "metadata: {name: kuberay-operator, namespace: kuberay}\n"
        "spec: {chart: kuberay-operator, version: 1.1.1}\n---\n" + corpus_file.read_text()
    )
    [known] = _verdicts("R004", with_operator, judge)["RayService/rayserve-vllm/vllm"]
    assert (known.decision, known.values["probes"]) == ("violation", "injected")


def test_r003_replicas_beyond_the_worker_pods() -> None:
    from gpustrata_policies.rules.r003_placement_fits_workers.rule import judge

    [v] = _verdicts("R003", "bad-replicas-exceed-workers.yaml", judge)["RayService/ray/llm"]
    assert (v.decision, v.reason) == ("violation", "replicas-do-not-fit")
    assert (v.values["max_replicas"], v.values["gpus"]) == (3, Fraction(4))
    assert v.thresholds == {"fitted": 2}
    assert v.values["groups"] == (("worker group 'gpu'", 2, Fraction(4), ""),)
    # A pool's maxSize caps the worker group below its maxReplicas, and says so.
    [capped] = _verdicts("R003", "bad-pool-max-size-caps-workers.yaml", judge)["RayService/ray/llm"]
    assert (capped.values["max_replicas"], capped.thresholds["fitted"]) == (4, 3)
    [group] = capped.values["groups"]  # type: ignore[misc]
    assert group[1:3] == (3, Fraction(8)) and group[3].startswith("not 4: ")


def test_r003_one_replica_and_leader_worker_groups() -> None:
    from gpustrata_policies.rules.r003_placement_fits_workers.rule import judge

    [big] = _verdicts("R003", "bad-strict-pack-too-big.yaml", judge)["RayService/ray/llm"]
    assert big.reason == "one-replica-does-not-fit"
    assert (big.values["gpus"], big.values["strategy"]) == (Fraction(8), "STRICT_PACK")
    assert big.thresholds == {"largest_worker_gpus": Fraction(4)}
    found = _verdicts("R003", "bad-lws-groups-exceed-pool.yaml", judge)
    [lws] = found["LeaderWorkerSet/llm/vllm-405b"]
    assert (lws.reason, lws.values["replicas"], lws.values["size"]) == ("lws-exceeds-pool", 2, 2)
    assert (lws.values["pods"], lws.thresholds["pool_max"]) == (4, 3)
    assert lws.path == ("spec", "replicas")
    for good in ("good-strict-pack-fits.yaml", "good-lws-groups-fit-pool.yaml"):
        assert _verdicts("R003", good, judge) == {}


GIB = Fraction(2**30)
RUNTIME_SHM = Fraction(64 * 2**20)


def test_k007_shm_medium_size_and_minimum() -> None:
    from gpustrata_policies.rules.k007_shm_for_multi_gpu.rule import judge

    [disk] = _verdicts("K007", "bad-ray-disk-shm.yaml", judge)["RayService/ray/llm"]
    assert (disk.reason, disk.values["medium"], disk.values["engine_gpus"]) == (
        "shm-too-small",
        "disk",
        4,
    )
    assert disk.thresholds == {"min_shm_bytes": GIB}
    [none] = _verdicts("K007", "bad-tp4-no-shm.yaml", judge)["Deployment/llm/llama-70b"]
    assert (none.values["medium"], none.values["shm_bytes"]) == ("none", RUNTIME_SHM)
    assert none.path[-1] == "volumeMounts"
    # KubeRay 1.6.0 skips its /dev/shm for plasma-directory: the operator is the source.
    [plasma] = _verdicts("K007", "bad-ray-plasma-directory.yaml", judge)["RayService/ray/llm"]
    assert (plasma.values["medium"], plasma.values["shm_bytes"]) == ("none", RUNTIME_SHM)
    assert plasma.sources and "kuberay-operator" in plasma.sources[0]
    [unknown] = _verdicts("K007", "good-ray-plasma-directory-unknown-kuberay.yaml", judge)[
        "RayService/ray/llm"
    ]
    assert (unknown.decision, unknown.values["medium"]) == ("not_evaluated", "unknown")
    assert unknown.sources == ()
    assert _verdicts("K007", "good-memory-shm.yaml", judge) == {}


def test_k007_minimum_is_the_configured_threshold() -> None:
    from gpustrata_policies.rules.k007_shm_for_multi_gpu.rule import judge

    config = {"rules": {"K007": {"min_shm_size": "64Gi"}}}
    found = _verdicts("K007", "good-memory-shm.yaml", judge, config)
    assert found, "a memory /dev/shm below a raised minimum is too small"
    for verdicts in found.values():
        assert {v.thresholds["min_shm_bytes"] for v in verdicts} == {64 * GIB}
        assert all(v.values["medium"] == "memory" for v in verdicts)


def _with_strategy(tmp_path: Path, strategy: dict[str, Any]) -> Path:
    """R006's bad fixture with its RayService's spec.upgradeStrategy set to *strategy*."""
    docs = list(yaml.safe_load_all(fixture("R006", "bad-upgrade-exceeds-pool.yaml").read_text()))
    for doc in docs:
        if doc and doc.get("kind") == "RayService":
            doc["spec"]["upgradeStrategy"] = strategy
    path = tmp_path / "upgrade.yaml"
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    return path


def test_r006_serving_plus_new_cluster_against_the_pools(tmp_path: Path) -> None:
    from gpustrata_policies.rules.r006_upgrade_capacity.rule import judge

    [v] = _verdicts("R006", "bad-upgrade-exceeds-pool.yaml", judge)["RayService/ray/llm"]
    assert (v.decision, v.reason) == ("violation", "upgrade-exceeds-pools")
    assert (v.values["strategy"], v.values["defaulted"]) == ("NewCluster", True)
    # 4 Pods serving at max + 2 new at the initial replicas, 4 GPUs each; pool 2 x 8 GPUs.
    assert (v.values["serving_gpus"], v.values["new_gpus"], v.values["need_gpus"]) == (16, 8, 24)
    assert v.values["groups"] == (("worker group 'h100'", 4, 2, Fraction(4)),)
    assert v.values["pools"] == (("h100", 2, 8),)
    assert v.thresholds == {"capacity_gpus": 16}
    assert v.path == ("spec",)
    assert _verdicts("R006", "good-upgrade-fits-pool.yaml", judge) == {}
    # Incremental: the new cluster starts at minReplicas and surges by maxSurgePercent.
    incremental = {
        "type": "NewClusterWithIncrementalUpgrade",
        "clusterUpgradeOptions": {"maxSurgePercent": 75},
    }
    [inc] = _verdicts("R006", _with_strategy(tmp_path, incremental), judge)["RayService/ray/llm"]
    assert (inc.values["new_gpus"], inc.values["max_surge_percent"]) == (12, 75)
    assert (inc.values["defaulted"], inc.path) == (False, ("spec", "upgradeStrategy"))
    # No second cluster, no verdict.
    assert _verdicts("R006", _with_strategy(tmp_path, {"type": "None"}), judge) == {}


def test_r005_engine_start_timeout_against_the_estimated_load() -> None:
    from gpustrata_policies.rules.r005_ray_path_tolerates_model_load.rule import judge

    found = _verdicts("R005", "bad-timeout-shorter-than-load.yaml", judge)
    [planned] = found["RayService/ray/planned"]
    assert (planned.decision, planned.reason) == ("violation", "engine-start-timeout-short")
    assert (planned.values["load_s"], planned.thresholds) == (1200, {"timeout_s": 600})
    # The fastest published load fits the timeout: a restart is likely, not certain.
    [spread] = found["RayService/ray/estimated-within-spread"]
    assert (spread.decision, spread.values["fits_optimistic"]) == ("advisory", True)
    optimistic, load = spread.values["optimistic_s"], spread.values["load_s"]
    assert isinstance(optimistic, float) and isinstance(load, int)
    assert optimistic <= spread.thresholds["timeout_s"] == 650 < load
    estimated = found["RayService/ray/estimated"]
    assert [v.reason for v in estimated] == [
        "engine-start-timeout-short",
        "threshold-not-a-load-bound",
    ]
    assert estimated[0].thresholds == {"timeout_s": 100}
    assert (estimated[1].decision, estimated[1].values["setting"]) == ("advisory", "1800")
    # KubeRay before 1.0 (ray.io/v1alpha1) honours the threshold: 600 s < the 1200 s load.
    [old] = found["RayService/ray/old-kuberay"]
    assert (old.reason, old.thresholds, old.values["load_s"]) == (
        "threshold-short",
        {"threshold_s": 600},
        1200,
    )
    assert old.path == ("spec", "serviceUnhealthySecondThreshold")
    for good in ("good-kuberay-1-0-threshold.yaml", "good-timeout-covers-load.yaml"):
        assert _verdicts("R005", good, judge) == {}


def test_v005_budget_against_max_num_seqs_and_max_model_len() -> None:
    from gpustrata_policies.rules.v005_batch_budget_covers_context.rule import judge

    found = _verdicts("V005", "bad-batch-budget.yaml", judge)
    # Unset max_num_batched_tokens takes the release's default for the GPU (L4: 2048).
    [seqs] = found["Deployment/llm/many-seqs"]
    assert (seqs.reason, seqs.values["tokens"], seqs.values["seqs"]) == (
        "tokens-below-seqs",
        None,
        4096,
    )
    assert (seqs.values["default_tokens"], seqs.values["budget"]) == ((2048,), 2048)
    assert seqs.thresholds == {"min_tokens": 4096}
    [unchunked] = found["Deployment/llm/unchunked"]
    assert (unchunked.reason, unchunked.values["tokens"]) == ("tokens-below-max-len", 4096)
    assert unchunked.thresholds == {"min_tokens": 8192}
    assert unchunked.values["v0"] is False
    # The V0 engine leaves chunked prefill off by default up to its long-context bound.
    [v0] = found["Deployment/llm/v0-engine"]
    assert (v0.reason, v0.values["v0"], v0.thresholds) == (
        "tokens-below-max-len",
        True,
        {"min_tokens": 16384},
    )
    [old] = found["Deployment/llm/old-v1"]
    assert (old.values["tokens"], old.values["default_seqs"], old.thresholds) == (
        512,
        (1024,),
        {"min_tokens": 1024},
    )
    assert all(v.path and v.path[0] == "spec" for vs in found.values() for v in vs)
    assert _verdicts("V005", "good-batch-budget.yaml", judge) == {}


def test_k008_surge_against_the_pools_spare_gpus() -> None:
    from gpustrata_policies.rules.k008_gpu_rollout_fits.rule import judge

    found = _verdicts("K008", "bad-no-spare-gpu.yaml", judge)
    [defaults] = found["Deployment/llm/k008-defaults"]
    assert (defaults.reason, defaults.values["defaults"]) == ("surge-exceeds-spare", True)
    assert (defaults.values["replicas"], defaults.values["surge"]) == (1, 1)
    assert (defaults.values["capacity"], defaults.values["held"]) == (1, 1)
    assert defaults.thresholds == {"need": 1, "spare": 0}
    [surge] = found["Deployment/llm/k008-surge"]
    assert (surge.values["defaults"], surge.values["pools"]) == (False, ("k008-pair",))
    assert (surge.values["replicas"], surge.values["capacity"], surge.values["held"]) == (2, 2, 2)
    assert surge.thresholds == {"need": 1, "spare": 0}
    assert surge.path == ("spec", "strategy")
    assert _verdicts("K008", "good-spare-gpu.yaml", judge) == {}


# V001: (fixture, resource) -> (reason, TP, PP, GPUs the engine gets, GPUs it needs).
V001_MISMATCHES = {
    ("bad-parallelism.yaml", "Deployment/llm/short"): ("gpus-mismatch", 4, 1, 2, 4),
    ("bad-parallelism.yaml", "Deployment/llm/idle"): ("gpus-mismatch", 2, 1, 8, 2),
    ("bad-lws-group-smaller-than-engine.yaml", "LeaderWorkerSet/llm/vllm-405b-pp4"): (
        "gpus-mismatch",
        8,
        4,
        16,
        32,
    ),
    ("bad-ray-start.yaml", "StatefulSet/llm/ray-head"): ("gpus-mismatch", 2, 2, 2, 4),
}


def test_v001_engine_gpus_against_tp_x_pp() -> None:
    from gpustrata_policies.rules.v001_parallelism_matches_gpus.rule import judge

    for (name, resource), (reason, tp, pp, got, need) in V001_MISMATCHES.items():
        [v] = _verdicts("V001", name, judge)[resource]
        assert (v.decision, v.reason, v.values["tp"], v.values["pp"]) == (
            "violation",
            reason,
            tp,
            pp,
        )
        assert (v.values["got"], v.thresholds) == (Fraction(got), {"need": need})
        assert v.path[-1] == "resources"
    # An LWS group counts the leader's GPUs and each worker's.
    [group] = _verdicts("V001", "bad-lws-group-smaller-than-engine.yaml", judge)[
        "LeaderWorkerSet/llm/vllm-405b-pp4"
    ]
    assert (group.values["size"], group.values["per_worker"], group.values["limit"]) == (
        2,
        Fraction(8),
        Fraction(8),
    )
    for name in ("good-parallelism.yaml", "good-lws-mp-headless.yaml"):
        assert _verdicts("V001", name, judge) == {}, name
    # A `ray start` engine whose GPUs come from the Ray cluster: not evaluated, with the case.
    unsure = _verdicts("V001", "good-ray-start.yaml", judge)
    assert {v.reason for vs in unsure.values() for v in vs} == {"ray-cluster-fallback"}
    assert all(v.decision == "not_evaluated" and not v.path for vs in unsure.values() for v in vs)


def test_v001_ray_start_release_refuses_per_the_catalogue() -> None:
    from gpustrata_policies.rules.v001_parallelism_matches_gpus.rule import judge
    from gpustrata_policies.view import catalogs

    releases = catalogs.vllm_releases()
    [v] = _verdicts("V001", "bad-ray-start.yaml", judge)["StatefulSet/llm/ray-head"]
    assert (v.values["fallback"], v.values["started"]) == ("refuses", "ray start --head")
    assert (v.values["until"], v.values["source"]) == (
        releases.ray_fallback_until,
        releases.ray_fallback_source,
    )


def test_v001_nnodes_mig_ray_executor_and_bundles() -> None:
    from gpustrata_policies.rules.v001_parallelism_matches_gpus.rule import MIG_GUIDE, judge

    headless = _verdicts("V001", "bad-lws-mp-headless.yaml", judge)
    shares = headless["LeaderWorkerSet/llm/llama-405b-mp-half"]
    assert [(v.reason, v.values["nnodes"], v.values["per_node"]) for v in shares] == [
        ("nnodes-share", 2, 8)
    ] * 2
    assert all(v.values["limit"] == 4 and v.thresholds == {"need": 16} for v in shares)
    found = _verdicts("V001", "bad-ray-executor-and-mig.yaml", judge)
    [ray] = found["Deployment/llm/rayexec"]
    assert (ray.reason, ray.values["limit"], ray.thresholds) == (
        "ray-executor-no-cluster",
        1,
        {"need": 4},
    )
    [mig] = found["Deployment/llm/mig"]
    assert (mig.reason, mig.values["tp"], mig.values["mig"]) == (
        "tp-over-mig",
        2,
        ("nvidia.com/mig-3g.40gb",),
    )
    assert mig.sources == (MIG_GUIDE,)
    [bundles] = _verdicts("V001", "bad-parallelism.yaml", judge)["RayService/ray/llm"]
    assert (bundles.reason, bundles.values["held"], bundles.values["bundles"]) == (
        "bundles-mismatch",
        Fraction(2),
        2,
    )
    assert (bundles.thresholds, bundles.path) == ({"world": 4}, ("spec", "serveConfigV2"))


def test_v001_rayclusterfleet_head_joins_its_ray_cluster() -> None:
    """Regression (issue 30, corpus 2): AIBrix's RayClusterFleet head runs
    `$KUBERAY_GEN_RAY_START_CMD; vllm serve ... --tensor-parallel-size 16
    --distributed-executor-backend ray` with 8 GPUs; KubeRay starts Ray there and its worker
    group joins, so the engine's other GPUs come from that cluster: never "joins no Ray
    cluster". Since session 21 the cluster's GPUs are counted (head 8 + 1 worker x 8 = TP 16):
    no verdict at all; with more workers the record stands
    (tests/policies/test_gpu_unknown_sweeps.py)."""
    from gpustrata_policies.rules.v001_parallelism_matches_gpus.rule import judge

    corpus = Path("tests/data/field-corpus-2/aibrix-deepseek-r1-huggingface.yaml")
    resource = "RayClusterFleet/default/deepseek-r1-671b"
    assert resource in {o.resource for o in load_paths([str(corpus)])}
    assert resource not in _verdicts("V001", corpus, judge)


# O002: (fixture, resource) -> (decision, floor case, driver on the pool).
O002_BELOW = {
    ("bad-driver-too-old.yaml", "Deployment/llm/o002-vllm-new"): (
        "violation",
        "branch-not-listed",
        "560.35.03",
    ),
    ("bad-driver-too-old.yaml", "RayCluster/ray/o002-ray"): (
        "violation",
        "branch-not-listed",
        "555.42.06",
    ),
    ("bad-forward-compatibility.yaml", "Deployment/llm/o002-vllm-new"): (
        "advisory",
        "forward-compat",
        "570.124.06",
    ),
    ("bad-forward-compatibility.yaml", "RayCluster/ray/o002-ray"): (
        "advisory",
        "forward-compat",
        "550.54.15",
    ),
    ("bad-node-driver-label-too-old.yaml", "Deployment/llm/vllm"): (
        "violation",
        "geforce",
        "535.183.01",
    ),
}


def test_o002_driver_against_the_catalogued_floor() -> None:
    from gpustrata_policies.rules.o002_driver_supports_cuda.rule import FORWARD_COMPAT, judge
    from gpustrata_policies.view import catalogs

    for (name, resource), (decision, floor, driver) in O002_BELOW.items():
        [v] = _verdicts("O002", name, judge)[resource]
        need = catalogs.min_driver_for_cuda(str(v.values["cuda"]))
        assert need is not None
        assert (v.decision, v.reason, v.values["floor"], v.values["driver"]) == (
            decision,
            "driver-below-floor",
            floor,
            driver,
        )
        assert v.thresholds == {"min_driver": need.min_driver, "cuda_ga": need.cuda}
        assert v.values["fatal"] is (decision == "violation")
        assert (v.sources, v.path[-1]) == ((FORWARD_COMPAT,), "image")
        if floor != "geforce":
            # The image's NVIDIA_REQUIRE_CUDA lists the branch exactly when a
            # forward-compatibility path exists.
            listed = need.image_branches()
            assert listed is not None and v.values["branches"] == tuple(listed.branches)
            assert (v.values["branch"] in listed.branches) is (floor == "forward-compat")
    [opted] = _verdicts("O002", "bad-forward-compatibility.yaml", judge)[
        "Deployment/llm/o002-vllm-new"
    ]
    assert (opted.values["compat_env"], opted.values["brand"]) == (True, "datacenter")
    for name in ("good-cuda-update-same-minor.yaml", "good-driver-new-enough.yaml"):
        assert _verdicts("O002", name, judge) == {}, name
