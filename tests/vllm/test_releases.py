"""The vLLM release catalogue (catalog/data/vllm-releases.yaml): it loads, every fact says
where it was read, and no code outside tests spells a vLLM release."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from _scripts import load_script

from gpustrata.catalog.compat import load_compat_catalog
from gpustrata.catalog.vllm_release_types import Fact, VllmReleaseCatalogError, source_url
from gpustrata.catalog.vllm_releases import (
    accepted_flags,
    flag_releases,
    load_vllm_releases,
    memory_default,
    mxfp4_kernel,
    releases_from_document,
)
from gpustrata.core.versions import parse_version

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "components/gpustrata/core/versions.py": "examples of the version grammar",
    "components/gpustrata/spec/serving.py": "an image example in the published stack schema",
    "components/gpustrata/spec/cluster.py": "a chart version example in the published stack schema",
    "components/gpustrata/catalog/profile.py": "a release example in the profile's schema",
}
"""Files whose release-shaped strings are illustrations, not facts the code relies on
(the reference release is still refused there)."""
GENERATED = {
    f"components/gpustrata/components/stack_args/{name}.py"
    for name in ("__init__", "enums", "cluster", "serving", "routing", "stack")
}
"""Generated from the spec, whose descriptions quote the catalogue's reference release:
an upgrade regenerates it (``python -m gpustrata.cli.codegen``; tests/test_stack_args.py
fails while it is stale), as it regenerates docs/reference/spec.md."""
# A fact is read in vLLM's code, or in its documentation at the tag (the installation
# requirements: cuda_compute_capability).
SOURCE = re.compile(r"vllm@v\d+\.\d+\.\d+(?:\.\d+|\.post\d+)?:(?:vllm|docs)/\S+")


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
                # Another project's release URL (KubeRay v0.6.0) is not a vLLM release.
                other_repo = "github.com/" in line and "vllm-project/vllm" not in line
                tables = [
                    v
                    for v in quoted.findall(line)
                    if v in known and rel not in EXAMPLES and not other_repo
                ]
                if spelled.search(line) or tables:
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_flag_sets_cover_every_minor_since_0_6() -> None:
    """Each minor series from 0.6 to the reference has a read release (0.15.1 from its
    wheel: 0.15 has no sdist)."""
    releases = flag_releases()
    minors = {tuple(int(p) for p in v.split(".")[:2]) for v in releases}
    ref = tuple(int(p) for p in load_vllm_releases().reference.split(".")[:2])
    missing = [m for m in range(6, ref[1] + 1) if (0, m) not in minors]
    assert missing == []
    assert releases[-1] == load_vllm_releases().reference


def test_flag_sets_know_the_renamed_and_removed_flags() -> None:
    """Facts of the releases' own parsers the extraction must reproduce."""

    def accepts(version: str, flag: str) -> bool:
        sets = accepted_flags(version)
        assert sets is not None
        return all(flag in s.flags for s in sets)

    assert accepts("0.9.2", "--use-v2-block-manager")
    # 0.15.1 (read from its wheel) added these; 0.14.1 lacks them.
    assert [s.version for s in accepted_flags("0.15.1") or ()] == ["0.15.1"]
    assert accepts("0.15.1", "--mm-encoder-only") and accepts("0.15.1", "--ssl-ciphers")
    assert not accepts("0.14.1", "--mm-encoder-only")
    assert not accepts("0.10.0", "--use-v2-block-manager")
    assert accepts("0.8.5", "--disable-log-requests")
    assert not accepts("0.20.2", "--disable-log-requests")
    assert accepts("0.20.2", "--enable-log-requests")
    assert accepts("0.8.5", "--no-enable-chunked-prefill")
    assert not accepts("0.7.3", "--no-enable-chunked-prefill")  # store_true before 0.8
    assert [s.version for s in accepted_flags("0.8.2") or ()] == ["0.8.0", "0.8.5"]
    # 0.4.2 (its wheel; the image quay.io/rh-aiservices-bu/vllm-openai-ubi9:0.4.2 of two field
    # corpus files) spells one flag with an underscore, as its parser did; 0.5.x is judged
    # by 0.4.2 and 0.6.0 together, and anything before 0.4.2 is outside the releases read.
    assert [s.version for s in accepted_flags("0.4.2") or ()] == ["0.4.2"]
    assert accepts("0.4.2", "--max-seq_len-to-capture")
    assert not accepts("0.6.0", "--max-seq_len-to-capture")
    assert not accepts("0.4.2", "--distributed-executor-backend")
    assert [s.version for s in accepted_flags("0.5.4") or ()] == ["0.4.2", "0.6.0"]
    assert accepted_flags("0.4.1") is None


def test_flag_file_round_trips_through_the_packer(tmp_path: Path) -> None:
    """vllm-flags.txt is what tools/vllm_flags.py --pack writes from per-release sets."""
    tool = load_script("tools/vllm_flags.py", "vllm_flags_tool")
    files = []
    for version in flag_releases():
        (fs,) = accepted_flags(version) or ()
        path = tmp_path / f"{version}.txt"
        path.write_text(f"# from x; read: {fs.provenance}\n" + "\n".join(sorted(fs.flags)) + "\n")
        files.append(path)
    packed = tool.pack(files)
    data = ROOT / "components/gpustrata/catalog/data/vllm-flags.txt"
    ours = [line for line in data.read_text().splitlines() if not line.startswith("# from")]
    again = [line for line in packed.splitlines() if not line.startswith("# from")]
    assert again == ours


def test_adding_a_release_appends_its_changes_and_keeps_the_rest(tmp_path: Path) -> None:
    """tools/vllm_flags.py --add packs a new release's extraction after the releases the
    catalogue holds: the file stays as it is, plus one section of that release's changes."""
    tool = load_script("tools/vllm_flags.py", "vllm_flags_tool")
    newest = flag_releases()[-1]
    major, minor = newest.split(".")[:2]
    version = f"{major}.{int(minor) + 1}.0"
    (fs,) = accepted_flags(newest) or ()
    dropped = sorted(fs.flags)[0]
    new = tmp_path / f"{version}.txt"
    flags = sorted((fs.flags - {dropped}) | {"--a-new-flag"})
    new.write_text(f"# Flags of vllm serve {version}\n# from x; read: y\n" + "\n".join(flags))
    data = ROOT / "components/gpustrata/catalog/data/vllm-flags.txt"
    added = tool.add(new, data)
    assert added == data.read_text() + (
        f"@ {version}\n# from x; read: y\n+ --a-new-flag\n- {dropped}\n"
    )


def test_memory_default_per_release() -> None:
    """gpu_memory_utilization went from 0.9 to 0.92 between 0.19.1 and 0.20.2."""
    assert (memory_default("0.7.3") or Fact(0, "")).value == 0.9
    assert (memory_default("0.20.2") or Fact(0, "")).value == 0.92
    assert memory_default("0.20.0") is None  # between 0.19.1 (0.9) and 0.20.2 (0.92)


def test_mxfp4_kernel_per_release_and_gpu_generation() -> None:
    """The MXFP4 MoE kernel of a read release, of a release between two read ones that
    agree (Marlin below SM90, Triton on Hopper in 0.11.0 and 0.14.1), and the reference
    release's otherwise."""
    cat = load_vllm_releases()
    marlin, read_in = mxfp4_kernel("0.10.1", 9)
    assert marlin is not None and marlin.kernel == "Marlin" and read_in == "0.10.1"
    assert (marlin.hidden_multiple, marlin.intermediate_multiple) == (256, 128)
    # 0.10.2 pins torch 2.8.0, so Hopper leaves Marlin for the Triton kernels.
    triton, read_in = mxfp4_kernel("0.10.2", 9)
    assert triton is not None and triton.kernel == "Triton" and read_in == "0.10.2"
    assert triton.padding() != marlin.padding()
    between, read_in = mxfp4_kernel("0.12.0", 8)
    assert between is not None and between.kernel == "Marlin" and read_in == "0.11.0"
    hopper, read_in = mxfp4_kernel("0.12.0", 9)
    assert hopper is not None and hopper.kernel == "Triton" and read_in == "0.11.0"
    # 0.11.0 and 0.14.1 both take FlashInfer's BF16 MXFP4 backend on SM100 (256 / 256).
    blackwell, read_in = mxfp4_kernel("0.12.0", 10)
    assert blackwell is not None and blackwell.padding()[:2] == (256, 256) and read_in == "0.11.0"
    # Between 0.10.1 (Marlin) and 0.10.2 (Triton) on Hopper they disagree: the reference decides.
    assert mxfp4_kernel("0.10.1.post1", 9)[1] == cat.reference
    assert mxfp4_kernel(None, 9) == mxfp4_kernel(cat.reference, 9)
    assert mxfp4_kernel("0.10.1", 10) == (None, "0.10.1")  # not read there


@pytest.mark.parametrize(
    ("section", "entry"),
    [
        ("mxfp4_moe", {"version": "0.10.1", "source": "vllm@v0.10.1:x.py", "kernels": [{}]}),
        (
            "profile_run",
            {"version": "0.10.1", "cuda_graph_estimate": "no", "sources": []},
        ),
        (
            "profile_run",
            {"version": "0.10.1", "cuda_graph_estimate": False, "sampler_default": "native"},
        ),
    ],
)
def test_malformed_per_release_facts_are_refused(section: str, entry: dict[str, object]) -> None:
    doc = yaml.safe_load(
        (ROOT / "components/gpustrata/catalog/data/vllm-releases.yaml").read_text("utf-8")
    )
    doc[section] = [entry]
    with pytest.raises(VllmReleaseCatalogError, match=section):
        releases_from_document(doc)


def test_release_lookups_follow_a_replaced_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """memory_default and accepts_abbreviations keep their table per loaded catalogue: a
    catalogue swapped in (a test's, a reload) is read afresh, not answered from the old."""
    import dataclasses

    from gpustrata.catalog import vllm_releases as vr

    cat = vr.load_vllm_releases()
    version, fact = cat.memory_defaults[-1]
    abbrev_version, abbrev = cat.abbreviations[-1]
    assert vr.memory_default(version) == fact
    assert vr.accepts_abbreviations(abbrev_version) == abbrev
    other = dataclasses.replace(
        cat,
        memory_defaults=(
            *cat.memory_defaults[:-1],
            (version, dataclasses.replace(fact, value=0.5)),
        ),
        abbreviations=cat.abbreviations[:-1],
    )
    monkeypatch.setattr(vr, "load_vllm_releases", lambda: other)
    found = vr.memory_default(version)
    assert found is not None and found.value == 0.5
    # The newest abbreviation reading dropped: that release is now past the read ones.
    assert vr.accepts_abbreviations(abbrev_version) is None
