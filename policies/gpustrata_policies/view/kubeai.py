"""What a KubeAI installation fills into the Pod KubeAI builds for a vLLM ``Model``: the
resource profile's requests, limits, tolerations and node placement, and the vLLM image,
from the chart's default values at a catalogued release (:mod:`gpustrata.catalog.kubeai`).

The release is the cluster profile's ``versions.kubeai``, with the chart's own values files
the profile's ``kubeai_values`` names merged over its defaults. Where it is not stated, a value is
read only where every catalogued chart release that defines the Model's profile gives the
same one (the record says so and which releases those are); a value that differs across
them stays unknown, naming ``versions.kubeai``. A profile no catalogued release defines is
the installation's own: nothing of it is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.view.agreement import agreement
from gpustrata_policies.view.objects import K8sObject, dig
from gpustrata_policies.view.profile import active_profile, profile_hint, release_spans

if TYPE_CHECKING:  # the catalogue is read once a KubeAI Model is (issue 35: a small check)
    from gpustrata.catalog.kubeai import KubeAIDefaults

__all__ = [
    "KubeAIFill",
    "KubeAIInstall",
    "kubeai_default_basis",
    "kubeai_default_images",
    "kubeai_fill",
    "kubeai_image",
    "kubeai_install",
    "kubeai_profile",
    "multiplied",
]

_MEMO = "kubeai-install"
_FILL = "kubeai-fill"
_QUANTITY = re.compile(r"^(\d+)([A-Za-z]*)$")


def kubeai_profile(obj: K8sObject) -> tuple[str, int] | None:
    """A KubeAI Model's ``resourceProfile`` as (profile, count): ``nvidia-gpu-l4:1`` ->
    (``nvidia-gpu-l4``, 1); None when it is not of that form."""
    profile = dig(obj.raw, "spec", "resourceProfile")
    if not isinstance(profile, str) or ":" not in profile:
        return None
    name, _, count = profile.rpartition(":")
    return (name, int(count)) if count.isdigit() else None


def kubeai_image(obj: K8sObject) -> str | None:
    """A KubeAI Model's own ``spec.image`` (the server image KubeAI runs instead of the
    installation's, :data:`KUBEAI_APPLY_SOURCE` ``lookupServerImage``), or None."""
    image = dig(obj.raw, "spec", "image")
    return image if isinstance(image, str) and image.strip() else None


def multiplied(resources: Mapping[str, Any], count: int) -> dict[str, Any] | None:
    """*resources* (``{"nvidia.com/gpu": "1", "memory": "24Gi"}``) times *count*, as KubeAI's
    ``Quantity.Mul``; None when a quantity is not a whole number with an optional suffix."""
    out: dict[str, Any] = {}
    for key, value in resources.items():
        found = _QUANTITY.match(str(value).strip())
        if found is None:
            return None
        out[str(key)] = f"{int(found[1]) * count}{found[2]}"
    return out


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _releases(rows: tuple[KubeAIDefaults, ...]) -> str:
    first, last = rows[0].release, rows[-1].release
    return first if first == last else f"{first} to {last}"


@dataclass(frozen=True, slots=True)
class KubeAIInstall:
    """How a KubeAI Model's resource profile is resolved against the chart's defaults."""

    profile: str
    """The profile's name (``nvidia-gpu-h100``)."""
    count: int
    """Its multiple (``nvidia-gpu-h100:2`` -> 2)."""
    rows: tuple[KubeAIDefaults, ...]
    """The stated release's defaults, or every catalogued release defining the profile;
    empty when none is read (:attr:`problem` says why)."""
    stated: str | None
    """The cluster profile's ``versions.kubeai``."""
    problem: str | None
    """Why no defaults are read, or None."""

    @property
    def where(self) -> str:
        """Whose defaults were read: ``KubeAI chart 0.21.0's default values (source)`` or
        the releases every one of which gives the value, with the hint to state one."""
        files = self.rows[0].applied
        over = f" with {' and '.join(files)}" if files else ""
        assumed = (
            "; assumed kept by the installation, whose own values (resourceProfiles."
            f"{self.profile}, the image's key) would replace them"
        )
        if self.stated is not None:
            return (
                f"KubeAI chart {self.stated}'s default values{over} ({self.rows[0].source})"
                f"{assumed}"
            )
        return (
            f"the default values{over} of every catalogued KubeAI chart release that defines "
            f"'{self.profile}' ({_releases(self.rows)}, e.g. {self.rows[-1].source}; the "
            f"installed release is not stated {profile_hint('versions.kubeai')}){assumed}"
        )

    def fact(self, read: Callable[[KubeAIDefaults], Any]) -> tuple[bool, Any]:
        """(known, value): the value *read* gives on :attr:`rows`, known where they agree."""
        found = agreement(self.rows, read, _text)
        return found.agreed, found.value

    def unknown(self, what: str, read: Callable[[KubeAIDefaults], Any]) -> str:
        """The "not evaluated" reason for *what* (``the vLLM image``) that :meth:`fact` does
        not know."""
        if self.problem is not None:
            return f"{what} is set by the KubeAI installation: {self.problem}"
        listed = release_spans(
            (v if isinstance(v := read(d), str) else _text(v), d.release) for d in self.rows
        )
        return (
            f"{what} differs across the KubeAI chart releases that define '{self.profile}' "
            f"({listed}) and the installed release is not stated "
            f"{profile_hint('versions.kubeai')}"
        )


def kubeai_install(obj: K8sObject) -> KubeAIInstall | None:
    """The resolution of a KubeAI Model's resource profile (None when its
    ``resourceProfile`` is not ``NAME:COUNT``), once per object; raises
    :class:`~gpustrata.core.unknown.UnknownInput` when it is known only at deploy time."""
    found = obj.memo.get(_MEMO)
    if isinstance(found, KubeAIInstall):
        return found
    if dig(obj.raw, "spec", "resourceProfile") is UNKNOWN:
        raise UnknownInput("spec.resourceProfile")  # a Pulumi preview: known at deploy time
    parsed = kubeai_profile(obj)
    if parsed is None:
        return None
    from gpustrata.catalog.kubeai import defining, kubeai_defaults, kubeai_releases

    name, count = parsed
    profile = active_profile()
    stated = profile.versions.kubeai if profile is not None else None
    files = list(profile.kubeai_values) if profile is not None else []
    rows: tuple[KubeAIDefaults, ...] = ()
    problem = None
    known = kubeai_releases()
    span = f"{known[0]} to {known[-1]}" if known else "none"
    if stated is not None:
        stated = stated.removeprefix("v")
        found = kubeai_defaults(stated)
        defaults = found.with_overlays(files) if found is not None else None
        if found is None:
            problem = (
                f"KubeAI chart {stated} (cluster profile versions.kubeai) is not catalogued "
                f"(catalogued: {span})"
            )
        elif defaults is None:
            problem = (
                f"KubeAI chart {stated} has no {' or '.join(files)} beside its values.yaml "
                f"(cluster profile kubeai_values; it has {', '.join(found.overlays) or 'none'})"
            )
        elif name not in defaults.resource_profiles:
            problem = (
                f"KubeAI chart {stated}'s default values ({defaults.source}) define no "
                f"resource profile '{name}', so it is the installation's own"
            )
        else:
            rows = (defaults,)
    else:
        rows = tuple(
            merged for d in defining(name) if (merged := d.with_overlays(files)) is not None
        )
        if not rows:
            with_files = f" with {' and '.join(files)}" if files else ""
            problem = (
                f"no catalogued KubeAI chart release ({span}) defines the resource profile "
                f"'{name}' in its default values{with_files}, so it is the installation's own"
            )
    install = KubeAIInstall(name, count, rows, stated, problem)
    obj.memo[_MEMO] = install
    return install


POD_KEYS = ("nodeSelector", "affinity", "tolerations", "runtimeClassName")
"""The Pod fields a resource profile sets (``ResourceProfile``)."""


@dataclass(frozen=True, slots=True)
class KubeAIFill:
    """What the installation's defaults give the Pod KubeAI builds for a Model."""

    pod: Mapping[str, Any]
    """Pod fields (:data:`POD_KEYS`), UNKNOWN where not known."""
    container: Mapping[str, Any]
    """The server container's ``image`` and ``resources``, UNKNOWN where not known."""
    filled: tuple[str, ...]
    """Each value read from the defaults, worded (``image vllm/vllm-openai:...``)."""
    unknown: Mapping[str, str]
    """Field (``image``, ``tolerations``, ``resources``) -> why it is not known."""
    where: str
    """Whose defaults were read (:attr:`KubeAIInstall.where`), or ``""``."""


def _toleration(t: Any) -> str:
    if not isinstance(t, Mapping):
        return _text(t)
    value = f"={t['value']}" if t.get("value") is not None else ""
    return f"{t.get('key', '*')}{value}:{t.get('effect', '*')}"


def _worded(key: str, value: Any) -> str:
    if key == "tolerations":
        shown = ", ".join(_toleration(t) for t in value) if value else ""
        return f"tolerations {shown}" if shown else "no tolerations"
    if key == "nodeSelector":
        pairs = ", ".join(f"{k}={v}" for k, v in value.items()) if value else ""
        return f"node selector {pairs}" if pairs else "no node selector"
    return f"{key} {_text(value)}"


def _profile_value(name: str, key: str) -> Callable[[KubeAIDefaults], Any]:
    return lambda d: d.resource_profiles[name].get(key)


def _pod_fields(
    install: KubeAIInstall, pod: dict[str, Any], filled: list[str], unknown: dict[str, str]
) -> None:
    for key in POD_KEYS:
        read = _profile_value(install.profile, key)
        known, value = install.fact(read)
        if not known:
            pod[key] = UNKNOWN
            unknown[key] = install.unknown(f"the profile's {key}", read)
        elif value is not None or key in ("nodeSelector", "tolerations"):
            if value is not None:
                pod[key] = value
            filled.append(_worded(key, value))


def _resources(install: KubeAIInstall, filled: list[str], unknown: dict[str, str]) -> Any:
    resources: dict[str, Any] = {}
    for section in ("limits", "requests"):
        read = _profile_value(install.profile, section)
        known, value = install.fact(read)
        times = multiplied(value, install.count) if known and isinstance(value, Mapping) else {}
        if not known or times is None:
            unknown["resources"] = install.unknown(f"the profile's {section}", read)
            return UNKNOWN
        if times:
            resources[section] = times
            shown = ", ".join(f"{v} {k}" for k, v in times.items())
            filled.append(f"{section} {shown} ({install.count} x the profile's)")
    return resources


def kubeai_fill(obj: K8sObject) -> KubeAIFill:
    """What the chart's defaults fill into *obj*'s Pod (a ``spec.engine: VLLM`` KubeAI
    Model), once per object: each field the release (or every catalogued release defining
    the profile) gives alike; the others UNKNOWN with the reason."""
    found = obj.memo.get(_FILL)
    if isinstance(found, KubeAIFill):
        return found
    install = kubeai_install(obj)
    pod: dict[str, Any] = {}
    filled: list[str] = []
    unknown: dict[str, str] = {}
    image = kubeai_image(obj)
    if install is None:
        from gpustrata.catalog.kubeai import KUBEAI_APPLY_SOURCE

        stated = dig(obj.raw, "spec", "resourceProfile")
        why = (
            f"resourceProfile {stated!r} is not of the form NAME:COUNT (KubeAI refuses it: "
            f"{KUBEAI_APPLY_SOURCE}), so what the profile gives the Pod is not known"
        )
        unknown = dict.fromkeys(("tolerations", "resources", "image"), why)
        pod["tolerations"] = UNKNOWN
        result = KubeAIFill(pod, {"image": image or UNKNOWN}, (), unknown, "")
        obj.memo[_FILL] = result
        return result
    _pod_fields(install, pod, filled, unknown)
    container: dict[str, Any] = {"resources": _resources(install, filled, unknown)}
    if image is None:
        profile = install.profile

        def read_image(d: KubeAIDefaults) -> Any:
            return d.vllm_image(profile)

        known, value = install.fact(read_image)
        if known and isinstance(value, str):
            image = value
            filled.append(f"image {value} (modelServers.VLLM.images)")
        else:
            unknown["image"] = install.unknown("the vLLM image (so the vLLM release)", read_image)
    container["image"] = image or UNKNOWN
    where = install.where if install.rows else ""
    result = KubeAIFill(pod, container, tuple(filled), unknown, where)
    obj.memo[_FILL] = result
    return result


def kubeai_default_images(obj: K8sObject) -> tuple[str, ...]:
    """The vLLM images a KubeAI Model without ``spec.image`` runs on each catalogued chart
    release defining its profile, oldest first and each once, where those releases' defaults
    differ and the installed release is not stated (empty otherwise): a rule whose verdict
    is the same on all of them decides without the release; any other keeps the record
    :func:`kubeai_fill` gives (the image differs, naming ``versions.kubeai``)."""
    if obj.kind != "Model" or dig(obj.raw, "spec", "engine") != "VLLM" or kubeai_image(obj):
        return ()
    try:
        install = kubeai_install(obj)
    except UnknownInput:
        return ()
    if install is None or install.stated is not None or "image" not in kubeai_fill(obj).unknown:
        return ()
    images = [d.vllm_image(install.profile) for d in install.rows]
    if not images or not all(isinstance(i, str) for i in images):
        return ()
    return tuple(dict.fromkeys(str(i) for i in images))


def kubeai_default_basis(obj: K8sObject) -> str:
    """Why a KubeAI Model without ``spec.image`` may run each release of
    :func:`kubeai_default_images` (for a record judged under each): the chart releases
    defining its profile, and the installation key that would replace their default,
    which the installation is assumed to keep; ``""`` where there are no such images."""
    if not kubeai_default_images(obj):
        return ""
    install = kubeai_install(obj)
    assert install is not None  # kubeai_default_images read it
    names = dict.fromkeys(
        str(d.resource_profiles[install.profile].get("imageName") or "default")
        for d in install.rows
    )
    keys = " or ".join(f"modelServers.VLLM.images.{n}" for n in names)
    return (
        f"the Model names no image, so KubeAI runs its installation's vLLM image for "
        f"'{install.profile}': the default of each catalogued KubeAI chart release defining "
        f"it ({_releases(install.rows)}, e.g. {install.rows[-1].source}), assumed kept by the "
        f"installation ({keys} or the Model's spec.image would replace it)"
    )
