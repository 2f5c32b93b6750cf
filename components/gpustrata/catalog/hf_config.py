"""Model architectures from a local Hugging Face ``config.json``.

A private model (or one the catalogue lacks) is described from its own config.json:
:func:`architecture_from_hf_config` reads it (bounded, inside the project) into a
:class:`~gpustrata.catalog.architectures.ModelArchitecture`, estimating the parameter
counts, and :meth:`~gpustrata.catalog.architectures.ModelCatalog.extended` adds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpustrata.catalog.architectures import (
    AttentionKind,
    LayerAttentionType,
    ModelArchitecture,
    ModelCatalogError,
)
from gpustrata.core.modelfiles import ModelFileError, read_model_config
from gpustrata.core.terminal import clipped, printable

__all__ = ["architecture_from_hf_config"]


# transformers defaults for keys that multimodal configs leave out of text_config
# (huggingface/transformers src/transformers/models/gemma3/configuration_gemma3.py,
# Gemma3TextConfig.__init__ defaults).
_TEXT_CONFIG_DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262208,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "tie_word_embeddings": True,
    },
}

_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk")


def architecture_from_hf_config(
    path: str | Path, model_id: str | None = None, inside: Path | None = None
) -> ModelArchitecture:
    """Describe a model from a local Hugging Face ``config.json`` (file or directory).

    Parameter counts are estimated from the config (see the entry's ``notes``):
    embeddings ``vocab_size x hidden_size`` (twice unless ``tie_word_embeddings``),
    attention projections, gated MLPs (three ``hidden x intermediate`` matrices; per
    expert for MoE, plus shared experts and the router), norms and biases ignored.
    The estimate is usually within a few percent of the safetensors count.

    The file is read by :func:`~gpustrata.core.modelfiles.read_model_config` (its final
    file must resolve inside *inside* when given; size, nesting, number and shape bounds).
    ``model_id`` defaults to the config's ``_name_or_path``, else the directory name; text
    taken from the file is escaped (no terminal controls) and cut to 200 characters.
    Raises :class:`ModelCatalogError` naming the file and the missing or bad key.
    """
    file = Path(path)
    if file.is_dir():
        file = file / "config.json"
    try:
        root = read_model_config(file, inside)
    except ModelFileError as exc:
        raise ModelCatalogError(str(exc)) from None
    return _ConfigReader(file, root).build(model_id)


_LINEAR_ATTENTION_KEYS = (
    "linear_num_value_heads",
    "linear_num_key_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "full_attention_interval",
)
"""config.json keys of Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5), as vLLM reads them."""


def _weight_format(quant: dict[str, Any]) -> str | None:
    """The weight format a config.json's quantization_config stores, for weight sizes.

    ModelOpt checkpoints name it in ``quant_algo`` (the reference vLLM release's
    ``ModelOptFp8Config`` / ``ModelOptNvFp4Config.override_quantization_method``: FP8 ->
    ``modelopt``, NVFP4 -> ``modelopt_fp4``); compressed-tensors ones in the weights of
    their ``config_groups`` (``num_bits``, ``type``, ``group_size``) or ``format``
    (``nvfp4-pack-quantized``). Returns ``fp8``, ``nvfp4``, ``int8``, ``w4a16`` for those,
    else the ``quant_method`` as given (``awq``, ``gptq``, ``mxfp4``, ``fp8``, ...).
    """
    method = str(quant.get("quant_method") or "").lower()
    if not method:
        return None
    if method.startswith("modelopt"):
        inner = quant.get("quantization")
        algo = str((inner if isinstance(inner, dict) else quant).get("quant_algo") or "").upper()
        if "FP4" in algo:
            return "nvfp4"
        if "FP8" in algo:
            return "fp8"
        return method
    if method == "compressed-tensors":
        if "nvfp4" in str(quant.get("format") or "").lower():
            return "nvfp4"
        groups = quant.get("config_groups")
        first = next(iter(groups.values()), None) if isinstance(groups, dict) else None
        weights = first.get("weights") if isinstance(first, dict) else None
        if isinstance(weights, dict):
            bits, kind = weights.get("num_bits"), str(weights.get("type") or "")
            if bits == 8:
                return "fp8" if kind == "float" else "int8"
            if bits == 4:
                return "nvfp4" if kind == "float" else "w4a16"
    return method


def _text(value: object) -> str:
    """Text from a config.json as gpustrata keeps it: on one line, terminal controls
    escaped, at most 200 characters (it reaches every output)."""
    return clipped(printable(value), 200)


class _ConfigReader:
    """Reads one config.json, tracking which section a key came from for errors."""

    def __init__(self, file: Path, root: dict[str, Any]) -> None:
        self.file = file
        self.root = root
        text = root.get("text_config")
        self.prefix = "text_config." if isinstance(text, dict) else ""
        section: dict[str, Any] = dict(text) if isinstance(text, dict) else dict(root)
        defaults = _TEXT_CONFIG_DEFAULTS.get(str(section.get("model_type")), {})
        self.defaulted = sorted(k for k in defaults if section.get(k) is None)
        self.cfg = {**defaults, **{k: v for k, v in section.items() if v is not None}}
        self.notes: list[str] = []

    def fail(self, message: str) -> ModelCatalogError:
        """Build an error naming the file."""
        return ModelCatalogError(printable(f"{self.file}: {message}"))

    def opt_int(self, key: str) -> int | None:
        """Return an optional positive integer key."""
        value = self.cfg.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            shown = clipped(repr(value))
            raise self.fail(f"{self.prefix}{key} must be a positive integer, got {shown}")
        return value

    def opt_count(self, key: str) -> int:
        """Return an optional count of parts a model may lack (0 when unset): a shared
        expert's width, which Qwen3-MoE configs write as ``0`` for none
        (Qwen/Qwen3-Coder-30B-A3B-Instruct: ``"shared_expert_intermediate_size": 0``)."""
        value = self.cfg.get(key)
        return 0 if type(value) is int and value == 0 else self.opt_int(key) or 0

    def req_int(self, key: str) -> int:
        """Return a required positive integer key."""
        value = self.opt_int(key)
        if value is None:
            raise self.fail(f"missing required key {self.prefix}{key!r}")
        return value

    def first_int(self, keys: tuple[str, ...]) -> int | None:
        """Return the first of ``keys`` that is set."""
        for key in keys:
            value = self.opt_int(key)
            if value is not None:
                return value
        return None

    def build(self, model_id: str | None) -> ModelArchitecture:
        """Assemble the ModelArchitecture."""
        cfg = self.cfg
        archs = self.root.get("architectures")
        if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
            raise self.fail("missing required key 'architectures' (a non-empty list)")
        layers = self.req_int("num_hidden_layers")
        linear, linear_types = self._linear(layers)
        hidden = self.req_int("hidden_size")
        heads = self.req_int("num_attention_heads")
        vocab = self.req_int("vocab_size")
        max_pos = self.req_int("max_position_embeddings")
        num_experts = self.first_int(_EXPERT_KEYS)
        top_k = self.first_int(_TOP_K_KEYS) if num_experts is not None else None
        moe_inter = self.opt_int("moe_intermediate_size")
        inter = self.opt_int("intermediate_size")
        if inter is None:
            if moe_inter is None:
                raise self.fail(f"missing required key {self.prefix}'intermediate_size'")
            inter = moe_inter
        kv_heads = self.opt_int("num_key_value_heads")
        if kv_heads is None:
            kv_heads = heads
            self.notes.append("num_key_value_heads absent: taken as num_attention_heads (MHA).")
        mla = self.opt_int("kv_lora_rank") is not None
        head_dim, derived = self._head_dim(hidden, heads, mla)
        chunk: int | None = None
        interval: int | None = None
        if linear:
            attention: AttentionKind = "hybrid_linear"
            window = pattern = None
            layer_types = linear_types
            interval = linear.get("full_attention_interval")
        elif not mla and self.cfg.get("attention_chunk_size") is not None:
            chunk, interval, layer_types = self._chunked(layers)
            attention = "hybrid_chunked"
            window = pattern = None
        else:
            attention, window, pattern, layer_types = self._attention(layers, mla)
        dtype = cfg.get("torch_dtype") or cfg.get("dtype") or self.root.get("torch_dtype")
        dtype = dtype or self.root.get("dtype")
        if not isinstance(dtype, str):
            dtype = "bfloat16"
            self.notes.append('config.json has no torch_dtype: assumed "bfloat16".')
        quant = self.root.get("quantization_config") or cfg.get("quantization_config")
        quant_method = _weight_format(quant) if isinstance(quant, dict) else None
        tied = bool(cfg.get("tie_word_embeddings", self.root.get("tie_word_embeddings", False)))
        total, active = self._estimate_params(
            layers, hidden, inter, heads, kv_heads, head_dim, vocab, tied, num_experts, top_k
        )
        if linear:
            # A linear layer's projections (in_proj_qkvz, in_proj_ba, out_proj) instead of
            # the attention ones the estimate counted for every layer.
            kh, vh = linear["linear_num_key_heads"], linear["linear_num_value_heads"]
            kd, vd = linear["linear_key_head_dim"], linear["linear_value_head_dim"]
            gdn = hidden * (2 * kh * kd + 2 * vh * vd) + 2 * hidden * vh + vh * vd * hidden
            attn = hidden * head_dim * (2 * heads + 2 * kv_heads)
            if linear_types is not None:
                n_linear = linear_types.count("linear_attention")
            else:
                n_linear = layers - layers // linear["full_attention_interval"]
            total += n_linear * (gdn - attn)
            active += n_linear * (gdn - attn)
        if self.defaulted:
            self.notes.append(
                "transformers defaults used for text_config keys: " + ", ".join(self.defaulted)
            )
        name = model_id or self.root.get("_name_or_path") or self.file.parent.name
        try:
            return ModelArchitecture(
                id=_text(name),
                architecture=_text(archs[0]),
                model_type=_text(cfg["model_type"]) if cfg.get("model_type") else None,
                num_hidden_layers=layers,
                hidden_size=hidden,
                intermediate_size=inter,
                moe_intermediate_size=moe_inter if num_experts is not None else None,
                num_attention_heads=heads,
                num_key_value_heads=kv_heads,
                head_dim=head_dim,
                head_dim_derived=derived,
                vocab_size=vocab,
                max_position_embeddings=max_pos,
                tie_word_embeddings=tied,
                params_total_b=round(total / 1e9, 3),
                params_active_b=round(active / 1e9, 3),
                attention=attention,
                sliding_window=window,
                sliding_window_pattern=pattern,
                attention_chunk_size=chunk,
                full_attention_interval=interval,
                layer_types=layer_types,
                kv_lora_rank=self.opt_int("kv_lora_rank"),
                qk_rope_head_dim=self.opt_int("qk_rope_head_dim"),
                qk_nope_head_dim=self.opt_int("qk_nope_head_dim"),
                v_head_dim=self.opt_int("v_head_dim"),
                q_lora_rank=self.opt_int("q_lora_rank"),
                torch_dtype=_text(dtype),
                quantization=_text(quant_method) if quant_method else None,
                num_experts=num_experts,
                num_experts_per_tok=top_k,
                **{k: v for k, v in linear.items() if k != "full_attention_interval"},
                sources=[self.file.resolve().as_uri()],
                notes=" ".join(self.notes),
            )
        except ValidationError as exc:
            raise self.fail(f"does not describe a consistent model: {exc}") from exc

    def _linear(self, layers: int) -> tuple[dict[str, Any], list[LayerAttentionType] | None]:
        """Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5): the linear_* fields vLLM sizes
        their per-sequence state from (``gated_delta_net_state_shape``), and which layers
        are full attention: ``layer_types`` ("linear_attention" / "full_attention"), else
        ``full_attention_interval`` (transformers' Qwen3NextConfig default 4). Empty when
        the config has no linear layers."""
        cfg = self.cfg
        keys = [k for k in _LINEAR_ATTENTION_KEYS if cfg.get(k) is not None]
        raw_types = cfg.get("layer_types")
        linear_layers = isinstance(raw_types, list) and "linear_attention" in raw_types
        if not keys and not linear_layers:
            return {}, None
        fields: dict[str, Any] = {
            k: self.req_int(k) for k in _LINEAR_ATTENTION_KEYS if k != "full_attention_interval"
        }
        types: list[LayerAttentionType] | None = None
        if isinstance(raw_types, list):
            types = self._layer_types(
                raw_types,
                layers,
                "linear_attention",
                ' in a linear-attention hybrid (expected "linear_attention" / "full_attention")',
            )
            if set(types) != {"full_attention", "linear_attention"}:
                raise self.fail(
                    f"{self.prefix}layer_types must mix linear_attention and full_attention "
                    "layers; an all-linear or all-full list with linear_* keys is not a "
                    "model vLLM's hybrid cache sizes"
                )
        else:
            interval = self.opt_int("full_attention_interval")
            if interval is None:
                interval = 4
                self.notes.append(
                    "full_attention_interval absent: transformers' default 4 (every 4th layer "
                    "full)."
                )
            if interval < 2 or interval > layers:
                raise self.fail(
                    f"{self.prefix}full_attention_interval {interval} must be between 2 and "
                    f"num_hidden_layers {layers}"
                )
            fields["full_attention_interval"] = interval
        ssm = cfg.get("mamba_ssm_dtype")
        if ssm is not None:
            if ssm not in ("float32", "bfloat16", "float16"):
                raise self.fail(
                    f"{self.prefix}mamba_ssm_dtype must be float32, bfloat16 or float16, got "
                    f"{clipped(repr(ssm))}"
                )
            fields["mamba_ssm_dtype"] = ssm
        self.notes.append(
            "Gated DeltaNet hybrid: linear layers keep a fixed state per sequence "
            "(vLLM gated_delta_net_state_shape); only full layers hold a per-token KV cache."
        )
        return fields, types

    def _layer_types(
        self, raw: list[Any], layers: int, other: str, context: str
    ) -> list[LayerAttentionType]:
        """config.json ``layer_types``: one entry per layer, each ``full_attention`` or
        *other*; an error names the bad entries (with *context*) or the count."""
        bad = [t for t in raw if t not in ("full_attention", other)]
        if bad:
            shown = ", ".join(clipped(repr(t)) for t in bad[:3])
            raise self.fail(f"{self.prefix}layer_types has unsupported entries {shown}{context}")
        if len(raw) != layers:
            raise self.fail(
                f"{self.prefix}layer_types has {len(raw)} items, num_hidden_layers is {layers}"
            )
        return list(raw)

    def _head_dim(self, hidden: int, heads: int, mla: bool) -> tuple[int, bool]:
        """Return (head_dim, derived)."""
        if mla:
            rope = self.opt_int("qk_rope_head_dim")
            if rope is None:
                raise self.fail(
                    f"MLA config (kv_lora_rank set) lacks {self.prefix}'qk_rope_head_dim'"
                )
            nope = self.opt_int("qk_nope_head_dim")
            if nope is None:
                raise self.fail(
                    f"MLA config (kv_lora_rank set) lacks {self.prefix}'qk_nope_head_dim'"
                )
            self.notes.append("MLA: head_dim = qk_nope_head_dim + qk_rope_head_dim.")
            return nope + rope, False
        explicit = self.opt_int("head_dim")
        if explicit is not None:
            return explicit, False
        if hidden % heads:
            raise self.fail(
                f"no {self.prefix}'head_dim' and hidden_size {hidden} is not divisible by "
                f"num_attention_heads {heads}"
            )
        self.notes.append("head_dim absent: derived as hidden_size // num_attention_heads.")
        return hidden // heads, True

    def _chunked(self, layers: int) -> tuple[int, int | None, list[LayerAttentionType] | None]:
        """Llama 4's chunked local attention: (attention_chunk_size, full_attention_interval,
        layer_types). ``no_rope_layers`` marks each layer 1 (RoPE: chunked local) or 0 (NoPE:
        global), as vLLM's llama4.py reads it; without it transformers derives it from
        ``no_rope_layer_interval`` (default 4)."""
        chunk = self.req_int("attention_chunk_size")
        raw = self.cfg.get("no_rope_layers")
        if isinstance(raw, list) and raw:
            if len(raw) != layers or any(v not in (0, 1) for v in raw):
                raise self.fail(
                    f"{self.prefix}no_rope_layers must list 0/1 for each of {layers} layers"
                )
            types: list[LayerAttentionType] = [
                "chunked_attention" if v else "full_attention" for v in raw
            ]
            return chunk, None, types
        interval = self.opt_int("no_rope_layer_interval") or 4
        self.notes.append(
            f"chunked local attention ({chunk} tokens); every {interval}th layer is global."
        )
        return chunk, interval, None

    def _attention(
        self, layers: int, mla: bool
    ) -> tuple[AttentionKind, int | None, int | None, list[LayerAttentionType] | None]:
        """Return (attention, sliding_window, sliding_window_pattern, layer_types)."""
        if mla:
            return "mla", None, None, None
        cfg = self.cfg
        window = self.opt_int("sliding_window")
        raw_types = cfg.get("layer_types")
        if isinstance(raw_types, list):
            types = self._layer_types(raw_types, layers, "sliding_attention", "")
            if "sliding_attention" not in types:
                return "full", None, None, None
            if window is None:
                raise self.fail(
                    f"layer_types has sliding layers but no {self.prefix}'sliding_window'"
                )
            if "full_attention" not in types:
                return "sliding_window", window, None, None
            return "hybrid_sliding", window, None, types
        if cfg.get("use_sliding_window") is False or window is None:
            return "full", None, None, None
        pattern = self.opt_int("sliding_window_pattern")
        if pattern is None and cfg.get("model_type") == "gemma2":
            pattern = 2
            self.notes.append("Gemma 2: even layers slide, odd layers are full (pattern 2).")
        if pattern is not None and pattern > 1 and layers >= pattern:
            return "hybrid_sliding", window, pattern, None
        return "sliding_window", window, None, None

    def _estimate_params(
        self,
        layers: int,
        hidden: int,
        inter: int,
        heads: int,
        kv_heads: int,
        head_dim: int,
        vocab: int,
        tied: bool,
        num_experts: int | None,
        top_k: int | None,
    ) -> tuple[int, int]:
        """Estimate (total, active) parameters from the config shape."""
        cfg = self.cfg
        embed = vocab * hidden * (1 if tied else 2)
        kv_lora = self.opt_int("kv_lora_rank")
        if kv_lora is not None:
            rope = self.opt_int("qk_rope_head_dim") or 0
            nope = self.opt_int("qk_nope_head_dim") or 0
            v_dim = self.opt_int("v_head_dim") or nope
            q_lora = self.opt_int("q_lora_rank")
            q_out = heads * (nope + rope)
            q_proj = hidden * q_lora + q_lora * q_out if q_lora else hidden * q_out
            attn = q_proj + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim)
            attn += heads * v_dim * hidden
        else:
            attn = hidden * head_dim * (2 * heads + 2 * kv_heads)
        dense_mlp = 3 * hidden * inter
        if num_experts is None or top_k is None:
            per_layer = attn + dense_mlp
            total = embed + layers * per_layer
            self.notes.append(
                "params estimated from config (embeddings, attention, gated MLP; "
                "norms/biases ignored)."
            )
            return total, total
        expert = 3 * hidden * (self.opt_int("moe_intermediate_size") or inter)
        shared = self.opt_count("n_shared_experts") * expert
        shared += 3 * hidden * self.opt_count("shared_expert_intermediate_size")
        if cfg.get("model_type") == "llama4_text":
            # Llama4TextMoe: one shared expert of intermediate_size beside the routed ones.
            shared += expert
        router = hidden * num_experts
        dense_layers = min(int(cfg.get("first_k_dense_replace") or 0), layers)
        step = self.opt_int("interleave_moe_layer_step")
        if step and step > 1:  # Llama 4 Maverick: MoE on every step-th layer
            dense_layers = layers - layers // step
            dense_mlp = 3 * hidden * (self.opt_int("intermediate_size_mlp") or inter)
        moe_layers = layers - dense_layers
        base = embed + layers * attn + dense_layers * dense_mlp
        base += moe_layers * (shared + router)
        total = base + moe_layers * num_experts * expert
        # Active excludes the input-embedding lookup, as the OpenAI and DeepSeek cards count.
        active = base - vocab * hidden + moe_layers * top_k * expert
        self.notes.append(
            "params estimated from config (embeddings, attention, experts x 3 x hidden x "
            "moe_intermediate, shared experts, router; norms/biases ignored; active "
            "excludes the input embedding)."
        )
        return total, active
