"""Image references as people write them -> the vLLM release they run (view.engines)."""

from __future__ import annotations

import pytest

from gpustrata_policies.view.engines import image_release
from gpustrata_policies.view.vllm_args import moving_tag


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("vllm/vllm-openai:v0.8.5", "0.8.5"),
        ("vllm/vllm-openai:v0.8.5.post1", "0.8.5.post1"),
        ("vllm/vllm-openai:v0.10.1.1", "0.10.1.1"),
        ("vllm/vllm-openai:v0.20.2-cu129", "0.20.2"),
        ("vllm/vllm-openai:v0.33.0-cu130", "0.33.0"),
        ("docker.io/vllm/vllm-openai:v0.7.3@sha256:" + "a" * 64, "0.7.3"),
        ("registry.example.com/mirror/vllm-openai:v0.9.2", "0.9.2"),
        ("rayproject/ray-llm:2.60.0-py311-cu128", "0.29.0"),
        # Vendor builds whose release notes name the vLLM inside (vllm-releases.yaml).
        ("nvcr.io/nvidia/vllm:25.10-py3", "0.10.2"),
        ("nvcr.io/nvidia/vllm:26.10-py3", "0.31.0"),
        ("registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.0.0", "0.8.4"),
    ],
)
def test_tagged_release(image: str, version: str) -> None:
    found = image_release(image)
    assert found is not None and found.version == version and not found.assumed


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("rayproject/ray-llm:ray-2.48.0-py311-cu128", "0.9.2"),
        ("rayproject/ray-llm:2.50.1-py311-cu124", "0.10.2"),
    ],
)
def test_ray_llm_lower_bound_is_the_assumed_release(image: str, version: str) -> None:
    """Ray before 2.56 gives a lower bound only: its lowest release, said to be assumed
    (not the reference release, and not "no release")."""
    found = image_release(image)
    assert found is not None and found.version == version and found.assumed
    assert f"vllm>={version}" in found.where and "assumed" in found.where


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "vllm/vllm-openai"])
def test_unpinned_names_no_release_and_says_so(image: str) -> None:
    """A moving tag is never taken for the newest release (issue 30: no guessed facts)."""
    found = image_release(image)
    assert found is not None and not found.assumed and found.version is None
    assert "unpinned" in found.where


@pytest.mark.parametrize(
    ("image", "says"),
    [
        ("vllm/vllm-openai@sha256:" + "b" * 64, "digest"),
        ("lmcache/vllm-openai:v0.3.9", "LMCache"),
        ("lmcache/vllm-openai:latest", "LMCache"),
        ("nvcr.io/nvidia/vllm:25.09-py3", "NVIDIA NGC"),
        ("registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.2.3", "Red Hat AI Inference Server"),
        (
            "us-docker.pkg.dev/vertex-ai/vertex-vision-model-garden-dockers/"
            "pytorch-vllm-serve:20250312_0916_RC01",
            "Vertex AI",
        ),
        ("vllm/vllm-openai:nightly", "names no vLLM release"),
    ],
)
def test_no_release_named(image: str, says: str) -> None:
    found = image_release(image)
    assert found is not None and found.version is None
    assert says in found.where


def test_not_a_vllm_image() -> None:
    assert image_release("python:3.12") is None


@pytest.mark.parametrize(
    ("tag", "word"),
    [
        (None, "latest"),
        ("latest", "latest"),
        ("nightly", "nightly"),
        ("nightly-py311-cu128", "nightly"),
        ("gptoss", "gptoss"),
        ("main", "main"),
        ("stable-cu129", "stable"),
        ("v0.10.1.1", None),
        ("ray-2.48.0-py311-cu128", None),
        ("nightly-20251001", None),  # a dated nightly is one build
        ("20250312_0916_RC01", None),
        ("my-tag", None),  # not a known channel name: no claim either way
    ],
)
def test_moving_tags(tag: str | None, word: str | None) -> None:
    assert moving_tag(tag) == word
