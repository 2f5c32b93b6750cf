"""The capacity planner: vLLM 0.33 KV-cache arithmetic, weights, budget, time, CLI.

Expected values are worked out by hand in the comments from the formulas in vLLM 0.33.0
(vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_planning.py,
vllm/v1/core/kv_cache_utils.py) and from figures vLLM itself logged.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from _stacks import ROOT, SMALL_LLAMA_CONFIG, stack_doc

from gpustrata.catalog.architectures import ModelArchitecture, load_model_catalog
from gpustrata.catalog.hardware import GpuModel, load_hardware_catalog
from gpustrata.cli.app import main
from gpustrata.core.errors import StackError
from gpustrata.planning.build import build_plan
from gpustrata.planning.plan import FALLBACK_STARTUP_BUDGET_S, STARTUP_PERIOD_S
from gpustrata.vllm.capacity import (
    GIB,
    CapacityError,
    default_max_num_batched_tokens,
    estimate_capacity,
    gdn_prefill_checkpoints,
    kv_cache_blocks,
    pp_layer_partition,
    weights_estimate,
)
from gpustrata.vllm.kv_cache import gdn_state_bytes
from gpustrata.vllm.timing import (
    PROCESS_START_S,
    fitted_engine_init,
    load_path_bandwidth,
    load_path_fixed_s,
)


def arch(model_id: str) -> ModelArchitecture:
    found = load_model_catalog().get(model_id)
    assert found is not None, model_id
    return found


def gpu(gpu_id: str) -> GpuModel:
    found = load_hardware_catalog().gpu(gpu_id)
    assert found is not None, gpu_id
    return found


LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"

# --------------------------------------------------------------------------- page size


@pytest.mark.parametrize(
    ("tp", "cache_dtype", "page"),
    [
        (1, "auto", 2 * 16 * 8 * 128 * 2),  # K+V x block x 8 KV heads x 128 x bf16 = 65536
        (2, "auto", 2 * 16 * 4 * 128 * 2),  # 8 // 2 = 4 heads per rank
        (8, "auto", 2 * 16 * 1 * 128 * 2),
        (16, "auto", 2 * 16 * 1 * 128 * 2),  # max(1, 8 // 16): the head is replicated
        (1, "fp8", 2 * 16 * 8 * 128 * 1),  # fp8 variants are one byte
        (1, "fp8_e5m2", 2 * 16 * 8 * 128 * 1),
    ],
)
def test_full_attention_page_size(tp: int, cache_dtype: str, page: int) -> None:
    kv = kv_cache_blocks(
        arch(LLAMA8), tensor_parallel_size=tp, cache_dtype=cache_dtype, available_bytes=GIB
    )
    assert kv.page_size_bytes == page
    assert kv.bytes_per_block == 32 * page  # one group of all 32 layers
    assert kv.num_blocks == GIB // (32 * page)


def test_llama8b_blocks_and_vllm_reported_tokens() -> None:
    a = arch(LLAMA8)
    # 10 GiB / (32 layers x 65536 B) = 10737418240 / 2097152 = 5120 blocks.
    kv = kv_cache_blocks(a, available_bytes=10 * GIB)
    assert (kv.num_blocks, kv.bytes_per_token) == (5120, 32 * 8 * 2 * 128 * 2)
    # max_model_len 131072 = 8192 blocks per request: 5120 / 8192 x 131072 = 81920 tokens.
    assert kv.max_model_len == a.max_position_embeddings
    assert kv.tokens == 81920 == kv.num_blocks * 16
    # vLLM reports int(num_blocks / cdiv(L, 16) x L): with L = 1000 that is
    # int(5120 / 63 x 1000) = 81269, not 5120 x 16.
    short = kv_cache_blocks(a, available_bytes=10 * GIB, max_model_len=1000)
    assert short.blocks_per_request == 63
    assert short.tokens == 81269
    assert short.max_concurrency == pytest.approx(5120 / 63)


def test_block_size_and_dtype_scale_the_page() -> None:
    a = arch(LLAMA8)
    kv32 = kv_cache_blocks(a, block_size=32, available_bytes=10 * GIB)
    assert kv32.page_size_bytes == 131072 and kv32.num_blocks == 2560
    fp32 = kv_cache_blocks(a, model_dtype="float32", available_bytes=10 * GIB)
    assert fp32.page_size_bytes == 2 * 65536
    # "auto" cache follows an explicit model dtype; an explicit cache dtype wins.
    assert kv_cache_blocks(a, model_dtype="float16", available_bytes=GIB).cache_dtype == "float16"


def test_mla_page_is_one_latent_not_split_by_tp() -> None:
    ds = arch("deepseek-ai/DeepSeek-V3")
    # kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements per token; num_kv_heads 1.
    for tp in (1, 8):
        kv = kv_cache_blocks(ds, tensor_parallel_size=tp, available_bytes=GIB)
        assert kv.page_size_bytes == 16 * 576 * 2
        assert kv.num_kv_heads_per_rank == 1
        assert kv.bytes_per_block == 61 * 16 * 576 * 2
    assert kv_cache_blocks(ds, cache_dtype="fp8", available_bytes=GIB).page_size_bytes == 16 * 576
    # fp8_ds_mla packs NoPE + RoPE + scales into 656 bytes per token.
    packed = kv_cache_blocks(ds, cache_dtype="fp8_ds_mla", block_size=64, available_bytes=GIB)
    assert packed.page_size_bytes == 64 * 656


def test_sliding_window_model_reports_window_bounded_capacity() -> None:
    phi = arch("microsoft/Phi-3-mini-4k-instruct")  # every layer slides, window 2047
    page = 32 * 16 * (96 + 96) * 2
    kv = kv_cache_blocks(phi, available_bytes=32 * page * 1000, max_num_batched_tokens=2048)
    assert kv.page_size_bytes == page and kv.num_blocks == 1000
    assert [g.kind for g in kv.groups] == ["sliding_window"]
    # One request holds min(2047 - 1 + 2 batches x 2048 in flight, 4096) = 4096 tokens,
    # cdiv(4096, 16) + 1 = 257 blocks; vLLM reports int(1000 / 257 x 4096) = 15937 tokens.
    assert kv.blocks_per_request == 257
    assert kv.tokens == 15937


def test_sliding_layers_round_to_the_kernel_block() -> None:
    phi = arch("microsoft/Phi-3-mini-4k-instruct")
    # FlashAttention's MultipleOf(16): a sliding layer cannot use block 8, it takes 16.
    kv = kv_cache_blocks(phi, block_size=8, available_bytes=GIB)
    assert kv.groups[0].block_size == 16
    assert kv.page_size_bytes == 32 * 16 * 192 * 2


def test_hybrid_gemma3_groups_share_one_block_pool() -> None:
    g = arch("google/gemma-3-27b-it")  # 62 layers: 10 full, 52 sliding (window 1024)
    page = 16 * 16 * (128 + 128) * 2
    kv = kv_cache_blocks(g, available_bytes=GIB)
    full = [x for x in kv.groups if x.kind == "full_attention"]
    sliding = [x for x in kv.groups if x.kind == "sliding_window"]
    # Group size = min(10, 52) = 10: one full group, cdiv(52, 10) = 6 sliding groups of
    # layers[i::6] (9, 9, 9, 9, 8, 8 layers).
    assert [len(x.layers) for x in full] == [10]
    assert sorted(len(x.layers) for x in sliding) == [8, 8, 9, 9, 9, 9]
    assert sorted(i for x in kv.groups for i in x.layers) == list(range(62))
    assert kv.bytes_per_block == 10 * page
    assert kv.num_blocks == GIB // (10 * page)
    # Without the hybrid manager every layer is full attention in one group.
    flat = kv_cache_blocks(g, available_bytes=GIB, hybrid_kv_cache_manager=False)
    assert len(flat.groups) == 1 and flat.bytes_per_block == 62 * page
    assert flat.num_blocks < kv.num_blocks


def test_llama4_chunked_local_groups_hold_one_chunk_plus_in_flight() -> None:
    """ChunkedLocalAttentionSpec (vLLM 0.33): a request holds cdiv(min(chunk + in-flight,
    max_model_len), block) blocks per chunked group; 36 chunked + 12 full layers make
    three chunked groups and one full group of 12."""
    scout = arch("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    kv = kv_cache_blocks(
        scout,
        tensor_parallel_size=4,
        available_bytes=20 * GIB,
        max_model_len=131072,
        max_num_batched_tokens=8192,
    )
    kinds = sorted((g.kind, len(g.layers)) for g in kv.groups)
    assert kinds == [("chunked_local", 12)] * 3 + [("full_attention", 12)]
    in_flight = 2 * 8192  # PP 1: two batches in flight
    chunked = -(-(8192 + in_flight) // 16)
    assert kv.blocks_per_request == 131072 // 16 + 3 * chunked
    # Without the hybrid manager the chunked layers are promoted to full attention.
    flat = kv_cache_blocks(
        scout,
        tensor_parallel_size=4,
        available_bytes=20 * GIB,
        max_model_len=131072,
        hybrid_kv_cache_manager=False,
    )
    assert [g.kind for g in flat.groups] == ["full_attention"]


def test_hybrid_gpt_oss_uses_equal_groups() -> None:
    # 12 sliding + 12 full: max < 1.5 x min, so group size 12, two groups.
    kv = kv_cache_blocks(arch("openai/gpt-oss-20b"), available_bytes=GIB)
    assert sorted(len(x.layers) for x in kv.groups) == [12, 12]
    assert kv.bytes_per_block == 12 * (8 * 16 * 128 * 2)


def test_qwen3_5_gated_deltanet_state_sets_the_block_size() -> None:
    """Qwen3.5-4B with vLLM 0.33's arithmetic, worked by hand from the source:

    * a Gated DeltaNet layer's state (mamba_utils.py gated_delta_net_state_shape, dtypes
      gated_delta_net_state_dtype with Qwen3.5's config mamba_ssm_dtype float32): conv
      (2 x 16 x 128 + 32 x 128) x (4 - 1) bf16 = 49,152 B, recurrent 32 x 128 x 128 fp32 =
      2,097,152 B, 2,146,304 B in all;
    * a full layer's token: 4 KV heads x (256 + 256) x 2 B = 4,096 B; the attention block
      (platforms/interface.py _align_hybrid_block_size, alignment 16) is
      16 x cdiv(2,146,304, 16 x 4,096) = 16 x 33 = 528 tokens, page 2,162,688 B, to which
      the state page is padded;
    * 8 full + 24 linear layers: groups of 8 (get_kv_cache_groups), 1 full + 3 linear,
      8 pages a block = 17,301,504 B; 10 GiB // that = 620 blocks;
    * a 262,144-token request: cdiv(262,144, 528) = 497 full blocks + 2 state blocks per
      linear group with prefix caching (MambaSpec.max_memory_usage_bytes, mode "align")
      = 503; 620 / 503 x 262,144 = 323,119 tokens.
    """
    qwen = arch("Qwen/Qwen3.5-4B")
    kv = kv_cache_blocks(qwen, available_bytes=10 * GIB, max_model_len=262144)
    assert kv.block_size == 528 and kv.page_size_bytes == 2_162_688
    assert sorted((g.kind, len(g.layers), g.pages_per_request) for g in kv.groups) == [
        ("full_attention", 8, 497),
        *[("mamba", 8, 2)] * 3,
    ]
    assert kv.bytes_per_block == 17_301_504 and kv.num_blocks == 620
    assert kv.blocks_per_request == 503 and kv.tokens == 323_119
    # Without prefix caching a request holds one state block per linear group.
    plain = kv_cache_blocks(
        qwen, available_bytes=10 * GIB, max_model_len=262144, prefix_caching=False
    )
    assert plain.blocks_per_request == 497 + 3
    # Hopper's FlashInfer GDN prefill: blocks aligned to 64 tokens (64 x cdiv(2,146,304,
    # 64 x 4,096) = 576) and one checkpoint block more per linear group.
    hopper = kv_cache_blocks(
        qwen,
        available_bytes=10 * GIB,
        max_model_len=262144,
        gdn_prefill_checkpoints=gdn_prefill_checkpoints(qwen, "9.0"),
    )
    assert hopper.block_size == 576
    assert hopper.blocks_per_request == -(-262144 // 576) + 3 * 3
    assert not gdn_prefill_checkpoints(qwen, "8.9")  # L4: Triton/FLA
    # TP 2 halves the state and the KV heads alike: the block stays 528 tokens.
    assert kv_cache_blocks(qwen, tensor_parallel_size=2, available_bytes=GIB).block_size == 528


def test_qwen3_next_state_takes_the_model_dtype() -> None:
    """No mamba_ssm_dtype in Qwen3-Next's config: the recurrent state is bf16, so one state
    is 24,576 x 2 + 524,288 x 2 = 1,097,728 B; 2 KV heads x 512 x 2 B = 2,048 B a token;
    16 x cdiv(1,097,728, 32,768) = 16 x 34 = 544-token blocks."""
    nxt = arch("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert gdn_state_bytes(nxt, 1, 2) == 1_097_728
    kv = kv_cache_blocks(nxt, available_bytes=GIB)
    assert kv.block_size == 544 and kv.page_size_bytes == 544 * 2048
    # vLLM divides the linear heads by TP too (gated_delta_net_state_shape's divide).
    odd = nxt.model_copy(update={"linear_num_key_heads": 12})
    with pytest.raises(CapacityError, match=r"does not divide .* linear_num_key_heads 12"):
        kv_cache_blocks(odd, tensor_parallel_size=8, available_bytes=GIB)


def test_pipeline_stages_follow_get_pp_indices() -> None:
    # 126 // 4 = 31, remainder 2 to the stages before the last: [31, 32, 32, 31].
    assert pp_layer_partition(126, 4) == (31, 32, 32, 31)
    assert pp_layer_partition(80, 3) == (27, 27, 26)
    big = arch("meta-llama/Llama-3.1-405B-Instruct")
    kv = kv_cache_blocks(big, tensor_parallel_size=8, pipeline_parallel_size=4, available_bytes=GIB)
    page = 16 * 1 * 256 * 2
    assert kv.layers_per_stage == (31, 32, 32, 31)
    assert kv.bytes_per_block == 32 * page  # the 32-layer stages limit every worker
    assert kv.num_blocks == GIB // (32 * page)
    # Per-stage budgets: the tightest stage wins.
    uneven = kv_cache_blocks(
        big,
        tensor_parallel_size=8,
        pipeline_parallel_size=4,
        available_bytes=[GIB, GIB, GIB // 2, GIB],
    )
    assert uneven.num_blocks == (GIB // 2) // (32 * page)


def test_one_full_length_request_must_fit() -> None:
    a = arch(LLAMA8)
    bpb = 32 * 65536
    # vLLM checks max_model_len against available minus the null block.
    ok = kv_cache_blocks(a, available_bytes=bpb * 8193)
    assert ok.fits_one_sequence and ok.vllm_error is None
    short = kv_cache_blocks(a, available_bytes=bpb * 8193 - 1)
    assert not short.fits_one_sequence
    assert short.vllm_error is not None
    assert "To serve at least one request with the model's max seq len (131072)" in (
        short.vllm_error
    )
    # 8191 usable blocks hold 8191 x 16 = 131056 tokens.
    assert short.largest_max_model_len == 8191 * 16


@pytest.mark.parametrize(
    ("tp", "setting"), [(3, "tensor_parallel_size"), (64, "tensor_parallel_size")]
)
def test_parallelism_vllm_refuses(tp: int, setting: str) -> None:
    with pytest.raises(CapacityError) as err:
        kv_cache_blocks(arch(LLAMA8), tensor_parallel_size=tp, available_bytes=GIB)
    assert err.value.setting == setting


def test_fp8_ds_mla_only_for_mla() -> None:
    with pytest.raises(CapacityError, match="only for MLA"):
        kv_cache_blocks(arch(LLAMA8), cache_dtype="fp8_ds_mla", available_bytes=GIB)


# --------------------------------------------------------------------------- weights, budget


def test_weights_match_vllm_logged_figures() -> None:
    # vLLM PR #10511 logged "model weights take 14.96GiB" for Llama-3-8B (same shape as
    # 3.1-8B) at TP 1 and 7.48 GiB at TP 2.
    a = arch(LLAMA8)
    one = weights_estimate(a).bytes_per_gpu / GIB
    two = weights_estimate(a, tensor_parallel_size=2).bytes_per_gpu / GIB
    assert one == pytest.approx(14.96, rel=0.01)
    assert two == pytest.approx(7.48, rel=0.01)


def test_mxfp4_experts_are_padded_as_the_gpus_moe_kernel_needs() -> None:
    """vLLM 0.33 pads gpt-oss's MXFP4 experts per kernel (mxfp4_round_up_hidden_size_and_
    intermediate_size): FlashInfer TRT-LLM on Blackwell rounds hidden 2880 -> 3072 and the
    intermediate shard to 128; the OpenAI Triton kernels on Hopper only the shard to 64.
    What is read from storage does not change."""
    a = arch("openai/gpt-oss-120b")
    plain = weights_estimate(a)
    b200 = weights_estimate(a, compute_capability=gpu("b200").compute_capability)
    h100 = weights_estimate(a, compute_capability=gpu("h100-sxm-80gb").compute_capability)
    assert b200.total_bytes == h100.total_bytes == plain.total_bytes
    assert 1.05 < b200.bytes_per_gpu / plain.bytes_per_gpu < 1.10
    assert "hidden 3072 x intermediate 2944" in b200.explanation
    assert h100.bytes_per_gpu == plain.bytes_per_gpu  # 2880 is a multiple of 64
    # TP 2 on Hopper: a 1440 shard rounds up to 1472.
    h100_tp2 = weights_estimate(a, tensor_parallel_size=2, compute_capability="9.0")
    assert "intermediate 1472 per TP shard" in h100_tp2.explanation


# vllm-project/vllm#23278: vLLM 0.10.1 (pip install, no FlashInfer), H100 80GB, gpt-oss-120b,
# every setting at its default: "Model loading took 65.9651 GiB", "Available KV cache memory:
# -2.14 GiB", EngineCore failed to start. vllm-project/vllm#33155: vLLM 0.14.1 on one H100,
# "Using Triton backend", "Model loading took 64.38 GiB memory", then out of memory.
GPT_OSS_H100_LOGS = {"0.10.1": 65.9651, "0.14.1": 64.38}


@pytest.mark.parametrize(("release", "logged_gib"), sorted(GPT_OSS_H100_LOGS.items()))
def test_gpt_oss_weights_follow_the_images_mxfp4_kernel(release: str, logged_gib: float) -> None:
    """0.10.1 pins torch 2.7.1, so Mxfp4MoEMethod._should_use_marlin takes Marlin on H100
    (hidden 2880 -> 3072, intermediate 2880 -> 2944); 0.14.1 takes Triton (no padding) but
    keeps the checkpoint's block scales beside the swizzled copy. The reference release
    (Triton, scales freed) holds what the checkpoint does."""
    a, h100 = arch("openai/gpt-oss-120b"), gpu("h100-sxm-80gb")
    est = weights_estimate(a, compute_capability=h100.compute_capability, vllm_release=release)
    assert est.bytes_per_gpu / GIB == pytest.approx(logged_gib, rel=0.02)
    assert f"vLLM {release} runs the experts on" in est.explanation
    reference = weights_estimate(a, compute_capability=h100.compute_capability)
    assert est.bytes_per_gpu > reference.bytes_per_gpu * 1.04
    assert est.total_bytes == reference.total_bytes  # what is read from storage


def test_gpt_oss_on_one_h100_with_vllm_0_10_1_does_not_start() -> None:
    """vllm#23278's conditions: the 0.10.1 profile run has no CUDA graph estimate, and its
    sampler warm-up (1,024 rows of 201,088 logits, top-k and top-p) takes the native sorted
    path without FlashInfer: about 6.3 GiB at its peak, which with 66 GiB of weights leaves
    no KV memory (the log: -2.14 GiB). The vllm/vllm-openai image ships FlashInfer, whose
    sampler holds half as much; the KV cache is still far short of one full-length
    sequence, so that image does not start either.

    The estimate leaves -1.35 GiB where the log says -2.14: the 28 B per native logit
    leave torch.sort's workspace out. It is not the forward: here 0.9 x 79.2 GiB + 2.14 -
    65.97 = 7.44 GiB beside the weights; vllm#27508 (0.11.0 from pip, the same native path,
    1,024 batched tokens instead of 8,192) logs 0.95 x 79.2 - 1.71 - 65.97 = 7.55 GiB with
    the same Marlin weights (0.11.0's wheel requires no triton_kernels, whose absence picks
    Marlin in get_mxfp4_backend), so the 8,192-token forward adds nothing to the sampler's peak
    (profile_run samples after the forward returned)."""
    a, h100 = arch("openai/gpt-oss-120b"), gpu("h100-sxm-80gb")
    pip = estimate_capacity(
        a, h100, gpu_memory_utilization=0.9, vllm_release="0.10.1", flashinfer_sampler=False
    )
    assert pip.weights.bytes_per_gpu / GIB == pytest.approx(65.9651, rel=0.02)
    assert pip.memory.available_kv_bytes < 0 and not pip.weights_fit and not pip.fits
    assert pip.memory.available_kv_bytes / GIB == pytest.approx(-2.14, abs=1.0)
    assert pip.memory.cuda_graphs.value == 0
    assert "native top-k/top-p path" in pip.memory.activation.explanation
    image = estimate_capacity(a, h100, gpu_memory_utilization=0.9, vllm_release="0.10.1")
    assert "flashinfer top-k/top-p path" in image.memory.activation.explanation
    assert image.memory.activation.value < pip.memory.activation.value
    assert not image.fits and image.kv.max_concurrency < 1
    # The reference release on the same GPU: Triton without padding, and it starts.
    assert estimate_capacity(a, h100, gpu_memory_utilization=0.9).fits


def test_gpt_oss_on_one_h100_with_vllm_0_14_1_runs_out_of_memory() -> None:
    """vllm#33155: 0.14.1 takes the native sampler unless VLLM_USE_FLASHINFER_SAMPLER=1.

    The log's failure is a CUDA OOM in the sampler warm-up, whose real native peak
    (torch.sort's workspace is not counted) is above the catalogue's 28 B per logit. The
    profile's peak is the larger of the forward and the warm-up (0.14.1's profile_run
    samples after the forward returned), so the estimate leaves under 1 GiB of KV, far
    from one 131,072-token request: it does not start either way."""
    a, h100 = arch("openai/gpt-oss-120b"), gpu("h100-sxm-80gb")
    est = estimate_capacity(a, h100, gpu_memory_utilization=0.9, vllm_release="0.14.1")
    assert est.weights.bytes_per_gpu / GIB == pytest.approx(64.38, rel=0.02)
    assert not est.fits
    assert est.memory.available_kv_bytes < 1 * GIB
    assert "after the dummy forward returned" in est.memory.activation.explanation


def test_gpt_oss_on_one_h100_with_vllm_0_10_2_starts_at_32k_as_gpustack_ran_it() -> None:
    """GPUStack's lab served gpt-oss-120b on one H100 with vLLM 0.10.2 and
    --max-model-len 32768 (docs/performance-lab/gpt-oss-120b/h100.md; its FlashInfer
    attention error says the image ships FlashInfer), and its 32K burst decodes about one
    request at a time. 0.10.2 pins torch 2.8.0, so Hopper runs the Triton MoE kernels
    (unpadded experts, block scales kept) where 0.10.1 padded them for Marlin, and keeps
    0.10.1's FlashInfer sampler: room for one or two 32K sequences. Sized as the tighter of
    0.10.1 and 0.14.1 (the old arithmetic) it could not start."""
    a, h100 = arch("openai/gpt-oss-120b"), gpu("h100-sxm-80gb")
    est = estimate_capacity(
        a, h100, gpu_memory_utilization=0.9, vllm_release="0.10.2", max_model_len=32768
    )
    assert "vllm_release" not in est.defaults  # read, not bracketed
    assert "vLLM 0.10.2 runs the experts on Triton" in est.weights.explanation
    assert est.weights.bytes_per_gpu / GIB == pytest.approx(64.42, rel=0.02)
    assert "flashinfer top-k/top-p path" in est.memory.activation.explanation
    assert est.fits and est.kv.vllm_error is None
    assert 1 <= est.kv.max_concurrency < 3
    # 0.10.1 on the same settings pads the experts for Marlin and cannot hold one sequence.
    old = estimate_capacity(
        a, h100, gpu_memory_utilization=0.9, vllm_release="0.10.1", max_model_len=32768
    )
    assert old.weights.bytes_per_gpu > est.weights.bytes_per_gpu and not old.fits
    # A pip install without the [flashinfer] extra takes the native sampler and does not start.
    pip = estimate_capacity(
        a,
        h100,
        gpu_memory_utilization=0.9,
        vllm_release="0.10.2",
        max_model_len=32768,
        flashinfer_sampler=False,
    )
    assert not pip.fits


def test_an_unset_gpu_memory_utilization_is_the_stated_releases_default() -> None:
    """``capacity --vllm-version 0.10.2`` sizes at 0.10.2's own default share (0.9, read in
    its config/cache.py), not the reference release's, as GPUStack's run of gpt-oss-120b
    on one H100 got it: the same KV cache as that share set explicitly, and says so."""
    from gpustrata.catalog.vllm_releases import memory_default

    a, h100 = arch("openai/gpt-oss-120b"), gpu("h100-sxm-80gb")
    share = memory_default("0.10.2")
    assert share is not None
    est = estimate_capacity(a, h100, vllm_release="0.10.2", max_model_len=32768)
    stated = estimate_capacity(
        a, h100, gpu_memory_utilization=share.value, vllm_release="0.10.2", max_model_len=32768
    )
    assert est.gpu_memory_utilization == share.value
    assert est.kv.tokens == stated.kv.tokens
    assert f"vLLM 0.10.2's default {share.value:g}" in est.defaults["gpu_memory_utilization"]
    # No release: the reference release's default, no note (unchanged).
    plain = estimate_capacity(a, h100, max_model_len=32768)
    assert "gpu_memory_utilization" not in plain.defaults


def test_unread_releases_between_read_ones_size_as_the_tighter_of_the_two() -> None:
    """An unread release between two read ones that disagree (0.12.0: FlashInfer's sampler
    by default in 0.11.0, the native one in 0.14.1) does what one of them does, so it is
    sized as the one leaving less KV memory, and says so; a tag that is no release, and no
    release, size as the reference release."""
    a, h100 = arch("openai/gpt-oss-120b"), gpu("h100-sxm-80gb")
    reference = estimate_capacity(a, h100)
    est = estimate_capacity(a, h100, vllm_release="0.12.0")
    assert est.memory.available_kv_bytes < reference.memory.available_kv_bytes
    bounds = [estimate_capacity(a, h100, vllm_release=r) for r in ("0.11.0", "0.14.1")]
    assert bounds[0].memory.available_kv_bytes != bounds[1].memory.available_kv_bytes
    assert est.memory.available_kv_bytes == min(b.memory.available_kv_bytes for b in bounds)
    assert "0.12.0 was not read; it lies between 0.11.0 and 0.14.1" in est.defaults["vllm_release"]
    for release in ("nightly", None):
        other = estimate_capacity(a, h100, vllm_release=release)
        assert other.weights.bytes_per_gpu == reference.weights.bytes_per_gpu
        assert other.memory.available_kv_bytes == reference.memory.available_kv_bytes
        assert "vllm_release" not in other.defaults
    llama = estimate_capacity(arch(LLAMA8), h100, vllm_release="0.10.1")
    assert (
        llama.weights.bytes_per_gpu == estimate_capacity(arch(LLAMA8), h100).weights.bytes_per_gpu
    )


# vllm-project/vllm#27508: torch 2.8.0 (vLLM 0.11.0's pin), one H100 80GB HBM3, gpt-oss-120b,
# `--gpu-memory-utilization 0.95 --max-num-batched-tokens 1024` at the default 131,072
# context: "Available KV cache memory: 1.71 GiB" (gpu_worker.py:298, 0.11.0's line),
# "EngineCore failed to start". Its traceback runs from a conda env's site-packages
# (/opt/conda/envs/vllm_env/lib/python3.13), a pip install, and 0.11.0's wheel lists
# flashinfer-python only under the [flashinfer] extra: the sampler warm-up took the native
# path (VLLM_USE_FLASHINFER_SAMPLER=0 is the same path). The same model on v0.11.2 "on
# single H100 with 85K context length" at 0.97 and max_num_seqs 100 (vllm-project/vllm#33155's
# first command) started.
def test_gpt_oss_on_one_h100_with_vllm_0_11_refuses_and_starts_where_the_logs_say() -> None:
    a, h100 = arch("openai/gpt-oss-120b"), gpu("h100-sxm-80gb")
    refused = estimate_capacity(
        a,
        h100,
        gpu_memory_utilization=0.95,
        max_num_batched_tokens=1024,
        vllm_release="0.11.0",
        flashinfer_sampler=False,
    )
    assert not refused.fits
    assert refused.memory.available_kv_bytes / GIB < 5  # logged 1.71 GiB
    # The vllm/vllm-openai image, which installs FlashInfer, samples on its path (half the
    # native one's bytes per logit), leaving more to the KV cache.
    image = estimate_capacity(
        a, h100, gpu_memory_utilization=0.95, max_num_batched_tokens=1024, vllm_release="0.11.0"
    )
    assert image.memory.available_kv_bytes > refused.memory.available_kv_bytes
    # The reference release's arithmetic, which is what the estimate used for 0.11.0
    # before, says the same settings start:
    assert estimate_capacity(a, h100, gpu_memory_utilization=0.95, max_num_batched_tokens=1024).fits
    started = estimate_capacity(
        a,
        h100,
        gpu_memory_utilization=0.97,
        max_model_len=85 * 1024,
        max_num_seqs=100,
        vllm_release="0.11.2",
    )
    assert started.fits


def test_quantised_weights() -> None:
    # gpt-oss ships MXFP4 experts: "the large model fits on a single H100 GPU, while the
    # small one runs within 16GB of memory" (Hugging Face gpt-oss launch post; model card).
    small = weights_estimate(arch("openai/gpt-oss-20b")).total_bytes
    large = weights_estimate(arch("openai/gpt-oss-120b")).total_bytes
    assert 12e9 < small < 16e9
    assert large < gpu("h100-sxm-80gb").memory_gib * GIB * 0.9
    bf16 = weights_estimate(arch("openai/gpt-oss-120b"), quantization=None).total_bytes
    assert bf16 == large  # the checkpoint's own quantisation applies when none is forced
    # FP8 DeepSeek-V3: ~1 byte per parameter of 671B (embeddings in bf16).
    ds = weights_estimate(arch("deepseek-ai/DeepSeek-V3"), tensor_parallel_size=8)
    assert ds.total_bytes / 1e9 == pytest.approx(673, rel=0.01)
    # On-the-fly fp8 halves a bf16 model's linear layers.
    a = arch(LLAMA8)
    assert (
        weights_estimate(a, quantization="fp8").total_bytes < 0.6 * weights_estimate(a).total_bytes
    )
    with pytest.raises(CapacityError):
        weights_estimate(a, quantization="bogus")


def test_memory_budget_terms_add_up() -> None:
    est = estimate_capacity(arch(LLAMA8), gpu("l40s"), gpu_memory_utilization=0.9)
    m = est.memory
    assert m.requested.value == math.ceil(m.total.value * 0.9)
    assert m.available_kv_bytes == (
        m.requested.value
        - m.weights.value
        - m.activation.value
        - m.cuda_graphs.value
        - m.runtime_overhead.value
    )
    eager = estimate_capacity(arch(LLAMA8), gpu("l40s"), enforce_eager=True)
    assert eager.memory.cuda_graphs.value == 0
    for term in (m.total, m.requested, m.weights, m.activation, m.cuda_graphs):
        assert term.explanation


@pytest.mark.parametrize(
    ("gpu_id", "expected"),
    [("b200", 16384), ("h100-sxm-80gb", 8192), ("a100-sxm-80gb", 2048), ("l40s", 2048)],
)
def test_default_batch_budget_tiers(gpu_id: str, expected: int) -> None:
    assert default_max_num_batched_tokens(gpu(gpu_id), 4096)[0] == expected
    # Without chunked prefill vLLM raises it to max_model_len.
    assert default_max_num_batched_tokens(gpu(gpu_id), 65536, False)[0] == 65536


def test_largest_max_model_len_is_the_fit_boundary() -> None:
    est = estimate_capacity(arch(LLAMA8), gpu("l4"), max_model_len=131072)
    largest = est.largest_max_model_len
    assert 0 < largest < 131072 and not est.fits
    assert estimate_capacity(arch(LLAMA8), gpu("l4"), max_model_len=largest).fits
    assert not estimate_capacity(arch(LLAMA8), gpu("l4"), max_model_len=largest + 16).fits


# --------------------------------------------------------------------------- time


def test_startup_is_weights_over_bandwidth_plus_init() -> None:
    a = arch("meta-llama/Llama-3.3-70B-Instruct")
    est = estimate_capacity(a, gpu("h100-sxm-80gb"), tensor_parallel_size=4, weights_source="s3")
    st = est.startup
    gbps = load_path_bandwidth("s3-streamer")[0]  # fitted on the published streamer logs
    assert st.load_gbps == gbps
    fixed = load_path_fixed_s("s3-streamer")  # fitted with it: requests and ramp-up
    assert fixed > 0
    # The streamer (not distributed) has each rank read the whole checkpoint.
    assert st.load_s == pytest.approx(est.weights.total_bytes / (gbps * 1e9) + fixed)
    init = fitted_engine_init(a.num_hidden_layers, enforce_eager=False)[0]
    assert st.init_s == init  # fitted: base + compile per layer + graph capture (dense)
    assert st.process_s == PROCESS_START_S
    assert st.budget_s == pytest.approx((PROCESS_START_S + st.load_s + init) * 1.5)
    assert (
        f"GB / {gbps:g} GB/s + {fixed:g} s (s3-streamer) + 20 s start + {init:.0f} s init"
        in st.explanation
    )
    fast = estimate_capacity(a, gpu("h100-sxm-80gb"), tensor_parallel_size=4, load_gbps=2.0)
    assert fast.startup.load_s == pytest.approx(est.weights.total_bytes / 2e9)
    moe = estimate_capacity(arch("Qwen/Qwen3-30B-A3B"), gpu("h100-sxm-80gb"), enforce_eager=True)
    eager = fitted_engine_init(48, enforce_eager=True)[0]
    assert moe.startup.init_s == fitted_engine_init(48, enforce_eager=True, is_moe=True)[0]
    assert moe.startup.init_s > eager  # no compile, MoE warm-up


def test_longest_step_scales_with_tp_and_batch() -> None:
    a = arch("meta-llama/Llama-3.3-70B-Instruct")
    h100 = gpu("h100-sxm-80gb")
    four = estimate_capacity(a, h100, tensor_parallel_size=4, max_model_len=32768)
    eight = estimate_capacity(a, h100, tensor_parallel_size=8, max_model_len=32768)
    assert four.longest_step.tokens == 8192  # chunked prefill: max_num_batched_tokens
    assert eight.longest_step.seconds == pytest.approx(four.longest_step.seconds / 2)
    whole = estimate_capacity(
        a, h100, tensor_parallel_size=4, max_model_len=32768, enable_chunked_prefill=False
    )
    assert whole.longest_step.tokens == 32768
    assert whole.longest_step.seconds > 3 * four.longest_step.seconds


# --------------------------------------------------------------------------- planner


def test_planner_sizes_the_startup_probe_from_the_estimate() -> None:
    plan = build_plan(stack_doc("prod"))
    mp = plan.models["llama-70b"]
    assert mp.capacity is not None and mp.capacity_unavailable is None
    cap = mp.capacity
    assert (cap.tensor_parallel_size, cap.gpu_id, cap.max_model_len) == (4, "h100-sxm-80gb", 32768)
    assert cap.startup.load_gbps == load_path_bandwidth("s3-streamer")[0]  # weights.source s3
    assert mp.probes.startup_failure_threshold == math.ceil(cap.startup.budget_s / STARTUP_PERIOD_S)
    derived = {d.key: d for d in plan.derived}
    probe = derived["models.llama-70b.startupProbe.failureThreshold"]
    assert probe.source == "formula"
    assert (
        f"141.1 GB / {cap.startup.load_gbps:g} GB/s + {load_path_fixed_s('s3-streamer'):g} s"
        " (s3-streamer) + 20 s start + "
        f"{cap.startup.init_s:.0f} s init"
        in probe.why
        and "x1.5" in probe.why
    )
    for key in (
        "weightsPerGpu",
        "kvCacheTokens",
        "fullLengthSequences",
        "startupSeconds",
        "longestStepSeconds",
        "largestMaxModelLen",
    ):
        assert derived[f"models.llama-70b.capacity.{key}"].why


def test_planner_refuses_a_model_id_close_to_a_catalogue_id() -> None:
    """A typo used to plan clean with the 1800 s fallback; it is exit 2 with the nearest ids."""
    doc = stack_doc("prod")
    doc["models"][1]["model"] = "meta-llama/Llama-3.1-8B-Instuct"
    with pytest.raises(
        StackError, match=re.escape("nearest catalogue ids: 'meta-llama/Llama-3.1-8B-Instruct'")
    ):
        build_plan(doc)


def test_planner_falls_back_for_unknown_models() -> None:
    doc = stack_doc("prod")
    doc["models"][1]["model"] = "acme/private-model"
    plan = build_plan(doc)
    mp = plan.models["llama-8b"]
    assert mp.capacity is None and mp.capacity_unavailable is not None
    assert mp.probes.startup_failure_threshold == FALLBACK_STARTUP_BUDGET_S // STARTUP_PERIOD_S
    probe = {d.key: d for d in plan.derived}["models.llama-8b.startupProbe.failureThreshold"]
    assert probe.source == "default" and "acme/private-model" in probe.why


def test_planner_reads_weights_load_gbps() -> None:
    doc = stack_doc("prod")
    doc["models"][1]["weights"]["load_gbps"] = 3.0
    doc["models"][1]["startup_init_s"] = 10
    st = build_plan(doc).models["llama-8b"].capacity
    assert st is not None
    assert (st.startup.load_gbps, st.startup.init_s) == (3.0, 10)


# --------------------------------------------------------------------------- CLI

FIGURES = (
    "weights_bytes_per_gpu",
    "kv_bytes_per_token_per_gpu",
    "kv_cache_tokens",
    "max_concurrent_full_length_sequences",
    "largest_max_model_len",
    "startup_seconds",
    "longest_step_seconds",
)


def test_capacity_json_for_the_prod_70b(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["capacity", "--stack", "prod", "--model-name", "llama-70b", "--project-dir", str(ROOT)]
    assert main([*args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for key in FIGURES:
        assert set(doc[key]) == {"value", "explanation"} and doc[key]["explanation"], key
    plan = build_plan(stack_doc("prod")).models["llama-70b"].capacity
    assert plan is not None
    assert doc["kv_cache_tokens"]["value"] == plan.kv.tokens
    assert doc["weights_bytes_per_gpu"]["value"] == plan.weights.bytes_per_gpu
    assert doc["settings"]["tensor_parallel_size"] == 4 and doc["fits"] is True
    rows = doc["what_if"]
    assert any(r["current"] for r in rows)
    assert all(r["fits"] for r in rows)
    assert {r["tensor_parallel_size"] for r in rows} <= {1, 2, 4, 8}


def test_capacity_flags_override_the_stack(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["capacity", "--stack", "prod", "--model-name", "llama-70b", "--project-dir", str(ROOT)]
    main([*base, "--format", "json"])
    four = json.loads(capsys.readouterr().out)
    main([*base, "--tp", "8", "--kv-cache-dtype", "fp8", "--format", "json"])
    eight = json.loads(capsys.readouterr().out)
    assert eight["settings"]["tensor_parallel_size"] == 8
    assert (
        eight["kv_cache_page_size_bytes"]["value"] == four["kv_cache_page_size_bytes"]["value"] // 4
    )


def test_capacity_text_ad_hoc(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["capacity", "--model", LLAMA8, "--gpu", "NVIDIA-L40S", "--max-model-len", "8192"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Capacity of meta-llama/Llama-3.1-8B-Instruct on 1 x l40s" in out
    assert "KV cache tokens" in out and "<- page = 8 KV heads per rank" in out
    assert "What if" in out


def test_capacity_from_a_config_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = SMALL_LLAMA_CONFIG
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    assert main(["capacity", "--model", str(path), "--gpu", "l4", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # 8 KV heads x 16 x (64 + 64) x 2 B; head_dim 2048 / 32 = 64.
    assert doc["kv_cache_page_size_bytes"]["value"] == 8 * 16 * 128 * 2


def test_capacity_that_does_not_fit_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["capacity", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "l40s"])
    out = capsys.readouterr().out
    assert code == 1 and "vLLM refuses to start" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--model", "llama-70b", "--gpu", "l4"], "--model 'llama-70b'"),
        (["--model", LLAMA8, "--gpu", "h100"], "--gpu 'h100' is not a catalogue GPU id"),
        (["--model", LLAMA8, "--gpu", "l4", "--tp", "3"], "--tp 3: tensor_parallel_size 3"),
        (["--model", LLAMA8, "--gpu", "l4", "--tp", "two"], "--tp 'two'"),
        (["--model", LLAMA8, "--gpu", "l4", "--block-size", "7"], "--block-size '7'"),
        (["--model", LLAMA8], "--gpu is required"),
        (["--stack", "prod"], "--model-name is required"),
        (["--stack", "prod", "--model-name", "llama70b"], "did you mean llama-70b"),
    ],
)
def test_capacity_bad_input_is_one_line_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["capacity", *argv, "--project-dir", str(ROOT)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert needle in err


@pytest.mark.parametrize("cache", ["auto", "fp8"])
def test_float16_is_refused_for_gemma_like_vllm(cache: str) -> None:
    """vLLM 0.33 refuses float16 for gemma2/gemma3/glm4 (_FLOAT16_NOT_SUPPORTED_MODELS)."""
    arch = load_model_catalog().get("google/gemma-2-9b-it")
    assert arch is not None
    with pytest.raises(CapacityError, match="refuses float16 for model type 'gemma2'"):
        kv_cache_blocks(arch, model_dtype="float16", cache_dtype=cache, available_bytes=10**10)
    assert kv_cache_blocks(arch, model_dtype="bfloat16", cache_dtype=cache, available_bytes=10**10)


def test_refusal_advises_gpu_memory_utilization_only_where_it_helps() -> None:
    """vLLM's 'Try increasing gpu_memory_utilization' is wrong advice when the weights and
    the profile run's memory exceed the whole GPU (issue 31): no utilization helps there."""
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.vllm.capacity import estimate_capacity

    models, hw = load_model_catalog(), load_hardware_catalog()
    big, small = (
        models.get("meta-llama/Llama-3.3-70B-Instruct"),
        models.get("meta-llama/Llama-3.1-8B-Instruct"),
    )
    l40s, l4 = hw.gpu("l40s"), hw.gpu("l4")
    assert big and small and l40s and l4
    too_big = estimate_capacity(big, l40s, max_model_len=4096)
    assert too_big.refusal is not None and "whatever gpu_memory_utilization is" in too_big.refusal
    assert "raise tensor_parallel_size" in too_big.refusal
    tight = estimate_capacity(small, l4, max_model_len=4096, gpu_memory_utilization=0.5)
    assert tight.refusal is not None
    u = tight.utilization_to_start
    assert u is not None and f"gpu_memory_utilization {u:.2f} would start it" in tight.refusal
    # ... and that utilization starts it, a hundredth less does not (it is the threshold).
    assert estimate_capacity(small, l4, max_model_len=4096, gpu_memory_utilization=u).fits
    below = round(u - 0.01, 2)
    assert not estimate_capacity(small, l4, max_model_len=4096, gpu_memory_utilization=below).fits
    assert estimate_capacity(small, l4, max_model_len=4096).refusal is None


def test_profile_peak_is_the_larger_of_forward_and_sampler_where_read() -> None:
    """vLLM 0.11.0's profile_run samples only once _dummy_run has returned (the forward's
    activations freed, its hidden states kept) and memory_profiling reads torch's
    allocated peak: Qwen3-32B on one H100 (8,192 tokens, 1,024 sequences of 151,936
    logits on FlashInfer's 14 B path) peaks at the sampler beside the hidden states, not at
    the sum. The reference release keeps the calibrated sum."""
    a, h100 = arch("Qwen/Qwen3-32B"), gpu("h100-sxm-80gb")
    est = estimate_capacity(a, h100, max_model_len=40960, vllm_release="0.11.0")
    sampler = 1024 * a.vocab_size * 14
    kept = 8192 * a.hidden_size * 2
    assert est.memory.activation.value == kept + sampler
    ref = estimate_capacity(a, h100, max_model_len=40960)
    assert "after the dummy forward returned" not in ref.memory.activation.explanation
    # 28,992 KV tokens: still short of the 40,960 one request at the default length needs.
    assert 28_000 < est.kv.tokens < 30_000 and not est.fits


def test_gated_deltanet_layers_attend_no_context() -> None:
    """Only Qwen3.5-4B's 8 full layers grow with the context; each of the 24 linear layers
    costs 6 x 32 value heads x 128 x 128 FLOPs a token, whatever the context."""
    from gpustrata.vllm.timing import forward_flops

    qwen = arch("Qwen/Qwen3.5-4B")
    short, long = forward_flops(qwen, 100, 1000, 1), forward_flops(qwen, 100, 2000, 1)
    assert long - short == 8 * 4 * 16 * 256 * 100 * 1000
    wider = qwen.model_copy(update={"linear_num_value_heads": 64})
    extra = forward_flops(wider, 100, 1000, 1) - short
    assert extra == 24 * 6 * (64 - 32) * 128 * 128 * 100
