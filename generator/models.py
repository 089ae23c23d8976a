"""Model dimensions: from an inline `ModelSpec`, or `hf_model` (a local config.json, a local
model folder, a short name shipped in generator/models/, or a Hugging Face hub id).

Hub ids are resolved with huggingface_hub: the local cache first (`local_files_only=True`),
then the shipped copy of the same model name, then, only when the user allows it
(MAPSHARD_HUB_DOWNLOAD=1, not under HF_HUB_OFFLINE), a download, unless the hub's host
cannot be reached (checked with one connect, so offline fails at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generator.hf_files import resolve_hf_model, shipped_models
from generator.hf_readers import (
    ConfigReader,
    gemma2_sliding,
    gpt_oss_fields,
    llama4_fields,
    llama4_text,
    mistral_sliding,
    qwen_sliding,
)
from schema import setup_pb2
from schema.errors import SetupError

SUPPORTED_TYPES = tuple(
    "llama mistral mixtral qwen2 qwen3 qwen3_moe gemma2 gpt2 phi3 deepseek_v2 deepseek_v3 kimi_k2 "
    "gpt_oss llama4 llama4_text".split()
)


@dataclass(frozen=True)
class ModelConfig:
    name: str
    architecture: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int  # dense MLP width
    vocab: int
    gated: bool = True  # SwiGLU / GeGLU (gate, up, down) vs GELU MLP (up, down)
    squared_relu: bool = False  # non-gated MLP activation relu(x)^2 (Nemotron) instead of GELU
    norm: str = "rms"  # "rms" or "layer" (LayerNorm has a bias)
    tie_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    positions: int = 0  # learned absolute position embeddings (GPT-2), 0 = none
    post_norms: bool = False  # Gemma 2: norms after attention and MLP too
    qk_norm: bool = False  # Qwen3: per-head RMSNorm of q and k (2 x head_dim weights a layer)
    # Mixture of experts
    experts: int = 0
    experts_per_token: int = 0
    moe_ffn: int = 0
    shared_experts: int = 0
    first_dense_layers: int = 0
    capacity_factor: float = 0.0
    router_bias: bool = False  # GPT-OSS: a bias on the router's logits
    expert_bias: bool = False  # GPT-OSS: biases on each expert's gate_up and down
    attn_sinks: bool = False  # GPT-OSS: one learned softmax sink logit per query head
    # Sliding-window attention on `sliding_layers` layers (GPT-OSS): those layers attend to
    # the last `sliding_window` keys (generator.llm_common.layer_phases: a phase of their
    # own where the window binds; their KV cache holds the window)
    sliding_window: int = 0
    sliding_layers: int = 0
    # Multi-head latent attention (DeepSeek-V2)
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def windowed_layers(self) -> int:
        """Sliding-window layers the generators model apart (0 where the model has none, or
        where leading dense MoE layers leave which ones slide unknown)."""
        if self.sliding_window <= 0 or (self.is_moe and self.first_dense_layers):
            return 0
        return self.sliding_layers

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention(self) -> str:
        if self.is_mla:
            return "mla"
        if self.kv_heads == self.heads:
            return "mha"
        return "mqa" if self.kv_heads == 1 else "gqa"

    @property
    def moe_layers(self) -> int:
        return self.layers - self.first_dense_layers if self.is_moe else 0

    def kv_elements_per_token_per_layer(self) -> int:
        """KV-cache elements one token adds to one layer (MLA: latent + rope key)."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim


# ---------------------------------------------------------------------------------------
# Inline ModelSpec
# ---------------------------------------------------------------------------------------


def from_spec(spec: setup_pb2.ModelSpec, where: str) -> ModelConfig:
    """`where`: the field path prefix for messages (file: workload...model.inline)."""
    arch = spec.architecture.lower().replace("-", "_")
    problems = []
    if arch and arch not in SUPPORTED_TYPES:
        problems.append(
            f"{where}.architecture {spec.architecture!r} is not supported; valid: "
            f"{', '.join(SUPPORTED_TYPES)} (or empty for a generic decoder)"
        )
    for field in ("hidden_size", "num_layers", "num_heads", "vocab_size"):
        if getattr(spec, field) <= 0:
            problems.append(f"{where}.{field} must be > 0, got {getattr(spec, field)}")
    if spec.intermediate_size <= 0 and spec.moe_intermediate_size <= 0:
        problems.append(f"{where}.intermediate_size must be > 0, got {spec.intermediate_size}")
    for field in (
        "num_kv_heads",
        "head_dim",
        "num_experts",
        "experts_per_token",
        "first_dense_layers",
        "num_shared_experts",
        "q_lora_rank",
        "kv_lora_rank",
        "max_position_embeddings",
    ):
        if getattr(spec, field) < 0:
            problems.append(f"{where}.{field} must be >= 0, got {getattr(spec, field)}")
    if spec.capacity_factor < 0:
        problems.append(f"{where}.capacity_factor must be >= 0, got {spec.capacity_factor}")
    if problems:
        raise SetupError(problems)
    gpt2 = arch == "gpt2" or spec.gpt2_style_biases
    gated = spec.ffn == setup_pb2.SWIGLU or (spec.ffn == setup_pb2.FFN_UNSET and arch != "gpt2")
    layer_norm = spec.norm == setup_pb2.LAYERNORM or (spec.norm == setup_pb2.NORM_UNSET and gpt2)
    positions = 0
    if spec.learned_positions or (arch == "gpt2" and spec.max_position_embeddings > 0):
        positions = spec.max_position_embeddings
        if positions <= 0:
            raise SetupError(f"{where}.max_position_embeddings must be > 0 with learned_positions")
    ffn = spec.intermediate_size or spec.moe_intermediate_size
    cfg = ModelConfig(
        name=spec.name or arch or "model",
        architecture=arch,
        hidden=spec.hidden_size,
        layers=spec.num_layers,
        heads=spec.num_heads,
        kv_heads=spec.num_kv_heads or spec.num_heads,
        head_dim=spec.head_dim or (spec.hidden_size // spec.num_heads),
        ffn=ffn,
        vocab=spec.vocab_size,
        gated=gated,
        squared_relu=spec.ffn == setup_pb2.SQUARED_RELU,
        norm="layer" if layer_norm else "rms",
        tie_embeddings=spec.tie_embeddings,
        qkv_bias=spec.attention_bias or gpt2,
        o_bias=gpt2,
        mlp_bias=spec.mlp_bias or gpt2,
        positions=positions,
        post_norms=spec.post_norms or arch == "gemma2",
        qk_norm=spec.qk_norm or arch in ("qwen3", "qwen3_moe"),
        experts=spec.num_experts,
        experts_per_token=spec.experts_per_token,
        moe_ffn=spec.moe_intermediate_size or ffn,
        shared_experts=spec.num_shared_experts,
        first_dense_layers=spec.first_dense_layers,
        capacity_factor=spec.capacity_factor,
        router_bias=arch == "gpt_oss",  # GPT-OSS's biases and sinks have no inline fields
        expert_bias=arch == "gpt_oss" or spec.mlp_bias,  # every MLP's, experts' too
        attn_sinks=arch == "gpt_oss",
        q_lora_rank=spec.q_lora_rank,
        kv_lora_rank=spec.kv_lora_rank,
        qk_nope_head_dim=spec.qk_nope_head_dim,
        qk_rope_head_dim=spec.qk_rope_head_dim,
        v_head_dim=spec.v_head_dim,
    )
    return check_config(cfg, where)


# The config.json keys of ModelConfig's checked fields, for the messages (an inline spec
# names them as ModelSpec does: num_heads, num_kv_heads, experts_per_token, ...)
HF_NAMES = {
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
    "num_layers": "num_hidden_layers",
    "experts_per_token": "num_experts_per_tok",
    "first_dense_layers": "first_k_dense_replace",
    "num_shared_experts": "n_shared_experts",
}
GPT2_NAMES = HF_NAMES | {"num_heads": "n_head", "num_kv_heads": "n_head", "num_layers": "n_layer"}


def check_config(cfg: ModelConfig, where: str, names: dict[str, str] | None = None) -> ModelConfig:
    """Consistency of the dimensions; every problem reported at once, each field named as
    the input names it (`names`: a config.json's keys; default ModelSpec's)."""
    n = names or {}

    def name(field: str) -> str:
        return n.get(field, field)

    p = []
    if cfg.heads % max(1, cfg.kv_heads):
        p.append(
            f"{where}: {name('num_heads')} {cfg.heads} must be a multiple of "
            f"{name('num_kv_heads')} {cfg.kv_heads}"
        )
    if not cfg.is_mla and cfg.head_dim <= 0:
        p.append(f"{where}: head_dim must be > 0 (hidden_size / num_heads is {cfg.head_dim})")
    if cfg.is_moe:
        if not 0 < cfg.experts_per_token <= cfg.experts:
            p.append(
                f"{where}: {name('experts_per_token')} must be in 1..{cfg.experts} (the "
                f"{name('num_experts')}), got {cfg.experts_per_token or 'none'}"
            )
        if cfg.first_dense_layers >= cfg.layers:
            p.append(
                f"{where}: {name('first_dense_layers')} {cfg.first_dense_layers} must be < "
                f"{name('num_layers')} {cfg.layers}"
            )
    elif cfg.experts_per_token or cfg.shared_experts:
        p.append(
            f"{where}: {name('experts_per_token')} / {name('num_shared_experts')} need "
            f"{name('num_experts')} > 0"
        )
    if cfg.is_mla:
        for field in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if getattr(cfg, field) <= 0:
                p.append(f"{where}: {field} must be > 0 for latent attention (kv_lora_rank > 0)")
    if p:
        raise SetupError(p)
    return cfg


# ---------------------------------------------------------------------------------------
# Hugging Face config.json
# ---------------------------------------------------------------------------------------


def from_hf_config(
    data: dict[str, Any], name: str, where: str, file: str = "config.json"
) -> ModelConfig:
    """Read the config fields of the supported model families; `file`: the name of the file
    read, for the messages."""
    mtype = str(data.get("model_type", "")).lower()
    if mtype not in SUPPORTED_TYPES:
        raise SetupError(
            f"{where}: model_type {mtype[:40] or '(missing)'!r} is not supported; "
            f"supported: {', '.join(SUPPORTED_TYPES)} (or describe the model "
            "inline with `model { inline { ... } }`)"
        )
    if mtype == "llama4":
        file = f"{file} text_config"
    if mtype in ("llama4", "llama4_text"):
        data = llama4_text(data, where)
    c = ConfigReader(data, where, file)
    if mtype == "gpt2":
        hidden, heads = c.dim("n_embd"), c.dim("n_head")
        cfg = ModelConfig(
            name=name,
            architecture=mtype,
            hidden=hidden,
            layers=c.dim("n_layer"),
            heads=heads,
            kv_heads=heads,
            head_dim=hidden // heads,
            ffn=c.optional("n_inner", 4 * hidden),
            vocab=c.dim("vocab_size"),
            gated=False,
            norm="layer",
            tie_embeddings=c.flag("tie_word_embeddings", True),
            qkv_bias=True,
            o_bias=True,
            mlp_bias=True,
            positions=c.dim("n_positions", data.get("n_ctx")),
        )
        return check_config(cfg, where, GPT2_NAMES)
    hidden, heads = c.dim("hidden_size"), c.dim("num_attention_heads")
    kv_heads = heads  # absent or null: multi-head attention (HF's convention); 0 is no model
    if data.get("num_key_value_heads") is not None:
        kv_heads = c.dim("num_key_value_heads")
    common = dict(
        name=name,
        architecture=mtype,
        hidden=hidden,
        layers=c.dim("num_hidden_layers"),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=c.optional("head_dim", hidden // heads),
        vocab=c.dim("vocab_size"),
        ffn=c.dim("intermediate_size"),
        gated=True,
        norm="rms",
        tie_embeddings=c.flag("tie_word_embeddings", mtype == "gemma2"),
    )
    if mtype in ("llama", "mistral", "phi3"):  # phi3: fused qkv / gate_up, the same math
        bias = c.flag("attention_bias", False)
        window = mistral_sliding(c, common["layers"]) if mtype == "mistral" else {}
        mlp_bias = c.flag("mlp_bias", False)
        cfg = ModelConfig(**common | window, qkv_bias=bias, o_bias=bias, mlp_bias=mlp_bias)
    elif mtype == "mixtral":
        cfg = ModelConfig(
            **common | mistral_sliding(c, common["layers"]),
            experts=c.dim("num_local_experts"),
            experts_per_token=c.dim("num_experts_per_tok"),
            moe_ffn=c.dim("intermediate_size"),
        )
    elif mtype == "qwen2":
        window = qwen_sliding(c, common["layers"])
        cfg = ModelConfig(**common | window, qkv_bias=True)  # Qwen2 always has q/k/v biases
    elif mtype in ("qwen3", "qwen3_moe"):
        bias = c.flag("attention_bias", False)
        fields = _qwen3_moe(c, mtype) | qwen_sliding(c, common["layers"])
        cfg = ModelConfig(**common | fields, qkv_bias=bias, o_bias=bias, qk_norm=True)
    elif mtype == "gemma2":
        cfg = ModelConfig(**common | gemma2_sliding(c, common["layers"]), post_norms=True)
    elif mtype == "gpt_oss":
        cfg = ModelConfig(**common | gpt_oss_fields(c))
    elif mtype in ("llama4", "llama4_text"):
        cfg = ModelConfig(**common | llama4_fields(c))
    else:
        cfg = _deepseek(c, common)
    deepseek = dict.fromkeys(("deepseek_v2", "deepseek_v3", "kimi_k2"), "n_routed_experts")
    experts_key = (deepseek | {"qwen3_moe": "num_experts"}).get(mtype, "num_local_experts")
    return check_config(cfg, where, HF_NAMES | {"num_experts": experts_key})


def _qwen3_moe(c: ConfigReader, mtype: str) -> dict[str, Any]:
    """Qwen3-MoE's expert fields (none for dense qwen3): every layer sparse, no shared
    experts; other layer patterns are rejected, not approximated."""
    if mtype == "qwen3":
        return {}
    if c.optional("decoder_sparse_step", 1) != 1:
        raise SetupError(f"{c.where}: qwen3_moe decoder_sparse_step != 1 is not supported")
    if c.data.get("mlp_only_layers") not in (None, []):
        raise SetupError(f"{c.where}: qwen3_moe mlp_only_layers (dense layers) are not supported")
    return dict(
        experts=c.dim("num_experts"),
        experts_per_token=c.dim("num_experts_per_tok"),
        moe_ffn=c.dim("moe_intermediate_size"),
    )


def _deepseek(c: ConfigReader, common: dict[str, Any]) -> ModelConfig:
    """DeepSeek-V2 / V3 and Kimi K2 (V3's architecture under model_type kimi_k2): latent
    attention, shared + routed experts after leading dense layers (V3's multi-token-
    prediction module, num_nextn_predict_layers, is not part of the model that serves tokens
    and is not counted, as DeepSeek's 671B is not)."""
    experts = c.optional("n_routed_experts", 0)
    if experts and c.optional("moe_layer_freq", 1) != 1:
        raise SetupError(f"{c.where}: moe_layer_freq != 1 is not supported")
    moe = bool(experts)
    return ModelConfig(
        **common | {"head_dim": c.dim("qk_nope_head_dim") + c.dim("qk_rope_head_dim")},
        experts=experts,
        experts_per_token=c.optional("num_experts_per_tok", 0) if moe else 0,
        moe_ffn=c.dim("moe_intermediate_size") if moe else 0,
        shared_experts=c.optional("n_shared_experts", 0) if moe else 0,
        first_dense_layers=c.optional("first_k_dense_replace", 0) if moe else 0,
        q_lora_rank=c.optional("q_lora_rank", 0),
        kv_lora_rank=c.dim("kv_lora_rank"),
        qk_nope_head_dim=c.dim("qk_nope_head_dim"),
        qk_rope_head_dim=c.dim("qk_rope_head_dim"),
        v_head_dim=c.dim("v_head_dim"),
    )


def load_model(model: setup_pb2.Model, setup_path: Path, where: str) -> ModelConfig:
    """The model of a workload request; `where` is the field path of the Model message."""
    source = model.WhichOneof("source")
    if source == "inline":
        return from_spec(model.inline, f"{setup_path}: {where}.inline")
    if source == "hf_model":
        w = f"{setup_path}: {where}.hf_model"
        data, name, file = resolve_hf_model(model.hf_model, setup_path, w)
        return from_hf_config(data, name, w, file)
    raise SetupError(
        f"{setup_path}: {where} is missing; give `inline {{ ... }}` or "
        f'`hf_model: "Llama-3.1-8B"` (shipped: {", ".join(shipped_models())})'
    )
