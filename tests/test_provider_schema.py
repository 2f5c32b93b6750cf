"""The component provider plugin, started the way Pulumi's Python language host starts it.

`pulumi package add <repo>/components` makes the language host run the plugin directory
(`python components <engine address>`, pulumi-language-python RunPlugin: a directory with
`__main__.py` is run directly) from the consumer program's directory. The plugin prints
its port; the engine then calls GetSchema over gRPC and generates the consumer's SDK from
the answer. This test does the same with the protobuf stubs shipped in the `pulumi`
package, and checks that the schema types and describes every component.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest
import yaml
from _grpc import plugin_channel
from _stacks import ROOT

grpc = pytest.importorskip("grpc")
from google.protobuf import empty_pb2  # noqa: E402
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc  # noqa: E402

import gpustrata.components as components  # noqa: E402
from gpustrata import __version__  # noqa: E402
from gpustrata.runtime.provider import PACKAGE, schema  # noqa: E402

PLUGIN_DIR = ROOT / "components"
# The components issue 8 names; every other exported component is checked too.
NAMED = (
    "InferenceStack",
    "EksCluster",
    "GpuNodePool",
    "GpuOperator",
    "KubeRayOperator",
    "RayLlmService",
    "VllmDeployment",
)
PRIMITIVES = {"string", "integer", "number", "boolean", "array", "object"}


@pytest.fixture(scope="module")
def served_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """(GetPluginInfo answer, GetSchema text) from the running plugin."""
    consumer_dir = tmp_path_factory.mktemp("consumer")  # the language host's cwd
    # The engine address is only dialled for logging during Construct; a closed port will do.
    with plugin_channel(
        [sys.executable, str(PLUGIN_DIR), "127.0.0.1:1"],
        cwd=consumer_dir,
        no_port="plugin printed no port",
        timeout=30,
    ) as channel:
        stub = provider_pb2_grpc.ResourceProviderStub(channel)
        info = stub.GetPluginInfo(empty_pb2.Empty())
        answer = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0))
    yield info, answer.schema


@pytest.fixture(scope="module")
def package(served_schema: tuple[Any, str]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(served_schema[1])
    return loaded


def test_plugin_manifest_is_a_python_source_plugin() -> None:
    manifest = yaml.safe_load((PLUGIN_DIR / "PulumiPlugin.yaml").read_text(encoding="utf-8"))
    assert manifest == {"runtime": "python"}
    assert (PLUGIN_DIR / "__main__.py").is_file()
    # The language host pip-installs requirements.txt from the plugin directory.
    requirements = (PLUGIN_DIR / "requirements.txt").read_text(encoding="utf-8").split()
    assert "-e" in requirements and ".." in requirements
    assert (PLUGIN_DIR / ".." / "pyproject.toml").resolve() == ROOT / "pyproject.toml"


def test_plugin_info_and_package_identity(
    served_schema: tuple[Any, str], package: dict[str, Any]
) -> None:
    info, _ = served_schema
    assert info.version == __version__
    assert package["name"] == PACKAGE == "gpustrata"
    assert package["version"] == __version__


def test_served_schema_is_the_in_process_schema(package: dict[str, Any]) -> None:
    # Computed in a fresh interpreter, as the plugin does: Pulumi's component analyzer
    # keeps state across analyses in one process (after other tests have analysed
    # components, an enum-typed property can come back without its description).
    import subprocess

    code = "import json; from gpustrata.runtime.provider import schema; print(json.dumps(schema()))"
    fresh = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert package == json.loads(fresh.stdout)
    assert package["types"].keys() == schema()["types"].keys()


def test_every_component_is_in_the_schema(package: dict[str, Any]) -> None:
    resources = package["resources"]
    exported = {
        name
        for name in components.__all__
        if isinstance(getattr(components, name), type)
        and issubclass(getattr(components, name), pulumi.ComponentResource)
    }
    assert set(NAMED) <= exported
    expected = {f"{PACKAGE}:index:{name}" for name in exported}
    assert set(resources) == expected
    for token, resource in resources.items():
        assert resource["isComponent"] is True, token
        assert resource.get("description", "").strip(), f"{token}: no description"


def _check_property(where: str, prop: dict[str, Any], types: dict[str, Any]) -> None:
    assert prop.get("description", "").strip(), f"{where}: no description"
    ref = prop.get("$ref")
    if ref is not None:
        if ref.startswith("#/types/"):
            assert ref[len("#/types/") :] in types, f"{where}: dangling {ref}"
        elif "#/resources/pulumi:providers:kubernetes" in ref:
            # A resource output of another package (InferenceStack.provider), as
            # pulumi-eks exposes its Kubernetes provider.
            assert ref.startswith("/kubernetes/v"), f"{where}: unexpected {ref}"
        else:
            assert ref == "pulumi.json#/Any", f"{where}: unexpected {ref}"
        return
    assert prop.get("type") in PRIMITIVES, f"{where}: untyped {prop}"
    if prop["type"] == "array":
        _check_property(f"{where}[]", prop["items"], types)
    if prop["type"] == "object":
        _check_property(f"{where}{{}}", prop["additionalProperties"], types)


def test_inputs_and_outputs_are_typed_and_described(package: dict[str, Any]) -> None:
    types = package.get("types", {})
    for token, resource in package["resources"].items():
        inputs = resource["inputProperties"]
        outputs = resource["properties"]
        assert inputs, f"{token}: no inputs"
        assert outputs, f"{token}: no outputs"
        assert set(resource.get("requiredInputs", [])) <= set(inputs)
        assert set(resource.get("required", [])) <= set(outputs)
        for name, prop in inputs.items():
            _check_property(f"{token} input {name}", prop, types)
        for name, prop in outputs.items():
            _check_property(f"{token} output {name}", prop, types)
    for token, typ in types.items():
        assert typ.get("description", "").strip(), f"{token}: no description"
        if "enum" in typ:  # a closed set of the spec (ClusterMode, BlockSize ...)
            assert typ["type"] in {"string", "integer"} and typ["enum"], token
            assert all(isinstance(e["value"], str | int) for e in typ["enum"]), token
            continue
        assert typ["type"] == "object" and typ["properties"], token
        for name, prop in typ["properties"].items():
            _check_property(f"{token}.{name}", prop, types)


def test_typed_spot_checks(package: dict[str, Any]) -> None:
    """A few inputs whose schema type a TypeScript / Go / YAML user relies on."""
    res = package["resources"]
    pool = res["gpustrata:index:GpuNodePool"]["inputProperties"]
    assert pool["minSize"]["type"] == "integer"
    assert pool["create"]["type"] == "boolean"
    assert pool["taints"]["type"] == "array"
    taint_ref = pool["taints"]["items"]["$ref"]
    assert set(package["types"][taint_ref[len("#/types/") :]]["properties"]) == {
        "key",
        "value",
        "effect",
    }
    inference = res["gpustrata:index:InferenceStack"]
    assert inference["requiredInputs"] == ["stack"]
    # The stack is an object type with the spec's properties (issue 16), not map<Any>.
    stack_ref = inference["inputProperties"]["stack"]["$ref"]
    stack = package["types"][stack_ref[len("#/types/") :]]
    assert stack["type"] == "object"
    assert {"environment", "cluster", "nodePools", "gpuOperator", "models"} <= set(
        stack["properties"]
    )
    assert res["gpustrata:index:EksCluster"]["properties"]["kubeconfig"]["type"] == "string"


def test_workload_names_and_namespaces_take_inputs(package: dict[str, Any]) -> None:
    """Another resource's Output may name a workload or its namespace in every language."""
    res = package["resources"]
    for component in ("VllmDeployment", "RayLlmService"):
        inputs = res[f"gpustrata:index:{component}"]["inputProperties"]
        for name in ("name", "namespace"):
            assert inputs[name]["type"] == "string", (component, name)
            assert "plain" not in inputs[name], (component, name)
    for component in ("GpuOperator", "KubeRayOperator"):
        assert "plain" not in res[f"gpustrata:index:{component}"]["inputProperties"]["namespace"]


def test_inference_stack_outputs_and_secret_kubeconfig(package: dict[str, Any]) -> None:
    """The outputs a user composes with (issue 16 item 3), kubeconfig marked secret."""
    outputs = package["resources"]["gpustrata:index:InferenceStack"]["properties"]
    assert outputs["provider"]["$ref"].endswith("#/resources/pulumi:providers:kubernetes")
    assert outputs["clusterName"]["type"] == "string"
    for name in ("serviceNames", "endpoints", "nodeGroupNames"):
        assert outputs[name]["type"] == "object", name
        assert outputs[name]["additionalProperties"]["type"] == "string", name
    assert outputs["kubeconfig"]["secret"] is True
    secret = {
        f"{token}.{name}"
        for token, resource in package["resources"].items()
        for name, prop in resource["properties"].items()
        if prop.get("secret")
    }
    assert secret == {"gpustrata:index:InferenceStack.kubeconfig"}


def test_schema_summary(package: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Print the components with their inputs (shown with `pytest -s` or -rA)."""
    lines = []
    for token, resource in package["resources"].items():
        lines.append(
            f"{token}: inputs {', '.join(resource['inputProperties'])}; "
            f"outputs {', '.join(resource['properties'])}"
        )
    print("\n".join(lines))
    assert len(lines) >= len(NAMED)
