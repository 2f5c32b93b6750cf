"""gpustrata policies: GPU / Ray / vLLM rules over Kubernetes-shaped objects.

Pure Python, no Pulumi import. Entry points:

* :func:`evaluate` (objects -> :class:`Report` with findings, not-evaluated, exit code);
* :func:`objects_from_pulumi` (Pulumi resources -> objects, for ``gpustrata plan``);
* :mod:`gpustrata.cli.check` (``gpustrata check`` / ``explain``);
* ``policies/__main__.py`` (the CrossGuard pack, a thin layer over the same rules).
"""

from gpustrata.core.unknown import UNKNOWN, is_unknown
from gpustrata_policies.config import ConfigError, PolicyConfig
from gpustrata_policies.evaluate import all_rules, evaluate, find_rule, load_config
from gpustrata_policies.findings import Finding, NotEvaluated, Report, Rule, RuleMeta
from gpustrata_policies.inputs.pulumi import objects_from_pulumi
from gpustrata_policies.view.objects import K8sObject

__all__ = [
    "UNKNOWN",
    "ConfigError",
    "Finding",
    "K8sObject",
    "NotEvaluated",
    "PolicyConfig",
    "Report",
    "Rule",
    "RuleMeta",
    "all_rules",
    "evaluate",
    "find_rule",
    "is_unknown",
    "load_config",
    "objects_from_pulumi",
]
