"""O002 driver-supports-cuda."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.catalogs import ImageCuda, image_cuda, readable_version

if TYPE_CHECKING:
    from gpustrata.catalog.compat import DriverRequirement
    from gpustrata.catalog.hardware import GpuModel
from gpustrata_policies.view.nodes import (
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


def _below_floor(
    need: DriverRequirement,
    driver: str,
    gpu: GpuModel | None,
    product: str | None,
    c: ContainerRef,
) -> tuple[bool, str]:
    """Whether a driver below the floor is fatal (True) or relies on forward compatibility,
    and the sentence that says which path does or does not exist. *product* is the pool's
    GPU product label, which names a GeForce GPU the catalogue does not hold."""
    branch = driver.split(".", 1)[0]
    listed = need.image_branches()
    geforce = gpu.name if gpu is not None and gpu.brand == "geforce" else None
    if gpu is None and product is not None and "geforce" in product.lower():
        geforce = product
    if geforce is not None:
        return True, (
            f"{geforce} is a GeForce GPU: CUDA forward compatibility does not run there and "
            "NVIDIA_REQUIRE_CUDA accepts no GeForce branch below the floor"
        )
    if listed is None:
        return True, (
            f"the driver branches the CUDA {need.requested or need.cuda} image accepts through "
            "forward compatibility are not catalogued, so none is assumed"
        )
    names = "/".join(listed.branches)
    if branch not in listed.branches:
        return True, (
            f"its NVIDIA_REQUIRE_CUDA accepts older drivers only of branches {names} (CUDA "
            f"{listed.cuda}), not {branch}: no forward-compatibility path"
        )
    how = (
        f"{c.label} sets {VLLM_COMPAT_ENV}=1, so vLLM loads them"
        if _env_on(c, VLLM_COMPAT_ENV)
        else (
            "through the NVIDIA Container Toolkit's enable-cuda-compat hook, or vLLM's opt-in "
            f"{VLLM_COMPAT_ENV}=1 (vllm-project/vllm#33992) where the image's release has it"
        )
    )
    if gpu is None:
        where = "on a data-center GPU (the pool's GPU model is unknown)"
    elif gpu.brand == "professional":
        where = f"on {gpu.name} only if it is an NGC-Ready server SKU"
    else:
        where = f"on {gpu.name} (data-center)"
    return False, (
        f"its NVIDIA_REQUIRE_CUDA lists driver branch {branch} (CUDA {listed.cuda}: {names}), "
        f"so it starts and runs only through CUDA forward compatibility {where}: the image's "
        f"cuda-compat libraries must load, {how} ({FORWARD_COMPAT})"
    )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """The driver on the pool is new enough for the CUDA of every GPU image on it."""
    extra = ctx.config.gpu_resources
    pools = gpu_pools(ctx)
    # What depends on a (CUDA, driver) pair only, for this object: a pod targets tens of
    # pools, most with the same driver (issue 18: 80k pod x pool pairs per check).
    fits: dict[tuple[str, str], bool] = {}
    needs: dict[str, DriverRequirement | None] = {}
    driver_on = drivers_on(ctx)
    # A reason already given for this object: the engine keeps each one once, so the
    # same unknown driver for every container of every pod on a pool is given once here.
    given: set[str] = set()
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
            on = f"pool {target.name}" if target else "the GPU nodes"
            if images is None:
                images = []
                todo: Iterable[tuple[ContainerRef, ImageCuda | None]] = _read_images(pod, images)
            else:
                todo = images
            for c, cuda in todo:
                if cuda is None:
                    continue  # the image does not say which CUDA it carries
                if cuda.cuda is None:
                    reason = f"{c.label} image {c.image}: {cuda.why}"
                elif driver.version is None:
                    reason = (
                        f"the driver version of {on} is unknown (driver {driver.where}; "
                        "state spec.driverVersion on the pool or driver.version on the operator)"
                    )
                else:
                    if cuda.cuda not in needs:
                        needs[cuda.cuda] = catalogs.min_driver_for_cuda(cuda.cuda)
                    need = needs[cuda.cuda]
                    if need is None:
                        reason = f"CUDA {cuda.cuda} ({c.label}) is not in the CUDA driver table"
                    elif not readable_version(driver.version):
                        reason = f"driver version {quoted(driver.version)} of {on} is unreadable"
                    else:
                        pair = (cuda.cuda, driver.version)
                        ok = fits.get(pair)
                        if ok is None:
                            ok = fits[pair] = need.driver_ok(driver.version)
                        if not ok:
                            yield _below(
                                ctx, obj, c, cuda, need, driver.version, driver.where, target
                            )
                        continue
                if reason not in given:
                    given.add(reason)
                    yield ctx.not_evaluated(obj, reason)


def _below(
    ctx: RuleContext,
    obj: K8sObject,
    c: ContainerRef,
    cuda: ImageCuda,
    need: DriverRequirement,
    version: str,
    where: str,
    target: GpuPool | None,
) -> Outcome:
    """The finding on a container whose image's CUDA needs a newer driver than *version*."""
    image_cuda = cuda.cuda or ""
    on = f"pool {target.name}" if target else "the GPU nodes"
    major_minor = ".".join(image_cuda.split(".")[:2])
    gpu = gpu_model_of_pool(target) if target is not None else None
    product = target.gpu_product if target is not None else None
    fatal, path = _below_floor(need, version, gpu, product, c)
    head = (
        f"{c.label} image {c.image} is built on CUDA {image_cuda} ({cuda.why}), whose "
        f"NVIDIA_REQUIRE_CUDA=cuda>={major_minor} needs NVIDIA driver >= "
        f"{need.min_driver} (CUDA {need.cuda} GA), but {on} runs driver "
        f"{version} ({where})"
    )
    if fatal:
        return ctx.violation(
            obj,
            f"{head}; {path}; the container does not start (nvidia-container-cli: "
            f"unsatisfied condition: cuda>={major_minor})",
            (*c.path, "image"),
        )
    return ctx.violation(obj, f"{head}; {path}", (*c.path, "image"), advisory=True)


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


RULE = folder_rule(__name__, check, facts={"FORWARD_COMPAT": FORWARD_COMPAT})
