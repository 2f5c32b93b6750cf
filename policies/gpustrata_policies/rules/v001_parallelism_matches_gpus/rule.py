"""V001 parallelism-matches-gpus."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

from gpustrata.catalog.vllm_release_types import source_url
from gpustrata.core.versions import parse_version
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Decision, Value, Verdict, judged
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.controllers import pod_group
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.kinds import RAY_KINDS
from gpustrata_policies.view.kuberay import (
    autoscaling_enabled,
    engine_placements,
    fmt_gpus,
    ray_groups,
)
from gpustrata_policies.view.objects import ContainerRef, K8sObject
from gpustrata_policies.view.vllm_args import EngineArgs

MULTI_NODE_KINDS = frozenset({"ServingRuntime", "ClusterServingRuntime", "InferenceService"})


_RELEASES = catalogs.vllm_releases()
_RAY_FALLBACK_REFS = tuple(
    source_url(s)
    for s in (_RELEASES.ray_fallback_last_source, _RELEASES.ray_fallback_source)
    if s is not None
)
"""Where the last release that picks the Ray executor itself, and the first that refuses,
were read (the catalogue's engines.ray_fallback_until)."""

OTHER_ACCELERATORS = ("google.com/tpu", "aws.amazon.com/neuron", "amd.com/gpu", "gpu.intel.com/")
"""Extended resources of accelerators other than NVIDIA GPUs (TPU, Trainium/Inferentia, ROCm,
Intel): a vLLM engine on them is not short of nvidia.com/gpu."""


def _factors(site: EngineSite) -> tuple[int, int, int] | None:
    """(TP, PP, local DP) as vLLM reads them (unset: 1; local DP defaults to DP); None
    when one is not a positive integer (a malformed one included)."""
    local = site.int_flag("data_parallel_size_local")
    dp = site.int_flag("data_parallel_size") if local is None else local
    values = [
        *(site.int_flag(k) for k in ("tensor_parallel_size", "pipeline_parallel_size")),
        dp,
    ]
    sizes = [1 if v is None else v for v in values]
    if any(not isinstance(v, int) or v < 1 for v in sizes):
        return None
    tp, pp, world_dp = (int(v) for v in sizes)
    return tp, pp, world_dp


MIG_PREFIX = "nvidia.com/mig-"
MIG_GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"
"""NVIDIA's MIG user guide, CUDA Device Enumeration: "regardless of how many MIG devices
are created (or made available to a container), a single CUDA process can only enumerate a
single MIG device"."""
GROUP_KINDS = frozenset({"LeaderWorkerSet", "ModelServing"})
"""Kinds whose Pods may run one engine together (:func:`pod_group`)."""
# KubeRay kinds and AIBrix's RayClusterFleet (view.kinds), whose Pods start Ray themselves.
JOINING_KINDS = RAY_KINDS | GROUP_KINDS
SERVING_RUNTIMES = frozenset({"ServingRuntime", "ClusterServingRuntime"})


def _joins_a_ray_cluster(obj: K8sObject, container: ContainerRef, engine: EngineArgs) -> bool:
    """Does the engine's process run on a node of a Ray cluster it did not start alone:
    a Ray or LeaderWorkerSet Pod, a script that runs ``ray start``, or a RAY_ADDRESS?"""
    if obj.kind in JOINING_KINDS or engine.ray_start is not None:
        return True
    if container.raw.get("envFrom"):
        return True  # a ConfigMap or Secret may set RAY_ADDRESS: not known here
    return any(isinstance(e, Mapping) and e.get("name") == "RAY_ADDRESS" for e in container.env())


def _ray_cluster(site: EngineSite) -> tuple[bool, dict[str, Value]]:
    """An engine whose script runs ``ray start`` and leaves the executor unset, larger than
    its container's GPUs: whether its release may use the Ray cluster's GPUs (True: not
    evaluated; False: vLLM refuses it) and the case (``fallback``) with its figures."""
    releases = catalogs.vllm_releases()
    until = releases.ray_fallback_until
    image = site.image
    release = site.release().found
    version = release.version if release is not None else None
    case: dict[str, Value] = {"started": site.engine.ray_start, "until": until, "version": version}
    if until is None:
        return True, {**case, "fallback": "uncatalogued"}
    if version is None:
        where = release.where if release is not None else f"image {image}"
        return True, {**case, "fallback": "release-unknown", "where": where}
    if parse_version(version) < parse_version(until):
        return True, {**case, "fallback": "picks-ray", "source": releases.ray_fallback_last_source}
    return False, {**case, "fallback": "refuses", "source": releases.ray_fallback_source}


@dataclass(frozen=True)
class _Engine:
    """One container engine with readable parallel sizes, as V001 judges it."""

    obj: K8sObject
    container: ContainerRef
    site: EngineSite
    tp: int
    pp: int
    dp: int
    limit: Fraction

    @property
    def need(self) -> int:
        """The GPUs vLLM starts workers on: TP x PP x local DP."""
        return self.tp * self.pp * self.dp

    def verdict(self, decision: Decision, reason: str, **values: Value) -> Verdict:
        """A verdict on this engine (its label, sizes and GPU limit, and *values*); a
        violation points at the container's resources."""
        return Verdict(
            decision,
            reason,
            values={
                "container": _label(self.site),
                "tp": self.tp,
                "pp": self.pp,
                "dp": self.dp,
                "limit": self.limit,
                **values,
            },
            thresholds={"need": self.need},
            sources=(MIG_GUIDE,) if reason == "tp-over-mig" else (),
            path=(*self.container.path, "resources") if decision != "not_evaluated" else (),
        )


def _multi_node(e: _Engine) -> list[Verdict] | None:
    """Multiprocessing across nodes (``--nnodes N --node-rank R``, workers --headless): each
    node runs its share of the world (vllm/config/parallel.py local_world_size = world_size //
    nnodes), one worker per local GPU. ``None``: the engine is not split so."""
    stated = e.site.int_flag("nnodes")
    nnodes = stated if isinstance(stated, int) else None
    if nnodes is None or nnodes <= 1 or e.need % nnodes:
        return None
    if e.need // nnodes == e.limit:
        return []
    return [e.verdict("violation", "nnodes-share", nnodes=nnodes, per_node=e.need // nnodes)]


def _ray_pg_source() -> str:
    """Where vLLM's Ray executor waits for its placement group of one GPU per worker and
    raises after the timeout: read in the reference release's installed wheel (the release
    the engines extra pins; vllm/executor/ray_utils.py before V1)."""
    return (
        f"vllm@v{catalogs.reference_vllm()}:vllm/v1/executor/ray_utils.py, PG_WAIT_TIMEOUT 1800 s"
    )


OWN_CLUSTER_KINDS = frozenset({"RayCluster", "RayClusterFleet"})
"""Ray kinds whose cluster runs no Serve application or job of its own: an engine in the head
Pod is the only consumer of the cluster's GPUs the manifest shows."""


def _head_cluster_gpus(ctx: RuleContext, e: _Engine) -> tuple[Fraction, Fraction] | None:
    """(fewest, most) GPUs Ray advertises in the cluster whose head Pod runs the engine: the
    head group's plus each worker group's Pods (``replicas``, or min to max with the
    autoscaler) times the GPUs each advertises (rayStartParams num-gpus or the container's
    limit, as KubeRay sets it). None where the engine is not in the head Pod of a RayCluster
    or RayClusterFleet, or a group's GPUs cannot be read."""
    if e.obj.kind not in OWN_CLUSTER_KINDS or e.container.raw.get("envFrom"):
        return None  # (a ConfigMap or Secret may point RAY_ADDRESS at another cluster)
    if any(isinstance(v, Mapping) and v.get("name") == "RAY_ADDRESS" for v in e.container.env()):
        return None
    groups = ray_groups(e.obj)
    if not any(g.is_head and g.pod.path == e.container.pod.path for g in groups):
        return None
    autoscaling = autoscaling_enabled(e.obj)
    low = high = Fraction(0)
    for group in groups:
        try:
            gpus = group.effective_gpus(ctx.config.gpu_resources)
        except ValueError:
            return None
        if group.is_head:
            low, high = low + gpus, high + gpus
            continue
        _, fewest, most = group.replica_bounds(autoscaling)
        low, high = low + fewest * gpus, high + most * gpus
    return low, high


def _executor(ctx: RuleContext, e: _Engine) -> list[Verdict] | None:
    """KServe worker Pods, the Ray executor without a Ray cluster, tensor parallelism over
    MIG slices; ``None``: none of them settles the engine."""
    obj, container, engine = e.obj, e.container, e.site.engine
    if pod_group(container.pod) is not None or obj.kind == "LeaderWorkerSet":
        pass  # a group (or a worker, or a group of one): its GPUs are counted
    elif obj.kind in MULTI_NODE_KINDS and container.pod.spec.get("workerSpec") is not None:
        return [e.verdict("not_evaluated", "kserve-worker-spec")]
    elif str(engine.get("distributed_executor_backend") or "") == "ray" and e.need > e.limit:
        if _joins_a_ray_cluster(obj, container, engine):
            # The engine runs in the head of a Ray cluster the manifest describes whole: its
            # workers' GPUs are the cluster's. Exactly the engine's at every size: nothing
            # to report; otherwise the record stands (other work may use the rest).
            cluster = _head_cluster_gpus(ctx, e)
            if cluster is not None and cluster[0] == cluster[1] == e.need:
                return []
            if cluster is not None and cluster[1] < e.need:
                return [e.verdict("violation", "ray-cluster-too-small", cluster=cluster[1])]
            return [e.verdict("not_evaluated", "ray-executor-joins-cluster")]
        return [e.verdict("violation", "ray-executor-no-cluster")]
    limits = container.resources("limits")
    mig = tuple(sorted(str(k) for k in limits if str(k).startswith(MIG_PREFIX)))
    if mig and e.tp > 1:
        return [e.verdict("violation", "tp-over-mig", mig=mig)]
    return None


def _no_gpu(e: _Engine) -> Verdict | None:
    """An engine that asks for no GPU and may need none: not evaluated, with why."""
    obj, container = e.obj, e.container
    if obj.kind in SERVING_RUNTIMES:
        # A runtime alone is a template: KServe merges the InferenceService's predictor
        # resources (its GPUs) into this container (MergeRuntimeContainers).
        return e.verdict("not_evaluated", "runtime-template", kind=obj.kind)
    if e.site.release().found is None:
        # A generic image (ubuntu) that installs vLLM at run time and asks for no GPU:
        # a CPU, Neuron or TPU build needs none, so the build decides (production-stack's
        # disaggregated prefill template targets Trainium this way).
        return e.verdict("not_evaluated", "generic-image", image=f"{container.image}")
    other = sorted(
        str(k)
        for section in ("limits", "requests")
        for k in container.resources(section)
        if str(k).startswith(OTHER_ACCELERATORS)
    )
    if other:
        # vllm-tpu, Neuron or ROCm builds count their own devices, not NVIDIA GPUs.
        return e.verdict("not_evaluated", "other-accelerator", resource=other[0])
    return None


def _gpu_count(ctx: RuleContext, e: _Engine) -> list[Verdict]:
    """TP x PP x local DP against the GPUs the engine gets: its container's, or its Pod
    group's (leader + workers)."""
    group = pod_group(e.container.pod)
    grouped: dict[str, Value] = {}
    got = e.limit
    if group is not None:
        size, per_worker = group[0], group[1].gpu_count(ctx.config.gpu_resources)
        got += (size - 1) * per_worker
        grouped = {"size": size, "per_worker": per_worker}
    fallback: dict[str, Value] = {}
    executor_unset = e.site.flag("distributed_executor_backend") is None
    if e.site.engine.ray_start is not None and e.need > got and executor_unset:
        may_use, fallback = _ray_cluster(e.site)
        if may_use:
            return [e.verdict("not_evaluated", "ray-cluster-fallback", got=got, **fallback)]
    if Fraction(e.need) == got:
        return []
    unjudged = _no_gpu(e) if got == 0 else None
    if unjudged is not None:
        return [unjudged]
    return [e.verdict("violation", "gpus-mismatch", got=got, **grouped, **fallback)]


def _placements(obj: K8sObject) -> Iterator[Verdict]:
    """A RayService engine's explicit placement bundles hold exactly TP x PP GPUs."""
    placements, _ = engine_placements(obj)
    for placement in placements:
        if not placement.explicit:
            continue  # Ray Serve LLM makes TP x PP bundles of one GPU itself
        world = placement.tp * placement.pp
        gpu_bundles = [g for g in placement.bundle_gpus if g > 0]
        whole = all(g.denominator == 1 for g in gpu_bundles)
        held: Fraction = sum(gpu_bundles, Fraction(0)) if whole else Fraction(len(gpu_bundles))
        if held == world:
            continue
        yield Verdict(
            "violation",
            "bundles-mismatch",
            values={
                "where": placement.where,
                "tp": placement.tp,
                "pp": placement.pp,
                "whole_gpu_bundles": whole,
                "bundles": len(gpu_bundles),
                "held": held,
            },
            thresholds={"world": world},
            path=("spec", "serveConfigV2"),
        )


def _label(site: EngineSite) -> str:
    """The container, and for an engine a controller's preset writes, which command that is
    (the manifest states only its sizes: KServe's ``spec.parallelism``)."""
    assert site.container is not None  # container engines only
    if site.preset:
        return f"{site.container.label}, running {site.label},"
    return site.container.label


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """TP x PP (x local DP) equals the GPUs the engine gets: the container or the bundles."""
    # A KServe preset's engine too: TP x PP x local DP against the GPUs needs no release.
    for site in engine_sites(ctx, obj, ray_pods=True, presets=True):
        container, engine = site.container, site.engine
        if container is None:
            continue  # Ray Serve LLM engines: their placement bundles, below
        limit = container.gpu_limit(ctx.config.gpu_resources)
        factors = _factors(site)
        label = _label(site)
        if factors is None:
            bad = tuple(w for k, w in engine.malformed.items() if k.endswith("parallel_size"))
            yield Verdict("not_evaluated", "sizes-unread", values={"container": label, "bad": bad})
            continue
        keys = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
        if not engine.complete and all(engine.get(k) is None for k in keys):
            if limit > 1:
                values: dict[str, Value] = {"container": label, "limit": limit}
                yield Verdict("not_evaluated", "sizes-outside-manifest", values=values)
            continue
        e = _Engine(obj, container, site, *factors, limit)
        settled = _multi_node(e)
        settled = _executor(ctx, e) if settled is None else settled
        yield from _gpu_count(ctx, e) if settled is None else settled
    if obj.kind == "RayService":
        yield from _placements(obj)


def _formula(v: Mapping[str, Value]) -> str:
    tp, pp, dp = (_int(v[k]) for k in ("tp", "pp", "dp"))
    text = f"tensor_parallel_size {tp} x pipeline_parallel_size {pp}"
    if dp > 1:
        text += f" x local data parallel {dp}"
    return f"{text} = {tp * pp * dp}"


def _int(value: Value) -> int:
    assert isinstance(value, int)
    return value


def _gpus(value: Value) -> str:
    assert isinstance(value, int | Fraction)
    return fmt_gpus(value)


def _fallback_text(v: Mapping[str, Value], need: Value) -> str:
    """Why a ``ray start`` engine's release may or may not use the Ray cluster's GPUs."""
    started, until, version = f"`{v['started']}`", v["until"], v["version"]
    unset = f"it runs {started} and leaves --distributed-executor-backend unset"
    if v["fallback"] == "uncatalogued":
        return (
            f"{unset}, and the release catalogue does not say which vLLM releases then pick "
            "the Ray executor themselves"
        )
    if v["fallback"] == "release-unknown":
        return (
            f"{unset}, and the vLLM release is unknown ({v['where']}): releases before {until} "
            "pick the Ray executor themselves for an engine larger than the node's GPUs, "
            "later ones refuse it"
        )
    if v["fallback"] == "picks-ray":
        return (
            f"{unset}: vLLM {version} then picks the Ray executor itself for an engine of "
            f"{need} GPUs on a node with {_gpus(v['got'])} ({v['source']}), so the others come "
            "from the Ray cluster it joins"
        )
    return (
        f"vLLM {version} refuses it at startup: it runs {started}, but from {until} an unset "
        "--distributed-executor-backend does not use the Ray cluster for an engine larger "
        f"than the node's GPUs ({v['source']}); pass --distributed-executor-backend ray to "
        "use its GPUs"
    )


def _unread_message(v: Mapping[str, Value]) -> str:
    bad = v["bad"]
    assert isinstance(bad, tuple)
    if not bad:
        return "tensor/pipeline/data parallel sizes are not integers"
    return (
        f"{', '.join(repr(w) for w in bad)} is one argument holding a flag and its value, "
        "which vLLM refuses (V013); the parallel size is neither that value nor its default. "
        "Split it into two list items"
    )


def _nnodes_message(v: Mapping[str, Value]) -> str:
    limit, per_node = v["limit"], _int(v["per_node"])
    assert isinstance(limit, Fraction)
    effect = (
        "vLLM starts one worker per local GPU and fails at startup when it finds fewer"
        if limit < per_node
        else f"{fmt_gpus(limit - per_node)} GPU(s) stay allocated and idle"
    )
    return (
        f"runs its share of a vLLM engine of {_formula(v)} GPUs over --nnodes {v['nnodes']}: "
        f"{per_node} GPU(s) on each node, but its GPU limit is {fmt_gpus(limit)}; {effect}"
    )


def _mismatch_message(v: Mapping[str, Value], need: Value) -> str:
    got, limit = v["got"], v["limit"]
    assert isinstance(got, Fraction) and isinstance(need, int)
    where = f"its GPU limit is {_gpus(limit)}"
    if "size" in v:
        size = _int(v["size"])
        where = (
            f"its group of {size} Pods has {fmt_gpus(got)} GPUs (leader {_gpus(limit)} + "
            f"{size - 1} x {_gpus(v['per_worker'])})"
        )
    if "fallback" in v:
        effect = _fallback_text(v, need)
    elif got < need:
        effect = "vLLM starts one worker per GPU and fails at startup when it finds fewer GPUs"
    else:
        effect = f"{fmt_gpus(got - need)} GPU(s) stay allocated and idle"
    return f"runs a vLLM engine of {_formula(v)} GPUs but {where}; {effect}"


def _bundles_message(v: Mapping[str, Value], world: Value) -> str:
    held = v["held"]
    assert isinstance(held, Fraction) and isinstance(world, int)
    what = (
        f"its placement_group_config bundles hold {fmt_gpus(held)} GPUs"
        if v["whole_gpu_bundles"]
        else f"its placement_group_config has {v['bundles']} fractional GPU bundles"
    )
    effect = (
        "vLLM's Ray executor places one GPU worker per bundle and fails to start"
        if held < world
        else f"{fmt_gpus(held - world)} reserved GPU(s) stay idle"
    )
    return (
        f"{v['where']} runs tensor_parallel_size {v['tp']} x pipeline_parallel_size "
        f"{v['pp']} = {world} GPU workers but {what}; {effect}"
    )


_ENGINE_MESSAGES: Mapping[str, Callable[[Mapping[str, Value]], str]] = {
    "sizes-unread": lambda v: f": {_unread_message(v)}",
    "sizes-outside-manifest": lambda v: (
        f" has {_gpus(v['limit'])} GPUs but its parallel sizes may come from arguments "
        "outside the manifest ($@ or variables)"
    ),
    "nnodes-share": lambda v: f" {_nnodes_message(v)}",
    "kserve-worker-spec": lambda v: " spans the workerSpec Pods; their GPUs are set by KServe",
    "ray-executor-joins-cluster": lambda v: (
        f" uses the Ray executor; the GPUs beyond its own {_gpus(v['limit'])} come from the "
        "Ray cluster it joins"
    ),
    "ray-cluster-too-small": lambda v: (
        f" runs a vLLM engine of {_formula(v)} GPUs with --distributed-executor-backend ray in "
        f"the head Pod of its Ray cluster, but the cluster's head and worker groups advertise "
        f"at most {_gpus(v['cluster'])} GPUs: the engine's placement group of one GPU per "
        "worker never fits, vLLM waits for it and fails at startup (_wait_until_pg_ready, "
        f"{_ray_pg_source()}). Add worker Pods (or GPUs) up to {_formula(v).rsplit(' ', 1)[-1]} "
        "GPUs in all, or lower the parallel sizes"
    ),
    "ray-executor-no-cluster": lambda v: (
        f" runs a vLLM engine of {_formula(v)} GPUs with --distributed-executor-backend ray, "
        "but it joins no Ray cluster (no `ray start` before the server, no RAY_ADDRESS, not a "
        "Ray or LeaderWorkerSet Pod): ray.init() starts a local Ray instance holding the "
        f"Pod's {_gpus(v['limit'])} GPU(s), and the engine's placement group of one GPU per "
        "worker never fits"
    ),
    "tp-over-mig": lambda v: (
        f" runs tensor_parallel_size {v['tp']} over {_gpus(v['limit'])} MIG slice(s) "
        f"({', '.join(str(m) for m in cast(tuple[str, ...], v['mig']))}): a CUDA process "
        f"enumerates one MIG device only ({MIG_GUIDE}), so vLLM finds one GPU and fails at "
        "startup. Use tensor_parallel_size 1 per MIG slice (one engine per slice) or whole GPUs"
    ),
    "runtime-template": lambda v: (
        f" is a {v['kind']} template with no GPU limit: its GPUs come from the "
        "InferenceService that selects it (check them together)"
    ),
    "generic-image": lambda v: (
        f" requests no GPU and its image {v['image']} is not a vLLM image: the vLLM build it "
        "runs (CUDA, CPU, Neuron, TPU) and its accelerator are not in the manifest"
    ),
    "other-accelerator": lambda v: (
        f" requests {v['resource']}, not NVIDIA GPUs: its vLLM build runs on that "
        "accelerator, which this rule does not count"
    ),
}


def message(verdict: Verdict) -> str:
    """The prose of a V001 verdict."""
    v, need = verdict.values, verdict.thresholds.get("need")
    if verdict.reason == "bundles-mismatch":
        return _bundles_message(v, verdict.thresholds["world"])
    if verdict.reason == "ray-cluster-fallback":
        return f"{v['container']}: {_fallback_text(v, need)}"
    if verdict.reason == "gpus-mismatch":
        return f"{v['container']} {_mismatch_message(v, need)}"
    return f"{v['container']}{_ENGINE_MESSAGES[verdict.reason](v)}"


RULE = folder_rule(
    __name__,
    judged(judge, message),
    facts={"ray_fallback_sources": _RAY_FALLBACK_REFS, "MIG_GUIDE": MIG_GUIDE},
)
