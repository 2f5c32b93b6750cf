"""The vLLM release catalogue: each release's facts as data (``data/vllm-releases.yaml``).

Every fact carries where it was read, ``vllm@vX.Y.Z:path``; the facts' types live in
:mod:`gpustrata.catalog.vllm_release_types`. The ``reference`` release is the one the
capacity planner follows and the one a rule assumes when an image names no vLLM
release; code never spells a release.
Plain dataclasses and one YAML read, so the rules can use it without pydantic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gpustrata.catalog.packaged import packaged_document, packaged_text
from gpustrata.catalog.vllm_release_types import (
    BatchDefaults,
    BlockSizeRelease,
    Fact,
    FlagChange,
    FlagSet,
    ForcedBlockSize,
    HealthFacts,
    MlaBlockSize,
    Mxfp4Kernel,
    Mxfp4Release,
    ProfileRelease,
    SchedulerRelease,
    V0Defaults,
    VendorImage,
    VllmReleaseCatalogError,
    VllmReleases,
    source_url,
)
from gpustrata.core.versions import parse_version

_T = TypeVar("_T")

__all__ = [
    "accepted_flags",
    "accepts_abbreviations",
    "flag_releases",
    "load_vllm_releases",
    "memory_default",
    "minor_release",
    "mxfp4_kernel",
    "profile_facts",
    "reference_release",
    "unread_memory_bracket",
    "v0_dead_after",
    "v0_in_process_dead_after",
]


_DATA_FILE = "vllm-releases.yaml"


def _map(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise VllmReleaseCatalogError(f"{what} must be a mapping")
    return data


def _fact(data: Any, what: str) -> Fact:
    m = _map(data, what)
    value, source = m.get("value"), m.get("source")
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise VllmReleaseCatalogError(f"{what}.value must be a number")
    source_url(_source(source, what))
    return Fact(value, str(source))


def _source(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise VllmReleaseCatalogError(f"{what}: source must be vllm@vX.Y.Z:path")
    source_url(value)
    return value


def _built(what: str, needs: str, build: Callable[[], _T]) -> _T:
    """``build()`` of entry *what*: a key it lacks, or a value that is not of the key's
    kind, is an error naming the entry and the keys it *needs*."""
    try:
        return build()
    except KeyError as e:
        raise VllmReleaseCatalogError(f"{what}: missing {e!s} ({needs})") from e
    except (TypeError, ValueError) as e:
        raise VllmReleaseCatalogError(f"{what}: {e!s} ({needs})") from e


def _ints(values: Any) -> tuple[int, ...]:
    """A list of numbers (compute-capability majors) as ints."""
    return tuple(int(c) for c in values)


def _vendor_image(data: Any, what: str) -> VendorImage:
    v = _map(data, what)
    source = str(v.get("source") or "")
    if not source.startswith("https://"):
        raise VllmReleaseCatalogError(
            f"{what}.source must be the URL of the release notes or build file"
        )
    vllm = _version(v.get("vllm"), f"{what}.vllm")
    return _built(
        what,
        "vendor, repository, tags, vllm",
        lambda: VendorImage(
            vendor=str(v["vendor"]),
            repository=str(v["repository"]),
            tags=tuple(str(t) for t in v["tags"]),
            vllm=vllm,
            source=source,
            cuda=str(v["cuda"]) if v.get("cuda") else None,
        ),
    )


def _forced(data: Any, what: str) -> ForcedBlockSize:
    f = _map(data, what)
    return _built(
        what,
        "backend, compute_capability, head_size, kv_cache_dtypes, multiple_of, why, source",
        lambda: ForcedBlockSize(
            backend=str(f["backend"]),
            compute_capability=_ints(f["compute_capability"]),
            head_size=int(f["head_size"]),
            kv_cache_dtypes=tuple(str(d) for d in f["kv_cache_dtypes"]),
            multiple_of=int(f["multiple_of"]),
            default_on=_ints(f.get("default_on") or ()),
            why=str(f["why"]),
            source=_source(f.get("source"), what),
            except_model_types=tuple(str(t) for t in f.get("except_model_types") or ()),
        ),
    )


def _mla(data: Any, what: str) -> MlaBlockSize:
    m = _map(data, what)
    return _built(
        what,
        "backend, compute_capability, value, source",
        lambda: MlaBlockSize(
            backend=str(m["backend"]),
            compute_capability=_ints(m["compute_capability"]),
            value=int(m["value"]),
            source=_source(m.get("source"), what),
        ),
    )


def _mxfp4_kernel(data: Any, what: str) -> Mxfp4Kernel:
    k = _map(data, what)
    kernel = _built(
        what,
        "kernel, compute_capability, hidden_multiple, intermediate_multiple, why",
        lambda: Mxfp4Kernel(
            kernel=str(k["kernel"]),
            compute_capability=_ints(k["compute_capability"]),
            hidden_multiple=int(k["hidden_multiple"]),
            intermediate_multiple=int(k["intermediate_multiple"]),
            why=str(k["why"]),
            keeps_checkpoint_scales=bool(k.get("keeps_checkpoint_scales", False)),
        ),
    )
    if min(kernel.hidden_multiple, kernel.intermediate_multiple) < 1:
        raise VllmReleaseCatalogError(f"{what}: multiples must be >= 1")
    return kernel


def _mxfp4_release(data: Any, what: str) -> Mxfp4Release:
    r = _map(data, what)
    kernels = [
        _mxfp4_kernel(raw, f"{what}.kernels[{j}]") for j, raw in enumerate(r.get("kernels") or [])
    ]
    return Mxfp4Release(
        _version(r.get("version"), what), tuple(kernels), _source(r.get("source"), what)
    )


_SAMPLER_PATHS = ("flashinfer", "native")


def _profile_release(data: Any, what: str) -> ProfileRelease:
    r = _map(data, what)
    default = r.get("sampler_default")
    sampler = _map(r.get("sampler_bytes_per_logit") or {}, f"{what}.sampler_bytes_per_logit")
    if default is not None and default not in sampler:
        raise VllmReleaseCatalogError(
            f"{what}.sampler_default {default!r} needs its sampler_bytes_per_logit"
        )
    for path, value in sampler.items():
        if path not in _SAMPLER_PATHS or not isinstance(value, int) or value < 1:
            raise VllmReleaseCatalogError(
                f"{what}.sampler_bytes_per_logit: {path}: {value!r} (paths "
                f"{', '.join(_SAMPLER_PATHS)}; a positive byte count)"
            )
    if not isinstance(r.get("cuda_graph_estimate"), bool):
        raise VllmReleaseCatalogError(f"{what}.cuda_graph_estimate must be true or false")
    if not isinstance(r.get("sampler_after_forward", False), bool):
        raise VllmReleaseCatalogError(f"{what}.sampler_after_forward must be true or false")
    return ProfileRelease(
        version=_version(r.get("version"), what),
        cuda_graph_estimate=bool(r["cuda_graph_estimate"]),
        sampler_default=str(default) if default is not None else None,
        sampler_bytes=tuple(sorted((str(k), int(v)) for k, v in sampler.items())),
        why=str(r.get("why") or ""),
        sources=tuple(_source(x, what) for x in r.get("sources") or []),
        sampler_after_forward=bool(r.get("sampler_after_forward", False)),
    )


def _version(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise VllmReleaseCatalogError(f"{what}: version must be a quoted string")
    parse_version(value)
    return value


def _reference_memory(version: Any, memory: list[tuple[str, Fact]]) -> Fact:
    """The reference release's ``memory_defaults`` row: the planner needs its default."""
    found = dict(memory).get(_version(version, "reference"))
    if found is None:
        raise VllmReleaseCatalogError(
            f"memory_defaults has no row for the reference release {version}: add "
            f'["{version}", <gpu_memory_utilization>, vllm/config/cache.py]'
        )
    return found


def releases_from_document(data: Any) -> VllmReleases:
    """Validate the parsed ``vllm-releases.yaml``."""
    doc = _map(data, "vllm-releases.yaml")
    ref = _map(doc.get("reference"), "reference")
    v0 = _map(doc.get("v0_engine"), "v0_engine")
    v0_facts = {
        k: _fact(v0.get(k), f"v0_engine.{k}")
        for k in ("max_num_seqs", "long_context", "batch_tokens")
    }
    early = v0.get("early_chunked_batch_tokens")
    early_map = _map(early, "v0_engine.early_chunked_batch_tokens") if early else None
    sched = _map(doc.get("scheduler"), "scheduler")
    scheduler = []
    for i, raw in enumerate(sched.get("releases") or []):
        r = _map(raw, f"scheduler.releases[{i}]")
        rows = tuple(
            BatchDefaults(
                float(row["min_gib"]),
                int(row["tokens"]),
                int(row["seqs"]),
                bool(row.get("not_a100", False)),
            )
            for row in r["batch_defaults"]
        )
        scheduler.append(
            SchedulerRelease(
                _version(r.get("version"), f"scheduler.releases[{i}]"),
                bool(r["chunked_forced"]),
                bool(r["clamp_seqs"]),
                rows,
                _source(r.get("source"), f"scheduler.releases[{i}]"),
            )
        )
    blocks = []
    for i, raw in enumerate(doc.get("block_size") or []):
        r = _map(raw, f"block_size[{i}]")
        choices = r.get("cli_choices")
        blocks.append(
            BlockSizeRelease(
                _version(r.get("version"), f"block_size[{i}]"),
                tuple(int(c) for c in choices) if choices is not None else None,
                tuple(_source(s, f"block_size[{i}]") for s in r.get("sources") or []),
                bool(r.get("backends_read", True)),
                tuple(
                    _forced(f, f"block_size[{i}].forced[{j}]")
                    for j, f in enumerate(r.get("forced") or [])
                ),
                _fact(r["default"], f"block_size[{i}].default") if r.get("default") else None,
                tuple(
                    _mla(m, f"block_size[{i}].mla[{j}]") for j, m in enumerate(r.get("mla") or [])
                ),
            )
        )
    health = _map(doc.get("health"), "health")
    loop = _map(health.get("v0_engine_loop_until"), "health.v0_engine_loop_until")
    dead = _fact(health.get("v0_dead_after_s"), "health.v0_dead_after_s")
    in_process_dead = []
    for i, row in enumerate(health.get("v0_in_process_dead_after_s") or []):
        what = f"health.v0_in_process_dead_after_s[{i}]"
        if not isinstance(row, list) or len(row) != 3:
            raise VllmReleaseCatalogError(f"{what} must be [release, seconds, path]")
        version = _version(row[0], what)
        fact = _fact({"value": row[1], "source": f"vllm@v{version}:{row[2]}"}, what)
        in_process_dead.append((version, fact))
    dead_after = []
    for i, row in enumerate(health.get("v0_dead_after") or []):
        what = f"health.v0_dead_after[{i}]"
        if not isinstance(row, list) or len(row) != 4 or row[2] not in MECHANISMS:
            raise VllmReleaseCatalogError(
                f"{what} must be [release, seconds, {'|'.join(MECHANISMS)}, path]"
            )
        version = _version(row[0], what)
        fact = _fact({"value": row[1], "source": f"vllm@v{version}:{row[3]}"}, what)
        dead_after.append((version, fact, str(row[2])))
    memory = []
    for i, row in enumerate(doc.get("memory_defaults") or []):
        if not isinstance(row, list) or len(row) != 3:
            raise VllmReleaseCatalogError(f"memory_defaults[{i}] must be [release, value, path]")
        version = _version(row[0], f"memory_defaults[{i}]")
        memory.append(
            (
                version,
                _fact(
                    {"value": row[1], "source": f"vllm@v{version}:{row[2]}"},
                    f"memory_defaults[{i}]",
                ),
            )
        )
    abbreviations = []
    for i, row in enumerate(doc.get("abbreviations") or []):
        if not isinstance(row, list) or len(row) != 3 or not isinstance(row[1], bool):
            raise VllmReleaseCatalogError(f"abbreviations[{i}] must be [release, true|false, path]")
        version = _version(row[0], f"abbreviations[{i}]")
        abbreviations.append(
            (
                version,
                _fact(
                    {"value": 1.0 if row[1] else 0.0, "source": f"vllm@v{version}:{row[2]}"},
                    f"abbreviations[{i}]",
                ),
            )
        )
    flags = _map(doc.get("flags"), "flags")
    changes = []
    for i, raw in enumerate(flags.get("changes") or []):
        r = _map(raw, f"flags.changes[{i}]")
        changes.append(
            FlagChange(
                str(r["flag"]), str(r["instead"]), _source(r.get("source"), f"flags.changes[{i}]")
            )
        )
    engines = _map(doc.get("engines"), "engines")
    v1_from = _map(engines.get("v1_default_from"), "engines.v1_default_from")
    v0_gone = _map(engines.get("v0_removed_in"), "engines.v0_removed_in")
    opt_in = engines.get("v1_opt_in_from")
    opt_in_map = _map(opt_in, "engines.v1_opt_in_from") if opt_in else None
    fallback = engines.get("ray_fallback_until")
    fallback_map = _map(fallback, "engines.ray_fallback_until") if fallback else None
    return VllmReleases(
        reference=_version(ref.get("version"), "reference"),
        reference_source=_source(ref.get("source"), "reference"),
        v1_default_from=_version(v1_from.get("version"), "engines.v1_default_from"),
        v0_removed_in=_version(v0_gone.get("version"), "engines.v0_removed_in"),
        engine_sources=(
            _source(v1_from.get("source"), "engines.v1_default_from"),
            _source(v0_gone.get("source"), "engines.v0_removed_in"),
        )
        + ((_source(opt_in_map.get("source"), "engines.v1_opt_in_from"),) if opt_in_map else ()),
        v1_opt_in_from=_version(opt_in_map.get("version"), "engines.v1_opt_in_from")
        if opt_in_map
        else None,
        ray_fallback_until=_version(fallback_map.get("version"), "engines.ray_fallback_until")
        if fallback_map
        else None,
        ray_fallback_source=_source(fallback_map.get("source"), "engines.ray_fallback_until")
        if fallback_map
        else None,
        ray_fallback_last_source=_source(
            fallback_map.get("fallback_source"), "engines.ray_fallback_until"
        )
        if fallback_map
        else None,
        gpu_memory_utilization=_reference_memory(ref.get("version"), memory),
        cuda_cc_floor=_fact(
            _map(doc.get("cuda_compute_capability"), "cuda_compute_capability").get("lowest"),
            "cuda_compute_capability.lowest",
        )
        if doc.get("cuda_compute_capability") is not None
        else None,
        v0_defaults=V0Defaults(
            tuple(_version(v, "v0_engine.read_in") for v in v0.get("read_in") or []),
            v0_facts["max_num_seqs"].int_value,
            v0_facts["long_context"].int_value,
            v0_facts["batch_tokens"].int_value,
            tuple(f.source for f in v0_facts.values())
            + (
                (_source(early_map.get("source"), "v0_engine.early_chunked_batch_tokens"),)
                if early_map
                else ()
            ),
            _fact(early_map, "v0_engine.early_chunked_batch_tokens") if early_map else None,
            _version(early_map.get("until"), "v0_engine.early_chunked_batch_tokens.until")
            if early_map
            else None,
        ),
        default_batch_tokens=_fact(
            sched.get("default_batch_tokens"), "scheduler.default_batch_tokens"
        ),
        engine_context_seqs=_fact(
            sched.get("engine_context_seqs"), "scheduler.engine_context_seqs"
        ),
        scheduler_references=tuple(
            _source(s, "scheduler.references") for s in sched.get("references") or []
        ),
        scheduler=tuple(sorted(scheduler, key=lambda r: parse_version(r.version))),
        block_size=tuple(sorted(blocks, key=lambda r: parse_version(r.version))),
        health=HealthFacts(
            _version(loop.get("version"), "health.v0_engine_loop_until"),
            dead,
            (_source(loop.get("source"), "health.v0_engine_loop_until"), dead.source),
            tuple(sorted(dead_after, key=lambda r: parse_version(r[0]))),
            tuple(sorted(in_process_dead, key=lambda r: parse_version(r[0]))),
        ),
        memory_defaults=tuple(sorted(memory, key=lambda r: parse_version(r[0]))),
        flags_file=str(flags.get("file") or ""),
        flag_changes=tuple(changes),
        abbreviations=tuple(sorted(abbreviations, key=lambda r: parse_version(r[0]))),
        vendor_images=tuple(
            _vendor_image(v, f"vendor_images[{i}]")
            for i, v in enumerate(doc.get("vendor_images") or [])
        ),
        kv_usage_metrics=tuple(
            sorted(
                (
                    (
                        _version(_map(r, "kv_usage_metrics[]").get("version"), "kv_usage_metrics"),
                        frozenset(
                            str(m) for m in _map(r, "kv_usage_metrics[]").get("metrics") or []
                        ),
                        _source(_map(r, "kv_usage_metrics[]").get("source"), "kv_usage_metrics"),
                    )
                    for r in doc.get("kv_usage_metrics") or []
                ),
                key=lambda r: parse_version(r[0]),
            )
        ),
        profile_run=tuple(
            sorted(
                (
                    _profile_release(r, f"profile_run[{i}]")
                    for i, r in enumerate(doc.get("profile_run") or [])
                ),
                key=lambda r: parse_version(r.version),
            )
        ),
        mxfp4_moe=tuple(
            sorted(
                (
                    _mxfp4_release(r, f"mxfp4_moe[{i}]")
                    for i, r in enumerate(doc.get("mxfp4_moe") or [])
                ),
                key=lambda r: parse_version(r.version),
            )
        ),
    )


@functools.cache
def load_vllm_releases() -> VllmReleases:
    """The packaged vLLM release catalogue (read once per process); an invalid entry is
    an error naming the file and the entry."""
    path = f"data/{_DATA_FILE}"
    try:
        return releases_from_document(packaged_document(path))
    except VllmReleaseCatalogError as e:
        raise VllmReleaseCatalogError(f"{path}: {e}") from e


def minor_release(version: str) -> str:
    """``'X.Y.Z'`` -> ``'X.Y'`` (how prose names a release series)."""
    return ".".join(version.split(".")[:2])


def reference_release() -> str:
    """The reference vLLM release (``reference.version`` of the catalogue)."""
    return load_vllm_releases().reference


def _between(version: str, read: tuple[str, ...]) -> tuple[str, str] | str | None:
    """The read release itself (a str), the read releases around it, or None outside."""
    if version in read:
        return version
    key = parse_version(version)
    below = [v for v in read if parse_version(v) < key]
    above = [v for v in read if parse_version(v) > key]
    if not below or not above:
        return None
    return below[-1], above[0]


def _read_or_agreed(
    version: str,
    table: Mapping[str, _T],
    same: Callable[[_T, _T], bool],
) -> _T | None:
    """The entry read in ``version``, or the lower of the read releases around it when
    ``same`` says they agree; None outside the read releases or where they disagree."""
    found = _between(version, tuple(table))
    if isinstance(found, str):
        return table[found]
    if found is None:
        return None
    low, high = table[found[0]], table[found[1]]
    return low if same(low, high) else None


_BY_CATALOGUE: dict[str, tuple[object, Any]] = {}


def _per_catalogue(name: str, source: object, build: Callable[[], _T]) -> _T:
    """``build()``, made once while *source* is the catalogue (or flag sets) loaded: the
    rules ask the same look-up for every engine of a cluster, and a test that reloads or
    replaces the catalogue gets fresh answers (the entry holds *source*, so the identity
    check cannot match a new object at a reused address)."""
    entry = _BY_CATALOGUE.get(name)
    if entry is None or entry[0] is not source:
        entry = _BY_CATALOGUE[name] = (source, build())
    built: _T = entry[1]
    return built


def _same_value(a: Fact, b: Fact) -> bool:
    return a.value == b.value


MECHANISMS = ("iteration-timeout", "heartbeat")
"""What marks a V0 engine dead during one long step (``health.v0_dead_after``)."""


def v0_dead_after(version: str) -> tuple[Fact, str] | None:
    """(seconds one engine step may last before /health fails for good, mechanism) of a
    V0 release before ``health.v0_engine_loop_until``: read in it, or agreed by the read
    releases around it; None when unknown."""
    catalogue = load_vllm_releases()
    table = _per_catalogue(
        "v0_dead_after",
        catalogue,
        lambda: {v: (fact, how) for v, fact, how in catalogue.health.dead_after},
    )
    return _read_or_agreed(version, table, _same_death)


def v0_in_process_dead_after(version: str) -> Fact | None:
    """Seconds one engine step may last before /health fails for good where a V0 engine of
    *version* runs as AsyncLLMEngine in the API server (``--disable-frontend-multiprocessing``):
    read in it, or agreed by the read releases around it; None when unknown."""
    catalogue = load_vllm_releases()
    table = _per_catalogue(
        "v0_in_process_dead_after",
        catalogue,
        lambda: dict(catalogue.health.in_process_dead_after),
    )
    return _read_or_agreed(version, table, _same_value)


def _same_death(a: tuple[Fact, str], b: tuple[Fact, str]) -> bool:
    return a[0].value == b[0].value and a[1] == b[1]


def memory_default(version: str) -> Fact | None:
    """The default ``gpu_memory_utilization`` of a release: read in it, or agreed by the
    read releases around it; None when unknown."""
    catalogue = load_vllm_releases()
    table = _per_catalogue("memory_defaults", catalogue, lambda: dict(catalogue.memory_defaults))
    return _read_or_agreed(version, table, _same_value)


@functools.cache  # the packaged catalogue is read once; every engine asks
def memory_default_any_release() -> tuple[float, str, str] | None:
    """(value, oldest, newest release read) when every read release has the same default
    ``gpu_memory_utilization``: then an engine whose image names no release still has a
    known default. None where the read releases differ."""
    read = load_vllm_releases().memory_defaults  # oldest first
    values = {fact.value for _, fact in read}
    if len(values) != 1:
        return None
    return values.pop(), read[0][0], read[-1][0]


def accepts_abbreviations(version: str) -> Fact | None:
    """Does the release's ``vllm serve`` take a unique prefix of a long option
    (``--max-model`` for ``--max-model-len``: argparse's ``allow_abbrev``)? The fact
    (value 1.0 yes, 0.0 no) read in it or agreed by the read releases around it; None
    when unknown."""
    catalogue = load_vllm_releases()
    table = _per_catalogue("abbreviations", catalogue, lambda: dict(catalogue.abbreviations))
    return _read_or_agreed(version, table, _same_value)


def mxfp4_kernel(version: str | None, cc_major: int) -> tuple[Mxfp4Kernel | None, str]:
    """The MXFP4 MoE kernel *version* picks on that compute-capability major, and the
    release whose reading says so: read in it, or the same in the read releases around
    it; otherwise (and for an unnamed release) the reference release's. The kernel is
    None where that release's choice on this generation was not read."""
    catalogue = load_vllm_releases()
    table = {r.version: r for r in catalogue.mxfp4_moe}
    try:
        found = _between(version, tuple(table)) if version else None
    except ValueError:  # not a release number: the reference release's
        found = None
    if isinstance(found, str):
        return table[found].kernel(cc_major), found
    if found is not None:
        low, high = (table[v].kernel(cc_major) for v in found)
        if low is not None and high is not None and low.padding() == high.padding():
            return low, found[0]
    ref = table.get(catalogue.reference)
    return (ref.kernel(cc_major) if ref else None), catalogue.reference


def unread_memory_bracket(version: str | None) -> tuple[str, str] | None:
    """The read releases just below and above *version* when its memory facts (the MXFP4
    MoE kernel, the memory profile's terms) were not read in it: the releases whose facts
    bound what it does. None for a read or unnamed release, a tag that is no release
    number, or one outside the read releases."""
    if not version:
        return None
    catalogue = load_vllm_releases()
    read = sorted(
        {r.version for r in catalogue.mxfp4_moe} | {r.version for r in catalogue.profile_run},
        key=parse_version,
    )
    try:
        found = _between(version, tuple(read))
    except ValueError:  # not a release number
        return None
    return found if isinstance(found, tuple) else None


def profile_facts(version: str | None) -> ProfileRelease | None:
    """The memory-profile terms of *version*: read in it, or agreed by the read releases
    around it (the lower one is returned); None for an unnamed or unread release (the
    reference release's arithmetic applies)."""
    if not version:
        return None
    table = {r.version: r for r in load_vllm_releases().profile_run}
    try:
        return _read_or_agreed(version, table, lambda a, b: a.facts() == b.facts())
    except ValueError:  # not a release number
        return None


@functools.cache
def _flag_sets() -> dict[str, FlagSet]:
    """Unpack ``vllm-flags.txt`` (the first release in full, then +/- per release)."""
    name = load_vllm_releases().flags_file
    text = packaged_text(f"data/{name}")
    out: dict[str, FlagSet] = {}
    current: set[str] = set()
    version = provenance = ""

    def close() -> None:
        if version:
            out[version] = FlagSet(version, frozenset(current), provenance)

    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("@ "):
            close()
            version, provenance = _version(line[2:].strip(), f"{name}:{n}"), ""
        elif line.startswith("# from ") and version:
            provenance = line.split("read: ", 1)[-1]
        elif not line or line.startswith("#"):
            continue
        elif not version:
            raise VllmReleaseCatalogError(f"{name}:{n}: flag before the first '@ release'")
        elif line.startswith("+ "):
            current.add(line[2:])
        elif line.startswith("- "):
            current.discard(line[2:])
        elif len(out) == 0:
            current.add(line)
        else:
            raise VllmReleaseCatalogError(f"{name}:{n}: {line!r} needs + or -")
    close()
    return out


def flag_releases() -> tuple[str, ...]:
    """The releases whose accepted flags were extracted, oldest first."""
    sets = _flag_sets()
    return _per_catalogue("flag_releases", sets, lambda: tuple(sorted(sets, key=parse_version)))


def accepted_flags(version: str) -> tuple[FlagSet, ...] | None:
    """The flag sets that judge *version*: its own, or the two read releases around it
    (a flag both accept is accepted, one neither accepts is not); None outside the range.
    Answered once per version while the flag sets loaded stay the same (every engine of a
    manifest asks for one of the same few image tags)."""
    sets = _flag_sets()
    memo: dict[str, tuple[FlagSet, ...] | None] = _per_catalogue("accepted_flags", sets, dict)
    if version not in memo:
        memo[version] = _accepted_flags(sets, version)
    return memo[version]


def _accepted_flags(sets: dict[str, FlagSet], version: str) -> tuple[FlagSet, ...] | None:
    found = _between(version, flag_releases())
    if found is None:
        return None
    if isinstance(found, str):
        return (sets[found],)
    return sets[found[0]], sets[found[1]]
