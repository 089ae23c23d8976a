"""What became of each outer candidate, and the search's statistics that follow from it.

A candidate's label (ChoiceResult.status) says what is known about it, never more:
- "solved": its graphs were solved and a plan found (its latency);
- "pruned": its own lower bound (the roofline bound, or reason "graph bound": its graphs'
  proven bounds) reaches a plan actually found, so it cannot win;
- "infeasible": it cannot fit or cannot be tiled (the reason names the resource);
- "not_solved": a limit stopped the search before it was solved, or its graph search
  before a first plan: a work budget (the same on every machine) or the wall-clock valve
  ("time limit", the only stop that may differ between runs). Its bound stays in the gap.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from solver.cost.problem import MappingProblem
from solver.fusion.segment_search import GraphSolution
from solver.options import BUDGET_OF_STOP, SolverOptions
from solver.options import VALVE_STOP as VALVE
from solver.plan import ChoiceResult
from solver.search import footprint, infeasible, training_space
from solver.search.exact_first import solved_by
from solver.search.progress import SearchProgress
from solver.search.training_space import Candidate

Bounds = list[tuple[float, int, Candidate]]  # (roofline bound, grid index, candidate)

NOT_SOLVED = "not_solved"
CANDIDATE_CAP = "candidate_cap"  # the stop when solver.max_candidates ran out
# the stop when every graph was proven but the step around them is not within the gap asked
STEP_BOUND = "step_bound"
# why a candidate was never solved, by the stop that ended the outer search
UNSOLVED_WHY = {
    "time_limit": "time limit",
    CANDIDATE_CAP: "work budget (solver.max_candidates)",
    "interrupted": "interrupted",
}


def no_plan_reason(stop: str) -> str:
    """Why a candidate whose graph search stopped before a first plan has none."""
    if stop in BUDGET_OF_STOP:
        return f"no plan within the work budget (solver.{BUDGET_OF_STOP[stop]})"
    return "no plan within the time limit"


@dataclass
class Ledger:
    """The outer search's record: each settled candidate's label, and what its graph
    searches reported (statuses, stops, spaces searched, solvers, model sizes)."""

    options: SolverOptions
    results: list[ChoiceResult] = field(default_factory=list)
    infeasible_reasons: list[tuple[infeasible.Reason, str]] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    # proven lower bounds of the candidates solved or stopped (not pruned), and how many of
    # them stopped before a first plan
    open_bounds: list[float] = field(default_factory=list)
    no_plan: int = 0
    # why searches stopped short of a proof (VALVE, a work budget, a search defect), and the
    # restricted fusion spaces searched (empty: every legal configuration assignment)
    stops: list[str] = field(default_factory=list)
    spaces: list[str] = field(default_factory=list)
    solvers: set[str] = field(default_factory=set)  # exact_first.solved_by of each graph
    milps: int = 0
    graph_solves: int = 0  # graph searches run (cache misses)
    num_vars: int = 0
    num_binaries: int = 0
    num_rows: int = 0
    build_s: float = 0.0
    first_plan_at: float = math.inf  # time.process_time() of the first graph plan

    def record(
        self,
        lb: float,
        cand: Candidate,
        latency: float | None,
        status: str,
        reason: str = "",
        memory_bytes: float | None = None,
        floor: bool = True,
    ) -> None:
        """One candidate's label; `memory_bytes`: its plan's DRAM per chip (None: the
        candidate's floor, footprint.memory_use with every parameter split over TP x PP,
        or unknown when not `floor`)."""
        deg = {k.lower(): v for k, v in cand.choice.degrees}
        knobs = training_space.describe(cand.workload, cand.choice.degree("TP"))
        if memory_bytes is None and floor:
            memory_bytes = footprint.memory_use(cand.workload, cand.choice, 0.0).total
        self.results.append(
            ChoiceResult(
                deg, cand.choice.describe(), lb, latency, status, reason, knobs, memory_bytes
            )
        )

    def infeasible(self, lb: float, cand: Candidate, failed: infeasible.Reason) -> None:
        knobs = training_space.describe(cand.workload, cand.choice.degree("TP"))
        where = cand.choice.describe() + (f"; {knobs}" if knobs else "")
        self.infeasible_reasons.append((failed, where))
        self.record(lb, cand, None, "infeasible", failed.text)

    def stopped_without_plan(self, lb: float, cand: Candidate, bound: float, why: str) -> None:
        """A candidate whose graph search stopped before a first plan: only its bound is
        known, and it stays in the gap."""
        self.no_plan += 1
        self.statuses.append("time_limit")
        self.record(lb, cand, None, NOT_SOLVED, why)
        self.open_bounds.append(max(lb, bound))

    def count(self, problem: MappingProblem, sol: GraphSolution) -> None:
        """A fresh graph search: its statistics, stop and the space it searched."""
        self.graph_solves += 1
        self.solvers.add(solved_by(sol, self.options.name))
        self.milps += sol.stats.milps
        self.num_vars = max(self.num_vars, sol.stats.num_vars)
        self.num_binaries = max(self.num_binaries, sol.stats.num_binaries)
        self.num_rows = max(self.num_rows, sol.stats.num_rows)
        self.build_s += sol.stats.build_s
        if math.isfinite(sol.objective_s):  # a search that did not note it: now at the latest
            seen = min(sol.stats.first_plan_at, time.process_time())
            self.first_plan_at = min(self.first_plan_at, seen)
        if sol.stats.stop:
            self.stops.append(sol.stats.stop)
        # sampled tile menus restrict the plan's tiles, not the space the gap holds over
        # (solver.fusion.tile_refine bounds every tile)
        if sol.stats.space and sol.stats.space not in self.spaces:
            self.spaces.append(sol.stats.space)

    def progress(self, bounds: Bounds, best_latency_s: float) -> SearchProgress:
        unsolved = [b for b, _, _ in bounds[len(self.results) :]]
        return SearchProgress(
            len(self.results),
            len(bounds),
            best_latency_s,
            min([*self.open_bounds, *unsolved], default=0.0),
        )

    def close(self, bounds: Bounds, best_latency_s: float, ended_by: str) -> None:
        """Label the candidates the search never reached (it ended on `ended_by`, a key of
        UNSOLVED_WHY): pruned when their own bound reaches the best plan, else not solved,
        their roofline bound kept in the gap. The stop counts (status, stop reason) only
        when it left a candidate unsolved, or on Ctrl-C. After the valve or Ctrl-C their
        memory floors are left unknown (None): they are for the report, and thousands of
        them cost seconds the limit did not allow."""
        why, unsolved = UNSOLVED_WHY[ended_by], False
        floor = ended_by == CANDIDATE_CAP  # a work budget: the same on every machine
        for lb, _, cand in bounds[len(self.results) :]:
            if lb >= best_latency_s * (1 - 1e-9):
                self.record(lb, cand, None, "pruned", floor=floor)
            else:
                self.record(lb, cand, None, NOT_SOLVED, why, floor=floor)
                self.open_bounds.append(lb)
                unsolved = True
        if ended_by == "interrupted":
            self.statuses.append(ended_by)
            self.stops.insert(0, ended_by)
        elif unsolved:
            self.statuses.append("time_limit")
            self.stops.append(ended_by)

    def status(self) -> str:
        if "interrupted" in self.statuses:
            return "interrupted"
        return "optimal" if all(s == "optimal" for s in self.statuses) else "time_limit"

    def stop_reason(self, status: str) -> str:
        """ "proof" when optimal; else what stopped the search: the wall-clock valve
        whenever it tripped (the one stop that may differ between runs), else the first
        work budget or search defect recorded (`SolverOptions`)."""
        if status == "optimal":
            return "proof"
        if status == "interrupted":
            return "interrupted"
        if VALVE in self.stops or not self.stops:
            return VALVE
        return self.stops[0]

    def counts(self) -> dict[str, int]:
        """How many candidates each label got (SolveStats' choices_* fields)."""
        statuses = [r.status for r in self.results]
        return {
            "choices_solved": statuses.count("solved"),
            "choices_pruned": statuses.count("pruned"),
            "choices_infeasible": statuses.count("infeasible"),
            "choices_not_solved": statuses.count(NOT_SOLVED),
        }

    def bound(self, proven: float, bounds: Bounds) -> float:
        """The proven lower bound over the whole space: the best plan's own, and every
        candidate's not pruned (solved, stopped, never solved: `open_bounds`, and those
        not labelled yet at their roofline bound)."""
        unreached = [lb for lb, _, _ in bounds[len(self.results) :]]
        return min([proven, *self.open_bounds, *unreached])

    def no_plan_text(self, candidates: int) -> str | None:
        stopped = self.no_plan > 0 or not self.infeasible_reasons
        counts = (self.no_plan, candidates, self.options.time_limit_s)
        return infeasible.no_plan_text(self.statuses, self.stops, stopped, *counts)


def gap_of(latency_s: float, bound_s: float) -> float:
    if not math.isfinite(latency_s) or latency_s <= 0:
        return 0.0
    return max(0.0, (latency_s - bound_s) / latency_s)
