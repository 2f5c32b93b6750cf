"""ai-on-eks's and data-on-eks's Karpenter NodePools, rendered from their Terraform values
(tests/data/field-corpus-2-context/ai-on-eks and data-on-eks; substitutions in that folder's
SOURCES.md), read as cluster context for the corpus samples that select them (issue 20)."""

from __future__ import annotations

from conftest import FIELD_CORPUS, FIELD_CORPUS_2, FIELD_CORPUS_2_CONTEXT

from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view.pools import pools_of

AI_ON_EKS = FIELD_CORPUS_2_CONTEXT / "ai-on-eks"
CONTEXT = [str(AI_ON_EKS / "g5-gpu-karpenter.yaml"), str(AI_ON_EKS / "x86-cpu-karpenter.yaml")]


def test_rendered_nodepools_read_as_one_a10g_pool_and_one_cpu_pool() -> None:
    pools = {p.name: p for p in pools_of(load_paths(CONTEXT))}
    g5 = pools["g5-gpu-karpenter"]
    assert g5.gpu_product == "NVIDIA-A10G"  # the g5 family has only A10G
    assert g5.labels["NodeGroupType"] == "g5-gpu-karpenter"  # the chart template's label
    assert g5.taints == [{"key": "nvidia.com/gpu", "value": "Exists", "effect": "NoSchedule"}]
    assert g5.gpu_count is None and g5.max_size is None  # sizes 2xlarge..48xlarge: 1, 4 or 8
    assert pools["x86-cpu-karpenter"].gpu_product is None


def test_nim_sample_on_the_tainted_eks_pool_is_admitted_without_a_toleration() -> None:
    # Without context K004 assumes the usual taint and says nothing about admission;
    # the EC2NodeClass makes the cluster EKS, whose ExtendedResourceToleration admission
    # gives the Pod the nvidia.com/gpu toleration the NodePool's taint needs.
    sample = load_paths([str(FIELD_CORPUS_2 / "ai-on-eks-nim-service-llama3-8b.yaml")])
    assert [f.rule for f in evaluate(sample).findings] == ["K004"]
    assert [f.rule for f in evaluate(sample, context=load_paths(CONTEXT)).findings] == []


def test_ray_worker_on_the_g5_pool_is_not_evaluated_for_want_of_a_gpu_limit() -> None:
    sample = load_paths([str(FIELD_CORPUS_2 / "ai-on-eks-ray-vllm-deepseek.yaml")])
    report = evaluate(sample, context=load_paths(CONTEXT))
    [r006] = [n for n in report.not_evaluated if n.rule == "R006"]
    assert r006.reason == (
        "GPU pool g5-gpu-karpenter states no maxSize or GPU count "
        "(its spec.limits name no nvidia.com/gpu)"
    )


def test_data_on_eks_g5_pool_is_one_a10g_per_node_and_still_bounds_no_gpu_total() -> None:
    # data-on-eks's jark-stack g5 pool (v1beta1) allows only the 1-GPU sizes; R006 needs
    # the pool's GPU total, which neither its limits nor a maxSize give.
    context = load_paths(
        [
            str(FIELD_CORPUS_2_CONTEXT / "data-on-eks" / f)
            for f in ("g5-gpu-karpenter.yaml", "x86-cpu-karpenter.yaml")
        ]
    )
    [g5] = [p for p in pools_of(context) if p.gpu_product]
    assert (g5.name, g5.gpu_product, g5.gpu_count) == ("g5-gpu-karpenter", "NVIDIA-A10G", 1)
    sample = load_paths([str(FIELD_CORPUS / "awslabs-data-on-eks-ray-service-vllm.yaml")])
    [r006] = [n for n in evaluate(sample, context=context).not_evaluated if n.rule == "R006"]
    assert r006.reason == (
        "GPU pool g5-gpu-karpenter states no maxSize or GPU count "
        "(its spec.limits name no nvidia.com/gpu)"
    )
