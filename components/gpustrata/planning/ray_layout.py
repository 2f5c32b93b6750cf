"""The KubeRay operator release against the stack's Ray version (compatibility catalogue).

Pure: no Pulumi import. :func:`plan_kuberay` returns the derived values `plan` shows and
raises :class:`~gpustrata.planning.plan_types.PlanError` when the catalogue documents that the
pinned operator does not support the stack's Ray version.
"""

from __future__ import annotations

from gpustrata.catalog.compat import CompatCatalog, load_compat_catalog
from gpustrata.planning.plan_types import PlanError
from gpustrata.planning.provenance import Derived, Ledger
from gpustrata.spec.stack import StackSpec

__all__ = ["plan_kuberay"]

_PATH = "gpustrata:stack.kuberay"


def plan_kuberay(spec: StackSpec, compat: CompatCatalog | None = None) -> list[Derived]:
    """Match ``kuberay.chart_version`` to ``kuberay.ray_version`` and the Ray images.

    The kuberay-operator chart is released with the operator, so the chart version is the
    KubeRay release. A release whose catalogue entry documents a minimum Ray newer than
    ``ray_version`` is an error; an uncatalogued release or one without a documented
    minimum is recorded as unchecked (rule R004 says so too).
    """
    kuberay = spec.kuberay
    ray_models = [m for m in spec.models if m.runtime == "rayservice"]
    if not kuberay.enabled and not ray_models:
        return []
    catalog = compat or load_compat_catalog()
    ledger = Ledger()
    release = catalog.kuberay(kuberay.chart_version)
    key = "kuberay"
    if release is None:
        known = ", ".join(r.version for r in catalog.kuberay_releases()[:4])
        ledger.add(
            f"{key}.supportsRay",
            "unchecked",
            "catalogue",
            f"KubeRay {kuberay.chart_version} is not in the compatibility catalogue "
            f"(newest known: {known}); its Ray support is not checked",
        )
    else:
        supported = release.supports_ray(kuberay.ray_version)
        if supported is False:
            raise PlanError(
                f"{_PATH}.ray_version",
                f"Ray {kuberay.ray_version} is older than KubeRay {release.version} supports "
                f"(Ray {release.min_ray} and later, {release.sources[0]}); set "
                f"kuberay.ray_version to {release.min_ray} or later (and the images with it), "
                "or pin an older kuberay.chart_version",
            )
        if supported:
            why = f"KubeRay {release.version} supports Ray {release.min_ray} and later"
            value = "yes"
        else:
            why = (
                f"KubeRay {release.version} documents no minimum Ray version (catalogue); "
                "not checked"
            )
            value = "unchecked"
        ledger.add(f"{key}.supportsRay", value, "catalogue", f"{why} ({release.sources[0]})")
        gates = [
            g.name for g in release.ray_version_gates if _at_least(kuberay.ray_version, g.min_ray)
        ]
        ledger.add(
            f"{key}.rayVersionGates",
            ", ".join(gates) or "none",
            "catalogue",
            f"behaviour KubeRay {release.version} switches on for rayVersion {kuberay.ray_version}",
        )
    ray_release = catalog.ray(kuberay.ray_version)
    for model in ray_models:
        image = catalog.ray_llm_image(model.image)
        if image is not None and image.vllm and image.vllm_assumed:
            ledger.add(
                f"models.{model.name}.ray.vllmVersion",
                image.vllm,
                "catalogue",
                f"ray[llm]=={image.ray} requires vllm{image.vllm_requirement}; {model.image} "
                f"is taken to run {image.vllm}, the lowest release it accepts "
                f"({image.sources[0]})",
            )
        elif image is not None and image.vllm:
            ledger.add(
                f"models.{model.name}.ray.vllmVersion",
                image.vllm,
                "catalogue",
                f"{model.image} ships the vLLM that ray[llm]=={image.ray} pins "
                f"({image.sources[0]})",
            )
        elif ray_release is not None and ray_release.vllm_requirement:
            ledger.add(
                f"models.{model.name}.ray.vllmVersion",
                f"vllm{ray_release.vllm_requirement}",
                "catalogue",
                f"ray[llm]=={ray_release.version} requires vllm{ray_release.vllm_requirement}",
            )
    return ledger.items


def _at_least(version: str, minimum: str) -> bool:
    from gpustrata.core.versions import parse_version

    a, b = parse_version(version), parse_version(minimum)
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)) >= b + (0,) * (width - len(b))
