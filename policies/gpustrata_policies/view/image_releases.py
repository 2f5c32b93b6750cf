"""The vLLM release an image runs, as far as its reference says (:func:`image_release`):
``vllm/vllm-openai`` tags, moving tags, digests, ``rayproject/ray-llm`` through its Ray pin,
KAITO's base image, vendor builds and other publishers' builds. Split from
:mod:`gpustrata_policies.view.engines` (which re-exports it), the engine reader that asks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpustrata.catalog.kaito import base_image_vllm
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.core.versions import parse_version
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.profile import active_profile
from gpustrata_policies.view.vllm_args import (
    image_publisher,
    moving_tag,
    split_image,
    vllm_tagged_image,
    vllm_version,
)

Version = tuple[int, ...]

__all__ = [
    "VENDOR_BUILDS",
    "ImageRelease",
    "Version",
    "image_release",
    "release_key",
    "release_version",
]


def release_version(text: str | None) -> Version | None:
    """A vLLM release as a 3-part comparison key: ``'1.2.3'`` -> ``(1, 2, 3)``, ``'v1.2'``
    -> ``(1, 2, 0)``, ``'1.2.3.post1'`` -> ``(1, 2, 3)``; ``None`` when it is no version.
    Read with :func:`gpustrata.core.versions.parse_version`, the one version grammar."""
    if not text:
        return None
    try:
        parts = parse_version(text)
    except ValueError:
        return None
    return (*parts, 0, 0, 0)[:3]


def release_key(version: str) -> Version:
    """A catalogued release as a comparison key (``'1.2.3'`` -> ``(1, 2, 3)``)."""
    key = release_version(version)
    if key is None:
        raise ValueError(f"{version!r} is not a release version")
    return key


VENDOR_BUILDS = (
    ("nvcr.io/nvidia/", "NVIDIA NGC"),
    ("registry.redhat.io/rhaiis/", "Red Hat AI Inference Server"),
    ("vertex-ai/", "Vertex AI Model Garden"),
)
"""Vendor builds of vLLM whose tags are the vendor's own versions (repository prefix or
part, vendor); the vLLM inside is the release catalogue's ``vendor_images`` mapping where
the vendor's notes name it (read first, for any image: AIBrix's builds too), else unknown."""


@dataclass(frozen=True, slots=True)
class ImageRelease:
    """The vLLM release an image runs, as far as its reference says."""

    version: str | None
    """The release (``0.10.1.1``); None when the reference names none."""
    where: str
    """How it was read, or why no release is known (for messages)."""
    assumed: bool = False
    """The release is a bound, not read: a ``ray-llm`` image whose Ray release gives a lower
    bound only (its lowest release)."""
    ray: str | None = None
    """The Ray release whose pin gave the version (``rayproject/ray-llm``)."""
    unpinned: bool = False
    """An upstream vLLM image whose reference names no release (a moving tag such as
    ``latest``, no tag, a digest alone): it runs some vLLM release, any of the catalogued
    ones, so a rule may judge it under each (:func:`release_candidates`)."""
    floor: str | None = None
    """Another publisher's ``vllm-openai`` build whose tag leads with a vLLM release and adds
    its own build words (``v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2``, kthena's and AIBrix's
    P/D images): built on that release or a later one, never an earlier one. AIBrix's own
    README builds ``aibrix/vllm-openai:v0.10.0-nixl-latest`` from VLLM_BASE_TAG=v0.10.2
    (vllm-project/aibrix@e3e10f9e:samples/disaggregation/vllm/README.md), so the leading
    release is a floor, not the base (:func:`release_candidates`)."""
    defaults: tuple[str, ...] = ()
    """The releases of the default images a controller's installation may run where the
    manifest names no image and the installed release is not stated (a KubeAI Model:
    :func:`default_image_releases`), oldest first: a rule may judge the engine under each,
    as for an unpinned image (:func:`release_candidates`)."""


def image_release(image: Any) -> ImageRelease | None:
    """The vLLM release of an image reference as people write them: ``vllm/vllm-openai``
    tags (``v0.10.1.1``, ``v0.20.2-cu129``), ``latest`` or no tag (unpinned: no release,
    never an assumed one), a digest alone (names no release), a
    ``rayproject/ray-llm`` tag (through the vLLM its Ray release pins), another
    publisher's ``vllm-openai`` (``lmcache/vllm-openai``: its own versions) and vendor
    builds (unknown). None when the image is none of these."""
    if image is UNKNOWN:
        raise UnknownInput("image")
    if not isinstance(image, str):
        return None
    profile = active_profile()
    stated = profile.image_release(image) if profile is not None else None
    if stated is not None:
        return ImageRelease(
            stated.vllm.removeprefix("v"),
            f"image {image} (vLLM {stated.vllm.removeprefix('v')}, cluster profile images "
            f"{stated.pattern})",
        )
    repo, tag, digest = split_image(image)
    if repo.endswith("rayproject/ray-llm"):
        info = catalogs.compat().ray_llm_image(tag or "")
        if info is not None and info.vllm and info.vllm_assumed:
            return ImageRelease(
                info.vllm,
                f"image {image} (Ray {info.ray} requires vllm{info.vllm_requirement}: "
                f"assumed to run {info.vllm}, the lowest release it accepts)",
                assumed=True,
                ray=info.ray,
            )
        if info is not None and info.vllm:
            return ImageRelease(
                info.vllm, f"image {image} (Ray {info.ray} pins vllm=={info.vllm})", ray=info.ray
            )
        return ImageRelease(None, f"image {image} does not pin a vLLM version the catalogue knows")
    kaito = base_image_vllm(image)
    if kaito is not None:  # KAITO's preset image: its requirements pin the vLLM release
        vllm, row = kaito
        return ImageRelease(
            vllm,
            f"image {image} (the kaito-base image of KAITO {row.release} installs vLLM "
            f"{vllm}: {row.source})",
        )
    build = catalogs.vllm_releases().vendor_image(repo, tag or "")
    if build is not None:  # a vendor build whose notes or build files name its vLLM
        return ImageRelease(
            build.vllm,
            f"image {image} ({build.vendor} {tag} ships vLLM {build.vllm}: {build.source})",
        )
    publisher = image_publisher(image)
    if publisher is not None:
        return ImageRelease(
            None,
            f"image {image} is a {publisher} build tagged {tag or 'latest'!r}, not with a vLLM "
            f"version, and the catalogue does not map {publisher}'s tags to the vLLM inside",
        )
    for prefix, vendor in VENDOR_BUILDS:
        if prefix in repo and "vllm" in repo.lower():
            return ImageRelease(
                None,
                f"image {image} is a {vendor} build tagged with the vendor's version; the "
                "vLLM release inside is not catalogued",
            )
    if not vllm_tagged_image(image):
        return None
    version = vllm_version(image)
    if version is not None:
        return ImageRelease(version, f"image {image}")
    if tag is None and digest is not None:
        return ImageRelease(
            None, f"image {image} is pinned by digest, which names no vLLM version", unpinned=True
        )
    if moving_tag(tag) is not None:
        # A moving tag (latest, nightly, main, ...: vllm_args.MOVING_TAG_WORDS, the words
        # K013 reports) names no release: what it runs changed with every vLLM release, so
        # no default-dependent figure is read from it (K013 reports the moving tag itself).
        shown = f"tag {tag!r}" if tag else "no tag"
        return ImageRelease(
            None,
            f"image {image} is unpinned ({shown}): it names no vLLM release, and the one it "
            "runs moves with every push",
            unpinned=True,
        )
    lead = _LEADING_RELEASE.match(tag or "")
    return ImageRelease(
        None,
        f"image {image}: tag {tag!r} names no vLLM release",
        floor=lead.group(1) if lead and catalogs.compat().vllm(lead.group(1)) else None,
    )


_LEADING_RELEASE = re.compile(r"v(\d+\.\d+\.\d+(?:\.\d+|\.post\d+)?)-[a-z]")
"""A tag that leads with a vLLM release and adds build words (``v0.10.0-cu128-nixl-...``):
:attr:`ImageRelease.floor`."""
