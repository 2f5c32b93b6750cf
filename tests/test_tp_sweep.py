"""Changing only the prod 70B model's tensor_parallel_size moves every dependent number.

For TP 1, 2, 4 and 8 the stack file is edited in that one place and run through the
Pulumi program under mocks (what `gpustrata plan` does). The registered RayService must
carry the numbers the formulas below give, the side-by-side view must agree everywhere,
and the cross-layer rules must stay clean, except at TP 8, where four 8-GPU
replicas need one more p5 node than the pool's max_size allows (R003 says so).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from _stacks import ROOT

from gpustrata.planning.build import plan_spec
from gpustrata.reports.serving import serving_rows
from gpustrata.runtime.mockrun import Registered, run_program
from gpustrata.spec.loader import read_stack_file
from gpustrata_policies import evaluate, objects_from_pulumi

TPS = (1, 2, 4, 8)
NODE_GPUS = 8  # p5.48xlarge
POOL_MAX_NODES = 3  # prod gpu-h100 max_size
MIN_REPLICAS, MAX_REPLICAS = 2, 4  # prod llama-70b autoscaling
# Rules that judge whether the model fits the GPU's memory: with TP 1-2 the 141 GB of bf16
# weights (and a 32k context) do not fit 80 GB GPUs, and they rightly say so. Every other
# rule checks that the layers agree, which must hold at every TP.
CAPACITY_RULES = frozenset({"V003", "V004", "V012"})


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """The prod stack file with only the 70B model's tensor_parallel_size changed."""
    text = (ROOT / "stacks" / "Pulumi.prod.yaml").read_text(encoding="utf-8")
    assert text.count("tensor_parallel_size: 4") == 1
    out = {}
    for tp in TPS:
        path = tmp_path_factory.mktemp(f"tp{tp}") / "Pulumi.prod.yaml"
        path.write_text(text.replace("tensor_parallel_size: 4", f"tensor_parallel_size: {tp}"))
        out[tp] = path
    return out


@pytest.fixture(scope="module")
def sweep(files: dict[int, Path]) -> dict[int, list[Registered]]:
    """What the Pulumi program registers for each file (as `gpustrata plan` runs it)."""
    out = {}
    for tp, path in files.items():
        _, document = read_stack_file(path)
        out[tp] = run_program(document, stack="prod", program=ROOT / "__main__.py")
    return out


def _rayservice(resources: list[Registered]) -> dict[str, Any]:
    (rs,) = [r.inputs for r in resources if r.type == "kubernetes:ray.io/v1:RayService"]
    return rs


@pytest.mark.parametrize("tp", TPS)
def test_every_dependent_number_follows_tp(sweep: dict[int, list[Registered]], tp: int) -> None:
    rs = _rayservice(sweep[tp])
    serve = yaml.safe_load(rs["spec"]["serveConfigV2"])
    (llm,) = serve["applications"][0]["args"]["llm_configs"]
    cluster = rs["spec"]["rayClusterConfig"]
    (group,) = cluster["workerGroupSpecs"]
    pod = group["template"]["spec"]
    limits = pod["containers"][0]["resources"]["limits"]
    # TP <= 8 fits one p5.48xlarge: one engine per worker Pod, STRICT_PACK.
    # (TP 1 is vLLM's default and left out of engine_kwargs.)
    assert llm["engine_kwargs"].get("tensor_parallel_size", 1) == tp
    assert llm["placement_group_config"] == {
        "bundles": [{"GPU": 1.0}] * tp,
        "strategy": "STRICT_PACK",
    }
    assert limits["nvidia.com/gpu"] == group["rayStartParams"]["num-gpus"] == str(tp)
    assert (group["minReplicas"], group["maxReplicas"]) == (MIN_REPLICAS, MAX_REPLICAS)
    assert cluster["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    # A zero-downtime upgrade needs the serving cluster at max plus the new one at min.
    need = (MAX_REPLICAS + MIN_REPLICAS) * tp
    expected = "NewCluster" if need <= POOL_MAX_NODES * NODE_GPUS else "None"
    assert rs["spec"]["upgradeStrategy"] == {"type": expected}
    # What does not depend on TP stays put.
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}} in pod["volumes"]
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]


def test_tp_changes_what_it_should_and_nothing_else(sweep: dict[int, list[Registered]]) -> None:
    upgrades = {tp: _rayservice(sweep[tp])["spec"]["upgradeStrategy"]["type"] for tp in TPS}
    assert upgrades == {1: "NewCluster", 2: "NewCluster", 4: "NewCluster", 8: "None"}
    # The plain-vLLM model of the same stack does not move with the 70B's TP.
    deployments = {
        tp: [r.inputs for r in sweep[tp] if r.type == "kubernetes:apps/v1:Deployment"] for tp in TPS
    }
    assert all(deployments[tp] == deployments[4] for tp in TPS)


@pytest.mark.parametrize("tp", TPS)
def test_side_by_side_view_agrees(
    files: dict[int, Path], sweep: dict[int, list[Registered]], tp: int
) -> None:
    spec, _ = read_stack_file(files[tp])
    rows = serving_rows(plan_spec(spec), sweep[tp])
    assert len(rows) > 14
    assert [r for r in rows if not r.agree] == []


@pytest.mark.parametrize("tp", TPS)
def test_cross_layer_rules_stay_clean(sweep: dict[int, list[Registered]], tp: int) -> None:
    objects = objects_from_pulumi((r.type, r.name, r.inputs) for r in sweep[tp])
    report = evaluate(objects, environment="prod")
    findings = [(f.rule, f.message) for f in report.findings if f.rule not in CAPACITY_RULES]
    if tp < NODE_GPUS:  # MAX_REPLICAS engines fit on POOL_MAX_NODES nodes
        assert findings == []
        return
    # TP 8: four 8-GPU replicas want 4 p5 nodes, the pool stops at 3. Only R003 says so.
    ((rule, message),) = findings
    assert rule == "R003"
    assert f"runs up to {MAX_REPLICAS} replicas of {tp} GPUs" in message
    assert f"only {POOL_MAX_NODES} fit" in message
    assert f"x maxSize {POOL_MAX_NODES} = {POOL_MAX_NODES}" in message
