"""Pulumi-free adapters: turn Pulumi resources (type token, name, inputs) into objects.

Used by ``gpustrata plan`` (resources registered under Pulumi's mocks) and by the
CrossGuard pack (``policies/__main__.py``). Nothing here imports Pulumi: inputs are
plain dicts, and Pulumi's unknown sentinels (or anything not JSON-like, such as an
unresolved Output) become :data:`~.unknown.UNKNOWN`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from gpustrata.core.contract import API_VERSION
from gpustrata.core.unknown import UNKNOWN, replace_pulumi_unknowns
from gpustrata_policies.view.pools import DERIVED_FROM

__all__ = [
    "node_group_to_pool",
    "object_from_pulumi",
    "objects_from_pulumi",
    "pod_identity_association",
]

NODE_GROUP_TOKEN = "aws:eks/nodeGroup:NodeGroup"
GPU_NODE_POOL_TOKEN = "gpustrata:index:GpuNodePool"
GPU_OPERATOR_TOKEN = "gpustrata:index:GpuOperator"
VLLM_DEPLOYMENT_TOKEN = "gpustrata:index:VllmDeployment"
RAY_LLM_SERVICE_TOKEN = "gpustrata:index:RayLlmService"
INFERENCE_ROUTE_TOKEN = "gpustrata:index:InferenceRoute"
DESCRIPTION_KINDS = {
    GPU_NODE_POOL_TOKEN: "GpuNodePool",
    # The InferencePool GAIE's inferencepool chart creates (its own apiVersion kept): G001
    # follows the route to it, G002 checks it against the engines.
    INFERENCE_ROUTE_TOKEN: "InferencePool",
    GPU_OPERATOR_TOKEN: "GpuOperator",
    VLLM_DEPLOYMENT_TOKEN: "ModelEndpoint",  # K021: the endpoint the component exports
    RAY_LLM_SERVICE_TOKEN: "ModelEndpoint",
}
POD_IDENTITY_TOKEN = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ADDON_TOKEN = "aws:eks/addon:Addon"
HELM_RELEASE_TOKENS = frozenset({"kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Release"})


def _api_version(token: str) -> str:
    # kubernetes:apps/v1:Deployment -> apps/v1; kubernetes:core/v1:Pod -> v1
    module = token.split(":")[1]
    return module[len("core/") :] if module.startswith("core/") else module


def _with_name(obj: dict[str, Any], logical_name: str) -> dict[str, Any]:
    """*obj* with a name: its own, else (Pulumi auto-naming) the logical name. A name
    unknown at preview stays unknown, so no rule matches by a guess (a NodePool's name a
    Pod selects); the object is shown by its logical name (``generateName``)."""
    meta = obj.get("metadata")
    if meta is UNKNOWN:  # every field unknown; shown by its logical name
        meta = dict.fromkeys(
            ("name", "namespace", "labels", "annotations", "ownerReferences"), UNKNOWN
        )
    meta = dict(meta) if isinstance(meta, Mapping) else {}
    if meta.get("name") is UNKNOWN:
        meta["generateName"] = logical_name
    elif not isinstance(meta.get("name"), str) or not meta.get("name"):
        meta["name"] = logical_name  # Pulumi auto-naming: the logical name is the stem
    obj["metadata"] = meta
    return obj


def _gpu_facts(instance_type: Any) -> tuple[str | None, int | None]:
    """GPU product label and count for an instance type from the hardware catalogue."""
    if not isinstance(instance_type, str):
        return None, None
    try:
        from gpustrata.catalog.hardware import load_hardware_catalog
    except ImportError:  # catalogue not installed: the pool carries no GPU facts
        return None, None
    try:
        catalog = load_hardware_catalog()
        instance = catalog.instance(instance_type)
        gpu = catalog.gpu(instance.gpu) if instance is not None else None
    except Exception:  # a broken catalogue must not break policy evaluation
        return None, None
    if instance is None:
        return None, None
    label = gpu.gfd_products[0] if gpu is not None and gpu.gfd_products else None
    return label, instance.gpu_count


def node_group_to_pool(name: str, props: Mapping[str, Any]) -> dict[str, Any]:
    """An ``aws:eks/nodeGroup:NodeGroup``'s inputs as a ``GpuNodePool`` object."""
    instance_types = props.get("instanceTypes")
    instance_type = (
        instance_types[0] if isinstance(instance_types, list) and instance_types else None
    )
    labels = props.get("labels") if isinstance(props.get("labels"), Mapping) else {}
    product, count = _gpu_facts(instance_type)
    if isinstance(labels, Mapping) and isinstance(labels.get("nvidia.com/gpu.product"), str):
        product = labels["nvidia.com/gpu.product"]
    scaling = props.get("scalingConfig") if isinstance(props.get("scalingConfig"), Mapping) else {}
    spec: dict[str, Any] = {
        "instanceType": instance_type,
        "labels": dict(labels) if isinstance(labels, Mapping) else labels,
        "taints": props.get("taints") or [],
        "minSize": scaling.get("minSize") if isinstance(scaling, Mapping) else None,
        "maxSize": scaling.get("maxSize") if isinstance(scaling, Mapping) else None,
    }
    if product:
        spec["gpuProduct"] = product
    if count is not None:
        spec["gpuCount"] = count
    for key, field in (("version", "kubernetesVersion"), ("amiType", "amiType")):
        if isinstance(props.get(key), str):
            spec[field] = props[key]
    if isinstance(props.get("diskSize"), int):
        spec["diskSizeGiB"] = props["diskSize"]
    group_name = props.get("nodeGroupName")
    return {
        "apiVersion": API_VERSION,
        "kind": "GpuNodePool",
        "metadata": {
            "name": group_name if isinstance(group_name, str) else name,
            "annotations": {DERIVED_FROM: NODE_GROUP_TOKEN},
        },
        "spec": spec,
    }


def pod_identity_association(name: str, props: Mapping[str, Any]) -> dict[str, Any]:
    """An ``aws:eks/podIdentityAssociation:PodIdentityAssociation``'s inputs as a
    ``PodIdentityAssociation`` object (rule K019 matches its namespace + serviceAccount)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "PodIdentityAssociation",
        "metadata": {"name": name, "annotations": {DERIVED_FROM: POD_IDENTITY_TOKEN}},
        "spec": {
            key: props.get(key) for key in ("clusterName", "namespace", "serviceAccount", "roleArn")
        },
    }


def addon_object(name: str, props: Mapping[str, Any]) -> dict[str, Any]:
    """An ``aws:eks/addon:Addon``'s inputs as an ``EksAddon`` object (its Pods, from the
    chart catalogue, must have a node: K017 and the deploy rehearsal)."""
    raw = props.get("configurationValues")
    values: Any = {}
    if isinstance(raw, str) and raw.strip():
        try:
            values = json.loads(raw)
        except ValueError:
            values = {}
    return {
        "apiVersion": API_VERSION,
        "kind": "EksAddon",
        "metadata": {"name": name, "annotations": {DERIVED_FROM: ADDON_TOKEN}},
        "spec": {
            "addonName": props.get("addonName"),
            "addonVersion": props.get("addonVersion"),
            "configurationValues": values if isinstance(values, dict) else {},
        },
    }


def object_from_pulumi(
    type_token: str, name: str, inputs: Mapping[str, Any], replaced: bool = False
) -> dict[str, Any] | None:
    """One resource as a Kubernetes-shaped object, or ``None`` if rules never read it.
    *replaced*: *inputs* already went through :func:`replace_pulumi_unknowns` (a plain
    dict, read only here)."""
    props = inputs if replaced else replace_pulumi_unknowns(inputs)
    if props is UNKNOWN or not isinstance(props, dict):
        return None
    if type_token in DESCRIPTION_KINDS:
        desc = props.get("description")
        if isinstance(desc, dict):
            desc = dict(desc)
            desc.setdefault("apiVersion", API_VERSION)
            desc.setdefault("kind", DESCRIPTION_KINDS[type_token])
            return _with_name(desc, name)
        return None
    if type_token == NODE_GROUP_TOKEN:
        return node_group_to_pool(name, props)
    if type_token == ADDON_TOKEN:
        return addon_object(name, props)
    if type_token == POD_IDENTITY_TOKEN:
        return pod_identity_association(name, props)
    if type_token in HELM_RELEASE_TOKENS:
        release = props.get("name")
        return {
            "apiVersion": "helm.sh/v3",
            "kind": "HelmRelease",
            "metadata": {
                "name": release if isinstance(release, str) and release else name,
                "namespace": props.get("namespace")
                if isinstance(props.get("namespace"), str)
                else None,
            },
            "spec": props,
        }
    if not type_token.startswith("kubernetes:") or type_token.count(":") != 2:
        return None
    kind = type_token.rsplit(":", 1)[1]
    if kind.endswith("List") or kind.endswith("Patch"):
        return None
    obj = dict(props)
    obj.setdefault("apiVersion", _api_version(type_token))
    obj.setdefault("kind", kind)
    return _with_name(obj, name)


def objects_from_pulumi(
    resources: Iterable[tuple[str, str, Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """Convert ``(type token, logical name, inputs)`` triples for :func:`~.engine.evaluate`.

    Handles ``kubernetes:*`` resources and CustomResources (camelCase inputs with
    apiVersion/kind; auto-named ones fall back to the logical name), Helm Releases
    (kept as kind ``HelmRelease``), ``aws:eks/nodeGroup:NodeGroup`` and
    ``gpustrata:index:GpuNodePool`` (as ``GpuNodePool`` objects), the
    ``gpustrata:index:GpuOperator`` description (kind ``GpuOperator``), the serving
    components' ``ModelEndpoint`` descriptions and ``aws:eks/podIdentityAssociation``
    (kind ``PodIdentityAssociation``). Others are dropped.
    """
    out = []
    for token, name, inputs in resources:
        obj = object_from_pulumi(token, name, inputs)
        if obj is not None:
            out.append(obj)
    return out
