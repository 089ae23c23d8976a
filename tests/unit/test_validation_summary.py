"""validate's summary: one line per group, then per kind and per chip, means by hand."""

from __future__ import annotations

import csv
import io

import pytest

from mapshard.fidelity.report import Outcome, format_summary, summarize, summary_csv


def _gemm(rid: str, chip: str, measured: float, predicted: float) -> Outcome:
    return Outcome(rid, "gemm", "gemm", "throughput_flops", measured, predicted, chip=chip)


def test_a_group_of_several_chips_gets_a_line_per_chip():
    rows = [
        _gemm("A", "H100", 100.0, 104.0),  # +4%
        _gemm("B", "H100", 100.0, 98.0),  # -2%
        _gemm("C", "MI300X", 100.0, 130.0),  # +30%
        Outcome("D", "gemm", "gemm", "throughput_flops", 100.0, None, "skipped", chip="MI300X"),
    ]
    by = {s.group: s for s in summarize(rows)}
    assert list(by) == ["gemm", "  gemm on H100", "  gemm on MI300X"]
    assert by["gemm"].mean_abs_pct == pytest.approx((4 + 2 + 30) / 3)
    assert by["gemm"].bound_pct == 5
    assert by["  gemm on H100"].mean_abs_pct == pytest.approx(3.0)
    assert (by["  gemm on MI300X"].predicted, by["  gemm on MI300X"].not_predicted) == (1, 1)
    assert by["  gemm on MI300X"].bound_pct is None and by["  gemm on MI300X"].worst_id == "C"
    levels = [r["level"] for r in csv.DictReader(io.StringIO(summary_csv(summarize(rows))))]
    assert levels == ["group", "chip", "chip"]
    assert "  gemm on MI300X" in format_summary(summarize(rows))


def test_one_chip_adds_no_chip_lines():
    rows = [_gemm("A", "H100", 100.0, 104.0), _gemm("B", "H100", 100.0, 98.0)]
    assert [s.group for s in summarize(rows)] == ["gemm"]
