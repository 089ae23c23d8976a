"""The shipped model zoo (generator/models/): every config loads, and the generator's own
parameter counter (ModelInfo num_params / num_active_params) agrees with the figure each
model's publisher gives: model card, hub page (the safetensors parameter widget) or paper.

The published figures below are written by hand with their source, never read back from
the code. A published figure is a rounded or truncated value (Meta's "1.23B" for
1,235,814,400 truncates, Mistral's "141B" rounds), so a count matches when rounding or
truncating it to the figure's last digit gives the figure; "70B" has the precision of its
leading digit (Llama-2-70B is 68.98B); "1T" likewise (Kimi K2 is 1.026T). For DeepSeek,
Kimi K2 (DeepSeek-V3's architecture) and GPT-OSS the activated figure leaves out the input
embedding table (a lookup, no compute), as their publishers count it: OpenAI's card lists
"Embed + Unembed" 1.16B beside 5.13B active (120b), which only fits with the unembedding
alone counted active. Meta's Llama 4 Scout total (109B) includes a vision tower the
generator does not build; it is added by hand (NOT_GENERATED) before the comparison.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pytest

from generator.build import build_workload
from generator.graph import OperandRole, Pass
from generator.hf_files import MODELS_DIR, shipped_models
from generator.models import from_hf_config
from mapshard import cli
from mapshard.models_list import model_row
from schema import setup_pb2
from schema.errors import SetupError

# name: (published total, published active or None, source)
PUBLISHED = {
    "Llama-3.1-8B": ("8.03B", None, "hub page, meta-llama/Llama-3.1-8B"),
    "Llama-3.1-70B": ("70B", None, "model card, meta-llama/Llama-3.1-70B"),
    "Llama-3.1-405B": ("405B", None, "model card, meta-llama/Llama-3.1-405B"),
    "Llama-3.2-1B": ("1.23B", None, "model card table, meta-llama/Llama-3.2-1B"),
    "Llama-3.3-70B-Instruct": ("70B", None, "model card, meta-llama/Llama-3.3-70B-Instruct"),
    "Llama-2-7b-hf": ("7B", None, "Llama 2 paper, Table 1"),
    "Llama-2-70b-hf": ("70B", None, "Llama 2 paper, Table 1"),
    "GPT-3-175B-gpt2style": ("175B", None, "GPT-3 paper, Table 2.1"),
    "Mixtral-8x7B-v0.1": ("46.7B", "12.9B", "Mistral AI, Mixtral of experts (blog, paper)"),
    "Mixtral-8x22B-v0.1": ("141B", "39B", "Mistral AI, Cheaper, Better, Faster, Stronger"),
    "Mistral-Nemo-Base-2407": ("12B", None, "model card, mistralai/Mistral-Nemo-Base-2407"),
    "Phi-3-mini-4k-instruct": ("3.8B", None, "model card; Phi-3 technical report"),
    "phi-4": ("14.7B", None, "hub page, microsoft/phi-4 (model card: 14B)"),
    "Qwen2-7B": ("7.62B", None, "hub page, Qwen/Qwen2-7B"),
    "Qwen2.5-7B": ("7.61B", None, "model card, Qwen/Qwen2.5-7B"),
    "Qwen2.5-32B": ("32.8B", None, "hub page, Qwen/Qwen2.5-32B (card text: 32.5B)"),
    "Qwen2.5-72B": ("72.7B", None, "model card, Qwen/Qwen2.5-72B"),
    "Qwen3-8B": ("8.2B", None, "model card, Qwen/Qwen3-8B"),
    "Qwen3-32B": ("32.8B", None, "model card, Qwen/Qwen3-32B"),
    "Qwen3-30B-A3B": ("30.5B", "3.3B", "model card, Qwen/Qwen3-30B-A3B"),
    "Qwen3-235B-A22B": ("235B", "22B", "model card, Qwen/Qwen3-235B-A22B"),
    "DeepSeek-V2-Lite": ("15.7B", "2.4B", "model card, deepseek-ai/DeepSeek-V2-Lite"),
    "DeepSeek-V3": ("671B", "37B", "DeepSeek-V3 technical report, abstract"),
    "gemma-2-2b": ("2.6B", None, "Gemma 2 paper / model card"),
    "gemma-2-9b": ("9.24B", None, "hub page, google/gemma-2-9b"),
    "gemma-2-27b": ("27B", None, "Gemma 2 paper / model card"),
    "Kimi-K2-Instruct": ("1T", "32B", "model card, moonshotai/Kimi-K2-Instruct"),
    "gpt-oss-20b": ("20.9B", "3.6B", "gpt-oss-120b & gpt-oss-20b Model Card (OpenAI)"),
    "gpt-oss-120b": ("116.8B", "5.1B", "gpt-oss-120b & gpt-oss-20b Model Card (OpenAI)"),
    "Llama-4-Scout-17B-16E": ("109B", "17B", "model card, meta-llama/Llama-4-Scout-17B-16E"),
}


def _llama4_vision_tower() -> int:
    """Llama 4 Scout's vision encoder and projector by hand (its vision_config: 34 layers of
    width 1408, MLP 5632, 336 px images in 14 px patches, pixel shuffle 0.5 into a 4096-wide
    MLP, projected to the text width 5120): in Meta's 109B, never built by the generator."""
    width, mlp, layers, patches = 1408, 5632, 34, (336 // 14) ** 2 + 1
    layer = 4 * (width * width + width) + 2 * width * mlp + mlp + width + 2 * 2 * width
    stem = 3 * 14 * 14 * width + width + patches * width + 2 * 2 * width  # patches, class, LN
    adapter = mlp * 4096 + 4096 * 4096 + 4096 * 5120  # shuffle MLP (no biases), projector
    return layers * layer + stem + adapter


# weights in the published total that the generator leaves out (a vision tower)
NOT_GENERATED = {"Llama-4-Scout-17B-16E": _llama4_vision_tower()}

# models whose published activated figure leaves the input embedding out: their vocabulary
INPUT_EMBEDDING_NOT_ACTIVE = {
    "DeepSeek-V2-Lite": 102400,
    "DeepSeek-V3": 129280,
    "Kimi-K2-Instruct": 163840,
    "gpt-oss-20b": 201088,
    "gpt-oss-120b": 201088,
}


def matches(count: int, published: str) -> bool:
    """`count` rounds or truncates to `published` ("8.03B", "70B", "1T") at its last digit."""
    scale = Decimal(10) ** {"B": 9, "T": 12}[published[-1]]
    figure = Decimal(published[:-1])
    digits = figure.normalize().as_tuple()
    unit = Decimal(10) ** digits.exponent * scale
    scaled = Decimal(count) / unit
    target = figure * scale / unit
    return int(scaled + Decimal("0.5")) == target or math.floor(scaled) == target


def test_matches_rounds_or_truncates_at_the_last_digit():
    assert matches(8_030_261_248, "8.03B") and matches(68_976_648_192, "70B")
    assert matches(1_235_814_400, "1.23B") and not matches(1_245_000_000, "1.23B")
    assert not matches(8_600_000_000, "7B") and not matches(64_000_000_000, "70B")
    assert matches(1_026_000_000_000, "1T") and not matches(2_100_000_000_000, "1T")


def test_every_shipped_model_has_a_published_figure():
    assert set(shipped_models()) == set(PUBLISHED)
    assert len(PUBLISHED) >= 25


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_the_published_figure(name):
    total, active, source = PUBLISHED[name]
    row = model_row(name)
    params = row.params + NOT_GENERATED.get(name, 0)
    assert matches(params, total), (name, params, total, source)
    if active is None:
        assert row.active_params == row.params and not row.experts
        return
    assert row.experts and 0 < row.active_params < row.params
    counted = row.active_params
    if name in INPUT_EMBEDDING_NOT_ACTIVE:
        counted -= row.hidden * INPUT_EMBEDDING_NOT_ACTIVE[name]  # the input embedding table
    assert matches(counted, active), (name, counted, active, source)


def test_mapshard_models_lists_the_zoo(capsys):
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    for name in PUBLISHED:
        assert f"\n{name} " in out
    assert f"{len(PUBLISHED)} models" in out and len(PUBLISHED) >= 25


def _gpt_oss(layers: int, experts: int) -> tuple[int, int, dict[str, int]]:
    """(total, active without the input embedding, the card's component sums) of a GPT-OSS
    model by hand: hidden 2880, 64 query / 8 KV heads of 64, expert width 2880, top-4,
    vocabulary 201,088; every projection has a bias, each query head a sink logit."""
    hidden, heads, kv_heads, head_dim, ffn, vocab, k = 2880, 64, 8, 64, 2880, 201088, 4
    qkv = (heads + 2 * kv_heads) * head_dim
    attention = hidden * qkv + qkv + heads * head_dim * hidden + hidden + heads
    expert = hidden * 2 * ffn + 2 * ffn + ffn * hidden + hidden  # gate_up and down, biased
    router = hidden * experts + experts
    norms = 2 * hidden  # before attention and before the MLP
    total = layers * (attention + experts * expert + router + norms) + hidden + 2 * vocab * hidden
    active = layers * (attention + k * expert + router + norms) + hidden + vocab * hidden
    parts = {
        "mlp": layers * (experts * expert + router),
        "attention": layers * attention,
        "embed_unembed": 2 * vocab * hidden,
    }
    return total, active, parts


@pytest.mark.parametrize(
    "name,layers,experts,card",
    [
        # the card's Table 1: MLP, attention, embed + unembed, in billions (its totals and
        # active counts, 20.91B / 3.61B and 116.83B / 5.13B, are asserted below)
        ("gpt-oss-20b", 24, 32, {"mlp": "19.12B", "attention": "0.64B", "embed_unembed": "1.16B"}),
        (
            "gpt-oss-120b",
            36,
            128,
            {"mlp": "114.71B", "attention": "0.96B", "embed_unembed": "1.16B"},
        ),
    ],
)
def test_gpt_oss_counts_biases_and_sinks(name, layers, experts, card):
    total, active, parts = _gpt_oss(layers, experts)
    for part, figure in card.items():
        assert matches(parts[part], figure), (part, parts[part], figure)
    table = {"gpt-oss-20b": ("20.91B", "3.61B"), "gpt-oss-120b": ("116.83B", "5.13B")}[name]
    assert matches(total, table[0]) and matches(active, table[1])
    row = model_row(name)
    assert row.params == total
    assert row.active_params - row.hidden * INPUT_EMBEDDING_NOT_ACTIVE[name] == active


def test_kimi_k2_is_deepseek_v3_with_384_experts():
    """Kimi K2 by hand: MLA (q_lora 1536, kv_lora 512, 64 heads of 128 + 64 rope, values
    128), one dense layer of width 18432, then 60 layers of 384 routed experts (width 2048,
    top-8) and one shared, vocabulary 163,840, untied."""
    hidden, heads, vocab = 7168, 64, 163840
    mla = (
        hidden * 1536
        + 1536  # q_a and its norm
        + 1536 * heads * (128 + 64)  # q_b
        + hidden * (512 + 64)
        + 512  # kv_a (latent + rope key) and its norm
        + 512 * heads * (128 + 128)  # kv_b
        + heads * 128 * hidden  # o
    )
    per_layer = mla + 2 * hidden
    mlp = 3 * hidden  # gate, up, down per unit of width
    dense, expert, router = mlp * 18432, mlp * 2048, hidden * 384
    total = 61 * per_layer + dense + 60 * (385 * expert + router) + hidden + 2 * vocab * hidden
    active = 61 * per_layer + dense + 60 * (9 * expert + router) + hidden + 2 * vocab * hidden
    row = model_row("Kimi-K2-Instruct")
    assert (row.params, row.active_params) == (total, active)
    assert row.model_type == "kimi_k2" and (row.experts, row.experts_per_token) == (384, 8)


def _decode(name: str, context: int = 256, batch: int = 2):
    s = setup_pb2.Setup()
    req = s.workload.llm_inference
    req.model.hf_model = name
    req.phase, req.batch, req.context_len = setup_pb2.DECODE, batch, context
    return build_workload(s, Path("setup.txt"), 1)


def _weights(kernel) -> dict[str, tuple[str, ...]]:
    return {op.name: op.dims for op in kernel.operands if op.role == OperandRole.WEIGHT}


@pytest.mark.parametrize(
    "name", ["Kimi-K2-Instruct", "gpt-oss-20b", "gpt-oss-120b", "Llama-4-Scout-17B-16E"]
)
def test_new_models_generate_a_decode_step(name):
    w = _decode(name)
    layers = [p for p in w.phases if p.name.startswith("decode") and "head" not in p.name]
    assert sum(p.count for p in layers) == w.model.num_layers
    kernels = {k.name: k for p in layers for k in p.graph.kernels if k.pass_ == Pass.FWD}
    # attention reads the cache over the whole context (the KV write's operand has no kv_seq),
    # a sliding-window layer (GPT-OSS: 128 keys) over its window
    for p in layers:
        reads = [k for k in p.graph.kernels if "kv_seq" in k.dim_sizes]
        keys = 128 if p.name.endswith("_window") else 256
        assert reads and all(k.dim_sizes["kv_seq"] == keys for k in reads), p.name
        assert all(any(o.role == OperandRole.KV_CACHE for o in k.operands) for k in reads)
    if name.startswith("gpt-oss"):
        # one sink per query head on the attention kernel; biases on router and experts
        attn = [k for k in kernels.values() if "sinks" in _weights(k)]
        assert len(attn) == 1 and _weights(attn[0])["sinks"] == ("kv_heads", "group")
        assert attn[0].dim_sizes["kv_heads"] * attn[0].dim_sizes["group"] == 64
        assert _weights(kernels["router"])["bias"] == ("routes",)
        assert _weights(kernels["expert_gate_up"])["bias"] == ("experts", "gate_up", "ffn")
        assert _weights(kernels["expert_down"])["bias"] == ("experts", "hidden")
    elif name.startswith("Kimi"):
        assert [p.count for p in layers] == [1, 60]  # the dense layer, then the MoE layers
    else:  # Llama 4 Scout: every layer routed + shared experts
        assert [p.count for p in layers] == [48] and "shared_gate_up" in kernels


def test_llama4_scout_reads_the_text_config():
    """Scout's text decoder by hand: 48 layers of width 5120, 40 query / 8 KV heads of 128,
    every layer 16 routed experts (top-1) and one shared expert, each of width 8192; no
    biases, the q/k L2 norm has no weights; vocabulary 202,048, untied. With the vision tower
    (0.87B) it makes Meta's 109B; the text model alone is 107.8B."""
    hidden, vocab, expert = 5120, 202048, 3 * 5120 * 8192
    attention = hidden * (40 + 2 * 8) * 128 + 40 * 128 * hidden
    layer = attention + 2 * hidden + hidden * 16  # norms, router
    total = 48 * (layer + 17 * expert) + hidden + 2 * vocab * hidden
    active = 48 * (layer + 2 * expert) + hidden + 2 * vocab * hidden
    row = model_row("Llama-4-Scout-17B-16E")
    assert (row.params, row.active_params) == (total, active)
    assert not matches(row.params, "109B") and _llama4_vision_tower() == 871_932_416
    assert (row.layers, row.heads, row.kv_heads, row.experts) == (48, 40, 8, 16)


def _shipped(name: str) -> dict:
    return json.loads((MODELS_DIR / name / "config.json").read_text())


def test_new_readers_name_the_field_they_cannot_read():
    scout = _shipped("Llama-4-Scout-17B-16E")
    with pytest.raises(SetupError, match="text_config"):
        from_hf_config({k: v for k, v in scout.items() if k != "text_config"}, "x", "here")
    oss = _shipped("gpt-oss-20b") | {"layer_types": ["sliding_attention", "chunked_attention"]}
    with pytest.raises(SetupError, match="layer_types"):
        from_hf_config(oss, "x", "here")
    cfg = from_hf_config(_shipped("gpt-oss-20b"), "x", "here")
    assert (cfg.sliding_window, cfg.sliding_layers) == (128, 12)  # read, documented
    text_only = from_hf_config(scout["text_config"], "x", "here")  # a llama4_text checkpoint
    assert text_only.experts == 16 and text_only.shared_experts == 1


def test_a_deepseek_moe_without_its_expert_width_is_named():
    """DeepSeek-V2-Lite's config less moe_intermediate_size: a ValueError traceback (an
    expert FFN of width 0) before; now the missing field, named. A dense DeepSeek config
    (no routed experts) needs no expert width."""
    lite = _shipped("DeepSeek-V2-Lite")
    with pytest.raises(SetupError, match="no 'moe_intermediate_size'"):
        from_hf_config({k: v for k, v in lite.items() if k != "moe_intermediate_size"}, "x", "here")
    dense = {
        k: v for k, v in lite.items() if k not in ("moe_intermediate_size", "n_routed_experts")
    }
    assert from_hf_config(dense, "x", "here").experts == 0
