"""Fitting a chip's matrix-unit and DRAM efficiencies to measured end-to-end runs.

For a chip with no kernel microbenchmark among the FIT rows (Gaudi 2 and 3: Intel publishes
model throughput, not GEMM or STREAM numbers), the two efficiencies that set a single-chip
run's time are fitted to its runs instead:
- every usable FIT row of the chip on ONE chip (tp = pp = dp = 1: no collective enters, so
  the fit cannot absorb a network effect) is planned once with the chip at 100% of peak;
- each kernel of that plan keeps its compute time C (matrix kernels: GEMM, batched GEMM,
  fused attention), memory time M and network time N; at a matrix efficiency g and DRAM
  efficiency d a kernel takes rule(C / g, M / d, N) with the plan's overlap rule
  (`solver.cost.latency.config_latency`), vector kernels keep their compute time;
- the run's time is the sum over kernels x graph instances x steps, and (g, d) minimise the
  mean |relative error| over the runs on a grid of step 0.01.
The plan's tiling and sharding are held at their 100%-of-peak choice (a re-plan at (g, d)
can only be faster, by the solver's optimality); `mapshard validate` then plans the rows
with the fitted numbers in the chip file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from hardware.system import Efficiency
from mapshard import pipeline
from mapshard.fidelity.cases import Case
from mapshard.fidelity.scenarios import build_setup
from schema.errors import InfeasibleError
from solver.api import config_latency

GRID = tuple(u / 100 for u in range(30, 101))
RUN_KINDS = ("inference_static_batch", "inference_prefill")


@dataclass(frozen=True)
class KernelTime:
    """One kernel of a planned run at 100% of peak, with how often it runs per request."""

    matrix: bool
    compute_s: float
    memory_s: float
    network_s: float
    overhead_s: float
    repeats: float  # graph instances x steps


@dataclass(frozen=True)
class RunPoint:
    source: str  # row id
    measured_s: float
    kernels: tuple[KernelTime, ...]
    overlap: str  # the plan's overlap mode ("perfect", "serial_network", "none")

    def time_s(self, matrix_util: float, dram_util: float) -> float:
        """The run's time with matrix kernels at `matrix_util` and DRAM at `dram_util`."""
        total = 0.0
        for k in self.kernels:
            c = k.compute_s / matrix_util if k.matrix else k.compute_s
            lat = config_latency(
                c,
                k.memory_s / dram_util,
                k.network_s,
                k.overhead_s,
                overlap=self.overlap != "none",
                serialize_network=self.overlap == "serial_network",
            )
            total += k.repeats * lat
        return total


def measured_time(case: Case) -> float:
    """Seconds per request of a tokens-per-second row (generated tokens, as predict counts)."""
    tokens = case.float("batch", 1) * case.float("output_len", 1)
    value = case.measured or 0.0
    if case.metric == "tokens_per_s":
        return tokens / value
    if case.metric == "tokens_per_s_per_chip":
        return tokens / (value * max(case.int("num_chips", 1), 1))
    if case.metric == "ttft_s":
        return value
    raise ValueError(f"{case.id}: metric {case.metric} is not a run time")


def single_chip_runs(cases: list[Case], chip: str) -> list[Case]:
    """The chip's usable single-chip run rows."""
    return [
        c
        for c in cases
        if c.usable
        and c.kind in RUN_KINDS
        and c.text("chip") == chip
        and max(c.int("num_chips", 1), 1) == 1
    ]


def run_point(case: Case, where: Path) -> RunPoint | None:
    """The row planned at 100% of peak, kernel by kernel (None: no plan, e.g. memory)."""
    setup, _ = build_setup(case)
    loaded = pipeline.load_message(setup, where)
    system = pipeline.resolve(loaded)
    system = replace(system, chip=replace(system.chip, efficiency=Efficiency()))
    try:
        plan = pipeline.plan(pipeline.assemble(loaded, system))
    except InfeasibleError:  # e.g. the KV cache does not fit: no time to fit to
        return None
    kernels = []
    for ph in plan.phases:
        for k in ph.kernels:
            kernels.append(
                KernelTime(
                    matrix=k.kind in ("GEMM", "BATCHED_GEMM", "ATTENTION"),
                    compute_s=k.compute_s,
                    memory_s=k.memory_s,
                    network_s=k.network_s,
                    overhead_s=0.0,
                    repeats=float(ph.count * ph.steps),
                )
            )
    return RunPoint(case.id, measured_time(case), tuple(kernels), plan.overlap)


@dataclass(frozen=True)
class RunFit:
    matrix_util: float
    dram_util: float
    mean_abs_err: float
    max_abs_err: float
    sources: tuple[str, ...]


def fit_runs(points: list[RunPoint]) -> RunFit:
    """(matrix_util, dram_util) on GRID minimising the mean |relative error| of the runs."""
    assert points, "no runs to fit"
    best: tuple[float, float, float, list[float]] | None = None
    for g in GRID:
        for d in GRID:
            errs = [abs(p.time_s(g, d) / p.measured_s - 1) for p in points]
            mean = sum(errs) / len(errs)
            if best is None or mean < best[0] - 1e-12:
                best = (mean, g, d, errs)
    assert best is not None
    mean, g, d, errs = best
    return RunFit(g, d, mean, max(errs), tuple(p.source for p in points))
