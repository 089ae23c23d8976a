"""A tiny Llama-style training setup for the parallelism tests (ZeRO, CP, interleaving)."""

from __future__ import annotations

from pathlib import Path

from generator.build import build_workload
from generator.graph import Workload
from schema import setup_pb2


def tiny_training(
    cp: int = 1,
    zero: int = 0,
    v: int = 1,
    chips: int = 1,
    math: int = 0,
    recompute: int | None = None,
) -> Workload:
    """4 layers, hidden 256, 4 heads of 64 (MHA), SwiGLU 512, vocab 1000; 2 sequences of
    128 tokens per micro-batch, global batch 16. `math`: a DType for workload.precision.math
    (0 = the default); `recompute`: a Recompute value (None = left unset)."""
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    m = t.model.inline
    m.name, m.architecture, m.hidden_size, m.num_layers = "tiny", "llama", 256, 4
    m.num_heads, m.num_kv_heads, m.intermediate_size, m.vocab_size = 4, 4, 512, 1000
    m.ffn, m.norm = setup_pb2.SWIGLU, setup_pb2.RMSNORM
    t.global_batch, t.micro_batch, t.seq_len = 16, 2, 128
    t.context_parallel, t.zero_stage, t.virtual_pipeline = cp, zero, v
    if recompute is not None:
        t.recompute = recompute
    if math:
        s.workload.precision.math = math
    return build_workload(s, Path("setup.txt"), chips)
