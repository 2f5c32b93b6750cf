"""`gpustrata plan --verify-placement`: Ray's own scheduler decides whether engines fit.

For every RayService the stack renders, a local Ray cluster is started whose nodes mirror
the worker groups at their ``maxReplicas`` (logical GPUs, CPUs, memory, the custom
resources Ray would see, among them the ``accelerator_type:<X>`` resource Ray detects on
the pool's GPU, and the group's Ray node labels; no GPU is needed). Each engine gets one
placement group per replica at its Serve ``max_replicas``, with the bundles Ray Serve LLM
would create from the rendered ``llm_config``; the state Ray's GCS reports
(``placement_group_table(pg)["stats"]["scheduling_state"]``: FINISHED, INFEASIBLE or
NO_RESOURCES) is the verdict. The cluster is shut down before the next RayService.

How Ray Serve LLM turns an ``llm_config`` into bundles (ray 2.60.0):
``python/ray/llm/_internal/serve/engines/vllm/vllm_models.py`` (``placement_bundles``:
the configured bundles, each with ``accelerator_type:<X>: 0.001`` added when
``accelerator_type`` is set; ``placement_strategy``: the configured one, ``PACK`` when
unset) and ``python/ray/llm/_internal/serve/core/server/llm_server.py``
(``get_deployment_options``: the replica actor's ``{"CPU": num_cpus (default 1)}`` is added
to the first bundle, where the replica runs next to its first engine worker).

Nothing here imports Ray until :func:`verify_placement` runs; without Ray it raises
:class:`EnginesMissing` (exit code 2) naming the extra to install.
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from gpustrata.core.contract import POOL_LABEL
from gpustrata.core.errors import GpustrataError
from gpustrata.core.progress import Mode, Progress
from gpustrata.core.quantity import parse_quantity

if TYPE_CHECKING:
    from gpustrata.planning.plan_types import StackPlan

__all__ = [
    "ENGINES_EXTRA",
    "EngineMirror",
    "EngineResult",
    "EnginesMissing",
    "MirrorCluster",
    "MirrorNode",
    "PlacementReport",
    "mirror_cluster",
    "mirror_clusters",
    "verify_placement",
]

ENGINES_EXTRA = "engines"
INSTALL_HINT = (
    f'pip install -c constraints.txt -e ".[{ENGINES_EXTRA}]" (the {ENGINES_EXTRA} extra: '
    "ray[serve]==2.60.0)"
)
STRICT = ("FINISHED", "INFEASIBLE")
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's minimum is 75 MiB; the check stores nothing
REPLICA_ACTOR_CPUS = 1.0  # Serve's ray_actor_options num_cpus default (llm_server.py)


class EnginesMissing(GpustrataError):
    """The check needs the optional engines (Ray); exit code 2 like other unusable input."""


@dataclass(frozen=True)
class MirrorNode:
    """``count`` Ray nodes standing in for the Pods of one worker group."""

    group: str
    count: int
    num_cpus: float
    num_gpus: float
    memory_bytes: int | None
    resources: dict[str, float]
    labels: dict[str, str]


@dataclass(frozen=True)
class EngineMirror:
    """One engine: the placement group of each replica, as Ray Serve LLM would create it."""

    name: str
    replicas: int
    bundles: list[dict[str, float]]
    strategy: str


@dataclass(frozen=True)
class MirrorCluster:
    """A RayService's cluster at max replicas and the engines it must hold."""

    service: str
    nodes: list[MirrorNode]
    engines: list[EngineMirror]
    serve_config: dict[str, Any] = field(default_factory=dict)
    """The parsed serveConfigV2, validated with Ray Serve's schema before the check."""


@dataclass(frozen=True)
class EngineResult:
    """Ray's verdict on every replica's placement group of one engine."""

    service: str
    engine: str
    strategy: str
    bundles: list[dict[str, float]]
    states: list[str]

    @property
    def fits(self) -> bool:
        """Every replica's placement group was created."""
        return bool(self.states) and all(s == "FINISHED" for s in self.states)

    @property
    def state(self) -> str:
        """FINISHED when all fit, else the first other state."""
        return next((s for s in self.states if s != "FINISHED"), "FINISHED")


@dataclass
class PlacementReport:
    """Per engine results, the mirrored nodes, and how long the check took."""

    results: list[EngineResult] = field(default_factory=list)
    clusters: list[MirrorCluster] = field(default_factory=list)
    seconds: float = 0.0
    ray_version: str = ""
    serve_problems: list[str] = field(default_factory=list)
    """What Ray Serve's schema and the key checks found in the serveConfigV2s."""

    @property
    def exit_code(self) -> int:
        """1 when an engine does not fit or a serve config is invalid, else 0."""
        return 0 if all(r.fits for r in self.results) and not self.serve_problems else 1

    def lines(self) -> list[str]:
        """The report for people."""
        out = [
            f"Placement check with Ray {self.ray_version}: {len(self.clusters)} cluster(s), "
            f"{self.seconds:.1f} s"
        ]
        for cluster in self.clusters:
            nodes = ", ".join(
                f"{n.count} x {n.group} ({_num(n.num_gpus)} GPU, {_num(n.num_cpus)} CPU"
                + "".join(f", {k}" for k in sorted(n.resources))
                + ")"
                for n in cluster.nodes
            )
            out.append(f"  {cluster.service}: nodes {nodes or 'none with GPUs'}")
        checked = sum(1 for c in self.clusters if c.serve_config)
        out.append(
            f"  serveConfigV2 against Ray Serve's schema and known keys: {checked} checked, "
            f"{len(self.serve_problems)} problem(s)"
        )
        out += [f"    {p}" for p in self.serve_problems]
        for r in self.results:
            gpus = sum(b.get("GPU", 0.0) for b in r.bundles)
            verdict = "fits" if r.fits else "does NOT fit"
            out.append(
                f"  {r.state:<12} {r.service} engine {r.engine}: {len(r.states)} replica(s) "
                f"x {len(r.bundles)} bundles ({_num(gpus)} GPU each), {r.strategy} -> {verdict}"
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        """JSON form for ``plan --format json``."""
        return {
            "ray_version": self.ray_version,
            "seconds": round(self.seconds, 2),
            "serve_problems": self.serve_problems,
            "engines": [
                {
                    "service": r.service,
                    "engine": r.engine,
                    "strategy": r.strategy,
                    "bundles": r.bundles,
                    "states": r.states,
                    "fits": r.fits,
                }
                for r in self.results
            ],
        }


def _num(value: float) -> str:
    return f"{value:g}"


def _quantity(value: Any) -> float | None:
    """A Kubernetes quantity as a float (cpu '500m' -> 0.5, memory '2Gi' -> bytes)."""
    if value is None:
        return None
    amount = parse_quantity(value)
    if amount is None:
        raise ValueError(f"{value!r} is not a Kubernetes quantity")
    return float(amount)


def _ray_resources(text: Any) -> dict[str, float]:
    """``rayStartParams.resources``: a JSON object, possibly wrapped in quotes."""
    if not isinstance(text, str) or not text.strip():
        return {}
    data = json.loads(text.strip().strip("'\""))
    return {str(k): float(v) for k, v in data.items()}


def _labels(text: Any) -> dict[str, str]:
    """``rayStartParams.labels``: ``k=v,k2=v2``."""
    if not isinstance(text, str):
        return {}
    pairs = (item.split("=", 1) for item in text.split(",") if "=" in item)
    return {k.strip(): v.strip() for k, v in pairs}


def mirror_cluster(obj: Mapping[str, Any], accelerators: Mapping[str, str]) -> MirrorCluster:
    """The Ray nodes and placement groups of one rendered RayService (pure, no Ray).

    ``accelerators`` maps a pool name (``gpustrata.io/pool`` node selector) to the Ray
    accelerator type of its GPU: Ray detects it on a real GPU node and adds the resource
    ``accelerator_type:<X>: 1``.
    """
    meta, spec = obj["metadata"], obj["spec"]
    service = f"{obj['kind']}/{meta.get('namespace', 'default')}/{meta['name']}"
    cluster = spec["rayClusterConfig"]
    autoscaling = cluster.get("enableInTreeAutoscaling") is True
    nodes = []
    for group in cluster.get("workerGroupSpecs") or []:
        pod = group["template"]["spec"]
        container = pod["containers"][0]
        limits = container.get("resources", {}).get("limits", {})
        params = group.get("rayStartParams") or {}
        gpus = _quantity(params.get("num-gpus", limits.get("nvidia.com/gpu", 0))) or 0.0
        cpus = _quantity(params.get("num-cpus", limits.get("cpu"))) or 1.0
        memory = _quantity(params.get("memory", limits.get("memory")))
        resources = _ray_resources(params.get("resources"))
        for key, value in (group.get("resources") or {}).items():
            if key.lower() not in {"cpu", "memory"} and not key.lower().endswith("gpu"):
                resources[key] = _quantity(value) or 0.0
        pool = (pod.get("nodeSelector") or {}).get(POOL_LABEL)
        accelerator = accelerators.get(pool) if pool else None
        if accelerator and gpus:
            resources.setdefault(f"accelerator_type:{accelerator}", 1.0)
        labels = {**_labels(params.get("labels")), **(group.get("labels") or {})}
        count = group.get("maxReplicas") if autoscaling else group.get("replicas")
        nodes.append(
            MirrorNode(
                group=group["groupName"],
                count=int(count if count is not None else group.get("replicas", 0)),
                num_cpus=cpus,
                num_gpus=gpus,
                memory_bytes=int(memory) if memory else None,
                resources=resources,
                labels={str(k): str(v) for k, v in labels.items()},
            )
        )
    text = spec.get("serveConfigV2") or ""
    serve = yaml.safe_load(text) or {}
    return MirrorCluster(service, nodes, list(_engines(serve)), serve)


def _engines(serve: Mapping[str, Any]) -> Iterator[EngineMirror]:
    for app in serve.get("applications") or []:
        for llm in (app.get("args") or {}).get("llm_configs") or []:
            kwargs = llm.get("engine_kwargs") or {}
            workers = int(kwargs.get("tensor_parallel_size", 1)) * int(
                kwargs.get("pipeline_parallel_size", 1)
            )
            pg = llm.get("placement_group_config") or {}
            if pg.get("bundle_per_worker"):
                raw = [pg["bundle_per_worker"]] * workers
            else:
                raw = pg.get("bundles") or [{"GPU": 1.0}] * workers
            bundles = [{str(k): float(v) for k, v in b.items()} for b in raw]
            accelerator = llm.get("accelerator_type")
            if accelerator:
                for b in bundles:
                    b.setdefault(f"accelerator_type:{accelerator}", 0.001)
            deployment = llm.get("deployment_config") or {}
            actor = deployment.get("ray_actor_options") or {}
            bundles[0]["CPU"] = bundles[0].get("CPU", 0.0) + float(
                actor.get("num_cpus", REPLICA_ACTOR_CPUS)
            )
            auto = deployment.get("autoscaling_config") or {}
            replicas = int(auto.get("max_replicas", deployment.get("num_replicas", 1)))
            name = (llm.get("model_loading_config") or {}).get("model_id", "?")
            yield EngineMirror(str(name), replicas, bundles, str(pg.get("strategy", "PACK")))


def mirror_clusters(plan: StackPlan) -> list[MirrorCluster]:
    """Every RayService of the plan, rendered the way the components register it."""
    from gpustrata.render.from_plan import workload_objects

    accelerators = {
        name: pool.gpu.ray_accelerator_type
        for name, pool in plan.pools.items()
        if pool.gpu.ray_accelerator_type
    }
    return [
        mirror_cluster(obj, accelerators)
        for obj in workload_objects(plan)
        if obj["kind"] == "RayService"
    ]


def ray_available() -> bool:
    """Is Ray importable (the engines extra installed)?"""
    return importlib.util.find_spec("ray") is not None


def with_progress(
    mirrors: Sequence[MirrorCluster], *, stream: TextIO | None = None, mode: Mode = "auto"
) -> Iterator[MirrorCluster]:
    """Yield each mirror cluster while a progress line names it (quiet in CI and pipes).

    Starting a Ray cluster per RayService takes 10-25 s on two cores, so a terminal user
    sees which one is being checked.
    """
    progress = Progress(len(mirrors), "verify-placement", stream=stream, mode=mode)
    try:
        for mirror in mirrors:
            with progress.step(mirror.service):
                yield mirror
    finally:
        progress.close()


def verify_placement(
    clusters: Sequence[MirrorCluster], *, timeout_s: float = 30.0
) -> PlacementReport:
    """Start each mirror cluster, create every replica's placement group, read the states.

    Raises :class:`EnginesMissing` without Ray. A placement group that is neither
    FINISHED nor INFEASIBLE after ``timeout_s`` keeps the state Ray reports then
    (NO_RESOURCES when the nodes exist but are taken by the other replicas).
    """
    if not ray_available():
        raise EnginesMissing(
            f"--verify-placement needs Ray, which is not installed: {INSTALL_HINT}"
        )
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.placement_group import placement_group, placement_group_table

    from gpustrata.runtime.serve_schema import validate_serve_config

    report = PlacementReport(clusters=list(clusters), ray_version=str(ray.__version__))
    started = time.monotonic()
    for mirror in clusters:
        if mirror.serve_config:
            report.serve_problems += [
                f"{mirror.service}: {p}" for p in validate_serve_config(mirror.serve_config)
            ]
    for mirror in with_progress([m for m in clusters if m.engines]):
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                # The head is CPU-only and runs no engine (num-cpus/num-gpus "0").
                "num_cpus": 0,
                "num_gpus": 0,
                "include_dashboard": False,
                "object_store_memory": OBJECT_STORE_BYTES,
            },
        )
        try:
            for node in mirror.nodes:
                for _ in range(node.count):
                    args: dict[str, Any] = {
                        "num_cpus": node.num_cpus,
                        "num_gpus": node.num_gpus,
                        "resources": dict(node.resources),
                        "labels": dict(node.labels),
                        "object_store_memory": OBJECT_STORE_BYTES,
                    }
                    if node.memory_bytes:
                        args["memory"] = node.memory_bytes
                    cluster.add_node(wait=False, **args)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
            groups = [
                (
                    engine,
                    [
                        placement_group(engine.bundles, strategy=engine.strategy)
                        for _ in range(engine.replicas)
                    ],
                )
                for engine in mirror.engines
            ]
            deadline = time.monotonic() + timeout_s
            for engine, pgs in groups:
                states = [_settle(pg, deadline, placement_group_table) for pg in pgs]
                report.results.append(
                    EngineResult(
                        mirror.service, engine.name, engine.strategy, engine.bundles, states
                    )
                )
        finally:
            ray.shutdown()
            cluster.shutdown()
    report.seconds = time.monotonic() - started
    return report


def _settle(pg: Any, deadline: float, table: Any) -> str:
    """Poll the placement group's scheduling state until it is final or time is up."""
    while True:
        state = str(table(pg)["stats"]["scheduling_state"])
        if state in STRICT or time.monotonic() >= deadline:
            return state
        time.sleep(0.1)
