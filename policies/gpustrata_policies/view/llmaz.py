"""The image of the Pod llmaz builds for a Playground on its default vLLM BackendRuntime,
from what the llmaz chart installs at a catalogued release (:mod:`gpustrata.catalog.llmaz`).

The release is the cluster profile's ``versions.llmaz``. Where it is not stated, the image
is read only where every catalogued release gives the same one (a Playground stating
``backendRuntimeConfig.version`` needs only the repository to agree); otherwise it stays
unknown, naming each release's image and ``versions.llmaz``. Either way the image is the
chart's default, which an installation may override (its Helm values
``backendRuntime.vllm.image.*`` from 0.1.2, or a BackendRuntime 'vllm' of its own): the
record says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpustrata.catalog.llmaz import LLMAZ_IMAGE_SOURCE, llmaz_backend, llmaz_backends
from gpustrata.core.unknown import UNKNOWN
from gpustrata_policies.view.objects import K8sObject, dig
from gpustrata_policies.view.profile import active_profile, profile_hint, release_spans

__all__ = ["LLMAZ_OVERRIDE", "LlmazImage", "llmaz_image"]

LLMAZ_OVERRIDE = (
    "an installation that sets the chart's backendRuntime.vllm.image values (from 0.1.2) or "
    "installs its own BackendRuntime 'vllm' runs another image"
)
"""What the default image assumes, for the records that use it."""

_MEMO = "llmaz-image"


@dataclass(frozen=True, slots=True)
class LlmazImage:
    """The image of a Playground's vLLM container, as the chart's defaults give it."""

    image: Any
    """The image reference, or UNKNOWN."""
    where: str
    """Where it was read (with the assumption it rests on), or why it is unknown."""

    @property
    def known(self) -> bool:
        """Is :attr:`image` read?"""
        return self.image is not UNKNOWN


def llmaz_image(obj: K8sObject) -> LlmazImage:
    """The image llmaz runs for the Playground *obj* on its default vLLM BackendRuntime
    (:data:`LLMAZ_IMAGE_SOURCE`), once per object."""
    found = obj.memo.get(_MEMO)
    if isinstance(found, LlmazImage):
        return found
    version = dig(obj.raw, "spec", "backendRuntimeConfig", "version")
    own = version if isinstance(version, str) and version.strip() else None
    tag = f" with its backendRuntimeConfig.version {own}" if own else ""
    profile = active_profile()
    stated = profile.versions.llmaz if profile is not None else None
    backends = llmaz_backends()
    span = f"{backends[0].release} to {backends[-1].release}"
    if stated is not None:
        backend = llmaz_backend(stated)
        if backend is None:
            result = LlmazImage(
                UNKNOWN,
                f"the image is set by the llmaz installation: llmaz {stated} (cluster profile "
                f"versions.llmaz) is not catalogued (catalogued: {span})",
            )
        else:
            result = LlmazImage(
                backend.image(own),
                f"image {backend.image(own)}: llmaz {backend.release}'s default vLLM "
                f"BackendRuntime{tag} ({backend.source}, {LLMAZ_IMAGE_SOURCE}); {LLMAZ_OVERRIDE}",
            )
    else:
        images = [(b.image(own), b.release) for b in backends]
        if len({image for image, _ in images}) == 1:
            image = images[0][0]
            result = LlmazImage(
                image,
                f"image {image}: the default vLLM BackendRuntime{tag} of every catalogued "
                f"llmaz release ({span}, e.g. {backends[-1].source}; {LLMAZ_IMAGE_SOURCE}); "
                f"{LLMAZ_OVERRIDE}",
            )
        else:
            result = LlmazImage(
                UNKNOWN,
                "the vLLM image (so the vLLM release) of llmaz's default BackendRuntime 'vllm' "
                f"differs across the catalogued llmaz releases ({release_spans(images)}, e.g. "
                f"{backends[-1].source}) and the installed release is not stated "
                f"{profile_hint('versions.llmaz')}",
            )
    obj.memo[_MEMO] = result
    return result
