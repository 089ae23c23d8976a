"""Energy is modelled (power x time x utilisation, mapshard/report/energy.py) or said to be
not modelled; an unpriced system reads "not priced"; never "0 J" or "$0"."""

from __future__ import annotations

import math

import pytest

import mapshard
from mapshard.report.terminal import format_summary

# M=8, K=N=4096 BF16 on a 100 TFLOP/s, 1 TB/s chip with a 64 MiB buffer: the traffic is the
# compulsory MK + KN + MN = 16,842,752 elements = 33,685,504 B -> 33.69 us; compute
# 2*8*4096*4096 / 100e12 = 2.684 us.
MEMORY_S = 33_685_504 / 1e12
COMPUTE_S = 2 * 8 * 4096 * 4096 / 100e12
CHIP = (
    "workload { gemm { M: 8 K: 4096 N: 4096 } } "
    "system { num_chip: 1 accelerator { core: 1 systolic_width: 1 systolic_height: 1 "
    "sram_cap: 67108864 freq: 1 bf16_tflops: 100 vector_tflops: 10 } "
    "memory { dram_bw: 1000 dram_cap: 80e9 } } "
)


@pytest.mark.parametrize("overlap", [True, False])
def test_energy_is_power_times_busy_time(overlap: bool) -> None:
    # 500 W; busy time = max(compute, memory) = 33.69 us whatever the overlap:
    #   overlap:    T = max(2.684, 33.69) = 33.69 us, u = 1       -> E = 500 * 33.69 us
    #   no overlap: T = 2.684 + 33.69 = 36.37 us,  u = 33.69/36.37 -> E = 500 * 33.69 us
    # = 16.84 mJ either way.
    flag = "true" if overlap else "false"
    r = mapshard.solve(
        CHIP + "cost { accelerator_power: 500 } "
        f"execution {{ execution_style: KERNEL_BY_KERNEL perfect_overlap: {flag} }}"
    )
    latency = MEMORY_S if overlap else MEMORY_S + COMPUTE_S
    assert math.isclose(r.summary["latency_s"], latency, rel_tol=1e-9)
    assert math.isclose(r.summary["energy_J"], 500 * MEMORY_S, rel_tol=1e-9)
    assert math.isclose(r.summary["energy_J"], 0.0168427520, rel_tol=1e-9)
    assert math.isclose(r.summary["energy_utilisation"], MEMORY_S / latency, rel_tol=1e-9)
    assert r.summary["energy_model"] == "system power x step time x utilisation"
    assert "16.8 mJ" in format_summary(r.plan, color=False)


def test_per_op_energies_win_over_power() -> None:
    # 1 pJ/FLOP and 10 pJ/byte: 268,435,456 FLOP * 1e-12 + 33,685,504 B * 1e-11 = 0.6053 mJ
    r = mapshard.solve(
        CHIP + "cost { accelerator_power: 500 energy_per_flop_pJ: 1 energy_per_dram_byte_pJ: 10 }"
    )
    expected = 2 * 8 * 4096 * 4096 * 1e-12 + 33_685_504 * 10e-12
    assert math.isclose(r.summary["energy_J"], expected, rel_tol=1e-9)
    assert r.summary["energy_model"].startswith("per-op energies")


def test_no_power_no_price_says_so() -> None:
    r = mapshard.solve(CHIP)
    assert r.summary["energy_J"] is None and r.summary["energy_model"] == "not modelled"
    text = format_summary(r.plan, color=False)
    assert "System cost not priced, power not modelled, energy per step not modelled" in text
    assert "System Cost not priced" in text and "System Power not modelled" in text
    assert " 0 J" not in text and "$0" not in text


def test_library_chip_without_price_reads_not_priced_with_energy_from_tdp() -> None:
    # H100-SXM: 700 W TDP in the library, no price
    r = mapshard.solve('workload { gemm { M: 8 K: 4096 N: 4096 } } system { chip: "H100" }')
    s = r.summary
    assert s["system_power_W"] == 700.0
    expected = 700.0 * s["latency_s"] * s["energy_utilisation"]
    assert math.isclose(s["energy_J"], expected, rel_tol=1e-12) and s["energy_J"] > 0
    assert "System cost not priced" in format_summary(r.plan, color=False)
