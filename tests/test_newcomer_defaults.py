"""Defaults that pass gpustrata's own rules, and findings that name the stack keys (issue 34).

An 8B model on g6.xlarge with no cpu/memory set used to get 4 CPU / 32Gi and fail K005;
the planner now derives both from the pool's allocatable.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from gpustrata.cli.app import main

REPO = Path(__file__).resolve().parents[1]

DEV = (REPO / "stacks" / "Pulumi.dev.yaml").read_text(encoding="utf-8")


def _plan(tmp_path: Path, text: str, name: str = "dev") -> tuple[int, dict]:  # type: ignore[type-arg]
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["plan", "--file", str(path), "--project-dir", str(REPO), "--format", "json"])
    return code, json.loads(out.getvalue())


def _newcomer_stack() -> str:
    text = DEV.replace("Qwen/Qwen2.5-1.5B-Instruct", "meta-llama/Llama-3.1-8B-Instruct")
    text = text.replace('        cpu: "3"\n', "").replace("        memory: 12Gi\n", "")
    assert "cpu:" not in text and "memory: 12Gi" not in text
    return text


def test_unset_cpu_and_memory_fit_the_pool(tmp_path: Path) -> None:
    code, data = _plan(tmp_path, _newcomer_stack())
    assert [f["rule"] for f in data["findings"] if f["rule"] == "K005"] == []
    derived = {d["key"]: d for d in data["derived"]}
    cpu, memory = derived["models.qwen-1-5b.cpu"], derived["models.qwen-1-5b.memory"]
    # g6.xlarge: 4 vCPU, 16 GiB; allocatable 3.42 CPU and 13967Mi after the reservations.
    assert (cpu["value"], cpu["source"]) == ("3", "formula")
    assert (memory["value"], memory["source"]) == ("13056Mi", "formula")
    assert "set gpustrata:stack.models[0].memory to choose" in memory["why"]
    assert "weights per Pod 15.0Gi" in memory["why"]
    deployment = next(r for r in data["resources"] if r["type"] == "kubernetes:apps/v1:Deployment")
    container = deployment["inputs"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["cpu"] == "3"
    assert container["resources"]["limits"]["memory"] == "13056Mi"
    assert code == 0


@pytest.mark.parametrize(
    ("old", "new", "rule", "keys", "line_text"),
    [
        (
            "        shm_size: 2Gi\n",
            '        shm_size: 2Gi\n        cpu: "8"\n',
            "K005",
            ["cpu", "memory", "pool"],
            'cpu: "8"',
        ),
        (
            "          max_model_len: 8192\n",
            "          max_model_len: 8192\n          tensor_parallel_size: 3\n",
            "V002",
            ["engine.tensor_parallel_size", "engine.pipeline_parallel_size"],
            "tensor_parallel_size: 3",
        ),
    ],
)
def test_findings_name_the_stack_keys_and_their_line(
    tmp_path: Path, old: str, new: str, rule: str, keys: list[str], line_text: str
) -> None:
    text = _newcomer_stack().replace(old, new, 1)
    code, data = _plan(tmp_path, text)
    (finding,) = [f for f in data["findings"] if f["rule"] == rule]
    assert finding["stack_keys"] == [f"gpustrata:stack.models[0].{k}" for k in keys]
    file, line = finding["at"].rsplit(":", 1)
    assert file == str(tmp_path / "Pulumi.dev.yaml")
    assert text.splitlines()[int(line) - 1].strip() == line_text
    assert code == 1
