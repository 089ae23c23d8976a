"""Every fitted number in the chip files' efficiency blocks is re-derived here from the dev
measurements (tests/data/validation/validation_dev_structured.csv) with
mapshard.fidelity.fit, so a chip file cannot drift from its cited rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware import library
from hardware.resolve import resolve_system
from mapshard import setup_pb2
from mapshard.fidelity import fit
from mapshard.fidelity.cases import read_cases

CASES = Path(__file__).parent / "data" / "validation" / "validation_dev_structured.csv"


@pytest.fixture(scope="module")
def cases():
    return read_cases(CASES)


def system(chip: str):
    s = setup_pb2.Setup()
    s.system.chip = chip
    s.system.num_chip = 1
    return resolve_system(s, CASES)


def gemm_fit(cases, chip: str, like: str | None = None) -> fit.GemmFit:
    sysm = system(chip)
    pts = fit.compute_bound(fit.gemm_points(cases, chip), sysm.dram.bandwidth_Bps)
    if like is None:
        return fit.fit_gemm(sysm.chip, pts)
    ref = system(like).chip.efficiency
    return fit.fit_gemm(sysm.chip, pts, ref.kernel_overhead_s * 1e6, ref.gemm_half_dim)


@pytest.mark.parametrize(
    "chip,like",
    [
        ("A100-SXM4-80GB", None),
        ("H100-SXM5-80GB", None),
        ("H200-SXM-141GB", "H100-SXM5-80GB"),
        ("GB200", "H100-SXM5-80GB"),
    ],
)
def test_gemm_parameters_are_the_fit(cases, chip, like):
    f = gemm_fit(cases, chip, like)
    eff = system(chip).chip.efficiency
    assert eff.gemm_util == pytest.approx(f.gemm_util, abs=1e-9)
    assert eff.gemm_half_dim == pytest.approx(f.gemm_half_dim)
    assert eff.kernel_overhead_s * 1e6 == pytest.approx(f.kernel_overhead_us)


def test_memory_bound_gemms_are_left_out_of_the_fit(cases):
    a100 = fit.compute_bound(fit.gemm_points(cases, "A100-SXM4-80GB"), 2039e9)
    h100 = fit.compute_bound(fit.gemm_points(cases, "H100-SXM5-80GB"), 3350e9)
    assert "K02" not in {p.source for p in a100}  # M = 64: reads 302 MB in 190 us
    assert "K06" not in {p.source for p in h100}  # n = 192: streams 925 MB in 357 us


def test_companion_sizes_are_read_from_extra_params(cases):
    pts = {p.source: p for p in fit.gemm_points(cases, "H100-SXM5-80GB")}
    cube = pts["K05:also_1024cube_flops"]
    assert (cube.m, cube.n, cube.k) == (1024, 1024, 1024)
    assert cube.time_s == pytest.approx(2 * 1024**3 / 2.741e14)
    down = pts["K09:also_down_proj_s"]  # Llama-2-70B down_proj: 4096 x 28672 -> 8192
    assert (down.m, down.n, down.k, down.time_s) == (4096, 8192, 28672, 0.002647)


@pytest.mark.parametrize(
    "chip,rows",
    [("A100-SXM4-80GB", ["K14"]), ("H100-SXM5-80GB", ["K12"]), ("H200-SXM-141GB", ["K13"])],
)
def test_dram_util_is_stream_copy_over_peak(cases, chip, rows):
    sysm = system(chip)
    util, ids = fit.fit_dram_util(cases, chip, sysm.dram.bandwidth_Bps)
    assert ids == rows
    assert sysm.chip.efficiency.dram_util == pytest.approx(util, abs=5e-4)


@pytest.mark.parametrize("chip", ["A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "GB200"])
def test_collective_efficiency_is_the_fit(cases, chip):
    spec = library.find_chip(chip)
    f = fit.fit_collective(cases, chip, spec.scale_up_bw_GBps * 1e9)
    (entry,) = [e for e in spec.accelerator.efficiency.collective if e.level == 0]
    assert entry.bus_bw_util == pytest.approx(f.bus_bw_util)
    assert entry.half_bw_bytes == pytest.approx(f.half_bw_bytes, rel=0.01)


def test_nvls_bus_bandwidth_exceeds_the_link_and_is_capped(cases):
    f = fit.fit_collective(cases, "H100-SXM5-80GB", 450e9)
    assert f.uncapped_util == pytest.approx(478.87 / 450) and f.bus_bw_util == 1.0


def test_a100_attention_util_is_the_measured_unfused_attention(cases):
    (i12,) = [c for c in cases if c.id == "I12"]
    per_gpu_heads = i12.int("heads") // i12.int("tp")
    flop = 4 * i12.int("batch") * i12.int("input_len") ** 2 * per_gpu_heads * i12.int("head_dim")
    t = sum(i12.extra_float(k) for k in ("op_qk_s", "op_softmax_s", "op_av_s"))
    util = flop / t / 312e12
    assert system("A100-SXM4-80GB").chip.efficiency.attention_util == pytest.approx(util, abs=5e-4)
