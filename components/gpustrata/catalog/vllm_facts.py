"""One resolver for a vLLM release's engine defaults: :func:`facts_for`.

The planner (``gpustrata.vllm``), the capacity view and the rules ask this module, never
a table of their own, what an unset ``--max-num-batched-tokens``, ``--max-num-seqs``,
``--block-size`` or ``--gpu-memory-utilization`` becomes in a release. Every answer is a
:class:`Default`: the value and the catalogue source (``vllm@vX.Y.Z:path``) it was read
in, so a catalogue change moves the number and its citation together.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpustrata.catalog import vllm_releases as _catalogue
from gpustrata.catalog.vllm_release_types import (
    BatchDefaults,
    BlockSizeRelease,
    Fact,
    SchedulerRelease,
    VllmReleases,
)
from gpustrata.core.versions import parse_version

__all__ = ["Default", "ReleaseFacts", "cited", "facts_for", "scheduler_releases"]


@dataclass(frozen=True, slots=True)
class Default:
    """One default value with the catalogue source it was read in."""

    value: int | float
    source: str
    """``vllm@vX.Y.Z:path`` (:func:`~gpustrata.catalog.vllm_releases.source_url`)."""
    read_in: str
    """The release whose reading gives it (the asked one, or a read one around it)."""


def cited(source: str) -> str:
    """``vllm@v0.1.0:vllm/x.py`` -> ``vllm 0.1.0 vllm/x.py`` (how messages cite a file)."""
    version, _, path = source.removeprefix("vllm@v").partition(":")
    return f"vllm {version} {path}".rstrip()


@dataclass(frozen=True, slots=True)
class ReleaseFacts:
    """The engine defaults of one vLLM release as the catalogue has them. A reading is
    None where the catalogue did not read that release (nor agreeing releases around it)."""

    release: str
    scheduler: SchedulerRelease | None
    """``get_batch_defaults`` and the scheduler rules (``scheduler.releases``)."""
    block: BlockSizeRelease | None
    """``--block-size`` facts (``block_size``)."""
    memory: Fact | None
    """The default ``gpu_memory_utilization`` (``memory_defaults``)."""

    def batch_row(self, total_gib: float, label: str) -> BatchDefaults | None:
        """The ``get_batch_defaults`` row (OPENAI_API_SERVER) of a GPU of *total_gib*
        whose id and name are *label*; None where the scheduler was not read."""
        return self.scheduler.batch_row(total_gib, label) if self.scheduler else None

    def max_num_batched_tokens(self, total_gib: float, label: str) -> Default | None:
        """``vllm serve``'s default token budget on that GPU (chunked prefill on)."""
        row = self.batch_row(total_gib, label)
        if row is None or self.scheduler is None:
            return None
        return Default(row.tokens, self.scheduler.source, self.scheduler.version)

    def max_num_seqs(self, total_gib: float, label: str) -> Default | None:
        """``vllm serve``'s default sequence cap on that GPU."""
        row = self.batch_row(total_gib, label)
        if row is None or self.scheduler is None:
            return None
        return Default(row.seqs, self.scheduler.source, self.scheduler.version)

    def block_size(self, mla: bool, compute_capability: str | None) -> Default | None:
        """What an unset ``--block-size`` becomes for a model (``mla``: multi-head latent
        attention) on a GPU of that compute capability (None: not known); None where the
        release's default was not read."""
        block = self.block
        if block is None or block.default is None:
            return None
        if mla and compute_capability:
            major = int(compute_capability.split(".")[0])
            for m in block.mla:
                if major in m.compute_capability:
                    return Default(m.value, m.source, block.version)
        return Default(block.default.value, block.default.source, block.version)

    @property
    def gpu_memory_utilization(self) -> Default | None:
        """The default ``--gpu-memory-utilization``."""
        if self.memory is None:
            return None
        version = self.memory.source.removeprefix("vllm@v").partition(":")[0]
        return Default(self.memory.value, self.memory.source, version)


def scheduler_releases() -> tuple[SchedulerRelease, ...]:
    """The releases whose scheduler defaults were read, oldest first."""
    return _catalogue.load_vllm_releases().scheduler


def _read(version: str, rows: tuple[SchedulerRelease, ...]) -> SchedulerRelease | None:
    """The row read in *version*, or the lower of the read rows around it when both
    have the same defaults; None otherwise."""
    found = next((r for r in rows if r.version == version), None)
    if found is not None:
        return found
    key = parse_version(version)
    below = [r for r in rows if parse_version(r.version) < key]
    above = [r for r in rows if parse_version(r.version) > key]
    if not below or not above:
        return None
    low, high = below[-1], above[0]
    same = (low.batch_defaults, low.chunked_forced, low.clamp_seqs) == (
        high.batch_defaults,
        high.chunked_forced,
        high.clamp_seqs,
    )
    return low if same else None


def facts_for(release: str | None = None) -> ReleaseFacts:
    """The engine defaults of *release* (None: the catalogue's reference release).

    Each reading is the release's own, or for a release between two read ones the lower
    one's where both agree; otherwise None. Answered once per release while the same
    catalogue is loaded (every engine of a manifest asks).
    """
    catalogue = _catalogue.load_vllm_releases()
    version = release or catalogue.reference
    memo: dict[str, ReleaseFacts] = _catalogue._per_catalogue("facts_for", catalogue, dict)
    if version not in memo:
        memo[version] = _facts(catalogue, version)
    return memo[version]


def _facts(catalogue: VllmReleases, version: str) -> ReleaseFacts:
    try:
        parse_version(version)
    except ValueError:  # not a release number: nothing was read for it
        return ReleaseFacts(version, None, None, None)
    block = next((b for b in catalogue.block_size if b.version == version), None)
    return ReleaseFacts(
        version,
        _read(version, catalogue.scheduler),
        block,
        _catalogue.memory_default(version),
    )
