"""No guessed facts (issue 30, item 4): an image that names no vLLM release gets no
assumed one, and a flag vLLM refuses is not read as its default by another rule."""

from __future__ import annotations

from pathlib import Path

import yaml
from _release import REFERENCE
from conftest import deployment_of

from gpustrata.core.versions import parse_version
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.engines import image_release

OLDEST = min((r.version for r in catalogs.compat().vllm_releases()), key=parse_version)
"""The oldest catalogued vLLM release: the first an unpinned image may be."""


def _deployment(image: str, args: list[str], liveness: dict[str, int] | None = None) -> dict:
    container: dict = {
        "name": "vllm",
        "image": image,
        "args": args,
        "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "64Gi"}},
    }
    if liveness is not None:
        container["livenessProbe"] = {"httpGet": {"path": "/health", "port": 8000}, **liveness}
    return deployment_of(
        {
            "nodeSelector": {"node.kubernetes.io/instance-type": "g6e.2xlarge"},
            "containers": [container],
        }
    )


def _check(tmp_path: Path, doc: dict) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    report = evaluate(load_paths([str(path)]))
    found: dict[str, list[str]] = {}
    skipped: dict[str, list[str]] = {}
    for f in report.findings:
        found.setdefault(f.rule, []).append(f"{f.enforcement}: {f.message}")
    for n in report.not_evaluated:
        skipped.setdefault(n.rule, []).append(n.reason)
    return found, skipped


def test_an_unpinned_image_names_no_release() -> None:
    for image in ("vllm/vllm-openai:latest", "vllm/vllm-openai"):
        found = image_release(image)
        assert found is not None and found.version is None and not found.assumed
        assert "unpinned" in found.where


def test_no_release_is_cited_for_an_image_that_names_none(tmp_path: Path) -> None:
    doc = _deployment(
        "vllm/vllm-openai:latest",
        ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"],
        {"timeoutSeconds": 1, "failureThreshold": 1, "periodSeconds": 10},
    )
    found, skipped = _check(tmp_path, doc)
    # The reference release is never cited as the image's: only as the newest of every
    # release the image may run, in a verdict that holds under each (session 18).
    for m in (m for ms in [*found.values(), *skipped.values()] for m in ms):
        assert REFERENCE not in m or f"on every vLLM release from {OLDEST} to {REFERENCE}" in m, m
    # the liveness floor holds whatever the release: advisory, never mandatory
    assert [m.split(":")[0] for m in found["V010"]] == ["advisory"]
    # max_num_seqs' default depends on the release, but on this L40S (below 70 GiB) every
    # release's is 256, more than the KV cache holds: decided under all of them
    [v012] = found["V012"]
    assert v012.startswith(f"advisory: container 'vllm', on every vLLM release from {OLDEST} to ")
    assert "V012" not in skipped


def test_a_refused_flag_is_not_read_as_its_default(tmp_path: Path) -> None:
    doc = _deployment(
        "vllm/vllm-openai:v0.10.1.1",
        ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size 2"],
    )
    doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2
    found, skipped = _check(tmp_path, doc)
    assert "V001" not in found  # was: "TP 1 x PP 1 = 1 GPU, 1 GPU idle"
    assert any("'--tensor-parallel-size 2' is one argument" in r for r in skipped["V001"])
    assert "V013" in found


def test_a_pinned_release_cites_its_own_default(tmp_path: Path) -> None:
    """An image naming a release whose per-GPU scheduler defaults are catalogued cites that
    release's default, not the reference release's (KAITO's 0.25.1 and the corpus's 0.12.0
    engines were told "vLLM <reference>'s default")."""
    pinned = [r.version for r in catalogs.compat().vllm_releases() if r.version != REFERENCE]
    doc = _deployment(
        "vllm/vllm-openai:v0.12.0",
        ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"],
    )
    assert "0.12.0" in pinned
    found, _ = _check(tmp_path, doc)
    [v012] = found["V012"]
    assert "max_num_seqs unset: vLLM 0.12.0's default on" in v012, v012
    assert f"vLLM {REFERENCE}'s default" not in v012, v012
