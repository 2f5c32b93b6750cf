"""The pack reads an AnalyzeStack request's Kubernetes resources key by key, sharing a
top-level property sent twice (pulumi_pack._read_resource): the object is the one reading
the whole properties gives, unknowns and secrets included."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2
from pulumi_policy.deserialize import SPECIAL_SECRET_SIG, SPECIAL_SIG_KEY, deserialize_properties

from gpustrata.core.unknown import PULUMI_UNKNOWN_SENTINELS, UNKNOWN
from gpustrata_policies.inputs.pulumi import object_from_pulumi
from gpustrata_policies.pulumi_pack import _read_resource

UNKNOWN_TEXT = next(iter(PULUMI_UNKNOWN_SENTINELS))


def _deployment(namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "vllm", "namespace": namespace, "labels": {"app": "vllm"}},
        "spec": {
            "replicas": 2.0,  # every number travels as a double
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": UNKNOWN_TEXT,  # computed during a preview
                            "env": [
                                {
                                    "name": "HF_TOKEN",
                                    "value": {SPECIAL_SIG_KEY: SPECIAL_SECRET_SIG, "value": "hf_x"},
                                }
                            ],
                            "resources": {"limits": {"nvidia.com/gpu": 1.0}},
                        }
                    ]
                }
            },
        },
    }


def _resource(token: str, name: str, props: dict[str, Any]) -> Any:
    struct = struct_pb2.Struct()
    struct.update(copy.deepcopy(props))
    return analyzer_pb2.AnalyzerResource(type=token, properties=struct, name=name, urn=name)


def _whole(res: Any) -> dict[str, Any] | None:
    props = deserialize_properties(json_format.MessageToDict(res.properties))
    return object_from_pulumi(res.type, res.name, props)


def test_key_by_key_reads_as_the_whole_and_shares_a_repeated_spec() -> None:
    token = "kubernetes:apps/v1:Deployment"
    resources = [_resource(token, f"r{i}", _deployment(f"team-{i}")) for i in range(3)]
    fields: dict[bytes, Any] = {}
    both = [_read_resource(r, fields) for r in resources]
    read = [raw for raw, _ in both]
    assert read == [_whole(r) for r in resources]
    # the image is unknown at preview: no object is plain (the evaluation tracks its reads)
    assert [plain for _, plain in both] == [False, False, False]
    first, second = read[0], read[1]
    assert first is not None and second is not None
    assert second["metadata"]["namespace"] == "team-1"
    assert first["spec"] is second["spec"]  # read once for both tenants
    assert first["metadata"]["labels"] is second["metadata"]["labels"]  # one level deeper
    container = first["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] is UNKNOWN
    assert first["spec"]["replicas"] == 2 and type(first["spec"]["replicas"]) is int


def test_other_resources_and_signed_properties_are_read_whole() -> None:
    pool = _resource(
        "gpustrata:index:GpuNodePool", "gpu", {"description": {"gpuModel": "h100-sxm-80gb"}}
    )
    signed = _resource(
        "kubernetes:core/v1:ConfigMap",
        "cm",
        {SPECIAL_SIG_KEY: SPECIAL_SECRET_SIG, "value": {"data": {"a": "b"}}},
    )
    secret_metadata = _resource(
        "kubernetes:core/v1:ConfigMap",
        "cm2",
        {"metadata": {SPECIAL_SIG_KEY: SPECIAL_SECRET_SIG, "value": {"name": "x"}}},
    )
    for res in (pool, signed):
        assert _read_resource(res, {}) == (_whole(res), False)
    # a secret metadata is read whole, not one level deeper
    assert _read_resource(secret_metadata, {}) == (_whole(secret_metadata), True)


def test_a_resource_without_unknowns_is_plain_and_one_with_is_not() -> None:
    token = "kubernetes:apps/v1:Deployment"
    known = _deployment("team-a")
    known["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.10.1"
    fields: dict[bytes, Any] = {}
    raw, plain = _read_resource(_resource(token, "a", known), fields)
    assert plain and raw == _whole(_resource(token, "a", known))
    # the same spec read again (shared), an unknown name in another tenant's metadata
    other = copy.deepcopy(known)
    other["metadata"]["name"] = UNKNOWN_TEXT
    raw, plain = _read_resource(_resource(token, "b", other), fields)
    assert not plain and raw is not None and raw["metadata"]["name"] is UNKNOWN


_PRELOAD_PROBE = """
import sys
from gpustrata_policies.view.catalogs import preload
preload()
loaded = set(sys.modules)
from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_paths
evaluate(load_paths([sys.argv[1]], None, []))
print(" ".join(sorted(m for m in set(sys.modules) - loaded if m.startswith("gpustrata."))))
"""


def test_the_pack_loads_at_start_every_catalogue_a_request_reads() -> None:
    # serve() preloads: the first AnalyzeStack imports no catalogue nor the capacity model
    rules = Path(__file__).resolve().parents[2] / "policies" / "gpustrata_policies" / "rules"
    found = subprocess.run(
        [sys.executable, "-c", _PRELOAD_PROBE, str(rules)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    ).stdout.split()
    assert not [m for m in found if m.startswith(("gpustrata.catalog.", "gpustrata.vllm."))]
