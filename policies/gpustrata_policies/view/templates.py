"""Pod templates read out of an object: a template at a path, a RayCluster's groups,
and the strategic merge that controllers apply to templates assembled from parts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.view.objects import K8sObject, Path, PodRef, as_list, as_map, dig

__all__ = ["strategic_merge"]


def _template(obj: K8sObject, path: Path, role: str = "", **kw: Any) -> Iterator[PodRef]:
    yield from _template_at(obj, dig(obj.raw, *path), path, role, **kw)


def _template_at(
    obj: K8sObject, template: Any, path: Path, role: str = "", **kw: Any
) -> Iterator[PodRef]:
    """The pod *template* found (or, for a kind whose template is assembled from parts,
    merged) at *path*, as a :class:`PodRef` of its ``spec``."""
    if template is UNKNOWN:
        raise UnknownInput(f"{'.'.join(map(str, path))} of {obj.resource}")
    if not isinstance(template, Mapping):
        return
    spec = template.get("spec")
    if spec is UNKNOWN:
        raise UnknownInput(f"{'.'.join(map(str, path))}.spec of {obj.resource}")
    if isinstance(spec, Mapping):
        labels = as_map(dig(template, "metadata", "labels"), "template labels")
        yield PodRef(obj, (*path, "spec"), spec, role, labels, **kw)


def _ray_cluster(obj: K8sObject, base: Path) -> Iterator[PodRef]:
    head = dig(obj.raw, *base, "headGroupSpec")
    if isinstance(head, Mapping):
        yield from _template(obj, (*base, "headGroupSpec", "template"), "head", ray_group=head)
    groups = as_list(dig(obj.raw, *base, "workerGroupSpecs"), "workerGroupSpecs")
    for index, group in enumerate(groups):
        if isinstance(group, Mapping):
            name = group.get("groupName", index)
            yield from _template(
                obj,
                (*base, "workerGroupSpecs", index, "template"),
                f"worker group '{name}'",
                ray_group=group,
                replicas=group.get("replicas"),
            )


def strategic_merge(base: Any, patch: Any) -> Any:
    """*patch* merged into *base* as a Kubernetes strategic merge patch does for pod
    templates: mappings key by key, lists of named mappings (containers, volumes, env) item
    by ``name``, other values replaced."""
    if isinstance(base, Mapping) and isinstance(patch, Mapping):
        out = dict(base)
        for key, value in patch.items():
            out[key] = strategic_merge(base[key], value) if key in base else value
        return out
    if isinstance(base, list) and isinstance(patch, list) and _named(base) and _named(patch):
        merged = list(base)
        index = {item["name"]: i for i, item in enumerate(merged)}
        for item in patch:
            at = index.get(item["name"])
            if at is None:
                merged.append(item)
            else:
                merged[at] = strategic_merge(merged[at], item)
        return merged
    return patch


def _named(items: list[Any]) -> bool:
    return bool(items) and all(
        isinstance(i, Mapping) and isinstance(i.get("name"), str) for i in items
    )
