"""The catalogue's packaged data files (``gpustrata/catalog/data/``): one reader for all.

Every catalogue module reads its cited YAML through these functions, so where the files
live and how a broken one is reported is said once. :class:`CatalogError` is the error of
every catalogue's data (a file, an entry, a user-supplied extension).

Each ``data/*.yaml`` file ships with its parsed document in ``data/cache/<name>.json``
(written by ``python tools/regen.py --only catalog-cache``): JSON is read about 50 times
faster than YAML, which a small ``gpustrata check`` paid at every start (issue 35). A
cache is used only when the SHA-256 of the YAML text it was made from matches the file
beside it, so an edited catalogue is read from its YAML until the cache is regenerated.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
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
    "cache_name",
    "cache_text",
    "catalog_yaml",
    "cited_table",
    "packaged_document",
    "packaged_mapping",
    "packaged_model",
    "packaged_text",
    "per_release",
]

_PACKAGE = "gpustrata.catalog"
_CACHE_DIR = "data/cache"
_DATE = "!date"
"""The key of the one-key JSON object that stands for a YAML date (``read_on: 2026-07-20``)."""

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
    cached = _cached_document(path, text)
    if cached is not _STALE:
        return cached
    return catalog_yaml(text, path)


def catalog_yaml(text: str, name: str, error: type[CatalogError] = CatalogError) -> Any:
    """The YAML document of catalogue file *name* (packaged or a user's); text that is not
    YAML is an *error* naming the file."""
    try:
        return safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{name}: not valid YAML: {exc}") from exc


_STALE = object()
"""What :func:`_cached_document` returns when there is no current cache."""


def cache_name(path: str) -> str | None:
    """The cache file of packaged YAML file *path* (``data/gpus.yaml`` ->
    ``data/cache/gpus.json``); ``None`` for a file that has none (not directly in
    ``data/``, or not YAML)."""
    folder, _, name = path.rpartition("/")
    if folder != "data" or not name.endswith(".yaml"):
        return None
    return f"{_CACHE_DIR}/{name.removesuffix('.yaml')}.json"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cached_document(path: str, text: str) -> Any:
    """The cached document of *path* when its cache was made from *text*, else ``_STALE``."""
    name = cache_name(path)
    if name is None:
        return _STALE
    try:
        cache = _decode_cache(packaged_text(name))
    except (OSError, ValueError):  # none, or not JSON: the YAML decides
        return _STALE
    if not isinstance(cache, dict) or cache.get("sha256") != _digest(text):
        return _STALE
    return cache.get("document")


def _decode_cache(raw: str) -> Any:
    """The JSON of a cache file, its dates read back as dates."""
    return json.loads(raw, object_hook=_decode) if _DATE in raw else json.loads(raw)


def _encode(value: object) -> object:
    if type(value) is datetime.date:
        return {_DATE: value.isoformat()}
    raise TypeError(f"{type(value).__name__} {value!r} has no JSON form in the catalogue cache")


def _decode(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and _DATE in obj:
        return datetime.date.fromisoformat(obj[_DATE])
    return obj


def cache_text(path: str, text: str) -> str:
    """The cache file of packaged YAML file *path* whose text is *text*: the SHA-256 of the
    text and its document as JSON (a date as ``{"!date": "YYYY-MM-DD"}``).

    Raises :class:`CatalogError` when the document would not read back exactly (a type
    JSON cannot carry, a key that is not a string, the reserved ``!date`` key).
    """
    document = catalog_yaml(text, path)
    try:
        out = json.dumps(
            {"sha256": _digest(text), "document": document},
            default=_encode,
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )
    except (TypeError, ValueError) as exc:
        raise CatalogError(f"{path}: cannot be cached as JSON: {exc}") from exc
    back = _decode_cache(out)["document"]
    if repr(back) != repr(document):  # repr: 1, 1.0 and True differ, and key order counts
        raise CatalogError(f"{path}: its JSON cache does not read back as the YAML does")
    return out + "\n"


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
