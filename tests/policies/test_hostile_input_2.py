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
    ({"concurrency-within-kv": {"typicalSequenceTokens": -5}}, "-5 is out of range", "0 to"),
    ({"no-such-policy": {}}, "no-such-policy: no policy with that name", "explain"),
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
