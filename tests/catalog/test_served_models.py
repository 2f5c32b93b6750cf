"""Models that the field corpora serve: each entry's KV cache per token, by hand.

Every row recomputes vLLM's full-attention KV bytes per token from the config.json
values the entry cites (layers x K and V x num_key_value_heads x head_dim x dtype
bytes), so a typo in any of them, or a wrong dtype, shows up here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.vllm.kv_cache import kv_cache_blocks
from gpustrata.vllm.weights import weights_estimate

GIB = 1024**3
CORPORA = Path(__file__).resolve().parents[1] / "data"
CATALOG = load_model_catalog()


@pytest.mark.parametrize(
    ("model_id", "bytes_per_token"),
    [
        # config.json: num_hidden_layers 32, num_key_value_heads 8, no head_dim
        # (hidden_size 4096 / num_attention_heads 32 = 128), torch_dtype bfloat16.
        ("meta-llama/Meta-Llama-3-8B-Instruct", 32 * 2 * 8 * 128 * 2),
        # config.json: num_hidden_layers 18, num_key_value_heads 1, head_dim 256, bfloat16.
        ("google/gemma-2b-it", 18 * 2 * 1 * 256 * 2),
        # config.json: num_hidden_layers 22, num_key_value_heads 4, no head_dim
        # (2048 / 32 = 64), torch_dtype bfloat16.
        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 22 * 2 * 4 * 64 * 2),
        # config.json: num_hidden_layers 12, num_attention_heads 12 (no KV heads: MHA),
        # hidden_size 768 (head 64), torch_dtype float16.
        ("facebook/opt-125m", 12 * 2 * 12 * 64 * 2),
        # config.json: num_hidden_layers 32, num_attention_heads 32 (MHA), hidden_size
        # 4096 (head 128), torch_dtype float16.
        ("facebook/opt-6.7b", 32 * 2 * 32 * 128 * 2),
        # config.json: num_hidden_layers 32, num_key_value_heads 8, no head_dim
        # (4096 / 32 = 128), sliding_window null, torch_dtype bfloat16.
        ("mistralai/Mistral-7B-Instruct-v0.2", 32 * 2 * 8 * 128 * 2),
        # config.json: num_hidden_layers 28, num_key_value_heads 2, no head_dim
        # (1536 / 12 = 128), use_sliding_window false, torch_dtype bfloat16.
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", 28 * 2 * 2 * 128 * 2),
        # model card: 28 layers, 2 KV heads; head 1536 / 12 = 128; bfloat16.
        ("Qwen/Qwen2.5-Coder-1.5B-Instruct", 28 * 2 * 2 * 128 * 2),
        # the base model's shape: 80 layers, 8 KV heads, head 8192 / 64 = 128; the KV cache
        # stays bfloat16 (FP8 weights, no kv_cache_dtype in the checkpoint's scheme).
        ("neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8", 80 * 2 * 8 * 128 * 2),
    ],
)
def test_kv_bytes_per_token_match_the_config(model_id: str, bytes_per_token: int) -> None:
    arch = CATALOG.get(model_id)
    assert arch is not None, model_id
    kv = kv_cache_blocks(arch, available_bytes=GIB)
    assert kv.bytes_per_token == bytes_per_token


def test_opt_is_served_in_float16_with_tied_embeddings() -> None:
    """OPT configs say torch_dtype float16 and leave tie_word_embeddings to the
    transformers default (true): weights are 2 bytes each and lm_head adds nothing."""
    arch = CATALOG.get("facebook/opt-125m")
    assert arch is not None
    w = weights_estimate(arch)
    # the 0.125B parameters less the 50272 x 768 embedding at 2 bytes, plus the
    # embedding padded as vLLM pads the vocabulary (to 50304, a multiple of 64) at 2
    # bytes, and no separate lm_head.
    body = int(0.125e9) - 50272 * 768
    assert w.total_bytes == body * 2 + 50304 * 768 * 2


@pytest.mark.parametrize(
    ("model_id", "where"),
    [
        (
            "meta-llama/Meta-Llama-3-8B-Instruct",
            "field-corpus-1/ray-project-kuberay-ray-service-vllm.yaml",
        ),
        ("google/gemma-2b-it", "field-corpus-3/gke-vllm-gemma-2b-it-h100.yaml"),
        (
            "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
            "field-corpus-3/semantic-router-dynamo-graph-deployment.yaml",
        ),
        ("facebook/opt-125m", "field-corpus-3/llmaz-speculative-decoding-vllm.yaml"),
        ("facebook/opt-6.7b", "field-corpus-3/llmaz-speculative-decoding-vllm.yaml"),
        (
            "mistralai/Mistral-7B-Instruct-v0.2",
            "field-corpus-1/awslabs-data-on-eks-ray-service-vllm.yaml",
        ),
        ("Qwen/Qwen2.5-Coder-1.5B-Instruct", "field-corpus-3/aibrix-adapter-base.yaml"),
        (
            "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
            "field-corpus-3/kubeai-llama-3.1-70b-fp8-h100.yaml",
        ),
    ],
)
def test_corpus_model_ids_resolve(model_id: str, where: str) -> None:
    """The id as the manifest spells it names a catalogue entry (lookups ignore case)."""
    text = (CORPORA / where).read_text(encoding="utf-8")
    assert model_id in text
    assert CATALOG.get(model_id) is not None
    assert CATALOG.get(model_id.lower()) is CATALOG.get(model_id)
