"""A chip's GEMM plateau and K roll-off for one data type, derived from NVIDIA's measured GEMM
table (aiconfigurator-core, installed) rather than from a handful of validation rows.

    python benchmarks/gemm_plateaus.py B200 GB200 [--dtype bfloat16] [--min-dim 1024]
                                      [--min-k 128]

For each chip, every row of trtllm's newest GEMM table in `--dtype` with m, n >= --min-dim
and k >= --min-k becomes a measured point, and mapshard.fidelity.fit.fit_gemm searches the plateau
(gemm_util) and the K roll-off (gemm_half_dim) that minimise the mean absolute relative
error of the model's time, the chip file's wave tile, per-kernel overhead, launch floor and
copy bandwidth held. Rows with m or n below --min-dim are left out: there TensorRT-LLM's
linear layer times its own launch and set-up, not the GEMM the model prices with the chip's
floor; short K is kept, as it is what sets the roll-off.

Prints the model's error over those rows with the chip file as it is and with the derived
pair, and the `gemm_util_by_precision` line for the chip file (B200 and GB200 BF16 and FP16:
the GB200 FP8 fit served every precision, 33-38% off against these rows, too slow).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.gemm_tables import PRECISION, chip_of  # noqa: E402
from hardware import kernel_db  # noqa: E402
from mapshard.fidelity import fit  # noqa: E402
from solver.cost.efficiency import for_precision  # noqa: E402


def table_points(
    name: str, dtype: str, min_dim: int, min_k: int
) -> tuple[list[fit.GemmPoint], str]:
    """The table's rows of `dtype` with m, n >= min_dim and k >= min_k, and its version."""
    system = kernel_db.SYSTEMS[name]
    version = kernel_db.newest_collected(system, "gemm", kernel_db.DEFAULT_FRAMEWORK, "gemm_perf")
    frame = kernel_db.table_frame(system, "gemm", kernel_db.DEFAULT_FRAMEWORK, version, "gemm_perf")
    if frame is None:
        return [], version
    rows = frame[
        (frame.gemm_dtype == dtype)
        & (frame.m >= min_dim)
        & (frame.n >= min_dim)
        & (frame.k >= min_k)
    ].sort_values(["m", "n", "k"])
    precision = PRECISION[dtype]
    points = [
        fit.GemmPoint(
            f"{system} {int(r.m)}x{int(r.n)}x{int(r.k)}",
            int(r.m),
            int(r.n),
            int(r.k),
            precision,
            float(r.latency) * 1e-3,
            family=f"{kernel_db.DEFAULT_FRAMEWORK}-{version}",
        )
        for r in rows.itertuples()
    ]
    return points, version


def derive(name: str, dtype: str, min_dim: int, min_k: int) -> None:
    points, version = table_points(name, dtype, min_dim, min_k)
    where = f"m, n >= {min_dim}, k >= {min_k}"
    if not points:
        print(f"{name}: no {dtype} rows with {where}")
        return
    precision = PRECISION[dtype]
    chip = chip_of(name)
    eff = chip.efficiency
    held = dict(
        fix_overhead_us=eff.kernel_overhead_s * 1e6,
        fix_min_time_us=eff.kernel_min_time_s * 1e6,
        fix_tile=(eff.gemm_tile_m, eff.gemm_tile_n),
        copy_Bps=fit.copy_Bps(fit.library_system(name)),
    )
    now = for_precision(chip, precision).efficiency
    current = fit.fit_gemm(chip, points, fix_half_dim=now.gemm_half_dim, split=(precision,), **held)
    derived = fit.fit_gemm(chip, points, split=(precision,), **held)
    util_now = eff.gemm_util if precision not in dict(eff.gemm_util_by_precision) else 0.0
    util = dict(derived.by_precision)[precision]
    print(
        f"{name} {dtype} (trtllm-{version}, {len(points)} rows, {where}): chip file "
        f"as is (plateau {util_now or dict(eff.gemm_util_by_precision)[precision]:.3f}, "
        f"roll-off {now.gemm_half_dim:g}) mean |error| "
        f"{_error(chip, points, held):.1%}; best plateau at that roll-off "
        f"{dict(current.by_precision)[precision]:.3f}: {current.mean_abs_err:.1%}; derived "
        f"plateau {util:.3f}, roll-off {derived.gemm_half_dim:g}: {derived.mean_abs_err:.1%}"
    )
    print(
        f'  gemm_util_by_precision {{ precision: "{precision}" util: {util:.3f} '
        f"half_dim: {derived.gemm_half_dim:g} }}"
    )


def _error(chip, points: list[fit.GemmPoint], held: dict) -> float:
    """Mean |error| of the chip file's own model over the points."""
    floor_Bps = held["copy_Bps"]
    total = 0.0
    for p in points:
        model = fit.model_time(chip, p, held["fix_overhead_us"] * 1e-6)
        if floor_Bps > 0:
            model = max(model, held["fix_overhead_us"] * 1e-6 + fit.memory_time(p, floor_Bps))
        model = max(model, held["fix_min_time_us"] * 1e-6)
        total += abs(model / p.time_s - 1)
    return total / len(points)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chips", nargs="+", choices=sorted(kernel_db.SYSTEMS))
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(PRECISION))
    ap.add_argument("--min-dim", type=int, default=1024)
    ap.add_argument("--min-k", type=int, default=128)
    args = ap.parse_args(argv)
    if not kernel_db.installed():
        raise SystemExit("aiconfigurator-core is not installed: no tables to derive from")
    for name in args.chips:
        derive(name, args.dtype, args.min_dim, args.min_k)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
