"""The values a Flux ``HelmRelease`` gives its chart: ``spec.valuesFrom``, then
``spec.values``.

Flux's helm-controller (``helm.toolkit.fluxcd.io/v2``; fluxcd/helm-controller@04ab6f1a
docs/spec/v2/helmreleases.md "Values references", https://fluxcd.io/flux/components/helm/
helmreleases/#values-references; internal/chartutil/values.go
``ChartValuesFromReferences``) reads each ``spec.valuesFrom`` item in order:

* ``kind`` ``ConfigMap`` or ``Secret``, ``name`` in the HelmRelease's own namespace;
* ``valuesKey``: the ``data`` key holding a values file, ``values.yaml`` when omitted;
* ``optional: true``: a referent or key that does not exist is skipped, not an error;
* ``targetPath``: the key holds one flat value set at that path with Helm's ``--set``
  parser.

The files are merged in order, later keys over earlier, maps merged key by key (Helm's
``mergeMaps``, fluxcd/pkg runtime/transform ``MergeMaps``:
:func:`~gpustrata.core.helmmerge.merge_helm_values`), and ``spec.values`` last, over
them all.

gpustrata reads the ConfigMaps and Secrets among its inputs (manifests or ``--context``).
A referent that is not among them, a Secret encrypted with SOPS, a ``targetPath`` item
(Helm's ``--set`` grammar is not reproduced here): the release's values are unknown, and
:func:`release_values` raises :class:`UnknownInput` with the reason, which the rules report
as "not evaluated".
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from gpustrata.core.helmmerge import merge_helm_values
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.core.yamlio import safe_load
from gpustrata_policies.view.objects import K8sObject, as_list, as_map

__all__ = [
    "FLUX_VALUES_REFERENCES",
    "ValuesLayer",
    "ValuesSources",
    "release_values",
    "values_flag",
    "values_sources",
]

FLUX_VALUES_REFERENCES = "https://fluxcd.io/flux/components/helm/helmreleases/#values-references"
DEFAULT_VALUES_KEY = "values.yaml"
_KINDS = ("ConfigMap", "Secret")

ValuesSources = Mapping[tuple[str, str, str], K8sObject]
"""ConfigMaps and Secrets by (kind, namespace, name)."""


@dataclass(frozen=True, slots=True)
class ValuesLayer:
    """One values file of a release, where the release names it."""

    path: tuple[str | int, ...]
    """``("spec", "valuesFrom", 0)`` or ``("spec", "values")``, inside the HelmRelease."""
    values: Mapping[str, Any]
    source: str
    """``ConfigMap/gpu-operator/gpu-operator-values key values.yaml`` or ``spec.values``."""


def values_sources(objects: Iterable[K8sObject]) -> dict[tuple[str, str, str], K8sObject]:
    """The ConfigMaps and Secrets among *objects* (the first of a name wins, as kubectl
    applies a later duplicate over it only if it is the same object)."""
    found: dict[tuple[str, str, str], K8sObject] = {}
    for obj in objects:
        if obj.kind in _KINDS and obj.api_version == "v1":
            found.setdefault((obj.kind, obj.namespace, obj.name), obj)
    return found


def values_flag(value: Any, default: bool) -> bool:
    """A chart value read as Helm reads a boolean: ``true``/``false`` (or their strings);
    anything else (unset, a template) is *default*."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    return default


def _data(ref: K8sObject, key: str) -> str | None:
    """The text at *key* of a ConfigMap (``data``) or Secret (``stringData`` over base64
    ``data``, as the API server merges them); ``None`` when the key is absent."""
    if ref.kind == "ConfigMap":
        data = as_map(ref.raw.get("data"), f"data of {ref.resource}")
        value = data.get(key)
        if value is UNKNOWN:
            raise UnknownInput(f"data.{key} of {ref.resource}")
        return None if value is None else str(value)
    plain = as_map(ref.raw.get("stringData"), f"stringData of {ref.resource}")
    if key in plain:
        if plain[key] is UNKNOWN:
            raise UnknownInput(f"stringData.{key} of {ref.resource}")
        return str(plain[key])
    data = as_map(ref.raw.get("data"), f"data of {ref.resource}")
    value = data.get(key)
    if value is UNKNOWN:
        raise UnknownInput(f"data.{key} of {ref.resource}")
    if value is None:
        return None
    if "sops" in ref.raw:
        raise UnknownInput(
            f"data.{key} of {ref.resource}",
            f"the values come from {ref.resource}, whose data is encrypted with SOPS, so "
            "they are unknown; check the decrypted Secret",
        )
    try:
        return base64.b64decode(str(value), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise UnknownInput(
            f"data.{key} of {ref.resource}",
            f"data.{key} of {ref.resource} is not base64 UTF-8 text, so the values it holds "
            "are unknown",
        ) from None


def _reference(obj: K8sObject, index: int, item: Any, sources: ValuesSources) -> ValuesLayer | None:
    where = f"spec.valuesFrom[{index}] of {obj.resource}"
    if item is UNKNOWN:
        raise UnknownInput(where)
    ref = as_map(item, where)
    kind, name = ref.get("kind"), ref.get("name")
    key = ref.get("valuesKey") or DEFAULT_VALUES_KEY
    for value, field in ((kind, "kind"), (name, "name"), (key, "valuesKey")):
        if value is UNKNOWN:
            raise UnknownInput(f"{where}.{field}")
    if kind not in _KINDS or not isinstance(name, str) or not name:
        raise UnknownInput(
            where,
            f"{where} names {kind or '(no kind)'} {name or '(no name)'}: Flux reads only a "
            "ConfigMap or Secret by name, so the values are unknown",
        )
    optional = ref.get("optional") is True
    namespace = obj.namespace
    named = f"{kind} {namespace}/{name}"
    if ref.get("targetPath"):
        raise UnknownInput(
            where,
            f"{where} sets {named} ({key}) at targetPath {ref['targetPath']} with Helm's "
            "--set parser, which gpustrata does not reproduce, so the values are unknown",
        )
    found = sources.get((str(kind), namespace, name))
    if found is None:
        plural = "configmap" if kind == "ConfigMap" else "secret"
        skip = " (optional: Flux skips it where the cluster has none)" if optional else ""
        raise UnknownInput(
            where,
            f"the values come partly from {named}, key {key} ({where}{skip}), which is not "
            "among the inputs, so they are unknown; add it to the inputs or to --context "
            f"(kubectl get {plural} -n {namespace} {name} -o yaml)",
        )
    text = _data(found, str(key))
    if text is None:
        if optional:
            return None  # Flux skips an optional reference whose key is absent
        raise UnknownInput(
            where,
            f"{found.resource} has no data key {key} ({where}); Flux fails the release "
            "(chart values reference: key not found), so its values are unknown",
        )
    try:
        values = safe_load(text)
    except yaml.YAMLError:
        raise UnknownInput(
            where, f"{found.resource} key {key} is not readable YAML, so the values are unknown"
        ) from None
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise UnknownInput(
            where,
            f"{found.resource} key {key} holds no values map ({type(values).__name__}), so "
            "the values are unknown",
        )
    return ValuesLayer(("spec", "valuesFrom", index), values, f"{found.resource} key {key}")


def release_values(
    obj: K8sObject, sources: ValuesSources
) -> tuple[Mapping[str, Any], tuple[ValuesLayer, ...]]:
    """The values of the Flux HelmRelease *obj* (``spec.valuesFrom`` merged in order, then
    ``spec.values``) and the layers they came from, inline values last.

    Raises :class:`UnknownInput`, with the reason, when a referent is not among *sources*
    or cannot be read."""
    spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
    inline = as_map(spec.get("values"), f"spec.values of {obj.resource}")
    refs = as_list(spec.get("valuesFrom"), f"spec.valuesFrom of {obj.resource}")
    layers = [
        layer
        for index, item in enumerate(refs)
        if (layer := _reference(obj, index, item, sources)) is not None
    ]
    layers.append(ValuesLayer(("spec", "values"), inline, "spec.values"))
    if len(layers) == 1:
        return inline, tuple(layers)
    merged: Mapping[str, Any] = {}
    for layer in layers:
        merged = merge_helm_values(merged, layer.values)
    return merged, tuple(layers)
