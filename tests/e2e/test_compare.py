"""`mapshard compare`: a scenario and a result folder side by side; every ratio is the
value over the reference's, read back from the two summary.json files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from mapshard.cli import EXIT_BAD_INPUT, main

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
    assert main(["run", str(gemm), "--out", str(tmp_path / "g"), "--quiet"]) == 0
    a = json.loads((decode / "summary.json").read_text())["latency_s"]
    b = json.loads((tmp_path / "g" / "summary.json").read_text())["latency_s"]
    assert rows["latency"][1].endswith(f"(x{b / a:.2g})")
    assert rows[""] == ["llama31_8b_decode_h100", "gemm_h100"]
    # library H100s carry no price: said, not hidden and not "$0"; energy from 700 W TDP
    assert rows["system cost"] == ["not priced", "not priced"] and "$0" not in page
    assert "not modelled" not in rows["energy per step"][0]
    assert "network-bound</span>" not in page  # neither side has network-bound time


def test_compare_needs_two(capsys) -> None:
    assert main(["compare", str(ROOT / "scenarios" / "gemm_h100")]) == EXIT_BAD_INPUT
    assert "at least two" in capsys.readouterr().err
