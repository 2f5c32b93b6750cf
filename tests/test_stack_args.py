"""InferenceStack's ``stack`` input is typed in the component schema from the spec (issue 16).

The TypedDicts of ``gpustrata.components.stack_args`` are generated from the pydantic
spec (``python -m gpustrata.cli.codegen``); Pulumi's analyzer reads them into the schema.
These tests check that the file is current, that the schema has every field and closed
set of the spec's JSON Schema (``gpustrata schema``), and that a YAML program's inputs are
checked against the schema: the Pulumi schema is turned into JSON Schema and the YAML
program of docs/howto/other-languages.md validated with ``jsonschema``, then mapped the
way the provider maps a ``Construct`` request and validated by the spec.
"""

from __future__ import annotations

import copy
import json
import re
import typing
from typing import Any

import jsonschema
import pulumi
import pytest
import yaml
from _stacks import ROOT
from pulumi.provider.experimental.util import camel_case

from gpustrata.cli.codegen import TARGET, generate, stack_args_sources
from gpustrata.runtime.provider import provider, schema
from gpustrata.spec.loader import validate_stack
from gpustrata.spec.stack import StackSpec

PACKAGE = schema()
TYPES: dict[str, Any] = PACKAGE["types"]
INFERENCE = PACKAGE["resources"]["gpustrata:index:InferenceStack"]


def _token(ref: str) -> str:
    return ref.removeprefix("#/types/")


def test_generated_module_is_current() -> None:
    assert generate(check=True) is False, "run python -m gpustrata.cli.codegen"
    # A pure function of the spec: the same text twice.
    assert stack_args_sources() == stack_args_sources()


def test_no_generated_module_is_over_800_lines() -> None:
    """The generator splits the package by spec module (issue 32)."""
    sizes = {p.name: text.count("\n") for p, text in stack_args_sources().items()}
    assert set(sizes) >= {"__init__.py", "enums.py", "stack.py"}
    assert all(p.parent == TARGET for p in stack_args_sources())
    assert max(sizes.values()) <= 800, sizes


# ----------------------------------------------------------- the spec's JSON Schema


def _json_kind(prop: dict[str, Any]) -> tuple[Any, ...]:
    """What a JSON Schema property is, in the terms a Pulumi schema can say."""
    options = [p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"]
    if len(options) != 1:
        return ("any",)  # a union (str | int ...): the spec validates it
    (prop,) = options
    if "$ref" in prop:
        return ("object", prop["$ref"].rsplit("/", 1)[-1])
    if "enum" in prop or "const" in prop:
        return ("enum", tuple(prop.get("enum", [prop.get("const")])))
    if prop["type"] == "array":
        return ("array", _json_kind(prop["items"]))
    if prop["type"] == "object":
        return ("map", _json_kind(prop.get("additionalProperties", {"anyOf": [{}, {}]})))
    return (prop["type"],)


def _pulumi_kind(prop: dict[str, Any]) -> tuple[Any, ...]:
    ref = prop.get("$ref")
    if ref == "pulumi.json#/Any":
        return ("any",)
    if ref:
        typ = TYPES[_token(ref)]
        if "enum" in typ:
            return ("enum", tuple(e["value"] for e in typ["enum"]))
        return ("object", _token(ref))
    if prop["type"] == "array":
        return ("array", _pulumi_kind(prop["items"]))
    if prop["type"] == "object":
        return ("map", _pulumi_kind(prop["additionalProperties"]))
    return (prop["type"],)


def _same(want: tuple[Any, ...], got: tuple[Any, ...], tokens: dict[str, str]) -> bool:
    """Equal kinds; a JSON Schema model matches the Pulumi type it first met (noted)."""
    if want[0] != got[0]:
        return False
    if want[0] == "object":
        return tokens.setdefault(want[1], got[1]) == got[1]
    if want[0] in ("array", "map"):
        return _same(want[1], got[1], tokens)
    return want == got


def test_the_schema_has_every_field_and_enum_of_the_spec() -> None:
    spec = StackSpec.model_json_schema()
    tokens = {"StackSpec": _token(INFERENCE["inputProperties"]["stack"]["$ref"])}
    done: set[str] = set()
    fields = 0
    while len(done) < len(tokens):
        model = next(m for m in tokens if m not in done)
        done.add(model)
        json_model = spec if model == "StackSpec" else spec["$defs"][model]
        typ = TYPES[tokens[model]]
        assert typ["description"], model
        expected = {camel_case(k): v for k, v in json_model["properties"].items()}
        assert set(typ["properties"]) == set(expected), model
        required = {camel_case(k) for k in json_model.get("required", [])}
        assert set(typ.get("required", [])) == required, model
        for name, prop in expected.items():
            mine = typ["properties"][name]
            assert mine.get("description"), f"{model}.{name}"
            want, got = _json_kind(prop), _pulumi_kind(mine)
            assert _same(want, got, tokens), f"{model}.{name}: {want} vs {got}"
            fields += 1
    assert set(tokens) == {"StackSpec", *spec["$defs"]}  # every model of the spec
    assert fields > 100


# ------------------------------------------------ a YAML program against the schema


def _to_json_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """A Pulumi schema property as JSON Schema (types as ``$defs``)."""
    ref = prop.get("$ref")
    if ref == "pulumi.json#/Any":
        return {}
    if ref:
        return {"$ref": f"#/$defs/{_token(ref)}"}
    if prop["type"] == "array":
        return {"type": "array", "items": _to_json_schema(prop["items"])}
    if prop["type"] == "object":
        return {
            "type": "object",
            "additionalProperties": _to_json_schema(
                prop.get("additionalProperties", {"$ref": "pulumi.json#/Any"})
            ),
        }
    return {"type": prop["type"]}


def _type_to_json_schema(typ: dict[str, Any]) -> dict[str, Any]:
    if "enum" in typ:
        return {"type": typ["type"], "enum": [e["value"] for e in typ["enum"]]}
    return {
        "type": "object",
        "properties": {k: _to_json_schema(v) for k, v in typ["properties"].items()},
        "required": typ.get("required", []),
        # Pulumi YAML and the generated SDKs know only the schema's properties (the
        # provider drops others): an unknown key is an error.
        "additionalProperties": False,
    }


def _inputs_schema(resource: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: _to_json_schema(v) for k, v in resource["inputProperties"].items()},
        "required": resource.get("requiredInputs", []),
        "additionalProperties": False,
        "$defs": {token: _type_to_json_schema(t) for token, t in TYPES.items()},
    }


def _yaml_program() -> dict[str, Any]:
    page = (ROOT / "docs" / "howto" / "other-languages.md").read_text(encoding="utf-8")
    (block,) = [
        b
        for b in re.findall(r"```yaml\n(.*?)```", page, re.S)
        if "gpustrata:index:InferenceStack" in b
    ]
    program: dict[str, Any] = yaml.safe_load(block)
    return program


def _errors(properties: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(_inputs_schema(INFERENCE))
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(properties)
    ]


def test_the_yaml_program_matches_the_component_schema() -> None:
    properties = _yaml_program()["resources"]["llm"]["properties"]
    assert _errors(properties) == []


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("nodePools", 0, "capacityType"), "SPOTT", "'SPOTT' is not one of ['ON_DEMAND', 'SPOT']"),
        (("environment",), "production", "'production' is not one of ['dev', 'staging', 'prod']"),
        (("models", 0, "engine", "blockSize"), 12, "12 is not one of [1, 8, 16"),
        (("models", 0, "replicas"), "2", "'2' is not of type 'integer'"),
    ],
)
def test_a_wrong_value_is_rejected_by_the_schema(
    path: tuple[Any, ...], value: Any, message: str
) -> None:
    properties = copy.deepcopy(_yaml_program()["resources"]["llm"]["properties"])
    at = properties["stack"]
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    errors = _errors(properties)
    where = ".".join(map(str, ("stack", *path)))
    assert any(e.startswith(f"{where}: {message}") for e in errors), errors


def test_a_stack_file_spelling_is_rejected_by_the_schema() -> None:
    properties = copy.deepcopy(_yaml_program()["resources"]["llm"]["properties"])
    properties["stack"]["node_pools"] = properties["stack"].pop("nodePools")
    errors = _errors(properties)
    assert "stack: 'nodePools' is a required property" in errors, errors
    assert any("'node_pools' was unexpected" in e for e in errors), errors


def test_the_provider_maps_the_yaml_program_to_a_valid_stack() -> None:
    properties = _yaml_program()["resources"]["llm"]["properties"]
    args = provider().component_args("InferenceStack", properties)
    document = json.loads(json.dumps(args["stack"]))  # the generated enums are str/int
    spec = validate_stack(document, file="other-languages.md")
    assert spec.node_pools[0].capacity_type == "SPOT"
    assert spec.cluster.kubernetes_version == "1.34"
    assert spec.models[0].engine.max_model_len == 8192
    bad = copy.deepcopy(properties)
    bad["stack"]["nodePools"][0]["capacityType"] = "SPOTT"
    with pytest.raises(pulumi.InputPropertyError) as caught:
        provider().component_args("InferenceStack", bad)
    assert caught.value.property_path == "stack.nodePools[0].capacityType"


def test_the_package_exports_every_typed_dict_and_enum() -> None:
    """``gpustrata.components.stack_args`` is the import path users know: every generated
    TypedDict and enum is there, and nothing else (no typing helper, no private alias)."""
    import enum

    import gpustrata.components.stack_args as package

    modules = {p.stem for p in TARGET.glob("*.py")} - {"__init__"}
    public = {n for n in vars(package) if not n.startswith("_")} - modules
    assert {"StackArgs", "StackClusterArgs", "StackModelArgs", "ClusterMode"} <= public
    for name in public:
        value = getattr(package, name)
        assert issubclass(value, enum.Enum) or typing.is_typeddict(value), name
    generated = re.findall(r"^class (\w+)\(", "".join(stack_args_sources().values()), re.M)
    assert public == set(generated)
