"""The AWS facts catalogue: quota codes per family and capacity type, add-on pins."""

from __future__ import annotations

from gpustrata.catalog.aws import (
    eks_addon_version,
    instance_vcpus,
    quota_increase_command,
    vcpu_quota,
)


def test_quota_per_family_and_capacity() -> None:
    p5 = vcpu_quota("p5.48xlarge", "ON_DEMAND")
    assert p5 is not None and p5.code == "L-417A185B"
    g6 = vcpu_quota("g6.xlarge", "SPOT")
    assert g6 is not None and g6.code == "L-3819A6DF"
    m7i = vcpu_quota("m7i.xlarge", "ON_DEMAND")
    assert m7i is not None and m7i.code == "L-1216C47A"
    assert vcpu_quota("x2iedn.xlarge", "ON_DEMAND") is None
    assert "--quota-code L-417A185B --desired-value 192 --region us-west-2" in (
        quota_increase_command(p5, 192, "us-west-2")
    )


def test_instance_vcpus_by_size() -> None:
    assert instance_vcpus("m7i.large") == 2
    assert instance_vcpus("m7i.xlarge") == 4
    assert instance_vcpus("m7i.4xlarge") == 16
    assert instance_vcpus("m7i.metal-24xl") is None
    assert instance_vcpus("g6.xlarge") is None


def test_addon_pins_cited_or_absent() -> None:
    coredns = eks_addon_version("coredns", "1.34")
    assert coredns is not None and coredns.version.startswith("v1.13")
    assert coredns.sources and coredns.sources[0].startswith("https://")
    assert eks_addon_version("vpc-cni", "1.34") is None
    assert eks_addon_version("coredns", "1.20") is None
