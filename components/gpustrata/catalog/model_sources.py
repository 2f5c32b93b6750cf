"""Where a model's own files are, on this machine, with no network: the one resolver.

A model named by a manifest or a stack (``Qwen/Qwen3-8B``, ``/models/acme-13b``,
``s3://bucket/models/acme-13b``) is looked for, in this order:

1. a models folder the user names (``--models DIR``, the stack's ``catalog.models_dir``)
   holding ``<org>/<name>/config.json``, ``<name>/config.json`` or the Hugging Face cache
   layout (``models--<org>--<name>/snapshots/<rev>/config.json``);
2. the local Hugging Face cache (``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
   ``~/.cache/huggingface/hub``), the snapshot ``refs/main`` names first;
3. nothing here: the caller falls back to the model catalogue.

A path or URI is matched by its last components (``/models/Qwen/Qwen3-8B`` finds
``DIR/Qwen/Qwen3-8B`` or ``DIR/Qwen3-8B``), names ignore case as the Hub does. The files
are read by :mod:`gpustrata.core.modelfiles` (size, depth, number, shape bounds, links
that leave the folder refused); next to ``config.json``, ``model.safetensors.index.json``
(its ``metadata.total_size``) or a single ``model.safetensors`` gives the exact weight
bytes. The architecture built says where it came from: its ``sources`` are the files'
paths and its ``notes`` name the folder. A file that is found but cannot be used raises
:class:`~gpustrata.catalog.architectures.ModelCatalogError` naming it and the fix.

The catalogue module (pydantic) is imported only when a file is read: ``check`` on
manifests that name no model starts without it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from gpustrata.core.terminal import clipped, printable

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture, ModelCatalogError

__all__ = [
    "LocalModel",
    "ModelSources",
    "active_model_sources",
    "hf_hub_cache",
    "local_config_path",
    "read_local_model",
    "using_model_sources",
]

_HUB_PREFIX = "models--"
_REF_MAX_BYTES = 256  # a refs/<branch> file holds one commit hash
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_MAX_ENTRIES = 100_000  # folder entries read when matching a name regardless of case
_MAX_WEIGHT_BYTES = 1 << 50  # 1 PiB: far above any published checkpoint
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "fp16": 2, "bf16": 2, "float": 4}
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(//)?")


def _error(message: str) -> ModelCatalogError:
    from gpustrata.catalog.architectures import ModelCatalogError

    return ModelCatalogError(message)


def hf_hub_cache(env: Mapping[str, str] | None = None) -> Path:
    """The Hugging Face hub cache folder as ``huggingface_hub`` finds it: ``HF_HUB_CACHE``,
    else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub`` (``$XDG_CACHE_HOME`` when set)."""
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path("~/.cache")
    return cache.expanduser() / "huggingface" / "hub"


def local_config_path(arch: ModelArchitecture) -> str | None:
    """The local ``config.json`` an architecture was read from, or None for a catalogue
    entry (its first source is then a URL)."""
    first = arch.sources[0]
    return unquote(first[len("file://") :]) if first.startswith("file://") else None


@dataclass(frozen=True, slots=True)
class LocalModel:
    """A model's ``config.json`` found on this machine."""

    config: Path
    """The file (as found: in a Hugging Face snapshot, a link into ``blobs/``)."""
    inside: Path
    """The folder every file read must resolve inside: the models folder or the Hugging
    Face cache (a repository folder linked out of the cache is refused)."""
    where: str
    """Which source found it, for reasons: ``--models /srv/models``, ``the Hugging Face
    cache /home/u/.cache/huggingface/hub``."""
    name: str
    """The name it was found under (``Qwen/Qwen3-8B`` or ``acme-13b``)."""


def _parts(model: str) -> list[str]:
    """The path components of a model id, path or URI (scheme and bucket-less)."""
    text = model.strip().replace("\\", "/")
    text = _SCHEME.sub("", text)
    return [p for p in text.split("/") if p and p not in (".", "..")]


def _entries(folder: Path) -> Mapping[str, str]:
    """A folder's entry names keyed by their case-folded form (at most _MAX_ENTRIES read;
    a name that two entries share in case-folded form keeps neither)."""
    out: dict[str, str] = {}
    clash: set[str] = set()
    try:
        with os.scandir(folder) as it:
            for n, entry in enumerate(it):
                if n >= _MAX_ENTRIES:
                    break
                key = entry.name.casefold()
                if key in out:
                    clash.add(key)
                out[key] = entry.name
    except OSError:
        return {}
    return {k: v for k, v in out.items() if k not in clash}


def _child(folder: Path, name: str) -> Path | None:
    """``folder/name`` as it exists, matched exactly or else ignoring case."""
    exact = folder / name
    if exact.exists():
        return exact
    found = _entries(folder).get(name.casefold())
    return folder / found if found else None


@dataclass(frozen=True, slots=True)
class ModelSources:
    """The local places a model's files are looked for (see the module docs).

    Hashable: the rules memoise look-ups per source set.
    """

    models_dir: Path | None = None
    """The user's models folder; None: none named."""
    models_dir_label: str = "--models"
    """How the user named it (``--models``, ``catalog.models_dir``), for reasons."""
    hf_cache: Path | None = None
    """The Hugging Face hub cache; None: not consulted."""

    @classmethod
    def from_environment(
        cls,
        models_dir: Path | None = None,
        label: str = "--models",
        *,
        hf_cache: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> ModelSources:
        """Sources with *models_dir* and the Hugging Face cache of *env* (the process's
        environment by default). Raises :class:`ModelCatalogError` when *models_dir* is not
        a folder."""
        if models_dir is not None and not models_dir.is_dir():
            raise _error(
                f"{label} {clipped(printable(str(models_dir)))}: no such folder; name a folder "
                "holding <org>/<name>/config.json, <name>/config.json or a Hugging Face cache "
                "(models--<org>--<name>/snapshots/...)"
            )
        return cls(models_dir, label, hf_hub_cache(env) if hf_cache else None)

    @property
    def empty(self) -> bool:
        """True when no folder is consulted."""
        return self.models_dir is None and self.hf_cache is None

    def find(self, model: str) -> LocalModel | None:
        """Where *model*'s config.json is (models folder first, then the Hugging Face
        cache), or None. Raises :class:`ModelCatalogError` for a cache entry whose
        ``refs/main`` cannot be used."""
        parts = _parts(model)
        if not parts:
            return None
        names = (["/".join(parts[-2:])] if len(parts) >= 2 else []) + [parts[-1]]
        if self.models_dir is not None:
            where = f"{self.models_dir_label} {self.models_dir}"
            for name in names:
                found = self._in_folder(self.models_dir, name, where)
                if found is not None:
                    return found
        if self.hf_cache is not None and self.hf_cache.is_dir():
            where = f"the Hugging Face cache {self.hf_cache}"
            for name in names:
                found = _in_hub_cache(self.hf_cache, name, where)
                if found is not None:
                    return found
        return None

    def _in_folder(self, root: Path, name: str, where: str) -> LocalModel | None:
        """``root/<org>/<name>`` or ``root/<name>`` holding config.json, else the cache
        layout inside *root*."""
        folder: Path | None = root
        for part in name.split("/"):
            folder = _child(folder, part) if folder is not None else None
        if folder is not None and (folder / "config.json").exists():
            return LocalModel(folder / "config.json", root, where, name)
        if "/" not in name:  # a bare name: the one <org>/<name> that has it
            hits = [
                f"{org}/{found}"
                for org in sorted(_entries(root).values())
                if not org.startswith(_HUB_PREFIX)
                and (found := _entries(root / org).get(name.casefold())) is not None
                and (root / org / found / "config.json").exists()
            ]
            if len(hits) == 1:
                return LocalModel(root / hits[0] / "config.json", root, where, hits[0])
        return _in_hub_cache(root, name, where)

    def architecture(self, model: str) -> ModelArchitecture | None:
        """The architecture of *model* from its local files, or None when none are found.

        Raises :class:`ModelCatalogError` naming the file and the fix when one is found but
        cannot be used."""
        found = self.find(model)
        return None if found is None else read_local_model(found)


def _in_hub_cache(cache: Path, name: str, where: str) -> LocalModel | None:
    """``models--org--name`` in a Hugging Face cache folder: the snapshot ``refs/main``
    names, else the one whose config.json is newest; None when there is no config.json.
    A bare ``name`` matches the one repository folder ending ``--name``, if only one does."""
    if "/" in name:
        repo = _child(cache, _HUB_PREFIX + name.replace("/", "--"))
    else:
        suffix = f"--{name}".casefold()
        hits = [
            v
            for k, v in _entries(cache).items()
            if k.startswith(_HUB_PREFIX) and k.endswith(suffix) and k.count("--") == 2
        ]
        repo = cache / hits[0] if len(hits) == 1 else None
    if repo is None or not (repo / "snapshots").is_dir():
        return None
    label = name if "/" in name else repo.name[len(_HUB_PREFIX) :].replace("--", "/")
    ref = repo / "refs" / "main"
    if ref.exists() or ref.is_symlink():
        snapshot = repo / "snapshots" / _read_ref(ref, repo)
        config = snapshot / "config.json"
        if not (config.exists() or config.is_symlink()):
            raise _error(
                printable(
                    f"{ref}: names snapshot {snapshot.name}, which has no config.json (a "
                    f"partial download); fetch it (`hf download {label} config.json`) or "
                    "delete the cache folder"
                )
            )
        return LocalModel(config, cache, where, label)
    configs = [
        s / "config.json"
        for s in sorted((repo / "snapshots").iterdir())[:_MAX_ENTRIES]
        if (s / "config.json").exists()
    ]
    if not configs:
        return None
    newest = max(configs, key=lambda c: (c.stat().st_mtime, c.parent.name))
    return LocalModel(newest, cache, where, label)


def _read_ref(ref: Path, repo: Path) -> str:
    """The commit a ``refs/main`` file names (read inside *repo*, one hash)."""
    try:
        target = ref.resolve(strict=True)
    except (OSError, RuntimeError):
        raise _error(
            printable(f"{ref}: cannot be read (a dangling link?); delete the cache folder")
        ) from None
    root = repo.resolve()
    if root not in target.parents or not target.is_file():
        raise _error(
            printable(
                f"{ref}: resolves outside {root} or is not a file; gpustrata reads a cache "
                "only inside its repository folder: delete the cache folder and download again"
            )
        )
    with target.open("rb") as handle:
        raw = handle.read(_REF_MAX_BYTES + 1)
    text = raw.decode("ascii", errors="replace").strip()
    if len(raw) > _REF_MAX_BYTES or not _COMMIT.fullmatch(text):
        raise _error(
            printable(
                f"{ref}: {clipped(text, 60)!r} is not a commit hash (40 or 64 hex digits); "
                "delete the cache folder and download again"
            )
        )
    return text


def read_local_model(found: LocalModel) -> ModelArchitecture:
    """The architecture in *found*'s config.json, with the exact weight bytes of its
    safetensors index (or single file) when present. Notes and sources name the files."""
    from gpustrata.catalog.hf_config import architecture_from_hf_config

    arch = architecture_from_hf_config(found.config, model_id=found.name, inside=found.inside)
    notes = [f"Read from {found.config} (found in {found.where})."]
    sources = [str(found.config)]
    update: dict[str, object] = {}
    weights = _weight_bytes(found)
    if weights is not None:
        size, file = weights
        sources.append(str(file))
        update["weights_bytes"] = size
        per = _DTYPE_BYTES.get(arch.torch_dtype.lower())
        if arch.quantization is None and per is not None:
            params = round(size / per / 1e9, 3)
            if params > 0 and params >= arch.params_active_b:
                notes.append(
                    f"{size:,} weight bytes in {file.name} / {per} B ({arch.torch_dtype}) = "
                    f"{params:g}B parameters (the config's estimate: {arch.params_total_b:g}B)."
                )
                update["params_total_b"] = params
                if not arch.is_moe:
                    update["params_active_b"] = params
        else:
            notes.append(f"{size:,} weight bytes in {file.name}.")
    if arch.notes:
        notes.append(arch.notes)
    update["notes"] = " ".join(notes)
    update["sources"] = [Path(s).absolute().as_uri() for s in sources]
    return arch.model_copy(update=update)


def _weight_bytes(found: LocalModel) -> tuple[int, Path] | None:
    """The checkpoint's bytes: ``metadata.total_size`` of model.safetensors.index.json,
    else the size of a single model.safetensors; None when neither is there."""
    from gpustrata.core.modelfiles import INDEX_MAX_BYTES, ModelFileError, read_model_json

    folder = found.config.parent
    index = folder / "model.safetensors.index.json"
    if index.exists() or index.is_symlink():
        try:
            root = read_model_json(index, found.inside, INDEX_MAX_BYTES)
        except ModelFileError as exc:
            raise _error(str(exc)) from None
        meta = root.get("metadata")
        total = meta.get("total_size") if isinstance(meta, dict) else None
        if isinstance(total, bool) or not isinstance(total, int):
            total = None
        if total is None or not 0 < total <= _MAX_WEIGHT_BYTES:
            raise _error(
                printable(
                    f"{index}: metadata.total_size {clipped(repr(total))} is not a byte count "
                    f"from 1 to {_MAX_WEIGHT_BYTES:,}; fix the file or delete it (the weights "
                    "are then estimated from config.json)"
                )
            )
        return total, index
    single = folder / "model.safetensors"
    if single.exists():
        try:
            target = single.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        inside = found.inside.resolve()
        if inside in target.parents and target.is_file():
            return target.stat().st_size, single
    return None


_ACTIVE: ContextVar[ModelSources | None] = ContextVar("gpustrata_model_sources", default=None)


def active_model_sources() -> ModelSources | None:
    """The model sources of the command under way (``check``/``plan`` set them for the
    rules, which hold no command options), or None: the catalogue alone."""
    return _ACTIVE.get()


@contextmanager
def using_model_sources(sources: ModelSources | None) -> Iterator[None]:
    """Make *sources* the active ones inside the ``with`` block."""
    token = _ACTIVE.set(sources)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
