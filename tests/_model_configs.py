"""Hugging Face ``config.json`` documents several test modules write (one copy each)."""

from __future__ import annotations

from typing import Any

QWEN3_5_LAYER_TYPES = (["linear_attention"] * 3 + ["full_attention"]) * 8
"""Qwen3.5-4B's ``text_config.layer_types``: three Gated DeltaNet layers, then one full."""


def qwen3_5_4b_config() -> dict[str, Any]:
    """The shape of Qwen/Qwen3.5-4B's ``config.json``: a multimodal config whose language
    model sits in ``text_config`` (``layer_types``, the ``linear_*`` keys, ``mamba_ssm_dtype``).
    A fresh dict each call, so a test may change it."""
    return {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "text_config": {
            "model_type": "qwen3_5_text",
            "full_attention_interval": 4,
            "head_dim": 256,
            "hidden_size": 2560,
            "intermediate_size": 9216,
            "num_attention_heads": 16,
            "num_key_value_heads": 4,
            "layer_types": list(QWEN3_5_LAYER_TYPES),
            "num_hidden_layers": len(QWEN3_5_LAYER_TYPES),
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_conv_kernel_dim": 4,
            "mamba_ssm_dtype": "float32",
            "vocab_size": 248320,
            "max_position_embeddings": 262144,
            "dtype": "bfloat16",
        },
        "tie_word_embeddings": True,
    }
