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
import yaml
from _stacks import SMALL_LLAMA_CONFIG

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
        (
            "        shm_size: 2Gi\n        engine:\n",
            "        shm_size: 2Gi\n        memory: 12Gi\n        engine:\n"
            "          extra_args:\n            load_format: pt\n"
            "            model_loader_extra_config: '{\"enable_multithread_load\": true}'\n",
            "K020",
            ["memory", "engine.extra_args", "pool"],
            "memory: 12Gi",
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


def test_a_memory_limit_below_the_weights_is_an_advisory_naming_the_keys(tmp_path: Path) -> None:
    """Issue 34 item 3: a 12Gi limit below the 15 GiB an 8B model loads. vLLM's default
    load memory-maps the safetensors (reclaimable page cache), so it loads: advisory."""
    text = _newcomer_stack().replace(
        "        shm_size: 2Gi\n", "        shm_size: 2Gi\n        memory: 12Gi\n"
    )
    code, data = _plan(tmp_path, text)
    (finding,) = [f for f in data["findings"] if f["rule"] == "K020"]
    assert finding["enforcement"] == "advisory"
    assert "loads 15.0 GiB of weights under a memory limit of 12.0 GiB" in finding["message"]
    assert "Not a failure" in finding["message"]
    assert finding["stack_keys"][0] == "gpustrata:stack.models[0].memory"
    line = int(finding["at"].rsplit(":", 1)[1])
    assert text.splitlines()[line - 1].strip() == "memory: 12Gi"
    assert code == 0


def test_check_reports_weights_held_in_memory_above_the_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = REPO / "policies" / "gpustrata_policies" / "rules" / "k020_host_memory_covers_engine"
    assert main(["check", str(folder / "bad-weights-held-at-once.yaml")]) == 1
    out = capsys.readouterr().out
    assert "K020" in out and "2 worker(s) hold 29.9 GiB" in out
    assert main(["check", str(folder / "good-weights-within-limit.yaml")]) == 0


def _local_model_stack(tmp_path: Path, weights: str) -> Path:
    (tmp_path / "acme-13b").mkdir()
    (tmp_path / "acme-13b" / "config.json").write_text(
        json.dumps(SMALL_LLAMA_CONFIG), encoding="utf-8"
    )
    text = _newcomer_stack().replace("meta-llama/Llama-3.1-8B-Instruct", "acme-13b/config.json")
    text = text.replace("          max_model_len: 8192\n", "          max_model_len: 4096\n")
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text.replace("        shm_size: 2Gi\n", f"        shm_size: 2Gi\n{weights}"))
    return path


def test_a_local_model_without_a_served_location_is_refused_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _local_model_stack(tmp_path, "")
    assert main(["render", "--file", str(path), "--project-dir", str(REPO)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpustrata: {path}:")
    assert (
        "gpustrata:stack.models[0].weights: model 'acme-13b/config.json' is a path in the "
        "project, which the engine Pods cannot read; say where the weights are when it runs: "
        "weights.source: s3 with weights.uri: s3://BUCKET/PREFIX/, or weights.source: pvc "
        "with weights.pvc_name and weights.uri (the folder on the volume); or use the "
        "Hugging Face id"
    ) in err
    assert "Traceback" not in err


def test_a_local_model_is_served_from_its_folder_on_the_volume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights = "        weights:\n          source: pvc\n          pvc_name: models\n"
    path = _local_model_stack(tmp_path, weights + "          uri: acme-13b\n")
    assert main(["render", "--file", str(path), "--project-dir", str(REPO)]) == 0
    objects = list(yaml.safe_load_all(capsys.readouterr().out))
    (deployment,) = [o for o in objects if o and o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    command = pod["containers"][0]["command"]
    # vllm serve <folder on the PVC> --served-model-name <the stack's model name>
    assert command[:5] == [
        "vllm",
        "serve",
        "/root/.cache/acme-13b",
        "--served-model-name",
        "qwen-1-5b",
    ]
    assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "models"}} in pod[
        "volumes"
    ]


def test_every_k005_k020_and_v_finding_on_a_stack_names_keys_that_exist() -> None:
    """Issue 34: every K005/V finding on a stack names the stack keys to change; each key
    named is a real field of a stack model (``engine.max_num_seqs`` -> EngineSpec)."""
    from pydantic import BaseModel

    from gpustrata.reports.text import _MODEL_KEYS
    from gpustrata.spec.serving import ModelSpec
    from gpustrata_policies.evaluate import all_rules

    wanted = {r.meta.id for r in all_rules() if r.meta.id.startswith("V")} | {"K005", "K020"}
    assert wanted - set(_MODEL_KEYS) == set()
    for rule, keys in _MODEL_KEYS.items():
        for key in keys:
            model: type[BaseModel] = ModelSpec
            for part in key.split("."):
                assert part in model.model_fields, (rule, key)
                annotation = model.model_fields[part].annotation
                if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                    model = annotation


def test_rules_judge_a_local_model_as_the_planner_read_it(tmp_path: Path) -> None:
    """Item 4: a stack model given as a local config.json was "not in the model catalogue"
    for every capacity rule; the plan's model sources now include the folder above it."""
    import shutil

    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / "stacks").mkdir()
    weights = "        weights:\n          source: pvc\n          pvc_name: models\n"
    path = _local_model_stack(tmp_path, weights + "          uri: acme-13b\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        argv = ["plan", "--file", str(path), "--project-dir", str(tmp_path), "--format", "json"]
        code = main(argv)
    data = json.loads(out.getvalue())
    reasons = [n["reason"] for n in data["not_evaluated"]]
    assert not [r for r in reasons if "not in the model catalogue" in r], reasons
    # V012 judged the local model's KV cache: its message names it.
    (v012,) = [f for f in data["findings"] if f["rule"] == "V012"]
    assert "KV cache of /root/.cache/acme-13b (from " in v012["message"]
    assert code == 0
