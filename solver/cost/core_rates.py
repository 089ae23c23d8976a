"""Per-SM instruction rates a chip's cores run at, from the CUDA C++ Programming Guide's
throughput table of native arithmetic instructions and the chip file's SMs and clock: the
type conversions of a per-query-head decode kernel and the exponentials of a fused
attention kernel's softmax (solver.cost.kernel_times)."""

from __future__ import annotations

from hardware.system import Chip

# Type conversions per clock per SM on the CUDA cores: "all other type conversions" in the
# CUDA C++ Programming Guide's throughput table of native arithmetic instructions (compute
# capability 8.x and 9.0); a chip's `core` count is its SM count.
CONVERSIONS_PER_CORE_CLOCK = 16
# Base-2 exponentials per clock per SM (the special-function units): "32-bit floating-point
# reciprocal, reciprocal square root, base-2 logarithm (__log2f), base 2 exponential
# (exp2f), sine (__sinf), cosine (__cosf)" in the same table, 16 for 8.x and 9.0: the
# softmax of a fused attention kernel takes one per score
EXP2_PER_CORE_CLOCK = 16


# FP32 FMA lanes per SM of compute capability 9.0 and 10.0 (the same table): a chip file
# without a clock gets its conversion rate from its FP32 rate, 2 FLOP per lane per clock.
FP32_LANES_PER_CORE = 128


def conversion_rate(chip: Chip) -> float:
    """Elements per second the chip's vector unit converts between number formats
    (`per_core_clock_rate` of CONVERSIONS_PER_CORE_CLOCK)."""
    return per_core_clock_rate(chip, CONVERSIONS_PER_CORE_CLOCK)


def exp_rate(chip: Chip) -> float:
    """Exponentials per second on the chip's special-function units
    (`per_core_clock_rate` of EXP2_PER_CORE_CLOCK)."""
    return per_core_clock_rate(chip, EXP2_PER_CORE_CLOCK)


def per_core_clock_rate(chip: Chip, per_clock: int) -> float:
    """Results per second of an instruction the guide rates at `per_clock` per clock per
    SM: SMs x that x the clock, or, without a clock in the chip file, the FP32 rate x that
    / (2 FP32_LANES_PER_CORE)."""
    if chip.frequency_Hz > 0:
        return chip.cores * per_clock * chip.frequency_Hz
    return chip.vector_flops * per_clock / (2 * FP32_LANES_PER_CORE)
