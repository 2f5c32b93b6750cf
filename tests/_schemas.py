"""Helpers for tests: the pinned CRD schemas of tests/schemas/ as validators that reject
unknown fields (the API server would prune them silently)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from _stacks import ROOT

SCHEMAS = ROOT / "tests" / "schemas"
KARPENTER_CRDS = SCHEMAS / "karpenter-v1.14.1"
LWS_CRDS = SCHEMAS / "lws-v0.10.0"


def strict(schema: Any) -> Any:
    """The CRD schema with unknown fields rejected (objects that list their properties)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_validators(*folders: Path) -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    """(apiVersion, kind) -> validator of every served version of the CRDs in *folders*."""
    crds = [
        yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        for folder in folders
        for path in sorted(folder.glob("*.yaml"))
    ]
    return validators_of(crds)


def validators_of(
    crds: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str], jsonschema.Draft7Validator]:
    """(apiVersion, kind) -> validator of every served version of *crds*."""
    out = {}
    for crd in crds:
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version["served"]:
                schema = strict(version["schema"]["openAPIV3Schema"])
                out[(f"{group}/{version['name']}", kind)] = jsonschema.Draft7Validator(schema)
    return out


def schema_errors(validator: jsonschema.Draft7Validator, obj: dict[str, Any]) -> list[str]:
    """Each error of *obj* as ``path: message``."""
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)
    ]
