"""Tests for the model architecture catalogue (gpustrata.catalog.architectures)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _model_configs import QWEN3_5_LAYER_TYPES, qwen3_5_4b_config

from gpustrata.catalog.architectures import (
    ModelArchitecture,
    ModelCatalog,
    ModelCatalogError,
    load_model_catalog,
    load_model_catalog_file,
)
from gpustrata.catalog.hf_config import architecture_from_hf_config

CATALOG = load_model_catalog()
ENTRIES = list(CATALOG)
IDS = [m.id for m in ENTRIES]

REQUIRED_IDS = [
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Llama-3.1-405B-Instruct",
    "meta-llama/Llama-3.2-1B-Instruct",
    "meta-llama/Llama-3.2-3B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct",
    "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic",
    "Qwen/Qwen2.5-0.5B-Instruct",
    "Qwen/Qwen2.5-1.5B-Instruct",
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-14B-Instruct",
    "Qwen/Qwen2.5-32B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct",
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-Next-80B-A3B-Instruct",
    "Qwen/Qwen3.5-4B",
    "Qwen/Qwen3-235B-A22B",
    "mistralai/Mistral-7B-Instruct-v0.3",
    "mistralai/Ministral-8B-Instruct-2410",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "google/gemma-2-9b-it",
    "google/gemma-2-27b-it",
    "google/gemma-7b-it",
    "google/gemma-3-4b-it",
    "google/gemma-3-12b-it",
    "google/gemma-3-27b-it",
    "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-R1",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "microsoft/Phi-3-mini-4k-instruct",
    "microsoft/phi-4",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    # served in the field corpora (tests/catalog/test_served_models.py)
    "meta-llama/Meta-Llama-3-8B-Instruct",
    "google/gemma-2b-it",
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
    "facebook/opt-125m",
    "facebook/opt-6.7b",
    "mistralai/Mistral-7B-Instruct-v0.2",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B",
    "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8",
    "neuralmagic/Meta-Llama-3.1-405B-Instruct-FP8",
    "deepseek-ai/deepseek-coder-6.7b-instruct",
    "Qwen/Qwen2.5-Coder-1.5B-Instruct",
    "Qwen/Qwen3-Coder-30B-A3B-Instruct",
    "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8",
]


def _get(model_id: str) -> ModelArchitecture:
    model = CATALOG.get(model_id)
    assert model is not None, model_id
    return model


# ------------------------------------------------------------------ the data file


def test_catalog_loads_and_covers_the_required_models() -> None:
    assert sorted(IDS) == sorted(REQUIRED_IDS)
    assert load_model_catalog() is CATALOG  # functools.cache


@pytest.mark.parametrize("model", ENTRIES, ids=IDS)
def test_every_entry_cites_a_config_json(model: ModelArchitecture) -> None:
    assert model.sources
    assert model.sources[0] == f"https://huggingface.co/{model.id}/blob/main/config.json"


def test_ids_and_aliases_are_unique_case_insensitively() -> None:
    names = [name.casefold() for m in ENTRIES for name in m.names()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("model", ENTRIES, ids=IDS)
def test_kv_heads_divide_attention_heads(model: ModelArchitecture) -> None:
    assert model.num_attention_heads % model.num_key_value_heads == 0


@pytest.mark.parametrize("model", ENTRIES, ids=IDS)
def test_head_dim_is_consistent_with_the_config(model: ModelArchitecture) -> None:
    if model.head_dim_derived:
        assert model.head_dim * model.num_attention_heads == model.hidden_size
    if model.attention == "mla":
        assert model.qk_nope_head_dim is not None and model.qk_rope_head_dim is not None
        assert model.head_dim == model.qk_nope_head_dim + model.qk_rope_head_dim


@pytest.mark.parametrize("model", ENTRIES, ids=IDS)
def test_attention_fields_match_the_attention_kind(model: ModelArchitecture) -> None:
    types = model.layer_attention_types()
    assert len(types) == model.num_hidden_layers
    if model.attention == "mla":
        assert model.kv_lora_rank is not None and model.qk_rope_head_dim is not None
        assert model.mla_latent_dim == model.kv_lora_rank + model.qk_rope_head_dim
    else:
        assert model.mla_latent_dim is None
    if model.attention in ("full", "mla"):
        assert model.sliding_window is None and set(types) == {"full_attention"}
    if model.attention == "sliding_window":
        assert model.sliding_window is not None and set(types) == {"sliding_attention"}
    if model.attention == "hybrid_sliding":
        assert model.sliding_window is not None
        assert set(types) == {"full_attention", "sliding_attention"}
    if model.attention == "hybrid_chunked":
        assert model.attention_chunk_size is not None and model.sliding_window is None
        assert set(types) == {"full_attention", "chunked_attention"}


@pytest.mark.parametrize("model", ENTRIES, ids=IDS)
def test_moe_fields(model: ModelArchitecture) -> None:
    if model.is_moe:
        assert model.params_active_b < model.params_total_b
    else:
        assert model.params_active_b == model.params_total_b
        assert model.moe_intermediate_size is None


def _dense_estimate_b(m: ModelArchitecture) -> float:
    embed = m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2)
    attn = m.hidden_size * m.head_dim * (2 * m.num_attention_heads + 2 * m.num_key_value_heads)
    mlp = 3 * m.hidden_size * m.intermediate_size
    if m.model_type == "opt":
        # OPT: plain fc1/fc2 MLP (two matrices, not gated) and learned positions
        # (OPTLearnedPositionalEmbedding holds max_position_embeddings + 2 rows).
        mlp = 2 * m.hidden_size * m.intermediate_size
        embed += (m.max_position_embeddings + 2) * m.hidden_size
    return (embed + m.num_hidden_layers * (attn + mlp)) / 1e9


DENSE_TEXT = [
    m
    for m in ENTRIES
    if not m.is_moe and m.attention != "mla" and "Conditional" not in m.architecture
]


@pytest.mark.parametrize("model", DENSE_TEXT, ids=[m.id for m in DENSE_TEXT])
def test_parameter_counts_agree_with_the_shape(model: ModelArchitecture) -> None:
    """A typo in a dimension or a parameter count shows up as a mismatch here."""
    assert _dense_estimate_b(model) == pytest.approx(model.params_total_b, rel=0.03)


# ------------------------------------------------------------------ spot checks


def test_llama_31_70b_spot_check() -> None:
    m = _get("meta-llama/Llama-3.1-70B-Instruct")
    assert (m.num_hidden_layers, m.num_key_value_heads, m.head_dim) == (80, 8, 128)
    assert m.attention == "full"


def test_deepseek_v3_spot_check() -> None:
    m = _get("deepseek-ai/DeepSeek-V3")
    assert m.attention == "mla"
    assert (m.kv_lora_rank, m.qk_rope_head_dim) == (512, 64)
    assert m.mla_latent_dim == 576
    assert (m.num_experts, m.num_experts_per_tok, m.quantization) == (256, 8, "fp8")


# Qwen/Qwen3-Coder-30B-A3B-Instruct's config.json as published (verbatim copy at
# ztxz16/fastllm@f8f04c33abb63f6cd4e45f9427a55949a8ebbb44:Qwen3-Coder-30B-A3B-Instruct/config.json;
# keys gpustrata does not read left out).
QWEN3_CODER_30B_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_size": 2048,
    "intermediate_size": 5472,
    "max_position_embeddings": 262144,
    "max_window_layers": 28,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "rope_scaling": None,
    "rope_theta": 10000000,
    "shared_expert_intermediate_size": 0,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_sliding_window": False,
    "vocab_size": 151936,
}


def test_qwen3_coder_entries_match_the_published_config(tmp_path: Path) -> None:
    """Session 22 (issue 30): the two Qwen3-Coder-30B-A3B entries (KServe's agentic sample
    serves the FP8 one) carry the shape config.json gives, and the FP8 copy differs only in
    its weight format."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(QWEN3_CODER_30B_CONFIG), encoding="utf-8")
    read = architecture_from_hf_config(path, model_id="Qwen/Qwen3-Coder-30B-A3B-Instruct")
    shape = (
        "num_hidden_layers",
        "hidden_size",
        "moe_intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "max_position_embeddings",
        "tie_word_embeddings",
        "num_experts",
        "num_experts_per_tok",
        "attention",
        "torch_dtype",
    )
    base = _get("Qwen/Qwen3-Coder-30B-A3B-Instruct")
    fp8 = _get("Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8")
    for key in shape:
        assert getattr(base, key) == getattr(read, key) == getattr(fp8, key), key
    assert (base.quantization, fp8.quantization) == (None, "fp8")
    # model.safetensors.index.json: 61,064,245,248 bytes in bf16 = 30.53B parameters
    assert base.params_total_b == pytest.approx(61_064_245_248 / 2e9, rel=0.01)
    # not an alias of Qwen3-30B-A3B: its window is 40,960 tokens
    assert _get("Qwen/Qwen3-30B-A3B").max_position_embeddings == 40960
    # "shared_expert_intermediate_size": 0 is "no shared expert" (it was refused as not
    # positive, so --models DIR refused this real file); a negative width still is.
    path.write_text(
        json.dumps({**QWEN3_CODER_30B_CONFIG, "shared_expert_intermediate_size": -1}),
        encoding="utf-8",
    )
    with pytest.raises(ModelCatalogError, match="shared_expert_intermediate_size: -1 is out"):
        architecture_from_hf_config(path)


def test_explicit_head_dims_differ_from_hidden_over_heads() -> None:
    for model_id, head_dim in [
        ("Qwen/Qwen3-0.6B", 128),
        ("Qwen/Qwen3-235B-A22B", 128),
        ("google/gemma-2-9b-it", 256),
        ("google/gemma-3-27b-it", 128),
        ("openai/gpt-oss-120b", 64),
    ]:
        m = _get(model_id)
        assert m.head_dim == head_dim
        assert m.head_dim * m.num_attention_heads != m.hidden_size


def test_hybrid_layouts_match_vllm() -> None:
    gemma3 = _get("google/gemma-3-27b-it").layer_attention_types()
    assert [i for i, t in enumerate(gemma3) if t == "full_attention"] == list(range(5, 62, 6))
    gemma2 = _get("google/gemma-2-9b-it").layer_attention_types()
    assert gemma2[:2] == ("sliding_attention", "full_attention")
    gpt_oss = _get("openai/gpt-oss-20b")
    assert gpt_oss.sliding_window == 128
    assert (gpt_oss.num_sliding_attention_layers, gpt_oss.num_full_attention_layers) == (12, 12)


def test_llama4_chunked_local_layout_matches_vllm() -> None:
    """vLLM's llama4.py: a layer is chunked local unless no_rope_layers marks it NoPE
    (every 4th layer: 3, 7, ..., 47), which attends globally."""
    for model_id in (
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    ):
        types = _get(model_id).layer_attention_types()
        assert [i for i, t in enumerate(types) if t == "full_attention"] == list(range(3, 48, 4))
        assert _get(model_id).attention_chunk_size == 8192


@pytest.mark.parametrize(
    ("experts", "step", "total_b"),
    [(16, 1, 109.0), (128, 2, 400.0)],  # model cards: Scout 109B, Maverick 400B
)
def test_llama4_config_json_is_chunked_and_counted(
    tmp_path: Path, experts: int, step: int, total_b: float
) -> None:
    """A Llama 4 config.json is read as chunked local attention (not 48 full layers) and
    its parameters count the shared expert and, for Maverick, the dense layers between
    the MoE ones."""
    text = {
        "model_type": "llama4_text",
        "attention_chunk_size": 8192,
        "head_dim": 128,
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "max_position_embeddings": 1048576,
        "num_attention_heads": 40,
        "num_experts_per_tok": 1,
        "num_hidden_layers": 48,
        "num_key_value_heads": 8,
        "num_local_experts": experts,
        "interleave_moe_layer_step": step,
        "vocab_size": 202048,
        "torch_dtype": "bfloat16",
    }
    cfg = {"architectures": ["Llama4ForConditionalGeneration"], "text_config": text}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    m = architecture_from_hf_config(path)
    assert m.attention == "hybrid_chunked" and m.num_full_attention_layers == 12
    assert m.params_total_b == pytest.approx(total_b, rel=0.03)
    assert m.params_active_b == pytest.approx(17.0, rel=0.1)


# ------------------------------------------------------------------ lookups


def test_get_by_alias_and_case_insensitively() -> None:
    m = _get("meta-llama/Llama-3.1-8B-Instruct")
    assert CATALOG.get("meta-llama/Meta-Llama-3.1-8B-Instruct") is m
    assert CATALOG.get("META-LLAMA/llama-3.1-8b-instruct") is m
    assert "meta-llama/Llama-3.1-8B" in CATALOG
    assert CATALOG.get("no/such-model") is None
    assert CATALOG.models["meta-llama/Llama-3.1-8B-Instruct"] is m


def _tiny(model_id: str, **overrides: Any) -> ModelArchitecture:
    fields: dict[str, Any] = {
        "id": model_id,
        "architecture": "LlamaForCausalLM",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": 100,
        "max_position_embeddings": 256,
        "params_total_b": 0.001,
        "params_active_b": 0.001,
        "attention": "full",
        "torch_dtype": "bfloat16",
        "sources": ["test"],
    }
    fields.update(overrides)
    return ModelArchitecture(**fields)


def test_extended_adds_and_replaces() -> None:
    private = _tiny("acme/private-7b", aliases=["acme/private"])
    bigger = CATALOG.extended([private])
    assert bigger.get("ACME/PRIVATE") is private
    assert len(bigger) == len(CATALOG) + 1
    assert CATALOG.get("acme/private-7b") is None  # original unchanged
    replacement = _tiny("Qwen/Qwen3-8B")
    replaced = CATALOG.extended([replacement])
    assert replaced.get("qwen/qwen3-8b") is replacement
    assert len(replaced) == len(CATALOG)


def test_extended_rejects_alias_clash() -> None:
    clash = _tiny("acme/other", aliases=["meta-llama/Llama-3.1-8B"])
    with pytest.raises(ModelCatalogError, match="already used by model"):
        CATALOG.extended([clash])


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_key_value_heads": 3}, "does not divide"),
        ({"attention": "mla"}, "needs kv_lora_rank"),
        ({"attention": "sliding_window"}, "needs sliding_window"),
        ({"attention": "hybrid_sliding", "sliding_window": 8}, "sliding_window_pattern or"),
        ({"sliding_window": 8}, "must not set sliding_window"),
        ({"params_active_b": 2.0}, "exceeds params_total_b"),
        ({"num_experts": 8}, "set both num_experts"),
        ({"head_dim_derived": True, "head_dim": 8}, "head_dim_derived"),
        ({"sources": []}, "at least 1 item"),
        ({"unknown_field": 1}, "Extra inputs are not permitted"),
    ],
)
def test_invalid_entries_are_rejected(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _tiny("acme/bad", **overrides)


def test_catalog_file_errors_name_the_file_and_entry(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n  - id: acme/broken\n    architecture: LlamaForCausalLM\n    sources: [x]\n",
        encoding="utf-8",
    )
    with pytest.raises(ModelCatalogError, match=r"models\.yaml: model #0 \('acme/broken'\)"):
        load_model_catalog_file(path)
    path.write_text("models: {}\n", encoding="utf-8")
    with pytest.raises(ModelCatalogError, match="must be a list"):
        load_model_catalog_file(path)


def test_catalog_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    entry = _tiny("acme/tiny").model_dump(exclude_defaults=True)
    path.write_text(json.dumps({"models": [entry]}), encoding="utf-8")  # JSON is YAML
    loaded = load_model_catalog_file(path)
    assert loaded.get("acme/tiny") == _tiny("acme/tiny")


# ------------------------------------------------------------------ local config.json

LLAMA_8B_CONFIG: dict[str, Any] = {
    "_name_or_path": "acme/llama-ish-8b",
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}


def _write_config(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_architecture_from_llama_shaped_config(tmp_path: Path) -> None:
    path = _write_config(tmp_path, LLAMA_8B_CONFIG)
    arch = architecture_from_hf_config(path)
    assert arch.id == "acme/llama-ish-8b"
    assert (arch.num_hidden_layers, arch.num_key_value_heads, arch.head_dim) == (32, 8, 128)
    assert arch.head_dim_derived
    assert arch.attention == "full" and arch.quantization is None
    # the estimate matches the published 8.03B for this shape
    assert arch.params_total_b == pytest.approx(8.03, rel=0.01)
    assert arch.params_active_b == arch.params_total_b
    assert arch.notes is not None and "estimated" in arch.notes and "head_dim" in arch.notes
    assert arch.sources == [path.resolve().as_uri()]
    # a directory works too, and model_id overrides _name_or_path
    assert architecture_from_hf_config(tmp_path, model_id="acme/x").id == "acme/x"


def test_missing_key_error_names_file_and_key(tmp_path: Path) -> None:
    config = dict(LLAMA_8B_CONFIG)
    del config["num_hidden_layers"]
    path = _write_config(tmp_path, config)
    with pytest.raises(ModelCatalogError) as info:
        architecture_from_hf_config(path)
    assert str(path) in str(info.value)
    assert "'num_hidden_layers'" in str(info.value)


def test_unreadable_and_invalid_json(tmp_path: Path) -> None:
    with pytest.raises(ModelCatalogError, match="cannot be read"):
        architecture_from_hf_config(tmp_path / "nope.json")
    bad = tmp_path / "config.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelCatalogError, match="not valid JSON"):
        architecture_from_hf_config(bad)


def test_from_config_mla_moe(tmp_path: Path) -> None:
    config = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "first_k_dense_replace": 3,
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "kv_lora_rank": 512,
        "max_position_embeddings": 163840,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_attention_heads": 128,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 61,
        "num_key_value_heads": 128,
        "q_lora_rank": 1536,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"},
        "torch_dtype": "bfloat16",
        "vocab_size": 129280,
    }
    arch = architecture_from_hf_config(_write_config(tmp_path, config), model_id="x/v3")
    assert arch.attention == "mla" and arch.mla_latent_dim == 576 and arch.head_dim == 192
    assert arch.quantization == "fp8"
    assert (arch.num_experts, arch.num_experts_per_tok) == (256, 8)
    # card: 671B total / 37B active (without the MTP layer)
    assert arch.params_total_b == pytest.approx(671, rel=0.02)
    assert arch.params_active_b == pytest.approx(37, rel=0.05)


GPT_OSS_20B_CONFIG: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "head_dim": 64,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072,
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 8,
    "num_local_experts": 32,
    "quantization_config": {"quant_method": "mxfp4"},
    "sliding_window": 128,
    "vocab_size": 201088,
}
"""gpt-oss-20b's config.json shape: sliding and full attention layers alternating."""


def test_from_config_hybrid_layer_types(tmp_path: Path) -> None:
    config = GPT_OSS_20B_CONFIG
    arch = architecture_from_hf_config(_write_config(tmp_path, config), model_id="x/oss")
    assert arch.attention == "hybrid_sliding" and arch.sliding_window == 128
    assert arch.layer_attention_types() == _get("openai/gpt-oss-20b").layer_attention_types()
    assert arch.quantization == "mxfp4" and arch.torch_dtype == "bfloat16"
    assert arch.params_total_b == pytest.approx(21, rel=0.05)
    assert arch.params_active_b == pytest.approx(3.6, rel=0.1)


@pytest.mark.parametrize(
    ("layer_types", "expected"),
    [
        (
            ["sliding_attention", "chunked_attention"] * 12,
            "unsupported entries 'chunked_attention'",
        ),
        (["sliding_attention", "full_attention"] * 2, "has 4 items, num_hidden_layers is 24"),
    ],
)
def test_sliding_layer_types_refusals_name_the_key(
    tmp_path: Path, layer_types: list[str], expected: str
) -> None:
    path = _write_config(tmp_path, {**GPT_OSS_20B_CONFIG, "layer_types": layer_types})
    with pytest.raises(ModelCatalogError) as info:
        architecture_from_hf_config(path)
    message = str(info.value)
    assert str(path) in message and expected in message and "linear-attention" not in message


def test_from_config_gemma3_text_config_defaults(tmp_path: Path) -> None:
    config = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "text_config": {
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "model_type": "gemma3_text",
            "num_hidden_layers": 34,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
        },
        "torch_dtype": "bfloat16",
    }
    arch = architecture_from_hf_config(_write_config(tmp_path, config), model_id="x/g3")
    ref = _get("google/gemma-3-4b-it")
    for field in (
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "vocab_size",
        "max_position_embeddings",
        "sliding_window",
        "sliding_window_pattern",
    ):
        assert getattr(arch, field) == getattr(ref, field), field
    assert arch.notes is not None and "defaults" in arch.notes


def test_from_config_qwen2_inert_sliding_window(tmp_path: Path) -> None:
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "max_position_embeddings": 32768,
        "num_attention_heads": 28,
        "num_hidden_layers": 28,
        "num_key_value_heads": 4,
        "sliding_window": 131072,
        "use_sliding_window": False,
        "vocab_size": 152064,
    }
    arch = architecture_from_hf_config(_write_config(tmp_path, config), model_id="x/q")
    assert arch.attention == "full" and arch.sliding_window is None
    assert arch.notes is not None and "torch_dtype" in arch.notes


def test_catalog_type_is_reusable() -> None:
    catalog = ModelCatalog([_tiny("a/b")])
    assert len(catalog) == 1 and repr(catalog) == "ModelCatalog(1 models)"


# Shaped like Qwen/Qwen3-Next-80B-A3B-Instruct's config.json
# (https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct/blob/main/config.json).
QWEN3_NEXT_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "intermediate_size": 5120,
    "moe_intermediate_size": 512,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "vocab_size": 151936,
    "max_position_embeddings": 262144,
    "full_attention_interval": 4,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "torch_dtype": "bfloat16",
}


def test_linear_attention_hybrid_is_read_from_full_attention_interval(tmp_path: Path) -> None:
    """Qwen3-Next (no layer_types): every 4th layer full, the others Gated DeltaNet, with
    the linear_* fields vLLM sizes the per-sequence state from; it equals the catalogue."""
    arch = architecture_from_hf_config(_write_config(tmp_path, QWEN3_NEXT_CONFIG))
    assert arch.attention == "hybrid_linear" and arch.full_attention_interval == 4
    assert arch.num_full_attention_layers == 12
    assert arch.layer_attention_types()[:4] == ("linear_attention",) * 3 + ("full_attention",)
    # conv (2 x 16 x 128 + 32 x 128) x 3 positions; recurrent 32 x 128 x 128
    assert arch.gdn_state_elements() == (8192 * 3, 32 * 128 * 128)
    assert arch.gdn_state_elements(tp=2) == (4096 * 3, 16 * 128 * 128)
    assert arch.mamba_ssm_dtype is None
    catalogued = load_model_catalog().get("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert catalogued is not None
    assert catalogued.layer_attention_types() == arch.layer_attention_types()
    assert catalogued.gdn_state_elements() == arch.gdn_state_elements()


def test_qwen3_5_multimodal_config_reads_text_config_layer_types(tmp_path: Path) -> None:
    """Qwen3.5 behind a multimodal config: the language model sits in text_config, whose
    layer_types say which layers are linear; mamba_ssm_dtype is kept (vLLM's recurrent
    state dtype for Qwen3.5). Shape of Qwen/Qwen3.5-4B's text_config."""
    config = qwen3_5_4b_config()
    arch = architecture_from_hf_config(_write_config(tmp_path, config), "Qwen/Qwen3.5-4B")
    assert arch.attention == "hybrid_linear" and arch.mamba_ssm_dtype == "float32"
    assert arch.layer_types == QWEN3_5_LAYER_TYPES and arch.num_full_attention_layers == 8
    catalogued = load_model_catalog().get("qwen/qwen3.5-4b")  # the manifest's casing
    assert catalogued is not None and catalogued.id == "Qwen/Qwen3.5-4B"
    assert catalogued.layer_attention_types() == arch.layer_attention_types()
    # the estimate (text model only) lands near the card's 4B
    assert 3.8 < arch.params_total_b < 4.4


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"linear_conv_kernel_dim": None}, "missing required key 'linear_conv_kernel_dim'"),
        ({"linear_num_value_heads": 1 << 20}, "linear_num_value_heads: 1048576 is out of range"),
        ({"linear_key_head_dim": -1}, "linear_key_head_dim: -1 is out of range"),
        ({"linear_key_head_dim": 0}, "linear_key_head_dim must be a positive integer"),
        ({"full_attention_interval": 1}, "full_attention_interval 1 must be between 2"),
        ({"layer_types": ["linear_attention", "mamba"] * 24}, "unsupported entries 'mamba'"),
        ({"layer_types": ["linear_attention"] * 3 + ["full_attention"]}, "has 4 items"),
        ({"layer_types": ["linear_attention"] * 48}, "must mix linear_attention and full"),
        ({"mamba_ssm_dtype": "int8"}, "mamba_ssm_dtype must be float32"),
    ],
)
def test_linear_attention_hybrid_refusals_name_the_key(
    tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    config = {k: v for k, v in {**QWEN3_NEXT_CONFIG, **change}.items() if v is not None}
    path = _write_config(tmp_path, config)
    with pytest.raises(ModelCatalogError) as info:
        architecture_from_hf_config(path)
    assert str(path) in str(info.value) and expected in str(info.value)


def test_nearest_ids_for_a_typo() -> None:
    catalog = load_model_catalog()
    assert (
        catalog.nearest("meta-llama/Llama-3.1-8B-Instuct")[0] == "meta-llama/Llama-3.1-8B-Instruct"
    )
    assert catalog.nearest("qwen2.5-7b-instruct")[0] == "Qwen/Qwen2.5-7B-Instruct"
    assert catalog.nearest("acme/nothing-like-it") == []


@pytest.mark.parametrize(
    ("quantization_config", "fmt", "bits"),
    [
        # nvidia/*-FP4 checkpoints (ModelOpt): sized at 8 bits before, as if FP8.
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4", 4.5),
        ({"quant_method": "modelopt", "quantization": {"quant_algo": "FP8"}}, "fp8", 8.0),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "group_0": {"weights": {"num_bits": 4, "type": "int", "group_size": 128}}
                },
            },
            "w4a16",
            4.25,
        ),
        ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}, "nvfp4", 4.5),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq", 4.25),
    ],
)
def test_quantised_checkpoints_are_sized_by_their_weight_format(
    tmp_path: Path, quantization_config: dict[str, Any], fmt: str, bits: float
) -> None:
    """The weight format in quantization_config, as vLLM 0.33 reads it (ModelOpt
    quant_algo, compressed-tensors config_groups), sets the bits per linear weight."""
    from gpustrata.vllm.weights import weights_estimate

    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16",
        "quantization_config": quantization_config,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    m = architecture_from_hf_config(path)
    assert m.quantization == fmt
    w = weights_estimate(m)
    embed = 2 * 128256 * 4096  # embeddings and lm_head stay bf16
    body = int(m.params_total_b * 1e9) - embed
    assert w.total_bytes == pytest.approx(body * bits / 8 + embed * 2, rel=0.01)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/models/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
        ("/models/qwen2.5-7b-instruct/", "Qwen/Qwen2.5-7B-Instruct"),
        ("s3://$BUCKET/models/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
        ("Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),  # a served name
        ("/models/acme-13b", None),
        ("/models/", None),
        ("", None),
    ],
)
def test_a_path_names_a_model_by_its_last_component(path: str, expected: str | None) -> None:
    """Issue 30: '/models/Qwen3-32B' is that model when exactly one entry ends in the name."""
    found = load_model_catalog().named_by_path(path)
    assert (found.id if found else None) == expected
