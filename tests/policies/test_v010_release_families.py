"""V010 judges each vLLM release family by what its own /health waits on (issue 30): the
AsyncLLMEngine's 60 s iteration timeout through 0.6.1, the MQLLMEngine's 30 s heartbeat in
0.6.2-0.6.3, nothing loop-bound from 0.6.4 (catalogue ``health.v0_dead_after``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpustrata.catalog.vllm_releases import load_vllm_releases, v0_dead_after
from gpustrata_policies import evaluate

FIXTURE = (
    Path(__file__).parents[2]
    / "policies/gpustrata_policies/rules/v010_liveness_outlasts_longest_step"
    / "bad-v0-step-marks-engine-dead.yaml"
)
L4, L40S = "g6.2xlarge", "g6e.2xlarge"
"""Llama 3.1 8B, 131072-token prefill without chunking: ~131 s on an L4, ~44 s on an L40S."""


def _deployment(release: str, instance: str) -> dict[str, Any]:
    doc: dict[str, Any] = copy.deepcopy(next(iter(yaml.safe_load_all(FIXTURE.read_text()))))
    spec = doc["spec"]["template"]["spec"]
    spec["nodeSelector"] = {"node.kubernetes.io/instance-type": instance}
    spec["containers"][0]["image"] = f"vllm/vllm-openai:v{release}"
    return doc


def _steps(release: str, instance: str) -> list[str]:
    report = evaluate([_deployment(release, instance)])
    assert not [n for n in report.not_evaluated if n.rule == "V010"], report.not_evaluated
    return [
        f.message
        for f in report.findings
        if f.rule == "V010" and "longest engine step" in f.message
    ]


@pytest.mark.parametrize("release", ["0.5.5", "0.6.0", "0.6.1.post2"])
def test_iteration_timeout_family_kills_after_60_s(release: str) -> None:
    [message] = _steps(release, L4)
    assert f"vLLM {release}" in message
    assert "VLLM_ENGINE_ITERATION_TIMEOUT_S" in message and "60 s" in message
    assert f"vllm/blob/v{release}/vllm/engine/async_llm_engine.py" in message
    assert "MQLLMEngineClient" not in message  # that front end does not exist before 0.6.2
    assert _steps(release, L40S) == []  # a 44 s step is under the 60 s timeout


def test_0_4_2_is_judged_by_its_iteration_timeout() -> None:
    fact = v0_dead_after("0.4.2")
    assert fact is not None and fact[0].value == 60 and fact[1] == "iteration-timeout"
    assert fact[0].source == "vllm@v0.4.2:vllm/engine/async_llm_engine.py"
    assert _steps("0.4.2", L40S) == []  # the old model flagged this 44 s step (30 s limit)


@pytest.mark.parametrize("release", ["0.6.2", "0.6.3.post1"])
def test_heartbeat_family_kills_after_30_s(release: str) -> None:
    [message] = _steps(release, L40S)
    assert f"vLLM {release}" in message and "MQLLMEngineClient" in message
    assert "30 s" in message and "ITERATION_TIMEOUT" not in message


def test_releases_from_0_6_4_have_no_loop_bound_health() -> None:
    assert _steps("0.6.4", L4) == []
    assert v0_dead_after("0.6.4") is None


def test_unread_releases_follow_agreeing_neighbours() -> None:
    between = v0_dead_after("0.5.0")  # 0.4.2 and 0.5.5 agree
    assert between is not None and (between[0].value, between[1]) == (60, "iteration-timeout")
    assert between[0].source.startswith("vllm@v0.4.2:")
    rows = {v: how for v, _, how in load_vllm_releases().health.dead_after}
    assert (rows["0.6.1.post2"], rows["0.6.2"]) == ("iteration-timeout", "heartbeat")


@pytest.mark.parametrize(
    "row",
    [["0.6.2", 30, "guessed", "vllm/engine/multiprocessing/engine.py"], ["0.6.2", 30, "heartbeat"]],
)
def test_a_malformed_death_row_is_refused(row: list[object]) -> None:
    import importlib.resources

    from gpustrata.catalog.vllm_release_types import VllmReleaseCatalogError
    from gpustrata.catalog.vllm_releases import releases_from_document

    text = importlib.resources.files("gpustrata.catalog").joinpath("data/vllm-releases.yaml")
    doc = yaml.safe_load(text.read_text())
    doc["health"]["v0_dead_after"] = [row]
    with pytest.raises(VllmReleaseCatalogError, match=r"health\.v0_dead_after\[0\]"):
        releases_from_document(doc)


def _in_process_steps(
    release: str | None, instance: str, env: dict[str, str] | None = None
) -> tuple[list[str], list[str]]:
    """V010's step findings and not-evaluated reasons with --disable-frontend-multiprocessing
    (and *env*), for *release* (None: an image that names no release)."""
    doc = _deployment(release or "0.0.0", instance)
    container = doc["spec"]["template"]["spec"]["containers"][0]
    if release is None:
        container["image"] = "vllm/vllm-openai:latest"
    key = "args" if "args" in container else "command"
    container[key] = [*container[key], "--disable-frontend-multiprocessing"]
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    report = evaluate([doc])
    found = [
        f.message
        for f in report.findings
        if f.rule == "V010" and "longest engine step" in f.message
    ]
    return found, [n.reason for n in report.not_evaluated if n.rule == "V010"]


@pytest.mark.parametrize("release", ["0.6.2", "0.6.3.post1"])
def test_heartbeat_family_in_process_keeps_the_iteration_timeout(release: str) -> None:
    """--disable-frontend-multiprocessing runs AsyncLLMEngine in the API server: no heartbeat,
    but its 60 s step timeout still fails /health for good (no longer skipped)."""

    def steps(instance: str) -> list[str]:
        return _in_process_steps(release, instance)[0]

    [message] = steps(L4)
    assert "VLLM_ENGINE_ITERATION_TIMEOUT_S" in message and "60 s" in message
    assert "MQLLMEngineClient" not in message
    assert steps(L40S) == []  # 44 s: over the heartbeat's 30 s, under the 60 s timeout


@pytest.mark.parametrize("release", ["0.6.4", "0.6.4.post1", "0.6.6", "0.7.0", "0.7.3"])
def test_in_process_after_the_0_6_4_fix_still_times_out(release: str) -> None:
    """vllm#9818 (0.6.4) freed the multiprocess front end's /health from the engine loop; in
    process the AsyncLLMEngine keeps its 60 s step timeout (read in the wheels to 0.10.2)."""
    [message], unread = _in_process_steps(release, L4)
    assert not unread
    assert "VLLM_ENGINE_ITERATION_TIMEOUT_S" in message and "60 s" in message
    assert "drop --disable-frontend-multiprocessing" in message
    assert "/vllm/engine/async_llm_engine.py" in message
    assert _in_process_steps(release, L40S)[0] == []  # 44 s: under the 60 s timeout
    assert _steps(release, L4) == []  # the multiprocess front end: nothing loop-bound


@pytest.mark.parametrize("release", ["0.8.0", "0.8.5.post1", "0.9.2", "0.10.2"])
def test_in_process_v0_needs_vllm_use_v1_0_from_0_8(release: str) -> None:
    """From 0.8.0 V1 is the default and only warns about the flag (AsyncLLM runs); with
    VLLM_USE_V1=0 the V0 AsyncLLMEngine runs in process and times a step out after 60 s."""
    assert _in_process_steps(release, L4)[0] == []
    [message], unread = _in_process_steps(release, L4, {"VLLM_USE_V1": "0"})
    assert not unread and "VLLM_USE_V1=0" in message and "60 s" in message
    assert f"vllm/blob/v{release}/vllm/engine/async_llm_engine.py" in message


def test_in_process_rows_are_read_per_release() -> None:
    from gpustrata.catalog.vllm_releases import v0_in_process_dead_after

    rows = dict(load_vllm_releases().health.in_process_dead_after)
    assert {"0.6.4", "0.7.3", "0.8.5.post1", "0.10.2"} <= set(rows)
    assert {fact.value for fact in rows.values()} == {60}
    between = v0_in_process_dead_after("0.7.2")  # 0.7.0 and 0.7.3 agree
    assert between is not None and between.source.startswith("vllm@v0.7.0:")
    assert v0_in_process_dead_after("0.11.0") is None  # no V0 engine from 0.11.0


def test_in_process_without_a_release_is_not_evaluated() -> None:
    """An image that names no release: not skipped (as it was) but "not evaluated", with the
    in-process limit."""
    found, unread = _in_process_steps(None, L4)
    assert found == [] and unread
    assert any("--disable-frontend-multiprocessing" in r and "60 s" in r for r in unread)
