"""Every fitted number in the chip files' efficiency blocks is re-derived here from the FIT
measurements (tests/data/validation: every dev row plus validation_public_fit.csv; the split
rule is in VALIDATION_SCHEMA.md) with mapshard.fidelity.fit, so a chip file cannot drift from
its cited rows, and no CHECK row is ever fitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware import library
from mapshard.fidelity import fit
from mapshard.fidelity.cases import read_cases
from mapshard.fidelity.fitted import fitted_on
from solver.cost.efficiency import for_precision

DATA = Path(__file__).parents[1] / "data" / "validation"
CASES = DATA / "validation_dev_structured.csv"
FIT_FILES = (CASES, DATA / "validation_public_fit.csv")


@pytest.fixture(scope="module")
def cases():
    return [c for path in FIT_FILES for c in read_cases(path)]


system = fit.library_system


def copy_Bps(chip: str) -> float:
    """The chip's STREAM-copy bandwidth (its DRAM floor in the GEMM fit)."""
    return fit.copy_Bps(system(chip))


_FITS: dict[tuple, fit.GemmFit] = {}


def gemm_fit(cases, chip: str, like: str | None = None, split=()) -> fit.GemmFit:
    """The fit of `chip` (cached: several tests read the same fit of the FIT rows)."""
    key = (chip, like, tuple(split))
    if key not in _FITS:
        _FITS[key] = _gemm_fit(cases, chip, like, tuple(split))
    return _FITS[key]


def _gemm_fit(cases, chip: str, like: str | None, split: tuple) -> fit.GemmFit:
    sysm = system(chip)
    pts = fit.gemm_points(cases, chip)
    if like is None:
        return fit.fit_gemm(sysm.chip, pts, split=split, copy_Bps=copy_Bps(chip))
    ref = system(like).chip.efficiency
    tile = (ref.gemm_tile_m, ref.gemm_tile_n)
    return fit.fit_gemm(
        sysm.chip,
        pts,
        ref.kernel_overhead_s * 1e6,
        ref.gemm_half_dim,
        split,
        copy_Bps(chip),
        fix_tile=tile,
    )


@pytest.mark.parametrize(
    "chip,split,plateau_from",
    [
        ("A100-SXM4-80GB", (), None),
        ("H100-SXM5-80GB", ("fp8",), None),
        # only FP8 H200 points: its 16-bit plateau is the H100's (same GH100 SMs)
        ("H200-SXM-141GB", ("fp8",), "H100-SXM5-80GB"),
        ("GB200", (), None),
        # FP8 (Azure) and one BF16 (AMD's max-achievable-FLOPs blog) MI300X point
        ("MI300X", ("fp8",), None),
    ],
)
def test_gemm_parameters_are_the_fit(cases, chip, split, plateau_from):
    f = gemm_fit(cases, chip, None, split)
    eff = system(chip).chip.efficiency
    if plateau_from is None:
        assert eff.gemm_util == pytest.approx(f.gemm_util, abs=1e-9)
    else:
        assert f.gemm_util == 0.0
        assert eff.gemm_util == system(plateau_from).chip.efficiency.gemm_util
    # the fitted precisions' plateaus (FP64's is cited: tests/unit/test_hpl_grid.py; Blackwell's
    # 16-bit ones derived from the measured tables: tests/unit/test_gemm_plateaus.py)
    cited = {
        field.split()[-1]
        for entry in fitted_on(chip)
        if entry.cited
        for field in entry.fields
        if field.startswith("gemm_util_by_precision ")
    }
    fitted = {p: u for p, u in eff.gemm_util_by_precision if p not in cited}
    assert fitted == pytest.approx(dict(f.by_precision))
    assert eff.gemm_half_dim == pytest.approx(f.gemm_half_dim)
    assert eff.kernel_overhead_s * 1e6 == pytest.approx(f.kernel_overhead_us)
    assert eff.kernel_min_time_s * 1e6 == pytest.approx(f.kernel_min_time_us)
    assert (eff.gemm_tile_m, eff.gemm_tile_n) == f.tile


def test_wave_tile_is_fitted_per_chip(cases):
    """The wave tile is the fit's, from the same two library tiles for every chip: the
    NVIDIA chips keep 128x256 (cuBLAS's sm80/sm90 tile, one SM's half of Blackwell's 2-SM
    MMA); on MI300X 128x128 leaves 4.3% mean error over its 8 FIT points where 128x256 leaves
    6.3% (the 2048^3-class shapes need more, smaller tiles to fill 304 CUs)."""
    tiles = {c: gemm_fit(cases, c, None, s).tile for c, s in (("GB200", ()), ("MI300X", ("fp8",)))}
    assert tiles == {"GB200": (128, 256), "MI300X": (128, 128)}
    pts = fit.gemm_points(cases, "MI300X")
    wide = fit.fit_gemm(
        system("MI300X").chip, pts, split=("fp8",), copy_Bps=copy_Bps("MI300X"), fix_tile=(128, 256)
    )
    assert gemm_fit(cases, "MI300X", None, ("fp8",)).mean_abs_err < wide.mean_abs_err - 0.015


def test_b200_carries_the_gb200_gemm_fit():
    """Same B200 die and SMs: the plateau is a share of each chip's own peak."""
    b200, gb200 = system("B200").chip.efficiency, system("GB200").chip.efficiency
    names = ("gemm_util", "gemm_half_dim", "gemm_tile_m", "gemm_tile_n", "kernel_overhead_s")
    for name in names + ("kernel_min_time_s",):
        assert getattr(b200, name) == getattr(gb200, name), name


def test_b200_carries_the_gb200_nvlink5_collective_fit():
    """Same NVLink5 links and switch ASIC: the B200's scale-up level is the GB200 fit."""
    b200, gb200 = (
        [e for e in library.find_chip(c).accelerator.efficiency.collective if e.level == 0]
        for c in ("B200", "GB200")
    )
    assert len(b200) == len(gb200) == 1
    assert b200[0] == gb200[0]
    assert b200[0].latency_us > 0 and len(b200[0].bus_bw_at_size) > 10


def test_a100_40gb_carries_the_80gb_compute_fit():
    small, big = system("A100-SXM4-40GB").chip.efficiency, system("A100-SXM4-80GB").chip.efficiency
    for name in ("gemm_util", "gemm_half_dim", "kernel_overhead_s", "vector_util"):
        assert getattr(small, name) == getattr(big, name), name


def test_fp8_and_16bit_plateaus_differ_on_hopper(cases):
    """One plateau cannot serve both: FP8 cuBLASLt 8192^3 reaches 1290/1979 = 0.65 of its
    peak, the FP16 4096 x 8192 x 7168 shard 748/989 = 0.76 (K05, K11)."""
    f = gemm_fit(cases, "H100-SXM5-80GB", split=("fp8",))
    fp8 = dict(f.by_precision)["fp8"]
    assert fp8 < f.gemm_util - 0.05
    one = gemm_fit(cases, "H100-SXM5-80GB")
    # over the 13 FIT points one shared plateau leaves 7.6% mean error, two leave 5.3%
    assert f.mean_abs_err < one.mean_abs_err - 0.01


def test_layer_row_gemm_ops_are_points_with_their_shard_shapes(cases):
    """I12 (GPT-3 175B layer, TP 4, batch 8 x 2048): the QKV op is three [16384, 12288] x
    [12288, 3072] GEMMs; QK^T is batched over 8 x 24 heads; decode (I13) ops are not used."""
    pts = {p.source: p for p in fit.gemm_points(cases, "A100-SXM4-80GB")}
    qkv = pts["I12:op_qkv_s"]
    assert (qkv.m, qkv.n, qkv.k, qkv.batch) == (16384, 3072, 12288, 1)
    assert qkv.time_s == pytest.approx(0.0137218 / 3)
    w2 = pts["I12:op_w2_s"]
    assert (w2.m, w2.n, w2.k) == (16384, 12288, 12288)
    qk = pts["I12:op_qk_s"]
    assert (qk.m, qk.n, qk.k, qk.batch) == (2048, 2048, 128, 8 * 24)
    assert qk.flop == 2 * 2048 * 2048 * 128 * 8 * 24
    av = pts["I12:op_av_s"]
    assert (av.m, av.n, av.k) == (2048, 128, 2048)
    assert not [s for s in pts if s.startswith("I13")]
    assert {p.family for p in pts.values() if p.source.startswith("I12")} == {
        "PrincetonUniversity/LLMCompass"
    }


def test_a100_vector_util_is_the_fit_to_the_layer_ops(cases):
    """softmax over 8 x 24 x 2048^2 scores (5 FLOP each), LayerNorms over 16384 x 12288 (5),
    GeLU over 16384 x 12288 (4); each element read and written at 2 bytes."""
    pts = {p.source: p for p in fit.vector_points(cases, "A100-SXM4-80GB")}
    assert pts["I12:op_softmax_s"].flop == 5 * 8 * 24 * 2048**2
    assert pts["I12:op_gelu_s"].flop == 4 * 16384 * 12288
    assert pts["I12:op_ln0_s"].bytes_ == 4 * 16384 * 12288
    sysm = system("A100-SXM4-80GB")
    eff = sysm.chip.efficiency
    util, err = fit.fit_vector_util(
        list(pts.values()),
        19.5e12,
        sysm.dram.bandwidth_Bps * eff.dram_util,
        eff.kernel_overhead_s,
    )
    assert eff.vector_util == pytest.approx(util) and err < 0.03
    # the softmax by hand: 1 us + 5 x 8 x 24 x 2048^2 / (19.5 TF x util) within 5% of 2.80 ms
    t = 1e-6 + 5 * 8 * 24 * 2048**2 / (19.5e12 * util)
    assert t == pytest.approx(0.0028015, rel=0.05)


def test_bandwidth_bound_gemms_are_fitted_at_their_dram_floor(cases):
    """K02 (A100, 64 x 12288 x 12288, 16-bit): (64 x 12288 x 2 + 12288^2) x 2 bytes = 305.1 MB
    at copy bandwidth 0.79 x 2039 GB/s = 189.4 us, + 0.5 us overhead = 189.9 us against 190 us
    measured: the point pins the overhead instead of being dropped from the fit."""
    (k02,) = [p for p in fit.gemm_points(cases, "A100-SXM4-80GB") if p.source == "K02"]
    floor = fit.memory_time(k02, 0.79 * 2039e9)
    by_hand = (64 * 12288 * 2 + 12288**2) * 2 / (0.79 * 2039e9)
    assert floor == pytest.approx(by_hand) and by_hand == pytest.approx(189.4e-6, rel=1e-3)
    eff = system("A100-SXM4-80GB").chip.efficiency
    assert eff.kernel_overhead_s + floor == pytest.approx(190e-6, rel=0.005)


def test_every_source_weighs_the_same(cases):
    """A100: LLMCompass 9 points (K01, K02, K03, six I12 ops), Azure cuBLASLt 4 (K04, two
    sizes, P-GEM19), vidur 2 (K10, down_proj): weights 1/9, 1/4, 1/2, so each source sums to 1."""
    pts = fit.gemm_points(cases, "A100-SXM4-80GB")
    weights = fit.family_weights(pts)
    by_family: dict[str, list[float]] = {}
    for p, w in zip(pts, weights):
        by_family.setdefault(p.family, []).append(w)
    assert {f: len(ws) for f, ws in by_family.items()} == {
        "PrincetonUniversity/LLMCompass": 9,
        "Azure/AI-benchmarking-guide": 4,
        "microsoft/vidur": 2,
    }
    assert all(sum(ws) == pytest.approx(1.0) for ws in by_family.values())


def test_companion_sizes_are_read_from_extra_params(cases):
    pts = {p.source: p for p in fit.gemm_points(cases, "H100-SXM5-80GB")}
    cube = pts["K05:also_1024cube_flops"]
    assert (cube.m, cube.n, cube.k) == (1024, 1024, 1024)
    assert cube.time_s == pytest.approx(2 * 1024**3 / 2.741e14)
    down = pts["K09:also_down_proj_s"]  # Llama-2-70B down_proj: 4096 x 28672 -> 8192
    assert (down.m, down.n, down.k, down.time_s) == (4096, 8192, 28672, 0.002647)


@pytest.mark.parametrize(
    "chip,rows",
    [
        ("A100-SXM4-80GB", ["K14"]),
        ("H100-SXM5-80GB", ["K12"]),
        ("H200-SXM-141GB", ["K13", "M-H200-C001"]),
        # its copy rows are one family in CHECK (issue #35): no FIT row, no dram_util
        ("MI300X", []),
    ],
)
def test_dram_util_is_stream_copy_over_peak(cases, chip, rows):
    sysm = system(chip)
    util, ids = fit.fit_dram_util(cases, chip, sysm.dram.bandwidth_Bps)
    assert ids == rows
    # no FIT copy row: the chip file sets none, and the resolved chip runs at 100% of peak
    assert sysm.chip.efficiency.dram_util == pytest.approx(util or 1.0, abs=5e-4)


@pytest.mark.parametrize(
    "chip", ["A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB", "GB200", "MI300X"]
)
def test_collective_efficiency_is_the_fit(cases, chip):
    spec = library.find_chip(chip)
    f = fit.fit_collective(cases, chip, spec.scale_up_bw_GBps * 1e9)
    (entry,) = [e for e in spec.accelerator.efficiency.collective if e.level == 0]
    assert entry.bus_bw_util == pytest.approx(f.bus_bw_util)
    assert entry.half_bw_bytes == pytest.approx(f.half_bw_bytes, rel=0.01)
    assert entry.latency_us == pytest.approx(f.latency_us)
    got = [(pt.message_bytes, pt.bus_bw_util) for pt in entry.bus_bw_at_size]
    assert got == [pytest.approx(pt) for pt in f.curve]


def test_collective_alpha_beta_fit_by_hand(cases):
    """H100 (C01's sweep): 1 KiB at 0.07 GB/s busbw is 1.75 x 1024 / 0.07e9 = 25.6 us = 2
    steps of 12.8 us; 1 MiB at 43.70 GB/s takes 1.75 x 2^20 / 43.70e9 = 41.99 us, of which
    16.39 us move the bus bytes: 1.75 x 2^20 / 16.39 us / 450 GB/s = 0.249."""
    f = fit.fit_collective(cases, "H100-SXM5-80GB", 450e9)
    assert f.latency_us == pytest.approx(1.75 * 1024 / 0.07e9 / 2 * 1e6, abs=0.01)
    t = 1.75 * 2**20 / 43.70e9 - 2 * 12.8e-6
    assert dict(f.curve)[2**20] == pytest.approx(1.75 * 2**20 / t / 450e9, abs=1e-3)
    assert f.half_bw_bytes == 0.0


def test_nvls_bus_bandwidth_exceeds_the_link_and_is_capped(cases):
    f = fit.fit_collective(cases, "H100-SXM5-80GB", 450e9)
    # the sizes of at least 1 GiB: 8 GiB (C01) and 1 GiB (P-NCC04)
    assert f.uncapped_util == pytest.approx((478.87 + 466.35) / 2 / 450)
    assert f.bus_bw_util == 1.0


def test_a100_has_no_fused_attention_util():
    """No fused A100 attention kernel is measured in the dev set (I12 times the attention
    core unfused: its QK^T is a GEMM point, its softmax a vector point)."""
    assert system("A100-SXM4-80GB").chip.efficiency.attention_util == 0.0


def test_h200_alpha_beta_fit_by_hand(cases):
    """H200 (P-NCC05..09, C04): 1 KiB at 0.06 GB/s busbw is 1.75 x 1024 / 0.06e9 = 29.87 us
    = 2 steps of 14.93 us; 8 MiB at 181.94 GB/s takes 1.75 x 2^23 / 181.94e9 = 80.69 us, of
    which 50.82 us move the bus bytes: 1.75 x 2^23 / 50.82 us / 450 GB/s = 0.642."""
    f = fit.fit_collective(cases, "H200-SXM-141GB", 450e9)
    assert f.latency_us == pytest.approx(14.93, abs=0.01)
    t = 1.75 * 2**23 / 181.94e9 - 2 * 1.75 * 1024 / 0.06e9 / 2
    assert t == pytest.approx(50.82e-6, rel=1e-3)
    assert dict(f.curve)[2**23] == pytest.approx(1.75 * 2**23 / t / 450e9, abs=1e-3)
    assert dict(f.curve)[2**23] == pytest.approx(0.642, abs=1e-3)


def test_gb200_alpha_beta_fit_by_hand(cases):
    """GB200 (Azure ND GB200 v6 sweep, 4 GPUs, Ring): 2 KiB and 4 KiB at 0.19 and 0.38 GB/s
    busbw both take 1.5 x 2048 / 0.19e9 = 1.5 x 4096 / 0.38e9 = 16.17 us = 2 steps of
    8.08 us; 8 MiB at 253.46 GB/s takes 1.5 x 2^23 / 253.46e9 = 49.64 us, of which 33.47 us
    move the bus bytes: 1.5 x 2^23 / 33.47 us / 900 GB/s = 0.418. The plateau is the mean
    busbw at >= 1 GiB, (646.87 + 666.63 + 679.61) / 3 / 900 = 0.738 (P-NCC14, P-NCC30, C05);
    the 1 KiB and 1 MiB CHECK rows (P-NCC10, P-NCC11) are not used."""
    f = fit.fit_collective(cases, "GB200", 900e9)
    alpha = 1.5 * 2048 / 0.19e9 / 2
    assert f.latency_us == pytest.approx(alpha * 1e6, abs=0.01)
    assert f.latency_us == pytest.approx(8.08, abs=0.01)
    t = 1.5 * 2**23 / 253.46e9 - 2 * alpha
    assert t == pytest.approx(33.47e-6, rel=1e-3)
    assert dict(f.curve)[2**23] == pytest.approx(1.5 * 2**23 / t / 900e9, abs=1e-3)
    assert f.bus_bw_util == pytest.approx(round((646.87 + 666.63 + 679.61) / 3 / 900, 3))
    assert f.half_bw_bytes == 0.0
    assert not {"P-NCC10", "P-NCC11"} & set(f.sources)


def test_gb200_gemm_fit_by_hand(cases):
    """GB200 FP8 32768^3 (P-GEM15, 2825.6 TF measured): the 128x256 tile (one SM's half of
    the 2-SM 256x256 MMA) leaves 32768 tiles in 222 waves over 148 SMs (occupancy 0.997), its
    128x128 half 65536 tiles in 443 waves (0.9996, the best); roll-off 32768 / (32768 + 416):
    time = 0 us overhead + 2 x 32768^3 / (5000 TF x 0.602 x 0.98747 x 0.9996), i.e. 2971 TF
    modelled, 5.1% above the measurement."""
    sysm = system("GB200")
    p = fit.GemmPoint("P-GEM15", 32768, 32768, 32768, "fp8", 2 * 32768**3 / 2825.6e12)
    t = fit.model_time(sysm.chip, p, sysm.chip.efficiency.kernel_overhead_s)
    occupancy = 65536 / (443 * 148)
    by_hand = 2 * 32768**3 / (5000e12 * 0.602 * 32768 / (32768 + 416) * occupancy)
    assert t == pytest.approx(by_hand, rel=1e-9)
    assert 2 * 32768**3 / t == pytest.approx(2825.6e12 * 1.0515, rel=1e-3)


def test_launch_floor_paces_the_smallest_gb200_gemms(cases):
    """GB200 1024^3 (P-GEM12, 4.39 us measured) and 1024 x 2145 x 1024 (P-GEM16, 4.40 us)
    take the same time at 2.09x the work: both sit on the 4.5 us floor. By hand, 1024^3 at
    the plateau is 2 x 1024^3 / (5000 TF x 0.602) = 0.71 us of work, the other 1.49 us
    (roll-off and occupancy lengthen both, not past 4.5 us), so the model is
    max(4.5 us, 0 + work) = 4.5 us for both; the 2048^3 (CHECK row P-GEM13) at 17.2 GFLOP
    is past the floor and priced by its work."""
    sysm = system("GB200")
    assert sysm.chip.efficiency.kernel_min_time_s == pytest.approx(4.5e-6)
    ovh = sysm.chip.efficiency.kernel_overhead_s
    for m, n, k in ((1024, 1024, 1024), (1024, 2145, 1024)):
        p = fit.GemmPoint("x", m, n, k, "fp8", 1.0)
        assert 2 * m * n * k / (5000e12 * 0.602) < 1.5e-6
        assert fit.model_time(sysm.chip, p, ovh) == pytest.approx(4.5e-6)
    big = fit.GemmPoint("x", 2048, 2048, 2048, "fp8", 1.0)
    assert fit.model_time(sysm.chip, big, ovh) > 4.5e-6 * 1.3


def test_mi300x_alpha_beta_fit_by_hand(cases):
    """MI300X (RCCL all-reduce on 8 GPUs, ROCm blog sweep): 1 KiB and 4 KiB take 13.11 and
    13.27 us, mean 13.19 us = 2 steps of 6.595 us; 8 MiB takes 83.68 us, of which 70.49 us
    move 1.75 x 2^23 bus bytes: 208.3 GB/s = 0.465 of the 448 GB/s xGMI links. The plateau
    is the mean busbw at >= 1 GiB, (314.72 + 317.96 + 318.98) / 3 / 448 = 0.708 (P-MIR21,
    24, 25); the CHECK sizes (2 KiB, 16 KiB, 32 KiB, 512 KiB, 1 MiB, 256 MiB, 512 MiB,
    2 GiB, 4 GiB) are not used."""
    f = fit.fit_collective(cases, "MI300X", 448e9)
    alpha = (13.11 + 13.27) / 2 / 2
    assert f.latency_us == pytest.approx(alpha, abs=0.01)
    t = 83.68e-6 - 2 * alpha * 1e-6
    assert dict(f.curve)[2**23] == pytest.approx(1.75 * 2**23 / t / 448e9, abs=1e-3)
    assert dict(f.curve)[2**23] == pytest.approx(0.465, abs=1e-3)
    assert f.bus_bw_util == pytest.approx((314.72 + 317.96 + 318.98) / 3 / 448, abs=1e-3)
    check = {"P-MIR02", "P-MIR05", "P-MIR06", "P-MIR10", "P-MIR11", "P-MIR19", "P-MIR20"}
    assert not (check | {"P-MIR22", "P-MIR23"}) & set(f.sources)


def test_mi300x_gemm_fit_by_hand(cases):
    """MI300X hipBLASLt FP8 (Azure ND MI300X v5), 128x128 tiles, roll-off k / (k + 672),
    4.5 us per GEMM. The 1024^3 (P-MIG01, 278.2 TF = 7.72 us) has 64 output tiles for 304
    CUs, split 4 ways along K (1024 / 256 slices): 256 tile-slices in one wave, occupancy
    1024^2 x 4 / (304 x 128^2) = 0.842, so 4.5 us + 2 x 1024^3 / (2614.9 TF x 0.472 x
    1024 / 1696 x 0.842) = 7.92 us (2.6% long). The 32768^3 (P-MIG06, 1142.4 TF): 65536
    tiles in 216 waves (occupancy 0.998): 4.5 us + 2 x 32768^3 / (2614.9 TF x 0.472 x 32768 /
    33440 x 0.998) = 58.3 ms, 1208 TF, 5.7% above the measurement. No copy row is FIT (the
    MI300X copies P-MIC01..03 are one family, in CHECK): the DRAM runs at its 5.3 TB/s peak,
    and these compute-bound points fit the same with that floor."""
    sysm = system("MI300X")
    eff = for_precision(sysm.chip, "fp8").efficiency
    assert (eff.gemm_util, eff.gemm_half_dim, eff.gemm_tile_m, eff.gemm_tile_n) == (
        0.472,
        672.0,
        128,
        128,
    )
    assert (eff.kernel_overhead_s, eff.kernel_min_time_s) == pytest.approx((4.5e-6, 0.0))
    small = fit.GemmPoint("P-MIG01", 1024, 1024, 1024, "fp8", 2 * 1024**3 / 278.2e12)
    occupancy = 1024**2 * 4 / (304 * 128**2)
    by_hand = 4.5e-6 + 2 * 1024**3 / (2614.9e12 * 0.472 * 1024 / 1696 * occupancy)
    assert by_hand == pytest.approx(7.92e-6, rel=1e-3)
    assert fit.model_time(sysm.chip, small, eff.kernel_overhead_s) == pytest.approx(by_hand)
    big = fit.GemmPoint("P-MIG06", 32768, 32768, 32768, "fp8", 2 * 32768**3 / 1142.4e12)
    occupancy = 65536 / (216 * 304)
    by_hand = 4.5e-6 + 2 * 32768**3 / (2614.9e12 * 0.472 * 32768 / (32768 + 672) * occupancy)
    t = fit.model_time(sysm.chip, big, eff.kernel_overhead_s)
    assert t == pytest.approx(by_hand, rel=1e-9)
    assert 2 * 32768**3 / t == pytest.approx(1142.4e12 * 1.0565, rel=1e-3)
    assert fit.fit_dram_util(cases, "MI300X", sysm.dram.bandwidth_Bps) == (0.0, [])
    assert sysm.chip.efficiency.dram_util == 1.0 and fit.copy_Bps(sysm) == 5300e9


def test_mi300x_16bit_plateau_by_hand():
    """AMD's BF16 max-achievable-FLOPs GEMM (P-MIG11: 708 TF at M 4096, N 4864, K 32896,
    1.8514 ms) is 32 x 38 = 1216 output tiles of 128x128, four whole waves over 304 CUs:
    occupancy 1, so its plateau is 2 M N K / ((1.8514 ms - 4.5 us) x 1307.4 TF x 32896 /
    (32896 + 672)) = 0.554 of the BF16 peak."""
    sysm = system("MI300X")
    flop = 2 * 4096 * 4864 * 32896
    t = flop / 708e12
    by_hand = flop / ((t - 4.5e-6) * 1307.4e12 * 32896 / 33568)
    assert sysm.chip.efficiency.gemm_util == pytest.approx(by_hand, abs=1e-3)
    point = fit.GemmPoint("P-MIG11", 4096, 4864, 32896, "bf16", t)
    modelled = 4.5e-6 + flop / (1307.4e12 * 0.554 * 32896 / 33568)
    assert fit.model_time(sysm.chip, point, 4.5e-6) == pytest.approx(modelled, rel=1e-9)
