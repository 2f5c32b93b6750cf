"""The placement check without Ray: what it would mirror, and the missing-extra error."""

from __future__ import annotations

import pytest
from _stacks import ROOT, stack_doc

import gpustrata.runtime.placement as placement
from gpustrata.cli.app import main
from gpustrata.planning.build import build_plan
from gpustrata.runtime.placement import mirror_clusters


def test_prod_mirror_is_the_worker_group_at_max_replicas() -> None:
    plan = build_plan(stack_doc("prod"))
    mp = plan.models["llama-70b"]
    assert mp.ray is not None
    (cluster,) = mirror_clusters(plan)
    assert cluster.service == "RayService/inference/llama-70b"
    (node,) = cluster.nodes
    assert (node.group, node.count, node.num_gpus) == (
        "gpu-h100-workers",
        mp.ray.max_workers,
        float(mp.ray.gpus_per_worker),
    )
    assert node.num_cpus == 80.0 and node.memory_bytes == 800 * 2**30
    assert node.resources == {"accelerator_type:H100": 1.0}
    (engine,) = cluster.engines
    assert (engine.name, engine.replicas, engine.strategy) == (
        "meta-llama/Llama-3.3-70B-Instruct",
        mp.max_replicas,
        "STRICT_PACK",
    )
    # Ray Serve LLM: the accelerator hint on every bundle, the replica actor's CPU on the first.
    hint = {"GPU": 1.0, "accelerator_type:H100": 0.001}
    assert engine.bundles == [{**hint, "CPU": 1.0}] + [hint] * 3


def test_verify_placement_without_ray_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(placement, "ray_available", lambda: False)
    code = main(["plan", "--stack", "prod", "--project-dir", str(ROOT), "--verify-placement"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == (
        "gpustrata: --verify-placement needs Ray, which is not installed: pip install -c "
        'constraints.txt -e ".[engines]" (the engines extra: ray[serve]==2.60.0)'
    )
    with pytest.raises(placement.EnginesMissing):
        placement.verify_placement(mirror_clusters(build_plan(stack_doc("prod"))))


def test_verify_placement_names_each_cluster_as_it_goes() -> None:
    """--verify-placement reports progress per RayService ("lines"), and nothing when off."""
    import io

    from gpustrata.runtime.placement import MirrorCluster, with_progress

    mirrors = [MirrorCluster(service=f"inference/llm-{i}", nodes=[], engines=[]) for i in (1, 2)]
    out = io.StringIO()
    assert list(with_progress(mirrors, stream=out, mode="lines")) == mirrors
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "[1/2] verify-placement inference/llm-1",
        "[2/2] verify-placement inference/llm-2",
    ]
    quiet = io.StringIO()
    assert list(with_progress(mirrors, stream=quiet, mode="off")) == mirrors
    assert quiet.getvalue() == ""
