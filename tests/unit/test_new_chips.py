"""The Blackwell Ultra, Ada and GB202 chips the measured kernel database covers (B300, GB300,
L40S, RTX PRO 6000 Blackwell Server Edition):
each loads with its datasheet peaks, is uncalibrated (no FIT row measures it), reads its own
tables unless the setup turns them off (real rows read by hand), and a chip the tables do
not cover keeps the physical model with its source said."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import pandas as pd
import pytest

from hardware import kernel_db, library
from hardware.calibration import UNCALIBRATED
from hardware.resolve import resolve_system
from hardware.system import Chip, System
from schema import setup_pb2
from schema.errors import SetupError
from solver.cost import kernel_times, table_times
from solver.cost.efficiency import for_precision
from tests.unit.test_kernel_tables import isotonic_at

CHIPS = Path(library.__file__).parent / "chips"
MiB = 2**20


def _system(chip: str, kernel_source: str = "", num_chip: int = 1) -> System:
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = chip, num_chip
    s.system.kernel_source = kernel_source
    return resolve_system(s, Path("setup.txt"))


def _chip(name: str, kernel_source: str = "") -> Chip:
    return _system(name, kernel_source).chip


# (chip, dense TFLOP/s bf16, fp8, fp32; memory GB/s; capacity bytes; TDP W; per-direction
# scale-up GB/s; scale-up domain): the datasheet figures, typed in by hand
DATASHEET = [
    # HGX B300: 2.25 PF BF16 / 4.5 PF FP8 dense, 75 TF FP32, 7.75 TB/s, nvidia-smi 275,040 MiB,
    # 1100 W, NVLink 5 1.8 TB/s bidirectional, 8 GPUs per board
    ("B300", 2250, 4500, 75, 7750, 275040 * MiB, 1100, 900, 8),
    # GB300 NVL72: 2.5 PF BF16 / 5 PF FP8 dense, 80 TF FP32, 8 TB/s, 284,208 MiB, 1400 W, 72
    ("GB300", 2500, 5000, 80, 8000, 284208 * MiB, 1400, 900, 72),
    # L40S: 362.05 TF BF16 / 733 TF FP8 dense, 91.6 TF FP32, 864 GB/s GDDR6, 46,068 MiB with
    # ECC, 350 W, PCIe Gen4 x16 64 GB/s bidirectional, no NVLink
    ("L40S", 362.05, 733, 91.6, 864, 46068 * MiB, 350, 32, 8),
    # RTX PRO 6000 Blackwell Server: 1 PF BF16 / 2 PF FP8 sparse (500 / 1000 dense), 120 TF
    # FP32, 1,597 GB/s GDDR7, nvidia-smi 97,887 MiB, 600 W, PCIe Gen5 x16, no NVLink
    ("RTX-PRO-6000-Server", 500, 1000, 120, 1597, 97887 * MiB, 600, 64, 8),
]


@pytest.mark.parametrize("name, bf16, fp8, fp32, bw, cap, tdp, up, domain", DATASHEET)
def test_chip_loads_with_its_datasheet_figures(name, bf16, fp8, fp32, bw, cap, tdp, up, domain):
    system = _system(name)
    chip = system.chip
    assert chip.name == name
    assert chip.peak_flops["bf16"] == pytest.approx(bf16 * 1e12, rel=1e-12)
    assert chip.peak_flops["fp16"] == pytest.approx(bf16 * 1e12, rel=1e-12)
    assert chip.peak_flops["fp8"] == pytest.approx(fp8 * 1e12, rel=1e-12)
    assert chip.peak_flops["fp32"] == pytest.approx(fp32 * 1e12, rel=1e-12)
    assert system.dram.bandwidth_Bps == pytest.approx(bw * 1e9, rel=1e-12)
    assert system.dram.capacity_bytes == cap
    assert chip.tdp_W == tdp
    spec = library.get_chip(name)
    assert spec.scale_up_bw_GBps == up and spec.scale_up_domain == domain
    # more chips than one domain: the scale-up level runs at the datasheet link rate
    many = _system(name, num_chip=2 * domain)
    assert many.network[0].degree == domain
    assert many.network[0].link_bandwidth_Bps == pytest.approx(up * 1e9, rel=1e-12)


def test_blackwell_ultra_trades_int8_and_fp64_for_fp4():
    """Blackwell Ultra cuts INT8 to 0.15 POPS (B300) / 0.165 (GB300) dense and FP64 to
    1.25 / 1.39 TF, where B200 keeps 4500 and 40: the files say so, not B200's figures."""
    b300, gb300, b200 = _chip("B300"), _chip("GB300"), _chip("B200")
    assert b300.peak_flops["int8"] == pytest.approx(150e12)
    assert gb300.peak_flops["int8"] == pytest.approx(165e12)
    assert b300.peak_flops["fp64"] == pytest.approx(1.25e12)
    assert gb300.peak_flops["fp64"] == pytest.approx(1.39e12)
    assert b200.peak_flops["int8"] == pytest.approx(4500e12)


def test_l40s_clock_gives_its_fp32_peak():
    """142 SMs x 128 FP32 lanes x 2 FLOP x 2.52 GHz = 91.6 TF, the datasheet's FP32."""
    chip = _chip("L40S")
    assert chip.cores == 142 and chip.frequency_Hz == pytest.approx(2.52e9)
    assert 142 * 128 * 2 * 2.52e9 == pytest.approx(chip.peak_flops["fp32"], rel=1e-3)


@pytest.mark.parametrize("name", ["B300", "GB300", "L40S", "RTX-PRO-6000-Server"])
def test_new_chips_are_uncalibrated_and_say_so(name):
    """No FIT row measures them, and no fit is carried over: no efficiency block, every
    kernel at 100% of peak; `hardware show` prints the peaks and the status."""
    chip = _chip(name)
    assert chip.calibration.status == UNCALIBRATED
    assert chip.efficiency.gemm_util == 1.0 and chip.efficiency.kernel_overhead_s == 0.0
    shown = library.format_show(name)
    assert "calibration: uncalibrated" in shown
    assert "Calibration: uncalibrated" in (CHIPS / f"{name}.txt").read_text()


def test_presets_for_the_new_systems():
    """DGX B300: 8 GPUs on NVSwitch at 900 GB/s, 800 Gb/s (100 GB/s) per GPU beyond;
    GB300 NVL72: 72 GPUs in one NVLink domain."""
    s = setup_pb2.Setup()
    s.system.preset, s.system.num_chip = "DGX-B300", 16
    dgx = resolve_system(s, Path("setup.txt"))
    assert dgx.chip.name == "B300"
    assert [level.degree for level in dgx.network] == [8, 2]
    assert dgx.network[0].link_bandwidth_Bps == pytest.approx(900e9)
    assert dgx.network[1].link_bandwidth_Bps == pytest.approx(100e9)
    s = setup_pb2.Setup()
    s.system.preset = "GB300-NVL72"
    rack = resolve_system(s, Path("setup.txt"))
    assert rack.chip.name == "GB300" and rack.num_chips == 72
    assert rack.network[0].degree == 72


# ---------------------------------------------------------------------------------------
# Measured tables
# ---------------------------------------------------------------------------------------

needs_db = pytest.mark.skipif(not kernel_db.installed(), reason="aiconfigurator-core missing")


def _table_row(system: str, table: str, op: str, **where: object) -> float:
    """One row's latency in seconds, read straight from the package's Parquet file."""
    root = importlib.resources.files(kernel_db.PACKAGE) / "systems" / "data"
    res = root / system / op / "trtllm" / "1.3.0rc20" / f"{table}.parquet"
    with importlib.resources.as_file(res) as path:
        frame = pd.read_parquet(path, filters=[(k, "==", v) for k, v in where.items()])
    assert len(frame) == 1, (system, where)
    return float(frame.latency.iloc[0]) * 1e-3


def _padded_row(system: str, dtype: str, m: int, n: int, k: int) -> float:
    """The time at m of the (n, k) GEMM curve made nondecreasing in m (kernel_db._monotone),
    from the Parquet file's rows, in seconds."""
    root = importlib.resources.files(kernel_db.PACKAGE) / "systems" / "data"
    res = root / system / "gemm" / "trtllm" / "1.3.0rc20" / "gemm_perf.parquet"
    where = [("gemm_dtype", "==", dtype), ("n", "==", n), ("k", "==", k)]
    with importlib.resources.as_file(res) as path:
        frame = pd.read_parquet(path, filters=where)
    means = frame.groupby("m").latency.mean().sort_index()
    return isotonic_at([float(t) * 1e-3 for t in means], list(means.index).index(m))


def test_the_new_chips_map_to_their_database_folders():
    assert kernel_db.SYSTEMS["B300"] == "b300_sxm"
    assert kernel_db.SYSTEMS["GB300"] == "gb300"
    assert kernel_db.SYSTEMS["L40S"] == "l40s"
    assert kernel_db.SYSTEMS["RTX-PRO-6000-Server"] == "rtx_pro_6000_server"


@needs_db
def test_b300_gemm_takes_the_tables_time():
    """B300 BF16 8192^3: 0.687867 ms in the table (1598 TFLOP/s, 71% of the 2250 peak); with
    kernel_source "trtllm" the GEMM costs exactly that row (an uncalibrated chip has no
    per-kernel overhead to take out)."""
    row = _table_row("b300_sxm", "gemm_perf", "gemm", gemm_dtype="bfloat16", m=8192, n=8192, k=8192)
    assert row == pytest.approx(0.687867e-3, rel=1e-6)
    chip = for_precision(_chip("B300", "trtllm"), "bf16")
    assert chip.kernel_system == "b300_sxm" and chip.kernel_source == "trtllm-1.3.0rc20"
    shape = kernel_times.GemmShape(8192, 8192, 8192)
    t = kernel_times.gemm_compute_time(chip, shape, 2 * 8192**3, "bf16")
    assert t.seconds == pytest.approx(row, rel=1e-9)
    assert t.source == "measured:trtllm-1.3.0rc20 gemm bf16, exact"


@needs_db
def test_b300_with_tables_off_runs_at_peak_and_says_so():
    """kernel_source "none" keeps the physical model: uncalibrated, at its peak,
    2 x 8192^3 / 2250e12 = 0.489 ms, faster than the measured 0.688 ms (an upper bound)."""
    chip = for_precision(_chip("B300", "none"), "bf16")
    assert chip.kernel_source == ""
    t = kernel_times.gemm_compute_time(
        chip, kernel_times.GemmShape(8192, 8192, 8192), 2 * 8192**3, "bf16"
    )
    assert t.seconds == pytest.approx(2 * 8192**3 / 2250e12, rel=1e-12)
    assert t.source == kernel_times.UNCALIBRATED


@needs_db
@pytest.mark.parametrize(
    ("name", "system", "dtype", "m", "n", "k"),
    [
        ("B300", "b300_sxm", "bfloat16", 8192, 8192, 8192),
        ("GB300", "gb300", "bfloat16", 4096, 4096, 4096),
        ("L40S", "l40s", "bfloat16", 2048, 8192, 4096),
        ("RTX-PRO-6000-Server", "rtx_pro_6000_server", "bfloat16", 4096, 4096, 4096),
    ],
)
def test_uncalibrated_covered_chips_take_the_tables_by_default(name, system, dtype, m, n, k):
    """Left unset, a covered chip with no GEMM plateau reads trtllm's newest table (the
    alternative is its datasheet peak): its GEMM costs exactly the table's row."""
    row = _padded_row(system, dtype, m, n, k)
    chip = for_precision(_chip(name), "bf16")
    assert chip.kernel_system == system and chip.kernel_source == "trtllm-1.3.0rc20"
    t = kernel_times.gemm_compute_time(
        chip, kernel_times.GemmShape(m, n, k), 2.0 * m * n * k, "bf16"
    )
    assert t.seconds == pytest.approx(row, rel=1e-9)
    assert t.source == "measured:trtllm-1.3.0rc20 gemm bf16, exact"


@needs_db
def test_a_plateau_in_the_setup_keeps_the_roofline_on_an_uncalibrated_chip():
    """A setup that gives the B300 a GEMM plateau has calibrated it its own way: 0.7 of the
    2250 peak, 2 x 8192^3 / (0.7 x 2250e12) = 0.698 ms, not the table's row."""
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = "B300", 1
    s.system.accelerator.efficiency.gemm_util = 0.7
    chip = for_precision(resolve_system(s, Path("setup.txt")).chip, "bf16")
    assert chip.kernel_source == ""
    t = kernel_times.gemm_compute_time(
        chip, kernel_times.GemmShape(8192, 8192, 8192), 2 * 8192**3, "bf16"
    )
    assert t.seconds == pytest.approx(2 * 8192**3 / (0.7 * 2250e12), rel=1e-9)


@needs_db
def test_calibrated_covered_chips_keep_the_roofline_by_default():
    """H100 has the tables and a fitted plateau: unset keeps the plateau for its GEMMs
    (DEFAULT_ON is empty; only its decode attention reads the tables), and its GEMM source
    says fitted."""
    h100 = for_precision(_chip("H100-SXM5-80GB"), "bf16")
    assert "gemm" not in h100.kernel_tables
    t = kernel_times.gemm_compute_time(h100, kernel_times.GemmShape(4096, 4096, 4096), 1e11, "bf16")
    assert t.source == kernel_times.FITTED


@needs_db
def test_l40s_fp8_gemm_takes_its_row_less_the_quantize():
    """The L40S table has bfloat16 and fp8 rows (no nvfp4, which nothing reads): FP8 8192^3
    is 3.056299 ms with the activation quantize, 0.301568 ms of it by the quantize table."""
    row = _table_row("l40s", "gemm_perf", "gemm", gemm_dtype="fp8", m=8192, n=8192, k=8192)
    quant = _table_row("l40s", "scale_matrix_perf", "quantize", quant_dtype="fp8", m=8192, k=8192)
    assert row == pytest.approx(3.056299e-3, rel=1e-6)
    assert quant == pytest.approx(0.301568e-3, rel=1e-5)
    chip = for_precision(_chip("L40S", "trtllm"), "fp8")
    t = kernel_times.measured_gemm_time(chip, 8192, 8192, 8192, "fp8")
    assert t.seconds == pytest.approx(row - quant, rel=1e-12)
    assert t.source == "measured:trtllm-1.3.0rc20 gemm fp8 less its quantize, exact"


@needs_db
def test_a_chip_without_tables_keeps_the_physical_model():
    """MI300X has no table: its GEMM is the fitted plateau, and asking it for tables is an
    error that lists the covered chips, the new ones among them."""
    mi = for_precision(_chip("MI300X"), "bf16")
    assert mi.kernel_source == "" and table_times.table_of(mi) is None
    t = kernel_times.gemm_compute_time(mi, kernel_times.GemmShape(4096, 4096, 4096), 1e11, "bf16")
    assert t.source == kernel_times.FITTED
    with pytest.raises(SetupError, match=r"does not cover chip.*B300.*GB300.*L40S"):
        _chip("MI300X", "trtllm")


@needs_db
def test_rtx_pro_6000_reads_its_own_rows():
    """BF16 4096^3 on the RTX PRO 6000 Blackwell Server: 0.357936 ms in its table (384 TFLOP/s,
    77% of the 500 dense peak); by default the GEMM costs its curve made nondecreasing in m
    there (a larger m measured faster: kernel_db._monotone)."""
    row = _table_row(
        "rtx_pro_6000_server", "gemm_perf", "gemm", gemm_dtype="bfloat16", m=4096, n=4096, k=4096
    )
    assert row == pytest.approx(0.357936e-3, rel=1e-6)
    padded = _padded_row("rtx_pro_6000_server", "bfloat16", 4096, 4096, 4096)
    chip = for_precision(_chip("RTX-PRO-6000-Server"), "bf16")
    t = kernel_times.gemm_compute_time(chip, kernel_times.GemmShape(4096, 4096, 4096), 1.0, "bf16")
    assert t.seconds == pytest.approx(padded, rel=1e-9)
