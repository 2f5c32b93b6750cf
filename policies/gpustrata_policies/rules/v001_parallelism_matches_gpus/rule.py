"""V001 parallelism-matches-gpus."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction

from gpustrata.catalog.vllm_releases import source_url
from gpustrata.core.versions import parse_version
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.controllers import pod_group
from gpustrata_policies.view.engines import image_release
from gpustrata_policies.view.kuberay import engine_placements, fmt_gpus
from gpustrata_policies.view.objects import ContainerRef, K8sObject
from gpustrata_policies.view.ray import container_engines
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


def _factors(engine: EngineArgs) -> tuple[int, int, int] | None:
    """(TP, PP, local DP) as vLLM reads them (unset: 1; local DP defaults to DP)."""
    values = []
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        values.append(engine.get_int(key) if engine.get(key) is not None else 1)
    if engine.get("data_parallel_size_local") is not None:
        values.append(engine.get_int("data_parallel_size_local"))
    else:
        dp = engine.get("data_parallel_size")
        values.append(engine.get_int("data_parallel_size") if dp is not None else 1)
    if any(v is None or v < 1 for v in values):
        return None
    tp, pp, dp = (int(v) for v in values if v is not None)
    return tp, pp, dp


MIG_PREFIX = "nvidia.com/mig-"
MIG_GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"
"""NVIDIA's MIG user guide, CUDA Device Enumeration: "regardless of how many MIG devices
are created (or made available to a container), a single CUDA process can only enumerate a
single MIG device"."""
GROUP_KINDS = frozenset({"LeaderWorkerSet", "ModelServing"})
"""Kinds whose Pods may run one engine together (:func:`pod_group`)."""
RAY_KINDS = frozenset({"RayCluster", "RayService", "RayJob", *GROUP_KINDS})
SERVING_RUNTIMES = frozenset({"ServingRuntime", "ClusterServingRuntime"})


def _joins_a_ray_cluster(obj: K8sObject, container: ContainerRef, engine: EngineArgs) -> bool:
    """Does the engine's process run on a node of a Ray cluster it did not start alone:
    a Ray or LeaderWorkerSet Pod, a script that runs ``ray start``, or a RAY_ADDRESS?"""
    if obj.kind in RAY_KINDS or engine.ray_start is not None:
        return True
    if container.raw.get("envFrom"):
        return True  # a ConfigMap or Secret may set RAY_ADDRESS: not known here
    return any(isinstance(e, Mapping) and e.get("name") == "RAY_ADDRESS" for e in container.env())


def _ray_cluster(engine: EngineArgs, image: object, need: int, limit: Fraction) -> tuple[bool, str]:
    """An engine whose script runs ``ray start`` and leaves the executor unset, larger than
    its container's GPUs: (whether its release may use the Ray cluster's GPUs, why). True:
    the reason it is not evaluated; False: what the violation adds."""
    releases = catalogs.vllm_releases()
    until = releases.ray_fallback_until
    release = image_release(image)
    version = release.version if release is not None else None
    started = f"`{engine.ray_start}`"
    if until is None:
        return True, (
            f"it runs {started} and leaves --distributed-executor-backend unset, and the "
            "release catalogue does not say which vLLM releases then pick the Ray executor "
            "themselves"
        )
    if version is None:
        where = release.where if release is not None else f"image {image}"
        return True, (
            f"it runs {started} and leaves --distributed-executor-backend unset, and the "
            f"vLLM release is unknown ({where}): releases before {until} pick the Ray "
            "executor themselves for an engine larger than the node's GPUs, later ones "
            "refuse it"
        )
    if parse_version(version) < parse_version(until):
        return True, (
            f"it runs {started} and leaves --distributed-executor-backend unset: vLLM "
            f"{version} then picks the Ray executor itself for an engine of {need} GPUs on "
            f"a node with {fmt_gpus(limit)} ({releases.ray_fallback_last_source}), so the "
            "others come from the Ray cluster it joins"
        )
    return False, (
        f"vLLM {version} refuses it at startup: it runs {started}, but from {until} an "
        "unset --distributed-executor-backend does not use the Ray cluster for an engine "
        f"larger than the node's GPUs ({releases.ray_fallback_source}); pass "
        "--distributed-executor-backend ray to use its GPUs"
    )


def _formula(tp: int, pp: int, dp: int) -> str:
    text = f"tensor_parallel_size {tp} x pipeline_parallel_size {pp}"
    if dp > 1:
        text += f" x local data parallel {dp}"
    return f"{text} = {tp * pp * dp}"


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """TP x PP (x local DP) equals the GPUs the engine gets: the container or the bundles."""
    extra = ctx.config.gpu_resources
    for container, engine in container_engines(obj):
        pod = container.pod
        factors = _factors(engine)
        limit = container.gpu_limit(extra)
        if factors is None:
            bad = [w for k, w in engine.malformed.items() if k.endswith("parallel_size")]
            yield ctx.not_evaluated(
                obj,
                f"{container.label}: "
                + (
                    f"{', '.join(repr(w) for w in bad)} is one argument holding a flag and its "
                    "value, which vLLM refuses (V013); the parallel size is neither that value "
                    "nor its default. Split it into two list items"
                    if bad
                    else "tensor/pipeline/data parallel sizes are not integers"
                ),
            )
            continue
        tp, pp, dp = factors
        need = tp * pp * dp
        set_here = any(
            engine.get(k) is not None
            for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
        )
        if not engine.complete and not set_here:
            if limit > 1:
                yield ctx.not_evaluated(
                    obj,
                    f"{container.label} has {fmt_gpus(limit)} GPUs but its parallel sizes may "
                    "come from arguments outside the manifest ($@ or variables)",
                )
            continue
        got, where = limit, f"its GPU limit is {fmt_gpus(limit)}"
        nnodes = engine.get_int("nnodes") if engine.get("nnodes") is not None else None
        if nnodes is not None and nnodes > 1 and need % nnodes == 0:
            # Multiprocessing across nodes (`--nnodes N --node-rank R`, workers --headless):
            # each node runs its share of the world (vllm/config/parallel.py
            # local_world_size = world_size // nnodes), one worker per local GPU.
            if need // nnodes == limit:
                continue
            yield ctx.violation(
                obj,
                f"{container.label} runs its share of a vLLM engine of {_formula(tp, pp, dp)} "
                f"GPUs over --nnodes {nnodes}: {need // nnodes} GPU(s) on each node, but its "
                f"GPU limit is {fmt_gpus(limit)}; "
                + (
                    "vLLM starts one worker per local GPU and fails at startup when it finds fewer"
                    if limit < need // nnodes
                    else f"{fmt_gpus(limit - need // nnodes)} GPU(s) stay allocated and idle"
                ),
                (*container.path, "resources"),
            )
            continue
        group = pod_group(pod)
        if group is not None:
            size, worker = group
            per_worker = worker.gpu_count(extra)
            got = limit + (size - 1) * per_worker
            where = (
                f"its group of {size} Pods has {fmt_gpus(got)} GPUs (leader "
                f"{fmt_gpus(limit)} + {size - 1} x {fmt_gpus(per_worker)})"
            )
        elif obj.kind == "LeaderWorkerSet":
            pass  # a worker, or a group of one: its own GPUs
        elif obj.kind in MULTI_NODE_KINDS and pod.spec.get("workerSpec") is not None:
            yield ctx.not_evaluated(
                obj, f"{container.label} spans the workerSpec Pods; their GPUs are set by KServe"
            )
            continue
        elif str(engine.get("distributed_executor_backend") or "") == "ray" and need > limit:
            if _joins_a_ray_cluster(obj, container, engine):
                yield ctx.not_evaluated(
                    obj,
                    f"{container.label} uses the Ray executor; the GPUs beyond its own "
                    f"{fmt_gpus(limit)} come from the Ray cluster it joins",
                )
                continue
            yield ctx.violation(
                obj,
                f"{container.label} runs a vLLM engine of {_formula(tp, pp, dp)} GPUs with "
                f"--distributed-executor-backend ray, but it joins no Ray cluster (no `ray "
                f"start` before the server, no RAY_ADDRESS, not a Ray or LeaderWorkerSet Pod): "
                f"ray.init() starts a local Ray instance holding the Pod's {fmt_gpus(limit)} "
                "GPU(s), and the engine's placement group of one GPU per worker never fits",
                (*container.path, "resources"),
            )
            continue
        mig = sorted(str(k) for k in container.resources("limits") if str(k).startswith(MIG_PREFIX))
        if mig and tp > 1:
            yield ctx.violation(
                obj,
                f"{container.label} runs tensor_parallel_size {tp} over {fmt_gpus(limit)} MIG "
                f"slice(s) ({', '.join(mig)}): a CUDA process enumerates one MIG device "
                f"only ({MIG_GUIDE}), so vLLM finds one GPU and fails at startup. Use "
                "tensor_parallel_size 1 per MIG slice (one engine per slice) or whole GPUs",
                (*container.path, "resources"),
            )
            continue
        refused = None
        if (
            engine.ray_start is not None
            and need > got
            and engine.get("distributed_executor_backend") is None
        ):
            may_use, why = _ray_cluster(engine, container.image, need, got)
            if may_use:
                yield ctx.not_evaluated(obj, f"{container.label}: {why}")
                continue
            refused = why
        if Fraction(need) == got:
            continue
        if got == 0 and obj.kind in SERVING_RUNTIMES:
            # A runtime alone is a template: KServe merges the InferenceService's predictor
            # resources (its GPUs) into this container (MergeRuntimeContainers).
            yield ctx.not_evaluated(
                obj,
                f"{container.label} is a {obj.kind} template with no GPU limit: its GPUs come "
                "from the InferenceService that selects it (check them together)",
            )
            continue
        if got == 0 and image_release(container.image) is None:
            # A generic image (ubuntu) that installs vLLM at run time and asks for no GPU:
            # a CPU, Neuron or TPU build needs none, so the build decides (production-stack's
            # disaggregated prefill template targets Trainium this way).
            yield ctx.not_evaluated(
                obj,
                f"{container.label} requests no GPU and its image {container.image} is not "
                "a vLLM image: the vLLM build it runs (CUDA, CPU, Neuron, TPU) and its "
                "accelerator are not in the manifest",
            )
            continue
        other = sorted(
            str(k)
            for section in ("limits", "requests")
            for k in container.resources(section)
            if str(k).startswith(OTHER_ACCELERATORS)
        )
        if got == 0 and other:
            # vllm-tpu, Neuron or ROCm builds count their own devices, not NVIDIA GPUs.
            yield ctx.not_evaluated(
                obj,
                f"{container.label} requests {other[0]}, not NVIDIA GPUs: its vLLM build "
                "runs on that accelerator, which this rule does not count",
            )
            continue
        if refused is not None:
            effect = refused
        elif got < need:
            effect = "vLLM starts one worker per GPU and fails at startup when it finds fewer GPUs"
        else:
            effect = f"{fmt_gpus(got - need)} GPU(s) stay allocated and idle"
        yield ctx.violation(
            obj,
            f"{container.label} runs a vLLM engine of {_formula(tp, pp, dp)} GPUs but "
            f"{where}; {effect}",
            (*container.path, "resources"),
        )
    if obj.kind != "RayService":
        return
    placements, _ = engine_placements(obj)
    for placement in placements:
        if not placement.explicit:
            continue  # Ray Serve LLM makes TP x PP bundles of one GPU itself
        world = placement.tp * placement.pp
        gpu_bundles = placement.bundle_gpus
        gpu_bundles = [g for g in gpu_bundles if g > 0]
        whole = all(g.denominator == 1 for g in gpu_bundles)
        held: Fraction = sum(gpu_bundles, Fraction(0)) if whole else Fraction(len(gpu_bundles))
        if held == world:
            continue
        what = (
            f"its placement_group_config bundles hold {fmt_gpus(held)} GPUs"
            if whole
            else f"its placement_group_config has {len(gpu_bundles)} fractional GPU bundles"
        )
        effect = (
            "vLLM's Ray executor places one GPU worker per bundle and fails to start"
            if held < world
            else f"{fmt_gpus(held - world)} reserved GPU(s) stay idle"
        )
        yield ctx.violation(
            obj,
            f"{placement.where} runs tensor_parallel_size {placement.tp} x "
            f"pipeline_parallel_size {placement.pp} = {world} GPU workers but {what}; "
            f"{effect}",
            ("spec", "serveConfigV2"),
        )


RULE = folder_rule(
    __name__, check, facts={"ray_fallback_sources": _RAY_FALLBACK_REFS, "MIG_GUIDE": MIG_GUIDE}
)
