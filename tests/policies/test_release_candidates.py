"""Verdicts under every vLLM release an image may run (issue 30, session 18).

An image that names no release but bounds it (an unpinned upstream image: any catalogued
release; another publisher's build whose tag leads with a release: that one or a later one)
is judged by the release-dependent rules under every candidate release, and decided only
where all give the same verdict; otherwise "not evaluated", naming the releases on each side
and the profile key. Fixtures: the V003 rule folder's real-shaped Deployment
(:func:`test_invariant_verdicts._manifest`) on a named GPU."""

from __future__ import annotations

from pathlib import Path

from test_invariant_verdicts import LATEST, RESOURCE, _manifest
from test_rule_verdicts import _verdicts

from gpustrata.core.versions import parse_version
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.agreement import agreement

FLOOR_IMAGE = "ghcr.io/volcano-sh/vllm-openai:v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2"
"""kthena's P/D image (tests/data/field-corpus-3/kthena-vllm-pd-multinode.yaml)."""
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
L4 = {"nvidia.com/gpu.product": "NVIDIA-L4"}


def _releases() -> list[str]:
    known = [r.version for r in catalogs.compat().vllm_releases()]
    return sorted(known, key=parse_version)


def test_agreement_groups_equal_values_and_agrees_only_on_one() -> None:
    found = agreement([1, 2, 3, 4], lambda n: n % 2)
    assert not found.agreed and found.value is None
    assert found.groups == ((1, (1, 3)), (0, (2, 4)))
    one = agreement(["a", "b"], lambda _: {"k": [1]})  # unhashable values group by JSON
    assert one.agreed and one.value == {"k": [1]}
    assert not agreement([], lambda n: n).agreed  # no candidate: nothing agreed


def test_v012_passes_under_every_release_is_silent(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v012_concurrency_within_kv.rule import judge

    args = ["Qwen/Qwen2.5-0.5B-Instruct", "--max-model-len", "2048"]
    path = _manifest(tmp_path, args, selector=H100, image=LATEST)
    assert _verdicts("V012", path, judge) == {}


def test_v012_fails_under_every_release_is_one_finding_naming_the_span(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v012_concurrency_within_kv.rule import judge

    args = ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
    path = _manifest(tmp_path, args, selector=L4, image=LATEST)
    [v] = _verdicts("V012", path, judge)[RESOURCE]
    assert (v.decision, v.reason) == ("violation", "seqs-beyond-kv")
    releases = _releases()
    engine = str(v.values["engine"])
    assert f"on every vLLM release from {releases[0]} to {releases[-1]} its image may" in engine
    assert engine.endswith(f"figures for {releases[-1]})")
    assert v.values["max_num_seqs"] == 256  # every release's default below 70 GiB


def test_v012_split_names_the_releases_on_each_side(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v012_concurrency_within_kv.rule import judge

    # ~500 sequences of 2,048 tokens fit: the V0 engine's 256 passes, V1's 1,024 on an
    # H100 (70 GiB or more) does not.
    args = ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "2048"]
    path = _manifest(tmp_path, args, selector=H100, image=LATEST)
    [v] = _verdicts("V012", path, judge)[RESOURCE]
    assert (v.decision, v.reason) == ("not_evaluated", "not-estimated")
    why = str(v.values["why"])
    v1_from = catalogs.vllm_releases().v1_default_from
    releases = _releases()
    before = releases[releases.index(v1_from) - 1]
    assert f"it passes under {releases[0]} to {before}" in why
    assert f"fails (seqs-beyond-kv) under {v1_from} to {releases[-1]}" in why
    assert why.endswith(
        "the verdict depends on the vLLM release (set images in the cluster profile)"
    )


def test_floor_build_is_judged_from_its_leading_release(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v010_liveness_outlasts_longest_step.rule import judge as v010
    from gpustrata_policies.rules.v013_engine_flags_accepted.rule import judge as v013

    args = ["Qwen/Qwen2.5-0.5B-Instruct", "--max-model-len", "2048", "--max-num-seqs", "16"]
    path = _manifest(tmp_path, args, image=FLOOR_IMAGE)
    # Every release from 0.10.0 accepts the flags, and none of them has a V0 /health that
    # waits on the engine loop: both decided, nothing left "not evaluated".
    assert _verdicts("V013", path, v013) == {}
    assert not [
        v
        for vs in _verdicts("V010", path, v010).values()
        for v in vs
        if v.decision == "not_evaluated"
    ]
    # The candidates: 0.10.0 and every later catalogued release, none before.
    from gpustrata_policies.view.engines import image_release

    assert image_release(FLOOR_IMAGE).floor == "0.10.0"  # type: ignore[union-attr]
    assert image_release(LATEST).floor is None  # type: ignore[union-attr]


def test_dated_publisher_build_gets_no_candidates(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v012_concurrency_within_kv.rule import judge

    # LMCache's dated builds follow vLLM's main branch (LMCache/LMCache#536): no release
    # bounds them, so the record stays "not evaluated" as before.
    args = ["meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
    path = _manifest(tmp_path, args, selector=L4, image="lmcache/vllm-openai:2025-05-05-v1")
    [v] = _verdicts("V012", path, judge)[RESOURCE]
    assert (v.decision, v.reason) == ("not_evaluated", "max-num-seqs-unknown")


def test_v005_budget_below_seqs_fails_under_every_release(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v005_batch_budget_covers_context.rule import judge

    args = ["Qwen/Qwen2.5-0.5B-Instruct", "--max-num-batched-tokens", "64", "--max-num-seqs", "256"]
    found = _verdicts("V005", _manifest(tmp_path, args, image=LATEST), judge)[RESOURCE]
    [v] = [v for v in found if v.decision == "violation"]
    assert v.reason == "tokens-below-seqs"
    releases = _releases()
    assert f"on every vLLM release from {releases[0]} to {releases[-1]}" in str(v.values["engine"])
    # The V0 releases also refuse the budget below max_model_len (chunked prefill off for
    # short contexts there); V1 ones chunk: that verdict is not on all, so it stays open.
    [rest] = [v for v in found if v.decision == "not_evaluated"]
    why = str(rest.values["why"])
    v1_from = catalogs.vllm_releases().v1_default_from
    before = releases[releases.index(v1_from) - 1]
    assert f"fails (tokens-below-max-len) under {releases[0]} to {before}" in why


def test_v005_floor_build_passes_and_latest_splits_naming_releases(tmp_path: Path) -> None:
    from gpustrata_policies.rules.v005_batch_budget_covers_context.rule import judge

    args = [
        "Qwen/Qwen2.5-0.5B-Instruct",
        "--max-num-batched-tokens",
        "8192",
        "--max-num-seqs",
        "64",
        "--max-model-len",
        "4096",
    ]
    # Every release from 0.10.0 had its scheduler defaults read: the budget covers both.
    assert _verdicts("V005", _manifest(tmp_path, args, image=FLOOR_IMAGE), judge) == {}
    # Stated values that cover both max_model_len and max_num_seqs pass under any
    # release's defaults, read or not: `latest` passes too.
    assert _verdicts("V005", _manifest(tmp_path, args, image=LATEST), judge) == {}
    # A budget below max_model_len depends on whether prefills are chunked: `latest`
    # includes releases whose defaults were not read (below the first read V1 release):
    # "not evaluated", naming where it passes and where it is not judged.
    args[args.index("--max-model-len") + 1] = "16384"
    [v] = _verdicts("V005", _manifest(tmp_path, args, image=LATEST), judge)[RESOURCE]
    assert (v.decision, v.reason) == ("not_evaluated", "defaults-unread")
    why = str(v.values["why"])
    assert "it passes under " in why and "it is not evaluated (defaults-unread) under " in why
    assert why.endswith(
        "the verdict depends on the vLLM release (set images in the cluster profile)"
    )


def _rayservice(tmp_path: Path, target: int) -> Path:
    """R007's real-shaped RayService with max_num_seqs unset, the worker on an H100 and
    running the unpinned upstream image."""
    import yaml

    from gpustrata_policies.rules import r007_serve_autoscaling_matches_engine as r007

    folder = Path(r007.__file__).parent
    doc = yaml.safe_load((folder / "bad-target-far-above-batch.yaml").read_text())
    serve = yaml.safe_load(doc["spec"]["serveConfigV2"])
    config = serve["applications"][0]["args"]["llm_configs"][0]
    del config["engine_kwargs"]["max_num_seqs"]
    config["deployment_config"]["max_ongoing_requests"] = target + 100
    config["deployment_config"]["autoscaling_config"]["target_ongoing_requests"] = target
    doc["spec"]["serveConfigV2"] = yaml.safe_dump(serve)
    worker = doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["nodeSelector"] = H100
    worker["containers"][0]["image"] = LATEST
    out = tmp_path / "rayservice.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


RAY_RESOURCE = "RayService/ray/qwen-r007-bad"


def test_r007_target_within_every_release_batch_passes_above_all_fails_between_splits(
    tmp_path: Path,
) -> None:
    from gpustrata_policies.rules.r007_serve_autoscaling_matches_engine.rule import judge

    # Defaults on an H100: 256 under the V0 engine, 1,024 under V1; the ratio is 2.
    assert _verdicts("R007", _rayservice(tmp_path, 300), judge) == {}
    [v] = _verdicts("R007", _rayservice(tmp_path, 3000), judge)[RAY_RESOURCE]
    assert (v.decision, v.reason) == ("violation", "target-above-batch")
    releases = _releases()
    assert f"on every vLLM release from {releases[0]} to {releases[-1]}" in str(v.values["where"])
    [v] = _verdicts("R007", _rayservice(tmp_path, 600), judge)[RAY_RESOURCE]
    assert (v.decision, v.reason) == ("not_evaluated", "default-unknown")
    v1_from = catalogs.vllm_releases().v1_default_from
    before = releases[releases.index(v1_from) - 1]
    why = str(v.values["why"])
    assert f"it fails (target-above-batch) under {releases[0]} to {before}" in why
    assert f"it passes under {v1_from} to {releases[-1]}" in why


def test_v010_long_v0_step_splits_naming_the_loop_bound_releases(tmp_path: Path) -> None:
    import yaml

    from gpustrata_policies.rules import v010_liveness_outlasts_longest_step as v010
    from gpustrata_policies.rules.v010_liveness_outlasts_longest_step.rule import HEALTH, judge

    # V010's folder fixture (Llama 3.1 8B, a 131,072-token prompt unchunked) on an L4 and the
    # unpinned image: every release before the fix marks it dead (60 s iteration timeout,
    # 30 s heartbeat), none after.
    fixture = Path(v010.__file__).parent / "bad-v0-step-marks-engine-dead.yaml"
    doc = next(iter(yaml.safe_load_all(fixture.read_text())))
    container = doc["spec"]["template"]["spec"]["containers"][0]
    container["image"] = LATEST
    doc["spec"]["template"]["spec"]["nodeSelector"] = L4  # ~131 s a step: past every limit
    path = tmp_path / "v010.yaml"
    path.write_text(yaml.safe_dump(doc))
    resource = f"Deployment/{doc['metadata'].get('namespace', 'default')}/{doc['metadata']['name']}"
    [v] = _verdicts("V010", path, judge)[resource]
    assert (v.decision, v.reason) == ("not_evaluated", "releases-split")
    why = str(v.values["why"])
    releases = _releases()
    fixed = HEALTH.v0_engine_loop_until
    last_bound = releases[releases.index(fixed) - 1]
    assert f"it fails (step-outlasts-v0-heartbeat) under {releases[0]} to {last_bound}" in why
    assert f"it passes under {fixed} to {releases[-1]}" in why
    assert "its longest step under them is estimated at " in why
    # The same engine from 0.10.0 on (no loop-bound release among them): nothing to report.
    container["image"] = FLOOR_IMAGE
    path.write_text(yaml.safe_dump(doc))
    assert _verdicts("V010", path, judge) == {}
