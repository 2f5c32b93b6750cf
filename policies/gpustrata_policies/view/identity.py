"""Where engines load weights from object storage, and what cloud identity their Pods have.

Read by K019. The weight sources come from the one engine reader
(:func:`gpustrata_policies.view.engines.engine_sites`): a ``vllm serve`` container's model
(``--model`` / the positional model, ``--tokenizer``, a ``tensorizer_uri`` in
``--model-loader-extra-config``) and a Ray Serve LLM ``llm_config``'s
``model_loading_config.model_source`` (a URI, or a mirror config's ``bucket_uri``) and
``lora_config.dynamic_lora_loading_path``. vLLM streams ``s3://``, ``gs://`` and ``az://``
models with the Run:ai Model Streamer
(https://docs.vllm.ai/en/stable/models/extensions/runai_model_streamer/); ``abfss://`` is
the Azure Data Lake scheme.

A Pod's cloud identity is read from what binds its ServiceAccount:

* EKS Pod Identity: an association (``PodIdentityAssociation``: the Pulumi resource
  ``aws:eks/podIdentityAssociation:PodIdentityAssociation`` as the adapters convert it, or a
  controller's object of that kind) whose ``namespace`` and ``serviceAccount`` are the
  Pod's (https://docs.aws.amazon.com/eks/latest/userguide/pod-identities.html);
* IRSA: the ServiceAccount annotation ``eks.amazonaws.com/role-arn``
  (https://docs.aws.amazon.com/eks/latest/userguide/associate-service-account-role.html);
* GKE Workload Identity Federation: the ServiceAccount annotation
  ``iam.gke.io/gcp-service-account`` (linking a Google service account), or IAM roles
  granted to the Kubernetes ServiceAccount's own principal
  (``principal://iam.googleapis.com/projects/NUMBER/locations/global/workloadIdentityPools/
  PROJECT.svc.id.goog/subject/ns/NAMESPACE/sa/KSA``), which lives in IAM and shows in no
  manifest (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity);
* Azure Workload Identity: the Pod label ``azure.workload.identity/use: "true"`` plus the
  ServiceAccount annotation ``azure.workload.identity/client-id``
  (https://azure.github.io/azure-workload-identity/docs/topics/service-account-labels-and-annotations.html).

Credentials a container carries itself (``AWS_ACCESS_KEY_ID``,
``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_CLIENT_SECRET``, ...), or an S3-compatible
store named by ``AWS_ENDPOINT_URL`` with the instance metadata switched off (the vLLM page
above), are not the node's credentials either: they are reported as such.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view.engines import EngineSite, engine_sites, gpu_resources
from gpustrata_policies.view.objects import ContainerRef, K8sObject, PodRef, as_map, dig

__all__ = [
    "AZURE_CLIENT_ID",
    "AZURE_USE",
    "GKE_GSA",
    "IRSA_ROLE",
    "POD_IDENTITY_KIND",
    "STORE_NAMES",
    "Binding",
    "Loader",
    "Store",
    "WeightSource",
    "bindings",
    "carried_credentials",
    "env_from",
    "object_store",
    "pod_identity_associations",
    "service_account",
    "weight_sources",
]

Store = Literal["s3", "gcs", "azure"]
STORE_NAMES: dict[Store, str] = {
    "s3": "Amazon S3",
    "gcs": "Google Cloud Storage",
    "azure": "Azure Blob Storage",
}
_SCHEMES: tuple[tuple[str, Store], ...] = (
    ("s3://", "s3"),
    ("gs://", "gcs"),
    ("az://", "azure"),
    ("abfss://", "azure"),
)

POD_IDENTITY_KIND = "PodIdentityAssociation"
IRSA_ROLE = "eks.amazonaws.com/role-arn"
GKE_GSA = "iam.gke.io/gcp-service-account"
AZURE_USE = "azure.workload.identity/use"
AZURE_CLIENT_ID = "azure.workload.identity/client-id"

# Credentials the SDKs take from the environment before any node-level source.
_CARRIED: dict[Store, tuple[str, ...]] = {
    "s3": (
        "AWS_ACCESS_KEY_ID",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    ),
    "gcs": ("GOOGLE_APPLICATION_CREDENTIALS",),
    "azure": (
        "AZURE_CLIENT_SECRET",
        "AZURE_CLIENT_CERTIFICATE_PATH",
        "AZURE_FEDERATED_TOKEN_FILE",
        "AZURE_STORAGE_CONNECTION_STRING",
    ),
}
_S3_ENDPOINTS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


def object_store(uri: Any) -> Store | None:
    """The object store a model URI names (``s3://`` -> ``s3``), else ``None``."""
    if not isinstance(uri, str):
        return None
    lowered = uri.strip().lower()
    for prefix, store in _SCHEMES:
        if lowered.startswith(prefix):
            return store
    return None


@dataclass(frozen=True, slots=True)
class WeightSource:
    """One object-store URI an engine reads, and the setting that names it."""

    uri: str
    store: Store
    setting: str

    @property
    def label(self) -> str:
        """``s3://bucket/model/ (--model)``."""
        return f"{self.uri} ({self.setting})"


def _tensorizer_uri(value: Any) -> Any:
    if isinstance(value, Mapping):
        return value.get("tensorizer_uri")
    if isinstance(value, str) and "tensorizer_uri" in value:
        try:
            loaded = json.loads(value)
        except ValueError:
            return None
        return loaded.get("tensorizer_uri") if isinstance(loaded, Mapping) else None
    return None


def _container_sources(site: EngineSite) -> Iterator[WeightSource]:
    engine = site.engine
    candidates = (
        (engine.model, "--model"),
        (engine.get("tokenizer"), "--tokenizer"),
        (_tensorizer_uri(engine.get("model_loader_extra_config")), "tensorizer_uri"),
    )
    for uri, setting in candidates:
        store = object_store(uri)
        if store is not None:
            yield WeightSource(str(uri), store, setting)


def _ray_sources(site: EngineSite) -> Iterator[WeightSource]:
    llm = site.llm_config
    source = dig(llm, "model_loading_config", "model_source")
    setting = "model_loading_config.model_source"
    if isinstance(source, Mapping):  # a mirror config (S3MirrorConfig / GCSMirrorConfig)
        source, setting = source.get("bucket_uri"), f"{setting}.bucket_uri"
    lora = dig(llm, "lora_config", "dynamic_lora_loading_path")
    for uri, where in ((source, setting), (lora, "lora_config.dynamic_lora_loading_path")):
        store = object_store(uri)
        if store is not None:
            yield WeightSource(str(uri), store, where)


@dataclass(frozen=True, slots=True)
class Loader:
    """An engine that reads object storage, and the Pods that run it."""

    site: EngineSite
    sources: tuple[WeightSource, ...]
    pods: tuple[PodRef, ...]
    container: ContainerRef | None
    """The ``vllm serve`` container (None on the Ray Serve LLM path)."""


def weight_sources(ctx: RuleContext, obj: K8sObject) -> list[Loader]:
    """Every engine of *obj* that loads from an object store, through the engine reader.
    A Ray Serve LLM engine runs on the GPU worker groups (every worker group when none
    asks for a GPU)."""
    out: list[Loader] = []
    for site in engine_sites(ctx, obj):
        if site.ray:
            sources = tuple(dict.fromkeys(_ray_sources(site)))
            gpu = tuple(p for p in site.pods if gpu_resources(ctx, p))
            pods = gpu or site.pods
        else:
            sources = tuple(dict.fromkeys(_container_sources(site)))
            pods = site.pods
        if sources and pods:
            out.append(Loader(site, sources, pods, site.container))
    return out


def service_account(pod: PodRef) -> tuple[str, bool]:
    """(the ServiceAccount a Pod runs under, whether the spec names it): an unset
    ``serviceAccountName`` (and the deprecated ``serviceAccount``) is ``default``."""
    for key in ("serviceAccountName", "serviceAccount"):
        value = pod.spec.get(key)
        if value is UNKNOWN:
            raise UnknownInput(f"{key} of the pod spec{pod.where} of {pod.obj.resource}")
        if isinstance(value, str) and value:
            return value, True
    return "default", False


def _association_target(obj: K8sObject) -> tuple[Any, Any]:
    spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
    provider = as_map(spec.get("forProvider"), "spec.forProvider")  # Crossplane's shape
    namespace = spec.get("namespace", provider.get("namespace"))
    account = spec.get("serviceAccount", provider.get("serviceAccount"))
    return namespace, account


def pod_identity_associations(
    ctx: RuleContext,
) -> tuple[dict[tuple[str, str], list[K8sObject]], str | None]:
    """EKS Pod Identity associations by (namespace, ServiceAccount), once per evaluation,
    and why one association's target is unknown (a preview), if one is."""

    def build() -> tuple[dict[tuple[str, str], list[K8sObject]], str | None]:
        index: dict[tuple[str, str], list[K8sObject]] = {}
        unknown: str | None = None
        for obj in ctx.objects:
            if obj.kind != POD_IDENTITY_KIND:
                continue
            namespace, account = _association_target(obj)
            if namespace is UNKNOWN or account is UNKNOWN:
                unknown = unknown or f"the namespace or ServiceAccount of {obj.resource}"
                continue
            if isinstance(namespace, str) and isinstance(account, str):
                index.setdefault((namespace, account), []).append(obj)
        return index, unknown

    found: tuple[dict[tuple[str, str], list[K8sObject]], str | None] = ctx.memo(
        "pod_identity_associations", build
    )
    return found


def _service_accounts(ctx: RuleContext) -> dict[tuple[str, str], K8sObject]:
    def build() -> dict[tuple[str, str], K8sObject]:
        return {(o.namespace, o.name): o for o in ctx.objects if o.kind == "ServiceAccount"}

    found: dict[tuple[str, str], K8sObject] = ctx.memo("service_accounts", build)
    return found


@dataclass(frozen=True, slots=True)
class Binding:
    """What a Pod's ServiceAccount is bound to, as far as the input says."""

    account: str
    named: bool
    """The pod spec names the ServiceAccount (``serviceAccountName``)."""
    found: K8sObject | None
    """The ServiceAccount object, when it is in the input."""
    identities: dict[Store, list[str]]
    """Per store, the mechanisms that give the Pod an identity it accepts."""
    azure_label: bool
    """The Pod carries ``azure.workload.identity/use: "true"``."""
    unknown: str | None = None
    """An association whose target is unknown during a preview."""


def _annotation(obj: K8sObject | None, key: str) -> Any:
    if obj is None:
        return None
    annotations = dig(obj.raw, "metadata", "annotations")
    if annotations is UNKNOWN:
        raise UnknownInput(f"metadata.annotations of {obj.resource}")
    value = as_map(annotations, f"annotations of {obj.resource}").get(key)
    if value is UNKNOWN:
        raise UnknownInput(f"annotation {key} of {obj.resource}")
    return value if isinstance(value, str) and value.strip() else None


def bindings(ctx: RuleContext, pod: PodRef) -> Binding:
    """The cloud identities a Pod gets through its ServiceAccount and labels."""
    account, named = service_account(pod)
    namespace = pod.obj.namespace
    sa = _service_accounts(ctx).get((namespace, account))
    associations, unknown = pod_identity_associations(ctx)
    found: dict[Store, list[str]] = {"s3": [], "gcs": [], "azure": []}
    for assoc in associations.get((namespace, account), []):
        found["s3"].append(f"EKS Pod Identity association {assoc.name}")
    role = _annotation(sa, IRSA_ROLE)
    if role:
        found["s3"].append(f"IRSA ({IRSA_ROLE}: {role})")
    gsa = _annotation(sa, GKE_GSA)
    if gsa:
        found["gcs"].append(f"GKE Workload Identity ({GKE_GSA}: {gsa})")
    label = pod.labels.get(AZURE_USE)
    if label is UNKNOWN:
        raise UnknownInput(f"label {AZURE_USE} of the pod template of {pod.obj.resource}")
    azure_label = str(label).lower() == "true"
    client = _annotation(sa, AZURE_CLIENT_ID)
    if azure_label and client:
        found["azure"].append(f"Azure Workload Identity ({AZURE_CLIENT_ID}: {client})")
    return Binding(account, named, sa, found, azure_label, unknown)


def carried_credentials(
    c: ContainerRef | None, pod: PodRef, store: Store, extra: Mapping[str, Any] | None = None
) -> str | None:
    """Credentials for *store* the engine's container(s) carry in their environment (a
    Secret's keys, a mounted key file, an S3-compatible endpoint with instance metadata
    off), said as the variable that carries them; ``None`` when there are none. *extra*:
    more variables the engine gets (Ray Serve ``runtime_env.env_vars``)."""
    for name in _CARRIED[store]:
        if extra and name in extra:
            return name
    containers = [c] if c is not None else list(pod.containers(init=False))
    for container in containers:
        names = {e.get("name") for e in container.env() if isinstance(e.get("name"), str)}
        for name in _CARRIED[store]:
            if name in names:
                return name
        if store == "s3":
            literal = container.literal_env()
            endpoint = next((n for n in _S3_ENDPOINTS if literal.get(n)), None)
            if endpoint and literal.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
                return f"{endpoint} with AWS_EC2_METADATA_DISABLED=true"
    return None


def env_from(c: ContainerRef | None, pod: PodRef) -> str | None:
    """The first Secret or ConfigMap a container takes its whole environment from (it may
    hold credentials no manifest shows), as ``Secret x``; ``None`` when none."""
    containers = [c] if c is not None else list(pod.containers(init=False))
    for container in containers:
        sources = container.raw.get("envFrom")
        if sources is UNKNOWN:
            raise UnknownInput(f"envFrom of {container.label}")
        for entry in sources if isinstance(sources, list) else []:
            if not isinstance(entry, Mapping):
                continue
            for key, kind in (("secretRef", "Secret"), ("configMapRef", "ConfigMap")):
                ref = as_map(entry.get(key), key)
                if ref:
                    return f"{kind} {ref.get('name', '?')}"
    return None
