"""Multi-node engines: the layout of one vLLM engine across the nodes of a pool.

vLLM's multi-node guide sets "the tensor parallel size to the number of GPUs in each node,
and the pipeline parallel size to the number of nodes" (vllm docs/serving/
parallelism_scaling.md); a LeaderWorkerSet group of that many Pods, one per node, runs it.
The planner keeps TP = GPUs per node and searches PP (the nodes) with the same capacity
estimate `plan` and `size` use: the fewest nodes whose GPUs hold the weights and one
``max_model_len`` sequence's KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpustrata.catalog.architectures import ModelArchitecture
from gpustrata.catalog.hardware import GpuModel
from gpustrata.planning.model_capacity import estimate_for_model
from gpustrata.planning.provenance import Ledger
from gpustrata.spec.serving import ModelSpec, MultiNodeSpec
from gpustrata.vllm.capacity import CapacityError

__all__ = ["MultiNodePlan", "MultiNodeProblem", "resolve_multi_node"]


@dataclass(frozen=True)
class MultiNodePlan:
    """One engine across ``nodes`` Pods of a LeaderWorkerSet group."""

    nodes: int
    """Pods per group (LeaderWorkerSet ``size``) = pipeline_parallel_size."""
    tensor_parallel_size: int
    """= GPUs per node (every Pod takes its whole node)."""
    executor: str
    """vLLM --distributed-executor-backend: ``ray`` or ``mp``."""
    efa_interfaces: int
    """EFA interfaces each Pod requests (``vpc.amazonaws.com/efa``); 0: none."""
    chosen_by: str
    """``spec`` (the stack named the nodes) or ``planner`` (searched)."""

    @property
    def pipeline_parallel_size(self) -> int:
        """PP = nodes."""
        return self.nodes


class MultiNodeProblem(ValueError):
    """A multi-node layout that cannot be planned; the message names the fix."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


def _explicit(model: ModelSpec, name: str) -> int | None:
    """The engine's TP or PP when the stack sets it (None: left to the planner)."""
    engine = model.engine
    return int(getattr(engine, name)) if name in engine.model_fields_set else None


def _fits(model: ModelSpec, arch: ModelArchitecture, gpu: GpuModel, tp: int, pp: int) -> bool:
    try:
        est = estimate_for_model(
            model, arch, gpu, tensor_parallel_size=tp, pipeline_parallel_size=pp
        )
    except CapacityError:
        return False
    return est.fits


def resolve_multi_node(
    model: ModelSpec,
    key: str,
    arch: ModelArchitecture | None,
    gpu: GpuModel,
    gpus_per_node: int,
    pool_max_nodes: int,
    efa_interfaces: int | None,
    max_replicas: int,
    ledger: Ledger,
    *,
    nodes_by: str,
) -> tuple[ModelSpec, MultiNodePlan] | None:
    """The model with its multi-node layout resolved (engine TP/PP and ``multi_node`` set),
    or None when the engine runs on one node.

    A stack that names ``multi_node`` gets it; one that leaves ``multi_node`` *and* the
    engine's TP and PP unset spans nodes when one node of the pool (TP = its GPUs) cannot
    start the engine. Raises :class:`MultiNodeProblem` for a layout that cannot run.

    EFA: ``efa: auto`` requests every EFA interface of the node on an instance type that has
    them. *nodes_by* says who makes the nodes: ``existing`` (an existing cluster's node
    groups, created with EFA as the EKS guide does), ``managed-node-group`` (the EKS node
    group this stack creates, whose launch template then attaches one EFA interface per
    network card) or ``karpenter`` (a Karpenter NodePool, whose EC2NodeClass gpustrata does
    not give EFA yet: a Pod asking for ``vpc.amazonaws.com/efa`` would stay Pending, so NCCL
    uses TCP and the ledger says why).
    """
    spec = model.multi_node
    tp_set = _explicit(model, "tensor_parallel_size")
    pp_set = _explicit(model, "pipeline_parallel_size")
    if spec is None:
        if model.runtime != "deployment" or tp_set or pp_set or arch is None:
            return None
        if gpus_per_node < 2 or _fits(model, arch, gpu, gpus_per_node, 1):
            return None
        spec = MultiNodeSpec()
        chosen_why = (
            f"weights and one max_model_len sequence do not fit one node ({gpus_per_node} "
            f"GPUs, TP {gpus_per_node}): the engine spans nodes"
        )
    else:
        chosen_why = "multi_node (stack)"
    if tp_set is not None and tp_set != gpus_per_node:
        raise MultiNodeProblem(
            "engine.tensor_parallel_size",
            f"tensor_parallel_size {tp_set} on a multi-node engine must equal the GPUs per "
            f"node of the pool ({gpus_per_node}): tensor parallel stays within a node, "
            "pipeline parallel spans the nodes. Remove it or set it to "
            f"{gpus_per_node}",
        )
    if spec.nodes is not None and pp_set is not None and pp_set != spec.nodes:
        raise MultiNodeProblem(
            "engine.pipeline_parallel_size",
            f"pipeline_parallel_size {pp_set} differs from multi_node.nodes {spec.nodes}: "
            "each node runs one pipeline stage; remove pipeline_parallel_size",
        )
    if model.autoscaling.kind != "none":
        raise MultiNodeProblem(
            "autoscaling.kind",
            f"autoscaling kind {model.autoscaling.kind!r} is not planned for a multi-node "
            "engine (a LeaderWorkerSet scales whole groups); use kind none with replicas",
        )
    nodes = spec.nodes or pp_set
    if nodes is not None and nodes < 2:
        raise MultiNodeProblem(
            "engine.pipeline_parallel_size",
            f"pipeline_parallel_size {nodes} puts the engine on one node; a multi-node engine "
            "runs one pipeline stage per node (at least 2): remove pipeline_parallel_size or "
            "multi_node",
        )
    if nodes is not None:
        why = f"{chosen_why}: multi_node.nodes {nodes}"
        source = "spec"
    else:
        if arch is None:
            raise MultiNodeProblem(
                "multi_node.nodes",
                f"the model {model.model!r} is not in the catalogue, so the planner cannot "
                "search the nodes it needs; set multi_node.nodes",
            )
        top = min(pool_max_nodes, arch.num_hidden_layers)
        nodes = next(
            (pp for pp in range(2, top + 1) if _fits(model, arch, gpu, gpus_per_node, pp)),
            None,
        )
        if nodes is None:
            raise MultiNodeProblem(
                "multi_node.nodes",
                f"{arch.id} does not start on up to {top} nodes of {gpus_per_node} GPUs "
                f"(the pool's max_size {pool_max_nodes}): the weights and one max_model_len "
                "sequence do not fit; raise the pool's max_size, lower max_model_len or "
                "quantise",
            )
        why = (
            f"{chosen_why}: the fewest nodes (PP 2..{top}) whose {gpus_per_node} GPUs each hold "
            f"the weights and one max_model_len sequence is {nodes}"
        )
        source = "planner"
    if nodes * max_replicas > pool_max_nodes:
        raise MultiNodeProblem(
            "multi_node.nodes",
            f"{max_replicas} group(s) of {nodes} nodes need {nodes * max_replicas} nodes; the "
            f"pool's max_size is {pool_max_nodes}: raise it or lower replicas",
        )
    efa = (efa_interfaces or 0) if spec.efa == "auto" and nodes_by != "karpenter" else 0
    plan = MultiNodePlan(
        nodes=nodes,
        tensor_parallel_size=gpus_per_node,
        executor=spec.executor,
        efa_interfaces=efa,
        chosen_by=source,
    )
    ledger.add(f"{key}.multiNode.nodes", nodes, "formula" if source == "planner" else "spec", why)
    ledger.add(
        f"{key}.multiNode.layout",
        f"TP {gpus_per_node} x PP {nodes}",
        "formula",
        f"tensor_parallel_size = GPUs per node ({gpus_per_node}), pipeline_parallel_size = "
        f"nodes ({nodes}), vLLM's multi-node layout; executor {spec.executor}",
    )
    if spec.efa == "off":
        efa_why = "efa off: NCCL over TCP sockets between the nodes"
    elif not efa_interfaces:
        efa_why = (
            "efa auto: the instance type has no EFA interface (instances.yaml)"
            if efa_interfaces == 0
            else "efa auto: the instance type's EFA interfaces are not catalogued"
        )
    elif nodes_by == "karpenter":
        efa_why = (
            f"efa auto: the instance type has {efa_interfaces} EFA interface(s) (instances."
            "yaml), but the Karpenter NodePools this stack creates attach none (not "
            "implemented yet): a Pod asking for them would stay Pending, so NCCL uses TCP"
        )
    elif nodes_by == "managed-node-group":
        efa_why = (
            f"efa auto: {efa_interfaces} EFA interface(s) per node (instances.yaml), attached "
            "by the launch template of the node group this stack creates (one per network "
            "card, in a cluster placement group) and advertised by the EFA device plugin the "
            "stack installs"
        )
    else:
        efa_why = (
            f"efa auto: {efa_interfaces} EFA interface(s) per node (instances.yaml) on the "
            "existing node group, advertised by the EFA device plugin the stack installs"
        )
    ledger.add(f"{key}.multiNode.efaInterfaces", efa, "catalogue", efa_why)
    engine = model.engine.model_copy(
        update={"tensor_parallel_size": gpus_per_node, "pipeline_parallel_size": nodes}
    )
    resolved = model.model_copy(
        update={"engine": engine, "multi_node": spec.model_copy(update={"nodes": nodes})}
    )
    return resolved, plan
