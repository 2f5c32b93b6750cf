"""The kinds each rule reports on: the evaluator calls a rule's check only for objects of
these kinds (and for an object whose kind is unknown until deployment), after a cheap
kind check (issue 35: most of a cluster dump is Services, ConfigMaps and RBAC no Pod rule
reads).

A rule still *reads* every object through ``ctx.objects`` (the pools, the autoscalers of
its subject); this table only names the subjects it may report on. A rule that is not
listed is called for every kind, the safe default for a new rule. A listed kind set must
cover every kind the rule's ``check`` can yield an outcome for or raise on:
``tests/policies/test_subject_kinds.py`` runs each listed rule, unfiltered, over every
object of an unlisted kind in the fixtures and the field corpora and asserts it says
nothing.

The table sits apart from the rule folders so that their metadata blocks and bodies
change without touching it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from gpustrata_policies.view.dra import CLAIM_KINDS, GPU_CLUSTER_KIND
from gpustrata_policies.view.kinds import POD_KINDS
from gpustrata_policies.view.nodes import OPERATOR_KINDS
from gpustrata_policies.view.scheduling import ADDON_KIND

__all__ = ["NAMESPACE_ORDER_READERS", "SUBJECT_KINDS", "subject_kinds"]

_RAY_SERVICE = frozenset({"RayService"})
_AUTOSCALERS = frozenset({"HorizontalPodAutoscaler", "ScaledObject"})

SUBJECT_KINDS: Final[Mapping[str, frozenset[str]]] = {
    # Gateway timeouts: the hops of G001's table, and the InferencePool G002 judges.
    "G001": frozenset(
        {
            "Ingress",
            "Service",
            "HTTPRoute",
            "VirtualService",
            "BackendTrafficPolicy",
            "ClientTrafficPolicy",
            "RayService",
        }
    ),
    "G002": frozenset({"InferencePool"}),
    # Pods, containers and engines: only kinds that hold a pod spec.
    "K001": POD_KINDS,
    "K002": POD_KINDS,
    "K003": frozenset({"GpuNodePool"}),
    "K004": POD_KINDS,
    "K005": POD_KINDS,
    "K006": frozenset({"GpuNodePool", "NodePool", "EC2NodeClass"}),
    "K007": POD_KINDS,
    "K008": frozenset({"Deployment"}),
    "K009": frozenset({"VerticalPodAutoscaler"}),
    "K010": _AUTOSCALERS,
    "K011": _AUTOSCALERS,
    "K012": frozenset({"Deployment", "StatefulSet", "LeaderWorkerSet"}),
    "K013": POD_KINDS,
    "K014": POD_KINDS,
    "K015": POD_KINDS,
    "K016": frozenset({"NodePool"}),
    "K017": POD_KINDS | frozenset({"HelmRelease", ADDON_KIND}),  # pods; CoreDNS's release
    # K018: any custom resource may lack its CRD; every kind.
    "K019": POD_KINDS,
    "K020": POD_KINDS,
    "K021": frozenset({"Service", "Ingress", "HTTPRoute", "ModelEndpoint", "RayService"}),
    # The GPU Operator installations (operators_for) and DRA drivers.
    "O001": OPERATOR_KINDS,
    "O002": POD_KINDS,
    "O003": OPERATOR_KINDS,
    "O004": OPERATOR_KINDS,
    # O005: several operators with different MIG strategies spoil every object; every kind.
    "O006": OPERATOR_KINDS,
    "O007": POD_KINDS,
    "O008": CLAIM_KINDS | OPERATOR_KINDS | frozenset({GPU_CLUSTER_KIND}),
    "R001": POD_KINDS,
    "R002": POD_KINDS,
    "R003": frozenset({"LeaderWorkerSet", "RayService"}),
    "R004": POD_KINDS,
    "R005": _RAY_SERVICE,
    "R006": _RAY_SERVICE,
    "R007": POD_KINDS,
    "V001": POD_KINDS,
    "V002": POD_KINDS,
    "V003": POD_KINDS,
    "V004": POD_KINDS,
    "V005": POD_KINDS,
    "V006": POD_KINDS,
    "V007": POD_KINDS,
    "V008": POD_KINDS,
    "V009": POD_KINDS,
    "V010": POD_KINDS,
    "V011": POD_KINDS,
    "V012": POD_KINDS,
    "V013": POD_KINDS,
}
"""Rule id -> the kinds of object it reports on; a rule not listed reports on any kind."""


NAMESPACE_ORDER_READERS: Final[frozenset[str]] = frozenset()
"""Rules whose verdict on an object may depend on where its namespace comes among equal
namespaces (a first-come share of a pool, say): the evaluator judges each copy of a
repeated namespace itself for them instead of replaying the first copy's outcomes
(:meth:`~gpustrata_policies.index.EvaluationIndex.replicas`). Every other rule treats
namespaces alike; ``tests/policies/test_replicas.py`` checks it on the fixtures and the
field corpora, each copied into several namespaces."""


def subject_kinds(rule_id: str) -> frozenset[str] | None:
    """The kinds *rule_id* reports on, or ``None`` for every kind."""
    return SUBJECT_KINDS.get(rule_id)
