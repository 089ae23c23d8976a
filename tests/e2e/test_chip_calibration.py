"""Every library chip is calibrated from cited FIT measurements or visibly flagged
uncalibrated, and the flag reaches a user: `mapshard hardware list`/`show`, the terminal
summary, summary.json (`chip_calibration`), report.html and sweep rows."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from hardware import library
from hardware.calibration import CALIBRATED, CORE_PARTS, UNCALIBRATED, calibration_of
from mapshard.cli import main
from mapshard.sweeps import metrics
from mapshard.validate_cases import UNCALIBRATED_NOTE
from schema import setup_pb2

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "validation"
# The chips with public measurements in the FIT set (VALIDATION_SCHEMA.md): kernels, or for
# Gaudi 2/3 single-chip model runs (mapshard.fidelity.fit_runs); every other library chip
# must say it is uncalibrated.
EXPECTED_CALIBRATED = {
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "H100-SXM5-80GB",
    "H200-SXM-141GB",
    "GB200",
    "B200",  # the GB200 GEMM fit (same die)
    "Gaudi2",
    "Gaudi3",
    "MI300X",  # hipBLASLt FP8 GEMMs and RCCL all-reduce; its HBM copy row is a CHECK row
}
ROW_ID = re.compile(r"\b(?:[TIKCH]\d{2}|P-[A-Z]{3}\d{2}|P-GD[23]\d{2})(?:\.\.\d{2})?\b")


def _ids(text: str) -> set[str]:
    """Row ids a source string cites, ranges such as P-NCC05..09 expanded."""
    out = set()
    for token in ROW_ID.findall(text):
        if ".." in token:
            head, last = token.split("..")
            prefix, first = head[:-2], int(head[-2:])
            out |= {f"{prefix}{i:02d}" for i in range(first, int(last) + 1)}
        else:
            out.add(token)
    return out


def _csv_ids(name: str) -> set[str]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()[1:]
    return {line.split(",", 1)[0] for line in lines}


@pytest.mark.parametrize("chip", library.chip_names())
def test_every_library_chip_is_calibrated_or_flagged(chip):
    cal = calibration_of(library.get_chip(chip).accelerator.efficiency)
    assert cal.status == (CALIBRATED if chip in EXPECTED_CALIBRATED else UNCALIBRATED)
    if not cal.calibrated:
        assert cal.at_peak == CORE_PARTS
        assert "100% of peak" in cal.describe()


@pytest.mark.parametrize("chip", sorted(EXPECTED_CALIBRATED - {"A100-SXM4-40GB"}))
def test_a_calibrated_chip_cites_fit_rows_and_no_check_row(chip):
    cited = _ids(library.get_chip(chip).accelerator.efficiency.source)
    fit = _csv_ids("validation_dev_structured.csv") | _csv_ids("validation_public_fit.csv")
    assert cited and cited <= fit, cited - fit
    assert not cited & _csv_ids("validation_public_check.csv")


def test_what_each_calibration_rests_on():
    """H100: every core part measured; GB200: no HBM copy benchmark, so DRAM is at peak;
    A100 40GB: the 80GB compute fit, no DRAM or NCCL measurement of its own."""
    parts = {
        c: calibration_of(library.get_chip(c).accelerator.efficiency)
        for c in ("H100-SXM5-80GB", "GB200", "A100-SXM4-40GB")
    }
    assert parts["H100-SXM5-80GB"].at_peak == ()
    assert "gemm fp8" in parts["H100-SXM5-80GB"].measured
    assert parts["GB200"].at_peak == ("dram",)
    assert parts["A100-SXM4-40GB"].at_peak == ("dram", "collective")


def test_an_efficiency_without_a_cited_source_is_not_calibrated():
    e = setup_pb2.Efficiency(gemm_util=0.8)
    assert calibration_of(e).status == UNCALIBRATED
    e.source = "my measurements"
    assert calibration_of(e).status == CALIBRATED
    e.compute_util = 0.5  # DFModel's fixed utilisation replaces the model: not a calibration
    assert calibration_of(e).status == UNCALIBRATED


def test_hardware_list_shows_the_status_of_every_chip(capsys):
    assert main(["hardware", "list"]) == 0
    out = capsys.readouterr().out
    for chip in library.chip_names():
        (line,) = [ln for ln in out.splitlines() if ln.startswith(chip + " ")]
        want = CALIBRATED if chip in EXPECTED_CALIBRATED else UNCALIBRATED
        assert line.split()[-1] == want, line


def test_hardware_show_says_what_is_at_peak(capsys):
    assert main(["hardware", "show", "GB200"]) == 0
    out = capsys.readouterr().out
    assert "calibration: calibrated (" in out and "at 100% of peak: dram" in out
    assert main(["hardware", "show", "TPUv5p"]) == 0
    assert "calibration: uncalibrated: every kernel at 100% of peak" in capsys.readouterr().out


@pytest.mark.parametrize(
    "scenario,status",
    [("dlrm_tpuv4", UNCALIBRATED), ("gemm_h100", CALIBRATED)],
)
def test_the_run_reports_carry_the_status(tmp_path, capsys, scenario, status):
    out = tmp_path / "out"
    assert main(["run", str(ROOT / "scenarios" / scenario), "--out", str(out)]) == 0
    assert f"Chip efficiency {status}" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["chip_calibration"]["status"] == status
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "chip efficiency" in html and f'class="v">{status}<' in html


def test_sweep_rows_have_a_calibration_column():
    assert metrics.columns(("chip",))[-1] == "chip_calibration"
    assert "chip_calibration" not in metrics.METRICS  # text: never filtered or optimised


def test_validate_names_the_uncalibrated_chips_it_predicted(tmp_path, capsys):
    """Two CHECK rows moved to an uncalibrated chip (TPU v5p) are predicted at peak: the
    validate summary says so, and the calibrated chips' rows are not listed."""
    src = DATA / "validation_public_check.csv"
    lines = src.read_text(encoding="utf-8").splitlines()
    keep = [ln for ln in lines[1:] if ln.startswith(("P-GD209,", "P-GD303,", "P-TRT03,"))]
    moved = [ln.replace(",Gaudi2,", ",TPUv5p,").replace(",Gaudi3,", ",TPUv5p,") for ln in keep]
    cases = tmp_path / "cases.csv"
    cases.write_text("\n".join([lines[0], *moved]) + "\n", encoding="utf-8")
    assert main(["validate", str(cases), "--out", str(tmp_path / "v")]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("predicted on uncalibrated chips")]
    assert "TPUv5p (2)" in line
    assert "H100" not in line and "Gaudi" not in line
    # each row's own line in validation.csv says it too (issue #35)
    with open(tmp_path / "v" / "validation.csv", newline="", encoding="utf-8") as f:
        reasons = {r["id"]: r["reason"] for r in csv.DictReader(f)}
    note = UNCALIBRATED_NOTE
    assert reasons["P-GD209"].endswith(note) and reasons["P-GD303"].endswith(note)
    assert note not in reasons["P-TRT03"]
