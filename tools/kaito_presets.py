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
PRESET_INFERENCES = "pkg/workspace/inference/preset_inferences.go"
AUTO_CONTEXT = "maxModelLen = pkgmodel.MaxModelLenAuto"
"""``GeneratePresetInference`` passing ``--max-model-len=auto`` to vLLM (v0.11.0+)."""
ESTIMATORS = {
    "pkg/workspace/estimator/nodesestimator/estimator.go": "nodesestimator.NodeEstimator{}",
    "pkg/workspace/estimator/advancednodesestimator/estimator.go": (
        "advancednodesestimator.AdvancedNodesEstimator{}"
    ),
}
"""The node estimator's file -> how the controller names it when it is the one used."""
BUILTIN = "presets/workspace/models"
"""Where each built-in preset's ``model.go`` (v0.7.0-v0.10.0) states its estimator inputs."""
CATALOG = "presets/workspace/models/model_catalog.yaml"
"""The model catalogue the preset generator reads (v0.10.0+): file size and shape."""
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


_CONST = re.compile(r'^\s*(\w+)\s*=\s*(?:(\w+) \+ )?"([a-z0-9.-]+)"', re.MULTILINE)
_INFER = re.compile(r"func \(\*?(\w+)\) GetInferenceParameters\(\)")
_MUST_GET = re.compile(r"metadata\.MustGet\((\w+)\)")
_SIZE = re.compile(r'^\s*TotalSafeTensorFileSize:\s*"([0-9.]+Gi)"', re.MULTILINE)
_BPT = re.compile(r"^\s*BytesPerToken:\s*(\d+)", re.MULTILINE)
_NO_TP = re.compile(r"^\s*DisableTensorParallelism:\s*true", re.MULTILINE)
_DISTRIBUTED = re.compile(
    r"func \(\*?(\w+)\) SupportDistributedInference\(\) bool \{\s*return (\w+)"
)
# The estimator's constants, as each estimator writes them (checked, not assumed).
_ESTIMATOR_FACTS = {
    "kv-overhead": ("* 0.84", "1.02", "2.3", "maxModelLen := 2048"),
    "kv-weight-overhead": (
        "gpuMemoryUtilization = 0.84",
        "weightExpansionFactor = 1.02",
        "baseOverheadGiB = 2.3",
        "overheadWeightFactor = 0.05",
        "maxModelLen := 2048",
    ),
}


def _estimator(git_dir: str, tag: str, controller: str) -> str | None:
    """Which node estimator the controller runs: ``kv-overhead`` (weights x 1.02 over
    0.84 of each GPU less 2.3 GiB and the KV cache of max-model-len, default 2048) or
    ``kv-weight-overhead`` (the same, the remainder divided by 1.05); None: none used or
    its constants are not the ones read here."""
    for path, used in ESTIMATORS.items():
        if used not in controller:
            continue
        text = _show(git_dir, tag, path) or ""
        kind = "kv-weight-overhead" if "overheadWeightFactor" in text else "kv-overhead"
        if all(fact in text for fact in _ESTIMATOR_FACTS[kind]):
            return kind
    return None


def _builtin_inputs(git_dir: str, tag: str) -> dict[str, dict[str, Any]]:
    """Preset name -> its estimator inputs, from the built-in presets' ``model.go``."""
    out: dict[str, dict[str, Any]] = {}
    paths = _git(git_dir, "ls-tree", "-r", "--name-only", tag, BUILTIN).split()
    for path in paths:
        if not path.endswith("/model.go"):
            continue
        text = _show(git_dir, tag, path) or ""
        consts: dict[str, str] = {}
        for const, prefix, value in _CONST.findall(text):  # `X + "-instruct"` too
            consts[const] = consts.get(prefix, "") + value if prefix else value
        distributed = dict(_DISTRIBUTED.findall(text))
        parts = _INFER.split(text)
        for kind, body in zip(parts[1::2], parts[2::2], strict=True):
            body = body.split("\nfunc ", 1)[0]
            name, size, bpt = _MUST_GET.search(body), _SIZE.search(body), _BPT.search(body)
            if name is None or size is None or bpt is None or name[1] not in consts:
                continue
            out[consts[name[1]]] = {
                "size": size[1],
                "bytes_per_token": int(bpt[1]),
                "distributed": distributed.get(kind) == "true",
                "tensor_parallel": _NO_TP.search(body) is None,
            }
    return out


def _catalog_inputs(git_dir: str, tag: str) -> dict[str, dict[str, Any]]:
    """HF model (lower case) -> its estimator inputs from the model catalogue, the bytes
    per token as the preset generator computes them (``calculateKVCacheTokenSize`` in
    presets/workspace/generator/generator.go: 2 x KV heads x head dim, or MLA's
    kv_lora_rank + qk_rope_head_dim, x layers x 2 bytes)."""
    doc = yaml.safe_load(_show(git_dir, tag, CATALOG) or "") or {}
    out: dict[str, dict[str, Any]] = {}
    for m in doc.get("models") or []:
        size, layers = m.get("modelFileSize"), int(m.get("numHiddenLayers") or 0)
        heads, kv = int(m.get("numAttentionHeads") or 0), int(m.get("numKeyValueHeads") or 0)
        head_dim = int(m.get("headDim") or 0) or (
            int(m.get("hiddenSize") or 0) // heads if heads else 0
        )
        kv = kv or heads
        if int(m.get("kvLoraRank") or 0) > 0:
            elements = int(m["kvLoraRank"]) + int(m.get("qkRopeHeadDim") or 0)
        else:
            elements = 2 * kv * head_dim
        if not isinstance(size, str) or not elements or not layers:
            continue
        out[str(m["name"]).lower()] = {
            "size": size,
            "bytes_per_token": elements * layers * 2,
            "distributed": True,  # vLLMCompatibleModel.SupportDistributedInference
            "tensor_parallel": True,
        }
    return out


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
    estimator = _estimator(git_dir, tag, controller) if estimated else None
    auto = AUTO_CONTEXT in (_show(git_dir, tag, PRESET_INFERENCES) or "")
    if estimator is not None:
        builtin = _builtin_inputs(git_dir, tag)
        catalog = _catalog_inputs(git_dir, tag)
        for name, preset in presets.items():
            found = builtin.get(name) or catalog.get(preset["model"].lower())
            if found is not None:
                preset["estimator"] = found
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
        "estimator": estimator,
        "max_model_len": "auto" if auto else "computed",
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
        "# - estimator: the node estimator's formula (kv-overhead v0.7.0-v0.10.0,\n"
        "#   kv-weight-overhead from v0.11.0: pkg/workspace/estimator/*/estimator.go),\n"
        "#   null where resource.count decides; each preset's `estimator` inputs: its\n"
        "#   model files' size and KV bytes per token (the built-in preset's model.go, or\n"
        "#   model_catalog.yaml through the preset generator's formula), whether it may\n"
        "#   span nodes (SupportDistributedInference) and use tensor parallelism;\n"
        "# - max_model_len: `auto` where KAITO passes --max-model-len=auto\n"
        "#   (pkg/workspace/inference/preset_inferences.go), else `computed` (its own\n"
        "#   figure, not read here);\n"
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
        "paths": [
            MODELS,
            REQUIREMENTS,
            VALUES,
            INTERFACE,
            CONTROLLER,
            PRESET_INFERENCES,
            "config/crd/bases",
            *ESTIMATORS,
            f"{BUILTIN}/*/model.go",
            CATALOG,
        ],
        "releases": rows,
    }
    sys.stdout.write(head + yaml.safe_dump(doc, sort_keys=False, width=100))


if __name__ == "__main__":
    main(sys.argv[1])
