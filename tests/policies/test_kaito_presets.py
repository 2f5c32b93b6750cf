"""What the KAITO controller fills into a preset Workspace or InferenceSet, read from the
catalogued KAITO releases (gpustrata_policies.view.kaito), and the record that says so."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from gpustrata.catalog.kaito import kaito_release
from gpustrata.catalog.profile import ClusterProfile
from gpustrata_policies import evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.kaito import _gmu, kaito_fill
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.profile import using_profile

CORPUS = Path(__file__).resolve().parents[1] / "data"
GEMMA = CORPUS / "field-corpus-2" / "kaito-workspace-gemma-3-27b.yaml"
MIG = CORPUS / "field-corpus-3" / "kaito-inferenceset-mig-single.yaml"


def _workspace(path: Path = GEMMA, **resource: Any) -> K8sObject:
    (obj,) = [o for o in load_paths([str(path)]) if o.kind in {"Workspace", "InferenceSet"}]
    if not resource:
        return obj
    raw = copy.deepcopy(dict(obj.raw))
    raw["resource"] = {**raw["resource"], **resource}
    return K8sObject(raw=raw, file=obj.file, line=obj.line)


def _profile(release: str) -> ClusterProfile:
    return ClusterProfile.model_validate({"versions": {"kaito": release}})


def test_release_independent_values_are_read_without_a_release() -> None:
    """gemma-3-27b-instruct (v0.8.0 to v0.12.0) on Standard_NC24ads_A100_v4 (1 GPU): the
    model and revision, one GPU per Pod, TP 1 and --gpu-memory-utilization 0.84 agree in
    every release; the image differs, so the vLLM release is not guessed."""
    fill = kaito_fill(_workspace())
    assert fill is not None
    assert fill.values["model"] == "google/gemma-3-27b-it"
    assert fill.values["gpus"] == 1 and fill.values["tensor_parallel_size"] == 1
    assert fill.values["gpu_memory_utilization"] == "0.84"
    assert "image" not in fill.values
    assert "differs across those releases" in fill.unknown["image"]
    assert "versions.kaito" in fill.where
    assert "0.8.0" in fill.unknown["image"] and "0.12.0" in fill.unknown["image"]
    # every release's node estimator puts 54.8Gi / 51.10Gi of files on one 80Gi GPU
    assert fill.values["nodes"] == 1 and "nodes" not in fill.unknown
    assert "0.8.0 to 0.12.0" in fill.where


def test_stated_release_fills_the_image() -> None:
    """versions.kaito 0.12.0: kaito-base:0.5.0 with the vLLM release its requirements pin."""
    obj = _workspace()
    with using_profile(_profile("0.12.0")):
        fill = kaito_fill(obj)
    assert fill is not None
    assert fill.values["image"] == "mcr.microsoft.com/aks/kaito/kaito-base:0.5.0"
    assert "image" not in fill.unknown
    assert fill.where.startswith("KAITO 0.12.0 (kaito-project/kaito@v0.12.0")


def test_stated_release_without_the_preset_or_not_catalogued() -> None:
    """gemma-3-27b-instruct is no preset of v0.6.2; v0.99.0 is not catalogued."""
    with using_profile(_profile("0.6.2")):
        fill = kaito_fill(_workspace())
    assert fill is not None and not fill.values
    assert "KAITO 0.6.2 has no preset 'gemma-3-27b-instruct'" in fill.unknown["model"]
    with using_profile(_profile("v0.99.0")):
        fill = kaito_fill(_workspace())
    assert fill is not None and "is not catalogued" in fill.unknown["image"]


def test_tensor_parallel_over_several_gpus_depends_on_the_release() -> None:
    """Standard_NC48ads_A100_v4 (2 GPUs): KAITO 0.6.2 passes TP 2 and reads resource.count
    as the node count; without a release TP differs (all-gpus before v0.10.0, the
    data-parallel tier after)."""
    obj = _workspace(instanceType="Standard_NC48ads_A100_v4", count=1)
    with using_profile(_profile("0.6.2")):
        gpt = kaito_fill(_workspace(instanceType="Standard_NC48ads_A100_v4", count=1))
    assert gpt is not None and "model" not in gpt.values  # no gemma preset in 0.6.2
    llama = CORPUS / "field-corpus-3" / "kaito-workspace-llama-3.3-70b.yaml"
    with using_profile(_profile("0.6.2")):
        fill = kaito_fill(_workspace(llama))
    assert fill is not None
    assert fill.values["tensor_parallel_size"] == 2 and fill.values["nodes"] == 2
    assert "gpu_memory_utilization" in fill.unknown  # computed from the GPU then
    fill = kaito_fill(obj)
    assert fill is not None and fill.values["gpus"] == 2
    # the data-parallel tier (v0.10.0+) needs files under half of one GPU: 54.8Gi x 2 x 2
    # and 51.10Gi x 2 x 2 are over KAITO's 160Gi, so every release runs TP 2 on one node
    assert fill.values["tensor_parallel_size"] == 2 and fill.values["data_parallel_size"] == 1
    assert fill.values["nodes"] == 1


def test_a10_gets_kaitos_override_at_0_12_0() -> None:
    """v0.12.0 passes 0.82 on KAITO's "NVIDIA A10" (gpustrata's "NVIDIA A10 Tensor Core
    GPU"; no whole-A10 Azure size is catalogued, so the GPU is named directly) and 0.84 on
    an A10G (g5.xlarge), whose name only starts alike."""
    release = kaito_release("0.12.0")
    a10 = catalogs.hardware().gpu("a10")
    assert release is not None and a10 is not None
    assert _gmu(release, a10.name) == "0.82"
    assert _gmu(release, None) is None  # the GPU decides it there
    with using_profile(_profile("0.12.0")):
        a10g = kaito_fill(_workspace(instanceType="g5.xlarge"))
    assert a10g is not None and a10g.values.get("gpu_memory_utilization") == "0.84"


def test_no_instance_type_leaves_the_gpus_to_the_nodes() -> None:
    """An InferenceSet without resource.instanceType runs on the nodes its labelSelector
    finds: the GPUs per Pod are not known."""
    (obj,) = load_paths([str(MIG)])
    fill = kaito_fill(obj)
    assert fill is not None and fill.values["model"] == "microsoft/Phi-4-mini-instruct"
    assert "gpus" not in fill.values and "labelSelector" in fill.unknown["gpus"]
    records = [n.reason for n in evaluate([obj]).not_evaluated if n.rule == "*"]
    assert sum("labelSelector" in r for r in records) == 1  # said once, in its own record


def test_record_says_what_kaito_filled_and_what_is_not_known() -> None:
    report = evaluate([_workspace()])
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "model google/gemma-3-27b-it@005ad34" in record
    assert "1 nvidia.com/gpu per Pod" in record
    assert "(set versions.kaito in the cluster profile)" in record
    report = evaluate([_workspace()], profile=_profile("0.11.0"))
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "image mcr.microsoft.com/aks/kaito/kaito-base:0.4.2" in record
    assert "the Pods KAITO 0.11.0 builds (probes, volumes) are not read" in record
    report = evaluate([_workspace()], profile=_profile("0.12.0"))
    assert not [n for n in report.not_evaluated if n.rule == "*"]  # its Pods are built


def test_only_releases_serving_the_kind_are_read() -> None:
    """kaito.sh/v1alpha1 InferenceSet is served from v0.8.0 (its CRD), v1beta1 from v0.11.0:
    the mistral-7b InferenceSet (v1alpha1) is read against 0.8.0 to 0.12.0, where
    --gpu-memory-utilization is 0.84 in every release (computed before 0.7.0 does not
    count); a v1beta1 InferenceSet against 0.11.0 and 0.12.0; KAITO 0.9.4 stated for the
    v1beta1 one serves no such kind."""
    (mistral,) = load_paths([str(CORPUS / "field-corpus-2" / "kaito-inferenceset-mistral-7b.yaml")])
    fill = kaito_fill(mistral)
    assert fill is not None and "0.8.0 to 0.12.0" in fill.where
    assert fill.values["gpu_memory_utilization"] == "0.84"
    (mig,) = load_paths([str(MIG)])
    fill = kaito_fill(mig)
    assert fill is not None and "0.11.0 to 0.12.0" in fill.where
    (mig,) = load_paths([str(MIG)])
    with using_profile(_profile("0.9.4")):
        fill = kaito_fill(mig)
    assert (
        fill is not None
        and "KAITO 0.9.4 serves no kaito.sh/v1beta1 InferenceSet" in (fill.unknown["model"])
    )


GPT_OSS = CORPUS / "field-corpus-3" / "kaito-workspace-gpt-oss-120b.yaml"


def _with_config(objs: list[K8sObject]) -> K8sObject:
    from gpustrata_policies.view.launchers import attach_partners

    attach_partners(objs)
    (obj,) = [o for o in objs if o.kind == "Workspace"]
    return obj


def test_inference_config_configmap_overrides_kaitos_flags() -> None:
    """gpt-oss-120b's ConfigMap sets gpu-memory-utilization 0.92: inference_api.py appends
    its vllm: keys after KAITO's --gpu-memory-utilization 0.84, so 0.92 is what runs."""
    obj = _with_config(load_paths([str(GPT_OSS)]))
    fill = kaito_fill(obj)
    assert fill is not None and fill.values["gpu_memory_utilization"] == 0.92
    assert not [f for f in fill.filled if f.startswith("--gpu-memory-utilization 0.84")]
    assert any("ConfigMap 'gpt-oss-120b-inference-config'" in f for f in fill.filled)


def test_inference_config_not_among_the_inputs_or_unreadable() -> None:
    """The Workspace alone: its ConfigMap's keys are not known, and the record says they
    may override KAITO's flags; a ConfigMap whose inference_config.yaml is not YAML is named
    with the reason, never a traceback."""
    (workspace,) = [o for o in load_paths([str(GPT_OSS)]) if o.kind == "Workspace"]
    alone = _with_config([workspace])
    fill = kaito_fill(alone)
    assert fill is not None and "not among the inputs" in fill.unknown["config"]
    assert fill.values["gpu_memory_utilization"] == "0.84"  # KAITO's, the record says so
    objs = load_paths([str(GPT_OSS)])
    (config,) = [o for o in objs if o.kind == "ConfigMap"]
    raw = copy.deepcopy(dict(config.raw))
    raw["data"] = {"inference_config.yaml": "vllm: [unclosed"}
    broken = K8sObject(raw=raw, file=config.file, line=config.line)
    (workspace,) = [o for o in objs if o.kind == "Workspace"]
    fill = kaito_fill(_with_config([broken, workspace]))
    assert fill is not None and "is no YAML" in fill.unknown["config"]
    assert "gpt-oss-120b-inference-config" in fill.unknown["config"]
    report = evaluate(objs)
    assert any("gpu-memory-utilization 0.92" in n.reason for n in report.not_evaluated)


def test_values_known_only_at_deploy_time_and_odd_values() -> None:
    """A preset name the Pulumi preview does not know yet gives a record, never a crash; an
    instanceType that is no string is named as such."""
    from gpustrata_policies import UNKNOWN

    raw = copy.deepcopy(dict(_workspace().raw))
    raw["inference"] = {"preset": {"name": UNKNOWN}}
    report = evaluate([K8sObject(raw=raw)])
    assert any("known" in n.reason and n.rule == "*" for n in report.not_evaluated)
    fill = kaito_fill(_workspace(instanceType=5))
    assert fill is not None and "5 is not an instance type name" in fill.unknown["gpus"]


LLAMA = CORPUS / "field-corpus-3" / "kaito-workspace-llama-3.3-70b.yaml"


def test_preset_pod_is_built_as_kaito_builds_it() -> None:
    """KAITO's gemma-3-27b example at 0.12.0 (Standard_NC24ads_A100_v4): one Pod on
    kaito-base:0.5.0 with KAITO's launcher, TP 1, --max-model-len=auto, 0.84, one GPU,
    the NVMe weights claim, /dev/shm and HTTP /health probes (a 30-minute startup window:
    15 min + 51.10 x 18 s = 1820 s, so 182 periods of 10 s)."""
    obj = _workspace()
    with using_profile(_profile("0.12.0")):
        (pod,) = obj.pods()
        (container,) = pod.containers(init=False)
    assert pod.role == "" and container.image == "mcr.microsoft.com/aks/kaito/kaito-base:0.5.0"
    raw = container.raw
    assert raw["command"] == ["python3", "/workspace/vllm/inference_api.py"]
    assert "--tensor-parallel-size=1" in raw["args"] and "--max-model-len=auto" in raw["args"]
    assert "--gpu-memory-utilization=0.84" in raw["args"]
    assert raw["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert raw["startupProbe"]["failureThreshold"] == 182
    assert pod.spec["nodeSelector"] == {
        "node.kubernetes.io/instance-type": "Standard_NC24ads_A100_v4"
    }
    report = evaluate([_workspace()], profile=_profile("0.12.0"))
    assert not [f for f in report.findings if f.enforcement == "mandatory"]


def test_engine_over_nodes_is_one_pod_group() -> None:
    """llama-3.3-70b on two Standard_NC48ads_A100_v4 (the estimator's 2 nodes at 16384
    tokens): the leader runs TP 2 x PP 2, the worker joins it; V001 counts both Pods."""
    from gpustrata_policies.view.controllers import pod_group

    objs = load_paths([str(LLAMA)])
    obj = _with_config(objs)
    with using_profile(_profile("0.12.0")):
        leader, worker = obj.pods()
        group = pod_group(leader)
    assert (leader.role, worker.role) == ("leader", "worker")
    assert group is not None and group[0] == 2 and group[1] is worker
    (container,) = leader.containers(init=False)
    assert "--pipeline-parallel-size=2" in container.raw["args"]
    assert container.raw["args"][-2:] == ["--max-model-len", "16384"]  # the ConfigMap's
    report = evaluate(objs, profile=_profile("0.12.0"))
    # V001 counts both Pods; V011 knows KAITO's multi-node readiness script (it GETs /health)
    assert not [f for f in report.findings if f.rule in {"V001", "V011"}]


def test_swap_space_in_kaitos_llama_example_is_refused() -> None:
    """Regression (missed defect): KAITO's llama-3.3-70b example passes swap-space: 4 through
    its ConfigMap; KAITO 0.12.0's kaito-base:0.5.0 installs vLLM 0.25.1, whose parser has
    no --swap-space, so the engine exits. V013 says so, with the image's release."""
    report = evaluate(load_paths([str(LLAMA)]), profile=_profile("0.12.0"))
    (finding,) = [f for f in report.findings if f.rule == "V013"]
    assert finding.enforcement == "mandatory"
    assert "--swap-space" in finding.message and "0.25.1" in finding.message
    assert "kaito-base" in finding.message


def test_unknown_release_splits_and_names_both_sides() -> None:
    """No versions.kaito: llama-3.3-70b's image and engine layout differ across the
    catalogued releases (resource.count before 0.7.0, the estimator's 2 nodes after), so
    no Pod is built and the record names the values per release and versions.kaito."""
    report = evaluate(load_paths([str(LLAMA)]))
    assert not report.findings
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "the engine layout differs across those releases" in record
    assert "--pipeline-parallel-size 2 on 2 node(s) in 0.7.0 to 0.12.0" in record
    assert "kaito-base:0.5.0 in 0.12.0" in record
    assert "set versions.kaito in the cluster profile" in record


def test_kaitos_launcher_is_read_as_vllm() -> None:
    """A container running KAITO's inference_api.py (a custom KAITO template, or the built
    Pod) is a vLLM engine: its --kaito-* flags are KAITO's, the rest vLLM's."""
    from gpustrata_policies.view.vllm_args import vllm_engine

    raw = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kaito-custom"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": "mcr.microsoft.com/aks/kaito/kaito-base:0.5.0",
                            "command": ["python3", "/workspace/vllm/inference_api.py"],
                            "args": [
                                "--kaito-config-file=/mnt/config/x.yaml",
                                "--max-model-len=4096",
                            ],
                        }
                    ]
                }
            }
        },
    }
    (pod,) = K8sObject(raw=raw).pods()
    (container,) = pod.containers(init=False)
    engine = vllm_engine(container)
    assert engine is not None and engine.get_int("max_model_len") == 4096
    assert not [w for w in engine.written if w.startswith("--kaito")]
