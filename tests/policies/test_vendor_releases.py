"""Vendor and other publishers' builds -> the vLLM release their own build files or release
notes name (vllm-releases.yaml ``vendor_images``), one test per family with image
references shaped as their publishers write them; and the builds whose files name no
release stay unknown, with the reason naming the cluster-profile key that decides it.
Issue 30: no guessed release."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpustrata.catalog.profile import ClusterProfile
from gpustrata.catalog.vllm_releases import accepted_flags, load_vllm_releases
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view.engines import image_release

DATA = Path(__file__).resolve().parents[1] / "data"


def _release(image: str) -> str | None:
    found = image_release(image)
    assert found is not None, image
    return found.version


def _deployment(image: str, args: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "llm"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                    "containers": [
                        {
                            "name": "vllm",
                            "image": image,
                            "command": ["vllm", "serve"],
                            "args": args,
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ],
                },
            },
        },
    }


def test_every_vendor_mapping_cites_the_publishers_own_page() -> None:
    for build in load_vllm_releases().vendor_images:
        assert build.source.startswith("https://"), build
        assert any(
            host in build.source
            for host in ("docs.nvidia.com/", "docs.redhat.com/", "github.com/vllm-project/aibrix/")
        ) or build.source.startswith("https://github.com/kserve/kserve/blob/v"), build


@pytest.mark.parametrize(
    ("tag", "version"),
    [
        ("0.6.1.post1", "0.11.0"),  # the field corpora's Dynamo samples
        ("0.7.1", "0.11.0"),
        ("0.8.0", "0.12.0"),
        ("0.9.1", "0.14.1"),
        ("1.3.1", "0.23.0"),
        ("1.6.0", "0.31.0"),
    ],
)
def test_dynamo_vllm_runtime_runs_the_vllm_its_support_matrix_names(tag: str, version: str) -> None:
    image = f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}"
    found = image_release(image)
    assert found is not None and found.version == version
    assert "NVIDIA Dynamo" in found.where and "docs.nvidia.com/dynamo" in found.where


@pytest.mark.parametrize(
    "image",
    [
        # the .postN patches of 0.8.1 shipped no vLLM container (the support matrix)
        "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.1.post1",
        "nvcr.io/nvidia/ai-dynamo/vllm-runtime:my-tag",  # Dynamo's docs' placeholder
        "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0",  # a release whose row was not read
    ],
)
def test_dynamo_tags_the_matrix_does_not_list_stay_unknown(image: str) -> None:
    found = image_release(image)
    assert found is not None and found.version is None and "not catalogued" in found.where


def test_a_dynamo_runtime_running_vllm_serve_is_judged_on_its_release() -> None:
    """`vllm serve` in Dynamo 0.6.1.post1's runtime image: V013 judges the flags against
    vLLM 0.11.0 (the flag set read for it), instead of "the image names no release"."""
    doc = _deployment(
        "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1.post1",
        ["Qwen/Qwen2.5-1.5B-Instruct", "--no-such-flag"],
    )
    report = evaluate([doc])
    assert not [n for n in report.not_evaluated if n.rule == "V013"]
    (v013,) = [f.message for f in report.findings if f.rule == "V013"]
    assert "--no-such-flag" in v013 and "vLLM 0.11.0" in v013


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("kserve/huggingfaceserver:v0.14.1-gpu", "0.6.1.post2"),
        ("kserve/huggingfaceserver:v0.15.0-gpu", "0.8.1"),  # ARG over the lock's 0.8.2
        ("docker.io/kserve/huggingfaceserver:v0.15.2-gpu", "0.8.5"),
        ("kserve/huggingfaceserver:v0.16.0", "0.9.2"),  # the CPU build: same pin
        ("kserve/huggingfaceserver:v0.20.0-gpu", "0.24.0"),
    ],
)
def test_kserve_huggingfaceserver_runs_the_vllm_its_dockerfile_installs(
    image: str, version: str
) -> None:
    found = image_release(image)
    assert found is not None and found.version == version
    assert "github.com/kserve/kserve/blob/v" in found.where


def test_kserve_huggingfaceserver_unpinned_or_unread_is_no_vllm_release() -> None:
    for image in ("kserve/huggingfaceserver:latest-gpu", "kserve/huggingfaceserver:v0.13.1"):
        found = image_release(image)
        assert found is None or found.version is None, image


def test_aibrix_kvcache_build_reads_the_base_its_build_command_names() -> None:
    """build/container/README.md builds this tag FROM vllm/vllm-openai:v0.10.2; the
    P/D README's `v0.9.2-nixl-v0.4.1` build is another Dockerfile, not mapped."""
    registry = "aibrix-container-registry-cn-beijing.cr.volces.com"
    tag = "v0.10.2-aibrix-v0.5.0-nixl-0.7.1-20251123"
    assert _release(f"aibrix/vllm-openai:{tag}") == "0.10.2"
    assert _release(f"{registry}/aibrix/vllm-openai:{tag}") == "0.10.2"
    assert _release("aibrix/vllm-openai:v0.9.2-nixl-v0.4.1") is None


@pytest.mark.parametrize(
    ("image", "says"),
    [
        ("nvcr.io/nvidia/vllm:26.02-py3", "NVIDIA NGC"),
        (
            "us-docker.pkg.dev/vertex-ai/vertex-vision-model-garden-dockers/"
            "pytorch-vllm-serve:20250312_0916_RC01",
            "Vertex AI",
        ),
        ("lmcache/vllm-openai:2025-05-05-v1", "LMCache"),
        (
            "ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2",
            "names no vLLM release",
        ),
    ],
)
def test_builds_whose_publisher_names_no_release_stay_unknown(image: str, says: str) -> None:
    """The field corpora's remaining vendor images: searched again, no publisher file names
    the release inside (vllm-releases.yaml says what was read), so none is guessed."""
    found = image_release(image)
    assert found is not None and found.version is None and says in found.where


def test_an_unmapped_vendor_build_names_the_profile_key_that_decides_it() -> None:
    objs = load_paths([str(DATA / "field-corpus-2" / "gke-nemo-rl-nvidia-vllm-gemma3-27b.yaml")])
    report = evaluate(objs)
    reasons = [n.reason for n in report.not_evaluated if n.rule in ("V005", "V010", "V013")]
    # V010 no longer: since session 22 the model is read from the Pod label (Gemma 3 27B), so
    # the longest V0 step is estimated, short under every release on these H100s
    assert sorted(n.rule for n in report.not_evaluated if n.rule.startswith("V")) == [
        "V005",
        "V013",
    ]
    assert len(reasons) == 2
    assert all("nvcr.io/nvidia/vllm:26.02-py3" in r for r in reasons)
    assert all("(set images in the cluster profile)" in r for r in reasons)


VERTEX_2025_03 = (
    "us-docker.pkg.dev/vertex-ai/vertex-vision-model-garden-dockers/"
    "pytorch-vllm-serve:20250312_0916_RC01"
)


@pytest.mark.parametrize(
    ("corpus_file", "image", "says"),
    [
        (
            "field-corpus-3/production-stack-gie-gpu-deployment.yaml",
            "lmcache/vllm-openai:2025-05-05-v1",
            "LMCache",
        ),
        (
            "field-corpus-3/production-stack-operator-vllmruntime.yaml",
            "docker.io/lmcache/vllm-openai:2025-05-27-v1",
            "LMCache",
        ),
        (
            "field-corpus-1/GoogleCloudPlatform-kubernetes-engine-samples-vllm-gemma-3-27b-it.yaml",
            VERTEX_2025_03,
            "Vertex AI Model Garden",
        ),
    ],
)
def test_a_dated_vendor_tag_stays_not_evaluated_until_the_profile_states_it(
    corpus_file: str, image: str, says: str
) -> None:
    """Session 23: the field corpora's dated vendor tags, read again (vllm-releases.yaml says
    what). LMCache's Dockerfile of May 2025 pins `FROM vllm/vllm-openai:v0.7.3`, but its
    dated tags were built from vLLM's main branch (LMCache/LMCache#536, #757), so the pin is
    not read as the release inside: V013 stays not evaluated, naming the image and the
    profile key, and no flag is judged against a guessed release. The profile's `images`
    entry for the tag is what decides it."""
    objs = load_paths([str(DATA / corpus_file)])
    report = evaluate(objs)
    (reason,) = [n.reason for n in report.not_evaluated if n.rule == "V013"]
    assert image in reason and says in reason
    assert reason.endswith("(set images in the cluster profile)")
    assert not [f for f in report.findings if f.rule == "V013"]
    profile = ClusterProfile.model_validate({"images": [{"pattern": image, "vllm": "0.9.0"}]})
    stated = evaluate(objs, profile=profile, profile_file="cluster.yaml")
    assert not [n for n in stated.not_evaluated if n.rule == "V013"]


def test_vllm_0_4_2_image_is_judged_with_the_flags_read_from_its_wheel() -> None:
    """quay.io/rh-aiservices-bu/vllm-openai-ubi9:0.4.2 pins vllm==0.4.2 (its build's
    requirements.txt); 0.4.2 was read from its PyPI wheel, so V013 judges the corpus file
    (every flag accepted) instead of "outside the releases read", and a flag 0.4.2's
    parser lacks is reported against 0.4.2."""
    (fs,) = accepted_flags("0.4.2") or ()
    assert "vllm@v0.4.2:vllm/entrypoints/openai/cli_args.py" in fs.provenance
    path = DATA / "field-corpus-3" / "llm-on-openshift-vllm-gpu-deployment.yaml"
    objs = load_paths([str(path)])
    report = evaluate(objs)
    assert not [n for n in report.not_evaluated if n.rule == "V013"]
    assert not [f for f in report.findings if f.rule == "V013"]
    doc = copy.deepcopy(objs[0].raw)
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["args"] = [*container["args"], "--distributed-executor-backend", "mp"]
    report = evaluate([doc])
    (v013,) = [f.message for f in report.findings if f.rule == "V013"]
    assert "--distributed-executor-backend" in v013 and "vLLM 0.4.2" in v013


@pytest.mark.parametrize(
    "image",
    ["ghcr.io/llm-d/llm-d-dev:v0.2.2"]
    + [f"ghcr.io/llm-d/llm-d-cuda:{t}" for t in ("v0.4.0", "v0.6.0", "v0.8.0", "v0.9.0")],
)
def test_llm_d_images_are_not_read_as_a_vllm_release(image: str) -> None:
    """KServe's preset images (0.16-0.20) and the one corpus-3's LLMInferenceService states:
    llm-d's release notes name vLLM v0.23.0 / v0.26.0 for v0.8.0 / v0.9.0, but its build file
    of that era builds CUDA from a fork commit (vllm-releases.yaml's note, session 19), and
    the older tags name no release; with the vendor's statements disagreeing none is read."""
    found = image_release(image)
    assert found is None or found.version is None
    repository, _, version = image.partition(":")
    assert load_vllm_releases().vendor_image(repository, version) is None
