"""The typed stack: one pydantic model per concern, upstream names where they exist.

A stack file declares all three layers (Kubernetes node pools and GPU software,
KubeRay, vLLM engines). Closed sets are ``Literal`` aliases so that the JSON
Schema and the error messages list the accepted values. Every field carries a
description; ``examples`` feed the "use ..." hint of an error message.

This module holds the whole document (:class:`StackSpec`) and the catalogue entries a
stack adds; the models it is made of live by concern: :mod:`gpustrata.spec.cluster`
(cluster, node pools, GPU software, add-ons), :mod:`gpustrata.spec.serving` (models and
their vLLM engines), :mod:`gpustrata.spec.routing` (the serving edge) and
:mod:`gpustrata.spec.fields` (the grammar they share).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from gpustrata.catalog.hardware import GpuModel, InstanceType
from gpustrata.core.environments import Environment
from gpustrata.spec.cluster import (
    ClusterSpec,
    DraSpec,
    GpuOperatorSpec,
    KarpenterSpec,
    KedaSpec,
    KubeRaySpec,
    LwsSpec,
    MonitoringSpec,
    NodePoolSpec,
)
from gpustrata.spec.fields import MODEL_MAX, SpecModel
from gpustrata.spec.routing import InferenceGatewaySpec
from gpustrata.spec.serving import ModelSpec


class CatalogExtensions(SpecModel):
    """Catalogue entries added by this stack (a custom GPU, an instance type not listed)."""

    gpus: list[GpuModel] = Field(
        default_factory=list, description="Extra GPU models (override by id)."
    )
    instances: list[InstanceType] = Field(
        default_factory=list, description="Extra instance types (override by name)."
    )
    models_dir: str | None = Field(
        default=None,
        max_length=MODEL_MAX,
        examples=["models"],
        description="Folder in the project holding models' own files (<org>/<name>/"
        "config.json, <name>/config.json or a Hugging Face cache layout): a model found there "
        "is sized from its config.json (and model.safetensors.index.json) before the Hugging "
        "Face cache and the model catalogue. `--models DIR` overrides it.",
    )

    @field_validator("models_dir")
    @classmethod
    def _models_dir_in_project(cls, value: str | None) -> str | None:
        if value is None:
            return None
        text = value.replace("\\", "/")
        if text.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", text):
            raise ValueError(
                f"{value[:60]!r} is an absolute path; a stack may only name a folder inside "
                "the project: use a path relative to the project (or `--models DIR`)"
            )
        if ".." in text.split("/"):
            raise ValueError(
                f"{value[:60]!r} leaves the project through '..'; use a folder inside the "
                "project (or `--models DIR`)"
            )
        return value


MAX_MODELS = 200
"""The most models one stack serves: ``plan`` takes ~44 ms a model (200: ~9 s); 10,000
did not finish in two minutes. Split a larger fleet into stacks."""
MAX_NODE_POOLS = 100
"""The most GPU node pools of one stack (EKS allows 30 managed node groups per cluster by
default)."""


class StackSpec(SpecModel):
    """A whole gpustrata stack: one environment, one cluster, its pools, software and models."""

    environment: Environment = Field(description="Environment; sets rule enforcement.")
    cluster: ClusterSpec = Field(description="The Kubernetes cluster.")
    node_pools: list[NodePoolSpec] = Field(
        min_length=1,
        max_length=MAX_NODE_POOLS,
        description=f"GPU node pools (at most {MAX_NODE_POOLS}).",
    )
    gpu_operator: GpuOperatorSpec = Field(description="NVIDIA GPU Operator.")
    kuberay: KubeRaySpec = Field(default_factory=KubeRaySpec, description="KubeRay operator.")
    karpenter: KarpenterSpec = Field(
        default_factory=KarpenterSpec, description="Karpenter (pools with provisioner karpenter)."
    )
    monitoring: MonitoringSpec = Field(
        default_factory=MonitoringSpec,
        description="Prometheus (for ServiceMonitors and KEDA).",
    )
    keda: KedaSpec = Field(default_factory=KedaSpec, description="KEDA (autoscaling kind keda).")
    lws: LwsSpec = Field(
        default_factory=LwsSpec,
        description="LeaderWorkerSet controller (installed when a model spans nodes).",
    )
    dra: DraSpec = Field(
        default_factory=DraSpec,
        description="DRA driver of the pools with gpu_allocation dra (installed when any).",
    )
    models: list[ModelSpec] = Field(
        default_factory=list,
        max_length=MAX_MODELS,
        description=f"Served models (at most {MAX_MODELS}: a stack is one team's serving fleet).",
    )
    catalog: CatalogExtensions = Field(
        default_factory=CatalogExtensions,
        description="Catalogue entries this stack adds, without code changes.",
    )
    inference_gateway: InferenceGatewaySpec = Field(
        default_factory=InferenceGatewaySpec,
        description="The inference gateway (used by models with routing.mode inference-gateway).",
    )
