"""`mapshard compare`: a scenario and a result folder side by side; every ratio is the
value over the reference's, read back from the two summary.json files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from mapshard.cli import EXIT_BAD_INPUT, main
from mapshard.compare import BOUNDS, Side, caveats, table

ROOT = Path(__file__).resolve().parents[2]


def test_compare_a_result_folder_with_a_scenario(tmp_path: Path, capsys) -> None:
    decode = tmp_path / "decode"
    assert main(["run", str(ROOT / "scenarios" / "llama31_8b_decode_h100"), "--out",
                 str(decode), "--quiet"]) == 0  # fmt: skip
    gemm = ROOT / "scenarios" / "gemm_h100"
    out = tmp_path / "cmp"
    assert main(["compare", str(decode), str(gemm), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "latency" in printed and "written:" in printed
    page = (out / "compare.html").read_text()
    assert "<table>" in page and "Where the time goes" in page
    rows = {r[0]: r[1:] for r in csv.reader((out / "compare.csv").open())}
    # a decode step beside one GEMM: unlike quantities, so no latency ratio, and a note
    assert rows["latency is"] == ["decode step", "gemm"]
    assert "(x" not in rows["latency"][1] and "not comparable" in printed
    assert main(["run", str(gemm), "--out", str(tmp_path / "g"), "--quiet"]) == 0
    a = json.loads((tmp_path / "g" / "summary.json").read_text())["latency_s"]
    assert main(["compare", str(tmp_path / "g"), str(gemm), "--out", str(tmp_path / "c2")]) == 0
    like = {r[0]: r[1:] for r in csv.reader((tmp_path / "c2" / "compare.csv").open())}
    assert like["latency"][1].endswith("(x1)") and a > 0  # the same GEMM, solved twice
    assert rows[""] == ["llama31_8b_decode_h100", "gemm_h100"]
    # library H100s carry no price: said, not hidden and not "$0"; energy from 700 W TDP
    assert rows["system cost"] == ["not priced", "not priced"] and "$0" not in page
    assert "not modelled" not in rows["energy per step"][0]
    assert "network-bound</span>" not in page  # neither side has network-bound time


def test_compare_needs_two(capsys) -> None:
    assert main(["compare", str(ROOT / "scenarios" / "gemm_h100")]) == EXIT_BAD_INPUT
    assert "at least two" in capsys.readouterr().err


def _side(name: str, **summary) -> Side:
    return Side(name, summary, {b: 0.0 for b in BOUNDS})


def test_unlike_latencies_get_no_ratio_and_a_caveat() -> None:
    """A decode step beside a whole request: no "x170" on latency, TPOT or tokens/s, and a
    note says why; an uncalibrated chip beside a calibrated one is said too."""
    cal = {"status": "calibrated"}
    step = _side("decode", workload_kind="inference", latency_s=0.02, tpot_s=0.02,
                 tokens_per_s=400.0, num_chips=8, chip_calibration=cal)  # fmt: skip
    request = _side("request", workload_kind="inference", latency_s=3.4, ttft_s=0.2,
                    tpot_s=0.006, tokens_per_s=2500.0, num_chips=8,
                    chip_calibration={"status": "uncalibrated"})  # fmt: skip
    rows = {r[0]: r[1:] for r in table([step, request])}
    assert rows["latency is"] == ["decode step", "request"]
    assert rows["latency"][1] == "3.4 s" and rows["tokens/s"][1] == "2.5 k"  # no "(x...)"
    assert rows["chips"][1] == "8 (x1)"  # a like quantity keeps its ratio
    notes = caveats([step, request])
    assert any("not comparable" in n for n in notes)
    assert any("request runs on an uncalibrated chip" in n for n in notes)
    same = _side("decode2", workload_kind="inference", latency_s=0.04, tpot_s=0.04,
                 chip_calibration=cal)  # fmt: skip
    assert {r[0]: r[1:] for r in table([step, same])}["latency"][1] == "40 ms (x2)"
    assert caveats([step, same]) == []


def test_two_chips_on_one_setup_are_named_apart_with_their_chip(tmp_path: Path, capsys) -> None:
    """A copy of a setup with only its chip changed keeps the setup's `name`: the columns
    are told apart by the folder given, and a `chip` row says which chip each runs on."""
    text = (ROOT / "scenarios" / "gemm_h100" / "setup.txt").read_text()
    assert text.count('"H100-SXM5-80GB"') == 1
    b200 = tmp_path / "b200"
    b200.mkdir()
    (b200 / "setup.txt").write_text(text.replace('"H100-SXM5-80GB"', '"B200"'))
    gemm = ROOT / "scenarios" / "gemm_h100"
    assert main(["compare", str(gemm), str(b200), "--out", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    rows = {r[0]: r[1:] for r in csv.reader((tmp_path / "c" / "compare.csv").open())}
    assert rows[""] == [f"gemm_h100 ({gemm})", f"gemm_h100 ({b200})"]
    assert rows["chip"] == ["H100-SXM5-80GB", "B200"]


def test_an_infeasible_side_is_named(tmp_path: Path, capsys) -> None:
    """Which of the scenarios does not fit: the message said only "DRAM capacity: ..."
    (found by fuzzing)."""
    big = tmp_path / "big"
    big.mkdir()
    text = (ROOT / "scenarios" / "llama31_70b_decode_8xh100" / "setup.txt").read_text()
    (big / "setup.txt").write_text(text.replace("num_chip: 8", "num_chip: 1"))
    small = str(ROOT / "scenarios" / "llama31_8b_decode_h100")
    code = main(["compare", small, str(big), "--out", str(tmp_path / "cmp")])
    err = capsys.readouterr().err.strip()
    assert code == 3
    assert err.startswith(f"infeasible: DRAM capacity: {big}: best layout (single chip) needs")
    assert not (tmp_path / "cmp").exists()
