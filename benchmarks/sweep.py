"""Sweep throughput: a 1,000-point Llama-3.1-70B inference sweep in local worker processes.

    python benchmarks/sweep.py [--points 1000] [--workers 2] [--repeat 1] [--phase REQUEST]
                               [--keep DIR]

Points: 10 library chips x TP in {1, 2, 4, 8} x batch in {1, 8, 32, 64, 128} x 5
(input, output) length pairs, each a whole request (prefill + decode; `--phase DECODE`: the
decode step alone, the issue's decode sweep). TP is set by a
single-level topology, `topology { kind: SWITCH degree: TP link_bw_GBps: 450
parallelism: "TP" }` with num_chip left to the degree product; every chip gets the same
450 GB/s links so the sweep compares compute and memory. Infeasible points (the model does
not fit) are part of the workload and recorded as such. `--points N` keeps the first N
points (whole chips first). Prints points/second, total time, CPU milliseconds per point
(resource usage of the driver and its finished workers: unlike points/second it does not
depend on what else the machine runs), a steady-state line (CPU per point less the run's
fixed costs: worker start-up, point expansion and outputs, each measured again outside the
timed run), counts by status and the median solve time.
Issue #19's target: >= 100 decode points/s on 2 cores; issue #39 item 5: >= 300 decode and
>= 200 whole-request points/s on 2 idle cores. Kernel-by-kernel graphs are solved
by the exact elimination (solver/milp/exact_kbk.py) where it applies, HiGHS elsewhere.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from hardware import library
from mapshard.sweeps import SweepOutcome, expand_points, load_sweep, run_sweep
from mapshard.sweeps.backends import LocalBackend
from mapshard.sweeps.outputs import write_outputs
from mapshard.sweeps.runner import make_batches

PREFERRED_CHIPS = (
    "H100-SXM5-80GB",
    "H200-SXM-141GB",
    "B200",
    "GB200",
    "A100-SXM4-80GB",
    "A100-SXM4-40GB",
    "MI300X",
    "Gaudi2",
    "Gaudi3",
    "TPUv5p",
    "SN40L",
    "TPUv4",
)
TP = (1, 2, 4, 8)
BATCH = (1, 8, 32, 64, 128)
LENGTHS = ((128, 128), (512, 256), (1024, 256), (2048, 512), (4096, 1024))


def chips(n: int = 10) -> list[str]:
    known = set(library.chip_names())
    picked = [c for c in PREFERRED_CHIPS if c in known][:n]
    if len(picked) < n:
        raise SystemExit(f"the hardware library has only {len(picked)} of the chips wanted")
    return picked


def sweep_text(chip_names: list[str], phase: str = "REQUEST") -> str:
    def values(items: list[str]) -> str:
        return "[" + ", ".join(f'"{v}"' for v in items) + "]"

    lengths = [f"input_len: {i} output_len: {o}" for i, o in LENGTHS]
    return f"""# benchmarks/sweep.py: {len(chip_names)} chips x TP x batch x lengths
inline {{
  name: "bench_llama70b"
  workload {{
    llm_inference {{
      model {{ hf_model: "Llama-3.1-70B" }}
      phase: {phase}
      batch: 8
      input_len: 1024
      output_len: 256
    }}
  }}
  system {{
    chip: "H100-SXM5-80GB"
    topology {{ kind: SWITCH degree: 8 link_bw_GBps: 450 parallelism: "TP" }}
  }}
  execution {{ execution_style: KERNEL_BY_KERNEL perfect_overlap: true }}
  solver {{ time_limit_s: 60 }}
}}
axis {{ field: "system.chip" name: "chip" values: {values(chip_names)} }}
axis {{ field: "system.topology.degree" name: "tp_degree" values: {values([str(t) for t in TP])} }}
axis {{ field: "workload.llm_inference.batch" name: "batch"
       values: {values([str(b) for b in BATCH])} }}
axis {{ field: "workload.llm_inference" name: "lengths" values: {values(lengths)} }}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=1000, help="points to run (<= 1000)")
    parser.add_argument("--workers", type=int, default=2, help="local worker processes")
    parser.add_argument("--repeat", type=int, default=1, help="runs (prints the median)")
    parser.add_argument(
        "--phase", default="REQUEST", choices=("REQUEST", "DECODE", "PREFILL"), help="phase"
    )
    parser.add_argument("--keep", help="write the sweep here instead of a temp folder")
    args = parser.parse_args(argv)
    rates = [run_once(args) for _ in range(max(1, args.repeat))]
    if len(rates) > 1:
        rates_text = ", ".join(f"{r:.2f}" for r in rates)
        print(f"points/second over {len(rates)} runs: median {statistics.median(rates):.2f} "
              f"({rates_text})")  # fmt: skip
    return 0


def run_once(args: argparse.Namespace) -> float:
    """One sweep into a fresh folder; prints its figures and returns points/second."""
    with tempfile.TemporaryDirectory(prefix="mapshard_sweep_bench_") as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        sweep_file = folder / "sweep.txt"
        sweep_file.write_text(sweep_text(chips(), args.phase), encoding="utf-8")
        out = folder / "out"
        if out.exists():
            shutil.rmtree(out)  # a kept folder: measure a full sweep, not a resume
        load0 = os.getloadavg()[0]
        cpu0 = _cpu_s()
        t0 = time.perf_counter()
        spec = load_sweep(sweep_file)
        if args.points < spec.num_points:  # whole chips first: cut the first axis
            first = spec.axes[0]
            keep = max(1, -(-args.points * len(first.values) // spec.num_points))
            first = replace(first, values=first.values[:keep], labels=first.labels[:keep])
            spec = replace(spec, axes=(first, *spec.axes[1:]))
        outcome = run_sweep(spec, out=out, workers=args.workers, quiet=True)
        total_s = time.perf_counter() - t0
        driver_s, workers_s = (b - a for a, b in zip(cpu0, _cpu_s()))
        rows = outcome.rows
        n = len(rows)
        solve = [float(r["solve_time_s"]) for r in rows if r["solve_time_s"]]
        batches = len(make_batches(outcome.points, spec, args.workers))
        print(f"sweep benchmark: {n} points, {args.workers} workers, {batches} batches")
        print(f"  total            {total_s:8.1f} s (sweep {outcome.elapsed_s:.1f} s)")
        print(f"  points/second    {n / total_s:8.2f}")
        print(
            f"  CPU per point    {(driver_s + workers_s) / n * 1e3:8.1f} ms (workers "
            f"{workers_s / n * 1e3:.1f} ms, driver {driver_s / n * 1e3:.1f} ms; load average "
            f"{load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
        )
        _print_steady_state(outcome, args.workers, driver_s, workers_s)
        for status in ("optimal", "time_limit", "infeasible", "failed", "filtered"):
            print(f"  {status:<16} {outcome.counts.get(status, 0):8d}")
        if solve:
            print(
                f"  median solve     {statistics.median(solve):8.3f} s "
                f"(p90 {statistics.quantiles(solve, n=10)[-1]:.3f} s, "
                f"sum {sum(solve):.1f} s over {len(solve)} points with a solve)"
            )
        failed = [r for r in rows if r["status"] == "failed"]
        for r in failed[:3]:
            print(f"  failed example: {r['reason'][:160]}", file=sys.stderr)
    return n / total_s


def _print_steady_state(
    outcome: SweepOutcome, workers: int, driver_s: float, workers_s: float
) -> None:
    """CPU per point less the fixed costs of a run, each measured again here outside the
    timed run: the workers' start-up (spawn, imports, warm-up), the driver's point
    expansion, and the plots, best points and report written after the sweep (the plots
    are drawn in the workers: their share). Why: on 1,000 points those fixed costs are a
    large share of the total and they do not grow with the points; the steady rate is
    what a longer sweep approaches on idle cores."""
    start_s = _worker_start_cpu_s(workers)
    cpu0 = _cpu_s()[0]
    expand_points(outcome.spec)
    expand_s = _cpu_s()[0] - cpu0
    write_outputs(outcome)  # drawn here one by one: about the CPU the workers spent on it
    outputs_s = _cpu_s()[0] - cpu0 - expand_s
    n = len(outcome.rows)
    work = max(workers_s - start_s - outputs_s, 0.0) / n * 1e3
    drive = max(driver_s - expand_s, 0.0) / n * 1e3
    cores = min(workers, os.cpu_count() or 1)
    print(
        f"  steady state     {cores * 1e3 / max(work + drive, 1e-9):8.2f} points/s at most on "
        f"{cores} idle cores: {work + drive:.1f} ms CPU per point (workers {work:.1f} ms, "
        f"driver {drive:.1f} ms), less the fixed CPU of worker start-up {start_s:.1f} s, "
        f"point expansion {expand_s:.1f} s and outputs {outputs_s:.1f} s"
    )


def _worker_start_cpu_s(workers: int) -> float:
    """CPU seconds of starting `workers` local sweep workers and stopping them idle."""
    before = _cpu_s()[1]
    backend = LocalBackend(workers)
    backend.start(workers)
    backend.close()
    return _cpu_s()[1] - before


def _cpu_s() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its finished children."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


if __name__ == "__main__":
    sys.exit(main())
