"""The model a validation row names: a shipped config when its dims match the row, else an
inline ModelSpec from the row's columns (mapshard.fidelity.scenarios builds the rest)."""

from __future__ import annotations

import json

from generator.hf_files import MODELS_DIR
from generator.models import ModelConfig, from_hf_config
from mapshard.fidelity.cases import Case, Unmodelable
from schema import setup_pb2


def _shipped(name: str) -> str:
    short = name.rsplit("/", 1)[-1]
    return short if (MODELS_DIR / short / "config.json").is_file() else ""


def _agrees(case: Case, config: ModelConfig, name: str) -> None:
    """The row's model columns that the shipped config also says must say the same (vocab
    apart: the schema's is padded as the FLOP convention counts it); Unmodelable naming the
    first that does not, rather than a prediction of the config that ignores it."""
    ffn = {config.ffn, config.moe_ffn} - {0}
    said = {
        "heads": {config.heads},
        "kv_heads": {config.kv_heads},
        # latent attention's query/key and value heads differ in width: either may be meant
        "head_dim": {config.head_dim, config.v_head_dim} - {0},
        "ffn_hidden": ffn,
        "experts": {config.experts},
        "experts_per_token": {config.experts_per_token},
    }
    for column, values in said.items():
        if case.has(column) and case.int(column) not in values:
            shown = " or ".join(str(v) for v in sorted(values))
            raise Unmodelable(
                f"{column} {case.int(column)} but {name}'s config has {shown}: the row's "
                "columns and its hf_config/local_config disagree"
            )


FFN_KINDS = {
    "gelu": setup_pb2.GELU,
    "swiglu": setup_pb2.SWIGLU,
    "squared_relu": setup_pb2.SQUARED_RELU,
}


def row_model(case: Case, msg: setup_pb2.Model) -> None:
    """A shipped config when the row names one and its dims match the row, else an inline
    ModelSpec from the columns; a row cutting the named model to fewer layers (layer rows
    keep one) keeps its per-head q/k norms (ModelSpec.qk_norm: Qwen3's), which the columns
    cannot say."""
    qk_norm, shared = False, case.int_extra("shared_experts", 0)
    for key in ("hf_config", "local_config"):
        name = _shipped(case.extra.get(key, ""))
        if not name:
            continue
        path = MODELS_DIR / name / "config.json"
        cfg = json.loads(path.read_text(encoding="utf-8"))
        if "shared_experts" in case.extra:  # a model fact its shipped config already says
            shipped = from_hf_config(cfg, name, str(path)).shared_experts
            if shared != shipped:
                raise Unmodelable(f"shared_experts={shared} but {name} has {shipped}")
        layers = cfg.get("num_hidden_layers", cfg.get("n_layer"))
        hidden = cfg.get("hidden_size", cfg.get("n_embd"))
        if layers == case.int("layers") and hidden == case.int("hidden"):
            _agrees(case, from_hf_config(cfg, name, str(path)), name)
            msg.hf_model = name
            return
        if hidden == case.int("hidden"):
            qk_norm = from_hf_config(cfg, name, str(path)).qk_norm
    for col in ("hidden", "layers", "heads", "ffn_hidden"):
        if case.int(col) <= 0:
            raise Unmodelable(f"model column {col} is empty and no shipped config matches")
    spec = msg.inline
    ffn_kind = case.text("ffn_kind") or "gelu"
    if ffn_kind not in FFN_KINDS:
        raise Unmodelable(f"ffn_kind {ffn_kind!r} is not {', '.join(FFN_KINDS)}")
    swiglu = ffn_kind == "swiglu"
    spec.name = case.text("model") or case.id
    # GELU rows are GPT-3 style (biases, learned positions); squared ReLU is Nemotron's
    # generic decoder: no biases, rotary positions (NeMo's nemotron yamls: bias false,
    # position_embedding_type rope), LayerNorm
    gpt = ffn_kind == "gelu"
    spec.architecture = "llama" if swiglu else "gpt2" if gpt else ""
    spec.hidden_size = case.int("hidden")
    spec.num_layers = case.int("layers")
    spec.num_heads = case.int("heads")
    spec.num_kv_heads = case.int("kv_heads") or case.int("heads")
    spec.head_dim = case.int("head_dim") or case.int("hidden") // case.int("heads")
    spec.intermediate_size = case.int("ffn_hidden")
    spec.vocab_size = case.int("vocab") or 51200  # layer rows: the head is not predicted
    spec.ffn = FFN_KINDS[ffn_kind]
    spec.norm = setup_pb2.RMSNORM if swiglu else setup_pb2.LAYERNORM
    if gpt:  # a table as long as the run (a request: its prompt and fed-back outputs)
        request = case.int("input_len") + max(case.int("output_len") - 1, 0)
        spec.max_position_embeddings = max(case.int("seq_len"), request, case.int("kv_len"), 2048)
    if case.int("experts") > 0:
        spec.num_experts = case.int("experts")
        spec.experts_per_token = case.int("experts_per_token")
        # shared experts, each as wide as a routed one (ModelSpec.num_shared_experts)
        spec.num_shared_experts = shared
    elif shared:
        raise Unmodelable(f"shared_experts={shared} on a model without experts")
    spec.qk_norm = qk_norm
