"""The planner: EKS reservation formulas, GPU counts, Ray layout, provenance."""

from __future__ import annotations

import pytest
from _stacks import STACKS, stack_doc

from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.planning.build import build_plan
from gpustrata.planning.node_pools import kube_reserved_cpu_millicores, kube_reserved_memory_mib


@pytest.mark.parametrize(
    ("vcpu", "millicores"),
    [(1, 60), (2, 70), (4, 80), (8, 90), (48, 190), (192, 550)],
)
def test_kube_reserved_cpu_matches_nodeadm_tiers(vcpu: int, millicores: int) -> None:
    # 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% above (amazon-eks-ami nodeadm).
    assert kube_reserved_cpu_millicores(vcpu) == millicores


def test_kube_reserved_memory_formula() -> None:
    assert kube_reserved_memory_mib(58) == 893
    assert kube_reserved_memory_mib(100) == 1355


@pytest.mark.parametrize("env", STACKS)
def test_reference_stacks_plan_with_provenance(env: str) -> None:
    plan = build_plan(stack_doc(env))
    assert plan.models, "every reference stack serves at least one model"
    for d in plan.derived:
        assert d.source in ("spec", "catalogue", "formula", "default", "upstream-default")
        assert d.why, d.key


def test_prod_pool_facts_come_from_the_catalogue() -> None:
    plan = build_plan(stack_doc("prod"))
    h100 = plan.pools["gpu-h100"]
    p5 = load_hardware_catalog().instance("p5.48xlarge")
    assert p5 is not None
    assert (h100.instance.gpu_count, h100.max_pods) == (p5.gpu_count, p5.max_pods)
    assert h100.kube_reserved == {"cpu": "550m", "memory": f"{11 * p5.max_pods + 255}Mi"}
    # Set in the stack, so not replaced by the default.
    # The stack's thresholds, and the kubelet defaults setting them would zero.
    assert h100.eviction_hard == {
        "memory.available": "2Gi",
        "nodefs.available": "10%",
        "imagefs.available": "15%",
        "nodefs.inodesFree": "5%",
        "imagefs.inodesFree": "5%",
    }
    derived = {d.key: d for d in plan.derived}
    assert derived["pools.gpu-h100.kubeReserved.memory"].source == "formula"
    assert "maxPods 100" in derived["pools.gpu-h100.kubeReserved.memory"].why


@pytest.mark.parametrize(
    ("tp", "gpus_per_worker", "workers", "strategy"),
    [
        (1, 1, 2, "STRICT_PACK"),
        (4, 4, 2, "STRICT_PACK"),
        (8, 8, 2, "STRICT_PACK"),
        (16, 8, 4, "PACK"),
    ],
)
def test_ray_layout_follows_tp(tp: int, gpus_per_worker: int, workers: int, strategy: str) -> None:
    doc = stack_doc("prod")
    doc["models"][0]["engine"]["tensor_parallel_size"] = tp
    plan = build_plan(doc)
    ray = plan.models["llama-70b"].ray
    assert ray is not None
    assert ray.gpus_per_worker == gpus_per_worker
    assert ray.min_workers == workers  # 2 engine replicas x workers per replica
    assert ray.placement_strategy == strategy
    assert len(ray.bundles) == tp


def test_a_pool_disk_smaller_than_its_engines_ephemeral_storage_is_refused() -> None:
    from gpustrata.spec.loader import StackError

    doc = stack_doc("prod")
    pool = next(p for p in doc["node_pools"] if p["name"] == "gpu-h100")
    pool["disk_size_gib"] = 100  # llama-70b's Pods request 155 GiB (weights x 1.1 + 10)
    with pytest.raises(StackError) as err:
        build_plan(doc)
    text = str(err.value)
    assert "node_pools[0].disk_size_gib" in text and "155 GiB" in text, text
    assert "llama-70b" in text and "weights.source pvc" in text
    pool["disk_size_gib"] = 200  # the same stack with room for one engine Pod plans
    assert build_plan(doc).pools["gpu-h100"].spec.disk_size_gib == 200


def test_probe_args_are_the_plans_probes() -> None:
    """render.from_plan.probe_args passes the plan's Probes on as ProbeArgs field for field."""
    import dataclasses
    from typing import get_type_hints

    from gpustrata.planning.plan_types import Probes
    from gpustrata.render.from_plan import probe_args
    from gpustrata.render.workload_args import ProbeArgs

    assert get_type_hints(ProbeArgs) == get_type_hints(Probes)
    plan = build_plan(stack_doc("prod"))
    for mp in plan.models.values():
        args = probe_args(mp)
        assert set(args) == {f.name for f in dataclasses.fields(Probes)}
        assert args["startup_failure_threshold"] == mp.probes.startup_failure_threshold
