"""Helm values merged as Helm merges them: the one place for every caller.

Helm 3 merges values on two code paths, which differ only in what a YAML ``null`` does
(helm/helm@v3.16.0):

* ``pkg/cli/values/options.go`` ``mergeMaps``: ``helm -f a.yaml -f b.yaml`` merges the
  user's files in order, a map key by key, anything else (lists, scalars, ``null``)
  replacing what was below. Flux's helm-controller merges ``spec.valuesFrom`` and
  ``spec.values`` the same way (fluxcd/pkg runtime/transform ``MergeMaps``). A ``null``
  survives this step: it is kept for the next one.
* ``pkg/chartutil/coalesce.go`` ``CoalesceValues`` / ``coalesceTablesFullKey`` (``merge``
  false): the user's values are coalesced over the chart's ``values.yaml`` at render
  time, and a ``null`` removes the key ("This allows Helm's various sources of values
  (value files or --set) to remove incompatible keys").

Callers: the Flux view (``gpustrata_policies.view.helm_values``) and the rendered
foundation values (``gpustrata.render.foundation``) follow ``mergeMaps``; the KubeAI chart
overlays (``gpustrata.catalog.kubeai``: ``values-gke.yaml`` over the chart's
``values.yaml``) follow ``coalesce.go``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["merge_helm_values"]


def merge_helm_values(
    base: Mapping[str, Any], over: Mapping[str, Any], *, null_removes: bool = False
) -> dict[str, Any]:
    """*over* merged into a copy of *base*: a map merges key by key, anything else in
    *over* replaces what is below it (both inputs are left unchanged).

    ``null_removes=False`` is Helm's ``mergeMaps`` (user values files merged in order: a
    ``null`` is kept as ``None``); ``null_removes=True`` is ``coalesce.go`` (values
    coalesced over a chart's defaults: a ``null`` removes the key, at any depth). Under
    ``coalesce.go`` a ``null`` over a key the chart lacks stays as nil, which templates
    read as unset; here that key is simply absent.
    """
    out = dict(base)
    for key, value in over.items():
        below = out.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            out[key] = merge_helm_values(below, value, null_removes=null_removes)
        elif value is None and null_removes:
            out.pop(key, None)
        else:
            out[key] = value
    return out
