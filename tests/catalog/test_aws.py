"""The AWS facts catalogue: quota codes per family and capacity type, add-on pins, and
vCPUs by instance size."""

from __future__ import annotations

import pytest

from gpustrata.catalog.aws import (
    eks_addon_version,
    eks_addon_versions,
    instance_vcpus,
    pod_identity,
    pod_identity_trust_policy,
    quota_increase_command,
    vcpu_quota,
    vcpu_quotas,
)


@pytest.mark.parametrize(
    ("instance_type", "capacity", "code"),
    [
        ("p5.48xlarge", "ON_DEMAND", "L-417A185B"),
        ("p5.48xlarge", "SPOT", "L-7212CCBC"),
        ("g6.xlarge", "SPOT", "L-3819A6DF"),
        ("g6e.2xlarge", "ON_DEMAND", "L-DB2E81BA"),
        ("g6e.12xlarge", "ON_DEMAND", "L-DB2E81BA"),
        ("m7i.xlarge", "ON_DEMAND", "L-1216C47A"),
        ("m7i.large", "SPOT", "L-34B43A08"),
    ],
)
def test_quota_per_family_and_capacity(instance_type: str, capacity: str, code: str) -> None:
    quota = vcpu_quota(instance_type, capacity)
    assert quota is not None and quota.code == code
    assert quota.capacity_type == capacity


def test_unknown_family_or_capacity_has_no_quota() -> None:
    assert vcpu_quota("x2iedn.xlarge", "ON_DEMAND") is None
    assert vcpu_quota("nonsense", "SPOT") is None
    assert vcpu_quota("m7i.xlarge", "RESERVED") is None


def test_quotas_are_cited_and_defaults_only_where_stated() -> None:
    quotas = vcpu_quotas()
    assert len({q.code for q in quotas}) == len(quotas) == 6
    for quota in quotas:
        assert quota.sources and all(s.startswith("https://") for s in quota.sources)
    standard = vcpu_quota("m7i.xlarge", "ON_DEMAND")
    assert standard is not None and standard.default_vcpus == 5
    p_on_demand = vcpu_quota("p5.48xlarge", "ON_DEMAND")
    assert p_on_demand is not None and p_on_demand.default_vcpus is None


def test_quota_increase_command() -> None:
    quota = vcpu_quota("p5.48xlarge", "ON_DEMAND")
    assert quota is not None
    assert quota_increase_command(quota, 192, "us-west-2") == (
        "aws service-quotas request-service-quota-increase --service-code ec2 "
        "--quota-code L-417A185B --desired-value 192 --region us-west-2"
    )


def test_instance_vcpus_by_size() -> None:
    assert instance_vcpus("m7i.large") == 2
    assert instance_vcpus("m7i.xlarge") == 4
    assert instance_vcpus("m7i.4xlarge") == 16
    assert instance_vcpus("c7i.2xlarge") == 8
    assert instance_vcpus("r7i.48xlarge") == 192
    assert instance_vcpus("m7g.xlarge") == 4
    assert instance_vcpus("m7i.metal-24xl") is None
    assert instance_vcpus("g6.xlarge") is None
    assert instance_vcpus("t3.medium") is None
    assert instance_vcpus("unknown") is None


def test_addon_pins_cited_or_absent() -> None:
    coredns = eks_addon_version("coredns", "1.34")
    assert coredns is not None and coredns.version.startswith("v1.")
    assert "eksbuild" in coredns.version
    for pin in eks_addon_versions():
        assert pin.sources and all(s.startswith("https://") for s in pin.sources)
    pairs = [(p.name, p.kubernetes) for p in eks_addon_versions()]
    assert len(pairs) == len(set(pairs))
    assert eks_addon_version("eks-pod-identity-agent", "1.34") is None
    assert eks_addon_version("coredns", "1.20") is None


def test_pod_identity_facts() -> None:
    facts = pod_identity()
    assert facts.addon == "eks-pod-identity-agent"
    assert facts.trust_principal == "pods.eks.amazonaws.com"
    assert facts.trust_actions == ("sts:AssumeRole", "sts:TagSession")
    assert facts.node_role_action == "eks-auth:AssumeRoleForPodIdentity"
    assert facts.sources and all(
        s.startswith("https://docs.aws.amazon.com/") for s in facts.sources
    )
    statement = pod_identity_trust_policy()["Statement"][0]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]


def test_the_file_is_validated_and_a_bad_entry_names_file_key_and_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """data/aws.yaml is read as pydantic models: the EFA section's env map and device
    plugin are flattened as before, and a quota with a capacity that is not a string is
    an error naming the file, the key and the value (it was a bare KeyError or a silent
    str() before)."""
    from gpustrata.catalog import aws, packaged

    efa = aws.efa_facts()
    raw = packaged.packaged_document("data/aws.yaml")
    assert dict(efa.env) == {str(k): str(v) for k, v in raw["efa"]["env"].items()}
    assert efa.device_plugin_chart == raw["efa"]["device_plugin"]["chart"]
    assert [q.capacity_type for q in vcpu_quotas()] == [q["capacity"] for q in raw["vcpu_quotas"]]
    broken = dict(raw, vcpu_quotas=[dict(raw["vcpu_quotas"][0], capacity=["SPOT"])])
    monkeypatch.setattr(packaged, "packaged_document", lambda path: broken)
    aws._doc.cache_clear()
    try:
        with pytest.raises(packaged.CatalogError) as info:
            aws.vcpu_quotas()
    finally:
        aws._doc.cache_clear()
    message = str(info.value)
    assert message.startswith("data/aws.yaml: invalid: ")
    assert "vcpu_quotas.0.capacity" in message and "['SPOT']" in message
