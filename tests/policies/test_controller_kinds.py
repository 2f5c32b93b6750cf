"""Kinds whose controllers create the GPU Pods (issue 20 item 3): what each states is read,
what its controller fills in is "not evaluated" with the reason."""

from __future__ import annotations

from gpustrata_policies import UNKNOWN, evaluate
from gpustrata_policies.inputs.manifests import load_text
from gpustrata_policies.view.controllers import controller_fills
from gpustrata_policies.view.kinds import is_read_kind
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.vllm_args import vllm_engine

# NVIDIA/k8s-nim-operator@f63f74d
# config/samples/nim/serving/advanced/multi-node/multi-node-nimservice.yaml
NIM = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: deepseek-r1, namespace: nim-service}
spec:
  env: [{name: NIM_USE_SGLANG, value: "1"}]
  image: {repository: nvcr.io/nim/deepseek-ai/deepseek-r1, tag: "1.7.3"}
  replicas: 1
  resources: {limits: {nvidia.com/gpu: 8}, requests: {nvidia.com/gpu: 8}}
  startupProbe: {probe: {httpGet: {path: /v1/health/ready, port: api}}}
  multiNode: {parallelism: {pipeline: 2, tensor: 8}}
"""

# Shape of opendatahub-io/odh-model-controller config/runtimes/vllm-cuda-template.yaml, with
# parameters as `oc process` takes them (openshift/api template/v1 Parameter).
TEMPLATE = """
apiVersion: template.openshift.io/v1
kind: Template
metadata: {name: vllm-runtime-template}
parameters:
  - {name: IMAGE, value: "vllm/vllm-openai:v0.10.1.1"}
  - {name: TP, value: "2"}
  - {name: GPUS, value: "2"}
  - {name: API_KEY, generate: expression, from: "[a-z0-9]{32}"}
  - {name: MODEL}
objects:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: vllm, namespace: llm}
    spec:
      template:
        spec:
          containers:
            - name: vllm
              image: ${IMAGE}
              args: ["--model", "m-${MODEL}", "--tensor-parallel-size", "${TP}",
                     "--api-key", "${API_KEY}"]
              resources: {limits: {nvidia.com/gpu: "${{GPUS}}"}}
"""


def test_nimservice_reads_what_it_states_and_says_what_the_operator_fills_in() -> None:
    (obj,) = load_text(NIM, "nim.yaml")
    assert is_read_kind(obj)
    (pod,) = obj.pods()
    (container,) = pod.containers()
    assert container.image == "nvcr.io/nim/deepseek-ai/deepseek-r1:1.7.3"
    assert pod.gpu_count() == 8
    assert vllm_engine(container) is None  # a NIM image: its engine is the image's choice
    reasons = [n.reason for n in evaluate([obj]).not_evaluated if n.rule == "*"]
    assert any("NIM operator builds the Deployment" in r for r in reasons)


def test_controller_kinds_only_in_their_api_group() -> None:
    other = K8sObject({"apiVersion": "example.com/v1", "kind": "Workspace", "resource": {}})
    assert not is_read_kind(other) and other.pods() == [] and controller_fills(other) == []
    report = evaluate([other])
    assert any("not one gpustrata reads" in n.reason for n in report.not_evaluated)


def test_kaito_preset_is_not_evaluated_with_the_reason() -> None:
    # kaito-project/kaito@056b828 examples/inference/kaito_workspace_llama-3.1_8b_instruct.yaml
    obj = K8sObject(
        {
            "apiVersion": "kaito.sh/v1beta1",
            "kind": "Workspace",
            "metadata": {"name": "ws"},
            "resource": {"instanceType": "Standard_NC96ads_A100_v4"},
            "inference": {"preset": {"name": "llama-3.1-8b-instruct"}},
        }
    )
    assert obj.pods() == []
    (reason,) = controller_fills(obj)
    assert "preset 'llama-3.1-8b-instruct'" in reason


def test_rollout_workload_ref_and_jobset_replicated_jobs() -> None:
    ref = K8sObject(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "r"},
            "spec": {"workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}},
        }
    )
    assert ref.pods() == [] and "workloadRef 'd'" in controller_fills(ref)[0]
    jobset = K8sObject(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "j"},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "workers",
                        "replicas": 3,
                        "template": {
                            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}
                        },
                    }
                ]
            },
        }
    )
    (pod,) = jobset.pods()
    assert pod.replicas == 3 and "workers" in pod.role


def test_openshift_template_objects_with_parameters() -> None:
    (obj,) = load_text(TEMPLATE, "template.yaml")
    assert obj.kind == "Deployment" and obj.file == "template.yaml"
    container = obj.raw["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "vllm/vllm-openai:v0.10.1.1"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2  # ${{GPUS}}: a number
    args = container["args"]
    assert args[1] is UNKNOWN  # MODEL has no value: given at `oc process` time
    assert args[3] == "2" and args[5] is UNKNOWN  # API_KEY is generated
    assert obj.line_of(("spec", "template", "spec", "containers", 0, "image")) is not None


# fusioninfer.io's InferenceService (its docs/design InferenceService CRD, story 3): TP 32
# over a 4-Pod LeaderWorkerSet its controller builds from spec.roles, 8 GPUs per Pod.
FUSIONINFER = """
apiVersion: fusioninfer.io/v1alpha1
kind: InferenceService
metadata: {name: deepseek-r1-inference}
spec:
  roles:
    - name: inference
      componentType: worker
      replicas: 2
      multinode: {nodeCount: 4}
      template:
        spec:
          containers:
            - name: vllm
              image: vllm/vllm-openai:v0.27.1
              args: ["--model", "deepseek-ai/DeepSeek-R1", "--tensor-parallel-size", "32"]
              resources: {limits: {nvidia.com/gpu: "8"}}
"""


def test_kserve_and_kuberay_kinds_only_in_their_api_group() -> None:
    """A kind name another project also uses is read only in KServe's or KubeRay's group:
    fusioninfer.io's InferenceService is "not evaluated", not checked as an empty KServe one
    (0 findings said nothing about it). Without an apiVersion the kind is enough."""
    (fusion,) = load_text(FUSIONINFER, "fusion.yaml")
    assert not is_read_kind(fusion)
    report = evaluate([fusion])
    assert report.findings == []
    assert [n.reason for n in report.not_evaluated] == [
        "kind InferenceService (fusioninfer.io/v1alpha1) is not one gpustrata reads"
    ]
    for api, kind in (
        ("serving.kserve.io/v1beta1", "InferenceService"),
        ("serving.kserve.io/v1alpha2", "LLMInferenceService"),
        ("ray.io/v1", "RayService"),
        ("ray.io/v1alpha1", "RayCluster"),
    ):
        assert is_read_kind(K8sObject({"apiVersion": api, "kind": kind}))
        assert not is_read_kind(K8sObject({"apiVersion": "example.com/v1", "kind": kind}))
        assert is_read_kind(K8sObject({"kind": kind}))
