"""Issue 4 done-when: one change at a time to the prod stack, each caught by the right rule.

Every case runs `gpustrata plan --format json` on a copy of stacks/Pulumi.prod.yaml (the
Pulumi program under Pulumi's mocks, then the rules over what it registered) and checks the
finding's rule id, resource and a message that names both sides of the mismatch.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from _stacks import ROOT, stack_path

from gpustrata.cli.app import main

NODE_RULES = {"K003", "K005", "K006", "K008", "K015"}
OPERATOR_RULES = {"O001", "O002", "O003", "O004", "O005", "O006", "O007"}
OPERATOR = "GpuOperator/gpu-operator/gpu-operator"
H100_POOL = "        instance_type: p5.48xlarge\n"
MIG_LABEL = H100_POOL + "        labels: {nvidia.com/mig.config: all-3g.40gb}\n"


def plan(path: Path) -> dict[str, Any]:
    """`gpustrata plan --file PATH --format json`, parsed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["plan", "--file", str(path), "--project-dir", str(ROOT), "--format", "json"])
    assert code in (0, 1), out.getvalue()
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


def write_stack(tmp_path: Path, *replacements: tuple[str, str]) -> Path:
    """The prod stack with several textual replacements (each must apply exactly once)."""
    text = stack_path("prod").read_text(encoding="utf-8")
    for old, new in replacements:
        assert text.count(old) == 1, f"{old!r} is not exactly once in the prod stack"
        text = text.replace(old, new)
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def findings(data: dict[str, Any], rule: str) -> list[tuple[str, str]]:
    """(resource, message) of one rule's findings."""
    return [(f["resource"], f["message"]) for f in data["findings"] if f["rule"] == rule]


def test_unmutated_prod_has_no_node_or_operator_finding() -> None:
    data = plan(stack_path("prod"))
    mine = NODE_RULES | OPERATOR_RULES
    assert [f for f in data["findings"] if f["rule"] in mine] == []
    assert [n for n in data["not_evaluated"] if n["rule"] in mine] == []
    # The rules saw the operator and both pools (and their Kubernetes version) to say so.
    kinds = {r["type"] for r in data["resources"]}
    assert {"gpustrata:index:GpuOperator", "gpustrata:index:GpuNodePool"} <= kinds


def test_kubernetes_too_new_for_the_operator(mutated_stack: Any) -> None:
    data = plan(mutated_stack('kubernetes_version: "1.34"', 'kubernetes_version: "1.37"'))
    assert findings(data, "O001") == [
        (
            OPERATOR,
            "GPU Operator v26.7.0 supports Amazon EKS 1.33 to 1.36 (its platform support "
            "matrix), but pool(s) gpu-h100, gpu-l40s run Kubernetes 1.37",
        )
    ]


def test_driver_too_old_for_the_vllm_image(mutated_stack: Any) -> None:
    data = plan(mutated_stack('driver_version: "580.173.02"', 'driver_version: "570.124.06"'))
    (finding,) = findings(data, "O002")
    resource, message = finding
    assert resource == "Deployment/inference/llama-8b"
    # Both versions: the image's CUDA and its minimum driver, and the pool's driver.
    assert "vllm/vllm-openai:v0.33.0 is built on CUDA 13.0.3" in message
    assert "needs NVIDIA driver >= 580.65.06 (CUDA 13.0 GA)" in message
    assert "pool gpu-l40s runs driver 570.124.06" in message
    # Branch 570 is one the image's NVIDIA_REQUIRE_CUDA lists: it runs only through CUDA
    # forward compatibility on the data-center L40S, which the finding names.
    assert "only through CUDA forward compatibility on NVIDIA L40S (data-center)" in message
    # The Ray Serve LLM image is CUDA 12.8 (cu128): 570.124.06 is new enough for it.
    assert all(r != "RayService/inference/llama-70b" for r, _ in findings(data, "O002"))


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (
            "none",
            "MIG strategy none makes the device plugin ignore MIG: it hands out the "
            "partitioned GPUs whole as nvidia.com/gpu and never serves their MIG instances",
        ),
        (
            "mixed",
            "MIG strategy mixed advertises MIG-enabled GPUs only as nvidia.com/mig-<profile>, "
            "so those nodes offer no nvidia.com/gpu and the pod stays Pending",
        ),
        ("single", None),
    ],
)
def test_mig_strategy_must_match_the_requested_resource(
    tmp_path: Path, strategy: str, expected: str | None
) -> None:
    # The H100 pool partitions its GPUs (mig-manager config all-3g.40gb); only the strategy
    # changes between the cases. The engines request nvidia.com/gpu.
    path = write_stack(
        tmp_path,
        (H100_POOL, MIG_LABEL),
        ("mig_strategy: none", f"mig_strategy: {strategy}"),
    )
    got = findings(plan(path), "O005")
    if expected is None:
        assert got == []  # single: each nvidia.com/gpu is one 3g.40gb instance
        return
    assert got == [
        (
            "RayService/inference/llama-70b",
            "pod (worker group 'gpu-h100-workers') requests nvidia.com/gpu on pool gpu-h100, "
            "whose GPUs are MIG-partitioned (nvidia.com/mig.config: all-3g.40gb), but "
            f"{expected}; use strategy single (each nvidia.com/gpu is then one MIG instance) "
            "or request nvidia.com/mig-<profile> with mixed",
        )
    ]


def test_taint_the_operator_does_not_tolerate(mutated_stack: Any) -> None:
    # Tolerations stated in the stack replace the ones derived from the pools' taints.
    path = mutated_stack(
        "      mig_strategy: none\n",
        "      mig_strategy: none\n"
        "      tolerations:\n"
        "        - {key: nvidia.com/gpu, operator: Equal, value: 'yes', effect: NoSchedule}\n",
    )
    got = findings(plan(path), "O006")
    taints = (
        "pool gpu-h100: nvidia.com/gpu=true:NoSchedule; "
        "pool gpu-l40s: nvidia.com/gpu=true:NoSchedule"
    )
    tolerated = "they tolerate nvidia.com/gpu=yes:NoSchedule (Equal)"
    assert [(r, m.split(";")[0]) for r, m in got] == [
        (
            OPERATOR,
            "GPU Operator v26.7.0: the operand DaemonSets (daemonsets.tolerations) do "
            "not tolerate pool gpu-h100: nvidia.com/gpu=true:NoSchedule",
        ),
        (
            OPERATOR,
            "GPU Operator v26.7.0: the node-feature-discovery workers "
            "(node-feature-discovery.worker.tolerations) do not tolerate pool gpu-h100: "
            "nvidia.com/gpu=true:NoSchedule",
        ),
    ]
    for _, message in got:
        assert taints in message and tolerated in message


def test_a_new_pool_taint_is_tolerated_without_stating_it(mutated_stack: Any) -> None:
    # Without gpu_operator.tolerations the operator and NFD tolerate exactly the pools' taints.
    path = mutated_stack(
        H100_POOL,
        H100_POOL + "        taints:\n"
        "          - {key: nvidia.com/gpu, value: 'true', effect: NoSchedule}\n"
        "          - {key: dedicated, value: llm, effect: NoExecute}\n",
    )
    data = plan(path)
    assert findings(data, "O006") == []
    assert findings(data, "K004") == []  # and the engines tolerate it too
