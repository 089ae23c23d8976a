"""Typed reads of a Hugging Face config.json, and the readers of the families whose fields
need more than a few lines (GPT-OSS): kept apart from generator/models.py so that module stays
the ModelConfig, its inline form and the resolution of `hf_model` references."""

from __future__ import annotations

import math
from typing import Any

from schema.errors import SetupError

MAX_DIM = 1 << 40  # larger than any model dimension; keeps byte counts finite


class ConfigReader:
    """Typed reads of a config.json: every value is checked where it is read, so a string,
    NaN, a list or a zero head count is one line naming the key, never a traceback."""

    def __init__(self, data: dict[str, Any], where: str, file: str = "config.json"):
        """`file`: what the messages call the object read (the file's name, and for a
        nested text_config, "<file> text_config")."""
        self.data, self.where, self.file = data, where, file

    def _missing(self, key: str) -> SetupError:
        mtype = self.data.get("model_type")
        return SetupError(f"{self.where}: {self.file} has no {key!r}, which a {mtype} model needs")

    def _whole(self, key: str, value: Any, minimum: int) -> int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            ok, value = True, int(value)
        if not ok or not minimum <= value <= MAX_DIM:
            shown = repr(value)[:40]
            raise SetupError(
                f"{self.where}: {self.file} {key!r} must be a whole number in "
                f"{minimum}..{MAX_DIM}, got {shown}"
            )
        return int(value)

    def dim(self, key: str, default: Any = None, minimum: int = 1) -> int:
        """A required dimension (`default` when the key is absent or null)."""
        value = self.data.get(key, default)
        if value is None:
            raise self._missing(key)
        return self._whole(key, value, minimum)

    def optional(self, key: str, default: int, minimum: int = 0) -> int:
        """An optional dimension: absent, null or 0 means `default` (HF's convention)."""
        value = self.data.get(key)
        if value is None or (value == 0 and not isinstance(value, bool)):
            return default
        return self._whole(key, value, minimum)

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            shown = repr(value)[:40]
            raise SetupError(
                f"{self.where}: {self.file} {key!r} must be true or false, got {shown}"
            )
        return value


def gpt_oss_fields(c: ConfigReader) -> dict[str, Any]:
    """GPT-OSS (OpenAI's gpt-oss-20b/120b): every layer a mixture of experts with no shared
    or dense MLP; biases on q/k/v/o, on the router and on each expert's gate_up and down
    projections; one learned attention sink per query head; `layer_types` alternates
    banded (sliding_window keys) and full attention."""
    k = c.data.get("num_experts_per_tok", c.data.get("experts_per_token"))
    if k is None:
        raise c._missing("num_experts_per_tok")
    bias = c.flag("attention_bias", True)
    return dict(
        experts=c.dim("num_local_experts"),
        experts_per_token=c._whole("num_experts_per_tok", k, 1),
        moe_ffn=c.dim("intermediate_size"),
        qkv_bias=bias,
        o_bias=bias,
        router_bias=True,
        expert_bias=True,
        attn_sinks=True,
        **sliding_layers(c, c.dim("num_hidden_layers")),
    )


def sliding_layers(c: ConfigReader, layers: int) -> dict[str, int]:
    """The sliding-window length and how many of the `layers` use it (`layer_types`, one
    entry per layer); an unknown layer type or a list of another length is an error rather
    than a guess."""
    types = c.data.get("layer_types") or []
    if not isinstance(types, list) or any(
        t not in ("sliding_attention", "full_attention") for t in types
    ):
        shown = repr(types)[:60]
        raise SetupError(
            f"{c.where}: {c.file} 'layer_types' must list 'sliding_attention' / "
            f"'full_attention', got {shown}"
        )
    if types and len(types) != layers:
        raise SetupError(
            f"{c.where}: {c.file} 'layer_types' lists {len(types)} layers, but the model has "
            f"{layers} (num_hidden_layers); give one entry per layer"
        )
    count = types.count("sliding_attention")
    if not count:
        return {}
    return dict(sliding_window=c.dim("sliding_window"), sliding_layers=count)


def gemma2_sliding(c: ConfigReader, layers: int) -> dict[str, int]:
    """Gemma 2's local attention: `layer_types` when the config lists them, else every
    even-numbered layer slides over `sliding_window` keys (transformers' Gemma2 decoder
    layer: `is_sliding = not bool(layer_idx % 2)`), the odd ones attend globally."""
    if c.data.get("layer_types"):
        return sliding_layers(c, layers)
    if not c.data.get("sliding_window"):
        return {}
    return dict(sliding_window=c.dim("sliding_window"), sliding_layers=(layers + 1) // 2)


def mistral_sliding(c: ConfigReader, layers: int) -> dict[str, int]:
    """Mistral's and Mixtral's sliding window (Mistral 7B v0.1: 4,096 keys on every layer;
    null in later releases and in Mixtral-8x7B: full attention)."""
    if not c.data.get("sliding_window"):
        return {}
    return dict(sliding_window=c.dim("sliding_window"), sliding_layers=layers)


# transformers' Qwen2Config / Qwen3Config / Qwen3MoeConfig default for max_window_layers
QWEN_MAX_WINDOW_LAYERS = 28


def qwen_sliding(c: ConfigReader, layers: int) -> dict[str, int]:
    """Qwen2 / Qwen3's optional sliding window: off unless use_sliding_window; then
    `layer_types` when listed, else (transformers' Qwen2Config) the layers from
    max_window_layers on slide over `sliding_window` keys, the first ones attend fully."""
    if not c.flag("use_sliding_window", False) or not c.data.get("sliding_window"):
        return {}
    if c.data.get("layer_types"):
        return sliding_layers(c, layers)
    full = c.dim("max_window_layers", QWEN_MAX_WINDOW_LAYERS, minimum=0)
    if full >= layers:
        return {}
    return dict(sliding_window=c.dim("sliding_window"), sliding_layers=layers - full)


def llama4_text(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The text decoder's fields of a Llama 4 config: the multimodal `llama4` config nests
    them in `text_config` beside a vision tower this generator does not build; a text-only
    checkpoint (`llama4_text`) has them at the top level."""
    if data.get("model_type") == "llama4_text":
        return data
    text = data.get("text_config")
    if not isinstance(text, dict) or text.get("model_type") != "llama4_text":
        raise SetupError(
            f"{where}: a llama4 config.json needs a 'text_config' object with model_type "
            "'llama4_text' (the language model; the vision tower is not modelled)"
        )
    return text


def llama4_fields(c: ConfigReader) -> dict[str, Any]:
    """Llama 4 text (Scout, Maverick): routed experts (top-k of num_local_experts, width
    intermediate_size) plus one shared expert of the same width in every
    `interleave_moe_layer_step`-th layer, dense layers of width intermediate_size_mlp
    otherwise. Not modelled, none of them weights: the weightless L2 norm of q and k
    (use_qk_norm), the NoPE layers (no rotation) and the chunked attention of the RoPE
    layers (attention_chunk_size keys at most): every layer attends to the whole context.
    Interleaved dense layers (step > 1, Maverick) are built as leading ones: the counts and
    a whole step's work are the same, a pipeline stage's share of them may differ."""
    layers, step = c.dim("num_hidden_layers"), c.optional("interleave_moe_layer_step", 1)
    moe_layers = layers // step
    listed = c.data.get("moe_layers")
    if listed is not None and (not isinstance(listed, list) or len(listed) != moe_layers):
        raise SetupError(
            f"{c.where}: {c.file} 'moe_layers' must list the {moe_layers} layers that "
            f"interleave_moe_layer_step {step} makes sparse, got {repr(listed)[:60]}"
        )
    return dict(
        ffn=c.dim("intermediate_size_mlp", c.data.get("intermediate_size")),
        experts=c.dim("num_local_experts"),
        experts_per_token=c.dim("num_experts_per_tok"),
        moe_ffn=c.dim("intermediate_size"),
        shared_experts=1,
        first_dense_layers=layers - moe_layers,
        qkv_bias=c.flag("attention_bias", False),
        o_bias=c.flag("attention_bias", False),
    )
