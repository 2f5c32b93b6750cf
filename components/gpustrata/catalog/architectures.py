"""Model architecture catalogue: the shapes vLLM needs to size weights and the KV cache.

The data lives in ``data/models.yaml`` next to this module; every entry was checked
against the model's Hugging Face ``config.json`` and cites where each figure comes
from. Private models are described from a local ``config.json`` with
:func:`~gpustrata.catalog.hf_config.architecture_from_hf_config` and added with
:meth:`ModelCatalog.extended`.

What the KV-cache planner reads (vLLM V1 semantics):

* full or sliding attention: per layer and token, ``num_key_value_heads`` heads of
  ``head_dim`` for K and the same for V (``head_size_k == head_size_v == head_dim``);
* sliding-window layers keep at most ``sliding_window`` tokens; which layers slide is
  :meth:`ModelArchitecture.layer_attention_types` (``hybrid_sliding`` models mix both);
* MLA (DeepSeek V2/V3/R1): one compressed latent of ``kv_lora_rank + qk_rope_head_dim``
  elements per token and layer (:attr:`ModelArchitecture.mla_latent_dim`), shared by
  all heads;
* Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5; ``hybrid_linear``): the
  ``linear_attention`` layers keep one fixed-size state per sequence (a causal-conv
  state and a recurrent state, :meth:`ModelArchitecture.gdn_state_elements`) instead of
  a per-token KV cache; only the ``full_attention`` layers grow with the context.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpustrata.catalog.packaged import CatalogError, catalog_yaml, packaged_document

__all__ = [
    "AttentionKind",
    "LayerAttentionType",
    "ModelArchitecture",
    "ModelCatalog",
    "ModelCatalogError",
    "load_model_catalog",
    "load_model_catalog_file",
]

AttentionKind = Literal[
    "full", "sliding_window", "hybrid_sliding", "hybrid_chunked", "hybrid_linear", "mla"
]
"""How the attention layers bound the KV cache (see :class:`ModelArchitecture`)."""

LayerAttentionType = Literal[
    "full_attention", "sliding_attention", "chunked_attention", "linear_attention"
]
"""Per-layer attention type, with the names Hugging Face uses in ``layer_types``."""

_MODELS_FILE = "data/models.yaml"


class ModelCatalogError(CatalogError):
    """A model catalogue file, an entry, or a local ``config.json`` is invalid.

    A :class:`CatalogError`, so one handler catches every catalogue's data errors.
    """


class ModelArchitecture(BaseModel):
    """The architecture of one model, as its Hugging Face ``config.json`` declares it.

    Field names follow ``config.json`` where one exists. For multimodal models
    (Gemma 3) the figures are those of the language model (``text_config``), with
    transformers' defaults filled in where the file leaves a key out.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(
        min_length=1,
        description='Hugging Face repo id, e.g. "meta-llama/Llama-3.1-70B-Instruct".',
    )
    aliases: list[str] = Field(
        default_factory=list,
        description=(
            "Other Hugging Face repo ids with the same config.json shape and weight format "
            "(base/instruct twins, renamed repos). Quantised repos are separate entries "
            "because their weight bytes differ."
        ),
    )
    architecture: str = Field(
        min_length=1,
        description='config.json "architectures"[0], e.g. "LlamaForCausalLM".',
    )
    model_type: str | None = Field(
        default=None,
        description='config.json "model_type" (of text_config for multimodal models).',
    )
    num_hidden_layers: int = Field(gt=0, description="Decoder layers (config.json).")
    hidden_size: int = Field(gt=0, description="Residual stream width (config.json).")
    intermediate_size: int = Field(
        gt=0,
        description=(
            "Dense MLP width (config.json). For MoE models this is the dense-layer width; "
            "the per-expert width is moe_intermediate_size."
        ),
    )
    moe_intermediate_size: int | None = Field(
        default=None,
        gt=0,
        description=(
            "Per-expert MLP width (config.json moe_intermediate_size; Mixtral and gpt-oss "
            "experts use intermediate_size and leave this unset)."
        ),
    )
    num_attention_heads: int = Field(gt=0, description="Query heads (config.json).")
    num_key_value_heads: int = Field(
        gt=0,
        description=(
            "Key/value heads (config.json; equal to num_attention_heads when the file has "
            "none). For MLA models config.json repeats num_attention_heads, but the cache "
            "stores one latent per token: use mla_latent_dim."
        ),
    )
    head_dim: int = Field(
        gt=0,
        description=(
            "Per-head dimension of K and V. The explicit config.json head_dim where the "
            "file has one (Qwen3, Gemma, gpt-oss: NOT hidden_size / num_attention_heads); "
            "otherwise hidden_size // num_attention_heads and head_dim_derived is true. "
            "For MLA: qk_nope_head_dim + qk_rope_head_dim (the query/key head width)."
        ),
    )
    head_dim_derived: bool = Field(
        default=False,
        description=(
            "True when config.json has no head_dim and head_dim was computed as "
            "hidden_size // num_attention_heads (what transformers and vLLM do)."
        ),
    )
    vocab_size: int = Field(gt=0, description="Vocabulary size (config.json).")
    max_position_embeddings: int = Field(
        gt=0,
        description=(
            "config.json max_position_embeddings: the default max_model_len vLLM derives "
            "(before rope_scaling adjustments it may apply)."
        ),
    )
    tie_word_embeddings: bool = Field(
        default=False,
        description="The output projection shares the input embedding (config.json).",
    )
    params_total_b: float = Field(
        gt=0,
        description=(
            "Total parameters in billions: the model card figure where the card states "
            "one (cited in sources), else the repo's safetensors count; estimated from the "
            "config only for entries built by architecture_from_hf_config (see notes)."
        ),
    )
    params_active_b: float = Field(
        gt=0,
        description=(
            "Parameters active per token in billions (== total for dense models). For MoE "
            "models the card figure; cards (OpenAI, DeepSeek) leave out the input-embedding "
            "lookup, and so does the estimate of architecture_from_hf_config."
        ),
    )
    attention: AttentionKind = Field(
        description=(
            '"full": every layer attends to the whole context; "sliding_window": every '
            'layer keeps at most sliding_window tokens; "hybrid_sliding": some layers '
            "slide (see sliding_window_pattern / layer_types), the rest are full; "
            '"hybrid_chunked": chunked local attention (Llama 4): most layers attend only '
            "within their attention_chunk_size block of tokens, every full_attention_interval-th "
            'layer is full; "hybrid_linear": Gated DeltaNet linear attention (Qwen3-Next, '
            "Qwen3.5): every full_attention_interval-th layer (or the layer_types entries "
            '"full_attention") is full, the others keep a fixed recurrent state per sequence; '
            '"mla": multi-head latent attention (DeepSeek), one latent per token.'
        ),
    )
    sliding_window: int | None = Field(
        default=None,
        gt=0,
        description=(
            "Tokens a sliding-window layer attends to (config.json sliding_window). Unset "
            'for "full" and "mla" models, including Qwen2 configs whose sliding_window is '
            "inert because use_sliding_window is false."
        ),
    )
    sliding_window_pattern: int | None = Field(
        default=None,
        ge=2,
        description=(
            "For hybrid_sliding: every N-th layer (1-based) is full attention, the others "
            "slide, i.e. layer i (0-based) is full iff (i + 1) % N == 0. Gemma 3: 6 "
            "(config.json sliding_window_pattern); Gemma 2 and gpt-oss: 2 (sliding "
            "first, alternating). Leave unset when layer_types is given."
        ),
    )
    attention_chunk_size: int | None = Field(
        default=None,
        gt=0,
        description=(
            "For hybrid_chunked: the token block a chunked local attention layer attends "
            "within (config.json attention_chunk_size; Llama 4: 8192)."
        ),
    )
    full_attention_interval: int | None = Field(
        default=None,
        ge=2,
        description=(
            "For hybrid_chunked / hybrid_linear: layer i (0-based) is full (global) "
            "attention iff (i + 1) % N == 0, the others are chunked (Llama 4's "
            "no_rope_layer_interval 4: its NoPE layers are the global ones) or linear "
            "(config.json full_attention_interval of Qwen3-Next / Qwen3.5: 4)."
        ),
    )
    layer_types: list[LayerAttentionType] | None = Field(
        default=None,
        description=(
            "Explicit per-layer attention types (config.json layer_types), for hybrid "
            "layouts that no sliding_window_pattern describes. Must have "
            "num_hidden_layers items."
        ),
    )
    kv_lora_rank: int | None = Field(
        default=None, gt=0, description="MLA compressed KV latent rank (config.json)."
    )
    qk_rope_head_dim: int | None = Field(
        default=None,
        gt=0,
        description="MLA decoupled RoPE key dimension, cached with the latent (config.json).",
    )
    qk_nope_head_dim: int | None = Field(
        default=None, gt=0, description="MLA per-head non-RoPE query/key dim (config.json)."
    )
    v_head_dim: int | None = Field(
        default=None, gt=0, description="MLA per-head value dim (config.json)."
    )
    q_lora_rank: int | None = Field(
        default=None, gt=0, description="MLA query compression rank (config.json)."
    )
    linear_num_key_heads: int | None = Field(
        default=None, gt=0, description="hybrid_linear: Gated DeltaNet key heads (config.json)."
    )
    linear_num_value_heads: int | None = Field(
        default=None, gt=0, description="hybrid_linear: Gated DeltaNet value heads (config.json)."
    )
    linear_key_head_dim: int | None = Field(
        default=None, gt=0, description="hybrid_linear: Gated DeltaNet key head dim (config.json)."
    )
    linear_value_head_dim: int | None = Field(
        default=None,
        gt=0,
        description="hybrid_linear: Gated DeltaNet value head dim (config.json).",
    )
    linear_conv_kernel_dim: int | None = Field(
        default=None,
        gt=0,
        description="hybrid_linear: causal conv1d kernel width (config.json; its state keeps "
        "kernel - 1 positions).",
    )
    mamba_ssm_dtype: str | None = Field(
        default=None,
        min_length=1,
        description=(
            'hybrid_linear: config.json mamba_ssm_dtype (Qwen3.5: "float32"), the recurrent '
            "state's dtype vLLM uses for Qwen3.5 architectures when --mamba-ssm-cache-dtype "
            "is auto; unset: the recurrent state takes the model dtype."
        ),
    )
    torch_dtype: str = Field(
        min_length=1,
        description=(
            'Default dtype of config.json ("torch_dtype", or "dtype" in newer files), '
            'e.g. "bfloat16": the dtype vLLM picks with --dtype auto.'
        ),
    )
    quantization: str | None = Field(
        default=None,
        description=(
            "Weight quantisation shipped in the repo (config.json quantization_config."
            'quant_method), e.g. "fp8", "mxfp4", "awq", "gptq"; unset for plain weights.'
        ),
    )
    weights_bytes: int | None = Field(
        default=None,
        gt=0,
        description="Total size of the repo's safetensors files, where a source states it.",
    )
    num_experts: int | None = Field(
        default=None,
        gt=0,
        description=(
            "Routed experts per MoE layer (config.json num_experts / num_local_experts / "
            "n_routed_experts)."
        ),
    )
    num_experts_per_tok: int | None = Field(
        default=None,
        gt=0,
        description="Routed experts active per token (config.json num_experts_per_tok).",
    )
    sources: list[str] = Field(
        min_length=1,
        description="URLs or repo/path citations for the figures above (at least one).",
    )
    notes: str | None = Field(
        default=None,
        description="Caveats: derived values, config quirks, how vLLM treats the model.",
    )

    @model_validator(mode="after")
    def _check_consistency(self) -> ModelArchitecture:
        """Reject combinations that cannot describe a real model, quoting the values."""
        where = f"model {self.id!r}"
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"{where}: num_key_value_heads {self.num_key_value_heads} does not divide "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.head_dim_derived and self.head_dim * self.num_attention_heads != self.hidden_size:
            raise ValueError(
                f"{where}: head_dim_derived is true but head_dim {self.head_dim} x "
                f"num_attention_heads {self.num_attention_heads} != hidden_size "
                f"{self.hidden_size}"
            )
        if self.params_active_b > self.params_total_b:
            raise ValueError(
                f"{where}: params_active_b {self.params_active_b} exceeds params_total_b "
                f"{self.params_total_b}"
            )
        if (self.num_experts is None) != (self.num_experts_per_tok is None):
            raise ValueError(f"{where}: set both num_experts and num_experts_per_tok, or neither")
        if (
            self.num_experts is not None
            and self.num_experts_per_tok is not None
            and self.num_experts_per_tok > self.num_experts
        ):
            raise ValueError(
                f"{where}: num_experts_per_tok {self.num_experts_per_tok} exceeds "
                f"num_experts {self.num_experts}"
            )
        if self.id in self.aliases:
            raise ValueError(f"{where}: aliases repeat the id")
        self._check_attention(where)
        return self

    def _check_attention(self, where: str) -> None:
        """Check that the attention fields fit the declared attention kind."""
        kind = self.attention
        if kind == "mla":
            if self.kv_lora_rank is None or self.qk_rope_head_dim is None:
                raise ValueError(
                    f'{where}: attention "mla" needs kv_lora_rank and qk_rope_head_dim'
                )
            if (
                self.qk_nope_head_dim is not None
                and self.head_dim != self.qk_nope_head_dim + self.qk_rope_head_dim
            ):
                raise ValueError(
                    f"{where}: MLA head_dim {self.head_dim} != qk_nope_head_dim "
                    f"{self.qk_nope_head_dim} + qk_rope_head_dim {self.qk_rope_head_dim}"
                )
        elif self.kv_lora_rank is not None:
            raise ValueError(f'{where}: kv_lora_rank is set but attention is {kind!r}, not "mla"')
        linear = (
            self.linear_num_key_heads,
            self.linear_num_value_heads,
            self.linear_key_head_dim,
            self.linear_value_head_dim,
            self.linear_conv_kernel_dim,
        )
        if kind == "hybrid_linear":
            self._check_linear(where, linear)
            return
        if any(v is not None for v in linear) or self.mamba_ssm_dtype is not None:
            raise ValueError(f'{where}: linear_* / mamba_ssm_dtype need attention "hybrid_linear"')
        if self.layer_types is not None and "linear_attention" in self.layer_types:
            raise ValueError(f'{where}: linear layers need attention "hybrid_linear"')
        if kind == "hybrid_chunked":
            self._check_chunked(where)
            return
        if self.attention_chunk_size is not None or self.full_attention_interval is not None:
            raise ValueError(
                f"{where}: attention_chunk_size / full_attention_interval need attention "
                '"hybrid_chunked" or "hybrid_linear"'
            )
        if self.layer_types is not None and "chunked_attention" in self.layer_types:
            raise ValueError(f'{where}: chunked layers need attention "hybrid_chunked"')
        if kind in ("full", "mla"):
            if self.sliding_window is not None or self.sliding_window_pattern is not None:
                raise ValueError(
                    f"{where}: attention {kind!r} must not set sliding_window or "
                    'sliding_window_pattern (use "sliding_window" or "hybrid_sliding")'
                )
            if self.layer_types is not None and "sliding_attention" in self.layer_types:
                raise ValueError(f"{where}: attention {kind!r} but layer_types has sliding layers")
            return
        if self.sliding_window is None:
            raise ValueError(f"{where}: attention {kind!r} needs sliding_window")
        if kind == "sliding_window":
            if self.sliding_window_pattern is not None:
                raise ValueError(
                    f'{where}: attention "sliding_window" slides every layer; '
                    'use "hybrid_sliding" with sliding_window_pattern'
                )
            if self.layer_types is not None and "full_attention" in self.layer_types:
                raise ValueError(f'{where}: attention "sliding_window" but layer_types has full')
            return
        # hybrid_sliding
        if self.layer_types is None and self.sliding_window_pattern is None:
            raise ValueError(
                f'{where}: attention "hybrid_sliding" needs sliding_window_pattern or layer_types'
            )
        if self.layer_types is not None:
            if len(self.layer_types) != self.num_hidden_layers:
                raise ValueError(
                    f"{where}: layer_types has {len(self.layer_types)} items, "
                    f"num_hidden_layers is {self.num_hidden_layers}"
                )
            if self.sliding_window_pattern is not None and list(self.layer_types) != list(
                _pattern_layer_types(self.num_hidden_layers, self.sliding_window_pattern)
            ):
                raise ValueError(
                    f"{where}: layer_types contradict sliding_window_pattern "
                    f"{self.sliding_window_pattern}"
                )
        types = self.layer_attention_types()
        if "full_attention" not in types or "sliding_attention" not in types:
            raise ValueError(
                f'{where}: attention "hybrid_sliding" needs both full and sliding layers'
            )

    def _check_linear(self, where: str, linear: tuple[int | None, ...]) -> None:
        if any(v is None for v in linear):
            raise ValueError(
                f'{where}: attention "hybrid_linear" needs linear_num_key_heads, '
                "linear_num_value_heads, linear_key_head_dim, linear_value_head_dim and "
                "linear_conv_kernel_dim"
            )
        if self.sliding_window is not None or self.sliding_window_pattern is not None:
            raise ValueError(
                f'{where}: attention "hybrid_linear" takes no sliding_window(_pattern)'
            )
        if self.attention_chunk_size is not None:
            raise ValueError(f'{where}: attention "hybrid_linear" takes no attention_chunk_size')
        if self.mamba_ssm_dtype not in (None, "float32", "bfloat16", "float16"):
            raise ValueError(
                f"{where}: mamba_ssm_dtype {self.mamba_ssm_dtype!r} must be float32, bfloat16 "
                "or float16"
            )
        if self.layer_types is None and self.full_attention_interval is None:
            raise ValueError(
                f'{where}: attention "hybrid_linear" needs full_attention_interval or layer_types'
            )
        if self.layer_types is not None and len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"{where}: layer_types has {len(self.layer_types)} items, "
                f"num_hidden_layers is {self.num_hidden_layers}"
            )
        if set(self.layer_attention_types()) != {"full_attention", "linear_attention"}:
            raise ValueError(
                f'{where}: attention "hybrid_linear" needs full and linear layers only'
            )

    def _check_chunked(self, where: str) -> None:
        if self.attention_chunk_size is None:
            raise ValueError(f'{where}: attention "hybrid_chunked" needs attention_chunk_size')
        if self.sliding_window is not None or self.sliding_window_pattern is not None:
            raise ValueError(
                f'{where}: attention "hybrid_chunked" takes no sliding_window(_pattern)'
            )
        if self.layer_types is None and self.full_attention_interval is None:
            raise ValueError(
                f'{where}: attention "hybrid_chunked" needs full_attention_interval or layer_types'
            )
        if self.layer_types is not None and len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"{where}: layer_types has {len(self.layer_types)} items, "
                f"num_hidden_layers is {self.num_hidden_layers}"
            )
        types = self.layer_attention_types()
        if set(types) != {"full_attention", "chunked_attention"}:
            raise ValueError(
                f'{where}: attention "hybrid_chunked" needs full and chunked layers only'
            )

    def layer_attention_types(self) -> tuple[LayerAttentionType, ...]:
        """Return the attention type of every layer, in order."""
        if self.layer_types is not None:
            return tuple(self.layer_types)
        return _derived_layer_types(
            self.attention,
            self.num_hidden_layers,
            self.full_attention_interval,
            self.sliding_window_pattern,
        )

    @property
    def num_full_attention_layers(self) -> int:
        """Layers whose KV cache grows with the whole context."""
        return self.layer_attention_types().count("full_attention")

    def gdn_state_elements(self, tp: int = 1) -> tuple[int, int]:
        """Elements of one linear layer's per-sequence state on one of ``tp`` ranks:
        (conv state, recurrent state), as vLLM's ``gated_delta_net_state_shape`` sizes
        them: conv ``(2 x key heads x key dim + value heads x value dim) / TP x
        (kernel - 1)`` and recurrent ``value heads / TP x value dim x key dim``.
        (0, 0) for models without linear layers."""
        if self.attention != "hybrid_linear":
            return 0, 0
        kh, vh = self.linear_num_key_heads or 0, self.linear_num_value_heads or 0
        kd, vd = self.linear_key_head_dim or 0, self.linear_value_head_dim or 0
        conv_dim = 2 * kh * kd + vh * vd
        conv = conv_dim // tp * ((self.linear_conv_kernel_dim or 1) - 1)
        return conv, vh // tp * vd * kd

    @property
    def num_sliding_attention_layers(self) -> int:
        """Layers whose KV cache is bounded by sliding_window tokens."""
        return self.layer_attention_types().count("sliding_attention")

    @property
    def is_moe(self) -> bool:
        """True for mixture-of-experts models."""
        return self.num_experts is not None

    @property
    def mla_latent_dim(self) -> int | None:
        """MLA cache elements per token and layer (kv_lora_rank + qk_rope_head_dim)."""
        if self.kv_lora_rank is None or self.qk_rope_head_dim is None:
            return None
        return self.kv_lora_rank + self.qk_rope_head_dim

    def names(self) -> tuple[str, ...]:
        """Return the id followed by the aliases."""
        return (self.id, *self.aliases)


@functools.cache  # a pure function of a few ints and a name: one tuple per model shape
def _derived_layer_types(
    attention: AttentionKind,
    num_layers: int,
    full_attention_interval: int | None,
    sliding_window_pattern: int | None,
) -> tuple[LayerAttentionType, ...]:
    """Every layer's attention type where ``layer_types`` is not given (the KV-cache
    layout asks for it once per engine it sizes: an 80-layer tuple each time)."""
    if attention in ("hybrid_chunked", "hybrid_linear") and full_attention_interval is not None:
        n = full_attention_interval
        other: LayerAttentionType = (
            "chunked_attention" if attention == "hybrid_chunked" else "linear_attention"
        )
        return tuple("full_attention" if (i + 1) % n == 0 else other for i in range(num_layers))
    kind: LayerAttentionType = "full_attention"
    if attention == "sliding_window":
        kind = "sliding_attention"
    elif attention == "hybrid_sliding" and sliding_window_pattern is not None:
        return _pattern_layer_types(num_layers, sliding_window_pattern)
    return (kind,) * num_layers


def _pattern_layer_types(num_layers: int, pattern: int) -> tuple[LayerAttentionType, ...]:
    """Expand a sliding_window_pattern: layer i is full iff (i + 1) % pattern == 0."""
    return tuple(
        "full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
        for i in range(num_layers)
    )


class ModelCatalog:
    """An immutable set of model architectures, looked up by id or alias.

    Lookups ignore case, as the Hugging Face Hub does for repo ids.
    """

    def __init__(self, models: Iterable[ModelArchitecture]) -> None:
        """Index ``models``; raise :class:`ModelCatalogError` on a repeated id or alias."""
        by_id: dict[str, ModelArchitecture] = {}
        index: dict[str, ModelArchitecture] = {}
        for model in models:
            for name in model.names():
                key = name.casefold()
                other = index.get(key)
                if other is not None:
                    raise ModelCatalogError(
                        f"model {model.id!r}: name {name!r} is already used by model {other.id!r}"
                    )
                index[key] = model
            by_id[model.id] = model
        self._models: Mapping[str, ModelArchitecture] = MappingProxyType(by_id)
        self._index: Mapping[str, ModelArchitecture] = MappingProxyType(index)

    @property
    def models(self) -> Mapping[str, ModelArchitecture]:
        """All entries keyed by their id (read-only)."""
        return self._models

    def get(self, id_or_alias: str) -> ModelArchitecture | None:
        """Return the entry whose id or alias is ``id_or_alias`` (case-insensitive)."""
        return self._index.get(id_or_alias.strip().casefold())

    def named_by_path(self, path: str) -> ModelArchitecture | None:
        """The entry that a local path, an object-store URI or a served name names by its
        last component (``/models/Qwen3-32B``, ``s3://b/models/deepseek-r1-distill-llama-8b``):
        exactly one entry whose id or alias ends in that name (case-insensitive); None when
        none or several do."""
        last = path.strip().rstrip("/").rsplit("/", 1)[-1].casefold()
        if not last:
            return None
        found = {
            arch.id: arch for key, arch in self._index.items() if key.rsplit("/", 1)[-1] == last
        }
        return next(iter(found.values())) if len(found) == 1 else None

    def nearest(self, name: str, n: int = 3) -> list[str]:
        """Up to ``n`` catalogue ids closest to ``name`` (difflib ratio, case-insensitive),
        best first; empty when nothing is close. For "did you mean" messages."""
        wanted = name.strip().casefold()
        ids = {m.id.casefold(): m.id for m in self._models.values()}
        # Compare the repo part too, so "llama-3.1-8b-instruct" finds the meta-llama entry.
        keyed = {**ids, **{k.rsplit("/", 1)[-1]: v for k, v in ids.items()}}
        hits = difflib.get_close_matches(wanted, list(keyed), n=n * 2, cutoff=0.6)
        if "/" not in wanted:
            hits += difflib.get_close_matches(wanted, list(ids), n=n, cutoff=0.6)
        out = list(dict.fromkeys(keyed.get(h) or ids[h] for h in hits))
        return out[:n]

    def extended(self, extra: Iterable[ModelArchitecture]) -> ModelCatalog:
        """Return a new catalogue with ``extra`` added.

        An extra entry whose id matches an existing entry (case-insensitive) replaces
        it; any other name clash raises :class:`ModelCatalogError`.
        """
        extra_list = list(extra)
        replaced = {m.id.casefold() for m in extra_list}
        kept = [m for m in self._models.values() if m.id.casefold() not in replaced]
        return ModelCatalog([*kept, *extra_list])

    def __contains__(self, id_or_alias: object) -> bool:
        """True when ``id_or_alias`` names an entry."""
        return isinstance(id_or_alias, str) and self.get(id_or_alias) is not None

    def __iter__(self) -> Iterator[ModelArchitecture]:
        """Iterate over the entries."""
        return iter(self._models.values())

    def __len__(self) -> int:
        """Number of entries."""
        return len(self._models)

    def __repr__(self) -> str:
        """Summarise the catalogue."""
        return f"ModelCatalog({len(self)} models)"


def _entry_label(raw: Any, index: int) -> str:
    """Name an entry for an error message: its position and, when readable, its id."""
    if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
        return f"#{index} ({raw['id']!r})"
    return f"#{index}"


def _parse_catalog(text: str, filename: str) -> ModelCatalog:
    """Parse catalogue YAML text; errors name ``filename`` and the entry."""
    return _catalog_of(catalog_yaml(text, filename, ModelCatalogError), filename)


def _catalog_of(data: Any, filename: str) -> ModelCatalog:
    """The catalogue of parsed document *data*; errors name ``filename`` and the entry."""
    if not isinstance(data, Mapping) or set(data) != {"models"}:
        raise ModelCatalogError(f"{filename}: expected a mapping with exactly one key 'models'")
    entries = data["models"]
    if not isinstance(entries, list):
        raise ModelCatalogError(f"{filename}: 'models' must be a list of mappings")
    models: list[ModelArchitecture] = []
    for index, raw in enumerate(entries):
        label = _entry_label(raw, index)
        if not isinstance(raw, Mapping):
            raise ModelCatalogError(f"{filename}: model {label} is not a mapping")
        try:
            models.append(ModelArchitecture.model_validate(raw))
        except ValidationError as exc:
            raise ModelCatalogError(f"{filename}: model {label} is invalid: {exc}") from exc
    try:
        return ModelCatalog(models)
    except ModelCatalogError as exc:
        raise ModelCatalogError(f"{filename}: {exc}") from exc


@functools.cache
def load_model_catalog() -> ModelCatalog:
    """Load the built-in catalogue (``gpustrata.catalog/data/models.yaml``), once."""
    try:
        data = packaged_document(_MODELS_FILE)
    except CatalogError as exc:
        raise ModelCatalogError(str(exc)) from exc
    return _catalog_of(data, _MODELS_FILE)


def load_model_catalog_file(path: str | Path) -> ModelCatalog:
    """Load a user catalogue file with the same layout as ``data/models.yaml``."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelCatalogError(f"{file}: cannot be read: {exc}") from exc
    return _parse_catalog(text, str(file))
