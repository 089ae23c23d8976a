"""The up-front refusal of kernels the tiling frontier cannot count in 64-bit integers: it
judges a matrix kernel's M*K*N (generator.build.MAX_LOOP_POINTS = 2^62), not a product of
every dim of a kernel priced in floats."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import MAX_LOOP_POINTS, build_workload
from generator.graph import KernelKind
from schema import setup_pb2
from schema.errors import SetupError


def _build(text: str, num_chips: int = 1):
    return build_workload(text_format.Parse(text, setup_pb2.Setup()), Path("setup.txt"), num_chips)


def test_long_mla_prefill_builds():
    """DeepSeek-V2-Lite, 4 prompts of 131,072 tokens: its attention's dims multiply to
    4 x 131072^2 x 16 x 128 x 192 x 320 = 8.65e18 >= 2^62, yet its FLOP is ~1e15 a layer
    and it is no matrix kernel the frontier counts. It was refused as a typo."""
    w = _build(
        'workload { llm_inference { model { hf_model: "DeepSeek-V2-Lite" } phase: PREFILL '
        "batch: 4 input_len: 131072 } }",
        8,
    )
    attention = [k for p in w.phases for k in p.graph.kernels if k.kind == KernelKind.ATTENTION]
    assert attention
    points = 1
    for _, size in attention[0].dims:
        points *= size
    assert points >= MAX_LOOP_POINTS  # the old all-dims count refused it
    assert attention[0].flop < 2e15


def test_a_gemm_over_the_frontier_is_refused():
    """M = K = 3e9, N = 16: 1.44e20 M*K*N points > 2^62 = 4.61e18."""
    with pytest.raises(SetupError, match=r"1\.44e\+20 M x K x N points"):
        _build("workload { gemm { M: 3000000000 K: 3000000000 N: 16 } }")


def test_batch_dims_are_not_frontier_points():
    """A batched GEMM's frontier is one batch slice's: 2^20 slices of 2^14 x 2^14 x 2^14
    (2^42 points each, 2^62 in all) builds."""
    w = _build("workload { gemm { batch: 1048576 M: 16384 K: 16384 N: 16384 } }")
    (kernel,) = w.phases[0].graph.kernels
    assert kernel.flop == pytest.approx(2.0 * 2**62)
