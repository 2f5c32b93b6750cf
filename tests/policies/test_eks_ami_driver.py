"""The driver an EKS AL2023 NVIDIA AMI release ships, read from its release notes
(catalog/data/eks-ami-drivers.yaml): O002 knows a Karpenter pool's driver from a pinned
``amiSelectorTerms`` alias without the user stating it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from conftest import rule_dir

from gpustrata.catalog.eks_ami import eks_ami_driver, eks_ami_table
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def test_the_catalogue_names_its_source_and_reads_a_driver_per_minor() -> None:
    assert eks_ami_table().source.startswith("awslabs/amazon-eks-ami@")
    assert eks_ami_driver("v20260714", "1.34") == "580.159.03"
    assert eks_ami_driver("v20260714") == "580.159.03"  # every minor agrees
    assert eks_ami_driver("v19990101") is None
    assert len(eks_ami_table().releases) >= 60


def test_the_generator_reads_a_release_table() -> None:
    import sys

    sys.path.insert(0, str(TOOLS))
    from eks_ami_drivers import drivers

    notes = """# AMI Release v20990101
<details><summary><b>Kubernetes 1.34</b></summary>
<table><tr><th>Package</th><th>AL2023_x86_64_NVIDIA</th><th>AL2023_x86_64_STANDARD</th></tr>
<tr><td>kmod-nvidia-latest-dkms</td><td colspan="1">590.48.01-1.amzn2023</td><td>-</td></tr>
</table></details>
<details><summary><b>Kubernetes 1.29</b></summary>
<table><tr><th>Package</th><th>AL2023_x86_64_STANDARD</th><th>AL2023_x86_64_NVIDIA</th></tr>
<tr><td>kmod-nvidia-latest-dkms</td><td>-</td><td>570.195.03-1.amzn2023</td></tr>
</table></details>
"""
    assert drivers(notes) == {"v20990101": {"1.34": "590.48.01", "1.29": "570.195.03"}}


def _docs() -> list[dict[str, Any]]:
    path = rule_dir("K004") / "good-nodepool-tolerates.yaml"
    return [copy.deepcopy(dict(o.raw)) for o in load_paths([str(path)])]


def _o002(docs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    report = evaluate(docs)
    found = [f.message for f in report.findings if f.rule == "O002"]
    skipped = [n.reason for n in report.not_evaluated if n.rule == "O002"]
    return found, skipped


def test_a_pinned_al2023_release_gives_o002_its_driver() -> None:
    docs = _docs()
    _, skipped = _o002(docs)
    assert any("driver" in r for r in skipped)  # al2023@latest: the driver drifts
    docs[0]["spec"]["amiSelectorTerms"] = [{"alias": "al2023@v20260714"}]
    for d in docs:  # an image whose CUDA needs more than the AMI's 580 driver
        if d["kind"] == "Deployment":
            container = d["spec"]["template"]["spec"]["containers"][0]
            container["image"] = "nvcr.io/nvidia/cuda:13.2.0-runtime-ubuntu24.04"
    found, skipped = _o002(docs)
    assert not any("driver version" in r for r in skipped)
    assert found and "580.159.03" in found[0] and "amazon-eks-ami" in found[0]
