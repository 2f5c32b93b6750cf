"""The vLLM release catalogue (catalog/data/vllm-releases.yaml): it loads, every fact says
where it was read, and no code outside tests spells a vLLM release."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpustrata.catalog.compat import load_compat_catalog
from gpustrata.catalog.vllm_releases import (
    Fact,
    VllmReleaseCatalogError,
    load_vllm_releases,
    releases_from_document,
    source_url,
)
from gpustrata.core.versions import parse_version

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "components/gpustrata/core/versions.py": "examples of the version grammar",
    "components/gpustrata/spec/stack.py": "an image example in the published stack schema",
}
"""Files whose release-shaped strings are illustrations, not facts the code relies on
(the reference release is still refused there)."""
GENERATED = {"components/gpustrata/components/stack_args.py"}
"""Generated from the spec, whose descriptions quote the catalogue's reference release:
an upgrade regenerates it (``python -m gpustrata.cli.codegen``; tests/test_stack_args.py
fails while it is stale), as it regenerates docs/reference/spec.md."""
SOURCE = re.compile(r"vllm@v\d+\.\d+\.\d+:vllm/\S+")


def test_catalogue_loads_with_a_reference_release() -> None:
    cat = load_vllm_releases()
    assert parse_version(cat.reference)
    assert 0 < cat.gpu_memory_utilization.value <= 1
    assert cat.scheduler and cat.block_size
    versions = [parse_version(r.version) for r in cat.scheduler]
    assert versions == sorted(versions)
    assert cat.reference in {r.version for r in cat.scheduler}
    for release in cat.scheduler:
        assert release.batch_defaults[-1].min_gib == 0  # a fallback row
    assert parse_version(cat.v1_default_from) < parse_version(cat.v0_removed_in)


def test_every_fact_names_its_source() -> None:
    facts = load_vllm_releases().facts()
    assert len(facts) > 10
    for name, fact in facts:
        source = fact.source if isinstance(fact, Fact) else fact
        assert SOURCE.fullmatch(source), (name, source)
        assert source_url(source).startswith("https://github.com/vllm-project/vllm/blob/v")


def test_engine_generations_agree_with_the_compat_catalogue() -> None:
    cat, compat = load_vllm_releases(), load_compat_catalog()
    removed = compat.vllm(cat.v0_removed_in)
    assert removed is not None and not removed.v0_engine_available
    first_v1 = compat.vllm(cat.v1_default_from)
    assert first_v1 is not None and first_v1.default_engine == "v1"
    reference = compat.vllm(cat.reference)
    assert reference is not None


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"reference": {"version": 0.33, "source": "vllm@v0.33.0:vllm/version.py"}},
    ],
)
def test_malformed_catalogue_is_refused(doc: dict[str, object]) -> None:
    with pytest.raises((VllmReleaseCatalogError, KeyError, TypeError, ValueError)):
        releases_from_document(doc)


def test_bad_source_is_refused() -> None:
    with pytest.raises(VllmReleaseCatalogError):
        source_url("vllm/config/cache.py")


def test_no_code_outside_tests_spells_the_reference_release() -> None:
    """A vLLM upgrade edits the catalogue, not the code: no ``.py`` file of the packages
    names the reference release (``X.Y.Z`` or ``X.Y``, anywhere) or quotes a known vLLM
    release as a string (a release table or a source URL). Prose about past releases in a
    rule's rationale stays allowed."""
    cat = load_vllm_releases()
    minor = ".".join(cat.reference.split(".")[:2])
    spelled = re.compile(rf"(?<![\d.]){re.escape(minor)}(?![\d])")
    known = {r.version for r in load_compat_catalog().vllm_releases()}
    known |= {r.version for r in cat.scheduler} | {r.version for r in cat.block_size}
    quoted = re.compile(r"""["'/v](\d+\.\d+\.\d+)["'/]""")
    offenders = []
    for package in ("components/gpustrata", "policies/gpustrata_policies"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if str(path.relative_to(ROOT)) in GENERATED:
                continue
            for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
                rel = str(path.relative_to(ROOT))
                tables = [v for v in quoted.findall(line) if v in known and rel not in EXAMPLES]
                if spelled.search(line) or tables:
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
