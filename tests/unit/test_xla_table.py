"""The OpenXLA matmul-table rows (P-XHB, P-XBB, P-XBF, P-XHF): their numbers are the table's,
re-derived here by hand (FLOP / whole nanoseconds), the importer rebuilds a committed row from
the table's text, and every row sits on the side its id hash decides."""

from __future__ import annotations

import csv
import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from hardware import library
from mapshard.cli import main
from mapshard.fidelity import fit
from mapshard.fidelity.cases import read_cases
from mapshard.fidelity.flops import convention_flop
from mapshard.fidelity.xla_table import SETS, STRATIFIED, build_row, parse_table

DATA = Path(__file__).parents[1] / "data" / "validation"
FILES = {"fit": DATA / "validation_public_fit.csv", "check": DATA / "validation_public_check.csv"}
PREFIXES = ("P-XHB", "P-XBB", "P-XBF", "P-XHF")


def xla_rows() -> dict[str, tuple[str, dict[str, str]]]:
    """{id: (file side, row)} of every row of the four prefixes."""
    out = {}
    for name, path in FILES.items():
        with path.open(encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f):
                if r["id"].startswith(PREFIXES):
                    out[r["id"]] = (name, r)
    return out


def extra(row: dict[str, str]) -> dict[str, str]:
    return dict(p.split("=", 1) for p in row["extra_params"].split(";"))


def test_every_row_is_on_the_side_its_id_hash_decides():
    rows = xla_rows()
    # 33 shapes for H100 BF16, B200 BF16 and B200 FP8, 4 kept-for-reference H100 FP8 rows
    assert len(rows) == 33 * 3 + 4
    for row_id, (name, _) in rows.items():
        h = int(hashlib.sha256(row_id.encode()).hexdigest()[:8], 16)
        assert name == ("check" if h % 3 == 0 else "fit"), row_id
    # by hand: sha256("P-XHB03") starts 779892cf = 2006487759 = 3 x 668829253: CHECK;
    # "P-XHB01" starts 10a60012 = 279314450 = 2 mod 3: FIT
    assert 2006487759 == 3 * 668829253 and rows["P-XHB03"][0] == "check"
    assert 279314450 % 3 == 2 and rows["P-XHB01"][0] == "fit"


@pytest.mark.parametrize(
    "row_id,b,m,n,k,published,ns",
    [
        # sm_90 b: 1 m: 256 n: 256 k: 256 bf16: 2 x 256^3 = 33,554,432 FLOP in 4,992 ns
        # = 6,721,641,025,641.03 FLOP/s, stored truncated
        ("P-XHB01", 1, 256, 256, 256, 6721641025641, 4992),
        # sm_90 b: 4 4096^3 bf16: 2 x 4 x 4096^3 = 549,755,813,888 FLOP in 697,041 ns
        # = 788,699,393,418,751.x FLOP/s (79.7% of the H100 SXM's 989.4 TF)
        ("P-XHB33", 4, 4096, 4096, 4096, 788699393418751, 697041),
        # sm_100 1024^3 bf16: 2 x 1024^3 = 2,147,483,648 FLOP in 7,456 ns = 288,020,875,536,480.x
        ("P-XBB14", 1, 1024, 1024, 1024, 288020875536480, 7456),
        # sm_100 b: 4 4096^3 e4m3 x e4m3 -> bf16: 549,755,813,888 FLOP in 167,625 ns
        # = 3,279,676,742,061,148.x FLOP/s (72.9% of the B200's 4500 TF)
        ("P-XBF33", 4, 4096, 4096, 4096, 3279676742061148, 167625),
    ],
)
def test_rows_carry_the_tables_numbers(row_id, b, m, n, k, published, ns):
    _, row = xla_rows()[row_id]
    assert (row["batch"], row["m"], row["n"], row["k"]) == tuple(str(x) for x in (b, m, n, k))
    assert float(row["value"]) == published
    assert row["value_as_published"].startswith(f"{published} FLOP/s")
    flop = 2 * b * m * n * k
    assert int(flop * 1e9 / ns) == published  # the generator's int64(FLOP * 1e9 / ns)
    assert float(extra(row)["derived_kernel_time_s"]) == pytest.approx(ns * 1e-9, rel=1e-12)
    assert row["flop_convention"] == "2bmnk" and row["kind"] == "gemm"


def test_h100_fp8_rows_are_kept_but_not_usable():
    """sm_90 e4m3 4096^3 at 56,705 ns is 2 x 4096^3 / 56.705 us = 2424 TFLOP/s, above the
    H100's 1978.9 TFLOP/s dense FP8 peak: not one GEMM's time."""
    rows = xla_rows()
    _, row = rows["P-XHF03"]
    assert 2 * 4096**3 / 56705e-9 > 1978.9e12
    assert all(rows[f"P-XHF0{i}"][1]["usable"] == "0" for i in range(1, 5))
    assert all(r["usable"] == "1" for i, (_, r) in rows.items() if not i.startswith("P-XHF"))
    assert "exceed the H100's" in row["notes"]


def test_the_importer_rebuilds_a_committed_row_from_the_table_text():
    """One entry of the table, as the header writes it, gives P-XBB14 cell for cell."""
    text = """
  entries {
    key: "sm_100"
    value {
      entries {
        b: 1
        m: 1024
        n: 1024
        k: 1024
        flops { key: "bf16xbf16->bf16" value: 288020875536480 }
        flops { key: "f32xf32->f32" value: 1 }
      }
    }
  }"""
    table = parse_table(text)
    (entry,) = table["sm_100"]
    assert (entry.b, entry.m, entry.n, entry.k) == (1, 1024, 1024, 1024)
    _, committed = xla_rows()["P-XBB14"]
    rs = SETS[1]
    assert rs.prefix == "P-XBB" and rs.shapes.index((1, 1024, 1024, 1024)) == 13
    assert build_row(rs, 14, entry, "sm_100", list(committed)) == committed


def test_the_stratified_shapes():
    """27 single GEMMs (m, n, k each 256, 1024, 4096), then the three cubes at b = 2 and 4."""
    assert len(STRATIFIED) == 33 and len(set(STRATIFIED)) == 33
    assert STRATIFIED[0] == (1, 256, 256, 256) and STRATIFIED[26] == (1, 4096, 4096, 4096)
    assert STRATIFIED[27:] == tuple((b, s, s, s) for b in (2, 4) for s in (256, 1024, 4096))


def test_batched_rows_count_every_gemm_of_the_batch():
    """P-XHB33: the convention counts b = 4 GEMMs: 549,755,813,888 FLOP, so the row's time
    is the table's 697,041 ns. Its kernel-only timing keeps it out of the GEMM fit and in a
    group of its own (mapshard/fidelity/cases.py); the same row timed in a stream would be
    a batched fit point."""
    case = next(c for c in read_cases(FILES["fit"]) if c.id == "P-XHB33")
    assert convention_flop(case) == 2 * 4 * 4096**3 == 549755813888
    assert case.kernel_only and case.group == "gemm_kernel_only"
    assert fit.gemm_points([case], "H100-SXM5-80GB") == []
    streamed = replace(case, extra={**case.extra, "timing": "cuda_events"})
    (pt,) = fit.gemm_points([streamed], "H100-SXM5-80GB")
    assert pt.batch == 4 and pt.time_s == pytest.approx(697041e-9, rel=1e-9)


def test_validate_prices_a_batched_row_as_all_its_gemms(tmp_path):
    """P-XHB33 through `mapshard validate`: 4 GEMMs of 4096^3 on the H100 (989.4 TF BF16,
    the chip file's plateau u and overhead o, 128 x 256 tiles on 132 SMs: 4 x 32 x 16 =
    2048 tiles in 16 waves of 132, occupancy 2048 / 2112; DRAM 4 x 3 x 4096^2 x 2 B /
    2.90 TB/s = 139 us, below compute): 549,755,813,888 / (989.4e12 x u x 2048/2112) + o;
    with u = 0.784, o = 4.5 us: 730.88 + 4.5 = 735.38 us, 747.58 TFLOP/s (-5.2%). Priced as
    one GEMM it would be a quarter of the FLOP."""
    lines = FILES["fit"].read_text(encoding="utf-8").splitlines()
    cases = tmp_path / "cases.csv"
    cases.write_text(
        "\n".join([lines[0], *[ln for ln in lines if ln.startswith("P-XHB33,")]]) + "\n",
        encoding="utf-8",
    )
    assert main(["validate", str(cases), "--out", str(tmp_path / "v")]) == 0
    with (tmp_path / "v" / "validation.csv").open(encoding="utf-8", newline="") as f:
        (row,) = list(csv.DictReader(f))
    eff = library.get_chip("H100-SXM5-80GB").accelerator.efficiency
    u, o = eff.gemm_util, eff.kernel_overhead_us * 1e-6
    t = 549755813888 / (989.4e12 * u * 2048 / 2112) + o
    assert float(row["predicted"]) == pytest.approx(549755813888 / t, rel=1e-9)
    assert float(row["error_pct"]) == pytest.approx(
        (549755813888 / t / 788699393418751 - 1) * 100, abs=1e-3
    )
