"""The planner: every number the stack does not state, derived from the ones it does.

Pure functions over a :class:`~gpustrata.spec.StackSpec` and the catalogues; no
Pulumi import. Each derived value is recorded in a :class:`Ledger` with its source
so that ``gpustrata plan`` can show the working.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

from gpustrata.catalog.architectures import (
    ModelArchitecture,
    ModelCatalog,
    ModelCatalogError,
    load_model_catalog,
)
from gpustrata.catalog.aws import instance_vcpus, quota_increase_command, vcpu_quota
from gpustrata.catalog.hardware import HardwareCatalog
from gpustrata.catalog.model_sources import ModelSources, local_config_path
from gpustrata.core.quantity import format_bytes, format_cores, kubelet_reserved
from gpustrata.planning.model_capacity import estimate_for_model
from gpustrata.planning.multinode import MultiNodePlan, MultiNodeProblem, resolve_multi_node
from gpustrata.planning.node_pools import _plan_karpenter, _plan_pool
from gpustrata.planning.plan_types import (
    ModelPlan,
    PlanError,
    PoolPlan,
    Probes,
    RayLayout,
    StackPlan,
)
from gpustrata.planning.provenance import Ledger
from gpustrata.planning.routing import route_timeout
from gpustrata.planning.serving import (
    ServingAtSettings,
    WorkloadTooLong,
    serving_at_settings,
)
from gpustrata.planning.sizing import slo_misses
from gpustrata.spec.fields import is_model_path
from gpustrata.spec.serving import ModelSpec
from gpustrata.spec.stack import StackSpec
from gpustrata.vllm.calibration import measured_margin
from gpustrata.vllm.capacity import CapacityError, CapacityEstimate, gib, resolve_architecture

# The startup window is the capacity planner's estimate (weights / load bandwidth + engine
# init) x STARTUP_SAFETY_FACTOR. Only a model whose architecture is unknown (not in the
# catalogue, no local config.json) or whose settings cannot be estimated falls back to
# this fixed budget: generous enough for a 70B model streamed from S3 at ~1 GB/s plus init.
FALLBACK_STARTUP_BUDGET_S = 1800
STARTUP_PERIOD_S = 10
LIVENESS_PERIOD_S = 10
LIVENESS_FAILURES = 3
PROBE_TIMEOUT_S = 5
READINESS_PERIOD_S = 5


def plan_stack(
    spec: StackSpec,
    hardware: HardwareCatalog,
    models: ModelCatalog | None = None,
    base_dir: Path | None = None,
    sources: ModelSources | None = None,
) -> StackPlan:
    """Derive every value the components need; raises :class:`PlanError` on missing facts.

    ``models`` is the model catalogue (default: the built-in one); *sources* (a models
    folder, the Hugging Face cache) are asked before it; a model given as a path to a
    local config.json resolves against ``base_dir`` (default: the working directory).
    """
    ledger = Ledger()
    catalog = models or load_model_catalog()
    create = spec.cluster.mode == "create"
    pools = {
        p.name: _plan_pool(p, i, hardware, ledger, create=create)
        for i, p in enumerate(spec.node_pools)
    }
    karpenter = _plan_karpenter(spec, ledger)
    planned = {
        m.name: _plan_model(m, i, pools[m.pool], ledger, catalog, base_dir, sources, create)
        for i, m in enumerate(spec.models)
    }
    _check_group_nodes(spec, planned)
    if spec.cluster.mode == "create":
        _check_disks(spec, planned)
        _quota_needs(spec, pools, hardware, ledger)
    return StackPlan(
        spec=spec,
        pools=pools,
        models=planned,
        derived=ledger.items,
        karpenter=karpenter,
        sources=sources,
    )


def _check_group_nodes(spec: StackSpec, planned: dict[str, ModelPlan]) -> None:
    """The multi-node engines of a pool fit its max_size together: each of their Pods takes
    a whole node, and a group whose last Pod finds no node never starts its engine."""
    for index, pool in enumerate(spec.node_pools):
        groups = [
            (mp.name, mp.multi_node.nodes * mp.max_replicas)
            for mp in planned.values()
            if mp.pool.name == pool.name and mp.multi_node is not None
        ]
        need = sum(n for _, n in groups)
        if need > pool.max_size:
            each = ", ".join(f"{name} {n}" for name, n in groups)
            raise PlanError(
                f"gpustrata:stack.node_pools[{index}].max_size",
                f"the multi-node engines on pool {pool.name!r} need {need} whole nodes at "
                f"their largest replica count ({each}), but its max_size is {pool.max_size}: "
                f"raise max_size to {need} or move a model to another pool",
            )


def _quota_needs(
    spec: StackSpec, pools: dict[str, PoolPlan], hardware: HardwareCatalog, ledger: Ledger
) -> None:
    """The EC2 vCPUs each quota must allow, at the pools' minimum and maximum size
    (``quotas.<code>``): a quota below the minimum fails `up`; the account's granted value
    is only known there (``aws service-quotas get-service-quota``)."""
    system = spec.cluster.system_pool
    rows: list[tuple[str, str, int, int, int]] = [
        (system.instance_type, system.capacity_type, system.min_size, system.max_size, 0)
    ]
    for pool in pools.values():
        p = pool.spec
        # A Karpenter pool may launch its largest alternative; it keeps no standing node.
        vcpus = max(
            [pool.instance.vcpu]
            + [i.vcpu for t in pool.instance_types if (i := hardware.instance(t)) is not None]
        )
        rows.append((pool.instance.name, p.capacity_type, p.min_size, p.max_size, vcpus))
    needs: dict[str, list[Any]] = {}
    for instance_type, capacity, low, high, vcpus in rows:
        if not vcpus:
            vcpus = instance_vcpus(instance_type) or 0
        quota = vcpu_quota(instance_type, capacity)
        if quota is None or not vcpus:
            ledger.add(
                f"quotas.{instance_type}",
                "unknown",
                "catalogue",
                f"no vCPU quota or vCPU count catalogued for {instance_type} ({capacity})",
            )
            continue
        entry = needs.setdefault(quota.code, [quota, 0, 0, []])
        entry[1] += low * vcpus
        entry[2] += high * vcpus
        entry[3].append(f"{low}..{high} x {instance_type} ({vcpus} vCPU)")
    for code, (quota, low, high, parts) in needs.items():
        default = quota.default_vcpus
        known = (
            f"; a new account's default is {default}, so request it before `up`"
            if default is not None and low > default
            else ""
        )
        ledger.add(
            f"quotas.{code}",
            f"{low}..{high} vCPU",
            "formula",
            f"{quota.name}: {' + '.join(parts)}; below {low} `up` fails to launch nodes{known}; "
            f"check: aws service-quotas get-service-quota --service-code ec2 --quota-code "
            f"{code}; raise: {quota_increase_command(quota, high, spec.cluster.region)} "
            f"({quota.sources[0]})",
        )


WEIGHTS_FALLBACK_GIB = 50
"""Ephemeral storage when the model's weight size is unknown (not in the model catalogue)."""
SCRATCH_GIB = 10
"""Room beside the weights: tokenizer and config files, torch.compile and Triton caches, logs."""


def engine_disk_gib(
    model: ModelSpec, capacity: CapacityEstimate | None, unavailable: str | None
) -> tuple[int, str]:
    """GiB of ephemeral storage (and cache emptyDir size) an engine Pod requests, and why.

    Every engine Pod (a Ray worker too: Ray Serve LLM downloads the model on each node of
    the placement group) holds a full copy of the weights unless they live on a PVC.
    """
    weights = model.weights
    if weights.source == "pvc" and weights.pvc_name:
        return SCRATCH_GIB, (
            f"weights on PVC {weights.pvc_name}; {SCRATCH_GIB} GiB for caches and logs"
        )
    if weights.cache_size_gib:
        return weights.cache_size_gib, "weights.cache_size_gib in the stack"
    if capacity is not None:
        total = capacity.weights.total_bytes
        size = math.ceil(total * 1.1 / 2**30) + SCRATCH_GIB
        return size, (
            f"weights {total / 2**30:.1f} GiB (capacity estimate) x 1.1 for partial downloads "
            f"+ {SCRATCH_GIB} GiB for caches and logs"
        )
    return WEIGHTS_FALLBACK_GIB, (
        f"fallback {WEIGHTS_FALLBACK_GIB} GiB: no weight size ({unavailable})"
    )


def _check_disks(spec: StackSpec, planned: dict[str, ModelPlan]) -> None:
    """A created pool's root volume holds its largest engine Pod's ephemeral storage: the
    node's ephemeral-storage capacity is that volume, so a larger request never schedules
    (and the volume also holds the OS and the container images)."""
    for index, pool in enumerate(spec.node_pools):
        for mp in planned.values():
            if mp.spec.pool != pool.name:
                continue
            need, why = engine_disk_gib(mp.spec, mp.capacity, mp.capacity_unavailable)
            if pool.disk_size_gib < need:
                raise PlanError(
                    f"gpustrata:stack.node_pools[{index}].disk_size_gib",
                    f"{pool.disk_size_gib} GiB is less than the {need} GiB of ephemeral storage "
                    f"each '{mp.spec.name}' engine Pod requests ({why}): the node's disk is its "
                    "ephemeral-storage capacity, so the Pod never schedules; raise "
                    f"disk_size_gib above {need} GiB plus room for the OS and container images, "
                    "or keep the weights on a PVC (weights.source pvc)",
                )


def _plan_model(
    model: ModelSpec,
    index: int,
    pool: PoolPlan,
    ledger: Ledger,
    catalog: ModelCatalog,
    base_dir: Path | None,
    sources: ModelSources | None = None,
    create: bool = False,
) -> ModelPlan:
    """One model's plan; *create*: the stack creates the cluster and its node groups."""
    key = f"models.{model.name}"
    auto = model.autoscaling
    if auto.kind != "none" or auto.max_replicas > auto.min_replicas:
        min_replicas, max_replicas = auto.min_replicas, auto.max_replicas
        why = "autoscaling.min_replicas / max_replicas"
    else:
        min_replicas = max_replicas = model.replicas
        why = "replicas (no autoscaling)"
    capacity, unavailable, arch = _capacity(model, index, pool, catalog, base_dir, sources)
    multi = _multi_node(model, index, key, arch, pool, max_replicas, ledger, create)
    engine = model.engine
    formula = (
        f"tensor_parallel_size {engine.tensor_parallel_size} x pipeline_parallel_size "
        f"{engine.pipeline_parallel_size}"
    )
    if multi is not None:
        model, multi_plan = multi
        engine = model.engine
        formula = (
            f"multi-node: tensor_parallel_size {engine.tensor_parallel_size} x "
            f"pipeline_parallel_size {engine.pipeline_parallel_size} ({multi_plan.nodes} Pods "
            f"of {multi_plan.tensor_parallel_size} GPUs)"
        )
        if arch is not None:
            try:
                capacity, unavailable = (
                    estimate_for_model(model, arch, pool.gpu, gpus_per_pod=pool.instance.gpu_count),
                    None,
                )
            except CapacityError as exc:
                capacity = None
                unavailable = f"{arch.id} with these engine settings cannot be estimated: {exc}"
    gpus = ledger.add(f"{key}.gpusPerReplica", engine.gpus_per_engine, "formula", formula)
    ledger.add(f"{key}.replicas", f"{min_replicas}..{max_replicas}", "spec", why)

    local = local_config_path(arch) if arch is not None else None
    if arch is not None and local is not None:
        ledger.add(
            f"{key}.architecture",
            arch.id,
            "model-file",
            f"{arch.architecture}, {arch.params_total_b:g}B params, from {local}",
        )
    serving = None
    if capacity is not None:
        _record_capacity(key, capacity, ledger)
        if arch is not None:
            try:
                serving = serving_at_settings(
                    arch, pool.gpu, capacity, model.workload, max_replicas, simulate=True
                )
            except WorkloadTooLong as exc:
                raise PlanError(f"gpustrata:stack.models[{index}].workload", str(exc)) from None
        if serving is not None:
            _record_serving(key, serving, ledger)
        startup = capacity.startup
        failures = max(1, math.ceil(startup.budget_s / STARTUP_PERIOD_S))
        ledger.add(
            f"{key}.startupProbe.failureThreshold",
            failures,
            "formula",
            f"{startup.explanation} / periodSeconds {STARTUP_PERIOD_S} "
            f"(startup estimate: {key}.capacity.startupSeconds)",
        )
    else:
        failures = math.ceil(FALLBACK_STARTUP_BUDGET_S / STARTUP_PERIOD_S)
        ledger.add(
            f"{key}.startupProbe.failureThreshold",
            failures,
            "default",
            f"{FALLBACK_STARTUP_BUDGET_S} s fallback startup budget / periodSeconds "
            f"{STARTUP_PERIOD_S}: no startup estimate ({unavailable})",
        )
    probes = Probes(
        startup_period_s=STARTUP_PERIOD_S,
        startup_failure_threshold=failures,
        liveness_period_s=LIVENESS_PERIOD_S,
        liveness_failure_threshold=LIVENESS_FAILURES,
        readiness_period_s=READINESS_PERIOD_S,
        timeout_s=PROBE_TIMEOUT_S,
    )

    route = route_timeout(model, arch, pool.gpu, capacity, key, ledger)
    ray = None
    if model.runtime == "rayservice":
        ray = _ray_layout(model, pool, gpus, min_replicas, max_replicas, probes, ledger)
    per_pod = ray.gpus_per_worker if ray else gpus
    if multi is not None:
        per_pod = multi[1].tensor_parallel_size
    cpu, memory = _pod_resources(model, index, pool, per_pod, capacity, ledger)
    return ModelPlan(
        spec=model,
        pool=pool,
        gpus_per_replica=gpus,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        probes=probes,
        ray=ray,
        capacity=capacity,
        capacity_unavailable=unavailable,
        serving=serving,
        cpu=cpu,
        memory=memory,
        route_timeout=route,
        multi_node=multi[1] if multi is not None else None,
    )


def _multi_node(
    model: ModelSpec,
    index: int,
    key: str,
    arch: ModelArchitecture | None,
    pool: PoolPlan,
    max_replicas: int,
    ledger: Ledger,
    create: bool,
) -> tuple[ModelSpec, MultiNodePlan] | None:
    """The model with its multi-node layout resolved, or None (one node per engine);
    *create*: the stack creates the pool's node group."""
    try:
        resolved = resolve_multi_node(
            model,
            key,
            arch,
            pool.gpu,
            pool.instance.gpu_count,
            pool.spec.max_size,
            pool.instance.efa_interfaces,
            max_replicas,
            ledger,
            nodes_by=(pool.spec.provisioner if create else "existing"),
        )
    except MultiNodeProblem as exc:
        raise PlanError(f"gpustrata:stack.models[{index}].{exc.field}", str(exc)) from None
    if resolved is not None and pool.spec.gpu_allocation == "dra":
        raise PlanError(
            f"gpustrata:stack.models[{index}].pool",
            f"pool {pool.name!r} allocates GPUs through DRA, which multi-node engines do not "
            "support yet (their LeaderWorkerSet Pods ask for nvidia.com/gpu): use a "
            "device-plugin pool",
        )
    return resolved


CPU_HEADROOM = Fraction(9, 10)
"""Share of a Pod's slice of the node's allocatable CPU a default request takes: the rest
is left for the DaemonSets every node runs (aws-node, kube-proxy, the GPU Operator's)."""
MEMORY_HEADROOM = Fraction(19, 20)
"""Share of a Pod's slice of the node's allocatable memory a default request takes."""
_MIB = 1024**2


def pool_allocatable(pool: PoolPlan) -> tuple[Fraction, Fraction, str]:
    """CPU cores and memory bytes one node of *pool* offers Pods (capacity less kubelet
    and system reservations and the memory eviction threshold), and the working."""
    inst = pool.instance
    mem = Fraction(inst.memory_mib * _MIB)
    reserved = (pool.system_reserved, pool.kube_reserved, pool.eviction_hard)
    reserved_cpu = kubelet_reserved(*reserved, "cpu", Fraction(inst.vcpu))
    reserved_mem = kubelet_reserved(*reserved, "memory", mem)
    cpu = Fraction(inst.vcpu) - reserved_cpu
    memory = mem - reserved_mem
    why = (
        f"{inst.name} {inst.vcpu} vCPU, {inst.memory_mib} MiB less kubeReserved, "
        f"systemReserved and evictionHard memory.available: {format_cores(cpu)} CPU, "
        f"{format_bytes(memory)}"
    )
    return cpu, memory, why


def _pod_resources(
    model: ModelSpec,
    index: int,
    pool: PoolPlan,
    gpus_per_pod: int,
    capacity: CapacityEstimate | None,
    ledger: Ledger,
) -> tuple[str, str]:
    """The engine Pod's CPU request and memory request/limit: as the stack states them,
    else the Pod's share of a node's allocatable (its GPUs' share of the node's GPUs, less
    headroom for DaemonSets), so that the default always fits the pool (K005)."""
    key = f"models.{model.name}"
    cpu_node, mem_node, working = pool_allocatable(pool)
    share = Fraction(min(gpus_per_pod, pool.instance.gpu_count), pool.instance.gpu_count)
    sliced = f"{gpus_per_pod} of {pool.instance.gpu_count} GPU(s) per node"
    cpu = model.cpu
    if cpu is None:
        millis = max(100, math.floor(cpu_node * share * CPU_HEADROOM * 10) * 100)
        cpu = ledger.add(
            f"{key}.cpu",
            str(millis // 1000) if millis % 1000 == 0 else f"{millis}m",
            "formula",
            f"{sliced} x 90% of the node's allocatable ({working}), rounded down to 0.1 CPU; "
            f"set gpustrata:stack.models[{index}].cpu to choose",
        )
    memory = model.memory
    if memory is None:
        step = 256 * _MIB
        amount = max(step, math.floor(mem_node * share * MEMORY_HEADROOM / step) * step)
        weights = ""
        if capacity is not None:
            loaded = capacity.weights.bytes_per_gpu * gpus_per_pod
            weights = f"; weights per Pod {format_bytes(loaded)}"
        memory = ledger.add(
            f"{key}.memory",
            format_bytes(amount),
            "formula",
            f"{sliced} x 95% of the node's allocatable ({working}), rounded down to 256Mi"
            f"{weights}; set gpustrata:stack.models[{index}].memory to choose",
        )
    return cpu, memory


def _outside_project(model: str, catalog: ModelCatalog, base_dir: Path | None) -> str | None:
    """Why the config.json path *model* may not be read (it leads outside the project).

    The stack refuses absolute paths and '..' (:func:`~gpustrata.spec.fields.model_path_problem`);
    this also catches a symbolic link inside the project that points out of it.
    """
    if catalog.get(model) is not None:
        return None
    root = (base_dir or Path.cwd()).resolve()
    try:
        target = (root / model).resolve()
    except (OSError, RuntimeError):
        return f"{model[:60]!r} cannot be resolved as a path; use the Hugging Face id"
    if target != root and root not in target.parents:
        return (
            f"{model[:60]!r} leads outside the project (through a symbolic link); a stack "
            "may only name a config.json inside the project: copy it into the project"
        )
    return None


def _capacity(
    model: ModelSpec,
    index: int,
    pool: PoolPlan,
    catalog: ModelCatalog,
    base_dir: Path | None,
    sources: ModelSources | None = None,
) -> tuple[CapacityEstimate | None, str | None, ModelArchitecture | None]:
    """The capacity estimate (None and why: a rule reports what cannot be planned) and the
    architecture it was made for."""
    outside = _outside_project(model.model, catalog, base_dir)
    if outside:
        raise PlanError(f"gpustrata:stack.models[{index}].model", outside)
    try:
        arch = resolve_architecture(model.model, catalog, base_dir, base_dir or Path.cwd(), sources)
    except ModelCatalogError as exc:
        raise PlanError(f"gpustrata:stack.models[{index}].model", str(exc)) from None
    if arch is not None and _served_as_hub_id(model.model, arch, catalog, sources):
        raise PlanError(
            f"gpustrata:stack.models[{index}].model",
            f"{model.model[:80]!r} is a folder in the project, but it reads like a Hugging "
            f"Face id and would be served as one (`vllm serve {model.model[:80]}`); write "
            f"it as a path ('./{model.model[:80]}', then say where the weights are with "
            "weights.source: s3 or pvc and weights.uri), or keep the Hub id and put its "
            "config.json under catalog.models_dir",
        )
    if arch is None:
        # A name close to a catalogue id is a typo until shown otherwise: refuse it rather
        # than plan with the fallback budget. A name like no catalogue id (a private model)
        # plans with the fallback, which the plan says.
        near = catalog.nearest(model.model)
        if near:
            raise PlanError(
                f"gpustrata:stack.models[{index}].model",
                f"{model.model[:80]!r} is not in the model catalogue and is not a path to a "
                f"config.json; nearest catalogue ids: {', '.join(repr(n) for n in near)}; or "
                "point model at the model's config.json inside the project",
            )
        return (
            None,
            (
                f"model {model.model!r} is not in the model catalogue (no catalogue id is "
                "close) and is not a path to a config.json"
            ),
            None,
        )
    try:
        return (
            estimate_for_model(model, arch, pool.gpu, gpus_per_pod=pool.instance.gpu_count),
            None,
            arch,
        )
    except CapacityError as exc:
        return None, f"{arch.id} with these engine settings cannot be estimated: {exc}", arch


def _served_as_hub_id(
    model: str, arch: ModelArchitecture, catalog: ModelCatalog, sources: ModelSources | None
) -> bool:
    """True when *model* (``models/acme``) was read as a folder of the project although
    the Deployment would pass it to vLLM as a Hub id: not a path by its form
    (:func:`~gpustrata.spec.fields.is_model_path`), nor a catalogue id, nor found in the
    model sources."""
    if is_model_path(model) or local_config_path(arch) is None or catalog.get(model):
        return False
    return sources is None or sources.find(model) is None


def _record_capacity(key: str, cap: CapacityEstimate, ledger: Ledger) -> None:
    """Put the capacity figures in the ledger so `plan` shows their working."""
    ckey = f"{key}.capacity"
    for name, why in cap.defaults.items():
        value = getattr(cap, "chunked_prefill" if name == "enable_chunked_prefill" else name)
        ledger.add(f"{ckey}.defaults.{name}", value, "upstream-default", why)
    ledger.add(
        f"{ckey}.weightsPerGpu", gib(cap.weights.bytes_per_gpu), "formula", cap.weights.explanation
    )
    ledger.add(
        f"{ckey}.kvCacheMemoryPerGpu",
        gib(max(0, cap.memory.available_kv_bytes)),
        "formula",
        cap.memory.explanation,
    )
    ledger.add(
        f"{ckey}.kvBytesPerToken",
        cap.kv.bytes_per_token,
        "formula",
        f"sum over the GPU's layers of the per-token page bytes ({cap.kv.explanation})",
    )
    ledger.add(f"{ckey}.kvCacheTokens", cap.kv.tokens, "formula", cap.kv.explanation)
    ledger.add(
        f"{ckey}.fullLengthSequences",
        cap.max_concurrent_full_length_sequences,
        "formula",
        f"floor({cap.kv.num_blocks:,} blocks / {cap.kv.blocks_per_request:,} blocks per "
        f"{cap.max_model_len:,}-token request)"
        + ("" if cap.fits else f"; vLLM would refuse to start: {cap.refusal}"),
    )
    ledger.add(
        f"{ckey}.largestMaxModelLen",
        cap.largest_max_model_len,
        "formula",
        "largest max_model_len whose request fits the KV budget (binary search as vLLM's "
        "estimate_max_model_len, up to the model's max_position_embeddings)",
    )
    ledger.add(
        f"{ckey}.startupSeconds",
        round(cap.startup.total_s),
        "formula",
        f"{cap.startup.explanation}; load bandwidth: {cap.startup.load_source}; init: "
        f"{cap.startup.init_source}",
    )
    ledger.add(
        f"{ckey}.longestStepSeconds",
        round(cap.longest_step.seconds, 2),
        "formula",
        cap.longest_step.explanation,
    )


def _record_serving(key: str, serving: ServingAtSettings, ledger: Ledger) -> None:
    """Put the predicted serving figures in the ledger (so a pull request's comparison
    shows what a change does to them): the simulation's means where it ran (what the SLO
    verdict uses, as ``size`` judges its head), the closed form beside them."""
    p, skey = serving.prediction, f"{key}.serving"
    j = serving.judged
    w = serving.workload
    ledger.add(
        f"{skey}.workload",
        f"{w.input_tokens} in / {w.output_tokens} out, {w.load} over {serving.replicas} replica(s)",
        "spec" if serving.workload_why.startswith("workload") else "default",
        serving.workload_why,
    )
    ledger.add(f"{skey}.running", int(p.running.value), "formula", p.running.explanation)
    if serving.ttft_s is not None or serving.tpot_s is not None:
        margin = measured_margin(j.model)
        misses = slo_misses(j, serving.ttft_s, serving.tpot_s, margin)
        targets = ", ".join(
            t
            for t in (
                f"TTFT <= {serving.ttft_s:g} s" if serving.ttft_s is not None else "",
                f"TPOT <= {serving.tpot_s * 1e3:g} ms" if serving.tpot_s is not None else "",
            )
            if t
        )
        ledger.add(
            f"{skey}.slo",
            "misses: " + "; ".join(misses) if misses else "met",
            "formula",
            f"workload targets {targets} against the {j.model}'s figures below plus a margin "
            f"of {margin.tpot:.0%} on TPOT and {margin.ttft:.0%} on TTFT ({margin.explanation}; "
            "the same check `size` judges its head by)",
        )
    tpot_ms = round(j.tpot_seconds.value * 1e3, 1)
    ledger.add(f"{skey}.tpotMs", tpot_ms, "formula", j.tpot_seconds.explanation)
    ledger.add(
        f"{skey}.ttftSeconds", round(j.ttft_seconds.value, 2), "formula", j.ttft_seconds.explanation
    )
    sim = serving.simulated
    if sim is not None:
        ledger.add(
            f"{skey}.simulated",
            f"TTFT p50 {sim.ttft_p50_s:.2f} s / p90 {sim.ttft_p90_s:.2f} s, TPOT p50 "
            f"{sim.tpot_p50_s * 1e3:.1f} ms / p90 {sim.tpot_p90_s * 1e3:.1f} ms",
            "formula",
            sim.explanation + " (gpustrata.vllm.simulate; error per held-out source: "
            "benchmarks/bench_serving_loso.py)",
        )
        ledger.add(
            f"{skey}.closedForm",
            f"TPOT {p.tpot_seconds.value * 1e3:.1f} ms, TTFT {p.ttft_seconds.value:.2f} s, "
            f"{p.output_tokens_per_second.value:,.0f} tok/s",
            "formula",
            f"TPOT: {p.tpot_seconds.explanation}; TTFT: {p.ttft_seconds.explanation} (the "
            "closed form gpustrata.vllm.performance.predict_serving, size's screen)",
        )
    ledger.add(
        f"{skey}.outputTokensPerSecond",
        round(j.output_tokens_per_second.value),
        "formula",
        j.output_tokens_per_second.explanation + " (one replica; serving model constants: "
        "catalog/data/serving-fit.yaml)",
    )


def _ray_layout(
    model: ModelSpec,
    pool: PoolPlan,
    gpus_per_replica: int,
    min_replicas: int,
    max_replicas: int,
    probes: Probes,
    ledger: Ledger,
) -> RayLayout:
    key = f"models.{model.name}.ray"
    node_gpus = pool.instance.gpu_count
    if gpus_per_replica <= node_gpus:
        # One engine per worker Pod: the placement group packs onto that Pod's GPUs.
        gpus_per_worker = gpus_per_replica
        workers_per_replica = 1
        strategy = "STRICT_PACK"
        why = f"TP x PP = {gpus_per_replica} fits one {pool.instance.name} ({node_gpus} GPUs)"
    else:
        gpus_per_worker = node_gpus
        workers_per_replica = math.ceil(gpus_per_replica / node_gpus)
        strategy = "PACK"
        why = (
            f"TP x PP = {gpus_per_replica} spans {workers_per_replica} {pool.instance.name} "
            f"nodes of {node_gpus} GPUs"
        )
    ledger.add(f"{key}.gpusPerWorker", gpus_per_worker, "formula", why)
    ledger.add(f"{key}.placementStrategy", strategy, "formula", why)
    min_workers = ledger.add(
        f"{key}.minReplicas",
        min_replicas * workers_per_replica,
        "formula",
        f"min engine replicas {min_replicas} x workers per replica {workers_per_replica}",
    )
    max_workers = ledger.add(
        f"{key}.maxReplicas",
        max_replicas * workers_per_replica,
        "formula",
        f"max engine replicas {max_replicas} x workers per replica {workers_per_replica}",
    )
    bundles = [{"GPU": 1.0} for _ in range(gpus_per_replica)]
    ledger.add(
        f"{key}.bundles",
        f"{gpus_per_replica} x {{GPU: 1}}",
        "formula",
        f"one bundle per vLLM worker: TP x PP = {gpus_per_replica} (Ray Serve LLM places each "
        "GPU worker of the engine in one bundle)",
    )
    accelerator = pool.gpu.ray_accelerator_type
    ledger.add(
        f"{key}.acceleratorType",
        accelerator or "-",
        "catalogue",
        f"Ray's accelerator type for {pool.gpu.id} (hardware catalogue)"
        if accelerator
        else f"{pool.gpu.id} has no Ray Serve LLM accelerator type; engines are not pinned",
    )
    upgrade = _upgrade_strategy(key, pool, gpus_per_worker, min_workers, max_workers, ledger)
    start_timeout = ledger.add(
        f"{key}.engineStartTimeoutSeconds",
        probes.startup_window_s,
        "formula",
        f"RAYLLM_ENGINE_START_TIMEOUT_S = the startup window {probes.startup_window_s} s "
        f"(periodSeconds {probes.startup_period_s} x failureThreshold "
        f"{probes.startup_failure_threshold}); Ray Serve LLM stops waiting for the engine "
        f"after it (default {RAY_LLM_ENGINE_START_TIMEOUT_DEFAULT_S} s, {RAY_LLM_CONSTANTS})",
    )
    serve_health = (
        f"Ray Serve restarts a replica after {SERVE_UNHEALTHY_THRESHOLD} failed health checks "
        f"(REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD, {RAY_SERVE_CONSTANTS}), like the "
        f"kubelet after livenessProbe failureThreshold {probes.liveness_failure_threshold}"
    )
    period = ledger.add(
        f"{key}.healthCheckPeriodSeconds",
        probes.liveness_period_s,
        "formula",
        f"livenessProbe periodSeconds {probes.liveness_period_s}; {serve_health}",
    )
    timeout = ledger.add(
        f"{key}.healthCheckTimeoutSeconds",
        probes.timeout_s,
        "formula",
        f"probe timeoutSeconds {probes.timeout_s}; Serve health checks start once the engine "
        "is up, so they never cut a model load short",
    )
    return RayLayout(
        gpus_per_worker=gpus_per_worker,
        workers_per_replica=workers_per_replica,
        min_workers=min_workers,
        max_workers=max_workers,
        placement_strategy=strategy,
        bundles=bundles,
        accelerator_type=accelerator,
        upgrade_strategy=upgrade,
        engine_start_timeout_s=start_timeout,
        health_check_period_s=period,
        health_check_timeout_s=timeout,
    )


RAY_LLM_CONSTANTS = "ray python/ray/llm/_internal/serve/constants.py@ray-2.60.0"
RAY_SERVE_CONSTANTS = "ray python/ray/serve/_private/constants.py@ray-2.60.0"
SERVE_UNHEALTHY_THRESHOLD = 3
RAY_LLM_ENGINE_START_TIMEOUT_DEFAULT_S = 3600
KUBERAY_UPGRADE_SOURCE = (
    "kuberay ray-operator/controllers/ray/rayservice_controller.go@v1.7.0 "
    "(isZeroDowntimeUpgradeEnabled, shouldPrepareNewCluster)"
)


def _upgrade_strategy(
    key: str,
    pool: PoolPlan,
    gpus_per_worker: int,
    min_workers: int,
    max_workers: int,
    ledger: Ledger,
) -> str:
    """NewCluster (zero-downtime) when the pool holds the serving cluster at its maximum
    plus a new cluster at its initial size; otherwise None (no second cluster)."""
    pool_gpus = pool.spec.max_size * pool.instance.gpu_count
    active, pending = max_workers * gpus_per_worker, min_workers * gpus_per_worker
    need = active + pending
    working = (
        f"serving cluster at max {max_workers} x {gpus_per_worker} GPUs + new cluster at "
        f"{min_workers} x {gpus_per_worker} GPUs = {need} GPUs vs pool {pool.name} max_size "
        f"{pool.spec.max_size} x {pool.instance.gpu_count} GPUs = {pool_gpus}"
    )
    if need <= pool_gpus:
        why = f"{working}: room for a second cluster, zero-downtime ({KUBERAY_UPGRADE_SOURCE})"
        return str(ledger.add(f"{key}.upgradeStrategy", "NewCluster", "formula", why))
    why = (
        f"{working}: no room for a second cluster, so KubeRay must not create one; Serve "
        "config changes still apply in place, rayClusterConfig changes need a manual rollout "
        f"({KUBERAY_UPGRADE_SOURCE})"
    )
    return str(ledger.add(f"{key}.upgradeStrategy", "None", "formula", why))
