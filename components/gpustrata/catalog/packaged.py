"""The catalogue's packaged data files (``gpustrata/catalog/data/``): one reader for all.

Every catalogue module reads its cited YAML through these functions, so where the files
live and how a broken one is reported is said once. :class:`CatalogError` is the error of
every catalogue's data (a file, an entry, a user-supplied extension).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from gpustrata.core.versions import parse_version
from gpustrata.core.yamlio import safe_load

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "CatalogError",
    "CitedTable",
    "catalog_yaml",
    "cited_table",
    "packaged_document",
    "packaged_mapping",
    "packaged_model",
    "packaged_text",
    "per_release",
]

_PACKAGE = "gpustrata.catalog"

_M = TypeVar("_M", bound="BaseModel")
_R = TypeVar("_R")


class CatalogError(ValueError):
    """A catalogue file or a user-supplied entry is invalid or inconsistent."""


def packaged_text(path: str) -> str:
    """The text of a packaged file, *path* relative to ``gpustrata/catalog``
    (``data/aws.yaml``)."""
    return resources.files(_PACKAGE).joinpath(path).read_text(encoding="utf-8")


def packaged_document(path: str) -> Any:
    """The YAML document of a packaged file; a file that cannot be read or parsed is a
    :class:`CatalogError` naming it."""
    try:
        text = packaged_text(path)
    except OSError as exc:
        raise CatalogError(f"{path}: cannot be read: {exc}") from exc
    return catalog_yaml(text, path)


def catalog_yaml(text: str, name: str, error: type[CatalogError] = CatalogError) -> Any:
    """The YAML document of catalogue file *name* (packaged or a user's); text that is not
    YAML is an *error* naming the file."""
    try:
        return safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{name}: not valid YAML: {exc}") from exc


@functools.cache
def packaged_mapping(path: str) -> Mapping[str, Any]:
    """The packaged document as a mapping (empty when it is not one), read once."""
    data = packaged_document(path)
    return data if isinstance(data, Mapping) else {}


def packaged_model(path: str, model: type[_M]) -> _M:
    """The YAML document of a packaged file validated as *model*; one that does not
    validate is a :class:`CatalogError` naming the file and each bad key and value."""
    from pydantic import ValidationError  # here: the catalogues the rules read need none

    try:
        return model.model_validate(packaged_document(path))
    except ValidationError as exc:
        raise CatalogError(f"{path}: invalid: {exc}") from exc


@dataclass(frozen=True, slots=True)
class CitedTable:
    """A packaged table a tool generates from an upstream file (``tools/eks_ami_drivers.py``,
    ``tools/aks_image_drivers.py``): its rows by release and where it was read."""

    releases: Mapping[str, Mapping[str, str]]
    """Release -> key -> value (empty when the file has none)."""
    source: str
    """Where the table was read (``owner/repo@commit:path``)."""
    document: Mapping[str, Any]
    """The whole document, for the table's other keys."""


@functools.cache
def cited_table(path: str, default_source: str) -> CitedTable:
    """The cited table in packaged file *path*; *default_source* names the upstream file
    when the document does not say which commit it was read at."""
    document = packaged_mapping(path)
    releases = document.get("releases")
    return CitedTable(
        releases if isinstance(releases, Mapping) else {},
        str(document.get("source", default_source)),
        document,
    )


def per_release(
    path: str, key: str, build: Callable[[Mapping[str, Any], str], _R]
) -> dict[str, _R]:
    """The per-release table a ``tools/`` generator writes (``data/kaito-presets.yaml``):
    each row of the document's ``releases`` lists under *key* the releases it holds for;
    *build* makes one release's record from its row. Release -> record, oldest first
    (:func:`~gpustrata.core.versions.parse_version`)."""
    out: dict[str, _R] = {}
    for row in packaged_mapping(path)["releases"]:
        for release in map(str, row[key]):
            out[release] = build(row, release)
    return dict(sorted(out.items(), key=lambda item: parse_version(item[0])))
