"""K019 object-store-weights-have-identity."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.identity import (
    AZURE_CLIENT_ID,
    AZURE_USE,
    GKE_GSA,
    IRSA_ROLE,
    STORE_NAMES,
    Binding,
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


def _account(b: Binding) -> str:
    if not b.named:
        return "no serviceAccountName (the namespace's default ServiceAccount)"
    if b.account == "default":
        return "the namespace's default ServiceAccount"
    return f"ServiceAccount '{b.account}'"


def _judge(
    ctx: RuleContext, obj: K8sObject, loader: Loader, pod: PodRef, store: Store, what: str
) -> Iterator[Outcome]:
    if carried_credentials(loader.container, pod, store, _runtime_env(loader)):
        return  # credentials of its own (from a Secret: K014 checks they are not literal)
    b = bindings(ctx, pod)
    if b.identities[store]:
        return
    who, account = _who(loader, pod), _account(b)
    other = [m for s, ms in b.identities.items() if s != store for m in ms]
    besides = ""
    if other:
        besides = f"; it has {', '.join(other)}, which {STORE_NAMES[store]} does not take"
    node = (
        f"{STORE_NAMES[store]} requests then go out with the node's credentials (AccessDenied, "
        "or every Pod on the node can read the weights)"
    )
    default = b.account == "default"
    if store == "azure":
        missing = []
        if not b.azure_label:
            missing.append(f'the Pod label {AZURE_USE}: "true"')
        if b.found is not None or default:
            missing.append(f"the ServiceAccount annotation {AZURE_CLIENT_ID}")
        if b.azure_label and b.found is None and not default:
            yield ctx.not_evaluated(
                obj,
                f"{who} loads weights from {what} under ServiceAccount '{b.account}', which "
                "is not in the input (its azure.workload.identity/client-id annotation may be "
                "set in the cluster)",
            )
            return
        yield ctx.violation(
            obj,
            f"{who} loads weights from {what} under {account} without "
            f"{' and '.join(missing)}, so Azure Workload Identity gives it no token{besides}; "
            f"{node}",
            (*pod.path, "serviceAccountName"),
        )
        return
    if b.unknown and store == "s3":
        yield ctx.not_evaluated(obj, f"{b.unknown} is unknown until the deployment runs")
        return
    if default:
        yield ctx.violation(
            obj,
            f"{who} loads weights from {what} under {account}: {_HOW[store]}{besides}; {node}",
            (*pod.path, "serviceAccountName"),
        )
        return
    if b.found is None:
        yield ctx.not_evaluated(
            obj,
            f"{who} loads weights from {what} under ServiceAccount '{b.account}', which is not "
            "in the input (it may exist in the cluster, bound to an identity)",
        )
        return
    source = env_from(loader.container, pod)
    if source is not None:
        yield ctx.not_evaluated(
            obj,
            f"{who} loads weights from {what} under ServiceAccount '{b.account}', which has "
            f"no identity binding, but takes its environment from {source}, which may hold "
            "credentials",
        )
        return
    if store == "gcs":
        yield ctx.not_evaluated(
            obj,
            f"{who} loads weights from {what} under ServiceAccount '{b.account}', which has no "
            f"{GKE_GSA} annotation; GKE Workload Identity Federation may grant the bucket to "
            "the ServiceAccount's own principal in IAM, which no manifest shows",
        )
        return
    if obj.file is not None and not _has_associations(ctx):
        # Manifests: an association made with eksctl, Terraform or the EKS API does not show
        # in them. A Pulumi program (or a manifest set that manages associations) shows all.
        yield ctx.not_evaluated(
            obj,
            f"{who} loads weights from {what} under ServiceAccount '{b.account}', which has no "
            f"{IRSA_ROLE} annotation; an EKS Pod Identity association made outside these "
            "manifests (eksctl, Terraform, the EKS API) does not show in them",
        )
        return
    yield ctx.violation(
        obj,
        f"{who} loads weights from {what} under ServiceAccount '{b.account}': "
        f"{_HOW[store]}{besides}; {node}",
        (*pod.path, "serviceAccountName"),
    )


def _has_associations(ctx: RuleContext) -> bool:
    index, unknown = pod_identity_associations(ctx)
    return bool(index) or unknown is not None


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
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


RULE = folder_rule(__name__, check)
