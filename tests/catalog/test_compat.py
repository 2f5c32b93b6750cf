"""Tests for the compatibility catalogue (gpustrata.catalog.compat)."""

from __future__ import annotations

import re

import pytest
import yaml

from gpustrata.catalog.compat import (
    CompatCatalogError,
    catalog_from_documents,
    load_compat_catalog,
    packaged_documents,
    parse_version,
    version_satisfies,
)

TABLES = (
    "gpu_operator_releases",
    "cuda_driver_requirements",
    "vllm_releases",
    "kuberay_releases",
    "ray_releases",
    "karpenter_releases",
    "ray_defects",
)


def _raw_entries() -> list[tuple[str, str, dict[str, object]]]:
    out = []
    for name, text in packaged_documents():
        data = yaml.safe_load(text)
        for table, rows in data.items():
            for row in rows:
                out.append((name, table, row))
    return out


# --- data integrity -------------------------------------------------------------------------


def test_catalog_loads_and_is_cached() -> None:
    assert load_compat_catalog() is load_compat_catalog()


def test_every_table_has_entries() -> None:
    tables = {t for _, t, _ in _raw_entries()}
    assert tables == set(TABLES)


@pytest.mark.parametrize(("filename", "table", "row"), _raw_entries())
def test_every_entry_has_a_source(filename: str, table: str, row: dict[str, object]) -> None:
    sources = row.get("sources")
    assert isinstance(sources, list) and sources, f"{filename}: {table} entry without sources"
    for s in sources:
        assert isinstance(s, str) and re.match(r"^https://", s), f"{filename}: bad source {s!r}"


def test_entry_without_source_is_rejected() -> None:
    doc = """
ray_releases:
- version: 2.46.0
  requires_python: '>=3.9'
  vllm_requirement: '>=0.8.5'
  sources: []
"""
    with pytest.raises(CompatCatalogError, match=r"x\.yaml: ray_releases entry version='2.46.0'"):
        catalog_from_documents([("x.yaml", doc)])


def test_unknown_field_and_duplicates_are_rejected() -> None:
    entry = "- version: 2.46.0\n  requires_python: '>=3.9'\n  sources: ['https://example.org']\n"
    with pytest.raises(CompatCatalogError, match="invalid"):
        catalog_from_documents([("a.yaml", "ray_releases:\n" + entry + "  colour: red\n")])
    with pytest.raises(CompatCatalogError, match="duplicates"):
        catalog_from_documents([("a.yaml", "ray_releases:\n" + entry + entry)])
    with pytest.raises(CompatCatalogError, match="unknown table"):
        catalog_from_documents([("a.yaml", "rays: []\n")])


def test_all_versions_parse() -> None:
    c = load_compat_catalog()
    for r in c.gpu_operator_releases():
        parse_version(r.version)
        for d in r.tested_drivers:
            assert len(parse_version(d)) >= 2
        assert r.tested_drivers[0] == r.default_driver
        assert r.helm_chart_version == r.version
    for v in c.vllm_releases():
        parse_version(v.version)
        parse_version(v.torch)
    for k in c.kuberay_releases():
        for g in k.ray_version_gates:
            parse_version(g.min_ray)
    for ray in c.ray_releases():
        if ray.vllm_requirement is not None:
            version_satisfies("0.0.1", ray.vllm_requirement)  # parses without error


def test_gpu_operator_releases_newest_first() -> None:
    versions = [parse_version(r.version) for r in load_compat_catalog().gpu_operator_releases()]
    assert versions == sorted(versions, reverse=True)


# --- helpers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v0.8.5", (0, 8, 5)),
        ("0.8.5.post1", (0, 8, 5, 1)),
        ("2.46.0+cu124", (2, 46, 0)),
        ("v1.17.8-ubuntu20.04", (1, 17, 8)),
        ("570.124.06", (570, 124, 6)),
        (" 1.31 ", (1, 31)),
    ],
)
def test_parse_version(text: str, expected: tuple[int, ...]) -> None:
    assert parse_version(text) == expected


def test_parse_version_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        parse_version("latest")


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ("0.8.5", ">=0.8.5", True),
        ("0.8.4", ">=0.8.5", False),
        ("0.22.0", "==0.22.0", True),
        ("0.22.1", "==0.22.0", False),
        ("2.44.1", "!=2.44.*,>=2.43.0", False),
        ("2.46.0", "!=2.44.*,>=2.43.0", True),
        ("1.4.2", "~=1.4.0", True),
        ("1.5.0", "~=1.4.0", False),
    ],
)
def test_version_satisfies(version: str, spec: str, ok: bool) -> None:
    assert version_satisfies(version, spec) is ok


# --- lookups and spot checks (values verified against the cited sources) -------------------


def test_gpu_operator_lookup_and_spot_checks() -> None:
    c = load_compat_catalog()
    assert c.gpu_operator("v99.1.0") is None
    r = c.gpu_operator("24.9.2")
    assert r is not None and r.version == "v24.9.2"
    # NVIDIA/gpu-operator values.yaml@v24.9.2; cloud-native-docs platform-support.rst
    assert r.default_driver == "550.144.03"
    assert r.container_toolkit.tag == "v1.17.4-ubuntu20.04"
    assert r.device_plugin.version == "0.17.0"
    assert r.dcgm_exporter.version == "3.3.9-3.6.1"
    assert r.supports_kubernetes("1.31") and not r.supports_kubernetes("1.32")
    r = c.gpu_operator("v25.3.0")
    assert r is not None
    assert r.default_driver == "570.124.06"
    assert r.container_toolkit.version == "1.17.5"
    assert r.device_plugin.version == "0.17.1"
    assert r.dcgm_exporter.version == "4.1.1-4.0.4"
    assert r.kubernetes.min == "1.29" and r.kubernetes.max == "1.33"
    assert r.supports_kubernetes("v1.33.2") and not r.supports_kubernetes("1.28")
    r = c.gpu_operator("v25.10.0")
    assert r is not None
    assert r.default_driver == "580.95.05" and r.driver_is_tested("580.95.05")
    assert r.container_toolkit.version == "1.18.0"
    assert r.kubernetes.max == "1.35"


def test_min_driver_for_cuda() -> None:
    c = load_compat_catalog()
    req = c.min_driver_for_cuda("12.4")
    assert req is not None
    assert req.min_driver == "550.54.14"  # Table 3: CUDA 12.4 GA >=550.54.14
    assert req.minor_version_compat_min_driver == "525"
    # The floor is per major.minor: images declare NVIDIA_REQUIRE_CUDA=cuda>=12.4, so an update
    # needs its minor's GA driver, not the update's own toolkit driver.
    upd = c.min_driver_for_cuda("12.4.1")
    assert upd is not None and upd.min_driver == "550.54.14" and upd.requested == "12.4.1"
    assert c.min_driver_for_cuda("cu128") is not None
    r128 = c.min_driver_for_cuda("12.8.1")
    assert r128 is not None and r128.min_driver == "570.26"
    r1303 = c.min_driver_for_cuda("13.0.3")  # vLLM 0.33.0's image; newer than the table's rows
    assert r1303 is not None and r1303.driver_ok("580.82.07")
    r130 = c.min_driver_for_cuda("13.0")
    assert r130 is not None and r130.min_driver == "580.65.06"
    assert r130.driver_ok("580.95.05") and not r130.driver_ok("575.57.08")
    assert c.min_driver_for_cuda("9.9") is None
    assert c.min_driver_for_cuda("nonsense") is None


def test_cuda_13_3_driver_floor() -> None:
    """CUDA 13.3 GA and Update 1 both list >=610.43.02 (Table 3); 13.4+ rows were not read."""
    c = load_compat_catalog()
    for version in ("13.3", "13.3.0", "13.3.1", "cu133"):
        req = c.min_driver_for_cuda(version)
        assert req is not None and req.cuda == "13.3", version
        assert req.min_driver == "610.43.02" and req.minor_version_compat_min_driver == "580"
    req = c.min_driver_for_cuda("13.3.1")
    assert req is not None
    assert req.driver_ok("610.43.02") and not req.driver_ok("595.71.05")
    assert c.min_driver_for_cuda("13.4") is None  # published, driver row not catalogued


def test_image_driver_branches_for_forward_compatibility() -> None:
    c = load_compat_catalog()
    r1303 = c.min_driver_for_cuda("13.0.3")
    assert r1303 is not None
    listed = r1303.image_branches()
    assert listed is not None and listed.branches == ["535", "550", "565", "570", "575"]
    cu128 = c.min_driver_for_cuda("cu128")  # a tag names no update: the one 12.8 entry
    assert cu128 is not None
    entry = cu128.image_branches()
    assert entry is not None and entry.cuda == "12.8.1" and "560" in entry.branches
    unread = c.min_driver_for_cuda("12.4.1")
    assert unread is not None and unread.image_branches() is None


def test_vllm_lookup_is_tolerant() -> None:
    c = load_compat_catalog()
    a, b = c.vllm("v0.8.5"), c.vllm("0.8.5")
    assert a is not None and a is b and a.torch == "2.6.0"
    post = c.vllm("0.8.5.post1")
    assert post is not None and post.version == "0.8.5.post1"
    assert c.vllm("0.6.6") is not None  # only 0.6.6.post1 catalogued: falls back to it
    assert c.vllm("0.0.1") is None
    assert c.vllm("latest") is None


def test_vllm_engine_generations() -> None:
    c = load_compat_catalog()
    old, v8, v11 = c.vllm("0.7.3"), c.vllm("0.8.0"), c.vllm("0.11.0")
    assert old is not None and old.default_engine == "v0" and old.v0_engine_available
    assert v8 is not None and v8.default_engine == "v1" and v8.v0_engine_available
    assert v11 is not None and v11.default_engine == "v1" and not v11.v0_engine_available


def test_kuberay_lookup_and_gates() -> None:
    c = load_compat_catalog()
    k = c.kuberay("v1.4.2")
    assert k is not None and k.min_ray == "2.38.0"
    assert k.supports_ray("2.46.0") is True and k.supports_ray("2.9.0") is False
    assert not k.unhealthy_thresholds_honoured
    k16 = c.kuberay("1.6.0")
    assert k16 is not None and k16.supports_ray("2.50.0") is None
    crossed = {g.name for g in k16.gates_crossed("2.52.0", "2.54.0")}
    assert crossed == {"unified-http-health-probe"}
    assert c.kuberay("9.9.9") is None


def test_kuberay_agent_probes_per_release() -> None:
    """pod.go injects agent probes into every Ray container from v1.1.0 (kuberay#1674), only
    with GCS fault tolerance in v1.0.0."""
    c = load_compat_catalog()
    kinds = {k.version: k.agent_probes for k in c.kuberay_releases()}
    assert kinds.pop("v1.0.0") == "gcs-ft-only"
    assert kinds and set(kinds.values()) == {"every-ray-container"}
    entry = "- version: v1.1.0\n  released: 2024-03-21\n  unhealthy_thresholds_honoured: false\n"
    with pytest.raises(CompatCatalogError, match=r"kuberay_releases entry version='v1.1.0'"):
        catalog_from_documents([("k.yaml", "kuberay_releases:\n" + entry + "  sources: [x]\n")])


def test_ray_defect_range_is_half_open() -> None:
    c = load_compat_catalog()
    assert [d.name for d in c.ray_defects("2.11.0")] == ["dashboard-agent-hang"]
    assert c.ray_defects("2.37.0") and c.ray_defects("2.24.1")
    assert c.ray_defects("2.10.0") == [] == c.ray_defects("2.38.0")
    assert c.ray_defects("not-a-version") == []
    bad = "ray_defects:\n- name: x\n  first_ray: two\n  fixed_ray: 2.38.0\n  breaks: y\n"
    with pytest.raises(CompatCatalogError, match=r"ray_defects entry first_ray='two'"):
        catalog_from_documents([("r.yaml", bad + "  sources: ['https://example.org']\n")])


def test_ray_and_ray_llm_images() -> None:
    c = load_compat_catalog()
    r = c.ray("2.46.0")
    assert r is not None and r.vllm_requirement == ">=0.8.5"
    assert r.supports_vllm("0.8.5") and not r.supports_vllm("0.8.4")
    img = c.ray_llm_image("2.46.0-py311-cu124")
    assert img is not None
    # ray[llm] 2.46.0 requires vllm>=0.8.5: the image is taken to run 0.8.5 (assumed).
    assert (img.ray, img.python, img.cuda, img.vllm) == ("2.46.0", "3.11", "12.4", "0.8.5")
    assert img.vllm_assumed
    img2 = c.ray_llm_image("rayproject/ray-llm:ray-2.56.1-py311-cu128")
    assert img2 is not None and img2.cuda == "12.8" and img2.vllm == "0.22.0"
    assert not img2.vllm_assumed  # an exact pin
    assert img2.sources
    assert c.ray_llm_image("nightly-py311-cu124") is None
    assert c.ray_llm_image("1.0.0-py311") is None  # Ray release not catalogued


def test_older_gpu_operator_lines_are_catalogued() -> None:
    """v23.9, v24.3 and v24.6: chart defaults at the tag, matrix from the docs tag."""
    c = load_compat_catalog()
    v239 = c.gpu_operator("v23.9.0")
    assert v239 is not None and v239.default_driver == "535.104.12"
    assert v239.eks_kubernetes is not None and v239.eks_kubernetes.max == "1.26"
    v243 = c.gpu_operator("24.3.0")
    assert v243 is not None and v243.default_driver == "550.54.15"
    assert v243.supports_kubernetes("1.30") and not v243.supports_kubernetes("1.31")
    v246 = c.gpu_operator("v24.6.2")
    assert v246 is not None and v246.device_plugin.version == "0.16.2"
    assert v246.driver_is_tested("550.144.03")


def test_gpu_operator_25_3_supports_eks_1_29_to_1_33() -> None:
    """The 25.3 line's platform-support page lists EKS 1.29-1.33 for every 25.3 patch."""
    c = load_compat_catalog()
    for version in ("v25.3.0", "v25.3.1", "v25.3.4"):
        release = c.gpu_operator(version)
        assert release is not None and release.eks_kubernetes is not None
        assert (release.eks_kubernetes.min, release.eks_kubernetes.max) == ("1.29", "1.33")
