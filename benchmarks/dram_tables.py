"""The DRAM bandwidth a streaming kernel reaches, from NVIDIA's measured GEMM tables
(aiconfigurator-core, installed): the BF16 GEMMs of at most 16 rows whose weight is at
least 200 MB do nothing but stream the weight once, so its bytes over the measured time
are the bandwidth a memory-bound kernel gets on that chip.

    python benchmarks/dram_tables.py [chip ...]

Prints, per chip the tables cover: the rows used, the median and 90th percentile bandwidth,
the median over the chip file's DRAM peak, and the chip file's own dram_util (a copy
benchmark where one was measured; 1.0 = none) beside it. On the chips with a measured copy
(A100-80GB, H100, H200) the two agree within 1-4.5%; the chips without one (B200, GB200,
B300, GB300, L40S) stream at 100% of their datasheet peak in the model, where these rows
say 75-83%. Not adopted for B200/GB200 yet: their FIT rows were fitted around 100% (the
request-stream view's kernel_launch_us on the GB200 offline-throughput rows: with 0.762 its
best value falls from 10.4 to 7.6 us and the rows' mean |error| rises from 0.97% to 4.36%,
P-AZS06's gap vanishing), so the switch needs that and the Blackwell training share refitted.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hardware import kernel_db  # noqa: E402
from mapshard.fidelity.fit import library_system  # noqa: E402

FRAMEWORK = "trtllm"
MAX_ROWS = 16  # GEMM rows (tokens): the weight is read once, the activations are tiny
MIN_WEIGHT_BYTES = 200e6  # far past the L2, so the time is the stream's
BF16 = 2


def streaming_Bps(system: str) -> list[float]:
    """Achieved bytes/s of the weight-streaming BF16 GEMMs of the newest table that has
    them."""
    for version in reversed(kernel_db.versions(system, "gemm", FRAMEWORK)):
        frame = kernel_db.table_frame(system, "gemm", FRAMEWORK, version, "gemm_perf")
        if frame is None:
            continue
        rates = [
            r["n"] * r["k"] * BF16 / (r["latency"] * 1e-3)
            for r in frame.to_dict("records")
            if r["gemm_dtype"] == "bfloat16"
            and r["m"] <= MAX_ROWS
            and r["n"] * r["k"] * BF16 >= MIN_WEIGHT_BYTES
        ]
        if rates:
            return rates
    return []


def main(argv: list[str] | None = None) -> int:
    chips = (argv if argv is not None else sys.argv[1:]) or list(kernel_db.SYSTEMS)
    for chip in chips:
        rates = streaming_Bps(kernel_db.SYSTEMS[chip])
        if not rates:
            print(f"{chip}: no weight-streaming BF16 GEMM rows")
            continue
        system = library_system(chip)
        peak = system.dram.bandwidth_Bps
        median = statistics.median(rates)
        p90 = statistics.quantiles(rates, n=10)[-1]
        own = system.chip.efficiency.dram_util
        print(
            f"{chip:16s} {len(rates):5d} rows: median {median / 1e9:6.0f} GB/s, p90 "
            f"{p90 / 1e9:6.0f}, of the {peak / 1e9:.0f} GB/s peak {median / peak:.3f} "
            f"(chip file's dram_util: {own if own else 'unset'})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
