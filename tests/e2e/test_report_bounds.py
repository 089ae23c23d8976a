"""`mapshard bounds` output: the GEMM data-movement frontier as CSV and plot."""

from __future__ import annotations

import csv
import io

import pytest
from report_fixtures import kernel

from generator.graph import Kernel, KernelKind, Operand, OperandRole
from mapshard.outdir import replace_folder
from mapshard.report.bounds import BOUNDS_COLUMNS, bounds_files, gemm_shape


def test_write_bounds_csv_is_a_frontier(tmp_path):
    gemms = [("up", 64, 256, 128, 2.0), ("down", 64, 128, 256, 1.0)]
    paths = replace_folder(tmp_path / "b", bounds_files(gemms, 32e3))
    assert sorted(p.name for p in paths) == ["bounds.csv", "bounds.svg"]
    rows = list(csv.DictReader(io.StringIO(paths[0].read_text())))
    assert tuple(rows[0]) == BOUNDS_COLUMNS
    for name, m, k, n, bpe in gemms:
        pts = [r for r in rows if r["kernel"] == name]
        buf = [float(r["buffer_bytes"]) for r in pts]
        traffic = [float(r["dram_bytes"]) for r in pts]
        assert buf == sorted(buf) and all(a > b for a, b in zip(traffic, traffic[1:]))
        assert traffic[-1] == pytest.approx((m * k + k * n + m * n) * bpe)  # compulsory
        oi = [float(r["operational_intensity"]) for r in pts]
        assert oi[-1] == pytest.approx(2 * m * k * n / traffic[-1])
        fits = [r["fits_buffer"] == "1" for r in pts]
        assert fits == [b <= 32e3 for b in buf]
    assert "<svg" in paths[1].read_text()


def test_gemm_shape_from_names_and_from_graph_kernel():
    kp = kernel("layer", "ffn", "GEMM", "Ma_Mw", "FWD", {"m": 512, "k": 2048, "n": 8192}, 0)
    assert gemm_shape(kp, 2) == (512, 2048, 4096, 2.0)  # sharding "n" over 2 chips
    assert gemm_shape(kp, 1) == (512, 2048, 8192, 2.0)
    ew = kernel("layer", "act", "ELEMENTWISE", "Va", "FWD", {"m": 4, "n": 4}, 0)
    assert gemm_shape(ew, 1) is None
    graph_kernel = Kernel(
        name="q",
        kind=KernelKind.GEMM,
        dims=(("b", 4), ("s", 128), ("h", 1024), ("o", 3072)),
        operands=(
            Operand("x", OperandRole.INPUT, ("b", "s", "h"), 2.0),
            Operand("w", OperandRole.WEIGHT, ("h", "o"), 1.0),
            Operand("y", OperandRole.OUTPUT, ("b", "s", "o"), 2.0),
        ),
        flop=2.0 * 4 * 128 * 1024 * 3072,
    )
    plan_kernel = kernel("p", "q", "GEMM", "Ma_Mw", "FWD", dict(graph_kernel.dims), 0)
    assert gemm_shape(plan_kernel, 1, graph_kernel) == (512, 1024, 3072, 1.0)
