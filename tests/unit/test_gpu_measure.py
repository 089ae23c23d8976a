"""benchmarks/gpu_measure.py's torch-free parts: the rows it writes fit the validation schema
and land on the side the written split rule decides; FLOP conventions by hand."""

from __future__ import annotations

import csv
import shutil

from benchmark_scripts import load

gm = load("gpu_measure")


def test_flop_conventions_by_hand():
    assert gm.gemm_flop(802816, 768, 192) == 2 * 802816 * 768 * 192  # 2.368e11
    # 4 x 4 x 4096^2 x 16 x 128 / 2 (causal) = 2.749e11
    assert gm.attention_flop(4, 4096, 16, 128, causal=True) == 4 * 4 * 4096**2 * 16 * 128 / 2
    assert gm.attention_flop(1, 8, 1, 1, causal=False) == 256.0


def test_the_shapes_cover_decode_m_and_the_skinny_n_of_the_missed_check_rows():
    shapes = gm.gemm_shapes()
    assert (802816, 768, 192) in shapes  # P-GEM11 / P-GEM23's shape
    assert {(1, 4096, 4096), (128, 8192, 28672), (4096, 4096, 4096)} <= set(shapes)
    assert len(shapes) == len(set(shapes)) == 4 + 4 * 5 + 9 + gm.RANDOM_GEMMS


def test_random_gemm_shapes_are_aligned_bounded_and_the_same_on_every_machine():
    shapes = gm.random_gemm_shapes(50, seed=7)
    assert shapes == gm.random_gemm_shapes(50, seed=7)  # seeded: the same family every run
    assert all(16 <= d <= 16384 and d % 16 == 0 for s in shapes for d in s)
    assert all(m * k * n <= 2**34 for m, k, n in shapes)
    assert len({d for s in shapes for d in s}) > 30  # spread, not a few repeated sizes


def test_split_rule_matches_the_schemas():
    """sha256("P-GEM07") starts 4ee64573 = 0 mod 3: check; "P-GEM01": fit."""
    assert gm.side("P-GEM07") == "check" and gm.side("P-GEM01") == "fit"


def test_rows_fill_the_schema_and_are_placed_by_the_rule(tmp_path, monkeypatch):
    header = gm.schema_header()
    assert len(header) == 50  # 47 + the provenance columns source_table, source_row, release

    def gemm_row(row_id: str, m: int, **cells: str) -> dict[str, str]:
        return gm.make_row(
            header,
            "H100-SXM5-80GB",
            "NVIDIA H100 80GB HBM3",
            id=row_id,
            kind="gemm",
            m=m,
            k=2,
            n=3,
            metric="throughput_flops",
            value="1.0",
            **cells,
        )

    rows = [gemm_row(f"M-H100-{i:03d}", m=i) for i in range(1, 13)]  # 12 families of one
    assert all(list(r) == header for r in rows)
    assert rows[0]["extra_params"] == "device=NVIDIA_H100_80GB_HBM3;timing=cuda_event_stream"
    assert rows[0]["usable"] == "1" and rows[0]["num_chips"] == "1"
    assert rows[0]["source_table"] and rows[0]["source_row"] == "M-H100-001"
    assert (
        "timing=cuda_event_stream" not in gemm_row("x", 1, extra_params="timing=t")["extra_params"]
    )
    # M-H100-101/102: one new family of two rows (another library), placed by the smaller id
    rows += [gemm_row("M-H100-102", m=5000), gemm_row("M-H100-101", m=5000)]
    # a row of a published row's configuration joins that row's side, whatever its own id
    with gm.CHECK.open(newline="") as f:
        published = next(r for r in csv.DictReader(f) if r["kind"] == "gemm")
    twin = dict(published, id="M-H100-900", extra_params="library=x")
    assert gm.side("M-H100-900") == "fit"  # by its own id it would be FIT
    rows.append(twin)
    measured = tmp_path / "measured.csv"
    with measured.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    fit, check = tmp_path / "fit.csv", tmp_path / "check.csv"
    shutil.copy(gm.FIT, fit)
    shutil.copy(gm.CHECK, check)
    monkeypatch.setattr(gm, "FIT", fit)
    monkeypatch.setattr(gm, "CHECK", check)
    gm.place(measured)
    want_check = [r["id"] for r in rows[:12] if gm.side(r["id"]) == "check"]
    pair = ["M-H100-102", "M-H100-101"] if gm.side("M-H100-101") == "check" else []
    with check.open(newline="") as f:
        ids = [r["id"] for r in csv.DictReader(f)]
    assert ids[-len(want_check + pair) - 1 :] == want_check + pair + ["M-H100-900"]
