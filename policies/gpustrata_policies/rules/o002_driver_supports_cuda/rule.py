"""O002 driver-supports-cuda."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._common import and_joined
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, judged
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.catalogs import ImageCuda, image_cuda, readable_version

if TYPE_CHECKING:
    from gpustrata.catalog.compat import DriverRequirement
    from gpustrata.catalog.hardware import GpuModel
from gpustrata_policies.view.nodes import (
    Driver,
    drivers_on,
    gpu_model_of_pool,
    gpu_pools,
    gpu_requests,
    targeted_pools,
)
from gpustrata_policies.view.objects import ContainerRef, K8sObject, PodRef
from gpustrata_policies.view.pools import GpuPool

FORWARD_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html"
VLLM_COMPAT_ENV = "VLLM_ENABLE_CUDA_COMPATIBILITY"


def _env_on(c: ContainerRef, name: str) -> bool:
    """The container sets ``name`` to 1/true (vLLM's boolean reading)."""
    value = c.literal_env().get(name)
    return value is not None and value.strip().lower() in ("1", "true")


def _floor_case(
    need: DriverRequirement,
    driver: str,
    gpu: GpuModel | None,
    product: str | None,
    compat_env: bool = False,
) -> dict[str, Value]:
    """Which path a driver below the floor has: ``fatal`` (no forward-compatibility path:
    the container does not start) or not, and the figures that say why. *product* is the
    pool's GPU product label, which names a GeForce GPU the catalogue does not hold;
    *compat_env*: the container sets VLLM_ENABLE_CUDA_COMPATIBILITY=1."""
    branch = driver.split(".", 1)[0]
    listed = need.image_branches()
    geforce = gpu.name if gpu is not None and gpu.brand == "geforce" else None
    if gpu is None and product is not None and "geforce" in product.lower():
        geforce = product
    if geforce is not None:
        return {"fatal": True, "floor": "geforce", "geforce": geforce}
    if listed is None:
        requested = need.requested or need.cuda
        return {"fatal": True, "floor": "branches-uncatalogued", "requested": requested}
    case: dict[str, Value] = {
        "branch": branch,
        "branches": tuple(listed.branches),
        "branches_cuda": listed.cuda,
    }
    if branch not in listed.branches:
        return {**case, "fatal": True, "floor": "branch-not-listed"}
    brand = gpu.brand if gpu is not None else None
    gpu_name = gpu.name if gpu is not None else None
    return {
        **case,
        "fatal": False,
        "floor": "forward-compat",
        "brand": brand,
        "gpu": gpu_name,
        "compat_env": compat_env,
    }


_FLOOR_TEXTS: Mapping[str, str] = {
    "geforce": (
        "{geforce} is a GeForce GPU: CUDA forward compatibility does not run there and "
        "NVIDIA_REQUIRE_CUDA accepts no GeForce branch below the floor"
    ),
    "branches-uncatalogued": (
        "the driver branches the CUDA {requested} image accepts through forward "
        "compatibility are not catalogued, so none is assumed"
    ),
    "branch-not-listed": (
        "its NVIDIA_REQUIRE_CUDA accepts older drivers only of branches {names} (CUDA "
        "{branches_cuda}), not {branch}: no forward-compatibility path"
    ),
    "forward-compat": (
        "its NVIDIA_REQUIRE_CUDA lists driver branch {branch} (CUDA {branches_cuda}: {names}), "
        "so it starts and runs only through CUDA forward compatibility {on_gpu}: the image's "
        "cuda-compat libraries must load, {how} ({source})"
    ),
}
"""Which forward-compatibility path a driver below the floor has, by case (``{key}``: a
verdict value)."""


def _floor_text(v: Mapping[str, Value], label: Value) -> str:
    """The sentence that says which forward-compatibility path does or does not exist."""
    how = (
        f"{label} sets {VLLM_COMPAT_ENV}=1, so vLLM loads them"
        if v.get("compat_env")
        else (
            "through the NVIDIA Container Toolkit's enable-cuda-compat hook, or vLLM's opt-in "
            f"{VLLM_COMPAT_ENV}=1 (vllm-project/vllm#33992) where the image's release has it"
        )
    )
    if v.get("gpu") is None:
        on_gpu = "on a data-center GPU (the pool's GPU model is unknown)"
    elif v["brand"] == "professional":
        on_gpu = f"on {v['gpu']} only if it is an NGC-Ready server SKU"
    else:
        on_gpu = f"on {v['gpu']} (data-center)"
    names = "/".join(str(b) for b in cast(tuple[str, ...], v.get("branches", ())))
    words = {"names": names, "how": how, "on_gpu": on_gpu, "source": FORWARD_COMPAT}
    return _FLOOR_TEXTS[str(v["floor"])].format_map({**v, **words})


@dataclass
class _Pairs:
    """What depends on a (CUDA, driver) pair only, for one object: a pod targets tens of
    pools, most with the same driver (issue 18: 80k pod x pool pairs per check)."""

    fits: dict[tuple[str, str], bool] = field(default_factory=dict)
    needs: dict[str, DriverRequirement | None] = field(default_factory=dict)
    readables: dict[str, bool] = field(default_factory=dict)

    def readable(self, driver: str) -> bool:
        """Does *driver* parse as a version (:func:`readable_version`, once per text)?"""
        ok = self.readables.get(driver)
        if ok is None:
            ok = self.readables[driver] = readable_version(driver)
        return ok

    def need(self, cuda: str) -> DriverRequirement | None:
        """The catalogue's driver floor for *cuda*."""
        if cuda not in self.needs:
            self.needs[cuda] = catalogs.min_driver_for_cuda(cuda)
        return self.needs[cuda]

    def fit(self, need: DriverRequirement, cuda: str, driver: str) -> bool:
        """Does *driver* meet *need* (the floor of *cuda*)?"""
        pair = (cuda, driver)
        ok = self.fits.get(pair)
        if ok is None:
            ok = self.fits[pair] = need.driver_ok(driver)
        return ok


def _on(target: GpuPool | None) -> str:
    """Where an image runs, as a verdict names it: ``pool NAME`` or ``the GPU nodes``."""
    return f"pool {target.name}" if target else "the GPU nodes"


def _judge_image(
    pairs: _Pairs, c: ContainerRef, cuda: ImageCuda, driver: Driver, target: GpuPool | None
) -> Verdict | None:
    """One GPU image's CUDA against the driver of one target pool. The texts a verdict
    shows (the container's label, the pool) are built only for a verdict: most pairs fit
    and give none (issue 35: a pod is judged on every pool it targets)."""
    if cuda.cuda is None:
        values: dict[str, Value] = {"container": c.label, "image": f"{c.image}", "why": cuda.why}
        return Verdict("not_evaluated", "image-cuda-unread", values=values)
    if driver.version is None:
        on = _on(target)
        return Verdict("not_evaluated", "driver-unknown", values={"on": on, "where": driver.where})
    need = pairs.need(cuda.cuda)
    if need is None:
        values = {"container": c.label, "cuda": cuda.cuda}
        return Verdict("not_evaluated", "cuda-uncatalogued", values=values)
    if not pairs.readable(driver.version):
        values = {"on": _on(target), "driver": driver.version}
        return Verdict("not_evaluated", "driver-unreadable", values=values)
    if pairs.fit(need, cuda.cuda, driver.version):
        return None
    gpu = gpu_model_of_pool(target) if target is not None else None
    product = target.gpu_product if target is not None else None
    case = _floor_case(need, driver.version, gpu, product, _env_on(c, VLLM_COMPAT_ENV))
    return Verdict(
        "violation" if case["fatal"] else "advisory",
        "driver-below-floor",
        values={
            "container": c.label,
            "image": f"{c.image}",
            "cuda": cuda.cuda,
            "why": cuda.why,
            "on": _on(target),
            "driver": driver.version,
            "where": driver.where,
            **case,
        },
        thresholds={"min_driver": need.min_driver, "cuda_ga": need.cuda},
        sources=(FORWARD_COMPAT,),
        path=(*c.path, "image"),
    )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """The driver on the pool is new enough for the CUDA of every GPU image on it."""
    extra = ctx.config.gpu_resources
    pools = gpu_pools(ctx)
    pairs = _Pairs()
    driver_on = drivers_on(ctx)
    # A reason already given for this object: the engine keeps each one once, so the
    # same unknown driver for every container of every pod on a pool is given once here.
    given: set[tuple[str, tuple[tuple[str, Value], ...]]] = set()
    unknown_on: dict[str, dict[str, None]] = {}  # driver source -> pools, in order
    for pod in obj.pods():
        if not gpu_requests(pod, extra):
            continue
        targets: list[GpuPool | None] = list(targeted_pools(pod, pools)) if pools else [None]
        # The pod's GPU images with their CUDA, read on the first target that has a driver
        # (the same reads in the same order as one pass per target), then reused.
        images: list[tuple[ContainerRef, ImageCuda]] | None = None
        for target in targets:
            driver = driver_on(target)
            if driver is None:
                continue  # nothing states which driver these nodes run
            if images is None:
                images = []
                todo: Iterable[tuple[ContainerRef, ImageCuda | None]] = _read_images(pod, images)
            else:
                todo = images
            # The driver of these nodes is unknown: each image that names its CUDA adds
            # the pool to the one record per driver source below (no verdict per image).
            unknown = driver.where if driver.version is None else None
            for c, cuda in todo:
                if cuda is None:
                    continue  # the image does not say which CUDA it carries
                if unknown is not None and cuda.cuda is not None:
                    unknown_on.setdefault(unknown, {})[_on(target)] = None
                    continue
                verdict = _judge_image(pairs, c, cuda, driver, target)
                if verdict is None or verdict.decision != "not_evaluated":
                    yield from (verdict,) if verdict else ()
                    continue
                if verdict.reason == "driver-unknown":
                    # One record per object and driver source names every such pool
                    # (a pod targets tens of pools: a record each drowned the report).
                    unknown_on.setdefault(str(verdict.values["where"]), {})[
                        str(verdict.values["on"])
                    ] = None
                    continue
                key = (verdict.reason, tuple(verdict.values.items()))
                if key not in given:
                    given.add(key)
                    yield verdict
    for where, on in unknown_on.items():
        yield Verdict(
            "not_evaluated", "driver-unknown", values={"on": _and(list(on)), "where": where}
        )


def _and(names: list[str]) -> str:
    """``pool a``, ``pools a and b``, ``pools a, b and c``; "the GPU nodes" stays as it is."""
    if len(names) == 1:
        return names[0]
    return f"pools {and_joined([n.removeprefix('pool ') for n in names])}"


_NOT_EVALUATED: Mapping[str, str] = {
    "image-cuda-unread": "{container} image {image}: {why}",
    "driver-unknown": (
        "the driver version of {on} is unknown (driver {where}; state spec.driverVersion on "
        "the pool or driver.version on the operator)"
    ),
    "cuda-uncatalogued": "CUDA {cuda} ({container}) is not in the CUDA driver table",
    "driver-unreadable": "driver version {quoted_driver} of {on} is unreadable",
}
"""The prose of O002's not-evaluated verdicts, by reason (``{key}``: a verdict value)."""


def message(verdict: Verdict) -> str:
    """The prose of an O002 verdict."""
    v, t = verdict.values, verdict.thresholds
    if verdict.reason in _NOT_EVALUATED:
        quoted_driver = quoted(v["driver"]) if "driver" in v else ""
        return _NOT_EVALUATED[verdict.reason].format_map({**v, "quoted_driver": quoted_driver})
    major_minor = ".".join(str(v["cuda"]).split(".")[:2])
    head = (
        f"{v['container']} image {v['image']} is built on CUDA {v['cuda']} ({v['why']}), whose "
        f"NVIDIA_REQUIRE_CUDA=cuda>={major_minor} needs NVIDIA driver >= "
        f"{t['min_driver']} (CUDA {t['cuda_ga']} GA), but {v['on']} runs driver "
        f"{v['driver']} ({v['where']})"
    )
    path = _floor_text(v, v["container"])
    if v["fatal"]:
        return (
            f"{head}; {path}; the container does not start (nvidia-container-cli: "
            f"unsatisfied condition: cuda>={major_minor})"
        )
    return f"{head}; {path}"


def _read_images(
    pod: PodRef, into: list[tuple[ContainerRef, ImageCuda]]
) -> Iterator[tuple[ContainerRef, ImageCuda | None]]:
    """Each app container of *pod* with its image's CUDA, as read; those whose image names
    a CUDA are kept in *into* for the pod's other targets."""
    for c in pod.containers(init=False):
        cuda = image_cuda(c.image)
        if cuda is not None:
            into.append((c, cuda))
        yield c, cuda


RULE = folder_rule(__name__, judged(judge, message), facts={"FORWARD_COMPAT": FORWARD_COMPAT})
