"""The driver an AKS Ubuntu node image release installs on GPU VM sizes, read from
Azure/AgentBaker's VHD release notes (catalog/data/aks-image-drivers.yaml): O002 knows the
driver of Nodes that carry ``kubernetes.azure.com/node-image-version`` and no GFD driver
labels, without the user stating it."""

from __future__ import annotations

import copy
from typing import Any

from _scripts import load_script

from gpustrata.catalog.aks_image import aks_image_driver, aks_image_table
from gpustrata_policies import evaluate

IMAGE = "AKSUbuntu-2204gen2containerd-202601.27.0"


def test_the_catalogue_names_its_source_and_reads_a_driver_per_size() -> None:
    assert aks_image_table().source.startswith("Azure/AgentBaker@")
    assert aks_image_driver(IMAGE, "Standard_NC24ads_A100_v4") == "580.95.05"
    assert aks_image_driver(IMAGE, "Standard_NV36ads_A10_v5") == "550.144.06"  # GRID size
    assert aks_image_driver(IMAGE, "Standard_NC6") is None  # NCv1: pinned to 470 in code
    assert aks_image_driver(IMAGE, "Standard_NC24lds_xl_RTXPRO6000BSE_v6") is None
    assert aks_image_driver("AKSUbuntu-2204gen2containerd-201901.01.0", "x") is None
    assert aks_image_driver("AKSAzureLinux-V3gen2-202601.27.0", "Standard_NC24ads_A100_v4") is None
    assert len(aks_image_table().releases) >= 20


def _docs(labels: dict[str, str]) -> list[dict[str, Any]]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "aks-gpu-0",
            "labels": {
                "kubernetes.io/hostname": "aks-gpu-0",
                "node.kubernetes.io/instance-type": "Standard_NC24ads_A100_v4",
                "nvidia.com/gpu.product": "NVIDIA-A100-PCIE-80GB",
                "agentpool": "gpu",
                **labels,
            },
        },
        "spec": {"taints": [{"key": "sku", "value": "gpu", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "23", "memory": "214000000Ki", "nvidia.com/gpu": "1"},
            "nodeInfo": {"kubeletVersion": "v1.33.2"},
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "cuda", "namespace": "llm"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "cuda"}},
            "template": {
                "metadata": {"labels": {"app": "cuda"}},
                "spec": {
                    "nodeSelector": {"agentpool": "gpu"},
                    "tolerations": [{"key": "sku", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "cuda",
                            "image": "nvcr.io/nvidia/cuda:13.2.0-runtime-ubuntu24.04",
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ],
                },
            },
        },
    }
    return [node, deployment]


def _o002(docs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    report = evaluate(copy.deepcopy(docs))
    found = [f.message for f in report.findings if f.rule == "O002"]
    skipped = [n.reason for n in report.not_evaluated if n.rule == "O002"]
    return found, skipped


def test_an_aks_node_image_gives_o002_its_driver() -> None:
    found, skipped = _o002(_docs({}))
    assert not found  # nothing says which driver these Nodes run
    found, skipped = _o002(_docs({"kubernetes.azure.com/node-image-version": IMAGE}))
    assert found, skipped
    assert "580.95.05" in found[0] and "AgentBaker" in found[0] and IMAGE in found[0]


def test_gfd_labels_win_over_the_image_release() -> None:
    gfd = {
        "kubernetes.azure.com/node-image-version": IMAGE,
        "nvidia.com/cuda.driver.major": "595",
        "nvidia.com/cuda.driver.minor": "58",
        "nvidia.com/cuda.driver.rev": "03",
    }
    found, _ = _o002(_docs(gfd))
    assert not any("580.95.05" in f for f in found)


def test_the_generator_reads_the_driver_lines() -> None:
    tool = load_script("tools/aks_image_drivers.py", "aks_image_drivers")
    cuda, grid, version = tool.CUDA, tool.GRID, tool.VERSION

    notes = """Components downloaded in this VHD build:
  - nvidia-cuda-driver=580.159.04-20260629214430
Components installed at node provisioning time (CSE) for supported GPU VM sizes:
  - nvidia-grid-driver=570.211.01-20260522192315
  - nvidia-cuda-driver-prebaked=580.159.04-20260629214430 (kernel 5.15.0-1118-azure)
"""
    assert cuda.findall(notes) == ["580.159.04"]  # not the -prebaked line
    assert grid.findall(notes) == ["570.211.01"]
    path = "vhdbuilder/release-notes/AKSUbuntu/gen2/2204containerd/202608.20.0.txt"
    match = version.search(path)
    assert match is not None and match.group(1) == "202608.20.0"


def test_the_docs_state_the_catalogues_size() -> None:
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "howto" / "eks-ami-driver.md"
    text = " ".join(page.read_text(encoding="utf-8").split())
    releases = aks_image_table().releases

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(p) for p in v.split("."))

    versions = sorted(releases, key=key)
    cuda = sorted({r["cuda"] for r in releases.values()}, key=key)
    grid = sorted({r["grid"] for r in releases.values() if "grid" in r}, key=key)
    assert (
        f"{len(releases)} releases ({versions[0]} to {versions[-1]}), CUDA drivers {cuda[0]} "
        f"to {cuda[-1]}, GRID drivers {grid[0]} to {grid[-1]}"
    ) in text
