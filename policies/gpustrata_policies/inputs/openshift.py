"""OpenShift ``Template`` documents: the objects ``oc process`` would create from them
(openshift/api template/v1/types.go), read by :mod:`~gpustrata_policies.inputs.manifests`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from gpustrata.core.unknown import UNKNOWN
from gpustrata.core.yamlguard import YamlShapeError
from gpustrata.core.yamlio import safe_load

__all__ = ["is_openshift_template", "substitute", "template_parameters"]


def is_openshift_template(data: Mapping[str, Any]) -> bool:
    """Is *data* an OpenShift ``Template`` (its ``objects`` are what ``oc process`` makes)?"""
    api = data.get("apiVersion")
    return (
        data.get("kind") == "Template"
        and api in {"template.openshift.io/v1", "v1"}
        and isinstance(data.get("objects"), list)
    )


_PARAMETER = re.compile(r"\$\{\{([A-Za-z0-9_]+)\}\}|\$\{([A-Za-z0-9_]+)\}")


def template_parameters(data: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenShift Template's parameters: the stated ``value``, else UNKNOWN (generated,
    or given at ``oc process`` time) (openshift/api template/v1/types.go ``Parameter``)."""
    out: dict[str, Any] = {}
    params = data.get("parameters")
    for param in params if isinstance(params, list) else []:
        if isinstance(param, Mapping) and isinstance(param.get("name"), str):
            value = param.get("value")
            stated = isinstance(value, str | int | float) and not isinstance(value, bool)
            out[param["name"]] = str(value) if stated and "generate" not in param else UNKNOWN
    return out


def substitute(value: Any, params: Mapping[str, Any]) -> Any:
    """``${NAME}`` in strings replaced by the parameter; ``${{NAME}}`` as a whole value by
    the parameter read as YAML (a number, a boolean); an unknown parameter makes the value
    UNKNOWN; a name that is no parameter stays as written, as ``oc process`` leaves it."""
    if isinstance(value, Mapping):
        return {k: substitute(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, params) for v in value]
    if not isinstance(value, str) or "${" not in value:
        return value
    whole = _PARAMETER.fullmatch(value)
    if whole and whole.group(1) in params:
        found = params[whole.group(1)]
        if found is UNKNOWN:
            return UNKNOWN
        try:
            return safe_load(found)
        except (yaml.YAMLError, YamlShapeError):
            return found
    unknown = False

    def sub(match: re.Match[str]) -> str:
        nonlocal unknown
        key = match.group(1) or match.group(2)
        if key not in params:
            return match.group(0)
        if params[key] is UNKNOWN:
            unknown = True
            return match.group(0)
        return str(params[key])

    text = _PARAMETER.sub(sub, value)
    return UNKNOWN if unknown else text
