"""The deploy rehearsal (issue 29): on the stacks as they were before the cluster
foundation (tests/fixtures/rehearsal/before-*.json: what gpustrata 59537ef registered for
stacks/Pulumi.{dev,staging,prod}.yaml under Pulumi's mocks) it names the blockers of the
deploy review with their fix; on today's stacks it finds none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _stacks import STACKS, stack_doc

from gpustrata.runtime.mockrun import Registered, run_program
from gpustrata_policies.rehearsal import Rehearsal, Step, rehearse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rehearsal"


def _before(env: str) -> Rehearsal:
    data = json.loads((FIXTURES / f"before-{env}.json").read_text(encoding="utf-8"))
    records = [
        Registered(
            type=r["type"],
            name=r["name"],
            parent=r["parent"],
            custom=True,
            inputs=r["inputs"],
            depends_on=tuple(r["depends_on"]),
        )
        for r in data["resources"]
    ]
    return rehearse(records)


def _step(rehearsal: Rehearsal, resource: str) -> Step:
    found = [s for s in rehearsal.steps if s.resource == resource]
    assert found, f"no step for {resource}: {[s.resource for s in rehearsal.steps]}"
    return found[0]


def test_blocker_1_controllers_without_a_node() -> None:
    """The GPU Operator's controller tolerates only the control plane; every pool carried
    the GPU taint: its release waits 15 minutes and fails."""
    step = _step(_before("dev"), "gpustrata-gpu-operator-release")
    assert step.status == "would-hang"
    assert "taint nvidia.com/gpu=true:NoSchedule not tolerated" in step.message
    assert "gpu-operator" in step.message
    assert "untainted node group" in step.fix


def test_blocker_1_kuberay_operator_without_a_node() -> None:
    step = _step(_before("prod"), "gpustrata-kuberay-release")
    assert step.status == "would-hang"
    assert "kuberay-operator" in step.message and "not tolerated" in step.message


def test_blocker_2_min_zero_pool_never_gets_a_node() -> None:
    step = _step(_before("dev"), "gpustrata-qwen-1-5b-deployment")
    assert step.status == "would-hang"
    assert "pool gpu-l4: min size 0 and nothing scales it up" in step.message
    assert "min_size >= 1" in step.fix


def test_blocker_3_custom_resources_without_their_crd() -> None:
    prod = _before("prod")
    for name, kind in (
        ("gpustrata-llama-8b-servicemonitor", "ServiceMonitor"),
        ("gpustrata-llama-8b-scaledobject", "ScaledObject"),
    ):
        step = _step(prod, name)
        assert step.status == "would-fail"
        assert f"no matches for kind {kind}" in step.message
        assert "install the chart that owns the CRD" in step.fix


def test_blocker_4_release_not_after_the_nodes_it_needs() -> None:
    """Karpenter tolerated the L4 pool's taint, but its release did not depend on that
    node group: its wait started before any node it could use existed."""
    step = _step(_before("staging"), "gpustrata-karpenter-release")
    assert step.status == "would-hang"
    assert "gpu-l4, which is not created before this step" in step.message
    assert step.fix == "make it depend on the node group(s) gpu-l4"


def test_blocker_7_ray_head_serves_nothing() -> None:
    step = _step(_before("prod"), "gpustrata-llama-70b-rayservice")
    assert step.status == "serves-nothing"
    assert "(head group)" in step.message or "head" in step.message
    assert "up` succeeds and the model serves nothing" in step.message


def test_first_blocker_is_reported_in_order() -> None:
    dev = _before("dev")
    first = dev.first_blocker
    assert first is not None
    assert first.index == min(s.index for s in dev.blockers)
    assert dev.as_dict()["first_blocker"]["resource"] == first.resource


@pytest.fixture(scope="module", params=STACKS)
def today(request: pytest.FixtureRequest) -> Rehearsal:
    env = str(request.param)
    return rehearse(run_program(stack_doc(env), stack=env))


def test_todays_stacks_come_up(today: Rehearsal) -> None:
    assert today.blockers == [], "\n".join(today.text())
    assert [s for s in today.steps if s.status == "not-evaluated"] == [], "\n".join(today.text())
    assert any(s.status == "ok" for s in today.steps)
