"""The causal attention tile model against NVIDIA's measured context-attention tables, which
no constant of it was fitted to (aiconfigurator-core, installed; its vLLM rows time
FlashAttention-3, the "cudnn" family's kernels on Hopper).

    python benchmarks/attention_tables.py [H100-SXM5-80GB H200-SXM-141GB] [--min-ms 1.5]

For each chip, every BF16 row of vLLM's newest context-attention table with a BF16 cache
(prefill: batch sequences of isl tokens, causal, any head dim and query/KV head layout: the
fit saw head dim 128 and 16 query heads only; a sliding window where the row has one, its
own band: the windowed tile count was never fitted either) is priced by the
model as a prefill layer's attention kernel is: the tile model at the chip file's first
causal_attention entry plus the per-kernel overhead.
The table times vLLM's whole attention op: its KV-cache write (K and V of every token read
and written once: taken off at the chip's copy bandwidth, with a launch) and a fixed part
around the kernel (about 0.15 ms at any size), so only rows of at least --min-ms are
compared. Prints, per head dim, layout (MHA / GQA) and sequence band, the rows, the
median of model / table - 1 and the mean |error|.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hardware import kernel_db  # noqa: E402
from mapshard.fidelity import fit, fit_attention  # noqa: E402
from mapshard.fidelity.fit import library_system  # noqa: E402

FRAMEWORK = "vllm"


def table_rows(system: str) -> list[dict]:
    """The table's comparable rows (newest vLLM version that collected one)."""
    version = kernel_db.newest_collected(system, "attention", FRAMEWORK, "context_attention_perf")
    frame = kernel_db.table_frame(system, "attention", FRAMEWORK, version, "context_attention_perf")
    if frame is None:
        return []
    rows = frame.to_dict("records")
    return [
        r
        for r in rows
        if r["attn_dtype"] == "bfloat16"
        and r["kv_cache_dtype"] == "bfloat16"
        and r["kernel_source"] == "vllm_flash_attn_fa3"
    ]


def compare(chip_name: str, min_ms: float) -> None:
    system_name = kernel_db.SYSTEMS.get(chip_name, "")
    chip = library_system(chip_name).chip
    if not system_name or not chip.efficiency.causal_attention:
        print(f"{chip_name}: no table or no causal attention calibration")
        return
    family = chip.efficiency.causal_attention[0]
    copy_Bps = fit.copy_Bps(library_system(chip_name))
    groups: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    for r in table_rows(system_name):
        measured_s = r["latency"] * 1e-3
        if measured_s < min_ms * 1e-3:
            continue
        b, s, heads = int(r["batch_size"]), int(r["isl"]), int(r["num_heads"])
        dim = int(r["head_dim"])
        # priced as the fit prices a forward row (fit_attention.model_seconds)
        window = int(r["window_size"])
        point = fit_attention.AttentionPoint("", chip_name, False, b, heads, dim, s, 0.0, window)
        model_s = fit_attention.model_seconds(point, family.fwd_util, family.fwd_wave_s)
        # the op's KV-cache write: K and V of every token read and written once, at the
        # chip's copy bandwidth, and its launch
        kv_bytes = 2 * 2 * b * s * int(r["num_key_value_heads"]) * dim * 2
        measured_s -= kv_bytes / copy_Bps + chip.efficiency.kernel_overhead_s
        layout = "MHA" if heads == r["num_key_value_heads"] else "GQA"
        band = "s < 4096" if s < 4096 else "s >= 4096"
        if 0 < window < s:  # a sliding window that binds: its own band
            band = f"window {window}"
        groups[(dim, layout, band)].append(model_s / measured_s - 1)
    print(f"{chip_name} ({family.kernel} numbers) vs {system_name} {FRAMEWORK} FlashAttention-3")
    print(f"  {'head, layout':12} {'band':10} {'rows':>5} {'median':>8} {'mean|e|':>8}")
    for (dim, layout, band), errs in sorted(groups.items()):
        median = 100 * statistics.median(errs)
        mean = 100 * statistics.mean(abs(e) for e in errs)
        name = f"d{dim} {layout}"
        print(f"  {name:12} {band:10} {len(errs):5d} {median:+7.1f}% {mean:7.1f}%")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chips", nargs="*", default=["H100-SXM5-80GB", "H200-SXM-141GB"])
    parser.add_argument("--min-ms", type=float, default=1.5)
    args = parser.parse_args(argv)
    if not kernel_db.installed():
        print("aiconfigurator-core is not installed: nothing to compare", file=sys.stderr)
        return 1
    for name in args.chips:
        compare(name, args.min_ms)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
