"""The vLLM release catalogue's types: each kind of fact read in a release, as plain
frozen dataclasses (the rules use them without pydantic), and the links of their sources.

:func:`~gpustrata.catalog.vllm_releases.load_vllm_releases` builds them from
``data/vllm-releases.yaml``; every fact carries where it was read, ``vllm@vX.Y.Z:path``
(:func:`source_url` turns it into a link).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpustrata.core.versions import parse_version

__all__ = [
    "BatchDefaults",
    "BlockSizeRelease",
    "Fact",
    "FlagChange",
    "FlagSet",
    "ForcedBlockSize",
    "HealthFacts",
    "MlaBlockSize",
    "Mxfp4Kernel",
    "Mxfp4Release",
    "ProfileRelease",
    "SchedulerRelease",
    "V0Defaults",
    "VendorImage",
    "VllmReleaseCatalogError",
    "VllmReleases",
    "source_url",
    "vllm_file_url",
]

_SOURCE = re.compile(r"vllm@v(?P<version>[0-9][^:]*):(?P<path>\S+)")
_REPO = "https://github.com/vllm-project/vllm/blob"


class VllmReleaseCatalogError(ValueError):
    """The packaged vLLM release catalogue is malformed."""


def vllm_file_url(version: str, path: str) -> str:
    """URL of a file of a vLLM release (the tag is ``v<version>``)."""
    return f"{_REPO}/v{version}/{path}"


def source_url(source: str) -> str:
    """``vllm@vX.Y.Z:vllm/config/cache.py`` -> its GitHub URL at tag ``vX.Y.Z``."""
    match = _SOURCE.fullmatch(source)
    if match is None:
        raise VllmReleaseCatalogError(f"source {source!r} is not vllm@vX.Y.Z:path")
    return vllm_file_url(match["version"], match["path"])


@dataclass(frozen=True, slots=True)
class Fact:
    """One number read in vLLM's source, with where."""

    value: float
    source: str

    @property
    def int_value(self) -> int:
        """The value as an int (counts and token budgets)."""
        return int(self.value)


@dataclass(frozen=True, slots=True)
class V0Defaults:
    """The V0 engine's own scheduler defaults where they differ from V1."""

    read_in: tuple[str, ...]
    max_num_seqs: int
    long_context: int
    """Chunked prefill is on by default only above this max_model_len."""
    batch_tokens: int
    sources: tuple[str, ...]
    early_chunked_tokens: Fact | None = None
    """The chunked-prefill budget of the releases before ``early_chunked_until`` (512)."""
    early_chunked_until: str | None = None

    def chunked_batch_tokens(self, version: str | None) -> int:
        """The V0 max_num_batched_tokens default with chunked prefill in that release
        (``batch_tokens`` when the release is unknown or not earlier)."""
        early, until = self.early_chunked_tokens, self.early_chunked_until
        if early is None or until is None or version is None:
            return self.batch_tokens
        try:
            older = parse_version(version) < parse_version(until)
        except ValueError:
            return self.batch_tokens
        return early.int_value if older else self.batch_tokens


@dataclass(frozen=True, slots=True)
class BatchDefaults:
    """One row of ``EngineArgs.get_batch_defaults`` (GPUs of ``min_gib`` or more)."""

    min_gib: float
    tokens: int
    seqs: int
    not_a100: bool = False

    def takes(self, total_gib: float, label: str) -> bool:
        """Does a GPU of *total_gib* whose id and name are *label* land in this row?"""
        if total_gib < self.min_gib:
            return False
        return not (self.not_a100 and "a100" in label.lower())


@dataclass(frozen=True, slots=True)
class SchedulerRelease:
    """V1 scheduler defaults read in one release."""

    version: str
    chunked_forced: bool
    clamp_seqs: bool
    batch_defaults: tuple[BatchDefaults, ...]
    """Rows largest GPUs first; the last row (min_gib 0) is the fallback."""
    source: str

    def batch_row(self, total_gib: float, label: str) -> BatchDefaults:
        """The ``get_batch_defaults`` row of a GPU of *total_gib* (*label*: its id and name)."""
        return next(r for r in self.batch_defaults if r.takes(total_gib, label))


@dataclass(frozen=True, slots=True)
class ForcedBlockSize:
    """A page size one attention backend's kernel forces in a release: for these
    compute-capability majors, head size and KV-cache dtypes the backend accepts only
    multiples of ``multiple_of`` and, with ``--block-size`` unset, raises vLLM's 16 to it."""

    backend: str
    """vLLM's backend name (``FLASH_ATTN``), as ``--attention-backend`` takes it."""
    compute_capability: tuple[int, ...]
    head_size: int
    kv_cache_dtypes: tuple[str, ...]
    """The ``--kv-cache-dtype`` values it applies to (``auto``: unquantised)."""
    multiple_of: int
    default_on: tuple[int, ...]
    """Compute-capability majors where this backend is vLLM's first choice for a
    full-attention (non-MLA) model, so an unset block size becomes ``multiple_of``."""
    why: str
    source: str
    except_model_types: tuple[str, ...] = ()
    """config.json model types the kernel does not serve (another kernel takes them)."""

    def applies(
        self,
        cc_major: int,
        head_size: int,
        kv_cache_dtype: str,
        mla: bool,
        model_type: str | None = None,
    ) -> bool:
        """Whether this backend forces its page size for that GPU and model."""
        return (
            not mla
            and model_type not in self.except_model_types
            and cc_major in self.compute_capability
            and head_size == self.head_size
            and kv_cache_dtype in self.kv_cache_dtypes
        )


@dataclass(frozen=True, slots=True)
class MlaBlockSize:
    """The block size an unset ``--block-size`` becomes for MLA models on some GPU
    generations: the backend vLLM picks first there supports only larger pages."""

    backend: str
    compute_capability: tuple[int, ...]
    """Compute-capability majors where ``backend`` is the first MLA choice."""
    value: int
    source: str


@dataclass(frozen=True, slots=True)
class BlockSizeRelease:
    """``--block-size`` facts read in one release (``cli_choices`` None: any int parses)."""

    version: str
    cli_choices: tuple[int, ...] | None
    sources: tuple[str, ...]
    backends_read: bool = True
    """False: only the argument parser's choices were read, not the backends' limits."""
    forced: tuple[ForcedBlockSize, ...] = ()
    """Backend page sizes the release forces for some GPUs and models."""
    default: Fact | None = None
    """``CacheConfig.DEFAULT_BLOCK_SIZE`` where read (what an unset ``--block-size`` is)."""
    mla: tuple[MlaBlockSize, ...] = ()
    """Where MLA models get another default (the first MLA backend's smallest page)."""


@dataclass(frozen=True, slots=True)
class VendorImage:
    """A vendor build of vLLM whose release notes (or published build files) name the
    upstream release inside."""

    vendor: str
    repository: str
    """Repository, e.g. ``nvcr.io/nvidia/vllm``; without a registry (``aibrix/vllm-openai``)
    it matches that path on any registry or mirror."""
    tags: tuple[str, ...]
    """Tags (and their ``-suffix`` builds) that carry this release."""
    vllm: str
    source: str
    """The release notes or build file (URL) that name the vLLM version."""
    cuda: str | None = None

    def matches(self, repository: str, tag: str) -> bool:
        """Whether ``repository:tag`` is this build."""
        if repository != self.repository and not repository.endswith(f"/{self.repository}"):
            return False
        return any(tag == t or tag.startswith(f"{t}-") for t in self.tags)


@dataclass(frozen=True, slots=True)
class Mxfp4Kernel:
    """The MoE kernel one release picks for MXFP4 experts (gpt-oss) on some GPU
    generations, and how it lays the expert weights out on the GPU."""

    kernel: str
    """vLLM's name for it, as its log line says (``Marlin``, ``Triton``)."""
    compute_capability: tuple[int, ...]
    """Compute-capability majors where the release picks it by default."""
    hidden_multiple: int
    """``hidden_size`` is padded up to a multiple of this (1: not padded)."""
    intermediate_multiple: int
    """The per-TP-shard expert ``intermediate_size`` is padded up to a multiple of this."""
    why: str
    keeps_checkpoint_scales: bool = False
    """The kernel's swizzled copy of the block scales is made alongside the checkpoint's,
    which stay allocated (one more byte per 32 expert weights)."""

    def padding(self) -> tuple[int, int, bool]:
        """What changes the bytes held: (hidden, intermediate multiple, scales kept)."""
        return self.hidden_multiple, self.intermediate_multiple, self.keeps_checkpoint_scales


@dataclass(frozen=True, slots=True)
class Mxfp4Release:
    """The MXFP4 MoE kernels read in one release (``kernels``: by GPU generation; a
    generation not listed was not read)."""

    version: str
    kernels: tuple[Mxfp4Kernel, ...]
    source: str

    def kernel(self, cc_major: int) -> Mxfp4Kernel | None:
        """The kernel this release picks on that compute-capability major, or None."""
        return next((k for k in self.kernels if cc_major in k.compute_capability), None)


@dataclass(frozen=True, slots=True)
class ProfileRelease:
    """What one release's memory profile (``determine_available_memory``) counts beyond
    the weights, where it differs between releases."""

    version: str
    cuda_graph_estimate: bool
    """The KV budget is lowered by an estimate of the CUDA graphs' memory
    (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS``, on by default where it exists)."""
    sampler_default: str | None
    """The top-k/top-p path of the sampler warm-up with ``VLLM_USE_FLASHINFER_SAMPLER``
    unset (``flashinfer`` or ``native``); None: not read (the planner's calibrated
    figure applies)."""
    sampler_bytes: tuple[tuple[str, int], ...]
    """(path, bytes per logit the warm-up's peak holds) for each path read."""
    why: str
    sources: tuple[str, ...]
    sampler_after_forward: bool = False
    """profile_run samples after the dummy forward has returned (its activations freed,
    only the hidden states kept), so the profile's torch peak is the larger of the two,
    not their sum."""

    def sampler_bytes_per_logit(self, path: str) -> int | None:
        """Bytes per ``max_num_seqs x vocab`` logit on that sampler path, or None."""
        return dict(self.sampler_bytes).get(path)

    def facts(self) -> tuple[bool, str | None, tuple[tuple[str, int], ...], bool]:
        """What changes the estimate (releases agree when these are equal)."""
        return (
            self.cuda_graph_estimate,
            self.sampler_default,
            self.sampler_bytes,
            self.sampler_after_forward,
        )


@dataclass(frozen=True, slots=True)
class FlagChange:
    """What replaced a flag that later releases dropped."""

    flag: str
    instead: str
    source: str


@dataclass(frozen=True, slots=True)
class HealthFacts:
    """What the V0 engine's ``/health`` waits on, per release."""

    v0_engine_loop_until: str
    """The first release whose V0 ``/health`` no longer depends on the engine loop."""
    v0_dead_after_s: Fact
    """Before that release: seconds without an engine-loop turn that mark the engine dead."""
    sources: tuple[str, ...]
    dead_after: tuple[tuple[str, Fact, str], ...] = ()
    """Per release read, oldest first: (release, seconds one step may last before /health
    fails for good, mechanism ``iteration-timeout`` or ``heartbeat``)."""
    in_process_dead_after: tuple[tuple[str, Fact], ...] = ()
    """Per release read, oldest first: (release, seconds one step may last) where a V0 engine
    runs as AsyncLLMEngine in the API server (``--disable-frontend-multiprocessing``): its
    step timeout, in place of the heartbeat (0.6.2-0.6.3) and also after the 0.6.4 fix."""


@dataclass(frozen=True, slots=True)
class FlagSet:
    """The engine flags one read release's ``vllm serve`` accepts."""

    version: str
    flags: frozenset[str]
    provenance: str
    """What the extraction read (``vllm@vX.Y.Z:path, ...``)."""


@dataclass(frozen=True, slots=True)
class VllmReleases:
    """The whole release catalogue."""

    reference: str
    """The release the planner follows and rules assume when an image names none."""
    reference_source: str
    v1_default_from: str
    """V1 is the default engine from this release."""
    v0_removed_in: str
    """The first release without the V0 engine."""
    engine_sources: tuple[str, ...]
    gpu_memory_utilization: Fact
    """The reference release's default (its ``memory_defaults`` row)."""
    v0_defaults: V0Defaults
    default_batch_tokens: Fact
    engine_context_seqs: Fact
    scheduler_references: tuple[str, ...]
    scheduler: tuple[SchedulerRelease, ...]
    block_size: tuple[BlockSizeRelease, ...]
    health: HealthFacts
    memory_defaults: tuple[tuple[str, Fact], ...]
    """(release, its default gpu_memory_utilization), sorted by release."""
    flags_file: str
    flag_changes: tuple[FlagChange, ...]
    abbreviations: tuple[tuple[str, Fact], ...] = ()
    """(release, 1.0 when its ``vllm serve`` parser takes a unique prefix of a long option,
    else 0.0), sorted by release."""
    vendor_images: tuple[VendorImage, ...] = ()
    """Vendor builds mapped to the vLLM release their notes name."""
    v1_opt_in_from: str | None = None
    """The first release whose ``VLLM_USE_V1=1`` selects the (experimental) V1 engine;
    earlier ones have none and ignore the variable."""
    mxfp4_moe: tuple[Mxfp4Release, ...] = ()
    """The MXFP4 MoE kernel per GPU generation of each read release, sorted by release."""
    kv_usage_metrics: tuple[tuple[str, frozenset[str], str], ...] = ()
    """(release, KV-cache usage gauges it exports, source), oldest first: what an
    inference gateway's endpoint picker can read (G002)."""
    profile_run: tuple[ProfileRelease, ...] = ()
    """The memory profile's per-release terms of each read release, sorted by release."""
    ray_fallback_until: str | None = None
    """The first release that refuses an engine larger than the node's GPUs when
    ``--distributed-executor-backend`` is unset; earlier ones pick the Ray executor."""
    ray_fallback_source: str | None = None
    """Where that release refuses it."""
    ray_fallback_last_source: str | None = None
    """Where the last release before it picks the Ray executor."""
    cuda_cc_floor: Fact | None = None
    """The lowest CUDA compute capability any release's CUDA build runs on (the floor of
    the GPUs an engine of unknown GPU is judged on)."""

    def vendor_image(self, repository: str, tag: str) -> VendorImage | None:
        """The catalogued vendor build ``repository:tag``, or None."""
        return next((v for v in self.vendor_images if v.matches(repository, tag)), None)

    def facts(self) -> list[tuple[str, Fact | str]]:
        """Every sourced fact as (name, fact or source), for audits and tests."""
        out: list[tuple[str, Fact | str]] = [
            ("reference", self.reference_source),
            ("gpu_memory_utilization", self.gpu_memory_utilization),
            ("default_batch_tokens", self.default_batch_tokens),
            ("engine_context_seqs", self.engine_context_seqs),
        ]
        out += [(f"engines {i}", s) for i, s in enumerate(self.engine_sources)]
        if self.ray_fallback_source and self.ray_fallback_last_source:
            out.append(("engines ray_fallback_until", self.ray_fallback_source))
            out.append(("engines ray_fallback_last", self.ray_fallback_last_source))
        out += [(f"v0_engine {i}", s) for i, s in enumerate(self.v0_defaults.sources)]
        out += [(f"scheduler {r.version}", r.source) for r in self.scheduler]
        out += [(f"scheduler reference {i}", s) for i, s in enumerate(self.scheduler_references)]
        out += [(f"block_size {r.version}", s) for r in self.block_size for s in r.sources]
        out += [
            (f"block_size {r.version} {f.backend}", f.source)
            for r in self.block_size
            for f in r.forced
        ]
        out += [
            (f"block_size {r.version} default", r.default) for r in self.block_size if r.default
        ]
        out += [
            (f"block_size {r.version} mla {m.backend}", m.source)
            for r in self.block_size
            for m in r.mla
        ]
        out += [("health", s) for s in self.health.sources]
        out += [(f"health {v} {how}", f.source) for v, f, how in self.health.dead_after]
        out += [(f"health {v} in-process", f.source) for v, f in self.health.in_process_dead_after]
        out += [(f"mxfp4_moe {r.version}", r.source) for r in self.mxfp4_moe]
        out += [(f"profile_run {r.version}", s) for r in self.profile_run for s in r.sources]
        out += [(f"memory_defaults {v}", f) for v, f in self.memory_defaults]
        out += [(f"flags {c.flag}", c.source) for c in self.flag_changes]
        out += [(f"abbreviations {v}", f) for v, f in self.abbreviations]
        if self.cuda_cc_floor is not None:
            out.append(("cuda_compute_capability lowest", self.cuda_cc_floor))
        return out
