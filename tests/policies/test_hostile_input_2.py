"""Issue 33 (hostile input, second round): the pack and ``check`` on values at the edges.

Each test failed before its fix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _grpc import policy_pack
from conftest import REPO
from test_cli import run
from test_manifest_input import GPU_POD

from gpustrata.core.errors import InputError
from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_text

O008 = REPO / "policies/gpustrata_policies/rules/o008_one_gpu_allocator"


def _internal_errors(report: object) -> list[str]:
    return [f"{f.rule}: {f.message}" for f in report.findings if "internal error" in f.message]  # type: ignore[attr-defined]


# --- item 4: O008 on kubernetesVersion: latest ------------------------------------------


def test_o008_reads_an_unreadable_kubernetes_version_as_not_evaluated() -> None:
    text = (O008 / "bad-device-plugin-and-dra.yaml").read_text(encoding="utf-8")
    text = text.replace('kubernetesVersion: "1.33"', "kubernetesVersion: latest")
    report = evaluate(load_text(text, "o008.yaml"))
    assert _internal_errors(report) == []
    o008 = [f for f in report.findings if f.rule == "O008"]
    assert not any("serves from 1.34" in f.message for f in o008)
    reasons = [r.reason for r in report.not_evaluated if r.rule == "O008"]
    assert any("'latest' is not a release number" in r for r in reasons), reasons
    # O001 says the same of it.
    assert any(r.rule == "O001" and "'latest'" in r.reason for r in report.not_evaluated)


def test_o008_still_reports_an_old_cluster_beside_an_unreadable_one(tmp_path: Path) -> None:
    text = (O008 / "bad-device-plugin-and-dra.yaml").read_text(encoding="utf-8")
    text = text.replace('kubernetesVersion: "1.33"', "kubernetesVersion: latest", 1)
    report = evaluate(load_text(text, "o008.yaml"))
    assert any(f.rule == "O008" and "serves from 1.34" in f.message for f in report.findings)


# --- item 6: a template action inside a string value is text --------------------------

_CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: llm
data:
  {key}: {value}
"""


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        ('"{{ .Release.Name }}-cfg"', "greeting", "hi"),
        ("cfg-{{ .Release.Name }}", "greeting", "hi"),
        ("cfg", "greeting", "'release {{ .Release.Name }} in {{ .Release.Namespace }}'"),
        ("cfg", '"{{ .Values.key }}"', "hi"),
    ],
)
def test_template_text_inside_a_string_value_is_read(name: str, key: str, value: str) -> None:
    text = _CONFIGMAP.format(name=name, key=key, value=value)
    objects = load_text(text, "cm.yaml")
    as_json = load_text(json.dumps(yaml.safe_load(text)), "cm.json")
    assert [o.raw for o in objects] == [o.raw for o in as_json]


@pytest.mark.parametrize(
    "line",
    [
        "  name: {{ .Release.Name }}",
        '  name: {{ include "chart.fullname" . }}',
        "{{- if .Values.enabled }}",
        "  labels:\n    - {{ .Values.label }}",
        "  '{{ .Values.key }}': {{ .Values.value }}",
    ],
)
def test_template_actions_outside_scalars_are_still_refused(line: str) -> None:
    text = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n{line}\n"
    with pytest.raises(InputError, match="an unrendered Helm template"):
        load_text(text, "t.yaml")


# --- item 9: policy config that switches a rule off is refused at load, in both adapters --

BAD_CONFIGS = [
    ({"shm-for-multi-gpu": {"minShmSize": "4GB"}}, "shm-for-multi-gpu.minShmSize: '4GB'", "4Gi"),
    ({"shm-for-multi-gpu": {"minShmSize": float("inf")}}, "minShmSize: .inf", "4Gi"),
    ({"shm-for-multi-gpu": {"minShmSize": [1, 2]}}, "minShmSize: a list", "4Gi"),
    ({"shm-for-multi-gpu": {"minShmSize": "-4Gi"}}, "minShmSize: '-4Gi'", "positive"),
    ({"concurrency-within-kv": {"typicalSequenceTokens": -5}}, "-5 is out of range", "1 to"),
    ({"no-such-policy": {}}, "no-such-policy: no policy with that name", "explain"),
    ({"shm-for-multi-gpu": {"minShmSize": "4Gi\n\x1b[2J"}}, "'4Gi\\n\\x1b[2J'", "4Gi"),
    ({"x" * 100_000: {}}, "xxx...: no policy", "explain"),
]


@pytest.mark.parametrize(("config", "says", "fix"), BAD_CONFIGS, ids=range(len(BAD_CONFIGS)))
def test_check_refuses_a_policy_config_a_rule_cannot_use(
    tmp_path: Path, config: dict[str, Any], says: str, fix: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    manifest = tmp_path / "ok.yaml"
    manifest.write_text(GPU_POD, encoding="utf-8")
    code, out, err = run(["check", "--config", str(path), str(manifest)])
    assert code == 2 and out == "", (code, out, err)
    assert err.count("\n") == 1 and says in err and fix in err and len(err) < 400, err


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Any]:
    pytest.importorskip("grpc")
    with policy_pack(REPO, {**os.environ, "GPUSTRATA_ENVIRONMENT": "prod"}) as stub:
        yield stub


@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_the_pack_refuses_a_bad_config_at_configure(analyzer: Any) -> None:
    import grpc
    from google.protobuf import struct_pb2
    from pulumi.runtime.proto import analyzer_pb2

    def configure(config: dict[str, Any]) -> None:
        request = analyzer_pb2.ConfigureAnalyzerRequest()
        for name, props in config.items():
            properties = struct_pb2.Struct()
            properties.update(props)
            request.policyConfig[name].CopyFrom(analyzer_pb2.PolicyConfig(properties=properties))
        analyzer.Configure(request)

    for config, says, fix in BAD_CONFIGS:
        with pytest.raises(grpc.RpcError) as caught:
            configure(config)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        details = caught.value.details()
        if says == "minShmSize: .inf":  # no JSON value: protobuf refuses to convert it
            says, fix = "shm-for-multi-gpu: a value that is no JSON number", "write a number"
        assert says in details and fix in details and len(details) < 400, details
    configure({"shm-for-multi-gpu": {"minShmSize": "4Gi"}, "pinned-images": {}})
    configure({})


# --- item 10: odd container args and pool sizes, and the two adapters agree ------------


@pytest.mark.parametrize("args", [5, True, "serve --tp 2", {"a": 1}])
def test_args_that_are_no_list_are_no_internal_error(args: object) -> None:
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.8.5",
        "command": ["vllm", "serve", "Qwen/Qwen2.5-1.5B-Instruct"],
        "args": args,
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    doc = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "llm"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }
    assert _internal_errors(evaluate(load_text(json.dumps(doc), "d.json"))) == []


R006 = REPO / "policies/gpustrata_policies/rules/r006_upgrade_capacity"


@pytest.mark.parametrize("max_size", [-1e308, -1, 1e308, 2.5, "1e400"])
def test_a_pool_size_that_is_no_count_reads_the_same_in_check_and_the_pack(
    max_size: object,
) -> None:
    from _grpc import resource_props, resource_token

    from gpustrata_policies import objects_from_pulumi

    (path,) = sorted(R006.glob("good-*.yaml"))[:1]
    raws = [dict(o.raw) for o in load_text(path.read_text(encoding="utf-8"), path.name)]
    raws = [
        {**r, "spec": {**r["spec"], "maxSize": max_size}} if r["kind"] == "GpuNodePool" else r
        for r in raws
    ]
    triples = [
        (resource_token(r), f"r{i}", resource_props(resource_token(r), r))
        for i, r in enumerate(raws)
    ]
    pack = evaluate(objects_from_pulumi(triples))
    check = evaluate(load_text(yaml.safe_dump_all(raws), "x.yaml"))
    for report in (pack, check):
        assert _internal_errors(report) == []
        assert not [f for f in report.findings if f.rule == "R006"]
        assert any(n.rule == "R006" and "no maxSize" in n.reason for n in report.not_evaluated)


def test_a_pool_size_through_the_grpc_pack_is_no_overflow(analyzer: Any) -> None:
    from _grpc import resource_props, resource_token, resource_urn, to_struct
    from pulumi.runtime.proto import analyzer_pb2

    analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))
    (path,) = sorted(R006.glob("good-*.yaml"))[:1]
    resources = []
    for i, obj in enumerate(load_text(path.read_text(encoding="utf-8"), path.name)):
        raw = dict(obj.raw)
        if raw["kind"] == "GpuNodePool":
            raw = {**raw, "spec": {**raw["spec"], "maxSize": -1e308}}
        token = resource_token(raw)
        resources.append(
            analyzer_pb2.AnalyzerResource(
                type=token,
                properties=to_struct(resource_props(token, raw)),
                urn=resource_urn(token, f"r{i}"),
                name=f"r{i}",
            )
        )
    stack = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources))
    messages = [d.message for d in stack.diagnostics]
    assert not any("internal error" in m or "Overflow" in m for m in messages), messages
    assert not any(m.startswith("[R006]") for m in messages), messages


# --- item 12: ceilings with clear errors; message fields capped --------------------------


def test_a_manifest_over_the_input_ceiling_is_refused_by_its_size(tmp_path: Path) -> None:
    from gpustrata_policies.inputs.manifests import MAX_INPUT_BYTES

    path = tmp_path / "big.json"
    with path.open("wb") as file:  # sparse: nothing written, nothing read
        file.truncate(MAX_INPUT_BYTES + 1)
    code, out, err = run(["check", str(path)])
    assert code == 2 and out == ""
    assert f"{path}: {MAX_INPUT_BYTES + 1:,} bytes, over the {MAX_INPUT_BYTES:,} bytes" in err
    assert err.count("\n") == 1 and "Split it" in err
    code, out, err = run(["check", "-"], stdin=b" " * (MAX_INPUT_BYTES + 1))
    assert code == 2 and "<stdin>: over the 67,108,864 bytes" in err, err


def test_a_huge_name_is_not_echoed_whole(tmp_path: Path) -> None:
    """A 10 MB object name: each finding's resource and message are cut."""
    from gpustrata_policies.evaluate import MAX_MESSAGE_CHARS, MAX_RESOURCE_CHARS

    name = "n" * 10_000_000
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "llm"},
        "spec": {
            "containers": [
                {
                    "name": name,
                    "image": "vllm/vllm-openai:latest",
                    "resources": {"requests": {"nvidia.com/gpu": 1}},
                }
            ]
        },
    }
    report = evaluate(load_text(json.dumps(doc), "big.json"))
    assert report.findings and report.not_evaluated
    for f in report.findings:
        assert len(f.resource) <= MAX_RESOURCE_CHARS and len(f.message) <= MAX_MESSAGE_CHARS
    for n in report.not_evaluated:
        assert len(n.resource) <= MAX_RESOURCE_CHARS and len(n.reason) <= MAX_MESSAGE_CHARS


# --- beyond the list: a policy config nested too deeply, or too large -------------------


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("deep.json", "[" * 100_000 + "]" * 100_000, "nested too deeply to read"),
        ("big.yaml", "a: " + "x" * (4 << 20), "over the 4,194,304 bytes"),
    ],
)
def test_a_policy_config_nested_too_deeply_or_too_large_is_one_line(
    tmp_path: Path, name: str, text: str, says: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    manifest = tmp_path / "ok.yaml"
    manifest.write_text(GPU_POD, encoding="utf-8")
    code, out, err = run(["check", "--config", str(path), str(manifest)])
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert str(path) in err and says in err, err
