"""Elementwise work in FP64 runs no faster than the chip's FP64 peak (found by fuzzing).

B300 holds FP64 at 1.25 TFLOP/s (HGX B300 per GPU) against 75 TFLOP/s of FP32 lanes: a
Phi-3-mini prefill in FP64 priced its norms and elementwise kernels at the FP32 rate and
reported a FLOP utilisation of 1.00035 of the FP64 peak. Where the FP64 peak equals the
vector rate (H100, H200: 66.9 TFLOP/s each; the HPL rows' H200) nothing changes.
"""

from __future__ import annotations

import pytest

import mapshard

PREFILL = """
workload { llm_inference { model { hf_model: "Phi-3-mini-4k-instruct" } phase: PREFILL
  input_len: 128 eager_activation: true eager_rope: true }
  precision { activation: FP8 kv_cache: TF32 math: FP64 } }
system { chip: "%s" num_chip: 1 }
execution { execution_style: KERNEL_BY_KERNEL }
"""


def test_fp64_elementwise_kernels_run_at_most_at_the_fp64_peak() -> None:
    result = mapshard.solve(PREFILL % "B300")
    vector = [
        k
        for ph in result.plan.phases
        for k in ph.kernels
        if k.kind in ("ELEMENTWISE", "NORM") and k.flop > 0 and k.time_source.startswith("peak")
    ]
    assert len(vector) >= 10
    for k in vector:  # uncalibrated: the peak itself
        assert k.flop / k.compute_s == pytest.approx(1.25e12, rel=1e-9), k.name
    assert result.summary["flops_utilization"] <= 1.0
