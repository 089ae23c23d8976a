"""The GEMM model against NVIDIA's measured GEMM tables, chip by chip (issue #34 item 6 at
the kernel level: the physical model and the measured database kept honest against each
other).

    python benchmarks/gemm_tables.py [--points 300] [--dtype bfloat16] [--framework trtllm]
                                     [--min-dim 512] [--seed 1]

For each library chip the installed aiconfigurator-core covers, a seeded random sample of
the table's GEMMs (m, n, k >= --min-dim) is priced by the model alone (the calibrated
roofline, tables off: solver.cost.kernel_times at the chip's plateau for the precision,
plus its per-kernel overhead) and compared with the measured latency. Prints the median,
mean, 10th and 90th percentile of model / measured time: above 1, the model is slower.
Nothing is fitted; the tables are not validation rows (the project's GEMM rows are).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hardware import kernel_db  # noqa: E402
from mapshard import pipeline  # noqa: E402
from mapshard.scenario import Loaded  # noqa: E402
from schema import setup_pb2  # noqa: E402
from solver.cost.efficiency import for_precision  # noqa: E402
from solver.cost.kernel_times import GemmShape, gemm_compute_time  # noqa: E402

PRECISION = {"bfloat16": "bf16", "fp8": "fp8"}


def chip_of(name: str):
    """The library chip as a one-chip setup resolves it (tables off)."""
    setup = setup_pb2.Setup()
    setup.system.chip, setup.system.num_chip = name, 1
    setup.system.kernel_source = "none"
    return pipeline.resolve(Loaded(setup, Path("."))).chip


def ratios(name: str, args: argparse.Namespace) -> tuple[list[float], str]:
    """model / measured time over the sampled table rows of one chip ([] without a table),
    and the chip's calibration status (an uncalibrated chip runs at its peak)."""
    system = kernel_db.SYSTEMS[name]
    version = kernel_db.newest_collected(system, "gemm", args.framework, "gemm_perf")
    frame = kernel_db.table_frame(system, "gemm", args.framework, version, "gemm_perf")
    if frame is None:
        return [], ""
    low = args.min_dim
    rows = frame[
        (frame.gemm_dtype == args.dtype) & (frame.m >= low) & (frame.n >= low) & (frame.k >= low)
    ]
    if rows.empty:
        return [], ""
    precision = PRECISION[args.dtype]
    resolved = chip_of(name)
    chip = for_precision(resolved, precision)
    out = []
    for r in rows.sample(min(args.points, len(rows)), random_state=args.seed).itertuples():
        m, n, k = int(r.m), int(r.n), int(r.k)
        shape = GemmShape(m, n, k)
        compute = gemm_compute_time(chip, shape, 2.0 * m * n * k, precision).seconds
        out.append((compute + chip.efficiency.kernel_overhead_s) / (float(r.latency) * 1e-3))
    return out, resolved.calibration.status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=300)
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(PRECISION))
    ap.add_argument("--framework", default="trtllm", choices=("trtllm", "vllm", "sglang"))
    ap.add_argument("--min-dim", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if not kernel_db.installed():
        raise SystemExit("aiconfigurator-core is not installed: no tables to compare with")
    print(f"model / measured GEMM time, {args.dtype}, {args.framework} tables, m,n,k >= "
          f"{args.min_dim}, {args.points} random rows a chip")  # fmt: skip
    print(f"{'chip':20s} {'rows':>5s} {'median':>7s} {'mean':>7s} {'p10':>7s} {'p90':>7s}  chip")
    for name in sorted(kernel_db.SYSTEMS):
        r, status = ratios(name, args)
        if not r:
            continue
        r.sort()
        p10, p90 = r[len(r) // 10], r[(9 * len(r)) // 10]
        print(
            f"{name:20s} {len(r):5d} {statistics.median(r):7.3f} {statistics.fmean(r):7.3f} "
            f"{p10:7.3f} {p90:7.3f}  {status}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
