"""Fused attention computes in 16 bits under FP8 GEMMs (issue #16: it was priced at the FP8
peak): its best rate is the BF16 peak times the attention efficiency, by hand."""

from __future__ import annotations

import pytest

from generator.graph import Kernel, KernelKind, Operand, OperandRole
from hardware.system import Chip, Efficiency
from solver.cost.kernel_times import attention_precision
from solver.cost.menus import best_compute_rate

CHIP = Chip(
    "t",
    cores=132,
    peak_flops={"bf16": 1000e12, "fp8": 2000e12},
    vector_flops=60e12,
    sram_bytes=5e7,
    frequency_Hz=1.8e9,
    efficiency=Efficiency(gemm_util=0.8, attention_util=0.5),
)


def _kernel(kind: KernelKind) -> Kernel:
    ops = (
        Operand("q", OperandRole.INPUT, ("s", "d"), 1.0),
        Operand("o", OperandRole.OUTPUT, ("s", "d"), 1.0),
    )
    return Kernel("k", kind, (("s", 4096), ("d", 128)), ops, flop=4 * 4096 * 4096 * 128)


def test_fused_attention_runs_at_the_16_bit_peak_under_fp8() -> None:
    rate = best_compute_rate(_kernel(KernelKind.ATTENTION), CHIP, "fp8")
    assert rate == pytest.approx(1000e12 * 0.5)  # not 2000e12 * 0.5


def test_16_bit_math_is_unchanged() -> None:
    assert attention_precision("bf16") == "bf16" and attention_precision("fp8") == "bf16"
    assert best_compute_rate(_kernel(KernelKind.ATTENTION), CHIP, "bf16") == pytest.approx(500e12)
