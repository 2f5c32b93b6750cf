"""KubeRay and Ray Serve LLM as the Ray rules (R001-R006) see them.

* :func:`ray_groups`: the head and worker groups of a RayCluster / RayService / RayJob
  with the GPUs Ray advertises (``rayStartParams.num-gpus``, the group's top-level
  ``resources`` override of KubeRay 1.5+, or KubeRay's own default: the Ray container's
  GPU limit) and the replica bounds the autoscaler works in.
* :func:`engine_placements`: each Ray Serve LLM engine's placement group (bundles and
  strategy, as written or as Ray Serve LLM defaults them) and its replica range.

KubeRay facts are from ray-project/kuberay v1.7.0 (``ray-operator/controllers/ray/
common/pod.go`` ``addWellKnownAcceleratorResources`` / ``updateRayStartParamsResources``,
``utils/resources.go`` ``IsGPUResourceKey``, ``apis/ray/v1/raycluster_types.go``);
Ray Serve LLM facts from ray 2.60.0 (``python/ray/llm/_internal/serve/engines/vllm/
vllm_models.py``, ``python/ray/serve/config.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from gpustrata.core.quantity import ZERO, exact_sum, parse_number, parse_quantity
from gpustrata.core.terminal import quoted
from gpustrata.core.unknown import UNKNOWN, UnknownInput, memoised
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.objects import ContainerRef, K8sObject, PodRef, as_map, dig
from gpustrata_policies.view.profile import active_profile
from gpustrata_policies.view.vllm_args import serve_config, split_image

if TYPE_CHECKING:
    from gpustrata.catalog.compat import KubeRayRelease

__all__ = [
    "KUBERAY_MAX_REPLICAS_DEFAULT",
    "EnginePlacement",
    "RayGroup",
    "cluster_spec_path",
    "engine_placements",
    "fmt_gpus",
    "is_kuberay_gpu_key",
    "operator_release",
    "operator_version",
    "ray_groups",
]

OPERATOR_CHART = "kuberay-operator"
OPERATOR_IMAGE = "kuberay/operator"
_SEMVER = re.compile(r"^[vV]?\d+\.\d+\.\d+")


def operator_version(ctx: RuleContext) -> tuple[str, str] | None:
    """(KubeRay version, where it was read) from the operator's Helm release or Deployment,
    else the cluster profile's ``versions.kuberay``."""

    def build() -> tuple[str, str] | None:
        found = _read_version()
        if found is not None:
            return found
        profile = active_profile()
        stated = profile.versions.kuberay if profile is not None else None
        if stated:
            version = stated.removeprefix("v")
            return version, f"cluster profile versions.kuberay {version}"
        return None

    def _read_version() -> tuple[str, str] | None:
        for obj in ctx.objects:
            if obj.kind == "HelmRelease":
                spec = as_map(obj.raw.get("spec"), f"spec of {obj.resource}")
                chart = spec.get("chart")
                version = spec.get("version")
                if isinstance(chart, Mapping):  # Flux: spec.chart.spec.{chart,version}
                    version = dig(chart, "spec", "version")
                    chart = dig(chart, "spec", "chart")
                if chart != OPERATOR_CHART:
                    continue
                tag = dig(spec, "values", "image", "tag")
                if isinstance(tag, str) and _SEMVER.match(tag.strip()):
                    return tag, f"{obj.resource} values image.tag"
                if isinstance(version, str) and _SEMVER.match(version.strip()):
                    return version, f"{obj.resource} chart {OPERATOR_CHART} {version}"
            elif obj.kind == "Deployment":
                for c in obj.containers(init=False):
                    image = c.image
                    if isinstance(image, str) and split_image(image)[0].endswith(OPERATOR_IMAGE):
                        tag = split_image(image)[1]
                        if tag and _SEMVER.match(tag.strip()):
                            return tag, f"{obj.resource} image {image}"
        return None

    found: tuple[str, str] | None = ctx.memo("kuberay_operator_version", build)
    return found


def operator_release(ctx: RuleContext) -> tuple[KubeRayRelease | None, str] | None:
    """The catalogued KubeRay release the manifests deploy (None when not catalogued) and
    where its version was read; None when no operator version is stated."""
    found = operator_version(ctx)
    if found is None:
        return None
    version, where = found
    return catalogs.compat().kuberay(version), f"KubeRay {version} ({where})"


KUBERAY_MAX_REPLICAS_DEFAULT = 2147483647
"""``workerGroupSpecs[].maxReplicas`` default (kubebuilder default maxInt32)."""

_MIG = re.compile(r"nvidia\.com/mig-\d+g\.\d+gb$")
_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
RAY_SERVE_LLM_PG_PR = "ray-project/ray#56980"
"""The Ray Serve LLM change of the default placement strategy from STRICT_PACK to PACK."""


def fmt_gpus(value: Fraction | int | float) -> str:
    """A GPU count as people write it: ``4``, ``0.5``."""
    number = value if isinstance(value, Fraction) else parse_number(value)
    if number is None:  # a non-finite float
        return str(value)
    if number.denominator == 1:
        return str(number.numerator)
    return f"{float(number):g}"


def is_kuberay_gpu_key(name: str) -> bool:
    """A resource KubeRay counts as GPUs for ``num-gpus`` (``IsGPUResourceKey``)."""
    return name.endswith("gpu") or bool(_MIG.search(name))


_CLUSTER_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "RayCluster": ("spec",),
    "RayService": ("spec", "rayClusterConfig"),
    "RayJob": ("spec", "rayClusterSpec"),
    "RayClusterFleet": ("spec", "template", "spec"),  # AIBrix: a RayCluster template
}


def cluster_spec_path(obj: K8sObject) -> tuple[str, ...] | None:
    """Where the RayCluster spec sits in a Ray object."""
    return _CLUSTER_SPEC_PATHS.get(obj.kind)


def _number(value: Any, what: str) -> Fraction | None:
    if value is UNKNOWN:
        raise UnknownInput(what)
    if isinstance(value, bool) or value is None:
        return None
    return parse_quantity(value)


@dataclass(frozen=True, slots=True)
class RayGroup:
    """One head or worker group of a Ray cluster."""

    obj: K8sObject
    pod: PodRef
    spec: Mapping[str, Any]
    name: str
    is_head: bool
    path: tuple[str | int, ...]

    @property
    def label(self) -> str:
        """``head group`` / ``worker group 'gpu'`` for messages."""
        return "head group" if self.is_head else f"worker group '{self.name}'"

    @property
    def container(self) -> ContainerRef | None:
        """The Ray container: KubeRay runs Ray in ``containers[0]`` (RayContainerIndex)."""
        return next(iter(self.pod.containers(init=False)), None)

    def container_gpus(self, extra: tuple[str, ...] = ()) -> Fraction:
        """GPUs in the Ray container's limits (requests where no limit is set)."""
        c = self.container
        return c.gpu_limit(extra) if c is not None else ZERO

    def advertised_gpus(self) -> tuple[Fraction | None, str]:
        """GPUs Ray is told to advertise and where that is written.

        ``(None, "")`` when nothing overrides KubeRay's default (the Ray container's GPU
        limit, first GPU resource key in sorted order). Raises :class:`ValueError` for a
        value that is not a number.
        """
        resources = as_map(self.spec.get("resources"), f"resources of {self.label}")
        for key, value in resources.items():  # KubeRay 1.5+ top-level override
            if is_kuberay_gpu_key(str(key).lower()):
                number = _number(value, f"resources.{key} of {self.label}")
                if number is None:
                    raise ValueError(f"resources.{key} {quoted(value)} is not a number")
                return number, f"resources.{key}: {value}"
        params = as_map(self.spec.get("rayStartParams"), f"rayStartParams of {self.label}")
        if "num-gpus" in params:
            raw = params["num-gpus"]
            number = _number(raw, f"rayStartParams.num-gpus of {self.label}")
            if number is None:
                raise ValueError(f"rayStartParams.num-gpus {quoted(raw)} is not a number")
            return number, f'rayStartParams.num-gpus: "{raw}"'
        return None, ""

    def effective_gpus(self, extra: tuple[str, ...] = ()) -> Fraction:
        """GPUs Ray advertises on each Pod of the group."""
        value, _ = self.advertised_gpus()
        return self.container_gpus(extra) if value is None else value

    def replica_bounds(self, autoscaling: bool) -> tuple[int, int, int]:
        """(initial, min, max) Pods; without the autoscaler all three are ``replicas``."""

        def whole(key: str, default: int) -> int:
            value = self.spec.get(key)
            if value is UNKNOWN:
                raise UnknownInput(f"{key} of {self.label}")
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                return default
            try:
                return int(str(value))
            except ValueError:
                return default

        min_r = whole("minReplicas", 0)
        max_r = whole("maxReplicas", KUBERAY_MAX_REPLICAS_DEFAULT)
        initial = whole("replicas", min_r)
        if not autoscaling:
            return initial, initial, initial
        return max(initial, min_r), min_r, max_r


def ray_groups(obj: K8sObject) -> list[RayGroup]:
    """The head group (first, if any) and the worker groups of a Ray object; read once per
    object (``obj.memo``), a fresh list each call."""
    return list(memoised(obj.memo, "ray_groups", lambda: _ray_groups(obj)))


def _ray_groups(obj: K8sObject) -> list[RayGroup]:
    base = cluster_spec_path(obj)
    if base is None:
        return []
    out: list[RayGroup] = []
    for pod in obj.pods():
        if pod.ray_group is None:
            continue
        is_head = pod.role == "head"
        group_path = pod.path[:-2]  # .../template/spec -> the group spec
        name = "head" if is_head else str(pod.ray_group.get("groupName", group_path[-1]))
        out.append(RayGroup(obj, pod, pod.ray_group, name, is_head, group_path))
    return out


def autoscaling_enabled(obj: K8sObject) -> bool:
    """``enableInTreeAutoscaling`` of the cluster spec."""
    base = cluster_spec_path(obj)
    value = dig(obj.raw, *base, "enableInTreeAutoscaling") if base else None
    if value is UNKNOWN:
        raise UnknownInput(f"enableInTreeAutoscaling of {obj.resource}")
    return value is True


@dataclass(slots=True)
class EnginePlacement:
    """One Ray Serve LLM engine: its placement group and replica range."""

    label: str
    model: str | None
    tp: int
    pp: int
    bundles: list[dict[str, Fraction]]
    """Ray resources of each bundle, parsed by ``core.quantity.parse_number``."""
    strategies: tuple[str, ...]
    """The strategy as written, or the defaults Ray Serve LLM releases use when unset."""
    explicit: bool
    min_replicas: int
    max_replicas: int
    replicas_why: str
    accelerator_type: str | None = None
    notes: list[str] = field(default_factory=list)
    _gpus: Fraction | None = field(default=None, repr=False, compare=False)
    _bundle_gpus: tuple[Fraction, ...] | None = field(default=None, repr=False, compare=False)
    _largest: Fraction | None = field(default=None, repr=False, compare=False)

    @property
    def gpus(self) -> Fraction:
        """GPUs of one engine replica: the sum over its bundles (summed once)."""
        if self._gpus is None:
            self._gpus = exact_sum(self.bundle_gpus)
        return self._gpus

    @property
    def bundle_gpus(self) -> list[Fraction]:
        """The ``GPU`` of each bundle (0 where a bundle asks for none); read once (R003, V001
        and V007 ask it per engine and per packing), a fresh list each call."""
        if self._bundle_gpus is None:
            self._bundle_gpus = tuple(b.get("GPU", ZERO) for b in self.bundles)
        return list(self._bundle_gpus)

    @property
    def largest_bundle_gpus(self) -> Fraction:
        """The most GPUs one bundle asks for (0 without bundles); worked out once."""
        if self._largest is None:
            self._largest = max(self.bundle_gpus, default=ZERO)
        return self._largest

    @property
    def where(self) -> str:
        """``engine 'model-id'`` for messages."""
        return f"engine '{self.model}'" if self.model else f"engine {self.label}"


_ONE_GPU = Fraction(1)
"""The default bundle's GPU (Fractions are immutable: one serves every bundle)."""


def _int(value: Any, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool):
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def engine_placements(obj: K8sObject) -> tuple[list[EnginePlacement], list[str]]:
    """The Ray Serve LLM engines of a RayService and the reasons others are unreadable.

    Read once per object (``obj.memo``; three rules ask, none changes the result).

    Defaults are Ray 2.60's where a field is unset: ``tensor_parallel_size`` /
    ``pipeline_parallel_size`` 1, one ``{GPU: 1}`` bundle per GPU worker, Serve
    ``min_replicas``/``max_replicas`` 1. Without ``placement_group_config`` the strategy
    is ``PACK`` since ray-project/ray#56980 and ``STRICT_PACK`` (``PACK`` with pipeline
    parallelism) before; both are returned when they differ.
    """
    return memoised(obj.memo, "engine_placements", lambda: _engine_placements(obj))


def _engine_placements(obj: K8sObject) -> tuple[list[EnginePlacement], list[str]]:
    cfg = serve_config(obj) if obj.kind == "RayService" else None
    if cfg is None:
        return [], []
    unreadable: list[str] = []
    if cfg.error:
        return [], [cfg.error]
    for app in cfg.applications:
        args = app.get("args")
        path = app.get("import_path")
        if not (isinstance(args, Mapping) and ("llm_configs" in args or "llm_config" in args)):
            unreadable.append(
                f"application '{app.get('name', '?')}' ({path}) is not a Ray Serve LLM "
                "application with llm_configs"
            )
    out: list[EnginePlacement] = []
    configs = iter(cfg.llm_configs)
    for engine in cfg.engines:
        if not engine.complete:
            unreadable.append(f"{engine.source} is a file reference, not readable here")
            continue
        llm = next(configs)
        # vLLM's integer grammar (gpustrata.vllm.flags.int_setting), as EngineSite.int_flag
        tp, pp = (
            engine.get_int(k) if engine.get(k) is not None else 1
            for k in ("tensor_parallel_size", "pipeline_parallel_size")
        )
        if tp is None or pp is None or tp < 1 or pp < 1:
            unreadable.append(f"{engine.source}: tensor/pipeline parallel sizes are not integers")
            continue
        workers = tp * pp
        pg = llm.get("placement_group_config")
        accel = llm.get("accelerator_type")
        accel = str(accel) if isinstance(accel, str) and accel else None
        if isinstance(pg, Mapping):
            strategy = str(pg.get("strategy", "PACK"))
            if strategy not in _STRATEGIES:
                unreadable.append(
                    f"{engine.source}: placement strategy {quoted(strategy)} is unknown"
                )
                continue
            per_worker = pg.get("bundle_per_worker")
            raw = [per_worker] * workers if isinstance(per_worker, Mapping) else pg.get("bundles")
            if not isinstance(raw, list) or not all(isinstance(b, Mapping) for b in raw):
                unreadable.append(f"{engine.source}: placement_group_config has no bundles")
                continue
            parsed = [{str(k): parse_number(v) for k, v in b.items()} for b in raw]
            if any(v is None or v.numerator < 0 for b in parsed for v in b.values()):
                unreadable.append(f"{engine.source}: a bundle holds a value that is not a number")
                continue
            bundles = [{k: v for k, v in b.items() if v is not None} for b in parsed]
            strategies: tuple[str, ...] = (strategy,)
            explicit = True
        else:
            bundles = [{"GPU": _ONE_GPU} for _ in range(workers)]
            old = "PACK" if pp > 1 else "STRICT_PACK"
            strategies = ("PACK",) if old == "PACK" else ("PACK", "STRICT_PACK")
            explicit = False
        deployment = as_map(llm.get("deployment_config"), f"deployment_config of {engine.source}")
        auto = deployment.get("autoscaling_config")
        num = deployment.get("num_replicas")
        if isinstance(auto, Mapping):
            lo, hi = _int(auto.get("min_replicas"), 1), _int(auto.get("max_replicas"), 1)
            why = "autoscaling_config"
        elif num is not None and num != "auto":
            lo = hi = _int(num, 1)
            why = "num_replicas"
        else:
            lo, hi = 1, 1
            why = "Serve's default min_replicas/max_replicas of 1 (ray 2.60 serve/config.py)"
        if lo is None or hi is None:
            unreadable.append(f"{engine.source}: replica counts are not integers")
            continue
        out.append(
            EnginePlacement(
                label=engine.source,
                model=engine.model,
                tp=tp,
                pp=pp,
                bundles=bundles,
                strategies=strategies,
                explicit=explicit,
                min_replicas=lo,
                max_replicas=hi,
                replicas_why=why,
                accelerator_type=accel,
            )
        )
    return out, unreadable
