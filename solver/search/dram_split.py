"""The DRAM left after every weight group's least storage, divided among a workload's graphs.

Why: the graphs of one workload (a layer stack, its LM head; prefill and decode) share one
chip's DRAM, and a graph that replicates weights to save time takes memory another graph may
need more. Handing the slack to the graphs in order (the first takes what it likes) can
leave a later graph far slower and still be called optimal; this module chooses the split.

1. Every graph is solved with all of the slack (`top`): no split can give it more, so its
   optimum there bounds its latency in any split. When these optima fit together and the
   step charges nothing for what they store beyond the least (inference; training whose
   tops replicate no weight), they are the joint optimum, and nothing more is solved (the
   common case: DRAM not binding). A training step pays the optimizer update of every
   stored copy (assemble.training_times: read and write of weight, gradient and optimizer
   state) and the TP gradient sync of every replica (solver.cost.weights.StepWeights),
   which no graph's objective carries (a weight's storage is the max over its readers'
   needs, not a per-option cost): tops that replicate weights go to step 2, as plans that
   do not fit do, so that a replicated weight is never called free.
2. Otherwise graphs' latency-vs-storage frontiers are traced by solves at decreasing
   parameter caps, each just below the storage of the graph's last optimum (the optimum
   under a cap c that stores s is optimal for every cap in [s, c]), until no plan stores
   less, or after MAX_FRONTIER_SOLVES one solve at the least storage ends it.
3. The split: every weight group's storage level (the storage of one of its graphs' points)
   in every combination that fits the slack, each graph at its fastest point under its
   group's level, the step assembled by `evaluate`; the least step wins. The same
   enumeration over pairs no plan beats (each solve's proven latency holds down to the next
   cap tried; below a graph's last solve, down to its least storage; the step weights no
   plan storing as much undercuts, solver.cost.weights.floor_weights) bounds every split.
   Step 2 runs lazily: one solve at a time, on a graph whose untraced storage the bound's
   split counts on, until the split meets the bound (proven optimal) or no such graph can
   be solved further; then the caller reports the split as stopped short of a proof
   (`STOP`), with the bound in its gap.
`evaluate` must not decrease when a graph's latency, the parameters stored, or the
replicas synced grow.
Activations and the KV cache: the slack leaves out their floor (each tensor at the least
share any sharding leaves on a chip, solver.search.footprint); the graphs' plans may keep
more (a norm run whole on every chip), so a combination of plans fits only with its own
layouts' bytes above that floor (`Layout.layouts`) added to its weights. The pairs that
bound the split add nothing (no plan keeps less than the floor): the bound stays valid.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from generator.graph import Phase
from solver.cost.problem import MappingProblem
from solver.cost.weights import StepWeights, floor_weights, step_weights, stored_params
from solver.fusion.segment_search import GraphSolution
from solver.search import stages

# parameter caps, as shares of the way from a graph's least storage to its top plan's, at
# which the top's configurations are re-solved (refit) before any solve down its frontier
REFIT_SHARES = (0.75, 0.5, 0.25, 0.0)
MAX_FRONTIER_SOLVES = 8  # descending solves per graph before the least-storage solve
STOP = "memory_split"  # SolveStats.stop_reason when the split is not proven optimal
BELOW = 1e-6  # a cap this far (relative) below the last optimum's storage
Group = tuple[str, str]
# (phase, parameter cap per graph instance) -> (the problem with that cap, its solution)
Solve = Callable[[Phase, float], tuple[MappingProblem, GraphSolution]]
# (latency by phase name, parameters stored per chip; None: the least any mapping stores,
# step weights per chip; None: the least) -> step latency (s)
Evaluate = Callable[[dict[str, float], float | None, StepWeights | None], float]
# (graph, its top point, a parameter cap) -> the top's configurations re-solved under the
# cap (a plan, its bound the top's: the optimum under a lower cap is no faster), or None
Refit = Callable[[str, "Point", float], "Point | None"]
# an enumeration's least (step, parameters per chip, payload by phase name, step weights)
_Best = tuple[float, float, dict, StepWeights]
# (problem, option per kernel) of every graph's plan, by phase name -> bytes per chip its
# activations and KV cache take above their floor (solver.search.footprint.LayoutBytes)
LayoutBytes = Callable[[dict[str, tuple[MappingProblem, tuple[int, ...]]]], float]


@dataclass(frozen=True)
class Point:
    """One solve of a graph: its parameter cap per instance, problem, solution, and the
    parameters per instance the solution stores (inf: no plan) and its step weights."""

    cap: float
    problem: MappingProblem
    sol: GraphSolution
    stored: float
    weights: StepWeights = StepWeights()


@dataclass(frozen=True)
class Split:
    """The chosen point of every graph, the step it gives, and a proven lower bound on the
    step of every split (`proven`: the two meet)."""

    chosen: dict[str, Point]
    latency_s: float
    bound_s: float
    proven: bool
    solves: int  # solves beyond the tops
    # parameters per chip the chosen plans store (none chosen: the least any plan found does)
    stored_per_chip: float
    weights_per_chip: StepWeights = StepWeights()  # the chosen plans'


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
    pp: int = 1  # pipeline stages (stages.weight_group)
    layouts: LayoutBytes | None = None  # None: activations take their floor in every plan

    @cached_property
    def floor(self) -> dict[Group, float]:
        """Parameters per chip each weight group stores at least."""
        floor: dict[Group, float] = {}
        for p in self.phases:
            g = stages.weight_group(p, self.pp)
            floor[g] = max(floor.get(g, 0.0), self.least[p.name] * self.instances[p.name])
        return floor

    def top_cap(self, phase: Phase) -> float:
        """The parameter cap per instance with every byte of the slack."""
        if self.per_param <= 0 or not math.isfinite(self.slack):
            return math.inf
        group = self.floor[stages.weight_group(phase, self.pp)]
        return (group + self.slack / self.per_param) / self.instances[phase.name]

    def used(self, stored: dict[str, float]) -> dict[Group, float]:
        """Parameters per chip each weight group stores: the most any of its graphs stores
        (`stored`: parameters per instance, by phase name)."""
        used: dict[Group, float] = {}
        for p in self.phases:
            g = stages.weight_group(p, self.pp)
            used[g] = max(used.get(g, 0.0), stored[p.name] * self.instances[p.name])
        return used

    def fits(self, stored: dict[str, float], points: dict[str, Point] | None = None) -> bool:
        """The graphs' storage (parameters per instance, by phase) fits the slack, with
        the activations of `points` (plans, by phase) above their floor."""
        used = self.used(stored)
        return self.fits_levels(sum(used[g] - self.floor[g] for g in used), points)

    def fits_levels(self, extra: float, points: dict[str, Point] | None = None) -> bool:
        """`extra` parameters per chip above every group's least storage fit the slack
        (within the memory row's relative tolerance), beside the activations of `points`
        above their floor (none given: at their floor)."""
        if not math.isfinite(self.slack):
            return True
        kept = self.kept(points) if points else 0.0
        if self.per_param <= 0 and kept <= 0:
            return True
        floor = sum(self.floor.values()) * max(self.per_param, 0.0)
        weights = extra * max(self.per_param, 0.0)
        return weights + kept <= self.slack + 1e-9 * (self.slack + floor)

    def kept(self, points: dict[str, Point]) -> float:
        """Bytes per chip the plans' activations and KV cache take above their floor."""
        if self.layouts is None:
            return 0.0
        return self.layouts({n: (pt.problem, tuple(pt.sol.choice)) for n, pt in points.items()})

    def stored_per_chip(self, stored: dict[str, float]) -> float:
        """Parameters per chip the plan stores, with those no kernel reads."""
        return sum(self.used(stored).values()) + self.rest

    def weights_per_chip(self, weights: dict[str, StepWeights]) -> StepWeights:
        """The graphs' step weights per chip (per instance, by phase name), a weight group
        as its phases' largest (they run the same weights), summed over the groups."""
        groups: dict[Group, tuple[float, ...]] = {}
        for p in self.phases:
            w, n, g = weights[p.name], self.instances[p.name], stages.weight_group(p, self.pp)
            mine = (w.all_reduce * n, w.all_gather * n, w.self_updated * n)
            groups[g] = tuple(map(max, groups.get(g, mine), mine))
        return StepWeights(*(sum(v) for v in zip(*groups.values(), strict=False)))


def point(cap: float, problem: MappingProblem, sol: GraphSolution) -> Point:
    """A solve as a point of the graph's frontier."""
    has_plan = math.isfinite(sol.objective_s) and sol.status != "infeasible"
    stored = stored_params(problem, sol.choice) if has_plan else math.inf
    weights = step_weights(problem, sol.choice) if has_plan else StepWeights()
    return Point(cap, problem, sol, stored, weights)


def split_dram(
    layout: Layout,
    tops: dict[str, Point],
    solve: Solve,
    evaluate: Evaluate,
    rel_gap: float = 0.0,
    valve: Callable[[], bool] = lambda: False,
    refit: Refit | None = None,
) -> Split:
    """The split of the module docstring, from every graph's `top` point (each with a plan);
    `rel_gap`: the relative gap the search is asked to prove (SolverOptions.gap), which the
    split stops at as the graphs' MILPs do; `valve`: True once the wall-clock valve has
    tripped, after which no graph is solved again (the split is then not proven); `refit`:
    a graph's top plan re-solved under lower parameter caps (REFIT_SHARES) with its
    configurations kept (one MILP each: plans and no bound), tried once per graph before
    its first solve down the frontier: a top that only stored more than it needed then
    costs no graph search."""
    top_stored = {name: pt.stored for name, pt in tops.items()}
    tol = max(rel_gap, 1e-9)
    if layout.fits(top_stored, tops):
        stored = layout.stored_per_chip(top_stored)
        weights = layout.weights_per_chip({n: pt.weights for n, pt in tops.items()})
        step = evaluate({n: pt.sol.objective_s for n, pt in tops.items()}, stored, weights)
        bounds = {n: pt.sol.bound_s for n, pt in tops.items()}
        positive = all(v > 0 for v in bounds.values())
        bound = _at_least(layout, tops, evaluate, bounds) if positive else 0.0
        if _storage_is_free(layout, tops, evaluate) or _within(step, bound, tol):
            return Split(dict(tops), step, bound, True, 0, stored, weights)
    frontiers = {name: [pt] for name, pt in tops.items()}
    plans: dict[str, list[Point]] = {name: [] for name in tops}  # refits: plans only
    refitted: set[str] = set()
    best, lower = _search(layout, frontiers, evaluate, plans)
    while best is None or lower is None or not _within(best[0], lower[0], tol):
        name = _to_descend(layout, frontiers, lower)
        if name is None or valve():
            break
        if refit is not None and name not in refitted:
            refitted.add(name)
            plans[name] = _refits(refit, name, frontiers[name][0], layout.least[name], tol)
            if plans[name]:
                best, lower = _search(layout, frontiers, evaluate, plans)
                continue
        _descend(layout, frontiers[name], name, solve)
        best, lower = _search(layout, frontiers, evaluate, plans)
    if best is None and not valve():  # a plan of every graph at its least storage, if any
        for name, points in frontiers.items():
            while _next_cap(points, layout.least[name]) is not None:
                _descend(layout, points, name, solve, layout.least[name])
        best, lower = _search(layout, frontiers, evaluate, plans)
    bound = lower[0] if lower is not None else math.inf
    solves = sum(len(f) - 1 for f in frontiers.values())
    if best is None:  # no combination fits: the caller reports the DRAM reason
        found = {n: min(pt.stored for pt in f) for n, f in frontiers.items()}
        return Split({}, math.inf, bound, False, solves, layout.stored_per_chip(found))
    proven = _within(best[0], bound, tol)
    chosen = {n: pt for n, (pt, _) in best[2].items()}
    return Split(chosen, best[0], min(bound, best[0]), proven, solves, best[1], best[3])


def _refits(refit: Refit, name: str, top: Point, least: float, tol: float) -> list[Point]:
    """The top's plan refitted at caps falling from near its storage towards the least
    (REFIT_SHARES), until one has no plan or runs more than `tol` slower than the top (a
    lower cap is no faster)."""
    out: list[Point] = []
    for share in sorted(REFIT_SHARES, reverse=True):
        pt = refit(name, top, least + share * (top.stored - least))
        if pt is None:
            break
        out.append(pt)
        if pt.sol.objective_s > top.sol.objective_s * (1 + tol):
            break
    return out


def _within(step: float, bound: float, tol: float) -> bool:
    """The step is within the relative gap `tol` of the bound, as SolveStats.gap counts it
    (of the step: solver.search.ledger.gap_of)."""
    return step - bound <= tol * step


def _storage_is_free(layout: Layout, tops: dict[str, Point], evaluate: Evaluate) -> bool:
    """The step charges nothing for the tops' storage above every graph's least (inference,
    or a training step whose top plans replicate no weight): then the tops, each optimal with
    all of the slack, are the joint optimum. A training step pays the optimizer update of
    every stored copy and the gradient sync of every replica
    (solver.search.assemble.training_times), which no graph's objective carries: tops whose
    storage costs anything must meet the bound at the least storage within the gap asked, or
    face the plans that store less (step 2); a replicated weight is never called free, and
    the storage's cost never adds to the graphs' own gap unseen."""
    latency = {n: pt.sol.objective_s for n, pt in tops.items()}
    if not all(math.isfinite(v) and v > 0 for v in latency.values()):
        return True
    stored = layout.stored_per_chip({n: pt.stored for n, pt in tops.items()})
    top = evaluate(
        latency, stored, layout.weights_per_chip({n: pt.weights for n, pt in tops.items()})
    )
    return top <= _at_least(layout, tops, evaluate, latency) * (1 + 1e-12)


def _at_least(
    layout: Layout, tops: dict[str, Point], evaluate: Evaluate, latency: dict[str, float]
) -> float:
    """The step at these graph latencies with every graph at its least storage and the
    step weights no plan storing that much undercuts (floor_weights): with the graphs'
    bounds, a bound on every split (pinned options count: a graph's least is its own)."""
    least = {n: floor_weights(pt.problem, layout.least[n]) for n, pt in tops.items()}
    return evaluate(latency, layout.stored_per_chip(layout.least), layout.weights_per_chip(least))


def _search(
    layout: Layout,
    frontiers: dict[str, list[Point]],
    evaluate: Evaluate,
    plans: dict[str, list[Point]],
) -> tuple[_Best | None, _Best | None]:
    """The best split over the plans found (the frontiers' and the refits' `plans`), and
    the bound over the pairs no plan beats (the frontiers' solves only)."""
    actual = {
        n: [
            (pt.sol.objective_s, pt.stored, (pt, False), pt.weights)
            for pt in (*f, *plans[n])
            if math.isfinite(pt.stored)
        ]
        for n, f in frontiers.items()
    }
    relaxed = {n: _relaxed(f, layout.least[n]) for n, f in frontiers.items()}
    return _enumerate(layout, actual, evaluate), _enumerate(layout, relaxed, evaluate)


def _next_cap(points: list[Point], least: float) -> float | None:
    """The cap of the graph's next solve down its frontier (module docstring, step 2), or
    None when its frontier is traced: no plan stores less than the last, the last solve
    found no plan, or it was the least-storage solve."""
    last = points[-1]
    if not math.isfinite(last.stored) or last.stored <= least * (1 + 1e-9) or last.cap <= least:
        return None
    if len(points) > MAX_FRONTIER_SOLVES:
        return least
    return max(last.stored * (1 - BELOW), least)


def _descend(
    layout: Layout, points: list[Point], name: str, solve: Solve, cap: float | None = None
) -> None:
    """One more solve down the graph's frontier (at `cap`, else the next cap)."""
    cap = _next_cap(points, layout.least[name]) if cap is None else cap
    assert cap is not None
    phase = next(p for p in layout.phases if p.name == name)
    points.append(point(cap, *solve(phase, cap)))


def _to_descend(
    layout: Layout, frontiers: dict[str, list[Point]], lower: _Best | None
) -> str | None:
    """The graph to solve next: of those whose untraced storage the bound's split counts
    on, the one whose last plan stores the most above its least (parameters per chip)."""
    if lower is None:
        return None
    untraced = [
        n
        for n, (_, virtual) in lower[2].items()
        if virtual and _next_cap(frontiers[n], layout.least[n]) is not None
    ]
    if not untraced:
        return None
    return max(
        untraced,
        key=lambda n: (frontiers[n][-1].stored - layout.least[n]) * layout.instances[n],
    )


def _relaxed(points: list[Point], least: float) -> list[tuple[float, float, tuple, StepWeights]]:
    """(latency, storage) pairs no plan of the graph beats: under any cap in (next cap
    tried, cap of a solve], the latency is at least the largest bound proven at that cap
    or above; below the last cap only the least storage is known (no pair when the last
    solve proved that no plan stores less). Payload: (None, whether the pair stands for
    storage the solves have not traced yet); then the step weights no plan storing as much
    undercuts (solver.cost.weights.floor_weights)."""
    pairs: list[tuple[float, float, tuple, StepWeights]] = []
    bound = 0.0
    traced = _next_cap(points, least) is None
    for i, pt in enumerate(points):
        # the solve's proven bound (an "optimal" solve's objective is only within its gap)
        bound = max(bound, pt.sol.bound_s)
        if not math.isfinite(bound):  # proven: no plan at this cap or below
            break
        last = i + 1 == len(points)
        below = least if last else points[i + 1].cap
        stored = min(below, pt.cap)
        floor = floor_weights(pt.problem, stored)
        pairs.append((bound, stored, (None, last and not traced), floor))
    return pairs


def _enumerate(
    layout: Layout,
    options: dict[str, list],
    evaluate: Evaluate,
) -> _Best | None:
    """The least step over every weight group's storage level: each graph at its fastest
    (latency, storage, payload, step weights) option under its group's level, the levels
    fitting the slack. (step, parameters per chip, payload by phase name, step weights per
    chip), or None when none fits."""
    groups: dict[Group, list[Phase]] = {}
    for p in layout.phases:
        groups.setdefault(stages.weight_group(p, layout.pp), []).append(p)
    levels = {
        g: sorted({s * layout.instances[p.name] for p in ps for _, s, *_ in options[p.name]})
        for g, ps in groups.items()
    }
    floor = layout.floor
    best: _Best | None = None
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
        plans = {n: o[2][0] for n, o in picked.items() if isinstance(o[2][0], Point)}
        if not layout.fits(stored, plans if len(plans) == len(picked) else None):
            continue
        lat = {n: o[0] for n, o in picked.items()}
        total = layout.stored_per_chip(stored)
        weights = layout.weights_per_chip({n: o[3] for n, o in picked.items()})
        step = evaluate(lat, total, weights) if all(v > 0 for v in lat.values()) else 0.0
        if best is None or (step, total) < best[:2]:
            best = (step, total, {n: o[2] for n, o in picked.items()}, weights)
    return best
