"""O002 below the CUDA floor: which drivers have a forward-compatibility path.

The fixtures cover a data-center GPU on a listed branch (advisory) and unlisted branches
(mandatory); a GeForce GPU is not in the packaged catalogue, so it is checked here.
"""

from __future__ import annotations

from typing import Any

from _release import REFERENCE_IMAGE

from gpustrata.catalog.compat import load_compat_catalog
from gpustrata.catalog.hardware import GpuModel, load_hardware_catalog
from gpustrata_policies.rules.o002_driver_supports_cuda.rule import (
    VLLM_COMPAT_ENV,
    _env_on,
    _floor_case,
    _floor_text,
)
from gpustrata_policies.view.objects import ContainerRef, K8sObject, PodRef


def _container(env: list[dict[str, Any]] | None = None) -> ContainerRef:
    raw: dict[str, Any] = {"name": "vllm", "image": REFERENCE_IMAGE}
    if env is not None:
        raw["env"] = env
    obj = K8sObject({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})
    pod = PodRef(obj, ("spec",), {"containers": [raw]}, "", {})
    return ContainerRef(pod, ("spec", "containers", 0), raw)


def _below_floor(
    need: Any, driver: str, gpu: GpuModel | None, product: str | None, c: ContainerRef
) -> tuple[bool, str]:
    """O002's case for *driver* below *need*'s floor: fatal or not, and the sentence."""
    case = _floor_case(need, driver, gpu, product, _env_on(c, VLLM_COMPAT_ENV))
    return bool(case["fatal"]), _floor_text(case, c.label)


def _need() -> Any:
    need = load_compat_catalog().min_driver_for_cuda("13.0.3")
    assert need is not None
    return need


def test_geforce_has_no_forward_compatibility_path() -> None:
    l40s = load_hardware_catalog().gpu("l40s")
    assert l40s is not None
    geforce = GpuModel.model_validate(
        {**l40s.model_dump(), "id": "rtx-4090", "name": "GeForce RTX 4090", "brand": "geforce"}
    )
    fatal, why = _below_floor(_need(), "570.124.06", geforce, None, _container())
    assert fatal and "GeForce" in why


def test_listed_branch_on_data_center_gpu_names_the_mechanism() -> None:
    h100 = load_hardware_catalog().gpu("h100-sxm-80gb")
    fatal, why = _below_floor(_need(), "570.124.06", h100, None, _container())
    assert not fatal and "enable-cuda-compat" in why and "VLLM_ENABLE_CUDA_COMPATIBILITY" in why
    opted = _container([{"name": "VLLM_ENABLE_CUDA_COMPATIBILITY", "value": "1"}])
    fatal, why = _below_floor(_need(), "570.124.06", h100, None, opted)
    assert not fatal and "sets VLLM_ENABLE_CUDA_COMPATIBILITY=1" in why


def test_unlisted_branch_is_fatal() -> None:
    h100 = load_hardware_catalog().gpu("h100-sxm-80gb")
    fatal, why = _below_floor(_need(), "560.35.03", h100, None, _container())
    assert fatal and "not 560" in why


def test_a_geforce_product_label_outside_the_catalogue_has_no_forward_compatibility() -> None:
    # GFD labels an RTX 4090 node NVIDIA-GeForce-RTX-4090; the catalogue holds no such
    # GPU, but the label alone says GeForce, where forward compatibility does not run.
    fatal, why = _below_floor(_need(), "570.124.06", None, "NVIDIA-GeForce-RTX-4090", _container())
    assert fatal and "NVIDIA-GeForce-RTX-4090 is a GeForce GPU" in why
    fatal, _ = _below_floor(_need(), "570.124.06", None, "NVIDIA-H100-80GB-HBM3", _container())
    assert not fatal
