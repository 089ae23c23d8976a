"""Unfused attention and dropout in the LLM generators (Megatron-era stacks), by hand.

A tiny GPT-2-style model (h = 64, 4 heads of 16, f = 256, vocab 100) at micro-batch
b = 2 x s = 16 tokens: the scores hold E = b x heads x s^2 = 2048 elements per layer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.build import build_workload
from generator.graph import KernelKind, OperandRole, Pass, Workload
from schema import setup_pb2
from schema.errors import SetupError
from solver.search import footprint
from solver.search.parallel import Choice

GEMM_KINDS = (KernelKind.GEMM, KernelKind.BATCHED_GEMM, KernelKind.ATTENTION)
B, S, H, HEADS, D, F, L, V = 2, 16, 64, 4, 16, 256, 2, 100
E = B * HEADS * S * S  # score elements per layer and micro-batch
T = B * S


def tiny(**kw) -> Workload:
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    m = t.model.inline
    m.name, m.architecture, m.hidden_size, m.num_layers = "tiny", "gpt2", H, L
    m.num_heads, m.num_kv_heads, m.intermediate_size, m.vocab_size = HEADS, HEADS, F, V
    m.ffn, m.norm, m.max_position_embeddings = setup_pb2.GELU, setup_pb2.LAYERNORM, S
    t.global_batch, t.micro_batch, t.seq_len = 4, B, S
    for key, value in kw.items():
        setattr(t, key, value)
    return build_workload(s, Path("setup.txt"), 1)


def unfused(**kw) -> Workload:
    return tiny(attention=setup_pb2.UNFUSED_ATTENTION, dropout=0.1, **kw)


def test_unfused_forward_is_scores_softmax_dropout_context():
    g = unfused().phases[0].graph
    fwd = [k.name for k in g.kernels if k.pass_ == Pass.FWD]
    i = fwd.index("attention_scores")
    assert fwd[i : i + 4] == [
        "attention_scores",
        "attention_softmax",
        "attention_dropout",
        "attention_context",
    ]
    assert "attention" not in fwd
    scores, soft, drop, ctx = (g.kernel(n) for n in fwd[i : i + 4])
    assert scores.kind == ctx.kind == KernelKind.BATCHED_GEMM
    assert scores.flop == ctx.flop == 2 * E * D
    # scores written at 2 bytes, softmax reads and writes them, dropout adds a 1-byte mask
    assert scores.operand_bytes(scores.outputs[0]) == 2 * E
    assert soft.flop == 5 * E and drop.flop == 2 * E
    assert [(o.name, o.bytes_per_element) for o in drop.outputs] == [("out", 2.0), ("mask", 1.0)]
    assert sum(drop.operand_bytes(o) for o in drop.operands) == (2 + 2 + 1) * E


def test_unfused_backward_reads_the_mask_and_the_probabilities():
    g = unfused().phases[0].graph
    bwd = {k.name: k for k in g.kernels if k.pass_ == Pass.BWD}
    dmask = bwd["attention_dropout_bwd"]
    assert dmask.operand("mask").role == OperandRole.INPUT
    assert sum(dmask.operand_bytes(o) for o in dmask.operands) == (2 + 1 + 2) * E
    assert set(bwd["attention_softmax_bwd"].operand("probs").dims) == {
        "batch",
        "heads",
        "q_seq",
        "kv_seq",
    }
    # dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q: four batched GEMMs of 2 E D each
    for name in ("attention_context_bwd", "attention_context_bwd2"):
        assert bwd[name].flop == 2 * E * D
    for name in ("attention_scores_bwd", "attention_scores_bwd2"):
        assert bwd[name].flop == 2 * E * D
    # hidden dropout: both residual branches get a masked gradient kernel
    assert {"attn_residual_dropout_bwd", "mlp_residual_dropout_bwd"} <= set(bwd)


def test_unfused_keeps_the_matrix_flop_of_every_recompute_mode():
    """6 N_gemm T + 12 l h s^2 b (none), + 4 l h s^2 b (selective), + 2 N_gemm T + 4 l h s^2 b
    (full) for the unfused stack, whose two batched GEMMs carry the attention FLOP; the fused
    kernel's backward also recomputes Q K^T (it keeps no probabilities): + 2 l h s^2 b, its
    backward 2.5x the forward's 4 l h s^2 b instead of 2x."""
    n_layer = 4 * H * H + 2 * H * F  # q, kv, o (4 h^2) + up, down (2 h f)
    n_gemm = L * n_layer + V * H
    none = 6 * n_gemm * T + 12 * L * H * S * S * B
    recomputed_scores = 2 * L * H * S * S * B
    for rc, extra in (
        (setup_pb2.RECOMPUTE_NONE, 0),
        (setup_pb2.RECOMPUTE_SELECTIVE, 4 * L * H * S * S * B),
        (setup_pb2.RECOMPUTE_FULL, 2 * L * n_layer * T + 4 * L * H * S * S * B),
    ):
        for w, fused in ((tiny(recompute=rc), recomputed_scores), (unfused(recompute=rc), 0)):
            flop = sum(
                k.flop * p.count for p in w.phases for k in p.graph.kernels if k.kind in GEMM_KINDS
            )
            assert flop == none + extra + fused, rc


def test_selective_recompute_copies_the_unfused_core():
    g = unfused(recompute=setup_pb2.RECOMPUTE_SELECTIVE).phases[0].graph
    rec = [k.name for k in g.kernels if k.pass_ == Pass.RECOMPUTE]
    core = ["attention_scores", "attention_softmax", "attention_dropout", "attention_context"]
    assert rec == [f"{n}_recompute" for n in core]
    # the backward reads the recomputed probabilities
    dv = g.kernel("attention_context_bwd2")
    assert dv.operand("probs").role == OperandRole.INPUT
    srcs = {e.src for e in g.edges if e.dst == "attention_context_bwd2"}
    assert "attention_dropout_recompute" in srcs


def _activation_bytes(w: Workload) -> float:
    choice = Choice(degrees=(("TP", 1), ("PP", 1), ("DP", 1)), spans=(), levels=())
    return footprint.memory_use(w, choice, 1e12).activations


def test_selective_recompute_keeps_nothing_of_the_attention_core():
    """Per layer the core keeps for its backward the probabilities and kept values (2 bytes
    each per score element), the 1-byte mask, and the context (T x h at 2 bytes): Korthikanti
    et al. 2022's 2as^2b + 2as^2b + as^2b. The scores are freed once the softmax ran (its
    backward reads the probabilities), so they count in neither mode."""
    core = (2 + 2 + 1) * E + 2 * T * H
    none = _activation_bytes(unfused())
    selective = _activation_bytes(unfused(recompute=setup_pb2.RECOMPUTE_SELECTIVE))
    assert none - selective == pytest.approx(L * core)


def test_fused_attention_has_no_scores_in_memory():
    g = tiny(dropout=0.1).phases[0].graph
    assert "attention" in {k.name for k in g.kernels}
    assert not [k for k in g.kernels if k.kind == KernelKind.SOFTMAX]
    # hidden dropout still writes its masks: the residual adds have a second output
    assert [o.name for o in g.kernel("attn_residual").outputs] == ["out", "mask"]


def test_unfused_decode_reads_keys_and_values_from_the_cache():
    s = setup_pb2.Setup()
    i = s.workload.llm_inference
    i.model.hf_model = "Llama-3.1-8B"
    i.phase, i.batch, i.context_len = setup_pb2.DECODE, 4, 512
    i.attention = setup_pb2.UNFUSED_ATTENTION
    g = build_workload(s, Path("setup.txt"), 1).phases[0].graph
    scores, ctx = g.kernel("attention_scores"), g.kernel("attention_context")
    assert scores.operand("k_cache").role == ctx.operand("v_cache").role == OperandRole.KV_CACHE
    # keys and values of 8 KV heads x 128 dims x 512 tokens x 4 sequences, 2 bytes each
    kv = sum(
        k.operand_bytes(o) for k in (scores, ctx) for o in k.operands if o.role.name == "KV_CACHE"
    )
    assert kv == 2 * 8 * 128 * 512 * 4 * 2
    assert scores.dim_sizes["q_seq"] == 1 and scores.flop == 2 * 4 * 32 * 512 * 128


def test_dropout_out_of_range_is_bad_input():
    with pytest.raises(SetupError, match="dropout must be a probability"):
        tiny(dropout=1.5)
