"""O002 driver-supports-cuda."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpustrata.core.terminal import quoted
from gpustrata_policies.findings import Outcome, Rule, RuleContext, RuleMeta
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.catalogs import image_cuda, readable_version

if TYPE_CHECKING:
    from gpustrata.catalog.compat import DriverRequirement
from gpustrata_policies.rules._common import MANDATORY
from gpustrata_policies.view.nodes import driver_on, gpu_pools, gpu_requests, targeted_pools
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.pools import GpuPool

CUDA_DRIVER_TABLE = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#cuda-driver"


def _bound_note(need: DriverRequirement) -> str:
    """Say so when the image's CUDA update is newer than the driver table's newest one."""
    if need.requested is None:
        return ""
    newest = max(need.updates, key=lambda u: tuple(int(p) for p in u.cuda.split(".")))
    if tuple(int(p) for p in need.requested.split(".")) <= tuple(
        int(p) for p in newest.cuda.split(".")
    ):
        return ""
    return (
        f" (CUDA {newest.cuda}'s driver, the newest {need.cuda} update in the driver table: "
        "a lower bound)"
    )


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """The driver on the pool is new enough for the CUDA of every GPU image on it."""
    extra = ctx.config.gpu_resources
    pools = gpu_pools(ctx)
    for pod in obj.pods():
        if not gpu_requests(pod, extra):
            continue
        targets: list[GpuPool | None] = list(targeted_pools(pod, pools)) if pools else [None]
        for target in targets:
            driver = driver_on(ctx, target)
            if driver is None:
                continue  # nothing states which driver these nodes run
            for c in pod.containers(init=False):
                cuda = image_cuda(c.image)
                if cuda is None:
                    continue  # the image does not say which CUDA it carries
                on = f"pool {target.name}" if target else "the GPU nodes"
                if cuda.cuda is None:
                    yield ctx.not_evaluated(obj, f"{c.label} image {c.image}: {cuda.why}")
                    continue
                if driver.version is None:
                    yield ctx.not_evaluated(
                        obj,
                        f"the driver version of {on} is unknown (driver {driver.where}; "
                        "state spec.driverVersion on the pool or driver.version on the operator)",
                    )
                    continue
                need = catalogs.compat().min_driver_for_cuda(cuda.cuda)
                if need is None:
                    yield ctx.not_evaluated(
                        obj, f"CUDA {cuda.cuda} ({c.label}) is not in the CUDA driver table"
                    )
                    continue
                if not readable_version(driver.version):
                    yield ctx.not_evaluated(
                        obj, f"driver version {quoted(driver.version)} of {on} is unreadable"
                    )
                    continue
                if need.driver_ok(driver.version):
                    continue
                major_minor = ".".join(cuda.cuda.split(".")[:2])
                bound = _bound_note(need)
                yield ctx.violation(
                    obj,
                    f"{c.label} image {c.image} is built on CUDA {cuda.cuda} ({cuda.why}), "
                    f"which needs NVIDIA driver >= {need.min_driver}{bound}, but {on} runs driver "
                    f"{driver.version} ({driver.where}); the container does not start "
                    f"(nvidia-container-cli: unsatisfied condition: cuda>={major_minor})",
                    (*c.path, "image"),
                )


RULE = Rule(
    RuleMeta(
        id="O002",
        name="driver-supports-cuda",
        title="The NVIDIA driver supports the CUDA version of the inference images",
        layer="gpu-operator",
        severity="critical",
        default_enforcement=MANDATORY,
        rationale=(
            "Every CUDA release needs a minimum driver (the CUDA toolkit's driver table). "
            "The nvidia/cuda base images that vllm/vllm-openai and rayproject/ray-llm build on "
            "declare NVIDIA_REQUIRE_CUDA, so on an older driver the NVIDIA container runtime "
            "refuses to start the container; where it does start, kernels JIT-compiled from "
            "newer PTX fail with cudaErrorUnsupportedPtxVersion. The driver is the one in the "
            "node image (EKS NVIDIA AMIs) or the one the GPU Operator installs; the image's CUDA "
            "comes from its tag (cu128) or, for vllm/vllm-openai, from the compatibility "
            "catalogue."
        ),
        fix=(
            "Upgrade the node image or the operator's driver.version to one that meets the "
            "image's CUDA, or pin an image built on an older CUDA (e.g. a -cu126 tag)."
        ),
        references=(
            CUDA_DRIVER_TABLE,
            "https://docs.nvidia.com/deploy/cuda-compatibility/index.html",
            "https://github.com/vllm-project/vllm/issues/5635",
        ),
        scope="stack",
    ),
    check,
)
