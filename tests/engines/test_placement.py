"""`--verify-placement` against Ray's real scheduler on a local cluster of logical GPUs.

Each test starts a Ray cluster (head + one node per worker Pod at maxReplicas), so they
take 10-30 s each on two cores.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from _engines_required import require_engine
from _stacks import ROOT, stack_doc

from gpustrata.cli.app import main
from gpustrata.planning.build import build_plan
from gpustrata.render.from_plan import workload_objects
from gpustrata.runtime.placement import mirror_cluster, mirror_clusters, verify_placement
from gpustrata_policies import evaluate


@pytest.fixture(scope="module", autouse=True)
def ray_installed() -> None:
    require_engine("ray")


@pytest.mark.parametrize("env", ["prod", "staging"])
def test_reference_stacks_fit(env: str) -> None:
    plan = build_plan(stack_doc(env))
    clusters = mirror_clusters(plan)
    ray_models = [m for m in plan.models.values() if m.ray is not None]
    assert len(clusters) == len(ray_models) >= 1
    report = verify_placement(clusters)
    assert report.serve_problems == []
    assert len(report.results) == len(ray_models)
    for result, mp in zip(report.results, ray_models, strict=True):
        assert mp.ray is not None
        # One placement group per replica at Serve max_replicas, all created by Ray.
        assert result.states == ["FINISHED"] * mp.max_replicas
        assert result.strategy == mp.ray.placement_strategy
        assert sum(b["GPU"] for b in result.bundles) == mp.gpus_per_replica
    (cluster,) = clusters
    (node,) = cluster.nodes
    assert node.count == ray_models[0].ray.max_workers  # type: ignore[union-attr]
    assert report.exit_code == 0


def _tp8_on_4_gpu_workers() -> dict[str, Any]:
    """Staging with TP 8 on g6e.12xlarge (4 x L40S): the planner spans 2 worker Pods."""
    doc = stack_doc("staging")
    doc["models"][0]["engine"]["tensor_parallel_size"] = 8
    plan = build_plan(doc)
    mp = plan.models["llama-70b-fp8"]
    assert mp.ray is not None
    assert (mp.ray.gpus_per_worker, mp.ray.placement_strategy) == (4, "PACK")
    (obj,) = [o for o in workload_objects(plan) if o["kind"] == "RayService"]
    return obj


def test_tp_beyond_a_worker_pod_is_infeasible_under_strict_pack() -> None:
    obj = _tp8_on_4_gpu_workers()
    forced = copy.deepcopy(obj)
    serve = yaml.safe_load(forced["spec"]["serveConfigV2"])
    llm = serve["applications"][0]["args"]["llm_configs"][0]
    strict = copy.deepcopy(llm)
    strict["model_loading_config"]["model_id"] = "strict-pack"
    strict["placement_group_config"]["strategy"] = "STRICT_PACK"
    serve["applications"][0]["args"]["llm_configs"].append(strict)
    forced["spec"]["serveConfigV2"] = yaml.safe_dump(serve, sort_keys=False)
    cluster = mirror_cluster(forced, {"gpu-l40s": "L40S"})
    assert [(n.count, n.num_gpus) for n in cluster.nodes] == [(2, 4.0)]
    report = verify_placement([cluster])
    states = {r.engine: r.states for r in report.results}
    # The planner's PACK layout spans the two 4-GPU Pods; STRICT_PACK needs 8 on one.
    assert states == {
        llm["model_loading_config"]["model_id"]: ["FINISHED"],
        "strict-pack": ["INFEASIBLE"],
    }
    assert report.exit_code == 1
    # The arithmetic rule agrees with Ray's scheduler.
    findings = [f for f in evaluate([forced]).findings if f.rule == "R003"]
    assert len(findings) == 1 and "engine 'strict-pack'" in findings[0].message
    assert "INFEASIBLE" in findings[0].message


def test_plan_verify_placement_command(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--stack", "staging", "--project-dir", str(ROOT), "--verify-placement"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Placement check with Ray 2.60.0" in out
    assert "FINISHED     RayService/inference/llama-70b-fp8" in out
    assert "1 checked, 0 problem(s)" in out
