"""Whether a chip's efficiency model is calibrated from measurements, and which parts.

One representation: the chip's `efficiency` block (hardware/chips/*.txt, or the setup's
override merged onto it). Nothing else records calibration, so the status can never
disagree with the numbers the solver uses. A chip is *calibrated* when its block cites a
source and sets a fitted GEMM plateau (the term that dominates compute-bound work); every
part the block leaves unset runs at 100% of peak with no overhead, and is listed as such so
a user sees what the prediction rests on. A chip without a block, or one that only pins
DFModel's fixed `compute_util`, is *uncalibrated*: an upper bound on speed, not a
prediction.

An uncalibrated chip file never declares PERFECT overlap (`UNCALIBRATED_OVERLAPS`): how much
of a collective hides under compute is a measured property, so such a chip overlaps compute
and memory inside a kernel and runs its collectives after it (SERIAL_NETWORK) until a
measurement says otherwise; a setup may still ask for more (execution.overlap). DFModel's
example dataflow designs (vendor "example") are the exception: perfect streaming is their
definition, not a claim about measured hardware (tests/unit/test_overlap_default.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from schema import setup_pb2

CALIBRATED = "calibrated"
UNCALIBRATED = "uncalibrated"
# The parts a full calibration covers, in the order they are shown.
CORE_PARTS = ("gemm", "dram", "kernel overhead", "collective")
# ChipSpec.overlap values an uncalibrated chip file may declare (module docstring).
UNCALIBRATED_OVERLAPS = (setup_pb2.SERIAL_NETWORK, setup_pb2.NO_OVERLAP)


@dataclass(frozen=True)
class Calibration:
    """What a chip's efficiency model rests on."""

    status: str  # CALIBRATED or UNCALIBRATED
    measured: tuple[str, ...]  # parts set from measurements, e.g. "gemm fp8", "collective L0"
    at_peak: tuple[str, ...]  # core parts left at 100% of peak / zero overhead
    source: str = ""  # the efficiency block's `source` (the rows it was fitted to)

    @property
    def calibrated(self) -> bool:
        return self.status == CALIBRATED

    def describe(self) -> str:
        """One line for terminals and reports."""
        if not self.calibrated:
            if self.measured:
                return f"{UNCALIBRATED} (set without a cited fit: {', '.join(self.measured)})"
            return f"{UNCALIBRATED}: every kernel at 100% of peak, no per-kernel overhead"
        text = f"{CALIBRATED} ({', '.join(self.measured)})"
        if self.at_peak:
            text += f"; at 100% of peak: {', '.join(self.at_peak)}"
        return text

    def to_json(self) -> dict[str, Any]:
        """The summary.json / sweep form (`chip_calibration`)."""
        return {
            "status": self.status,
            "measured": list(self.measured),
            "at_peak": list(self.at_peak),
            "source": self.source,
        }


def has_gemm_plateau(e: setup_pb2.Efficiency) -> bool:
    """Whether the block gives GEMMs a measured plateau (any precision's)."""
    return e.gemm_util > 0 or any(p.util > 0 for p in e.gemm_util_by_precision)


def calibration_of(e: setup_pb2.Efficiency) -> Calibration:
    """The calibration a chip's efficiency block amounts to."""
    measured: list[str] = []
    if e.gemm_util > 0:
        measured.append("gemm")
    measured.extend(f"gemm {p.precision}" for p in e.gemm_util_by_precision if p.util > 0)
    has_gemm = has_gemm_plateau(e)
    if e.dram_util > 0:
        measured.append("dram")
    if e.kernel_overhead_us > 0 or e.kernel_min_time_us > 0:  # added time or a launch floor
        measured.append("kernel overhead")
    if e.fp8_split_accumulate_util > 0:
        measured.append("gemm fp8 split-accumulate")
    if e.tp_comm_hidden_share > 0:
        measured.append("tp comm overlap")
    if e.attention_util > 0:
        measured.append("attention")
    # a setup's entry replaces the library's of its family: each family once
    measured.extend(dict.fromkeys(f"causal attention {c.kernel}" for c in e.causal_attention))
    if e.unsplit_decode_attention.sm_stream_GBps > 0:
        measured.append("unsplit decode attention")
    if e.vector_util > 0:
        measured.append("vector")
    if e.strided_elementwise_gelem_per_s > 0:
        measured.append("strided elementwise")
    if e.atomic_add_gelem_per_s > 0:
        measured.append("atomic add")
    if e.grouped_mm_dram_share > 0:
        measured.append("torch grouped_mm streaming")
    levels = sorted(
        {c.level for c in e.collective if c.bus_bw_util > 0 or c.latency_us > 0 or c.bus_bw_at_size}
    )
    measured.extend(f"collective L{lv}" for lv in levels)
    if e.compute_util > 0:
        measured.append(f"fixed compute_util {e.compute_util:g}")
    fitted = has_gemm and bool(e.source) and e.compute_util <= 0
    present = {"gemm": has_gemm, "collective": bool(levels)}
    at_peak = tuple(p for p in CORE_PARTS if not present.get(p, p in measured))
    return Calibration(
        status=CALIBRATED if fitted else UNCALIBRATED,
        measured=tuple(measured),
        at_peak=at_peak if fitted else CORE_PARTS,
        source=e.source,
    )
