"""tools/field_corpus_share.py (issue 30): every "not evaluated" record of the three field
corpora has a named cause, and the second column's cluster profiles are the ones the
samples' own repositories document, each fact cited at a commit."""

from __future__ import annotations

import importlib.util
import os
import re
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from gpustrata.spec.profile_file import load_profile_file
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "field_corpus_share", ROOT / "tools/field_corpus_share.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_corpus_record_has_a_named_cause(
    tool: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the tool's paths are relative to the repository root
    for documented in (False, True):
        causes: Counter[str] = Counter()
        for folder in tool.CORPORA:
            tool.share(folder, documented, False, causes)
        assert causes and "other" not in causes, causes


def test_cause_is_the_one_a_reason_names_first(tool: ModuleType) -> None:
    # A V010 reason lacking the release, with the GPU in brackets, counts as the release's.
    reason = (
        "container 'vllm': image vllm/vllm-openai:latest is unpinned (tag 'latest'): it names "
        "no vLLM release, ... (the GPU model is unknown: the Pod selects no ...)"
    )
    assert tool.cause_of(reason) == "vLLM release unknown: moving tag (latest)"
    assert tool.cause_of("the GPU model is unknown: the Pod selects no label").startswith(
        "GPU model unknown: the Pod selects no GPU label"
    )
    assert "selects only" in tool.cause_of(
        "the GPU model is unknown: ... (it selects only gpuspecs=A100: no GPU model ...)"
    )
    vertex = (
        "container 'inference-server': the accepted flags depend on the vLLM release, but image "
        "us-docker.pkg.dev/vertex-ai/vertex-vision-model-garden-dockers/pytorch-vllm-serve:"
        "20250312_0916_RC01 is a Vertex AI Model Garden build tagged with the vendor's version; "
        "the vLLM release inside is not catalogued (set images in the cluster profile)"
    )
    assert tool.cause_of(vertex).startswith("vLLM release unknown: vendor")
    assert tool.cause_of("model '/data/x' is not in the model catalogue, so") == (
        "model not catalogued"
    )
    assert tool.cause_of("something nobody wrote a pattern for") == "other"


def test_documented_profiles_load_and_cite_their_repository(tool: ModuleType) -> None:
    for name, profile in tool.DOCUMENTED.items():
        path = ROOT / profile
        load_profile_file(path)  # valid: raises ProfileError naming file and line otherwise
        assert any((ROOT / c / name).is_file() for c in tool.CORPORA), name
        text = path.read_text()
        urls = re.findall(r"https://github\.com/[\w.-]+/[\w.-]+/blob/([0-9a-f]{40})/", text)
        assert urls, f"{profile} cites no repository file at a commit"


def test_data_on_eks_documented_image_decides_the_release(tool: ModuleType) -> None:
    """data-on-eks's README states vLLM 0.22 for the `$ECR_REGISTRY/ray-llm:$RAY_LLM_TAG`
    image its deploy.sh renders: with that profile the release records go."""
    name = "data-on-eks-rayservice-deepseek-r1-8b.yaml"
    objs = load_paths([os.fspath(ROOT / "tests/data/field-corpus-3" / name)])
    without = evaluate(objs)
    assert [n for n in without.not_evaluated if n.rule == "V013"]
    profile = ROOT / tool.DOCUMENTED[name]
    documented = evaluate(objs, profile=load_profile_file(profile), profile_file=str(profile))
    assert not [n for n in documented.not_evaluated if n.rule in ("V013", "V012", "R007")]


def test_kserve_documented_release_reads_its_presets(tool: ModuleType) -> None:
    """kserve/kserve@35e18e8 ships the v0.16.0 chart and v0.16.0's presets: with that
    profile the dp-ep sample is read over the catalogued 0.16.0 presets, and what stays "not
    evaluated" is the preset's image (an llm-d build), not the unstated release."""
    name = "kserve-kserve-llmisvc-dp-ep-deepseek-r1.yaml"
    objs = load_paths([os.fspath(ROOT / "tests/data/field-corpus-1" / name)])
    profile = ROOT / tool.DOCUMENTED[name]
    without = [n.reason for n in evaluate(objs).not_evaluated if n.rule == "*"]
    assert any("versions.kserve" in r for r in without), without
    documented = evaluate(objs, profile=load_profile_file(profile), profile_file=str(profile))
    reasons = [n.reason for n in documented.not_evaluated if n.rule == "*"]
    assert reasons and not any("versions.kserve" in r for r in reasons), reasons
    assert any("kserve/kserve@v0.16.0:config/llmisvcconfig" in r for r in reasons), reasons
