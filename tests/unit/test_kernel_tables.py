"""Measured kernel tables (hardware.kernel_db, solver.cost.kernel_times): real rows of the
installed aiconfigurator-core database read back exactly on grid points, interpolated by
hand between neighbours, and a chip or kernel the tables do not cover falls back to the
model with its source said. Only the H100 tables are loaded (two Parquet files)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from hardware import kernel_db
from hardware.kernel_source import DECODE_ATTENTION_TABLE, GEMM_16BIT_TABLE, TABLE_KINDS
from hardware.resolve import resolve_system
from schema import setup_pb2
from schema.errors import SetupError
from solver.cost import kernel_times, table_times
from solver.cost.efficiency import for_precision

pytestmark = pytest.mark.skipif(not kernel_db.installed(), reason="aiconfigurator-core missing")

H100 = ("h100_sxm", "trtllm", "1.3.0rc20")


def _row(dtype: str, m: int, n: int, k: int) -> float:
    """One row's latency in seconds, read straight from the Parquet file."""
    frame = kernel_db.table_frame(H100[0], "gemm", H100[1], H100[2], "gemm_perf")
    hit = frame[(frame.gemm_dtype == dtype) & (frame.m == m) & (frame.n == n) & (frame.k == k)]
    assert len(hit) == 1, (dtype, m, n, k)
    return float(hit.latency.iloc[0]) * 1e-3


def isotonic_at(values: list[float], i: int) -> float:
    """The nondecreasing least-squares fit at i by its min-max formula (not kernel_db's
    pooling): the largest over starts a <= i of the least over ends b >= i of the mean of
    values[a..b]."""
    total = [0.0]
    for v in values:
        total.append(total[-1] + v)
    ends = range(i, len(values))
    return max(min((total[b + 1] - total[a]) / (b + 1 - a) for b in ends) for a in range(i + 1))


def _padded(dtype: str, m: int, n: int, k: int) -> float:
    """The time at m of the (n, k) curve made nondecreasing in m (kernel_db._monotone: a GEMM
    may run padded up to a larger one), from the Parquet file's rows, in seconds."""
    frame = kernel_db.table_frame(H100[0], "gemm", H100[1], H100[2], "gemm_perf")
    curve = frame[(frame.gemm_dtype == dtype) & (frame.n == n) & (frame.k == k)]
    means = curve.groupby("m").latency.mean().sort_index()
    return isotonic_at([float(t) * 1e-3 for t in means], list(means.index).index(m))


def _chip(name: str, kernel_source: str = ""):
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = name, 1
    s.system.kernel_source = kernel_source
    return resolve_system(s, Path("setup.txt")).chip


@pytest.fixture(scope="module")
def bf16():
    return kernel_db.gemm_grid(*H100, "bfloat16")


def test_exact_on_grid_points(bf16):
    """8192^3 BF16: 1.404784 ms in the table (783 TFLOP/s), read back exactly; a grid point
    slower than a larger m of its (n, k) reads the mean of the run it pools with
    (kernel_db._monotone)."""
    for m, n, k in ((8192, 8192, 8192), (1, 8192, 8192), (4097, 4096, 4096)):
        seconds, how = kernel_db.lookup(bf16, m, n, k)
        assert how == kernel_db.EXACT
        assert seconds == pytest.approx(_padded("bfloat16", m, n, k), rel=1e-9)
        if m == 8192:  # a point no larger m undercuts: its own row, exactly
            assert seconds == _row("bfloat16", m, n, k)
    assert _row("bfloat16", 8192, 8192, 8192) == pytest.approx(1.404784e-3, rel=1e-5)


def test_a_larger_m_is_never_faster(bf16):
    """Along every (n, k) curve, time never falls as m grows (about half the measured points
    are slower than some larger m: kernel choice and noise), so a larger decode batch is
    never predicted faster (found by fuzzing: B200 decode batch 8 -> 12, 5% faster)."""
    rng = random.Random(3)
    for n, k in rng.sample(sorted(bf16.curves), 40):
        ms = sorted({rng.randint(1, 40000) for _ in range(30)})
        times = [kernel_db.lookup(bf16, m, n, k)[0] for m in ms]
        assert all(a <= b * (1 + 1e-12) for a, b in zip(times, times[1:])), (n, k)


def test_between_m_neighbours_log_log(bf16):
    """m = 3000 lies between the grid's 2817 and 3072 (n = k = 8192): log-log between them."""
    lo, hi = _padded("bfloat16", 2817, 8192, 8192), _padded("bfloat16", 3072, 8192, 8192)
    w = (math.log(3000) - math.log(2817)) / (math.log(3072) - math.log(2817))
    want = math.exp((1 - w) * math.log(lo) + w * math.log(hi))
    seconds, how = kernel_db.lookup(bf16, 3000, 8192, 8192)
    assert how == kernel_db.INTERPOLATED
    assert seconds == pytest.approx(want, rel=1e-9)
    assert min(lo, hi) <= seconds <= max(lo, hi)


def test_tile_step_is_kept_not_smoothed(bf16):
    """The grid holds 4096 and 4097: a query on either side reads its own row, so the step
    a 17th row of tiles costs at 4097 is not averaged away."""
    t4096 = kernel_db.lookup(bf16, 4096, 4096, 8192)[0]
    t4097 = kernel_db.lookup(bf16, 4097, 4096, 8192)[0]
    assert t4096 == pytest.approx(_padded("bfloat16", 4096, 4096, 8192), rel=1e-9)
    assert t4097 == pytest.approx(_padded("bfloat16", 4097, 4096, 8192), rel=1e-9)
    assert t4097 > t4096 * 1.01  # the step, measured and kept


def test_between_n_neighbours_off_grid(bf16):
    """n = 14336 (Llama-3 8B's MLP width) between 12288 and 16384 at a grid m and k:
    log time linear in log n between the two rows."""
    lo, hi = _padded("bfloat16", 1024, 12288, 4096), _padded("bfloat16", 1024, 16384, 4096)
    w = (math.log(14336) - math.log(12288)) / (math.log(16384) - math.log(12288))
    want = math.exp((1 - w) * math.log(lo) + w * math.log(hi))
    seconds, how = kernel_db.lookup(bf16, 1024, 14336, 4096)
    assert how == kernel_db.INTERPOLATED
    assert seconds == pytest.approx(want, rel=1e-9)


def test_beyond_the_largest_m_at_the_last_cost_per_row(bf16):
    """m = 65536 > 32768: the last two points' cost per row carries on."""
    t16, t32 = _padded("bfloat16", 16384, 4096, 4096), _padded("bfloat16", 32768, 4096, 4096)
    seconds, how = kernel_db.lookup(bf16, 65536, 4096, 4096)
    assert how == kernel_db.EXTRAPOLATED
    slope = (t32 - t16) / 16384
    assert seconds == pytest.approx(t32 + 32768 * min(slope, t32 / 32768), rel=1e-9)


def test_below_the_smallest_k_at_the_smallest_ks_time(bf16):
    """k = 16 < the grid's 32 (m = 1024, n = 4096 on the grid): the k = 32 row's time, a
    floor; never scaled by k over the largest k (that would make the GEMM 4,096x faster)."""
    assert bf16.k[0] == 32
    seconds, how = kernel_db.lookup(bf16, 1024, 4096, 16)
    assert how == kernel_db.EXTRAPOLATED
    assert seconds == pytest.approx(_padded("bfloat16", 1024, 4096, 32), rel=1e-9)
    seconds, _ = kernel_db.lookup(bf16, 1024, 16, 4096)
    assert seconds == pytest.approx(_padded("bfloat16", 1024, 32, 4096), rel=1e-9)


def test_fp8_rows_less_their_quantize():
    """An FP8 row times the activation's static quantize plus the GEMM; the quantize table of
    the same version gives the first, taken out: 8192^3 at 0.884912 - 0.066940 ms."""
    chip = for_precision(_chip("H100-SXM5-80GB", "trtllm-1.3.0rc20"), "fp8")
    t = kernel_times.measured_gemm_time(chip, 8192, 8192, 8192, "fp8")
    quant = kernel_db.quantize_grid(*H100)
    q = kernel_db.lookup(quant, 8192, 0, 8192)[0]
    assert q == pytest.approx(0.066940e-3, rel=1e-4)
    assert t.seconds == pytest.approx(_padded("fp8", 8192, 8192, 8192) - q, rel=1e-9)
    assert t.source == "measured:trtllm-1.3.0rc20 gemm fp8 less its quantize, exact"


def test_compute_part_adds_back_to_the_table_time():
    """The menus add the chip's per-kernel overhead to the compute part: a GEMM alone costs
    its table time."""
    chip = for_precision(_chip("H100-SXM5-80GB", "trtllm"), "bf16")
    assert chip.kernel_source == "trtllm-1.3.0rc20"
    shape = kernel_times.GemmShape(4096, 4096, 4096)
    t = kernel_times.gemm_compute_time(chip, shape, 2 * 4096**3, "bf16")
    total = t.seconds + chip.efficiency.kernel_overhead_s
    assert total == pytest.approx(_row("bfloat16", 4096, 4096, 4096), rel=1e-12)
    assert t.source == "measured:trtllm-1.3.0rc20 gemm bf16, exact"
    # never faster than the table's best point: the search's roofline bound holds
    assert 2 * 4096**3 / t.seconds <= table_times.table_rate(chip, "bf16")


def test_by_default_16bit_gemms_short_of_one_wave_read_the_table():
    """H100: 132 SMs, library tile 128 x 256. m = 128, n = 4096: 1 x 16 = 16 tiles, short of
    a wave: the BF16 (and FP16) GEMM alone costs its table curve there (longer than the
    8 us launch floor); m = 1024, n = 4224: 8 x 17 = 136 tiles, a wave: the fitted
    plateau; FP8 at any size: the plateau."""
    chip = _chip("H100-SXM5-80GB")
    e = chip.efficiency
    assert (chip.cores, e.gemm_tile_m, e.gemm_tile_n) == (132, 128, 256)
    assert e.kernel_min_time_s < _padded("bfloat16", 128, 4096, 4096)
    for precision in ("bf16", "fp16"):
        at = for_precision(chip, precision)
        shape = kernel_times.GemmShape(128, 4096, 4096)
        t = kernel_times.gemm_compute_time(at, shape, 2 * 128 * 4096**2, precision)
        total = t.seconds + at.efficiency.kernel_overhead_s
        assert total == pytest.approx(_padded("bfloat16", 128, 4096, 4096), rel=1e-9)
        assert t.source == f"measured:trtllm-1.3.0rc20 gemm {precision}, exact"
    bf16 = for_precision(chip, "bf16")
    assert table_times.gemm_table_of(bf16, "bf16", 1024, 4096) is not None  # 8 x 16 = 128
    assert table_times.gemm_table_of(bf16, "bf16", 1024, 4224) is None  # 8 x 17 = 136
    t = kernel_times.gemm_compute_time(bf16, kernel_times.GemmShape(1024, 4224, 4096), 1e10, "bf16")
    assert t.source == kernel_times.FITTED
    fp8 = for_precision(chip, "fp8")
    assert kernel_times.measured_gemm_time(fp8, 128, 4096, 4096, "fp8") is None


def test_the_one_wave_rule_over_a_random_family_of_shapes(bf16):
    """200 BF16 shapes drawn log-uniformly (m 1-16k, n and k 64-32k) on the default H100:
    fewer 128 x 256 output tiles than its 132 SMs, counted here, and the GEMM reads the
    table: it costs the table's time (read from the grid) whenever that is above the launch
    floor and the fitted plateau's time, and never less; a wave or more, the fitted
    plateau. FP8 never reads the table."""
    rng = random.Random(7)
    chip = for_precision(_chip("H100-SXM5-80GB"), "bf16")
    e = chip.efficiency
    plateau = 989.4e12 * e.gemm_util
    read = 0
    for _ in range(200):
        m, n, k = (int(math.exp(rng.uniform(math.log(lo), math.log(hi))))
                   for lo, hi in ((1, 16384), (64, 32768), (64, 32768)))  # fmt: skip
        flop = 2.0 * m * n * k
        t = kernel_times.gemm_compute_time(chip, kernel_times.GemmShape(m, n, k), flop, "bf16")
        tiles = math.ceil(m / 128) * math.ceil(n / 256)
        if tiles >= 132:
            assert t.source == kernel_times.FITTED, (m, n, k)
            continue
        read += 1
        table = kernel_db.lookup(bf16, m, n, k)[0]
        assert t.source.startswith("measured:trtllm-1.3.0rc20 gemm bf16"), (m, n, k)
        total = t.seconds + e.kernel_overhead_s
        assert total >= table * (1 - 1e-12) and t.seconds >= flop / plateau * (1 - 1e-12)
        if table > max(e.kernel_min_time_s, flop / plateau + e.kernel_overhead_s):
            assert total == pytest.approx(table, rel=1e-12), (m, n, k)
        fp8 = for_precision(chip, "fp8")
        assert kernel_times.measured_gemm_time(fp8, m, n, k, "fp8") is None
    assert 40 <= read <= 160  # both sides of the rule drawn


def test_uncovered_falls_back_with_its_source_said():
    """MI300X has no table: the fitted plateau. A batched GEMM on a covered chip and an FP32
    GEMM (no table of that type) keep the model and say why; "none" turns the tables off."""
    mi = for_precision(_chip("MI300X"), "bf16")
    assert mi.kernel_source == ""
    t = kernel_times.gemm_compute_time(mi, kernel_times.GemmShape(4096, 4096, 4096), 1e11, "bf16")
    assert t.source == kernel_times.FITTED
    h100 = _chip("H100-SXM5-80GB", "trtllm-1.3.0rc20")
    batched = kernel_times.GemmShape(512, 512, 128, batch=32)
    t = kernel_times.gemm_compute_time(for_precision(h100, "bf16"), batched, 2e9, "bf16")
    assert t.source == "fitted plateau (no trtllm-1.3.0rc20 table for batched GEMMs)"
    t = kernel_times.gemm_compute_time(
        for_precision(h100, "fp32"), kernel_times.GemmShape(64, 64, 64), 2 * 64**3, "fp32"
    )
    assert t.source.startswith("peak, uncalibrated (no trtllm-1.3.0rc20 fp32 GEMM table")
    off = _chip("H100-SXM5-80GB", "none")
    assert off.kernel_source == "" and table_times.table_of(off) is None


def test_a_missing_table_falls_back():
    """A chip pointing at a table the database lacks (a version never collected) reads
    nothing and keeps the model, with the source said."""
    chip = replace(_chip("H100-SXM5-80GB", "none"), kernel_system="h100_sxm")
    chip = replace(chip, kernel_source="trtllm-0.0.1", kernel_tables=TABLE_KINDS)
    chip = for_precision(chip, "bf16")
    assert kernel_times.measured_gemm_time(chip, 4096, 4096, 4096, "bf16") is None
    t = kernel_times.gemm_compute_time(chip, kernel_times.GemmShape(4096, 4096, 4096), 1e11, "bf16")
    assert t.source.startswith(kernel_times.FITTED + " (no trtllm-0.0.1 bf16 GEMM table")


def test_kernel_source_is_validated_strictly():
    """An unknown version, a chip the database lacks, or an overridden accelerator is a
    SetupError naming the field."""
    with pytest.raises(SetupError, match=r"no trtllm GEMM table for H100-SXM5-80GB.*versions"):
        _chip("H100-SXM5-80GB", "trtllm-9.9")
    with pytest.raises(SetupError, match="does not cover chip"):
        _chip("MI300X", "trtllm")
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip, s.system.kernel_source = "H100-SXM5-80GB", 1, "trtllm"
    s.system.accelerator.bf16_tflops = 500
    with pytest.raises(SetupError, match="bf16_tflops is set"):
        resolve_system(s, Path("setup.txt"))


def test_h100_by_default_reads_its_decode_attention_table_and_keeps_its_gemm_model():
    """Left unset, the H100 (DECODE_ATTENTION_ON) reads decode attention from its table and
    GEMMs of whole waves from its fitted plateau. 8 query heads over 1 KV head
    (Llama-3.1-70B per GPU at TP 8), 64 sequences of 2,048 cached tokens: the row at step
    2,047, read straight from the Parquet file, is the kernel's time."""
    chip = _chip("H100-SXM5-80GB")
    assert chip.kernel_tables == (GEMM_16BIT_TABLE, DECODE_ATTENTION_TABLE)
    assert chip.kernel_source == "trtllm-1.3.0rc20"
    # 4096^3: 32 x 16 = 512 tiles of 128 x 256 on 132 SMs, whole waves: the plateau
    assert kernel_times.measured_gemm_time(chip, 4096, 4096, 4096, "bf16") is None
    t = kernel_times.gemm_compute_time(
        for_precision(chip, "bf16"), kernel_times.GemmShape(4096, 4096, 4096), 1e11, "bf16"
    )
    assert t.source == kernel_times.FITTED
    frame = kernel_db.table_frame(
        "h100_sxm", "attention", "trtllm", "1.3.0rc20", "generation_attention_perf"
    )
    row = frame[
        (frame.num_heads == 8)
        & (frame.num_key_value_heads == 1)
        & (frame.head_dim == 128)
        & (frame.kv_cache_dtype == "bfloat16")
        & (frame.window_size == 0)
        & (frame.beam_width == 1)
        & (frame.batch_size == 64)
        & (frame.step == 2047)
    ]
    assert len(row) == 1
    shape = kernel_times.DecodeAttentionShape(64, 8, 1, 128, 2048, 2.0)
    hit = kernel_times.measured_decode_attention_time(chip, shape)
    assert hit is not None and hit.seconds == pytest.approx(float(row.latency.iloc[0]) * 1e-3)
    assert hit.source == "measured:trtllm-1.3.0rc20 generation attention bfloat16 KV, exact"


def test_no_default_table_where_the_chip_or_its_memory_is_not_the_measured_one():
    """B200 (not in DECODE_ATTENTION_ON) reads its 16-bit GEMMs short of a wave alone; the
    A100 (not in GEMM_16BIT_ON) its decode attention alone; "none" nothing; an H100 whose
    DRAM bandwidth the setup changes (a sweep over memory) keeps those GEMMs but not decode
    attention; one given a plateau of its own, or another BF16 peak, reads no table."""
    assert _chip("B200").kernel_tables == (GEMM_16BIT_TABLE,)
    assert _chip("A100-SXM4-80GB").kernel_tables == (DECODE_ATTENTION_TABLE,)
    assert _chip("H100-SXM5-80GB", "none").kernel_tables == ()
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = "H100-SXM5-80GB", 1
    s.system.memory.dram_bw = 4800
    assert resolve_system(s, Path("setup.txt")).chip.kernel_tables == (GEMM_16BIT_TABLE,)
    s.system.accelerator.efficiency.gemm_util = 0.7
    assert resolve_system(s, Path("setup.txt")).chip.kernel_tables == ()
    s.system.accelerator.efficiency.gemm_util = 0
    s.system.accelerator.bf16_tflops = 500
    assert resolve_system(s, Path("setup.txt")).chip.kernel_tables == ()
    assert _chip("H100-SXM5-80GB", "trtllm").kernel_tables == TABLE_KINDS


def test_grid_groups_a_random_table_as_the_rows_say():
    """kernel_db._grid (one sort) against the plain reading of each row: a random table of
    (m, n, k) points in random order, some measured up to three times, gives per (n, k) the
    ascending m and each point's mean latency (summed in row order), ms -> s, made
    nondecreasing in m."""
    rng = random.Random(7)
    rows: list[tuple[int, int, int, float]] = []
    for _ in range(400):
        point = (rng.choice((1, 16, 300, 4096)), rng.choice((0, 128, 8192)), rng.choice((64, 7168)))
        rows += [(*point, rng.uniform(0.001, 2.0)) for _ in range(rng.choice((1, 1, 2, 3)))]
    rng.shuffle(rows)
    grid = kernel_db._grid([r[0] for r in rows], [r[2] for r in rows], [r[1] for r in rows],
                           [r[3] for r in rows])  # fmt: skip
    expected: dict[tuple[int, int], dict[int, list[float]]] = {}
    for m, n, k, t in rows:
        expected.setdefault((n, k), {}).setdefault(m, []).append(t)
    assert sorted(grid.curves) == sorted(expected)
    for key, by_m in expected.items():
        curve = grid.curves[key]
        assert curve.m == tuple(sorted(by_m))
        means = [sum(by_m[m]) / len(by_m[m]) * 1e-3 for m in curve.m]
        # made nondecreasing in m (kernel_db._monotone)
        fitted = tuple(isotonic_at(means, i) for i in range(len(means)))
        assert curve.seconds == pytest.approx(fitted, rel=1e-12)
    assert grid.n == tuple(sorted({n for n, _ in expected}))
    assert grid.k == tuple(sorted({k for _, k in expected}))
    one_n = kernel_db._grid([5, 1], [9, 9], None, [2.0, 4.0])
    # m = 1 measured slower (4 ms) than m = 5 (2 ms): the two pooled at their mean
    assert one_n.curves == {(0, 9): kernel_db.Curve((1, 5), (3e-3, 3e-3))}
