"""gpustrata: one typed Pulumi stack for LLM inference on GPUs in Kubernetes.

The spec (:mod:`gpustrata.spec`), catalogues (:mod:`gpustrata.catalog`) and
planner (:mod:`gpustrata.planning`) are plain Python; the Pulumi components live
in :mod:`gpustrata.components` and are imported only where Pulumi is needed.
"""

__version__ = "0.1.0"
