"""What OpenXLA's measured matmul table says about the GEMM model (issue 16), without changing
any chip file:

    python benchmarks/xla_gemm_fit.py [--table matmul_interpolator_data.h]

1. Per chip, the GEMM parameters `mapshard.fidelity.fit.fit_gemm` finds on the FIT rows as
   they stand (dev + validation_public_fit.csv, the XLA rows P-XHB/P-XBB/P-XBF included) next
   to the chip file's, and the mean / max |time error| of both on the old and the new points,
   FIT and CHECK, and per shape regime of the XLA rows.
2. With --table (the header at openxla/xla 71feeddf7c, see mapshard/fidelity/xla_table.py):
   over every entry of the table whose two argument sets overflow L2 (so A, B and C come
   from DRAM), measured time / (overhead + max(compute, DRAM)) by compute/DRAM balance and
   by K, under the refit of part 1: does a GEMM whose compute and DRAM times are equal
   run slower than the larger of the two (imperfect overlap)?
"""

from __future__ import annotations

import argparse
import statistics as st
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data" / "validation"
DEV = DATA / "validation_dev_structured.csv"
XLA = ("P-XHB", "P-XBB", "P-XBF")

from mapshard.fidelity import fit  # noqa: E402  (after the repository is on sys.path)
from mapshard.fidelity.cases import read_cases  # noqa: E402
from mapshard.fidelity.fit import GemmFit  # noqa: E402
from mapshard.fidelity.xla_table import parse_table  # noqa: E402
from solver.api import for_precision, gemm_compute_time, gemm_efficiency  # noqa: E402

system = fit.library_system


def copy_Bps(chip: str) -> float:
    return fit.copy_Bps(system(chip))


def with_params(chip: str, f):
    """The chip with the GEMM parameters of fit `f`."""
    s = system(chip)
    eff = replace(
        s.chip.efficiency,
        gemm_util=f.gemm_util or s.chip.efficiency.gemm_util,
        gemm_util_by_precision=f.by_precision,
        base_gemm_util=0.0,
        base_gemm_half_dim=-1.0,
        gemm_half_dim_by_precision=(),
        gemm_half_dim=f.gemm_half_dim,
        kernel_overhead_s=f.kernel_overhead_us * 1e-6,
        kernel_min_time_s=f.kernel_min_time_us * 1e-6,
        gemm_tile_m=f.tile[0] or s.chip.efficiency.gemm_tile_m,
        gemm_tile_n=f.tile[1] or s.chip.efficiency.gemm_tile_n,
    )
    return replace(s.chip, efficiency=eff)


def time_errors(chip: str, f, points) -> list[float]:
    """|model time / measured - 1| of the fit's model: max(min time, overhead + max(compute,
    compulsory DRAM bytes at copy bandwidth)), as fit_gemm scores it."""

    c = with_params(chip, f)
    ovh, floor = c.efficiency.kernel_overhead_s, c.efficiency.kernel_min_time_s
    out = []
    for p in points:
        t = max(floor, fit.model_time(c, p, ovh), ovh + fit.memory_time(p, copy_Bps(chip)))
        out.append(abs(t / p.time_s - 1))
    return out


def chip_file_fit(chip: str):
    e = system(chip).chip.efficiency
    return GemmFit(
        e.gemm_util,
        e.gemm_half_dim,
        e.kernel_overhead_s * 1e6,
        0.0,
        0.0,
        (),
        tuple(e.gemm_util_by_precision),
        e.kernel_min_time_s * 1e6,
        (e.gemm_tile_m, e.gemm_tile_n),
    )


def describe(f) -> str:
    plateaus = ", ".join(f"{k} {v}" for k, v in f.by_precision)
    return (
        f"gemm_util {f.gemm_util}{' (' + plateaus + ')' if plateaus else ''}, half_dim "
        f"{f.gemm_half_dim:g}, overhead {f.kernel_overhead_us:g} us, min time "
        f"{f.kernel_min_time_us:g} us, tile {f.tile[0]}x{f.tile[1]}"
    )


REGIMES = {
    "all": lambda p: True,
    "batch > 1": lambda p: p.batch > 1,
    "b=1, m = 256": lambda p: p.batch == 1 and p.m == 256,
    "b=1, n = 256": lambda p: p.batch == 1 and p.n == 256,
    "b=1, k = 256": lambda p: p.batch == 1 and p.k == 256,
    "b=1, m, n, k >= 1024": lambda p: p.batch == 1 and min(p.m, p.n, p.k) >= 1024,
}


def refits() -> dict:
    """Print the refit per chip next to the chip file; return {chip: refit}."""
    fit_cases = [c for p in (DEV, DATA / "validation_public_fit.csv") for c in read_cases(p)]
    check_cases = read_cases(DATA / "validation_public_check.csv")
    out = {}
    for chip, split in (("H100-SXM5-80GB", ("fp8",)), ("B200", ())):
        fit_pts = fit.gemm_points(fit_cases, chip, kernel_only=True)
        check_pts = fit.gemm_points(check_cases, chip, kernel_only=True)
        new = fit.fit_gemm(system(chip).chip, fit_pts, split=split, copy_Bps=copy_Bps(chip))
        now = chip_file_fit(chip)
        out[chip] = new
        print(f"\n{chip}: chip file  {describe(now)}")
        print(f"{' ' * len(chip)}  refit      {describe(new)}")
        groups = {
            "FIT, earlier points": [p for p in fit_pts if not p.source.startswith(XLA)],
            "FIT, XLA points": [p for p in fit_pts if p.source.startswith(XLA)],
            "CHECK, earlier points": [p for p in check_pts if not p.source.startswith(XLA)],
            "CHECK, XLA points": [p for p in check_pts if p.source.startswith(XLA)],
        }
        xla = groups["FIT, XLA points"] + groups["CHECK, XLA points"]
        for prefix in XLA:
            for name, sel in REGIMES.items():
                groups[f"{prefix} {name}"] = [
                    p for p in xla if p.source.startswith(prefix) and sel(p)
                ]
        print(f"  {'points':30s}   n  chip file mean/max    refit mean/max (|time error|)")
        for name, pts in groups.items():
            if pts:
                a, b = time_errors(chip, now, pts), time_errors(chip, new, pts)
                print(
                    f"  {name:30s} {len(pts):3d}  {100 * st.mean(a):6.1f}% {100 * max(a):6.1f}%"
                    f"    {100 * st.mean(b):6.1f}% {100 * max(b):6.1f}%"
                )
    return out


TABLE_SETS = (  # device key, dtype, chip, precision, input bytes, L2 bytes
    ("sm_90", "bf16xbf16->bf16", "H100-SXM5-80GB", "bf16", 2, 50 * 2**20),
    ("sm_100", "bf16xbf16->bf16", "B200", "bf16", 2, 126 * 2**20),
    ("sm_100", "f8e4m3fnxf8e4m3fn->bf16", "B200", "fp8", 1, 126 * 2**20),
)
BALANCE = ((0.67, 1.5, "C/M 0.67-1.5 (balanced)"), (1.5, 3.0, "C/M 1.5-3"), (3.0, 1e9, "C/M > 3"))


def overlap(table_path: Path, fits: dict) -> None:
    """Balance and K bins of the table's DRAM-resident entries, C and M under each chip's
    refit (`fits`: the H100 refit is the chip file's within 0.002 of plateau; the B200 has
    no fit of its own in its chip file, which carries the GB200's)."""
    table = parse_table(table_path.read_text(encoding="utf-8"))
    for key, dtype, chip_name, prec, in_bytes, l2 in TABLE_SETS:
        entries = table.get(key) or table.get(f"{key}_B200") or []
        chip = for_precision(with_params(chip_name, fits[chip_name]), prec)
        ovh = chip.efficiency.kernel_overhead_s
        rows = []
        for e in entries:
            t = e.flop / e.flops[dtype]
            if 2 * e.b * ((e.m * e.k + e.k * e.n) * in_bytes + e.m * e.n * 2) <= l2 or t < 15e-6:
                continue  # served from L2, or too short to tell overlap from fixed latency
            p = fit.GemmPoint("", e.m, e.n, e.k, prec, t, e.b)
            c = gemm_compute_time(chip, e.flop, chip.peak(prec), e.m, e.n, e.k, e.b)
            rows.append((e.k, c, fit.memory_time(p, copy_Bps(chip_name)), t))
        print(
            f"\n{chip_name} {prec} ({key}): {len(rows)} entries >= 15 us with DRAM-resident inputs"
        )
        print(f"  measured / (overhead + max(C, M)), median [min, max]; overhead {ovh * 1e6:g} us")
        for lo, hi, name in BALANCE:
            for k in sorted({r[0] for r in rows}):
                sel = [r for r in rows if r[0] == k and lo <= r[1] / r[2] < hi]
                if sel:
                    q = [t / (ovh + max(c, m)) for _, c, m, t in sel]
                    q_sum = st.median(t / (ovh + c + m) for _, c, m, t in sel)
                    print(
                        f"  {name:24s} k={k:5d} n={len(sel):3d}  {st.median(q):.2f} "
                        f"[{min(q):.2f}, {max(q):.2f}]   (vs overhead + C + M: {q_sum:.2f})"
                    )


OVERLAP_MODELS = {  # compute C, DRAM reads R, C writes W -> time less the overhead
    "max(C, R + W)  (the solver's)": lambda c, r, w: max(c, r + w),
    "max(C, R) + W  (C write not hidden)": lambda c, r, w: max(c, r) + w,
    "max + 0.3 min  (uniform partial)": lambda c, r, w: max(c, r + w) + 0.3 * min(c, r + w),
    "C + R + W      (no overlap)": lambda c, r, w: c + r + w,
}


def overlap_models(table_path: Path, fits: dict) -> None:
    """Mean |time error| of four overlap rules over the DRAM-resident entries >= 15 us, each
    with its best overhead (0-10 us), C at each chip's refit plateau without K roll-off."""
    table = parse_table(table_path.read_text(encoding="utf-8"))
    print("\noverlap rules, mean |time error| (best overhead) and by k:")
    for key, dtype, chip_name, prec, in_bytes, l2 in TABLE_SETS:
        chip = for_precision(with_params(chip_name, fits[chip_name]), prec)
        chip = replace(chip, efficiency=replace(chip.efficiency, gemm_half_dim=0.0))
        bw = copy_Bps(chip_name)
        pts = []
        for e in table.get(key) or table.get(f"{key}_B200") or []:
            t = e.flop / e.flops[dtype]
            read = e.b * (e.m * e.k + e.k * e.n) * in_bytes
            write = e.b * e.m * e.n * 2
            if 2 * (read + write) <= l2 or t < 15e-6:
                continue
            eff = gemm_efficiency(chip, e.m, e.n, e.k, e.b)
            pts.append((e.k, t, e.flop / (chip.peak(prec) * eff), read / bw, write / bw))
        print(f"  {chip_name} {prec}: {len(pts)} entries")
        for name, rule in OVERLAP_MODELS.items():
            err, ovh = min(
                (st.mean(abs((o * 1e-6 + rule(c, r, w)) / t - 1) for _, t, c, r, w in pts), o)
                for o in (x / 2 for x in range(21))
            )
            by_k: dict[int, list[float]] = {}
            for k, t, c, r, w in pts:
                by_k.setdefault(k, []).append(abs((ovh * 1e-6 + rule(c, r, w)) / t - 1))
            ks = " ".join(f"{k}:{100 * st.mean(v):.0f}%" for k, v in sorted(by_k.items()))
            print(f"    {name:38s} {100 * err:5.1f}% ({ovh:g} us)  k {ks}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, help="matmul_interpolator_data.h (openxla/xla)")
    args = ap.parse_args()
    fits = refits()
    if args.table:
        overlap(args.table, fits)
        overlap_models(args.table, fits)


if __name__ == "__main__":
    main()
