"""The project's own measured GEMM rows against the physical model and NVIDIA's tables, by
shape class (issue #34: "square, skinny and decode shapes, BF16 and FP8"), FIT and CHECK
apart.

    python benchmarks/gemm_rows.py [--chip H200-SXM-141GB] [--precision bf16]

Every usable single-GEMM row of tests/data/validation/validation_public_{fit,check}.csv on
a chip the installed aiconfigurator-core covers is predicted the way `mapshard validate`
predicts it (mapshard.fidelity), twice: `system.kernel_source: "none"` (the calibrated
roofline) and `"trtllm"` (every GEMM from the measured table). Rows are classed by their
shape: decode (m <= 256), long-K (k >= 4 (m + n): split-K territory), tiny (under 1
GFLOP), large (m, n, k >= 2048), else mid. Prints per class and split the rows, the mean
|error| % of each source and the median predicted / measured time (above 1: too slow).
Nothing is fitted; the kernel-only rows are an unbounded validation group, this is a view
of them (hardware/kernel_source.py says why the tables stay off by default).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hardware import kernel_db  # noqa: E402
from mapshard.fidelity.cases import Case, read_cases  # noqa: E402
from mapshard.validate_cases import validate_case  # noqa: E402

DATA = ROOT / "tests" / "data" / "validation"
SOURCES = ("none", "trtllm")
CLASSES = ("decode", "long-K", "tiny", "mid", "large")


def shape_class(m: int, n: int, k: int) -> str:
    if m <= 256:
        return "decode"
    if k >= 4 * (m + n):
        return "long-K"
    if 2 * m * n * k < 1e9:
        return "tiny"
    if min(m, n, k) >= 2048:
        return "large"
    return "mid"


def rows(split: str, chip: str, precision: str) -> list[Case]:
    """The usable single-GEMM rows of one split on covered chips (filtered as asked)."""
    out = []
    for case in read_cases(DATA / f"validation_public_{split}.csv"):
        if case.kind != "gemm" or not case.usable or case.int("batch", 1) > 1:
            continue
        if case.text("chip") not in kernel_db.SYSTEMS:
            continue
        if chip and case.text("chip") != chip:
            continue
        if precision and case.text("precision") != precision:
            continue
        out.append(case)
    return out


def ratio(case: Case, source: str, where: Path) -> float | None:
    """Predicted / measured time of one row with one kernel source (None: not predicted).
    The rows' metric is a throughput, so the time ratio is measured / predicted."""
    got = validate_case(replace(case, extra={**case.extra, "kernel_source": source}), where)
    if got.predicted is None or not got.measured:
        return None
    return got.measured / got.predicted


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chip", default="", help="one library chip (default: every covered)")
    ap.add_argument("--precision", default="", help="bf16, fp16 or fp8 (default: all)")
    args = ap.parse_args()
    if not kernel_db.installed():
        print("aiconfigurator-core is not installed: no tables to compare", file=sys.stderr)
        return 1
    print("mean |error| % / median predicted time / measured, per shape class")
    head = f"{'split':<6} {'class':<7} {'rows':>4}"
    for s in SOURCES:
        head += f" {s + ' %':>10} {s + ' x':>9}"
    print(head)
    with tempfile.TemporaryDirectory(prefix="mapshard_gemm_rows_") as tmp:
        for split in ("fit", "check"):
            by_class: dict[str, dict[str, list[float]]] = {}
            for case in rows(split, args.chip, args.precision):
                m, n, k = case.int("m"), case.int("n"), case.int("k")
                got = [ratio(case, s, Path(tmp)) for s in SOURCES]
                if any(r is None for r in got):
                    continue
                cls = by_class.setdefault(shape_class(m, n, k), {s: [] for s in SOURCES})
                for s, r in zip(SOURCES, got):
                    cls[s].append(r)
            for name in (*CLASSES, "all"):
                if name == "all":
                    picked = {s: [r for c in by_class.values() for r in c[s]] for s in SOURCES}
                else:
                    picked = by_class.get(name, {s: [] for s in SOURCES})
                count = len(picked[SOURCES[0]])
                if not count:
                    continue
                line = f"{split:<6} {name:<7} {count:>4}"
                for s in SOURCES:
                    err = statistics.mean(abs(r - 1) for r in picked[s]) * 100
                    line += f" {err:>10.1f} {statistics.median(picked[s]):>9.2f}"
                print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
