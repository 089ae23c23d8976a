"""`mapshard profile compare|calibrate SCENARIO PROFILE [--out FILE]`.

compare: solve the scenario, read the measured profile (Nsight Compute CSV or a PyTorch
  profiler Chrome trace), match the measured kernels to the plan's kernels (by class and
  order, see mapshard.fidelity.profile_match) and report measured vs predicted time and
  DRAM bytes per kernel: a table on stdout and a CSV (default profile_compare.csv).
calibrate: fit the chip's gemm_util and kernel_overhead_us (compute-bound GEMM launches)
  and dram_util (memory-bound launches) from the same matches, and write them as an
  override text-proto fragment (default calibration.txt). How to use it is written at the
  top of the file: copy its `accelerator { efficiency { ... } }` into the `system` block of
  a setup (fields given there override the library chip), or merge it programmatically with
  `merge_override`.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
from pathlib import Path

from mapshard import pipeline
from mapshard.fidelity.profile_io import read_profile
from mapshard.fidelity.profile_match import Calibration, Comparison, calibrate, compare
from mapshard.scenario import scenario_options
from mapshard.sweeps.store import write_atomic
from schema import setup_pb2
from schema.errors import SetupError
from schema.setup_io import parse_text
from schema.text_out import message_text
from solver.api import dram_efficiency, for_precision

CSV_COLUMNS = (
    "phase",
    "kernel",
    "part",
    "class",
    "launches",
    "measured_s",
    "predicted_s",
    "time_ratio",
    "measured_dram_bytes",
    "predicted_dram_bytes",
    "bytes_ratio",
    "tensor_pipe_pct",
)


def _fmt(x: float | None, spec: str = ".4g") -> str:
    return "" if x is None else format(x, spec)


def comparison_csv(cmp: Comparison) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in cmp.rows:
        w.writerow(
            [
                r.phase,
                r.kernel,
                r.part,
                r.cls,
                r.matched,
                _fmt(r.measured_s),
                _fmt(r.predicted_s),
                _fmt(r.time_ratio),
                _fmt(r.measured_bytes),
                _fmt(r.predicted_bytes),
                _fmt(r.bytes_ratio),
                _fmt(r.tensor_pct),
            ]
        )
    for cls, (n, t) in sorted(cmp.unmatched.items()):
        w.writerow(["(unmatched)", cls, "compute", cls, n, _fmt(t / n), "", "", "", "", "", ""])
    return buf.getvalue()


def format_comparison(cmp: Comparison, limit: int = 30) -> str:
    head = (
        f"{'phase/kernel':<36} {'class':<11} {'n':>5} {'meas us':>9} {'pred us':>9} "
        f"{'ratio':>6} {'meas MB':>9} {'pred MB':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in cmp.rows[:limit]:
        name = f"{r.phase}/{r.kernel}" + (" [coll]" if r.part == "collective" else "")
        mb = "-" if r.measured_bytes is None else f"{r.measured_bytes / 1e6:.2f}"
        lines.append(
            f"{name[:36]:<36} {r.cls:<11} {r.matched:>5} {r.measured_s * 1e6:>9.1f} "
            f"{r.predicted_s * 1e6:>9.1f} {r.time_ratio:>6.2f} {mb:>9} "
            f"{r.predicted_bytes / 1e6:>9.2f}"
        )
    if len(cmp.rows) > limit:
        lines.append(f"... {len(cmp.rows) - limit} more rows in the CSV")
    meas = sum(r.measured_s * r.matched for r in cmp.rows)
    pred = sum(r.predicted_s * r.matched for r in cmp.rows)
    lines.append(
        f"matched launches: measured {meas * 1e3:.3f} ms, predicted "
        f"{pred * 1e3:.3f} ms (ratio {meas / pred if pred else float('nan'):.3f})"
    )
    for cls, (n, t) in sorted(cmp.unmatched.items()):
        lines.append(
            f"unmatched: {n} {cls} launches, {t * 1e3:.3f} ms (no plan kernel left of that class)"
        )
    return "\n".join(lines)


def override_text(
    cal: Calibration, scenario: str, profile: str, chip: str, precision: str = ""
) -> str:
    """The override fragment, with how to merge it, and the evidence per number. With
    `precision` (the chip has a GEMM plateau of its own for the scenario's math precision)
    the fitted plateau goes to gemm_util_by_precision[precision], the one the plan used."""
    eff = setup_pb2.Efficiency()
    notes = []
    if cal.gemm_util is not None:
        name = "gemm_util"
        if precision:
            eff.gemm_util_by_precision.add(precision=precision, util=cal.gemm_util)
            name = f"gemm_util_by_precision {precision}"
        else:
            eff.gemm_util = cal.gemm_util
        eff.kernel_overhead_us = cal.kernel_overhead_us or 0.0
        notes.append(
            f"{name}, kernel_overhead_us: {cal.gemm_launches} compute-bound GEMM "
            f"launches, mean |error| {100 * (cal.gemm_mean_abs_err or 0):.1f}%"
        )
    if cal.dram_util is not None:
        eff.dram_util = cal.dram_util
        notes.append(
            f"dram_util: median achieved bandwidth of {cal.dram_launches} "
            "memory-bound launches / DRAM peak"
        )
    eff.source = f"mapshard profile calibrate {profile} against {scenario}"
    frag = setup_pb2.Setup()
    frag.system.accelerator.efficiency.CopyFrom(eff)
    header = [
        f"# Efficiency of {chip} calibrated by `mapshard profile calibrate` from",
        f"#   profile:  {profile}",
        f"#   scenario: {scenario}",
        *(f"# {n}" for n in notes or ["no GEMM or memory-bound launch matched: nothing fitted"]),
        "# To use it: copy the `accelerator { efficiency { ... } }` block below into the",
        "# `system { ... }` block of a setup.txt that names this chip; fields given there",
        "# override the library chip's (unset fields keep the library values). Or in Python:",
        "#   mapshard.profile.merge_override(setup, Path('calibration.txt')).",
    ]
    return "\n".join(header) + "\n" + message_text(frag)


def merge_override(setup: setup_pb2.Setup, path: Path) -> setup_pb2.Setup:
    """`setup` with the override fragment's fields merged on top (a copy)."""
    frag = setup_pb2.Setup()
    parse_text(Path(path).read_text(encoding="utf-8"), frag, Path(path))
    merged = setup_pb2.Setup()
    merged.CopyFrom(setup)
    merged.MergeFrom(frag)
    return merged


#: the first line each action writes (a file that starts otherwise is not its own)
FIRST_LINE = {"compare": "phase,kernel,part,class,", "calibrate": "# Efficiency of "}
DEFAULT_OUT = {"compare": "profile_compare.csv", "calibrate": "calibration.txt"}


def mark_of(out: Path) -> Path:
    """The hidden file beside `out` holding the SHA-256 of what MapShard wrote there: a
    file edited since (calibration.txt is meant to be edited and merged) is the user's."""
    return out.with_name(f".{out.name}.sha256")


def check_own_file(out: Path, action: str) -> None:
    """Raise SetupError unless `out` is new or, unchanged since, a file this action wrote."""
    if out.is_symlink() or (out.exists() and not out.is_file()):
        raise SetupError(f"{out}: --out names a folder or a link; give the name of a new file")
    if not out.exists():
        return
    data = out.read_bytes()
    mark = mark_of(out)
    written = mark.read_text(encoding="ascii").strip() if mark.is_file() else ""
    ours = data.startswith(FIRST_LINE[action].encode("utf-8"))
    if not ours or written != hashlib.sha256(data).hexdigest():
        why = "was edited since MapShard wrote it" if ours else "was not written by it"
        raise SetupError(
            f"{out}: the file exists and {why}; `mapshard profile {action}` will not "
            "overwrite it: give another --out or remove the file"
        )


def write_own_file(out: Path, text: str) -> None:
    """`text` to `out` (atomically) and its SHA-256 beside it (`mark_of`)."""
    data = text.encode("utf-8")
    write_atomic(out, data)
    write_atomic(mark_of(out), (hashlib.sha256(data).hexdigest() + "\n").encode("ascii"))


def run_profile_command(args: argparse.Namespace) -> int:
    """The CLI entry point (mapshard.cli.COMMANDS["profile"])."""
    out = Path(args.out or DEFAULT_OUT[args.action])
    check_own_file(out, args.action)
    scenario = pipeline.load_scenario(args.scenario)
    measured = read_profile(args.profile)
    plan = pipeline.plan(scenario)
    cmp = compare(plan, measured)
    if not cmp.rows:
        raise SetupError(
            f"{args.profile}: none of the {len(measured)} measured kernels "
            "matches a kernel of the plan (see profile_io.NAME_PATTERNS)"
        )
    if args.action == "compare":
        print(format_comparison(cmp))
        write_own_file(out, comparison_csv(cmp))
        print(f"written: {out}")
        return 0
    math = scenario_options(scenario).math_precision
    own = math in dict(scenario.system.chip.efficiency.gemm_util_by_precision)
    chip = for_precision(scenario.system.chip, math)  # the plateau the plan used
    cal = calibrate(
        cmp.rows,
        chip.efficiency.gemm_util or 1.0,
        chip.efficiency.kernel_overhead_s,
        scenario.system.dram.bandwidth_Bps,
    )
    text = override_text(cal, str(args.scenario), str(args.profile), chip.name, math if own else "")
    write_own_file(out, text)
    print(text, end="")
    overhead_us = chip.efficiency.kernel_overhead_s * 1e6
    print(
        f"written: {out} (current: gemm_util {chip.efficiency.gemm_util:g}, dram_util "
        f"{dram_efficiency(chip):g}, kernel_overhead_us {overhead_us:g})"
    )
    return 0
