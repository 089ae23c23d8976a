"""A chip file's per-kind collective curve from NVIDIA's measured NCCL tables.

    python benchmarks/nccl_curves.py H100-SXM5-80GB [--op all_gather] [--gpus 8]
                                     [--version 2.29.2]

aiconfigurator-core (an installed dependency, hardware.kernel_db) ships nccl-tests
timings per GPU: op, dtype, number of GPUs, message size in elements, latency in ms. The
chip files' collective entry for the NVLink level (level 0) models a collective as
alpha-beta, time = steps x alpha + (p-1)/p x S / (link bandwidth x util(S)), with one
switch step and alpha the level's latency plus the entry's `latency_us`; this prints the
util at each measured size S (nccl-tests size: the gathered output of an all-gather, the
input of a reduce-scatter; FP16 elements x 2 bytes) that reproduces the measured time,
as the chip file's `<op>_bw_at_size` lines. Sizes where the time is within the latency
(util above 1) are left out: the curve is flat below its first point.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hardware import kernel_db, library  # noqa: E402

OPS = ("all_gather", "reduce_scatter", "alltoall", "all_reduce")
MIB = 1 << 20
SIZES = tuple(MIB << i for i in range(10))  # 1 MiB .. 512 MiB, as the chip files list


def curve_points(chip: str, op: str, gpus: int, version: str) -> list[tuple[int, float, float]]:
    """(message bytes, util, measured seconds) at SIZES for `op` over `gpus` GPUs."""
    spec = library.find_chip(chip)
    if spec is None:
        raise SystemExit(f"{chip}: not in the hardware library")
    system = kernel_db.SYSTEMS.get(chip, "")
    frame = kernel_db.table_frame(system, "comm", "nccl", version, "nccl_perf") if system else None
    if frame is None:
        raise SystemExit(f"{chip}: no NCCL table {version} in the installed aiconfigurator-core")
    entry = next(c for c in spec.accelerator.efficiency.collective if c.level == 0)
    alpha_s = (spec.scale_up_latency_us + entry.latency_us) * 1e-6
    link_Bps = spec.scale_up_bw_GBps * 1e9
    rows = frame[(frame.op_name == op) & (frame.nccl_dtype == "half") & (frame.num_gpus == gpus)]
    times = {int(r.message_size) * 2: float(r.latency) * 1e-3 for r in rows.itertuples()}
    factor = 2 * (gpus - 1) / gpus if op == "all_reduce" else (gpus - 1) / gpus
    steps = 2 if op == "all_reduce" else 1
    out = []
    for size in SIZES:
        if size not in times or times[size] <= steps * alpha_s:
            continue
        util = factor * size / ((times[size] - steps * alpha_s) * link_Bps)
        if util <= 1.0:
            out.append((size, util, times[size]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chip")
    ap.add_argument("--op", default="all_gather", choices=OPS)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--version", default="2.29.2")
    args = ap.parse_args(argv)
    field = {"alltoall": "all_to_all", "all_reduce": "bus"}.get(args.op, args.op)
    source = (
        f"aiconfigurator-core {kernel_db.SYSTEMS.get(args.chip, '?')}/comm/nccl/{args.version}"
        f"/nccl_perf.parquet, {args.op}, {args.gpus} GPUs, half"
    )
    print(f"# {args.chip}: {source}")
    for size, util, t in curve_points(args.chip, args.op, args.gpus, args.version):
        print(
            f"{field}_bw_at_size {{ message_bytes: {size} bus_bw_util: {util:.3f} }}"
            f"  # {size // MIB} MiB: {t * 1e6:.1f} us"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
