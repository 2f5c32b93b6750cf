"""One policy config file, Pulumi's policy-pack-config format, drives `gpustrata check
--config` and the CrossGuard pack (as `--policy-pack-config` hands it to the pack); the
former spellings still work and are reported as deprecated."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _grpc import policy_pack
from conftest import REPO, fixture
from test_cli import run

grpc = pytest.importorskip("grpc")
from google.protobuf import struct_pb2  # noqa: E402
from pulumi.runtime.proto import analyzer_pb2  # noqa: E402

from gpustrata_policies.inputs.manifests import load_paths  # noqa: E402

CONFIG = {
    "shm-for-multi-gpu": {"enforcementLevel": "mandatory", "minShmSize": "4Gi"},
    "pinned-images": "disabled",
}
SHM = fixture("K007", "good-memory-shm.yaml")  # 2Gi of /dev/shm: passes the default 1Gi


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Any]:
    with policy_pack(REPO, {**os.environ, "GPUSTRATA_ENVIRONMENT": "dev"}) as stub:
        yield stub


def _engine_request(config: dict[str, Any]) -> Any:
    """What the engine sends for a --policy-pack-config file (parsePolicyPackConfig:
    a string is an enforcement level, a mapping holds enforcementLevel and properties)."""
    levels = {
        "mandatory": analyzer_pb2.MANDATORY,
        "advisory": analyzer_pb2.ADVISORY,
        "disabled": analyzer_pb2.DISABLED,
    }
    out = {}
    for name, value in config.items():
        value = {"enforcementLevel": value} if isinstance(value, str) else dict(value)
        level = levels[value.pop("enforcementLevel", "advisory")]
        props = struct_pb2.Struct()
        props.update(value)
        out[name] = analyzer_pb2.PolicyConfig(enforcementLevel=level, properties=props)
    return analyzer_pb2.ConfigureAnalyzerRequest(policyConfig=out)


def _as_stack(analyzer: Any, request: Any) -> list[Any]:
    """Diagnostics of one resource analysed as a stack: K007 is stack-scoped (it reads the
    KubeRay operator's release), so the pack reports it from AnalyzeStack."""
    resource = analyzer_pb2.AnalyzerResource(
        type=request.type, properties=request.properties, urn=request.urn, name=request.name
    )
    stack = analyzer_pb2.AnalyzeStackRequest(resources=[resource])
    return list(analyzer.AnalyzeStack(stack).diagnostics)


def test_one_file_drives_check_and_the_pack(tmp_path: Path, analyzer: Any) -> None:
    path = tmp_path / "policy-dev.json"
    path.write_text(json.dumps(CONFIG))
    code, out, err = run(["check", "--environment", "dev", "--config", str(path), str(SHM)])
    assert code == 1, out + err
    assert "K007" in out and "at least 4Gi" in out
    assert "deprecated" not in err

    obj = load_paths([str(SHM)])[0].raw
    props = struct_pb2.Struct()
    props.update(dict(obj))
    token = "kubernetes:apps/v1:StatefulSet"
    request = analyzer_pb2.AnalyzeRequest(
        type=token, properties=props, urn=f"urn:pulumi:dev::p::{token}::s", name="s"
    )
    analyzer.Configure(_engine_request(json.loads(path.read_text())))
    try:
        diags = _as_stack(analyzer, request)
    finally:
        analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))
    assert [d.policyName for d in diags] == ["shm-for-multi-gpu"]
    assert (
        diags[0].enforcementLevel == analyzer_pb2.MANDATORY and "at least 4Gi" in diags[0].message
    )


def test_all_sets_every_level_and_yaml_works(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("all: disabled\n")
    bad = str(fixture("K013", "bad-latest-and-untagged.yaml"))
    assert run(["check", "--environment", "dev", "--config", str(path), bad])[1].count("K013") == 0
    path.write_text("all: disabled\npinned-images: {enforcementLevel: mandatory}\n")
    assert run(["check", "--environment", "dev", "--config", str(path), bad])[0] == 1


def test_former_spellings_work_and_are_reported(tmp_path: Path) -> None:
    bad = str(fixture("K013", "bad-latest-and-untagged.yaml"))
    path = tmp_path / "policy.yaml"
    path.write_text("rules:\n  pinned-images: {staging: {enforcement: mandatory}}\n")
    code, _, err = run(["check", "--config", str(path), "--environment", "staging", bad])
    assert code == 1 and "former gpustrata layout" in err and "deprecated" in err

    path.write_text("K007: {enforcement: mandatory, min_shm_size: 4Gi}\n")
    code, out, err = run(["check", "--environment", "dev", "--config", str(path), str(SHM)])
    assert code == 1 and "at least 4Gi" in out
    for note in (
        "rule ids as keys are deprecated; use the name shm-for-multi-gpu",
        "K007.enforcement is deprecated; use enforcementLevel",
        "K007.min_shm_size is deprecated; use minShmSize",
    ):
        assert note in err


def test_errors_name_the_key(tmp_path: Path) -> None:
    bad = str(fixture("K013", "bad-latest-and-untagged.yaml"))
    path = tmp_path / "policy.json"
    for text, named in (
        ('{"pinned-images": {"minShmSize": "1Gi"}}', "pinned-images.minShmSize"),
        ('{"no-such-policy": "advisory"}', "no-such-policy"),
        ('{"pinned-images": "sometimes"}', "pinned-images"),
        ('{"pinned-images": {"environment": "qa"}}', "pinned-images.environment"),
    ):
        path.write_text(text)
        code, _, err = run(["check", "--config", str(path), bad])
        assert code == 2 and named in err and "Traceback" not in err, (text, err)


def test_pack_reads_snake_case_properties_still(analyzer: Any) -> None:
    obj = load_paths([str(SHM)])[0].raw
    props = struct_pb2.Struct()
    props.update(dict(obj))
    token = "kubernetes:apps/v1:StatefulSet"
    request = analyzer_pb2.AnalyzeRequest(
        type=token, properties=props, urn=f"urn:pulumi:dev::p::{token}::s", name="s"
    )
    analyzer.Configure(_engine_request({"shm-for-multi-gpu": {"min_shm_size": "4Gi"}}))
    try:
        diags = _as_stack(analyzer, request)
    finally:
        analyzer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={}))
    assert [d.policyName for d in diags] == ["shm-for-multi-gpu"]
