"""Tests for the hardware catalogue (GPU models and instance types)."""

from __future__ import annotations

import re
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import ValidationError

from gpustrata.catalog import hardware
from gpustrata.catalog.hardware import (
    GpuModel,
    HardwareCatalog,
    InstanceType,
    load_hardware_catalog,
)
from gpustrata.catalog.packaged import CatalogError

GIB = 1024


@pytest.fixture(scope="module")
def catalog() -> HardwareCatalog:
    return load_hardware_catalog()


def _raw(filename: str, key: str) -> list[dict[str, Any]]:
    text = resources.files("gpustrata.catalog").joinpath(filename).read_text(encoding="utf-8")
    entries: list[dict[str, Any]] = yaml.safe_load(text)[key]
    return entries


# --- data integrity -------------------------------------------------------------------


def test_catalog_loads_expected_coverage(catalog: HardwareCatalog) -> None:
    for gpu_id in (
        "t4",
        "a10g",
        "l4",
        "l40s",
        "a100-sxm-40gb",
        "a100-sxm-80gb",
        "h100-sxm-80gb",
        "h200-sxm-141gb",
        "b200",
    ):
        assert gpu_id in catalog.gpus, gpu_id
    families = {name.split(".")[0] for name in catalog.instances}
    assert {"g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200"} <= families
    assert {"p3", "p3dn", "p6-b300"} <= families
    sizes = {n for n in catalog.instances if n.startswith("g5.")}
    assert sizes == {
        f"g5.{s}"
        for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")
    } | {"g5.48xlarge"}


def test_every_entry_has_a_source(catalog: HardwareCatalog) -> None:
    for gpu in catalog.gpus.values():
        assert gpu.sources and all(s.strip() for s in gpu.sources), gpu.id
    for inst in catalog.instances.values():
        assert inst.sources and all(s.strip() for s in inst.sources), inst.name


def test_ids_and_names_unique_in_data_files() -> None:
    gpu_ids = [g["id"].lower() for g in _raw("data/gpus.yaml", "gpus")]
    assert len(gpu_ids) == len(set(gpu_ids))
    names = [i["name"] for i in _raw("data/instances.yaml", "instances")]
    assert len(names) == len(set(names))


def test_gfd_labels_unique_across_gpus(catalog: HardwareCatalog) -> None:
    labels = [lab.lower() for g in catalog.gpus.values() for lab in g.gfd_products]
    assert len(labels) == len(set(labels))


def test_every_instance_gpu_exists(catalog: HardwareCatalog) -> None:
    for inst in catalog.instances.values():
        assert catalog.gpu(inst.gpu) is not None, inst.name


def test_arch_matches_ami_type(catalog: HardwareCatalog) -> None:
    for inst in catalog.instances.values():
        if inst.provider != "aws":
            assert inst.eks_ami_type is None and inst.max_pods is None, inst.name
            continue
        expected = "AL2023_x86_64_NVIDIA" if inst.arch == "x86_64" else "AL2023_ARM_64_NVIDIA"
        assert inst.eks_ami_type == expected, inst.name


@pytest.mark.parametrize(
    ("name", "provider", "gpu", "count", "vcpu", "memory_gib"),
    [
        ("a2-highgpu-1g", "gcp", "a100-sxm-40gb", 1, 12, 85),
        ("a2-ultragpu-8g", "gcp", "a100-sxm-80gb", 8, 96, 1360),
        ("a3-highgpu-8g", "gcp", "h100-sxm-80gb", 8, 208, 1872),
        ("a3-megagpu-8g", "gcp", "h100-sxm-80gb", 8, 208, 1872),
        ("a3-ultragpu-8g", "gcp", "h200-sxm-141gb", 8, 224, 2952),
        ("a4-highgpu-8g", "gcp", "b200", 8, 224, 3968),
        ("g2-standard-48", "gcp", "l4", 4, 48, 192),
        ("Standard_NC24ads_A100_v4", "azure", "a100-pcie-80gb", 1, 24, 220),
        ("Standard_ND96isr_H100_v5", "azure", "h100-sxm-80gb", 8, 96, 1900),
        ("Standard_ND96isr_H200_v5", "azure", "h200-sxm-141gb", 8, 96, 1850),
        ("Standard_NC64as_T4_v3", "azure", "t4", 4, 64, 440),
        ("Standard_NC40ads_H100_v5", "azure", "h100-nvl-94gb", 1, 40, 320),
        ("Standard_NC80adis_H100_v5", "azure", "h100-nvl-94gb", 2, 80, 640),
        ("Standard_ND96asr_v4", "azure", "a100-sxm-40gb", 8, 96, 900),
        ("Standard_ND96amsr_A100_v4", "azure", "a100-sxm-80gb", 8, 96, 1900),
        ("Standard_NC24s_v3", "azure", "v100-pcie-16gb", 4, 24, 448),
        ("p3.2xlarge", "aws", "v100-sxm-16gb", 1, 8, 61),
        ("p3.8xlarge", "aws", "v100-sxm-16gb", 4, 32, 244),
        ("p3.16xlarge", "aws", "v100-sxm-16gb", 8, 64, 488),
        ("p6-b200.48xlarge", "aws", "b200", 8, 192, 2048),
        ("p3dn.24xlarge", "aws", "v100-sxm-32gb", 8, 96, 768),
        ("p6-b300.48xlarge", "aws", "b300", 8, 192, 4096),
    ],
)
def test_cloud_machine_types(
    catalog: HardwareCatalog,
    name: str,
    provider: str,
    gpu: str,
    count: int,
    vcpu: int,
    memory_gib: int,
) -> None:
    """GKE, AKS and AWS types are looked up the same way: by the instance-type label value."""
    inst = catalog.instance(name)
    assert inst is not None and inst.provider == provider
    assert (inst.gpu, inst.gpu_count, inst.vcpu) == (gpu, count, vcpu)
    assert inst.memory_mib == memory_gib * 1024


# --- prices -------------------------------------------------------------------------------

# Where a catalogue price may come from: the cloud's own pages, or a repository the cloud owns
# (price tables its own code generates from its pricing API), pinned to a commit. Third-party
# price sites and blogs are not accepted, with one named exception below.
_FIRST_PARTY: dict[str, tuple[set[str], set[str]]] = {
    "aws": ({"aws.amazon.com", "docs.aws.amazon.com"}, {"aws", "awslabs"}),
    "gcp": ({"cloud.google.com"}, {"googlecloudplatform"}),
    "azure": (
        {"azure.microsoft.com", "learn.microsoft.com", "prices.azure.com"},
        {"azure", "microsoft"},
    ),
}
# The one third-party table accepted, for GCP only: Google prints no machine-type price that
# could be read, and this table's build exports Google's Cloud Billing Catalog API SKUs and sums
# them per machine type (instances.yaml's Google Cloud note). Only this file, pinned.
_GENERATED_GCP = re.compile(
    r"https://github\.com/Cyclenerd/google-cloud-pricing-cost-calculator/blob/[0-9a-f]{40}/pricing\.yml"
)
_QUOTE = re.compile(r'^\s*# read: "(?P<name>[^"]+)":\s*(?P<usd>[0-9.]+)', re.MULTILINE)


def _first_party(provider: str, source: str) -> bool:
    url = urlsplit(source)
    hosts, owners = _FIRST_PARTY.get(provider, (set(), set()))
    if url.scheme != "https" or url.hostname is None:
        return False
    if url.hostname in hosts:
        return True
    if provider == "gcp" and _GENERATED_GCP.fullmatch(source):
        return True
    parts = url.path.strip("/").split("/")
    return (
        url.hostname == "github.com"
        and len(parts) >= 5
        and parts[0].lower() in owners
        and parts[2] == "blob"
        and re.fullmatch(r"[0-9a-f]{40}", parts[3]) is not None
    )


@pytest.mark.parametrize(
    ("provider", "source", "ok"),
    [
        ("aws", "https://aws.amazon.com/ec2/capacityblocks/pricing/", True),
        ("aws", "https://github.com/aws/karpenter-provider-aws/blob/" + "a" * 40 + "/x.go", True),
        ("aws", "https://github.com/aws/karpenter-provider-aws/blob/main/x.go", False),
        ("aws", "https://github.com/someone/prices/blob/" + "a" * 40 + "/x.go", False),
        ("aws", "https://www.factualminds.com/blog/amazon-ec2-on-demand-pricing/", False),
        ("aws", "https://azure.microsoft.com/en-us/pricing/details/virtual-machines/linux/", False),
        (
            "azure",
            "https://github.com/Azure/karpenter-provider-azure/blob/" + "b" * 40 + "/p",
            True,
        ),
        ("gcp", "http://cloud.google.com/compute/vm-instance-pricing", False),
        (
            "gcp",
            "https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator/blob/"
            + "c" * 40
            + "/pricing.yml",
            True,
        ),
        (
            "gcp",
            "https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator/blob/master/pricing.yml",
            False,
        ),
        ("gcp", "https://github.com/someone/pricing/blob/" + "c" * 40 + "/pricing.yml", False),
        (
            "aws",
            "https://github.com/Cyclenerd/google-cloud-pricing-cost-calculator/blob/"
            + "c" * 40
            + "/pricing.yml",
            False,
        ),
        ("onprem", "https://aws.amazon.com/ec2/pricing/", False),
    ],
)
def test_first_party_rule(provider: str, source: str, ok: bool) -> None:
    assert _first_party(provider, source) is ok


def test_every_price_cites_a_first_party_source_and_a_date(catalog: HardwareCatalog) -> None:
    priced = [i for i in catalog.instances.values() if i.price is not None]
    assert priced
    for inst in priced:
        assert inst.price is not None
        assert _first_party(inst.provider, inst.price.source), (inst.name, inst.price.source)
        assert date(2024, 1, 1) <= inst.price.read_on <= date.today(), inst.name
        assert inst.price.region.strip(), inst.name


def test_each_generated_price_matches_the_line_it_quotes(catalog: HardwareCatalog) -> None:
    """Prices read from a generated price table quote their line; the value must agree."""
    text = resources.files("gpustrata.catalog").joinpath("data/instances.yaml").read_text()
    checked = 0
    for chunk in text.split("\n  - name: ")[1:]:
        name = chunk.split("\n", 1)[0].strip()
        inst = catalog.instance(name)
        assert inst is not None, name
        if inst.price is None or "github.com" not in inst.price.source:
            continue
        quotes = _QUOTE.findall(chunk)
        assert len(quotes) == 1, f"{name}: price needs one '# read: \"NAME\": USD' comment"
        quoted_name, usd = quotes[0]
        assert quoted_name == name and float(usd) == inst.price.usd_per_hour, name
        checked += 1
    assert checked >= 50


@pytest.mark.parametrize(
    ("provider", "unpriced_expected"),
    [("aws", []), ("azure", []), ("gcp", ["a3-ultragpu-8g", "a4-highgpu-8g"])],
)
def test_every_type_has_a_price_but_the_named_gaps(
    catalog: HardwareCatalog, provider: str, unpriced_expected: list[str]
) -> None:
    """GCP's two gaps are absent from the generated table (instances.yaml says why)."""
    unpriced = [
        i.name for i in catalog.instances.values() if i.provider == provider and i.price is None
    ]
    assert unpriced == unpriced_expected


@pytest.mark.parametrize(
    ("name", "kind", "usd", "region"),
    [
        ("g5.xlarge", "on-demand", 1.006, "us-east-1"),
        ("p5.48xlarge", "on-demand", 55.04, "us-east-1"),
        ("p5e.48xlarge", "capacity-block", 43.26, "us-east-2"),
        ("Standard_NC24ads_A100_v4", "on-demand", 3.673, "westus3"),
        ("Standard_ND96isr_H200_v5", "on-demand", 84.8, "westus3"),
        ("a3-highgpu-8g", "on-demand", 88.4899999025753, "us-central1"),
        ("a3-megagpu-8g", "on-demand", 92.9375881512329, "us-east4"),
    ],
)
def test_well_known_prices(
    catalog: HardwareCatalog, name: str, kind: str, usd: float, region: str
) -> None:
    inst = catalog.instance(name)
    assert inst is not None and inst.price is not None
    assert (inst.price.kind, inst.price.usd_per_hour, inst.price.region) == (kind, usd, region)


def test_fractional_gpu_types_are_not_listed_as_whole_gpus(catalog: HardwareCatalog) -> None:
    """g6f (1/8 to 1/2 of an L4), NVads A10 v5 (partial A10s) and NCads A10 v4 (whole GPUs not
    confirmed) stay out until the catalogue can state a GPU share (instances.yaml says why)."""
    fractional = re.compile(
        r"^(g6f\.|gr6f\.|Standard_NV\d+adm?s_A10_v5$|Standard_NC\d+ads_A10_v4$)"
    )
    assert [n for n in catalog.instances if fractional.match(n)] == []


def test_eks_fields_follow_the_provider() -> None:
    base = {"name": "x", "gpu": "l4", "gpu_count": 1, "vcpu": 4, "memory_mib": 16384}
    base |= {"arch": "x86_64", "sources": ["s"]}
    with pytest.raises(ValidationError, match="needs max_pods"):
        InstanceType.model_validate({**base, "provider": "aws"})
    assert InstanceType.model_validate({**base, "provider": "gcp"}).max_pods is None


# --- well-known facts -------------------------------------------------------------------


def test_p5_48xlarge(catalog: HardwareCatalog) -> None:
    p5 = catalog.instance("p5.48xlarge")
    assert p5 is not None
    assert (p5.gpu, p5.gpu_count, p5.vcpu, p5.memory_mib) == ("h100-sxm-80gb", 8, 192, 2048 * GIB)
    assert p5.max_pods == 100
    h100 = catalog.gpu(p5.gpu)
    assert h100 is not None
    assert 79 < h100.memory_gib <= 80 and h100.compute_capability == "9.0" and h100.fp8


def test_compute_capability_compares_as_major_minor(catalog: HardwareCatalog) -> None:
    """``GpuModel.capability`` orders by number, not text: "10.0" is above "9.0" and "7.5"."""
    t4, a10g, h100, b200 = (catalog.gpu(i) for i in ("t4", "a10g", "h100-sxm-80gb", "b200"))
    assert t4 is not None and a10g is not None and h100 is not None and b200 is not None
    assert (t4.capability, a10g.capability, h100.capability) == ((7, 5), (8, 6), (9, 0))
    assert b200.capability == (10, 0) > h100.capability > a10g.capability > t4.capability
    for gpu in catalog.gpus.values():
        assert ".".join(map(str, gpu.capability)) == gpu.compute_capability


def test_g5_xlarge(catalog: HardwareCatalog) -> None:
    g5 = catalog.instance("g5.xlarge")
    assert g5 is not None
    assert (g5.gpu, g5.gpu_count, g5.vcpu, g5.memory_mib) == ("a10g", 1, 4, 16 * GIB)
    assert g5.max_pods == 58
    a10g = catalog.gpu("a10g")
    assert a10g is not None
    assert 22 < a10g.memory_gib < 24


def test_g6e_uses_l40s_and_p5en_uses_h200(catalog: HardwareCatalog) -> None:
    g6e = catalog.instance("g6e.xlarge")
    p5en = catalog.instance("p5en.48xlarge")
    assert g6e is not None and p5en is not None
    assert (g6e.gpu, g6e.gpu_count) == ("l40s", 1)
    assert (p5en.gpu, p5en.gpu_count) == ("h200-sxm-141gb", 8)


def test_g4dn_12xlarge_has_four_t4(catalog: HardwareCatalog) -> None:
    inst = catalog.instance("g4dn.12xlarge")
    assert inst is not None
    assert (inst.gpu, inst.gpu_count, inst.max_pods) == ("t4", 4, 234)


def test_p4d_vs_p4de_gpu_memory(catalog: HardwareCatalog) -> None:
    p4d = catalog.instance("p4d.24xlarge")
    p4de = catalog.instance("p4de.24xlarge")
    assert p4d is not None and p4de is not None
    assert (p4d.gpu, p4de.gpu) == ("a100-sxm-40gb", "a100-sxm-80gb")


def test_gpus_without_bf16_say_so_in_notes(catalog: HardwareCatalog) -> None:
    for gpu in catalog.gpus.values():
        if not gpu.bf16:
            assert "FP16" in gpu.notes, gpu.id


# --- lookups ----------------------------------------------------------------------------


def test_gpu_lookup_by_id_case_insensitive(catalog: HardwareCatalog) -> None:
    gpu = catalog.gpu("H100-SXM-80GB")
    assert gpu is not None and gpu.id == "h100-sxm-80gb"


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("NVIDIA-H100-80GB-HBM3", "h100-sxm-80gb"),
        ("NVIDIA-A10G", "a10g"),
        ("Tesla-T4", "t4"),
        ("NVIDIA-L40S", "l40s"),
        ("A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA-H200", "h200-sxm-141gb"),
        ("NVIDIA-A100-80GB-PCIe", "a100-pcie-80gb"),
        ("NVIDIA-H100-PCIe", "h100-pcie-80gb"),
        ("NVIDIA-H100-NVL", "h100-nvl-94gb"),
        ("NVIDIA-H200-NVL", "h200-nvl-141gb"),
        ("NVIDIA-L40", "l40"),
        ("NVIDIA-A30", "a30"),
        ("NVIDIA-A40", "a40"),
        ("NVIDIA-RTX-6000-Ada-Generation", "rtx-6000-ada"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "rtx-pro-6000-blackwell-server"),
        ("NVIDIA-GH200-480GB", "gh200-96gb"),
        ("NVIDIA-GB200", "gb200"),
        ("NVIDIA-B300-SXM6-AC", "b300"),
        ("Tesla-V100-SXM2-32GB", "v100-sxm-32gb"),
    ],
)
def test_gpu_lookup_by_gfd_label(catalog: HardwareCatalog, label: str, expected: str) -> None:
    gpu = catalog.gpu(label)
    assert gpu is not None and gpu.id == expected


def test_gpu_lookup_by_shared_label(catalog: HardwareCatalog) -> None:
    gpu = catalog.gpu("NVIDIA-A10G-SHARED")
    assert gpu is not None and gpu.id == "a10g"
    gpu = catalog.gpu("Tesla-T4-SHARED")
    assert gpu is not None and gpu.id == "t4"


def test_mig_single_strategy_label_is_the_slice(catalog: HardwareCatalog) -> None:
    """GFD's single-strategy product label names a slice derived from its parent GPU."""
    gpu = catalog.gpu("NVIDIA-A100-SXM4-80GB-MIG-3g.40gb")
    assert gpu is not None and gpu.id == "a100-sxm-80gb-mig-3g.40gb"
    assert gpu.memory_gib == 40.0 and gpu.dense_bf16_tflops == round(312.0 * 3 / 7, 2)
    assert gpu.compute_capability == "8.0" and gpu.mig_profiles == []
    shared = catalog.gpu("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED")
    assert shared is not None and shared.memory_gib == round(79.65 / 8, 2)
    assert catalog.gpu("NVIDIA-A100-SXM4-80GB-MIG-5g.50gb") is None  # no such profile
    assert catalog.gpu("NVIDIA-L4-MIG-1g.10gb") is None  # L4 has no MIG


def test_pcie_and_nvl_variants_differ_from_sxm(catalog: HardwareCatalog) -> None:
    pcie, sxm = catalog.gpus["h100-pcie-80gb"], catalog.gpus["h100-sxm-80gb"]
    assert pcie.memory_bandwidth_gbs < sxm.memory_bandwidth_gbs
    assert pcie.dense_bf16_tflops < sxm.dense_bf16_tflops
    assert catalog.gpus["h100-nvl-94gb"].memory_gib > sxm.memory_gib
    assert catalog.gpus["rtx-6000-ada"].brand == "professional"
    assert all(g.brand != "geforce" for g in catalog.gpus.values())


def test_gpu_lookup_unknown(catalog: HardwareCatalog) -> None:
    assert catalog.gpu("NVIDIA-GeForce-RTX-4090") is None
    assert catalog.gpu("") is None
    assert catalog.instance("m5.large") is None


# --- extension ---------------------------------------------------------------------------


def _custom_gpu(**overrides: Any) -> GpuModel:
    data: dict[str, Any] = {
        "id": "my-gpu",
        "name": "Custom GPU",
        "memory_gib": 10.0,
        "compute_capability": "8.0",
        "bf16": True,
        "fp8": False,
        "dense_bf16_tflops": 100.0,
        "memory_bandwidth_gbs": 1000.0,
        "gfd_products": ["Custom-GPU"],
        "mig_profiles": [],
        "sources": ["https://example.com/datasheet"],
    }
    data.update(overrides)
    return GpuModel.model_validate(data)


def _custom_instance(**overrides: Any) -> InstanceType:
    data: dict[str, Any] = {
        "name": "x1.gpu",
        "provider": "onprem",
        "gpu": "my-gpu",
        "gpu_count": 2,
        "vcpu": 16,
        "memory_mib": 65536,
        "max_pods": 110,
        "arch": "x86_64",
        "eks_ami_type": "AL2023_x86_64_NVIDIA",
        "sources": ["inventory"],
    }
    data.update(overrides)
    return InstanceType.model_validate(data)


def test_extended_adds_and_overrides(catalog: HardwareCatalog) -> None:
    a10g = catalog.gpus["a10g"]
    cheaper = a10g.model_copy(update={"memory_gib": 22.0})
    ext = catalog.extended(gpus=[_custom_gpu(), cheaper], instances=[_custom_instance()])
    assert ext.gpu("Custom-GPU") is not None
    inst = ext.instance("x1.gpu")
    assert inst is not None and inst.gpu_count == 2
    overridden = ext.gpu("a10g")
    assert overridden is not None and overridden.memory_gib == 22.0
    assert len(ext.gpus) == len(catalog.gpus) + 1
    # The original catalogue is untouched.
    assert catalog.gpus["a10g"].memory_gib == a10g.memory_gib
    assert catalog.instance("x1.gpu") is None


def test_extended_override_is_case_insensitive(catalog: HardwareCatalog) -> None:
    ext = catalog.extended(gpus=[catalog.gpus["t4"].model_copy(update={"id": "T4"})])
    assert len(ext.gpus) == len(catalog.gpus)


def test_extended_rejects_unknown_gpu(catalog: HardwareCatalog) -> None:
    with pytest.raises(CatalogError, match=r"'x1\.gpu'.*unknown gpu 'my-gpu'"):
        catalog.extended(instances=[_custom_instance()])
    assert issubclass(CatalogError, ValueError)


def test_models_forbid_extra_fields_and_need_sources() -> None:
    with pytest.raises(ValueError):
        _custom_gpu(colour="green")
    with pytest.raises(ValueError):
        _custom_gpu(sources=[])
    with pytest.raises(ValueError):
        _custom_instance(arch="sparc")


# --- broken data files ---------------------------------------------------------------------


def _broken_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gpus: str) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "data").mkdir(parents=True)
    (pkg / "data" / "gpus.yaml").write_text(gpus, encoding="utf-8")
    (pkg / "data" / "instances.yaml").write_text("instances: []\n", encoding="utf-8")
    monkeypatch.setattr("importlib.resources.files", lambda _pkg: pkg)
    hardware.load_hardware_catalog.cache_clear()


def test_broken_entry_names_file_and_entry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _broken_files(
        monkeypatch,
        tmp_path,
        "gpus:\n  - id: bad-gpu\n    name: Bad\n    memory_gib: -1\n",
    )
    try:
        with pytest.raises(CatalogError, match=r"data/gpus\.yaml: gpu 'bad-gpu' \(entry 0\)"):
            hardware.load_hardware_catalog()
    finally:
        hardware.load_hardware_catalog.cache_clear()


def test_broken_yaml_names_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _broken_files(monkeypatch, tmp_path, "gpus: [unclosed\n")
    try:
        with pytest.raises(CatalogError, match=r"data/gpus\.yaml: not valid YAML"):
            hardware.load_hardware_catalog()
    finally:
        hardware.load_hardware_catalog.cache_clear()


def test_a_repeated_entry_is_an_error_naming_both() -> None:
    """GPU ids repeat ignoring case (``H100-SXM`` is ``h100-sxm``); instance names exactly."""
    import copy

    from gpustrata.catalog import hardware
    from gpustrata.catalog.packaged import CatalogError

    gpu = hardware._read_yaml(hardware._GPUS_FILE, "gpus")[0]
    twin = {**copy.deepcopy(gpu), "id": str(gpu["id"]).upper()}
    with pytest.raises(CatalogError, match=r"gpus.yaml: gpu .*\(entry 1\) repeats id"):
        hardware._parse_entries("gpus.yaml", [gpu, twin], GpuModel, "gpu", "id", True)
    inst = hardware._read_yaml(hardware._INSTANCES_FILE, "instances")[0]
    upper = {**copy.deepcopy(inst), "name": str(inst["name"]).upper()}
    found = hardware._parse_entries(
        "i.yaml", [inst, upper], InstanceType, "instance", "name", False
    )
    assert [i.name for i in found] == [inst["name"], upper["name"]]
    with pytest.raises(CatalogError, match=r"i.yaml: instance .* repeats name"):
        hardware._parse_entries("i.yaml", [inst, inst], InstanceType, "instance", "name", False)
    with pytest.raises(CatalogError, match=r"i.yaml: instance 'x' \(entry 0\) is invalid"):
        hardware._parse_entries("i.yaml", [{"name": "x"}], InstanceType, "instance", "name", False)
