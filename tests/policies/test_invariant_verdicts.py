"""Verdicts that do not depend on the unknown fact (issue 30, session 17).

- An engine whose Pod names no GPU (or a family label naming several catalogued GPUs) is
  judged by V003, V004 and V012 on every catalogued GPU it may run on, and decided only where
  the verdict is the same on all of them; otherwise "not evaluated", naming where it passes
  and where it fails.
- An upstream vLLM image that names no release (``latest``) has its flags judged by V013
  under every read release: refused by all is a finding, accepted by all passes, a split
  stays "not evaluated" naming the option and the releases on each side.

Fixtures are the V003 rule folder's real-shaped Deployment with its GPU selector removed (or
replaced), so the image, probes and resources stay those of a real manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from conftest import fixture
from test_rule_verdicts import _verdicts

from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata_policies.view import catalogs


def _candidates() -> list[Any]:
    """The catalogue's GPUs at or above the release catalogue's compute-capability floor."""
    floor = catalogs.vllm_releases().cuda_cc_floor
    assert floor is not None
    gpus = load_hardware_catalog().gpus.values()
    found = [g for g in gpus if float(g.compute_capability) >= floor.value]
    return sorted(found, key=lambda g: (g.memory_gib, g.id))


def _manifest(
    tmp_path: Path,
    args: list[str],
    selector: dict[str, str] | None = None,
    image: str | None = None,
) -> Path:
    """The V003 fixture's Deployment serving *args*, with *selector* as its only GPU
    selector (none by default) and *image* (default: the fixture's pinned vLLM image)."""
    doc = yaml.safe_load(fixture("V003", "bad-70b-on-one-l4.yaml").read_text())
    spec = doc["spec"]["template"]["spec"]
    spec.pop("nodeSelector")
    if selector:
        spec["nodeSelector"] = selector
    container = spec["containers"][0]
    container["command"] = ["vllm", "serve", *args]
    if image is not None:
        container["image"] = image(container["image"]) if callable(image) else image
    out = tmp_path / "deployment.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


RESOURCE = "Deployment/llm/llama-70b"


def test_weights_too_large_for_every_candidate_is_one_finding(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v003_weights_fit.rule import judge

    path = _manifest(tmp_path, ["meta-llama/Llama-3.1-405B-Instruct", "--max-model-len", "8192"])
    [v] = _verdicts("V003", path, judge)[RESOURCE]
    assert (v.decision, v.reason) == ("violation", "weights-too-large")
    cands = _candidates()
    largest = cands[-1]
    gpu = str(v.values["gpu"])
    assert gpu.startswith(f"every catalogued GPU it can run on ({len(cands)} models from ")
    assert f"{cands[0].memory_gib:g} GiB" in gpu and f"{largest.memory_gib:g} GiB" in gpu
    assert gpu.endswith(f"figures for the largest, {largest.name})")
    # V004 is moot where the weights fit nowhere: silent, as on a known GPU.
    from gpustrata_policies.rules.v004_context_fits_kv_cache.rule import judge as v004

    assert _verdicts("V004", path, v004) == {}
    # The figures are the largest candidate's: more memory than any other candidate has.
    total = int(str(v.values["total_bytes"]))
    assert cands[-2].memory_gib * 2**30 < total <= largest.memory_gib * 2**30


def test_passes_on_every_candidate_are_silent(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v003_weights_fit.rule import judge as v003
    from gpustrata_policies.rules.v004_context_fits_kv_cache.rule import judge as v004
    from gpustrata_policies.rules.v012_concurrency_within_kv.rule import judge as v012

    args = ["Qwen/Qwen2.5-0.5B-Instruct", "--max-model-len", "2048", "--max-num-seqs", "16"]
    path = _manifest(tmp_path, args)
    for rule, judge in (("V003", v003), ("V004", v004), ("V012", v012)):
        assert _verdicts(rule, path, judge) == {}, rule  # no finding, no "not evaluated"


def test_split_verdict_stays_not_evaluated_naming_both_sides(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v003_weights_fit.rule import judge

    path = _manifest(tmp_path, ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"])
    [v] = _verdicts("V003", path, judge)[RESOURCE]
    assert (v.decision, v.reason) == ("not_evaluated", "not-estimated")
    why = str(v.values["why"])
    assert "the GPU model is unknown" in why
    small = [g.id for g in _candidates() if g.memory_gib < 16.5]  # 16 GB of BF16 weights
    assert small and "t4" in small
    assert f"fails (weights-too-large) on {', '.join(small[:-1])} and {small[-1]}" in why
    assert f"passes on the other {len(_candidates()) - len(small)}" in why
    hint = "(set gpu_products or pools in the cluster profile)"
    assert why.endswith(f"the verdict depends on the GPU {hint}") and why.count(hint) == 1


def test_family_label_is_judged_on_its_models(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v003_weights_fit.rule import judge

    args = ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
    selector = {"nvidia.com/gpu.product": "Tesla-V100"}
    [v] = _verdicts("V003", _manifest(tmp_path, args, selector), judge)[RESOURCE]
    why = str(v.values["why"])
    assert v.decision == "not_evaluated"
    assert "judged on each catalogued GPU that nvidia.com/gpu.product=Tesla-V100 names" in why
    assert "fails (weights-too-large) on v100-pcie-16gb and v100-sxm-16gb" in why
    assert "passes on v100-sxm-32gb" in why
    # The 405B fails on each V100: one finding over the family, worded for the family.
    args = ["meta-llama/Llama-3.1-405B-Instruct", "--max-model-len", "8192"]
    [v] = _verdicts("V003", _manifest(tmp_path, args, selector), judge)[RESOURCE]
    assert v.decision == "violation"
    assert "3 models from 16 GiB" in str(v.values["gpu"])
    assert "the Tesla-V100 label names no single model" in str(v.values["gpu"])


def test_moot_candidates_neither_agree_nor_disagree(tmp_path: Path) -> None:
    """On the 16 GB GPUs the 8B's weights do not fit (V003's finding there): V012 decides on
    the GPUs where vLLM starts, and says so."""
    from gpustrata_policies.rules.v012_concurrency_within_kv.rule import judge

    args = ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
    path = _manifest(tmp_path, [*args, "--max-num-seqs", "1024"])
    [v] = _verdicts("V012", path, judge)[RESOURCE]
    assert (v.decision, v.reason) == ("violation", "seqs-beyond-kv")
    assert "on the 3 smaller ones its weights or one sequence do not fit" in str(v.values["gpu"])
    assert int(str(v.values["held"])) < 1024
    # With 8 sequences it holds everywhere it starts: silent.
    assert _verdicts("V012", _manifest(tmp_path, [*args, "--max-num-seqs", "8"]), judge) == {}


def test_rocm_build_gets_no_nvidia_candidates(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v003_weights_fit.rule import judge

    args = ["meta-llama/Llama-3.1-405B-Instruct", "--max-model-len", "8192"]
    path = _manifest(tmp_path, args, image=lambda i: i.replace("vllm-openai", "vllm-openai-rocm"))
    [v] = _verdicts("V003", path, judge)[RESOURCE]
    assert v.decision == "not_evaluated"
    assert "the GPU model is unknown" in str(v.values["why"])
    assert "judged on" not in str(v.values["why"])


LATEST = "vllm/vllm-openai:latest"


def test_flags_every_release_accepts_pass_on_latest(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v013_engine_flags_accepted.rule import judge

    args = ["Qwen/Qwen2.5-0.5B-Instruct", "--max-model-len", "2048", "--max-num-seqs", "16"]
    assert _verdicts("V013", _manifest(tmp_path, args, image=LATEST), judge) == {}
    # The same flags on a build whose release is unknown for another reason stay unjudged.
    other = _manifest(tmp_path, args, image="lmcache/vllm-openai:2025-05-05-v1")
    [v] = _verdicts("V013", other, judge)[RESOURCE]
    assert (v.decision, v.reason) == ("not_evaluated", "release-unknown")


def test_flag_no_release_accepts_is_a_finding_on_latest(tmp_path: Path) -> None:
    from gpustrata.catalog.vllm_releases import accepted_flags, flag_releases
    from gpustrata_policies.rules.v013_engine_flags_accepted.rule import judge

    args = ["Qwen/Qwen2.5-0.5B-Instruct", "--maxModelLen", "2048"]
    [v] = _verdicts("V013", _manifest(tmp_path, args, image=LATEST), judge)[RESOURCE]
    assert (v.decision, v.reason) == ("violation", "option-refused-everywhere")
    read = [r for r in flag_releases() if accepted_flags(r)]
    assert v.values["judged_by"] == (read[0], read[-1])
    assert v.values["written"] == "--maxModelLen"
    assert v.values["why"] == "unrecognized arguments: --maxModelLen"


def test_flag_some_releases_accept_stays_not_evaluated_naming_them(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v013_engine_flags_accepted.rule import judge

    config = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    args = ["Qwen/Qwen2.5-0.5B-Instruct", "--kv-transfer-config", config]
    [v] = _verdicts("V013", _manifest(tmp_path, args, image=LATEST), judge)[RESOURCE]
    assert (v.decision, v.reason) == ("not_evaluated", "releases-split")
    split = str(v.values["split"])
    assert split.startswith("--kv-transfer-config (accepted by ")
    assert ", refused by " in split
    assert "is unpinned (tag 'latest')" in str(v.values["where"])


def test_ray_accelerator_type_the_catalogue_lacks_gets_no_candidates(tmp_path: Path) -> None:
    """A Ray Serve LLM engine whose accelerator_type names a GPU the catalogue lacks runs on
    that GPU: no catalogued GPU is a candidate, the GPU reason stands."""
    from conftest import REPO

    from gpustrata_policies.rules.v003_weights_fit.rule import judge

    text = REPO / "tests/data/field-corpus-1/ray-project-kuberay-ray-service-llm-serve.yaml"
    original = text.read_text()
    anchor = "          engine_kwargs:\n"
    assert anchor in original
    for accelerator, judged in (("", True), ("          accelerator_type: MI300X\n", False)):
        path = tmp_path / "ray.yaml"
        path.write_text(original.replace(anchor, accelerator + anchor, 1))
        [v] = _verdicts("V003", path, judge)["RayService/default/ray-serve-llm"]
        assert v.decision == "not_evaluated"
        assert ("judged on every catalogued NVIDIA GPU" in str(v.values["why"])) is judged
