"""Engine GPU resources stay cheap on hostile input (issue 19 items 1 and 2): a GPU count
with an absurd exponent is no number (it used to expand 10**10000000), and a Pod of N
engine containers reads its GPU resources once per evaluation, not once per engine."""

from __future__ import annotations

import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from conftest import fixture

from gpustrata.core.quantity import parse_number
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view.objects import ContainerRef


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (2, Fraction(2)),
        ("0.5", Fraction(1, 2)),
        (" 1e3 ", Fraction(1000)),
        (1.25, Fraction(5, 4)),
        ("1e10000000", None),
        ("-1e-999999", None),
        ("16Gi", None),
        (True, None),
        (float("nan"), None),
        ("abc", None),
        (None, None),
    ],
)
def test_parse_number(raw: object, expected: Fraction | None) -> None:
    assert parse_number(raw) == expected


def test_huge_gpu_exponent_in_a_ray_worker_ends(tmp_path: Path) -> None:
    text = fixture("V004", "bad-ray-full-context.yaml").read_text()
    hostile = tmp_path / "ray-huge.yaml"
    hostile.write_text(text.replace("nvidia.com/gpu: 1,", 'nvidia.com/gpu: "1e10000000",'))
    assert "1e10000000" in hostile.read_text()
    result = subprocess.run(
        [sys.executable, "-m", "gpustrata.cli.check", "check", str(hostile)],
        capture_output=True,
        text=True,
        timeout=120,  # minutes of CPU before the fix
    )
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr


def _pod(tmp_path: Path, n: int) -> Path:
    containers = [
        {
            "name": f"c{i}",
            "image": "vllm/vllm-openai:v0.8.5",
            "command": ["vllm", "serve", "Qwen/Qwen2.5-1.5B-Instruct"],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
        }
        for i in range(n)
    ]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"}}
    path = tmp_path / f"pod-{n}.yaml"
    path.write_text(yaml.safe_dump({**pod, "spec": {"containers": containers}}))
    return path


def test_gpu_resources_of_a_pod_are_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads of container resources grow linearly with the containers of a Pod."""
    calls = {"n": 0}
    original = ContainerRef.resources

    def counting(self: ContainerRef, section: str) -> object:
        calls["n"] += 1
        return original(self, section)

    monkeypatch.setattr(ContainerRef, "resources", counting)
    reads = {}
    for n in (20, 40):
        calls["n"] = 0
        evaluate(load_paths([str(_pod(tmp_path, n))]))
        reads[n] = calls["n"]
    # Quadratic (each engine re-reading every container) would be about 4x; linear 2x.
    assert reads[40] <= 2.5 * reads[20], reads


@pytest.mark.parametrize("gpu", ['"1e10000000"', ".inf", ".nan", "true", '"x"'])
def test_placement_bundle_gpu_that_is_no_number(tmp_path: Path, gpu: str) -> None:
    """A placement bundle's GPU is read by the one number parser (``parse_number``), so
    V001, V007 and R003 report the engine's placement as unreadable instead of crashing on
    ``Fraction(str(inf))`` or expanding the exponent."""
    text = fixture("R003", "good-strict-pack-fits.yaml").read_text()
    hostile = tmp_path / "ray-bundle.yaml"
    hostile.write_text(
        text.replace("bundles: [{GPU: 1}, {GPU: 1}", f"bundles: [{{GPU: {gpu}}}, {{GPU: 1}}")
    )
    assert gpu in hostile.read_text()
    report = evaluate(load_paths([hostile]))
    assert not [f for f in report.findings if f.internal], report.findings
    reasons = [n.reason for n in report.not_evaluated if n.rule == "R003"]
    assert any("a bundle holds a value that is not a number" in r for r in reasons), reasons
