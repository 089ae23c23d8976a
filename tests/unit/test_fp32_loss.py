"""The training loss moves what Megatron-LM's vocab-parallel cross-entropy moves: the 16-bit
logits upcast to FP32, exp / sum / normalise passes over the FP32 copy, the FP32 softmax kept
for the backward, scaled in place and cast back to 16 bits
(megatron/core/tensor_parallel/cross_entropy.py, megatron/core/fusions/fused_cross_entropy.py).
Bytes per logit element derived by hand, BF16 logits (2 bytes), FP32 4 bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.build import build_workload
from generator.graph import Pass
from schema import setup_pb2

TOKENS, VOCAB = 128, 128256  # micro-batch 1 x 128 tokens; Llama-3.1-8B's vocabulary


def _head(math: int):
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    t.model.hf_model = "Llama-3.1-8B"
    t.global_batch, t.micro_batch, t.seq_len = 2, 1, TOKENS
    s.workload.precision.math = math
    s.system.chip, s.system.num_chip = "H100-SXM5-80GB", 1
    return next(p for p in build_workload(s, Path("setup.txt"), 1).phases if p.role == "head")


def _bytes_per_logit(kernel) -> float:
    """DRAM bytes of a kernel's operands per logit element."""
    total = sum(kernel.operand_elements(o) * o.bytes_per_element for o in kernel.operands)
    return total / (TOKENS * VOCAB)


@pytest.mark.parametrize("math", [setup_pb2.BF16, setup_pb2.FP8])
def test_loss_kernels_move_megatrons_fp32_bytes(math):
    kernels = {k.name: k for k in _head(math).graph.kernels if k.name.startswith("loss")}
    per = {n: _bytes_per_logit(k) for n, k in kernels.items()}
    rows = 4 / VOCAB  # one FP32 (or int32) value per row, spread over the row's logits
    expected = {
        "loss_upcast": 2 + 4,  # read bf16, write the FP32 copy
        "loss_exp": 4 + 4,  # exp(x - max) in place: read, write
        "loss_sum": 4 + rows,  # read for the row sum; write the sums
        "loss": 4 + 4 + 2 * rows,  # divide by the sum: read, write the softmax; sums, targets
        "loss_bwd": 4 + 4 + rows,  # scale the saved softmax in place; targets
        "loss_bwd_cast": 4 + 2,  # FP32 gradient back to the logits' bf16
    }
    assert per == pytest.approx(expected, rel=1e-12)
    fwd = sum(per[n] for n, k in kernels.items() if k.pass_ == Pass.FWD)
    bwd = sum(per[n] for n, k in kernels.items() if k.pass_ == Pass.BWD)
    assert fwd == pytest.approx(26 + 3 * rows)  # 6 + 8 + 4 + 8
    assert bwd == pytest.approx(14 + rows)  # 8 + 6


def test_the_backward_reads_the_fp32_softmax_and_feeds_the_lm_head_backward():
    graph = _head(setup_pb2.BF16).graph
    edges = {(e.src, e.dst, e.dst_operand): e.tensor_bytes for e in graph.edges}
    # the saved softmax is FP32: 128 x 128256 x 4 bytes
    assert edges[("loss", "loss_bwd", "softmax")] == TOKENS * VOCAB * 4
    assert ("loss_bwd", "loss_bwd_cast", "dlogits_fp32") in edges
    assert any(e.src == "loss_bwd_cast" and e.dst == "lm_head_bwd" for e in graph.edges)
    assert edges[("lm_head", "loss_upcast", "logits")] == TOKENS * VOCAB * 2
