"""What llmaz fills into the Pod it builds for a Playground on its default vLLM
BackendRuntime (image, command, the recommended config's args and ``/dev/shm``, probes), from
what the llmaz chart installs at a catalogued release (:mod:`gpustrata.catalog.llmaz`).

The release is the cluster profile's ``versions.llmaz``. Where it is not stated, a value is
read only where every catalogued release gives the same one (a Playground stating
``backendRuntimeConfig.version`` needs only the image repository to agree, one stating
``backendRuntimeConfig.sharedMemorySize`` no release at all); otherwise it stays unknown,
naming each release's value and ``versions.llmaz``. Either way it is the chart's default,
which an installation may override (its Helm values ``backendRuntime.vllm.image.*`` from
0.1.2, or a BackendRuntime 'vllm' of its own): the record says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpustrata.core.unknown import UNKNOWN
from gpustrata_policies.view.objects import K8sObject, dig
from gpustrata_policies.view.profile import active_profile, profile_hint, release_spans

if TYPE_CHECKING:  # the catalogue is read once a Playground is (issue 35: a small check)
    from gpustrata.catalog.llmaz import LlmazBackend

__all__ = ["LLMAZ_OVERRIDE", "LlmazFill", "LlmazImage", "llmaz_fill", "llmaz_image"]

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
    from gpustrata.catalog.llmaz import LLMAZ_IMAGE_SOURCE, llmaz_backend, llmaz_backends

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


_FILL = "llmaz-fill"


@dataclass(frozen=True, slots=True)
class LlmazFill:
    """The rest of what the chart's default BackendRuntime gives a Playground's Pod."""

    command: Any
    """The container command, or UNKNOWN."""
    args: Any
    """The ``default`` recommended config's args (llmaz's ``{{ .ModelPath }}`` placeholders
    kept), or UNKNOWN."""
    shm: Any
    """The ``/dev/shm`` size (``2Gi``), None for none, or UNKNOWN."""
    probes: Any
    """``startupProbe`` / ``livenessProbe`` / ``readinessProbe`` -> probe, or UNKNOWN."""
    resources: Any
    """The recommended config's ``requests`` / ``limits`` (CPU, memory), None, or UNKNOWN."""
    unknown: Mapping[str, str]
    """Field (``probes``, ``/dev/shm`` ...) -> why it is not known."""


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _probes(probes: Any) -> str:
    """``startup, liveness, readiness`` (the probes a release sets), or ``none``."""
    names = [str(p).removesuffix("Probe") for p in probes or {}]
    return ", ".join(names) if names else "none"


def _rows(obj: K8sObject) -> tuple[Sequence[LlmazBackend], str | None]:
    """The releases whose defaults decide (the stated one, or every catalogued one) and
    why none does."""
    from gpustrata.catalog.llmaz import llmaz_backend, llmaz_backends

    profile = active_profile()
    stated = profile.versions.llmaz if profile is not None else None
    if stated is None:
        return llmaz_backends(), None
    backend = llmaz_backend(stated)
    if backend is None:
        return (), llmaz_image(obj).where
    return (backend,), None


def llmaz_fill(obj: K8sObject) -> LlmazFill:
    """Command, args, ``/dev/shm`` and probes of the Pod llmaz builds for the Playground
    *obj*, each read where the stated release gives it or every catalogued release agrees
    (:func:`llmaz_image` gives the image), once per object."""
    found = obj.memo.get(_FILL)
    if isinstance(found, LlmazFill):
        return found
    rows, problem = _rows(obj)
    unknown: dict[str, str] = {}

    def agreed(
        what: str, read: Callable[[LlmazBackend], Any], word: Callable[[Any], str] = _text
    ) -> Any:
        values = [read(b) for b in rows]
        if values and all(_text(v) == _text(values[0]) for v in values):
            return values[0]
        if problem is not None:
            unknown[what] = problem
        else:
            spans = release_spans((word(v), b.release) for v, b in zip(values, rows, strict=True))
            unknown[what] = (
                f"the {what} of llmaz's default BackendRuntime 'vllm' "
                f"{'differ' if what.endswith('s') else 'differs'} across the "
                f"catalogued llmaz releases ({spans}, e.g. {rows[-1].source}) and the installed "
                f"release is not stated {profile_hint('versions.llmaz')}"
            )
        return UNKNOWN

    def config(key: str) -> Callable[[LlmazBackend], Any]:
        return lambda b: (b.configs.get("default") or {}).get(key)

    own_shm = dig(obj.raw, "spec", "backendRuntimeConfig", "sharedMemorySize")
    result = LlmazFill(
        agreed("command", lambda b: list(b.command)),
        agreed("args", config("args")),
        own_shm
        if isinstance(own_shm, str)
        else agreed("/dev/shm", config("sharedMemorySize"), lambda v: v or "none"),
        agreed("probes", lambda b: dict(b.probes), _probes),
        agreed("resources", config("resources")),
        unknown,
    )
    obj.memo[_FILL] = result
    return result
