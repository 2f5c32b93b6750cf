"""Write components/gpustrata/catalog/data/kaito-presets.yaml: what the KAITO controller
decides for a preset Workspace / InferenceSet (``inference.preset.name``), at each release
tag (``vX.Y.Z``), read from a git mirror of kaito-project/kaito with ``git show TAG:path``.

Kept per release, facts only:

- ``base_image``: ``presetRegistryName`` (charts/kaito/workspace/values.yaml) and the ``base``
  entry's ``tag`` of presets/workspace/models/supported_models.yaml: the image every vLLM
  preset runs (``GetBaseImageName`` in pkg/workspace/inference/preset_inferences.go);
- ``vllm``: the ``vllm==`` pin of presets/workspace/dependencies/requirements.txt, which the
  base image installs (kept only where supported_models.yaml's ``runtimeVersion.vllm``, when
  it states one, agrees);
- ``parallelism``: how pkg/model/interface.go sets ``--tensor-parallel-size``:
  ``all-gpus`` (the instance type's GPU count) or ``data-parallel-when-fits`` (1 with
  ``--data-parallel-size`` = the GPU count when the model's files take under half of one
  GPU's memory, ``modelFitsOnSingleGPU``; else the GPU count);
- ``presets``: each preset's Hugging Face model and revision (its ``version`` URL).

Releases without a ``base`` entry (before v0.4.6, one image per preset) are not kept.
Consecutive releases whose facts are equal share a row; each cites its own tag.

    python tools/kaito_presets.py KAITO_GIT_DIR \
        > components/gpustrata/catalog/data/kaito-presets.yaml
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import yaml
from release_rows import release_rows

MODELS = "presets/workspace/models/supported_models.yaml"
REQUIREMENTS = "presets/workspace/dependencies/requirements.txt"
VALUES = "charts/kaito/workspace/values.yaml"
INTERFACE = "pkg/model/interface.go"
CONTROLLER = "pkg/workspace/controllers/workspace_controller.go"
CRDS = {"Workspace": "workspaces", "InferenceSet": "inferencesets"}
"""Kind -> the plural of its CRD, config/crd/bases/kaito.sh_<plural>.yaml."""
GMU = re.compile(
    r'(?:ModelRunParams\["gpu-memory-utilization"\] = |defaultGPUMemoryUtilization = )"([\d.]+)"'
)
GMU_BY_GPU = re.compile(r'^\s*"([^"]+)":\s*"([\d.]+)",', re.MULTILINE)
VERSION = re.compile(r"^https://huggingface\.co/([^/]+/[^/]+)/commit/([0-9a-f]{7,40})$")
PIN = re.compile(r"^vllm==([\w.]+)\s*$", re.MULTILINE)


def _git(git_dir: str, *args: str) -> str:
    return subprocess.check_output(
        ["git", "--git-dir", git_dir, *args], text=True, stderr=subprocess.DEVNULL
    )


def _show(git_dir: str, tag: str, path: str) -> str | None:
    try:
        return _git(git_dir, "show", f"{tag}:{path}")
    except subprocess.CalledProcessError:
        return None


def _facts(git_dir: str, tag: str) -> dict[str, Any] | None:
    text = _show(git_dir, tag, MODELS)
    requirements = _show(git_dir, tag, REQUIREMENTS)
    values = _show(git_dir, tag, VALUES)
    interface = _show(git_dir, tag, INTERFACE)
    controller = _show(git_dir, tag, CONTROLLER) or ""
    if None in (text, requirements, values, interface):
        return None
    models = {m["name"]: m for m in (yaml.safe_load(text or "") or {}).get("models", [])}
    base = models.get("base")
    pin = PIN.search(requirements or "")
    registry = (yaml.safe_load(values or "") or {}).get("presetRegistryName")
    if base is None or pin is None or not registry:
        return None
    stated = (base.get("runtimeVersion") or {}).get("vllm")
    if stated is not None and str(stated) != pin[1]:
        return None  # the two files disagree: no fact
    presets = {}
    for name, m in sorted(models.items()):
        found = VERSION.match(str(m.get("version", "")))
        if name != "base" and found is not None:
            presets[name] = {"model": found[1], "revision": found[2]}
    fits = "modelFitsOnSingleGPU" in (interface or "")
    gmu = GMU.search(interface or "")
    by_gpu = (interface or "").partition("gpuMemoryUtilizationByGPUModel = map")[2]
    overrides = dict(GMU_BY_GPU.findall(by_gpu.partition("\n}")[0])) if by_gpu else {}
    estimated = "UpdateWorkspaceTargetNodeCount" in controller
    served = {}
    for kind, plural in CRDS.items():
        crd = yaml.safe_load(_show(git_dir, tag, f"config/crd/bases/kaito.sh_{plural}.yaml") or "")
        versions = (crd or {}).get("spec", {}).get("versions", [])
        names = [str(v["name"]) for v in versions if v.get("served")]
        if names:
            served[kind] = names
    return {
        "served": served,
        "base_image": f"{registry}/kaito-base:{base['tag']}",
        "vllm": pin[1],
        "parallelism": "data-parallel-when-fits" if fits else "all-gpus",
        "node_count": "estimated" if estimated else "resource.count",
        "gpu_memory_utilization": gmu[1] if gmu else None,
        "gpu_memory_utilization_by_gpu": overrides,
        "presets": presets,
    }


def main(git_dir: str) -> None:
    rows = release_rows(git_dir, "v", "kaito", lambda tag: _facts(git_dir, tag))
    head = (
        "# What the KAITO controller decides for a preset Workspace or InferenceSet, per\n"
        "# KAITO release (vX.Y.Z tags from v0.4.6, the first with a shared base image):\n"
        "# - base_image: the image every vLLM preset runs (presetRegistryName of\n"
        "#   charts/kaito/workspace/values.yaml + kaito-base:<tag of the `base` entry> of\n"
        "#   presets/workspace/models/supported_models.yaml);\n"
        "# - vllm: the vLLM release that image installs (the vllm== pin of\n"
        "#   presets/workspace/dependencies/requirements.txt);\n"
        "# - parallelism: how pkg/model/interface.go sets --tensor-parallel-size\n"
        "#   (all-gpus: the instance type's GPU count; data-parallel-when-fits: 1 with\n"
        "#   --data-parallel-size <GPU count> when the model's files take under half of\n"
        "#   one GPU's memory, else the GPU count);\n"
        "# - node_count: resource.count, or `estimated` (the controller's node estimator\n"
        "#   sets status.targetNodeCount: UpdateWorkspaceTargetNodeCount in\n"
        "#   pkg/workspace/controllers/workspace_controller.go);\n"
        "# - gpu_memory_utilization: the --gpu-memory-utilization KAITO passes (null:\n"
        "#   computed from the GPU); _by_gpu: its overrides by GPU model;\n"
        "# - served: the API versions each kind's CRD serves\n"
        "#   (config/crd/bases/kaito.sh_<kind>s.yaml);\n"
        "# - presets: each preset's Hugging Face model and revision (its `version`).\n"
        "# Facts only; each release's were read from `source` with {release} and {path}\n"
        "# filled in; the releases of one row are equal in them.\n"
        "# Written by tools/kaito_presets.py; read by catalog/kaito.py.\n"
    )
    doc = {
        "source": "kaito-project/kaito@v{release}:{path}",
        "paths": [MODELS, REQUIREMENTS, VALUES, INTERFACE, CONTROLLER, "config/crd/bases"],
        "releases": rows,
    }
    sys.stdout.write(head + yaml.safe_dump(doc, sort_keys=False, width=100))


if __name__ == "__main__":
    main(sys.argv[1])
