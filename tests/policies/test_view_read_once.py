"""The view reads each object once per evaluation (issue 18) without laundering unknowns.

A value read without an unknown is kept and handed back as it is; one whose reading met a
value known only at deploy time (Pulumi preview) is handed back with those reads noted
again for every caller, and an :class:`UnknownInput` it raised is raised again.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gpustrata.core.unknown import (
    TAINTED,
    UNKNOWN,
    UnknownInput,
    memoised,
    reading_unknowns,
    track_unknowns,
)
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.vllm_args import vllm_engine


def _deployment(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "serving"},
        "spec": {"template": {"spec": pod}},
    }


def _tracked(raw: dict[str, Any]) -> K8sObject:
    tracked = track_unknowns(raw, "Deployment/serving/vllm")
    assert tracked is not raw  # it holds an unknown: reads of it are noted
    return K8sObject(tracked)


def test_a_known_value_is_kept_and_handed_back_without_a_second_call() -> None:
    memo: dict[Any, Any] = {}
    calls: list[int] = []

    def factory() -> list[int]:
        calls.append(1)
        return [1, 2]

    first = memoised(memo, "k", factory)
    assert memoised(memo, "k", factory) is first
    assert memo["k"] is first  # kept bare: a hit is one dict read
    assert calls == [1]


def test_the_factory_gets_the_arguments_once() -> None:
    memo: dict[Any, Any] = {}
    calls: list[tuple[int, str]] = []

    def factory(number: int, text: str) -> str:
        calls.append((number, text))
        return text * number

    assert memoised(memo, "k", factory, 2, "ab") == "abab"
    assert memoised(memo, "k", factory, 3, "zz") == "abab"  # the key decides, not the args
    assert calls == [(2, "ab")]


def test_a_kept_none_is_a_hit() -> None:
    memo: dict[Any, Any] = {}
    calls: list[int] = []

    def factory() -> None:
        calls.append(1)

    assert memoised(memo, "k", factory) is None
    assert memoised(memo, "k", factory) is None
    assert calls == [1]


def test_a_value_built_from_an_unknown_replays_its_reads_to_every_caller() -> None:
    raw = track_unknowns({"a": UNKNOWN, "b": 1}, "X")
    memo: dict[Any, Any] = {}

    def factory() -> int:
        raw.get("a")  # an unknown read, noted
        return int(raw["b"])

    for _ in range(3):
        with reading_unknowns() as reads:
            assert memoised(memo, "k", factory) == 1
        assert reads == ["a of X"]
    assert type(memo["k"]) is TAINTED  # kept with its reads, replayed to every caller


def test_an_unknown_input_is_raised_again_with_its_reads() -> None:
    raw = track_unknowns({"a": UNKNOWN}, "X")
    memo: dict[Any, Any] = {}
    calls: list[int] = []

    def factory() -> int:
        calls.append(1)
        raw.get("a")
        raise UnknownInput("a")

    for _ in range(2):
        with reading_unknowns() as reads, pytest.raises(UnknownInput):
            memoised(memo, "k", factory)
        assert reads == ["a of X"]
    assert calls == [1]


def test_another_error_is_not_kept() -> None:
    memo: dict[Any, Any] = {}

    def factory() -> int:
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        memoised(memo, "k", factory)
    assert "k" not in memo


def test_pods_are_read_once_and_an_unknown_template_raises_at_every_call() -> None:
    obj = K8sObject(_deployment({"containers": [{"name": "a"}]}))
    assert obj.pods() is obj.pods()

    raw = _deployment({})
    raw["spec"]["template"] = UNKNOWN
    unknown = _tracked(raw)
    for _ in range(2):
        with reading_unknowns() as reads, pytest.raises(UnknownInput):
            unknown.pods()
        assert reads == ["spec.template of Deployment/serving/vllm"]


def test_app_and_all_containers_are_the_same_refs_so_an_engine_is_parsed_once() -> None:
    obj = K8sObject(
        _deployment(
            {
                "initContainers": [{"name": "fetch", "image": "busybox"}],
                "containers": [
                    {"name": "vllm", "image": "vllm/vllm-openai:v0.10.1.1", "args": ["--port=1"]},
                    {"name": "sidecar", "image": "nginx"},
                ],
            }
        )
    )
    everything = list(obj.containers())
    app = list(obj.containers(init=False))
    assert [c.name for c in everything] == ["vllm", "sidecar", "fetch"]
    assert [c.name for c in app] == ["vllm", "sidecar"]
    assert all(a is b for a, b in zip(app, everything, strict=False))
    assert list(obj.containers()) == everything
    assert next(obj.containers()) is everything[0]
    engine = vllm_engine(app[0])
    assert engine is not None and engine.port == 1
    assert vllm_engine(everything[0]) is engine


def test_an_unknown_init_container_spoils_only_the_lists_that_hold_it() -> None:
    raw = _deployment({"containers": [{"name": "vllm"}], "initContainers": [UNKNOWN]})
    obj = _tracked(raw)
    assert [c.name for c in obj.containers(init=False)] == ["vllm"]
    for _ in range(2):
        seen: list[str] = []
        with reading_unknowns() as reads, pytest.raises(UnknownInput, match=r"initContainers\[0\]"):
            for c in obj.containers():
                seen.append(c.name)
        assert seen == ["vllm"]  # the containers before the unknown one, then it raises
        assert reads == ["spec.template.spec.initContainers[0] of Deployment/serving/vllm"]


def test_a_containers_gpus_read_from_an_unknown_stay_unknown() -> None:
    pod = {"containers": [{"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": UNKNOWN}}}]}
    obj = _tracked(_deployment(pod))
    (container,) = obj.containers()
    for _ in range(2):
        with pytest.raises(UnknownInput, match=r"nvidia\.com/gpu of container 'vllm'"):
            container.gpu_limit()
        with pytest.raises(UnknownInput):
            obj.pods()[0].gpu_count()


@pytest.mark.parametrize(
    ("app", "init", "expected"),
    [
        ([2, 1], [], 3),
        ([2], [4, 1], 4),  # init containers run one at a time, before the app
        ([], [], 0),
        ([0], [0], 0),
        ([-2], [-1], -1),  # nonsense limits: max(sum(app), max(init)) as written
        ([-2], [], 0),  # no init container counts as 0
        ([1], ["500m"], 1),
    ],
)
def test_gpu_count_is_the_app_sum_or_the_largest_init_container(
    app: list[Any], init: list[Any], expected: int
) -> None:
    def container(name: str, gpus: Any) -> dict[str, Any]:
        return {"name": name, "resources": {"limits": {"nvidia.com/gpu": gpus}}}

    pod = {
        "containers": [container(f"a{i}", g) for i, g in enumerate(app)],
        "initContainers": [container(f"i{i}", g) for i, g in enumerate(init)],
    }
    (spec,) = K8sObject(_deployment(pod)).pods()
    assert spec.gpu_count() == Fraction(expected)
    assert spec.gpu_count() is spec.gpu_count()


def test_a_serve_config_string_is_parsed_once_for_every_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """G001, the HTTP options and the structured view share one parse per distinct
    ``serveConfigV2`` (issue 35: G001 parsed it again for every RayService)."""
    from gpustrata_policies.evaluate import evaluate
    from gpustrata_policies.view import endpoints, vllm_args

    parsed: list[str] = []
    real = vllm_args.safe_load

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(vllm_args, "safe_load", counting)
    for cache in (
        vllm_args.serve_config_data,
        vllm_args._parse_serve_config,
        endpoints._http_options,
    ):
        cache.cache_clear()
    texts = [
        "http_options:\n  request_timeout_s: 30\napplications:\n- name: llm\n  route_prefix: /\n",
        "http_options:\n  port: 8001\napplications: []\n",
    ]
    objects = [
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": f"llm-{i}", "namespace": f"ns-{i}"},
            "spec": {
                "serveConfigV2": texts[i % 2],
                "rayClusterConfig": {
                    "headGroupSpec": {
                        "template": {
                            "spec": {"containers": [{"name": "head", "image": "rayproject/ray"}]}
                        }
                    }
                },
            },
        }
        for i in range(6)
    ]
    evaluate(objects)
    assert sorted(parsed) == sorted(texts)  # six objects, two strings: two parses
