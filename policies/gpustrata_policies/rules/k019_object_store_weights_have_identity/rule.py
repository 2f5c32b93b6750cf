"""K019 object-store-weights-have-identity."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, cast

from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view.identity import (
    AZURE_CLIENT_ID,
    AZURE_USE,
    GKE_GSA,
    IRSA_ROLE,
    STORE_NAMES,
    Loader,
    Store,
    bindings,
    carried_credentials,
    env_from,
    pod_identity_associations,
    weight_sources,
)
from gpustrata_policies.view.objects import K8sObject, PodRef, as_map

# Kinds whose pod spec carries the ServiceAccount the Pods really run under. A KServe
# ServingRuntime's Pods take theirs from the InferenceService; operators of other
# projects (KAITO, NIM) choose their own.
_OWN_ACCOUNT_KINDS = frozenset(
    {
        "Pod",
        "Deployment",
        "StatefulSet",
        "DaemonSet",
        "ReplicaSet",
        "Job",
        "CronJob",
        "LeaderWorkerSet",
        "RayCluster",
        "RayService",
        "RayJob",
        "InferenceService",
        "LLMInferenceService",
    }
)

_HOW: dict[Store, str] = {
    "s3": (
        "no EKS Pod Identity association in the input and no IRSA annotation "
        f"({IRSA_ROLE}) bind it to an IAM role"
    ),
    "gcs": f"no GKE Workload Identity annotation ({GKE_GSA}) binds it to a Google identity",
    "azure": "",
}


def _runtime_env(loader: Loader) -> Mapping[str, Any]:
    env = as_map(loader.site.llm_config.get("runtime_env"), "runtime_env")
    return as_map(env.get("env_vars"), "runtime_env.env_vars")


def _who(loader: Loader, pod: PodRef) -> str:
    if loader.container is not None:
        return loader.container.label
    return f"{loader.site.name}{pod.where}"


def _account(v: Mapping[str, Value]) -> str:
    if not v["named"]:
        return "no serviceAccountName (the namespace's default ServiceAccount)"
    if v["account"] == "default":
        return "the namespace's default ServiceAccount"
    return f"ServiceAccount '{v['account']}'"


def _judge(
    ctx: RuleContext, obj: K8sObject, loader: Loader, pod: PodRef, store: Store, what: str
) -> Iterator[Verdict]:
    if carried_credentials(loader.container, pod, store, _runtime_env(loader)):
        return  # credentials of its own (from a Secret: K014 checks they are not literal)
    b = bindings(ctx, pod)
    if b.identities[store]:
        return
    values: dict[str, Value] = {
        "who": _who(loader, pod),
        "what": what,
        "store": store,
        "account": b.account,
        "named": b.named,
        "other_identities": tuple(m for s, ms in b.identities.items() if s != store for m in ms),
    }
    path = (*pod.path, "serviceAccountName")
    default = b.account == "default"
    if store == "azure":
        missing = (
            *(() if b.azure_label else ("label",)),
            *(("client-id",) if b.found is not None or default else ()),
        )
        if b.azure_label and b.found is None and not default:
            yield Verdict("not_evaluated", "azure-account-missing", values)
            return
        yield Verdict("violation", "no-azure-identity", {**values, "missing": missing}, path=path)
        return
    if b.unknown and store == "s3":
        yield Verdict("not_evaluated", "binding-unknown", {"unknown": b.unknown})
        return
    if default:
        yield Verdict("violation", "default-account", values, path=path)
        return
    if b.found is None:
        yield Verdict("not_evaluated", "account-missing", values)
        return
    source = env_from(loader.container, pod)
    if source is not None:
        yield Verdict("not_evaluated", "env-from", {**values, "env_from": source})
        return
    if store == "gcs":
        yield Verdict("not_evaluated", "gcs-principal", values)
        return
    if obj.file is not None and not _has_associations(ctx):
        # Manifests: an association made with eksctl, Terraform or the EKS API does not show
        # in them. A Pulumi program (or a manifest set that manages associations) shows all.
        yield Verdict("not_evaluated", "association-outside", values)
        return
    yield Verdict("violation", "account-unbound", values, path=path)


_AZURE_MISSING = {
    "label": f'the Pod label {AZURE_USE}: "true"',
    "client-id": f"the ServiceAccount annotation {AZURE_CLIENT_ID}",
}


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K019 message quotes beyond its values: the annotations it names, and for a
    violation the ``head`` (who loads what under which account), how the store would bind
    it, the identities the store does not take and what the node's credentials do."""
    out = {"gke_gsa": GKE_GSA, "irsa_role": IRSA_ROLE}
    if verdict.decision == "not_evaluated":
        return out
    v = verdict.values
    store = cast(Store, v["store"])
    other = cast(tuple[str, ...], v["other_identities"])
    besides = ""
    if other:
        besides = f"; it has {', '.join(other)}, which {STORE_NAMES[store]} does not take"
    node = (
        f"{STORE_NAMES[store]} requests then go out with the node's credentials (AccessDenied, "
        "or every Pod on the node can read the weights)"
    )
    missing = cast(tuple[str, ...], v.get("missing", ()))
    return {
        **out,
        "head": f"{v['who']} loads weights from {v['what']} under {_account(v)}",
        "how": _HOW[store],
        "besides": besides,
        "node": node,
        "missing_text": " and ".join(_AZURE_MISSING[m] for m in missing),
    }


def _has_associations(ctx: RuleContext) -> bool:
    index, unknown = pod_identity_associations(ctx)
    return bool(index) or unknown is not None


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Engines that read weights from object storage run under a bound cloud identity."""
    if obj.kind not in _OWN_ACCOUNT_KINDS:
        return
    for loader in weight_sources(ctx, obj):
        by_store: dict[Store, list[str]] = {}
        for source in loader.sources:
            by_store.setdefault(source.store, []).append(source.label)
        for pod in loader.pods:
            for store, labels in by_store.items():
                yield from _judge(ctx, obj, loader, pod, store, ", ".join(labels))


RULE = folder_rule(__name__, worded(judge, fields))
