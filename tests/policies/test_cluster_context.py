"""`gpustrata check` with the cluster's own facts: Node objects, GPU Operator values in
their forms, ``--context``/``--check-context``/``--values``, K004 as the cluster admits
Pods, and the CI guards (nothing checked, unrendered Helm templates)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli import run

from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_paths, load_text
from gpustrata_policies.view.pools import pools_of

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{{labels}}}
spec:
  taints: [{taints}]
status:
  allocatable: {{cpu: "7", memory: 28Gi, nvidia.com/gpu: "1"}}
  nodeInfo: {{kubeletVersion: v1.33.4-eks-1, osImage: {os}}}
"""
EKS = "eks.amazonaws.com/nodegroup: gpu-l4, nvidia.com/gpu.product: NVIDIA-L4"
GPU_TAINT = "{key: nvidia.com/gpu, value: 'true', effect: NoSchedule}"
DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm, namespace: llm}}
spec:
  selector: {{matchLabels: {{app: vllm}}}}
  template:
    metadata: {{labels: {{app: vllm}}}}
    spec:
      tolerations: [{tolerations}]
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.8.5
          args: ["--model", "Qwen/Qwen2.5-1.5B-Instruct"]
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


def node(
    name: str = "n1", labels: str = EKS, taints: str = GPU_TAINT, os: str = "Amazon Linux 2023"
) -> str:
    return NODE.format(name=name, labels=labels, taints=taints, os=os)


def write(path: Path, *docs: str) -> str:
    path.write_text("---\n".join(docs), encoding="utf-8")
    return str(path)


def check(argv: list[str]) -> tuple[int, dict[str, Any]]:
    code, out, err = run(["check", "--format", "json", *argv])
    assert code in (0, 1), err
    return code, json.loads(out)


def rules_of(data: dict[str, Any], rule: str) -> list[dict[str, str]]:
    return [f for f in data["findings"] if f["rule"] == rule]


# --------------------------------------------------------------------------- Node pools


def test_nodes_group_by_pool_label_and_share_what_all_agree_on() -> None:
    objects = load_text(
        "---\n".join(
            [
                node(
                    "a",
                    taints=f"{GPU_TAINT}, {{key: node.kubernetes.io/not-ready, effect: NoExecute}}",
                ),
                node("b", taints=f"{GPU_TAINT}, {{key: only-b, effect: NoSchedule}}"),
                node(
                    "c",
                    labels="cloud.google.com/gke-nodepool: pool-l4, "
                    "cloud.google.com/gke-accelerator: nvidia-l4, "
                    "cloud.google.com/gke-accelerator-count: '2'",
                ),
                node("d", labels="nvidia.com/gpu.product: NVIDIA-L4, nvidia.com/gpu.count: '1'"),
            ]
        ),
        "nodes.yaml",
    )
    pools = {p.name: p for p in pools_of(objects)}
    assert sorted(pools) == ["Nodes with 1 x NVIDIA-L4", "gpu-l4", "pool-l4"]
    eks = pools["gpu-l4"]
    # The transient not-ready taint and b's own taint are not the pool's.
    assert eks.taints == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert eks.extra["nodes"] == 2 and eks.kubernetes_version == "1.33"
    assert eks.gpu_count == 1 and eks.gpu_product == "NVIDIA-L4"
    assert pools["pool-l4"].gpu_count == 2  # GKE's accelerator-count label
    assert eks.max_size is None  # a dump shows today's Nodes, not how far the pool scales


@pytest.mark.parametrize(
    "labels",
    [
        # GKE's own labels (no GFD): the accelerator label names the catalogue GPU
        "cloud.google.com/gke-nodepool: l4, cloud.google.com/gke-accelerator: nvidia-l4",
        # issue 20 "Done when": GFD L4 labels on a Node dump let V004 evaluate a Deployment
        # that selects no GPU label
        "nvidia.com/gpu.product: NVIDIA-L4, nvidia.com/gpu.count: '1'",
    ],
    ids=["gke-accelerator", "gfd-product"],
)
def test_node_labels_name_the_gpu_of_a_deployment_that_selects_none(
    tmp_path: Path, labels: str
) -> None:
    deployment = DEPLOYMENT.format(tolerations="").replace(
        '"Qwen/Qwen2.5-1.5B-Instruct"', '"meta-llama/Llama-3.1-8B-Instruct"'
    )
    _, data = check([write(tmp_path / "m.yaml", node(labels=labels), deployment)])
    v004 = [n for n in data["not_evaluated"] if n["rule"] == "V004"]
    assert not any("GPU model is unknown" in n["reason"] for n in v004), v004
    assert any("NVIDIA L4" in f["message"] for f in rules_of(data, "V004")), data


# --------------------------------------------------------------------------- K004 admission


def test_k004_without_pools_is_advisory_and_names_the_assumption(tmp_path: Path) -> None:
    _, data = check([write(tmp_path / "d.yaml", DEPLOYMENT.format(tolerations=""))])
    [k004] = rules_of(data, "K004")
    assert k004["enforcement"] == "advisory" and "assumed" in k004["message"]


def test_k004_on_eks_a_taint_with_another_key_still_needs_its_toleration(
    tmp_path: Path,
) -> None:
    taints = f"{GPU_TAINT}, {{key: dedicated, value: gpu, effect: NoSchedule}}"
    code, data = check(
        [write(tmp_path / "m.yaml", node(taints=taints), DEPLOYMENT.format(tolerations=""))]
    )
    [k004] = rules_of(data, "K004")
    assert k004["enforcement"] == "mandatory" and code == 1
    assert "dedicated=gpu:NoSchedule" in k004["message"]
    assert "nvidia.com/gpu=true" not in k004["message"]  # the admission plugin tolerates it


def test_k004_aks_sku_taint_is_mandatory(tmp_path: Path) -> None:
    labels = "kubernetes.azure.com/agentpool: gpu, nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB"
    taints = "{key: sku, value: gpu, effect: NoSchedule}"
    _, data = check(
        [
            write(
                tmp_path / "m.yaml",
                node(labels=labels, taints=taints),
                DEPLOYMENT.format(tolerations=""),
            )
        ]
    )
    [k004] = rules_of(data, "K004")
    assert k004["enforcement"] == "mandatory" and "sku=gpu:NoSchedule" in k004["message"]


# --------------------------------------------------------------------------- --context


def test_context_informs_rules_and_is_not_reported(tmp_path: Path) -> None:
    # A Node with a taint nobody tolerates: on EKS K004 finds nothing (admission), the
    # Node itself is never reported; --check-context reports on the context too.
    nodes = write(
        tmp_path / "nodes.yaml",
        node(taints="{key: dedicated, effect: NoSchedule}"),
        "apiVersion: x/v1\nkind: Mystery\nmetadata: {name: m}\n",
    )
    manifests = write(tmp_path / "app.yaml", DEPLOYMENT.format(tolerations=""))
    _, data = check([manifests, "--context", nodes])
    assert [f["rule"] for f in rules_of(data, "K004")] == ["K004"]
    assert rules_of(data, "K004")[0]["enforcement"] == "mandatory"
    assert not [n for n in data["not_evaluated"] if "Mystery" in n["resource"]]
    assert not [f for f in data["findings"] if f["resource"].startswith("Node/")]
    report = evaluate(load_paths([manifests]), context=load_paths([nodes]))
    assert {f.file for f in report.findings} == {manifests}
    _, with_context = check([manifests, "--context", nodes, "--check-context"])
    assert [n for n in with_context["not_evaluated"] if "Mystery" in n["resource"]]


def test_values_option_reads_a_values_file_its_keys_do_not_betray(tmp_path: Path) -> None:
    bottlerocket = "Bottlerocket OS 1.44.0 (aws-k8s-1.33-nvidia)"
    nodes = write(tmp_path / "nodes.yaml", node(os=bottlerocket))
    values = write(tmp_path / "values.yaml", "driver: {enabled: true}\n")
    _, plain = check([values, "--context", nodes])
    assert not rules_of(plain, "O003")
    assert any("without kind" in n["reason"] for n in plain["not_evaluated"])
    app = write(tmp_path / "app.yaml", DEPLOYMENT.format(tolerations=""))
    _, data = check(
        [app, "--context", nodes, "--check-context", "--values", f"gpu-operator={values}"]
    )
    [o003] = rules_of(data, "O003")
    assert "osImage Bottlerocket" in o003["message"]
    assert o003["resource"] == "HelmValues/-/values.yaml"
    _, out, _ = run(["check", app, "--context", nodes, "--values", f"gpu-operator={values}"])
    assert "O003" not in out  # the values are context: informing, not reported on
    _, out, _ = run(
        ["check", app, "--context", nodes, "--check-context", "--values", f"gpu-operator={values}"]
    )
    assert f"{values}:1: O003" in out, out  # at the driver.enabled line of the file


def test_values_option_refuses_an_unknown_chart(tmp_path: Path) -> None:
    code, _, err = run(["check", str(tmp_path), "--values", "vllm=values.yaml"])
    assert code == 2 and "CHART one of gpu-operator" in err


def test_argo_cd_application_with_helm_values_text_is_an_operator(tmp_path: Path) -> None:
    app = """\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: gpu-operator, namespace: argocd}
spec:
  source:
    repoURL: https://helm.ngc.nvidia.com/nvidia
    chart: gpu-operator
    targetRevision: v26.7.0
    helm:
      values: |
        driver:
          enabled: true
"""
    nodes = node(os="Bottlerocket OS 1.44.0 (aws-k8s-1.33-nvidia)")
    code, data = check([write(tmp_path / "argo.yaml", nodes, app)])
    [o003] = rules_of(data, "O003")
    assert o003["resource"] == "Application/argocd/gpu-operator" and code == 1
    other = app.replace("chart: gpu-operator", "chart: ingress-nginx")
    report = evaluate(load_text(other, "other.yaml"))
    assert [n.reason for n in report.not_evaluated if n.rule == "*"] == [
        "kind Application (argoproj.io/v1alpha1) is not one gpustrata reads"
    ]


# --------------------------------------------------------------------------- CI safety


def test_nothing_to_check_exits_2(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("no manifests here\n", encoding="utf-8")
    for argv, stdin in (([str(tmp_path)], None), (["-"], ""), (["-"], "# only comments\n")):
        code, out, err = run(["check", *argv], stdin)
        assert code == 2 and out == "", (argv, code, out)
        assert err.startswith("gpustrata: nothing was checked"), err
    code, out, err = run(["check", str(tmp_path / "*.yaml")])  # a glob that matches nothing
    assert code == 2 and out == "" and "no such file" in err, (code, err)


def test_unrendered_helm_template_exits_2_saying_render_it(tmp_path: Path) -> None:
    template = tmp_path / "deployment.yaml"
    template.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n"
        '  name: {{ include "vllm.fullname" . }}\n',
        encoding="utf-8",
    )
    code, out, err = run(["check", str(tmp_path)])
    assert code == 2 and out == ""
    assert f"{template}:4: an unrendered Helm template" in err and "helm template" in err
    # Braces that are not Helm's stay readable: a Jinja chat template, a comment.
    config = (
        "# rendered from `{{- if .Values.chat }}`\napiVersion: v1\nkind: ConfigMap\n"
        "metadata: {name: chat}\ndata:\n  template.jinja: |\n    {{- bos_token }}\n"
        "    {% for m in messages %}{{ m['content'] }}{% endfor %}\n"
    )
    assert [o.kind for o in load_text(config, "chat.yaml")] == ["ConfigMap"]


def test_a_described_pool_wins_over_the_nodes_of_the_same_name() -> None:
    described = (
        "apiVersion: gpustrata.io/v1alpha1\nkind: GpuNodePool\nmetadata: {name: gpu-l4}\n"
        "spec: {gpuProduct: NVIDIA-L4, gpuCount: 1}\n"
    )
    pools = pools_of(load_text("---\n".join([node(), described]), "m.yaml"))
    assert [(p.name, p.from_nodes) for p in pools] == [("gpu-l4", False)]


def test_stdin_cannot_be_both_the_manifests_and_the_context() -> None:
    code, _, err = run(["check", "-", "--context", "-"], "kind: Pod\n")
    assert code == 2 and "stdin can be read once" in err


# --------------------------------------------------------------------------- issue 20 "Done when"


def test_k004_equal_toleration_missing_the_taint_value_kubeadm_mandatory_eks_not(
    tmp_path: Path,
) -> None:
    toleration = "{key: nvidia.com/gpu, operator: Equal, value: 'false', effect: NoSchedule}"
    deployment = DEPLOYMENT.format(tolerations=toleration)
    kubeadm = (
        node(labels="nvidia.com/gpu.product: NVIDIA-L4")
        .replace("-eks-1", "")
        .replace(
            "  labels:",
            "  annotations: {kubeadm.alpha.kubernetes.io/cri-socket: unix:///run/containerd/"
            "containerd.sock}\n  labels:",
        )
    )
    _, plain = check([write(tmp_path / "kubeadm.yaml", kubeadm, deployment)])
    [k004] = rules_of(plain, "K004")
    assert k004["enforcement"] == "mandatory", k004
    _, eks = check([write(tmp_path / "eks.yaml", node(), deployment)])
    assert not rules_of(eks, "K004"), rules_of(eks, "K004")


# --------------------------------------------------------------------------- Flux HelmRelease

FLUX_RELEASE = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: gpu-operator, namespace: gpu-operator}}
spec:
  interval: 1h
  chart:
    spec:
      chart: gpu-operator
      version: v26.7.0
      sourceRef: {{kind: HelmRepository, name: nvidia, namespace: flux-system}}
{values}
"""
VALUES_CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: gpu-operator-values, namespace: gpu-operator}
data:
  values.yaml: |
    driver:
      enabled: true
"""
BOTTLEROCKET = "Bottlerocket OS 1.44.0 (aws-k8s-1.33-nvidia)"


def test_flux_helm_release_installing_a_driver_on_nodes_whose_image_ships_one_is_o003(
    tmp_path: Path,
) -> None:
    release = FLUX_RELEASE.format(values="  values:\n    driver: {enabled: true}")
    path = write(tmp_path / "flux.yaml", node(os=BOTTLEROCKET), release)
    code, data = check([path])
    [o003] = rules_of(data, "O003")
    assert o003["resource"] == "HelmRelease/gpu-operator/gpu-operator" and code == 1
    assert o003["enforcement"] == "mandatory"
    assert "driver.enabled: true)" in o003["message"], o003
    assert "osImage Bottlerocket" in o003["message"]


def test_flux_values_from_a_configmap_among_the_inputs_is_read(tmp_path: Path) -> None:
    # The ConfigMap installs the driver; Flux's default valuesKey is values.yaml.
    release = FLUX_RELEASE.format(
        values="  valuesFrom:\n    - {kind: ConfigMap, name: gpu-operator-values}"
    )
    nodes = write(tmp_path / "nodes.yaml", node(os=BOTTLEROCKET))
    manifests = write(tmp_path / "flux.yaml", release, VALUES_CONFIGMAP)
    code, data = check([manifests, "--context", nodes])
    [o003] = rules_of(data, "O003")
    assert code == 1 and o003["resource"] == "HelmRelease/gpu-operator/gpu-operator"
    assert (
        "true, from ConfigMap/gpu-operator/gpu-operator-values key values.yaml)" in o003["message"]
    )
    _, out, _ = run(["check", manifests, "--context", nodes])
    assert f"{manifests}:12: O003" in out, out  # at the valuesFrom item naming it
    # spec.values is merged over the referenced values: driver.enabled false wins.
    inline = release + "  values:\n    driver: {enabled: false}\n    toolkit: {enabled: false}\n"
    _, data = check([write(tmp_path / "inline.yaml", inline, VALUES_CONFIGMAP), "--context", nodes])
    assert not rules_of(data, "O003"), rules_of(data, "O003")
    # The same values from a Secret (base64 data) and at another key.
    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata: {name: gpu-operator-values, namespace: "
        "gpu-operator}\ndata:\n  operator.yaml: ZHJpdmVyOiB7ZW5hYmxlZDogdHJ1ZX0K\n"
    )
    from_secret = FLUX_RELEASE.format(
        values="  valuesFrom:\n    - {kind: Secret, name: gpu-operator-values, "
        "valuesKey: operator.yaml}"
    )
    _, data = check([write(tmp_path / "secret.yaml", from_secret, secret), "--context", nodes])
    assert [f["rule"] for f in rules_of(data, "O003")] == ["O003"]


def test_flux_values_from_a_configmap_not_among_the_inputs_is_not_evaluated(
    tmp_path: Path,
) -> None:
    release = FLUX_RELEASE.format(
        values="  valuesFrom:\n    - {kind: ConfigMap, name: gpu-operator-values}"
    )
    nodes = write(tmp_path / "nodes.yaml", node(os=BOTTLEROCKET))
    _, data = check([write(tmp_path / "flux.yaml", release), "--context", nodes])
    assert not rules_of(data, "O003")
    [reason] = [n["reason"] for n in data["not_evaluated"] if n["rule"] == "O003"]
    assert "ConfigMap gpu-operator/gpu-operator-values, key values.yaml" in reason, reason
    assert "not among the inputs" in reason and "unknown until the deployment" not in reason
    assert "kubectl get configmap -n gpu-operator gpu-operator-values -o yaml" in reason
    # A ConfigMap of that name without the key: Flux fails the release, unless optional.
    other_key = VALUES_CONFIGMAP.replace("values.yaml: |", "other.yaml: |")
    _, data = check([write(tmp_path / "key.yaml", release, other_key), "--context", nodes])
    [reason] = [n["reason"] for n in data["not_evaluated"] if n["rule"] == "O003"]
    assert "has no data key values.yaml" in reason, reason
    optional = release.replace("gpu-operator-values}", "gpu-operator-values, optional: true}")
    _, data = check([write(tmp_path / "opt.yaml", optional, other_key), "--context", nodes])
    [o003] = rules_of(data, "O003")  # skipped as Flux does: the chart default installs it
    assert "the chart default" in o003["message"], o003


# --------------------------------------------------------------------------- AKS

# AKS Node labels (MicrosoftDocs/azure-aks-docs@fb060abe articles/aks/use-labels.md: the
# agent pool, the VM size as instance-type, kubernetes.azure.com/accelerator: nvidia on GPU
# nodes) and the taint its GPU guides put on GPU pools (articles/aks/use-node-taints.md,
# use-nvidia-gpu.md: --node-taints sku=gpu:NoSchedule). No GFD labels: the GPU comes from
# the VM size through the catalogue.
AKS_LABELS = (
    "kubernetes.azure.com/agentpool: gpunp, kubernetes.azure.com/accelerator: nvidia, "
    "node.kubernetes.io/instance-type: Standard_NC24ads_A100_v4"
)
SKU_TAINT = "{key: sku, value: gpu, effect: NoSchedule}"


def test_aks_machine_type_labels_let_v004_evaluate_a_deployment_selecting_the_agentpool(
    tmp_path: Path,
) -> None:
    deployment = (
        DEPLOYMENT.format(tolerations="{key: sku, operator: Equal, value: gpu, effect: NoSchedule}")
        .replace(
            '"Qwen/Qwen2.5-1.5B-Instruct"',
            '"meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization", "0.3"',
        )
        .replace(
            "      containers:",
            "      nodeSelector: {kubernetes.azure.com/agentpool: gpunp}\n      containers:",
        )
    )
    nodes = write(
        tmp_path / "nodes.yaml", node(labels=AKS_LABELS, taints=SKU_TAINT, os="Ubuntu 22.04.5 LTS")
    )
    _, data = check([write(tmp_path / "d.yaml", deployment), "--context", nodes])
    v004 = [n for n in data["not_evaluated"] if n["rule"] == "V004"]
    assert not v004, v004
    [finding] = rules_of(data, "V004")
    # The VM size's GPU, from the catalogue: 0.3 x 80 GiB leaves too little KV cache.
    assert "NVIDIA A100 80GB PCIe (pool gpunp)" in finding["message"], finding
    assert not rules_of(data, "K004")  # it tolerates sku=gpu
    # The same Deployment selecting another agent pool matches no Node: K005 says so.
    other = deployment.replace("agentpool: gpunp", "agentpool: cpu")
    _, data = check([write(tmp_path / "o.yaml", other), "--context", nodes])
    assert any(n["rule"] == "V004" for n in data["not_evaluated"]), data["not_evaluated"]


def test_aks_admits_gpu_pods_with_extended_resource_toleration_but_sku_taint_needs_its_own(
    tmp_path: Path,
) -> None:
    # AKS runs ExtendedResourceToleration and its list cannot be changed
    # (azure-aks-docs@fb060abe articles/aks/faq.yml "What Kubernetes admission controllers
    # does AKS support?"): an nvidia.com/gpu taint is tolerated on admission ...
    deployment = DEPLOYMENT.format(tolerations="")
    nodes = node(labels=AKS_LABELS, taints=GPU_TAINT)
    _, data = check([write(tmp_path / "gpu.yaml", nodes, deployment)])
    assert not rules_of(data, "K004"), rules_of(data, "K004")
    # ... sku=gpu is not: mandatory, naming the taint and not the admitted one.
    nodes = node(labels=AKS_LABELS, taints=f"{GPU_TAINT}, {SKU_TAINT}")
    code, data = check([write(tmp_path / "sku.yaml", nodes, deployment)])
    [k004] = rules_of(data, "K004")
    assert k004["enforcement"] == "mandatory" and code == 1
    assert "sku=gpu:NoSchedule" in k004["message"] and "nvidia.com/gpu=true" not in k004["message"]
    # An Equal toleration of another value misses it; Exists on the key tolerates it.
    wrong = DEPLOYMENT.format(
        tolerations="{key: sku, operator: Equal, value: cpu, effect: NoSchedule}"
    )
    _, data = check([write(tmp_path / "wrong.yaml", nodes, wrong)])
    assert [f["enforcement"] for f in rules_of(data, "K004")] == ["mandatory"]
    exists = DEPLOYMENT.format(tolerations="{key: sku, operator: Exists}")
    _, data = check([write(tmp_path / "exists.yaml", nodes, exists)])
    assert not rules_of(data, "K004")


def test_gpu_model_unknown_names_the_labels_the_pod_does_select(tmp_path: Path) -> None:
    # A vendor's own GPU label (AIBrix's Volcengine samples) or a GKE ComputeClass (llm-d)
    # pins a GPU gpustrata cannot read: the reason says what the manifest pins.
    deployment = DEPLOYMENT.format(tolerations="").replace(
        "      containers:",
        "      nodeSelector: {cloud.google.com/compute-class: l4-dws-spot}\n      containers:",
    )
    # V004 holds on every candidate GPU (session 17); V012 differs between them, so its
    # record names the labels, the split and the profile key.
    _, data = check([write(tmp_path / "d.yaml", deployment)])
    [reason] = {n["reason"] for n in data["not_evaluated"] if n["rule"] == "V012"}
    assert (
        "(it selects only cloud.google.com/compute-class=l4-dws-spot: no GPU model gpustrata reads)"
        "; judged on every catalogued NVIDIA GPU" in reason
    ), reason
    assert reason.endswith("(set gpu_products or pools in the cluster profile)"), reason
    _, data = check([write(tmp_path / "none.yaml", DEPLOYMENT.format(tolerations=""))])
    [reason] = {n["reason"] for n in data["not_evaluated"] if n["rule"] == "V012"}
    assert "matches no described GpuNodePool; judged on every catalogued NVIDIA GPU" in reason
    assert reason.endswith("(set gpu_products or pools in the cluster profile)"), reason
