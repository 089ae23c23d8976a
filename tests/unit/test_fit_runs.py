"""Gaudi 2 and 3 efficiencies are re-derived from their single-chip FIT runs
(mapshard.fidelity.fit_runs), and the run-time rule is checked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from hardware import library
from mapshard.fidelity import fit_runs
from mapshard.fidelity.cases import read_cases

DATA = Path(__file__).parents[1] / "data" / "validation"
FIT_FILES = (DATA / "validation_dev_structured.csv", DATA / "validation_public_fit.csv")


@pytest.fixture(scope="module")
def cases():
    return [c for path in FIT_FILES for c in read_cases(path)]


def test_run_time_by_hand():
    """Two kernels under full overlap, 3 and 5 instances: a GEMM (C = 2 ms, M = 1 ms) and
    a stream (C = 0.1 ms, M = 4 ms). At g = 0.5, d = 0.8: 3 x max(4, 1.25) + 5 x max(0.1,
    5) = 12 + 25 = 37 ms; the vector kernel's compute does not scale with g."""
    k = fit_runs.KernelTime
    p = fit_runs.RunPoint(
        "X",
        0.040,
        (k(True, 2e-3, 1e-3, 0.0, 0.0, 3.0), k(False, 0.1e-3, 4e-3, 0.0, 0.0, 5.0)),
        "perfect",
    )
    assert p.time_s(0.5, 0.8) == pytest.approx(37e-3)
    assert p.time_s(1.0, 1.0) == pytest.approx(3 * 2e-3 + 5 * 4e-3)
    # kernel by kernel with a serialised network: C + M + N when nothing overlaps
    q = fit_runs.RunPoint("Y", 1.0, (k(True, 2e-3, 1e-3, 1e-3, 0.0, 1.0),), "none")
    assert q.time_s(0.5, 0.5) == pytest.approx(4e-3 + 2e-3 + 1e-3)


def test_measured_time_of_a_throughput_row(cases):
    """P-GD201: batch 1230 x 128 output tokens at 13137 tokens/s = 11.98 s per request."""
    (row,) = [c for c in cases if c.id == "P-GD201"]
    assert fit_runs.measured_time(row) == pytest.approx(1230 * 128 / 13137)


@pytest.mark.parametrize(
    "chip,rows",
    [
        ("Gaudi2", ("P-GD201", "P-GD203", "P-GD212")),  # P-GD204: its KV cache does not fit
        ("Gaudi3", ("P-GD301", "P-GD302", "P-GD309")),
    ],
)
def test_gaudi_efficiencies_are_the_fit(cases, chip, rows):
    runs = fit_runs.single_chip_runs(cases, chip)
    points = [p for p in (fit_runs.run_point(c, DATA) for c in runs) if p is not None]
    f = fit_runs.fit_runs(points)
    assert f.sources == rows
    eff = library.get_chip(chip).accelerator.efficiency
    assert eff.gemm_util == pytest.approx(f.matrix_util)
    assert eff.dram_util == pytest.approx(f.dram_util)
    assert f.mean_abs_err < 0.05
    for r in rows:
        assert r in eff.source
