"""The DRAM left after every weight group's least storage, divided among a workload's graphs.

Why: the graphs of one workload (a layer stack, its LM head; prefill and decode) share one
chip's DRAM, and a graph that replicates weights to save time takes memory another graph may
need more. Handing the slack to the graphs in order (the first takes what it likes) can
leave a later graph far slower and still be called optimal; this module chooses the split.

1. Every graph is solved with all of the slack (`top`): no split can give it more, so its
   optimum there bounds its latency in any split. When these optima fit together they are
   the joint optimum, and nothing more is solved (the common case: DRAM not binding).
2. Otherwise each graph's latency-vs-storage frontier is traced by solves at decreasing
   parameter caps, each just below the storage of the last optimum (the optimum under a cap
   c that stores s is optimal for every cap in [s, c]), until no plan stores less or
   MAX_FRONTIER_SOLVES is spent (then one solve at the least storage, so that a plan that
   fits exists when any does).
3. The split: every weight group's storage level (the storage of one of its graphs' frontier
   points) in every combination that fits the slack, each graph at its fastest point under
   its group's level, the step assembled by `evaluate`; the least step wins. The same
   enumeration over the proven bounds, with each solve's bound holding down to the next cap
   tried (the least storage below the last), is a lower bound on every split. The split is
   proven optimal when its step meets that bound; else the caller reports it as stopped
   short of a proof (`STOP`), with the bound in its gap.
`evaluate` must not decrease when a graph's latency or the parameters stored grow.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from generator.graph import Phase
from solver.cost.problem import MappingProblem
from solver.cost.weights import stored_params
from solver.fusion.segment_search import GraphSolution
from solver.search import assemble

MAX_FRONTIER_SOLVES = 8  # descending solves per graph before the least-storage solve
STOP = "memory_split"  # SolveStats.stop_reason when the split is not proven optimal
BELOW = 1e-6  # a cap this far (relative) below the last optimum's storage
# the split is proven when its step is within this of the bound: the bound's storage sits
# up to BELOW below the plans' (a step that charges storage, training's optimizer, moves)
PROOF_TOL = 1e-5
Group = tuple[str, str]
# (phase, parameter cap per graph instance) -> (the problem with that cap, its solution)
Solve = Callable[[Phase, float], tuple[MappingProblem, GraphSolution]]
# (latency by phase name, parameters stored per chip; None: the least any mapping stores)
# -> step latency (s)
Evaluate = Callable[[dict[str, float], float | None], float]


@dataclass(frozen=True)
class Point:
    """One solve of a graph: its parameter cap per instance, problem, solution, and the
    parameters per instance the solution stores (inf: no plan)."""

    cap: float
    problem: MappingProblem
    sol: GraphSolution
    stored: float


@dataclass(frozen=True)
class Split:
    """The chosen point of every graph, the step it gives, and a proven lower bound on the
    step of every split (`proven`: the two meet)."""

    chosen: dict[str, Point]
    latency_s: float
    bound_s: float
    proven: bool
    solves: int  # solves beyond the tops
    least_found_per_chip: float  # the least parameters per chip the plans found store


@dataclass(frozen=True)
class Layout:
    """What the split needs to know of the workload: its graphs, their instances per stage,
    least storage per instance, the bytes per stored parameter, the slack (bytes), and the
    parameters every plan stores besides (`rest`, per chip)."""

    phases: tuple[Phase, ...]
    instances: dict[str, int]
    least: dict[str, float]
    per_param: float
    slack: float
    rest: float

    @cached_property
    def floor(self) -> dict[Group, float]:
        """Parameters per chip each weight group stores at least."""
        floor: dict[Group, float] = {}
        for p in self.phases:
            g = assemble.weight_group(p)
            floor[g] = max(floor.get(g, 0.0), self.least[p.name] * self.instances[p.name])
        return floor

    def top_cap(self, phase: Phase) -> float:
        """The parameter cap per instance with every byte of the slack."""
        if self.per_param <= 0 or not math.isfinite(self.slack):
            return math.inf
        group = self.floor[assemble.weight_group(phase)]
        return (group + self.slack / self.per_param) / self.instances[phase.name]

    def fits(self, stored: dict[str, float]) -> bool:
        """The graphs' storage (parameters per instance, by phase) fits the slack."""
        used: dict[Group, float] = {}
        for p in self.phases:
            g = assemble.weight_group(p)
            used[g] = max(used.get(g, 0.0), stored[p.name] * self.instances[p.name])
        floor = self.floor
        return self.fits_levels(sum(used[g] - floor[g] for g in used))

    def fits_levels(self, extra: float) -> bool:
        """`extra` parameters per chip above every group's least storage fit the slack
        (within the memory row's relative tolerance)."""
        if self.per_param <= 0 or not math.isfinite(self.slack):
            return True
        floor = sum(self.floor.values()) * self.per_param
        return extra * self.per_param <= self.slack + 1e-9 * (self.slack + floor)

    def stored_per_chip(self, stored: dict[str, float]) -> float:
        used: dict[Group, float] = {}
        for p in self.phases:
            g = assemble.weight_group(p)
            used[g] = max(used.get(g, 0.0), stored[p.name] * self.instances[p.name])
        return sum(used.values()) + self.rest


def point(cap: float, problem: MappingProblem, sol: GraphSolution) -> Point:
    has_plan = math.isfinite(sol.objective_s) and sol.status != "infeasible"
    stored = stored_params(problem, sol.choice) if has_plan else math.inf
    return Point(cap, problem, sol, stored)


def split_dram(layout: Layout, tops: dict[str, Point], solve: Solve, evaluate: Evaluate) -> Split:
    """The split of the module docstring, from every graph's `top` point (each with a plan)."""
    top_stored = {name: pt.stored for name, pt in tops.items()}
    if layout.fits(top_stored):
        step = evaluate(
            {n: pt.sol.objective_s for n, pt in tops.items()}, layout.stored_per_chip(top_stored)
        )
        bounds = {n: pt.sol.bound_s for n, pt in tops.items()}
        bound = evaluate(bounds, None) if all(v > 0 for v in bounds.values()) else 0.0
        return Split(dict(tops), step, bound, True, 0, layout.stored_per_chip(top_stored))
    frontiers = {
        p.name: _frontier(p, layout.least[p.name], tops[p.name], solve) for p in layout.phases
    }
    actual = {
        n: [(pt.sol.objective_s, pt.stored, pt) for pt in f if math.isfinite(pt.stored)]
        for n, f in frontiers.items()
    }
    relaxed = {n: _relaxed(f, layout.least[n]) for n, f in frontiers.items()}
    best = _enumerate(layout, actual, evaluate)
    lower = _enumerate(layout, relaxed, evaluate)
    bound = lower[0] if lower is not None else math.inf
    solves = sum(len(f) - 1 for f in frontiers.values())
    least_found = {n: min((o[1] for o in a), default=math.inf) for n, a in actual.items()}
    least_found_per_chip = layout.stored_per_chip(least_found)
    if best is None:  # no combination fits: the caller reports the DRAM reason
        return Split({}, math.inf, bound, False, solves, least_found_per_chip)
    proven = best[0] <= bound * (1 + PROOF_TOL)
    return Split(best[2], best[0], min(bound, best[0]), proven, solves, least_found_per_chip)


def _frontier(phase: Phase, least: float, top: Point, solve: Solve) -> list[Point]:
    """The graph's solves in decreasing cap order, from `top` (module docstring, step 2)."""
    points = [top]
    while math.isfinite(points[-1].stored) and points[-1].stored > least * (1 + 1e-9):
        cap = max(points[-1].stored * (1 - BELOW), least)
        if len(points) > MAX_FRONTIER_SOLVES:
            cap = least
        points.append(point(cap, *solve(phase, cap)))
        if cap == least:
            break
    return points


def _relaxed(points: list[Point], least: float) -> list[tuple[float, float, None]]:
    """(latency, storage) pairs no plan of the graph beats: under any cap in (next cap
    tried, cap of a solve], the latency is at least the largest bound proven at that cap
    or above; below the last cap only the least storage is known (no pair when the last
    solve proved that no plan stores less)."""
    pairs: list[tuple[float, float, None]] = []
    bound = 0.0
    for i, pt in enumerate(points):
        # an optimal solve's objective is what the search calls proven (within its gap)
        bound = max(bound, pt.sol.objective_s if pt.sol.status == "optimal" else pt.sol.bound_s)
        if not math.isfinite(bound):  # proven: no plan at this cap or below
            break
        below = points[i + 1].cap if i + 1 < len(points) else least
        pairs.append((bound, min(below, pt.cap), None))
    return pairs


def _enumerate(
    layout: Layout,
    options: dict[str, list],
    evaluate: Evaluate,
) -> tuple[float, float, dict] | None:
    """The least step over every weight group's storage level: each graph at its fastest
    (latency, storage, payload) option under its group's level, the levels fitting the
    slack. (step, parameters per chip, payload by phase name), or None when none fits."""
    groups: dict[Group, list[Phase]] = {}
    for p in layout.phases:
        groups.setdefault(assemble.weight_group(p), []).append(p)
    levels = {
        g: sorted({s * layout.instances[p.name] for p in ps for _, s, _ in options[p.name]})
        for g, ps in groups.items()
    }
    floor = layout.floor
    best: tuple[float, float, dict] | None = None
    for combo in itertools.product(*(levels[g] for g in groups)):
        # the picks under these levels store no more; a combination of less storage over
        # the same picks is one of the combinations too
        if not layout.fits_levels(sum(c - floor[g] for c, g in zip(combo, groups))):
            continue
        picked: dict[str, tuple] = {}
        for level, ps in zip(combo, groups.values()):
            for p in ps:
                under = [o for o in options[p.name] if o[1] * layout.instances[p.name] <= level]
                if under:
                    picked[p.name] = min(under, key=lambda o: (o[0], o[1]))
        if len(picked) < len(layout.phases):
            continue
        stored = {n: o[1] for n, o in picked.items()}
        if not layout.fits(stored):
            continue
        lat = {n: o[0] for n, o in picked.items()}
        total = layout.stored_per_chip(stored)
        step = evaluate(lat, total) if all(v > 0 for v in lat.values()) else 0.0
        if best is None or (step, total) < best[:2]:
            best = (step, total, {n: o[2] for n, o in picked.items()})
    return best
