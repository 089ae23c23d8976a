"""What-if: which resource binds. Each of compute, DRAM bandwidth, link bandwidth per
topology level, SRAM and memory capacity is scaled by x0.5 and x2 and the scenario is
RE-SOLVED through the same stages (pipeline.plan on the scenario's own kernel graph, so
nothing is regenerated), on the setup's work budgets: the table is the same on every run
and every machine (the run's time limit stays a safety valve, per re-solve). A scaled
resource changes the MILP's constants only, so the same search answers "what if"; no
latency is extrapolated.

Reuse, exact: each re-solve settles the base plan's candidate (parallel choice and
training knobs) first, so its roofline pruning starts from a near-optimal incumbent (a
candidate is still pruned only by its own lower bound against a plan found: the same best
latency; solver.search.training_space.start_with), and kernel-by-kernel graph solves that
finished are shared between the re-solves when a graph's inner problem is equal
(solver.search.solve_memo).

A re-solve that a budget (or the valve) stops gives an upper bound on the new latency (the
best plan found); its row says so. One that finds no plan, or proves none fits, says that
too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from hardware.system import System
from mapshard import pipeline
from mapshard.scenario import Scenario, scenario_options, solver_options
from mapshard.views import Row, Sensitivity
from schema.errors import InfeasibleError, NoPlanError
from solver import api as solver_api
from solver.plan import Plan

FACTORS = (0.5, 2.0)
#: Above this many kernels in a DATAFLOW graph a re-solve can take tens of seconds (fusion
#: search), so the table is computed only when asked (`--what-if`): by graph size, not by
#: wall time, so whether it is computed is the same on every machine.
MAX_AUTO_DATAFLOW_KERNELS = 20
#: ... and above this many kernels in any graph (each re-solve then costs about as much
#: as the main solve, ten or more times over).
MAX_AUTO_KERNELS = 500


def _mem_name(system: System) -> str:
    """The main memory level's name for people: "DRAM", "HBM" (short names upper-cased)."""
    name = system.memory[0].name or "DRAM"
    return name.upper() if len(name) <= 4 else name


def scaled_systems(system: System) -> list[tuple[str, float, System]]:
    """(resource, factor, scaled System) for every resource and factor, in table order."""
    chip, mem = system.chip, system.memory
    replace = dataclasses.replace

    def compute(f: float) -> System:
        peaks = {k: v * f for k, v in chip.peak_flops.items()}
        return replace(
            system, chip=replace(chip, peak_flops=peaks, vector_flops=chip.vector_flops * f)
        )

    def dram_bw(f: float) -> System:
        first = replace(mem[0], bandwidth_Bps=mem[0].bandwidth_Bps * f)
        return replace(system, memory=(first, *mem[1:]))

    def capacity(f: float) -> System:
        first = replace(mem[0], capacity_bytes=mem[0].capacity_bytes * f)
        return replace(system, memory=(first, *mem[1:]))

    def sram(f: float) -> System:
        return replace(system, chip=replace(chip, sram_bytes=chip.sram_bytes * f))

    def link(i: int) -> Callable[[float], System]:
        def scaled(f: float) -> System:
            levels = list(system.network)
            levels[i] = replace(levels[i], link_bandwidth_Bps=levels[i].link_bandwidth_Bps * f)
            return replace(system, network=tuple(levels))

        return scaled

    makers: list[tuple[str, Callable[[float], System]]] = [("compute", compute)]
    if mem:
        makers.append((f"{_mem_name(system)} bandwidth", dram_bw))
    for i, level in enumerate(system.network if system.num_chips > 1 else ()):
        makers.append((f"link bandwidth ({level.name or f'level {i}'})", link(i)))
    makers.append(("SRAM", sram))
    if mem:
        makers.append((f"{_mem_name(system)} capacity", capacity))
    return [(name, f, make(f)) for name, make in makers for f in FACTORS]


def skip_reason(scenario: Scenario) -> str:
    """Why the what-if table is not computed unasked ("" = it is): a DATAFLOW graph larger
    than MAX_AUTO_DATAFLOW_KERNELS kernels, any graph larger than MAX_AUTO_KERNELS. By
    graph size, not wall time: the same answer on every machine."""
    kernels = max(len(p.graph.kernels) for p in scenario.workload.phases)
    if kernels > MAX_AUTO_KERNELS:
        return (
            f"a graph of {kernels} kernels: each re-solve (one per resource and factor) "
            "costs about as much as the solve; run with --what-if to compute it"
        )
    if not scenario_options(scenario).dataflow or kernels <= MAX_AUTO_DATAFLOW_KERNELS:
        return ""
    return (
        f"a DATAFLOW graph of {kernels} kernels: each re-solve (one per resource and factor) "
        "runs a fusion search; run with --what-if to compute it"
    )


def sensitivity(
    scenario: Scenario,
    plan: Plan,
    time_limit_s: float | None = None,
    force: bool = False,
) -> Sensitivity:
    """Re-solve `scenario` (a Scenario) once per scaled resource; `plan` is its
    checked plan and `time_limit_s` the run's valve (None: the setup's), each re-solve's
    valve too. Every re-solved plan passes the same independent re-check. Unless `force`,
    a scenario `skip_reason` names gets an empty table that says why."""
    skipped = "" if force else skip_reason(scenario)
    if skipped:
        return Sensitivity(plan.latency_s, 0.0, (), plan.stats.status, skipped)
    time_limit_s = solver_options(scenario.setup, time_limit_s).time_limit_s
    start = base_candidate(plan)
    rows = []
    with solutions_kept():
        for name, factor, system in scaled_systems(scenario.system):
            what_if = dataclasses.replace(scenario, system=system)
            try:
                p = pipeline.plan(what_if, time_limit_s, start_with=start)
            except InfeasibleError as exc:
                rows.append(Row(name, factor, "infeasible", None, None, str(exc.resource)))
                continue
            except NoPlanError:
                rows.append(Row(name, factor, "no_plan", None, None))
                continue
            stop = p.stats.stop_reason if p.stats.status != "optimal" else ""
            rows.append(Row(name, factor, p.stats.status, p.latency_s, p.stats.gap, stop))
    return Sensitivity(plan.latency_s, time_limit_s, tuple(rows), plan.stats.status)


def base_candidate(plan: Plan) -> tuple[str, str] | None:
    """(placement, knobs) of the base plan's own candidate: each re-solve settles it first,
    so its roofline pruning starts from a near-optimal incumbent (exact: see
    solver.search.training_space.start_with). None when the plan lists none."""
    for r in plan.choices:
        if r.status == "solved" and r.latency_s == plan.latency_s:
            return r.placement, r.knobs
    return None


@contextmanager
def solutions_kept() -> Iterator[None]:
    """Graph solutions reused between the re-solves when a graph's inner problem is equal
    (solver.search.solve_memo: kernel-by-kernel graphs solved to the end only, so a hit
    is what a fresh solve returns); switched back off afterwards unless it was on."""
    memo = solver_api.SOLUTIONS
    was_on = memo.enabled
    memo.enabled = True
    try:
        yield
    finally:
        memo.enabled = was_on
        if not was_on:
            memo.clear()
