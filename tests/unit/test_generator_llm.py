"""LLM generators: parameter counts, FLOP closed forms, KV-cache bytes, token accounting.

Expected numbers are derived independently: published/hand-computed parameter counts
(shared model notes: params.txt per model), Megatron's FLOP formula, and closed forms written
out here from the model dimensions.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from generator.build import build_workload
from generator.graph import KernelKind, OperandRole, Pass, Workload
from generator.moe_routing import expert_tokens
from schema import setup_pb2
from schema.errors import SetupError
from solver.cost.menus import sharding_choices

DATA = Path(__file__).parents[1] / "data" / "models"
GEMM_KINDS = (KernelKind.GEMM, KernelKind.BATCHED_GEMM, KernelKind.ATTENTION)


def inference(model: str, path: Path = Path("setup.txt"), precision=None, **kw) -> Workload:
    s = setup_pb2.Setup()
    s.workload.llm_inference.model.hf_model = model
    for key, value in kw.items():
        setattr(s.workload.llm_inference, key, value)
    if precision:
        s.workload.precision.CopyFrom(precision)
    return build_workload(s, path, 1)


def training(model: str, **kw) -> Workload:
    s = setup_pb2.Setup()
    s.workload.llm_training.model.hf_model = model
    for key, value in kw.items():
        setattr(s.workload.llm_training, key, value)
    return build_workload(s, Path("setup.txt"), 1)


def params_from_graphs(w: Workload, sparse_fraction: float = 1.0) -> int:
    """Sum of WEIGHT operand elements over the FWD kernels x count (layer phases and head);
    expert weights (leading `experts` dim) scaled by `sparse_fraction`."""
    total = 0.0
    seen_decode = any(p.name.startswith("prefill") for p in w.phases)
    for ph in w.phases:
        if seen_decode and ph.name.startswith("decode"):
            continue  # a request holds the same weights twice
        for k in ph.graph.kernels:
            if k.pass_ != Pass.FWD:
                continue
            for op in k.operands:
                if op.role == OperandRole.WEIGHT:
                    n = math.prod(k.dim_sizes[d] for d in op.dims)
                    frac = sparse_fraction if op.dims[:1] == ("experts",) else 1.0
                    total += n * frac * ph.count
    return round(total)


# (model, total params, active params); GPT-3 with the padded vocabulary 51200.
PUBLISHED = [
    ("Llama-3.1-8B", 8_030_261_248, None),
    ("Llama-3.1-70B", 70_553_706_496, None),
    ("Llama-2-7b-hf", 6_738_415_616, None),
    ("Llama-2-70b-hf", 68_976_648_192, None),
    ("Mixtral-8x7B-v0.1", 46_702_792_704, 12_879_925_248),
    ("GPT-3-175B-gpt2style", 174_615_846_912, None),
]


@pytest.mark.parametrize("model,total,active", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_parameter_counts_of_shipped_models(model, total, active):
    w = inference(model, phase=setup_pb2.PREFILL, batch=1, input_len=16)
    frac = 2 / 8 if model.startswith("Mixtral") else 1.0
    assert params_from_graphs(w) == total
    assert w.model.num_params == total
    assert params_from_graphs(w, frac) == (active or total)
    assert w.model.num_active_params == (active or total)


def _qwen2_7b() -> int:
    h, L, f, V, kv = 3584, 28, 18944, 152064, 4 * 128
    attn = (h * h + h) + 2 * (h * kv + kv) + h * h  # q,k,v with biases; o without
    return L * (attn + 3 * h * f + 2 * h) + h + 2 * V * h


def _gemma2_9b() -> int:
    h, L, f, V, q, kv = 3584, 42, 14336, 256000, 16 * 256, 8 * 256
    return L * (h * q + 2 * h * kv + q * h + 3 * h * f + 4 * h) + h + V * h  # tied


def _deepseek_v2_lite() -> tuple[int, int]:
    h, L, H, V = 2048, 27, 16, 102400
    attn = h * H * 192 + h * 576 + 512 + 512 * H * 256 + H * 128 * h + 2 * h
    dense = 3 * h * 10944
    routed, shared, gate = 64 * 3 * h * 1408, 3 * h * 2 * 1408, h * 64
    total = L * attn + dense + 26 * (routed + shared + gate) + h + 2 * V * h
    active = total - 26 * (64 - 6) * 3 * h * 1408
    return total, active


def test_parameter_counts_of_qwen2_gemma2_deepseek_v2():
    for name, total, published in (
        ("Qwen2-7B", _qwen2_7b(), 7.62e9),
        ("gemma-2-9b", _gemma2_9b(), 9.24e9),
    ):
        w = inference(str(DATA / name), phase=setup_pb2.DECODE, batch=2, context_len=64)
        assert params_from_graphs(w) == total == w.model.num_params
        assert total == pytest.approx(published, rel=2e-3)
    total, active = _deepseek_v2_lite()
    w = inference(str(DATA / "DeepSeek-V2-Lite"), phase=setup_pb2.PREFILL, batch=1, input_len=8)
    assert [p.name for p in w.phases] == ["prefill_dense", "prefill_moe", "prefill_head"]
    assert [p.count for p in w.phases] == [1, 26, 1]
    assert params_from_graphs(w) == total == w.model.num_params
    assert params_from_graphs(w, 6 / 64) == active == w.model.num_active_params
    assert total == pytest.approx(15.7e9, rel=5e-3)  # published: 15.7B total
    assert active - 102400 * 2048 == pytest.approx(2.4e9, rel=3e-2)  # 2.4B activated


def test_inline_spec_matches_config():
    s = setup_pb2.Setup()
    m = s.workload.llm_inference.model.inline
    m.architecture, m.hidden_size, m.num_layers, m.num_heads = "llama", 4096, 32, 32
    m.num_kv_heads, m.intermediate_size, m.vocab_size = 8, 14336, 128256
    s.workload.llm_inference.phase = setup_pb2.DECODE
    s.workload.llm_inference.context_len = 128
    assert build_workload(s, Path("x"), 1).model.num_params == 8_030_261_248
    g = s.workload.llm_inference.model.inline
    g.Clear()
    g.architecture, g.hidden_size, g.num_layers, g.num_heads = "gpt2", 12288, 96, 96
    g.intermediate_size, g.vocab_size, g.tie_embeddings, g.max_position_embeddings = (
        49152,
        51200,
        True,
        2048,
    )
    assert build_workload(s, Path("x"), 1).model.num_params == 174_615_846_912


def test_training_params_and_megatron_flops():
    """GPT-3 175B, b=1, s=2048, B=1536: full recompute equals Megatron eq. (3),
    96 B s l h^2 (1 + s/(6h) + V/(16 l h)); none = 6 N_gemm T + 12 l h s^2 B with
    N_gemm = 12 l h^2 + V h; selective adds the attention forward 4 l h s^2 B. Every mode
    also runs the fused attention backward's recompute of Q K^T, 2 l h s^2 B, which
    Megatron's model-FLOP count leaves out."""
    B, s, l, h, V = 1536, 2048, 96, 12288, 51200
    megatron = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    n_gemm = 12 * l * h * h + V * h
    none = 6 * n_gemm * B * s + 12 * l * h * s * s * B
    scores = 2 * l * h * s * s * B
    expected = {
        setup_pb2.RECOMPUTE_FULL: megatron + scores,
        setup_pb2.RECOMPUTE_NONE: none + scores,
        setup_pb2.RECOMPUTE_SELECTIVE: none + 4 * l * h * s * s * B + scores,
    }
    for rc, value in expected.items():
        w = training("GPT-3-175B-gpt2style", global_batch=B, micro_batch=1, seq_len=s, recompute=rc)
        per_micro = sum(
            k.flop * p.count for p in w.phases for k in p.graph.kernels if k.kind in GEMM_KINDS
        )
        assert per_micro * (w.global_batch // w.micro_batch) == pytest.approx(value, rel=1e-12)
        assert params_from_graphs(w) == 174_615_846_912
        assert [p.name for p in w.phases] == ["layer", "head"]
        assert w.phases[0].count == 96 and w.phases[1].role == "head"
    assert {k.pass_ for k in w.phases[0].graph.kernels} >= {Pass.FWD, Pass.BWD, Pass.WGRAD}


def test_training_gqa_flops_and_gradient_allreduce():
    """Llama-3.1-8B, micro-batch 2 x 1024, no recompute: 6 N_gemm T + 12 l H d s^2 b, plus
    the fused attention backward's recompute of Q K^T, 2 l H d s^2 b."""
    b, s, l, h, H, kv, d, f, V = 2, 1024, 32, 4096, 32, 8, 128, 14336, 128256
    n_gemm = l * (h * H * d + 2 * h * kv * d + H * d * h + 3 * h * f) + V * h
    w = training("Llama-3.1-8B", global_batch=8, micro_batch=b, seq_len=s)
    flop = sum(k.flop * p.count for p in w.phases for k in p.graph.kernels if k.kind in GEMM_KINDS)
    assert flop == pytest.approx(6 * n_gemm * b * s + 14 * l * H * d * s * s * b, rel=1e-12)
    layer = w.phases[0].graph
    wgrad = [k for k in layer.kernels if k.pass_ == Pass.WGRAD]
    grads = sum(k.communication_bytes for k in wgrad)
    assert all(
        k.communication.value == "ALL_REDUCE_PERIODIC" and k.communication_group == "dp"
        for k in wgrad
    )
    per_layer = h * H * d + 2 * h * kv * d + H * d * h + 3 * h * f + 2 * h
    assert grads == per_layer * 2  # BF16 gradients
    assert all(k.name.endswith("_weight_update") for k in wgrad)


def test_recompute_copies():
    full = (
        training(
            "Llama-2-7b-hf",
            global_batch=4,
            micro_batch=1,
            seq_len=256,
            recompute=setup_pb2.RECOMPUTE_FULL,
        )
        .phases[0]
        .graph
    )
    fwd = [k.name for k in full.kernels if k.pass_ == Pass.FWD]
    rec = [k.name for k in full.kernels if k.pass_ == Pass.RECOMPUTE]
    assert rec == [f"{n}_recompute" for n in fwd]
    sel = (
        training(
            "Llama-2-7b-hf",
            global_batch=4,
            micro_batch=1,
            seq_len=256,
            recompute=setup_pb2.RECOMPUTE_SELECTIVE,
        )
        .phases[0]
        .graph
    )
    assert [k.name for k in sel.kernels if k.pass_ == Pass.RECOMPUTE] == ["attention_recompute"]


def test_decode_flops_per_token_and_kv_bytes():
    """Llama-3.1-8B decode, batch 8 at context 1024: FLOP per token ~ 2 (N - V h) +
    4 L ctx H d; KV cache 2 L kv_heads d ctx bytes batch."""
    w = inference("Llama-3.1-8B", phase=setup_pb2.DECODE, batch=8, context_len=1024)
    L, V, h, H, kv, d = 32, 128256, 4096, 32, 8, 128
    per_token = 2 * (8_030_261_248 - V * h) + 4 * L * 1024 * H * d
    assert w.flop_per_step / 8 == pytest.approx(per_token, rel=5e-3)
    assert w.kv_cache_bytes == 2 * L * kv * d * 1024 * 2 * 8
    assert w.model.kv_bytes_per_token_per_layer == 2 * kv * d * 2
    g = w.phases[0].graph
    att = g.kernel("attention")
    assert att.kind == KernelKind.ATTENTION and att.kernel_class == "Va_Mqa"
    assert att.flop == 4 * 8 * 1 * 1024 * H * d
    assert {o.role for o in att.operands if o.name == "kv_cache"} == {OperandRole.KV_CACHE}
    assert att.kv_bytes == 2 * kv * d * 1024 * 8 * 2
    assert g.kernel("kv_write").kv_bytes == 2 * kv * d * 8 * 2
    assert g.kernel("q_proj").kernel_class == "Va_Mw"
    assert g.kernel("attn_norm").shardable_dims == ("tokens",)
    assert "kv_heads" in g.kernel("q_proj").shardable_dims
    assert "ffn" in g.kernel("mlp_gate_up").shardable_dims


def test_mla_kv_cache_bytes():
    w = inference(str(DATA / "DeepSeek-V2-Lite"), phase=setup_pb2.DECODE, batch=4, context_len=512)
    assert w.kv_cache_bytes == 27 * (512 + 64) * 512 * 2 * 4
    assert w.model.attention == "mla"
    att = w.phases[1].graph.kernel("attention")
    assert att.kv_bytes == (512 + 64) * 512 * 4 * 2
    assert att.flop == 2 * 4 * 512 * 16 * (512 + 64 + 512)


def test_chunked_prefill_token_accounting():
    """Hand-checked: chunk 8 of a 20-token prompt (12 cached before it) + 3 decode tokens at
    context 10; heads 4 (2 KV heads, dim 16), 2 layers."""
    s = setup_pb2.Setup()
    r = s.workload.llm_inference
    m = r.model.inline
    m.hidden_size, m.num_layers, m.num_heads, m.num_kv_heads = 64, 2, 4, 2
    m.intermediate_size, m.vocab_size = 128, 100
    r.phase, r.chunk_size, r.input_len, r.decode_batch, r.context_len = (
        setup_pb2.CHUNKED_PREFILL,
        8,
        20,
        3,
        10,
    )
    w = build_workload(s, Path("x"), 1)
    layer, head = w.phases
    g = layer.graph
    assert layer.count == 2 and head.role == "head"
    assert g.kernel("q_proj").dim_sizes["tokens"] == 11
    assert g.kernel("kv_write").dim_sizes["tokens"] == 11
    pre, dec = g.kernel("attention_prefill"), g.kernel("attention_decode")
    assert (pre.dim_sizes["batch"], pre.dim_sizes["q_seq"], pre.dim_sizes["kv_seq"]) == (1, 8, 20)
    assert (dec.dim_sizes["batch"], dec.dim_sizes["q_seq"], dec.dim_sizes["kv_seq"]) == (3, 1, 10)
    assert pre.flop == 4 * 8 * 20 * 4 * 16 and dec.flop == 4 * 3 * 10 * 4 * 16
    assert head.graph.kernel("embedding").dim_sizes["tokens"] == 11
    assert head.graph.kernel("lm_head").dim_sizes["tokens"] == 4
    assert w.kv_cache_bytes == 2 * 2 * 2 * 16 * (20 + 3 * 10) * 2
    assert sorted(e.src for e in g.edges if e.dst == "o_proj") == sorted(
        ["attention_prefill", "attention_decode"]
    )


def test_request_mean_context_gives_exact_attention_sum():
    I, O, b, H, d = 100, 10, 2, 32, 128
    w = inference("Llama-3.1-8B", phase=setup_pb2.REQUEST, batch=b, input_len=I, output_len=O)
    names = [p.name for p in w.phases]
    assert names == ["prefill", "prefill_head", "decode", "decode_head"]
    dec = w.phases[2]
    assert dec.steps == O - 1 and w.phases[3].steps == O - 1
    exact = sum(4 * b * (I + j) * H * d for j in range(1, O))
    assert dec.graph.kernel("attention").flop * dec.steps == exact
    assert w.kv_cache_bytes == 2 * 32 * 8 * 128 * (I + O - 1) * 2 * b
    assert w.phases[1].graph.kernel("lm_head").dim_sizes["tokens"] == b


def test_mixed_precision_bytes():
    p = setup_pb2.Precision(
        weight=setup_pb2.INT4, activation=setup_pb2.BF16, kv_cache=setup_pb2.FP8
    )
    w = inference("Llama-3.1-8B", phase=setup_pb2.DECODE, batch=1, context_len=64, precision=p)
    g = w.phases[0].graph
    q = g.kernel("q_proj")
    assert q.operand("weight").bytes_per_element == 0.5
    assert q.operand("in").bytes_per_element == 2
    assert g.kernel("attention").operand("kv_cache").bytes_per_element == 1
    assert w.kv_cache_bytes == 2 * 32 * 8 * 128 * 64 * 1
    assert w.weight_bytes_per_param == 0.5 and w.compute_dtype == "BF16"


def test_moe_capacity_and_dispatch_all_to_all():
    assert expert_tokens(10, 2, 8, 0) == 3
    assert expert_tokens(8, 2, 8, 0) == 2
    assert expert_tokens(10, 2, 8, 1.25) == 4  # ceil(3.125)
    assert expert_tokens(16, 2, 8, 1.0) == 4
    w = inference("Mixtral-8x7B-v0.1", phase=setup_pb2.DECODE, batch=8, context_len=128)
    g = w.phases[0].graph
    up = g.kernel("expert_gate_up")
    assert up.kind == KernelKind.BATCHED_GEMM
    assert up.dim_sizes["experts"] == 8 and up.dim_sizes["expert_tokens"] == 2
    assert up.flop == 2 * (8 * 2) * 4096 * 2 * 14336
    disp = g.kernel("dispatch")
    assert disp.communication.value == "ALL_TO_ALL" and disp.communication_group == "ep"
    assert disp.communication_bytes == 8 * 2 * 4096 * 2
    assert g.kernel("router").operand("weight").dims == ("hidden", "experts")


def test_hub_id_offline_not_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    with pytest.raises(SetupError) as err:
        inference("some-org/not-a-model", phase=setup_pb2.DECODE, context_len=8)
    msg = str(err.value)
    assert "some-org/not-a-model" in msg and "config.json" in msg and "folder" in msg
    # a hub id whose model is shipped resolves without the network
    w = inference("meta-llama/Llama-3.1-8B", phase=setup_pb2.DECODE, context_len=8)
    assert w.model.num_params == 8_030_261_248


def test_model_source_errors(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text('{"model_type": "bert", "hidden_size": 8}')
    with pytest.raises(SetupError, match="supported: llama, mistral, mixtral"):
        inference("m", path=tmp_path / "setup.txt", phase=setup_pb2.DECODE, context_len=8)
    with pytest.raises(SetupError, match="neither a file or folder"):
        inference("nope", path=tmp_path / "setup.txt", phase=setup_pb2.DECODE, context_len=8)
    s = setup_pb2.Setup()
    s.workload.llm_training.model.inline.hidden_size = -1
    s.workload.llm_training.seq_len = 8
    s.workload.llm_training.global_batch = 1
    with pytest.raises(SetupError) as err:
        build_workload(s, Path("cfg/setup.txt"), 1)
    assert any(
        "workload.llm_training.model.inline.hidden_size must be > 0" in p
        for p in err.value.problems
    )
    assert len(err.value.problems) >= 3  # every problem at once


def test_without_sequence_parallelism_vector_kernels_split_only_on_model_parallel_dims():
    """sequence_parallel: false means Megatron-LM's layout for norms, residual adds and
    dropouts: whole on every TP rank; with it they may split on tokens."""
    plain = training("Llama-3.1-8B", global_batch=8, seq_len=128, sequence_parallel=False)
    sp = training("Llama-3.1-8B", global_batch=8, seq_len=128, sequence_parallel=True)
    layer, layer_sp = plain.phases[0].graph, sp.phases[0].graph
    norm, norm_sp = layer.kernel("attn_norm"), layer_sp.kernel("attn_norm")
    assert sharding_choices(norm, 8) == ["none"]
    assert "tokens" in sharding_choices(norm_sp, 8)
    act = layer.kernel("mlp_act")  # follows the column-parallel GEMM: split on ffn
    assert sharding_choices(act, 8) == ["none", "ffn"]
    q = layer.kernel("q_proj")  # matrix kernels stay free
    assert "tokens" in sharding_choices(q, 8)


def _qwen3_30b_inline(s: setup_pb2.Setup, **fields: object) -> None:
    m = s.workload.llm_inference.model.inline
    m.architecture, m.hidden_size, m.num_layers, m.num_heads = "llama", 2048, 48, 32
    m.num_kv_heads, m.head_dim, m.intermediate_size, m.vocab_size = 4, 128, 768, 151936
    m.num_experts, m.experts_per_token = 128, 8
    for name, value in fields.items():
        setattr(m, name, value)
    s.workload.llm_inference.phase = setup_pb2.DECODE
    s.workload.llm_inference.context_len = 128


def test_inline_qk_norm_adds_the_per_head_norms():
    """Qwen3-30B-A3B inline: 30,532,122,624 parameters (the shipped config's count) with
    its q/k norms, 48 layers x 2 x head_dim 128 fewer without; the architecture name
    alone implies them."""
    counts = {}
    for label, fields in (
        ("llama", {}),
        ("qk_norm", {"qk_norm": True}),
        ("qwen3_moe", {"architecture": "qwen3_moe"}),
    ):
        s = setup_pb2.Setup()
        _qwen3_30b_inline(s, **fields)
        w = build_workload(s, Path("x"), 1)
        counts[label] = w.model.num_params
        names = {k.name for p in w.phases for k in p.graph.kernels}
        assert ({"q_norm", "k_norm"} <= names) == (label != "llama")
    assert counts["qk_norm"] == counts["qwen3_moe"] == 30_532_122_624
    assert counts["qk_norm"] - counts["llama"] == 48 * 2 * 128
