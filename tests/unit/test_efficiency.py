"""The achievable-efficiency model (solver/cost/efficiency.py) against hand computations."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from hardware.resolve import resolve_system
from hardware.system import Chip, Efficiency
from mapshard import pipeline
from schema import setup_pb2
from schema.errors import SetupError
from solver.cost import efficiency as ef
from solver.cost.efficiency import (
    attention_efficiency,
    dram_efficiency,
    for_precision,
    gemm_efficiency,
    k_rolloff,
    occupancy,
    tile_candidates,
    vector_efficiency,
)


def chip(**eff) -> Chip:
    return Chip(
        "t",
        cores=108,
        peak_flops={"bf16": 312e12},
        vector_flops=19.5e12,
        sram_bytes=1e7,
        frequency_Hz=1.41e9,
        efficiency=Efficiency(**eff),
    )


def test_roofline_chip_is_efficiency_one():
    c = chip()
    assert gemm_efficiency(c, 8192, 8192, 8192) == 1.0
    assert attention_efficiency(c) == 1.0 and dram_efficiency(c) == 1.0
    assert vector_efficiency(c) == 1.0


def test_tile_candidates_are_the_tile_its_halves_and_transposes():
    assert tile_candidates(128, 256) == [(128, 256), (128, 128), (256, 128)]
    # a 4:1 half only where its short side spans the GEMM's whole m (decode) or n
    assert (64, 256) in tile_candidates(128, 256, m=64, n=4096)
    assert (256, 64) in tile_candidates(128, 256, m=4096, n=64)
    assert (256, 64) not in tile_candidates(128, 256, m=4096, n=192)


def test_n192_pads_to_the_128_wide_tile():
    # 802816 x 192 on 108 SMs: 256x64 would fit n exactly (9408 tiles, 0.99); the 2:1 tiles
    # pad n = 192 to 256. Best is 128x128: 6272 x 2 = 12544 tiles = 116.1 -> 117 waves
    # (128x256 and 256x128: 6272 tiles = 58.1 -> 59 waves of twice the area, 0.7385)
    expected = 802816 * 192 / (117 * 108 * 128 * 128)
    assert expected == pytest.approx(0.7446, abs=1e-4)
    assert occupancy(802816, 192, 1, 108, 128, 256) == pytest.approx(expected)


def test_occupancy_counts_waves_and_padding_by_hand():
    # 4096 x 4096 on 108 SMs: 128x256 -> 32*16 = 512 tiles = 4.74 waves -> 5 waves;
    # the halves give 1024 tiles = 9.48 -> 10 waves: 4096^2 / (5 * 108 * 128 * 256) = 0.948
    assert occupancy(4096, 4096, 1, 108, 128, 256) == pytest.approx(
        4096 * 4096 / (5 * 108 * 128 * 256)
    )
    # one 64 x 64 output on 108 SMs: the smallest candidate tile (128x128, or 64x256 whose
    # short side spans m = 64) pads it: 4096 useful MACs of 108 * 16384
    assert occupancy(64, 64, 1, 108, 128, 256) == pytest.approx(64 * 64 / (108 * 128 * 128))
    # batch multiplies the tiles
    assert occupancy(128, 256, 108, 108, 128, 256) == pytest.approx(1.0)


def test_k_rolloff_halves_at_half_dim():
    assert k_rolloff(272, 272) == pytest.approx(0.5)
    assert k_rolloff(8192, 0) == 1.0


def test_gemm_efficiency_is_the_product_of_the_three_terms():
    c = chip(gemm_util=0.8, gemm_half_dim=256, gemm_tile_m=128, gemm_tile_n=256)
    m, n, k = 4096, 4096, 1024
    expected = 0.8 * k / (k + 256) * occupancy(m, n, 1, 108, 128, 256)
    assert gemm_efficiency(c, m, n, k) == pytest.approx(expected)


def test_fixed_compute_util_overrides_the_model():
    c = chip(gemm_util=0.8, gemm_half_dim=256, fixed_compute_util=0.5)
    assert gemm_efficiency(c, 64, 64, 64) == 0.5 and attention_efficiency(c) == 0.5


def test_attention_defaults_to_gemm_util():
    assert attention_efficiency(chip(gemm_util=0.7)) == 0.7
    assert attention_efficiency(chip(gemm_util=0.7, attention_util=0.3)) == 0.3


def test_efficiency_is_never_zero():
    c = chip(gemm_util=0.8, gemm_half_dim=1e9, gemm_tile_m=128, gemm_tile_n=256)
    assert gemm_efficiency(c, 1, 1, 1) == 1e-3


def test_gemm_time_in_the_menu_uses_the_shape(tmp_path):
    """The solver's GEMM compute time is FLOP / (peak x efficiency(shape))."""
    from pathlib import Path

    setup = tmp_path / "setup.txt"
    setup.write_text(
        "workload { gemm { M: 4096 K: 4096 N: 4096 } }\n"
        'system { chip: "A100-SXM4-80GB" num_chip: 1 }\n'
        "execution { execution_style: KERNEL_BY_KERNEL perfect_overlap: true }\n"
    )
    sc = pipeline.load_scenario(Path(setup))
    plan = pipeline.plan(sc)
    (k,) = plan.kernels()
    ch = sc.system.chip
    flop = 2 * 4096**3
    expected = flop / (ch.peak("bf16") * gemm_efficiency(ch, 4096, 4096, 4096))
    assert k.compute_s == pytest.approx(expected + ch.efficiency.kernel_overhead_s)
    assert plan.latency_s == pytest.approx(max(k.compute_s, k.memory_s))
    assert math.isfinite(plan.latency_s)


def test_replace_keeps_efficiency_frozen():
    e = Efficiency(gemm_util=0.5)
    assert replace(e, dram_util=0.9).gemm_util == 0.5


def test_for_precision_picks_the_precisions_plateau():
    c = chip(gemm_util=0.8, gemm_util_by_precision=(("fp8", 0.6),), gemm_half_dim=100)
    assert for_precision(c, "fp8").efficiency.gemm_util == 0.6
    assert for_precision(c, "bf16") is c
    assert gemm_efficiency(for_precision(c, "fp8"), 1, 1, 100) == pytest.approx(0.6 * 0.5)


def test_fp8_gemm_in_the_solver_runs_at_the_fp8_plateau(tmp_path):
    """H100 FP8 8192^3: 16 waves of 128x256 tiles on 132 SMs (2048 tiles, occupancy
    2048 / (16 x 132)); plateau 0.694, no roll-off (gemm_half_dim 0), 4.5 us launch."""
    setup = tmp_path / "setup.txt"
    setup.write_text(
        "workload { gemm { M: 8192 K: 8192 N: 8192 } precision { math: FP8 } }\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 1 }\n'
        "execution { execution_style: KERNEL_BY_KERNEL perfect_overlap: true }\n"
    )
    plan = pipeline.plan(pipeline.load_scenario(setup))
    (k,) = plan.kernels()
    util = 0.694 * 2048 / (16 * 132)
    assert k.compute_s == pytest.approx(2 * 8192**3 / (1978.9e12 * util) + 4.5e-6)


def test_a_plateau_for_an_unknown_precision_is_bad_input(tmp_path):
    setup = tmp_path / "setup.txt"
    setup.write_text(
        "workload { gemm { M: 64 K: 64 N: 64 } }\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 1 accelerator { efficiency {\n'
        '  gemm_util_by_precision { precision: "fp9" util: 0.5 }\n'
        '  gemm_util_by_precision { precision: "fp8" util: 1.5 } } } }\n'
    )
    with pytest.raises(SetupError) as err:
        pipeline.load_scenario(setup)
    text = str(err.value)
    assert 'gemm_util_by_precision["fp9"] names no precision' in text
    assert 'gemm_util_by_precision["fp8"].util must be in (0, 1]' in text


def test_a_setup_plateau_overrides_the_librarys(tmp_path):
    setup = tmp_path / "setup.txt"
    setup.write_text(
        "workload { gemm { M: 64 K: 64 N: 64 } }\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 1 accelerator { efficiency {\n'
        '  gemm_util_by_precision { precision: "fp8" util: 0.5 } } } }\n'
    )
    eff = pipeline.load_scenario(setup).system.chip.efficiency
    assert dict(eff.gemm_util_by_precision) == {"fp8": 0.5, "fp64": 0.852}  # fp64 kept


def test_launch_floor_bounds_every_gemm_time_by_hand():
    """H100 (chip file: kernel_overhead_us 4.5, kernel_min_time_us 8.0): a GEMM's compute
    time is at least 8.0 - 4.5 = 3.5 us, so with the overhead added it takes at least 8 us;
    an FP8 1024^3 GEMM at the 0.694 plateau is 2 x 1024^3 / (1978.9 TF x 0.694) = 1.56 us of
    work (less still after occupancy), so it sits on the floor; an 8192^3 one (800 us) does not."""
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = "H100-SXM5-80GB", 1
    chip = ef.for_precision(resolve_system(s, "setup.txt").chip, "fp8")
    assert ef.busy_floor(chip) == pytest.approx(3.5e-6)
    assert 2 * 1024**3 / (1978.9e12 * 0.694) == pytest.approx(1.56e-6, rel=0.01)
    assert ef.gemm_compute_time(chip, 2 * 1024**3, 1978.9e12, 1024, 1024, 1024) == pytest.approx(
        3.5e-6
    )
    big = ef.gemm_compute_time(chip, 2 * 8192**3, 1978.9e12, 8192, 8192, 8192)
    assert big > 700e-6
