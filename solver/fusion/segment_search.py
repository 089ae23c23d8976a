"""Fusion search: configurations as contiguous segments of a topological order.

DESIGN.md 7: a compact "kernel i goes to configuration k" model has weak LP bounds. Here a
segmentation is a path over positions 0..n of the order with at most K segments (a shortest path,
whose LP relaxation is integral), and the exact optimum is proven by bounds:
  1. every segment gets a cheap separable lower bound (solver.fusion.separable);
  2. segments on the current best path are priced exactly by a small MILP
     (`milp.solve_configurations` on that segment alone; producers outside it take their
     cheapest conversion, so the price is still a lower bound) until the best path is made
     of priced segments only; with an incumbent, a pricing MILP stops as soon as it
     proves the price that rules out every path through its segment (HiGHS's cutoff:
     incumbent/(1+gap) minus the least bound of the rest of such a path), and that
     proven price is the segment's bound;
  3. that path's true cost comes from one MILP over the fixed segmentation with every edge
     exact (an upper bound); paths are then enumerated best-first by their bound (A* with
     the backward shortest-path distance as heuristic) until the next bound is no better
     than the incumbent: the incumbent is optimal over all segmentations.
Kernel-by-kernel execution is the special case of one kernel per configuration: one MILP
(solver.fusion.solve.solve_graph picks the search).
"""

from __future__ import annotations

import heapq
import math
import time
import weakref
from dataclasses import dataclass, field, replace

import numpy as np

from solver.by_identity import ByIdentity
from solver.cost.problem import MappingProblem
from solver.fusion.paths import backward
from solver.fusion.period import Periodicity, periodicity
from solver.fusion.segment_bound import KnapsackBounds
from solver.fusion.segment_price import KnapsackPricer, fixed_sharding_prices, segment_price
from solver.fusion.separable import separable_rows
from solver.milp.model import MilpResult, solve_configurations
from solver.options import MIN_LEFT_S, SolverOptions, deadline_of, past

Segment = tuple[int, int]  # [start, end) positions


@dataclass
class SearchStats:
    milps: int = 0
    segments_priced: int = 0
    paths_checked: int = 0
    num_vars: int = 0
    num_binaries: int = 0
    num_rows: int = 0
    build_s: float = 0.0
    solve_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    # why the search stopped short of a proof: "" (it did not), "time_limit" (the valve),
    # or the work budget that ran out: "path_cap", "price_cap", "node_limit"
    stop: str = ""
    # the space searched when it is not every assignment with Config[u] <= Config[v]
    space: str = ""
    # time.process_time() when the search first held a plan (inf: none yet); reported in
    # timing.json, never read by the search
    first_plan_at: float = math.inf
    # the large-graph search returned its alternation's plan unproven, as asked
    # (alternate's `prove`): the caller runs the proof when its own bound falls short
    proof_deferred: bool = False
    # the one-configuration bound over every tile (solver.fusion.fused_bound) when the
    # alternation computed one, else 0
    fused_bound_s: float = 0.0

    def saw_plan(self, objective_s: float) -> None:
        """Note the CPU time of the first plan (a finite objective)."""
        if math.isfinite(objective_s) and not math.isfinite(self.first_plan_at):
            self.first_plan_at = time.process_time()

    def add(self, r: MilpResult) -> None:
        self.milps += 1
        self.build_s += r.build_s
        self.solve_s += r.solve_s
        self.num_vars = max(self.num_vars, r.num_vars)
        self.num_binaries = max(self.num_binaries, r.num_binaries)
        self.num_rows = max(self.num_rows, r.num_rows)


@dataclass(frozen=True)
class GraphSolution:
    """One graph's mapping: its configurations (kernel indices, in order), the option of
    every kernel, the latency found and the proven lower bound."""

    configs: tuple[tuple[int, ...], ...]
    choice: tuple[int, ...]
    objective_s: float
    bound_s: float
    status: str  # "optimal" | "time_limit" | "infeasible"
    stats: SearchStats
    # the problem the option indices refer to when the search extended the one it was
    # given (sampled tile menus opened: solver.fusion.tile_refine); None: the given one
    problem: MappingProblem | None = None

    @property
    def gap(self) -> float:
        if not math.isfinite(self.objective_s) or self.objective_s <= 0:
            return 0.0
        return max(0.0, (self.objective_s - self.bound_s) / self.objective_s)


def segment_search(
    problem: MappingProblem,
    options: SolverOptions,
    stats: SearchStats,
    incumbent_solution: GraphSolution | None = None,
    deadline: float = math.inf,
    heuristic: bool = False,
) -> GraphSolution:
    """Exact search; with an incumbent it only looks for better solutions. It stops with
    the best bound proven so far when a work budget runs out (`options.max_paths`,
    `options.max_priced`) or at the valve's `deadline` (perf_counter seconds).
    `heuristic`: with one sharding per kernel, segments are priced from thinned fronts
    (segment_price.fixed_sharding_prices): a plan whose cost is exact, no proof (the
    alternation's rounds, solver.fusion.alternate)."""
    search = _ExactSearch(problem, options, stats, deadline, heuristic)
    # Phase 1: price the segments of the best path until it is fully priced.
    early, h, path = search.price_best_path(incumbent_solution)
    if early is not None:
        return early
    lower = float(h[0, 0])
    # Phase 2: best-first enumeration of segmentations by bound; exact cost of each.
    incumbent: _Incumbent = (math.inf, (), ())
    if incumbent_solution is not None and math.isfinite(incumbent_solution.objective_s):
        incumbent = (
            incumbent_solution.objective_s,
            incumbent_solution.configs,
            incumbent_solution.choice,
        )
    if not math.isfinite(incumbent[0]):
        # the fully priced best path of phase 1 is a first solution
        incumbent = search.check_path(path, incumbent, cutoff=False)
    incumbent, final_bound, status = search.best_first(h, lower, incumbent)
    if not math.isfinite(incumbent[0]):
        # proven only when the search ran to the end; else no plan is known yet
        status = "infeasible" if status == "optimal" else "time_limit"
        return GraphSolution((), (), math.inf, final_bound, status, stats)
    bound = min(max(final_bound, lower), incumbent[0])
    if status == "optimal" and bound < incumbent[0] / (1 + options.gap) - 1e-12:
        status = "time_limit"
    return GraphSolution(incumbent[1], incumbent[2], incumbent[0], bound, status, stats)


_Incumbent = tuple[float, tuple, tuple]  # (latency, segments, choice)


class _ExactSearch:
    """The state of one exact segment search: `values[i, j]` is the best proven lower
    bound of segment [i, j) (its exact price once in `priced`)."""

    def __init__(
        self,
        problem: MappingProblem,
        options: SolverOptions,
        stats: SearchStats,
        deadline: float,
        heuristic: bool = False,
    ):
        self.problem, self.options, self.stats = problem, options, stats
        self.deadline = min(deadline, deadline_of(options))
        self.milp_prices = 0  # segments priced by a MILP (the max_priced budget)
        n = self.n = len(problem.kernels)
        self.K = max(1, min(problem.max_configs, n))
        self.values = separable_bounds(problem).copy()
        self.allowed = _allowed_mask(problem, n, self.K)
        self.priced: set[Segment] = set()
        single = all(len(m.shardings) == 1 for m in problem.kernels)
        self.pricer = KnapsackPricer(problem) if single else None
        exact = fixed_sharding_prices(problem, self.deadline, heuristic) if single else None
        if exact is not None:
            # every segment priced exactly: the shortest path below is the optimum
            self.values = exact
            self.priced = {(i, j) for i, j in zip(*np.nonzero(np.isfinite(exact)), strict=True)}
        self.knapsack = KnapsackBounds(problem, deadline=self.deadline) if exact is None else None
        self.tightened: set[int] = set()  # start positions with knapsack bounds in `values`
        self.knapsack_rows: dict[int, np.ndarray] = {}  # those bounds, by start
        self.period = periodicity(problem) if self.knapsack is not None else None

    def price(self, seg: Segment, enough: float = math.inf) -> None:
        """The exact price of `seg` (knapsack when every kernel has one sharding, else the
        MILP's proven bound). `enough` (seconds): a price at or above it rules out every
        path through `seg`, so the MILP stops once it proves that much (HiGHS prunes with
        it as a cutoff) and `seg` keeps `enough` as its bound."""
        if self.pricer is not None:
            fast = segment_price(self.pricer, seg)
            if fast is not None:
                self.values[seg] = fast
                self.priced.add(seg)
                return
        options = until_deadline(self.options, self.deadline)
        cut = enough if math.isfinite(enough) and enough > self.values[seg] else math.inf
        later = frozenset(range(seg[1], len(self.problem.kernels)))  # the order's rest
        r = solve_configurations(
            self.problem, [list(range(*seg))], options, cutoff_s=cut, later=later
        )
        self.stats.add(r)
        self.stats.segments_priced += 1
        self.milp_prices += 1
        if r.status == "infeasible":
            # under a cutoff: nothing below it (or nothing at all)
            v = cut
        else:
            # a MILP stopped at its gap may prove less than the knapsack bound already did
            v = max(self.values[seg], min(r.bound_s, cut))
        self.values[seg] = v
        self.priced.add(seg)

    def tighten(self, segs: list[Segment]) -> bool:
        """Knapsack bounds for the start positions of `segs` (before any MILP); False when
        they are all in already."""
        starts = {i for i, _ in segs if i not in self.tightened}
        if self.knapsack is None or not starts:
            return False
        values = self.values
        for i in sorted(starts):
            row = knapsack_row(self.knapsack, self.knapsack_rows, self.period, i)
            keep = [j for j in range(i + 1, self.n + 1) if (i, j) in self.priced]
            kept = values[i, keep]
            np.maximum(values[i], row, out=values[i])
            values[i, keep] = kept
            self.tightened.add(i)
        return True

    def best_path(self, h: np.ndarray) -> list[Segment]:
        path, pos, used = [], 0, 0
        while pos < self.n:
            cand = self.values[pos, pos + 1 :] + h[pos + 1 :, used + 1]
            if self.allowed is not None:
                cand = np.where(self.allowed[pos, pos + 1 :, used], cand, math.inf)
            j = pos + 1 + int(np.argmin(cand))
            path.append((pos, j))
            pos, used = j, used + 1
        return path

    def price_best_path(
        self, incumbent: GraphSolution | None
    ) -> tuple[GraphSolution | None, np.ndarray, list[Segment]]:
        """Phase 1: tighten and price the segments of the best path until it is fully
        priced; returns (a final solution when the search ends here, h, that path)."""
        gap, stats = self.options.gap, self.stats
        while True:
            h = backward(self.values, self.allowed, self.K)
            lower = float(h[0, 0])
            if not math.isfinite(h[0, 0]):
                return GraphSolution((), (), math.inf, math.inf, "infeasible", stats), h, []
            if incumbent is not None and h[0, 0] >= incumbent.objective_s / (1 + gap):
                return with_bound(incumbent, lower, stats, gap), h, []
            path = self.best_path(h)
            todo = [s for s in path if s not in self.priced]
            if not todo:
                return None, h, path
            if self.out_of_time() or self.out_of_prices():
                self.stats.stop = self.stop_reason("price_cap")
                if incumbent is not None:
                    return with_bound(incumbent, lower, stats, gap), h, path
                return GraphSolution((), (), math.inf, lower, "time_limit", stats), h, path
            if self.tighten(todo):
                continue
            goal = math.inf if incumbent is None else incumbent.objective_s / (1 + gap)
            for seg in todo:
                if self.out_of_time() or self.out_of_prices():
                    break  # said at the top of the next round
                # the best path is the cheapest through `seg`: the rest costs lower - v
                self.price(seg, goal - (lower - float(self.values[seg])))

    def out_of_time(self) -> bool:
        """The valve: past the deadline (the only stop that may differ between runs)."""
        return past(self.deadline)

    def out_of_prices(self) -> bool:
        """The max_priced budget: as many segments priced by a MILP as it allows."""
        return self.milp_prices >= self.options.max_priced

    def stop_reason(self, cap: str) -> str:
        """'time_limit' when the valve tripped; else `cap`, the work budget that ran out."""
        return "time_limit" if self.out_of_time() else cap

    def check_path(
        self, path: tuple[Segment, ...] | list[Segment], incumbent: _Incumbent, cutoff: bool
    ) -> _Incumbent:
        """The exact cost of segmentation `path` (one MILP); the better of it and
        `incumbent`. With `cutoff`, HiGHS prunes with the incumbent."""
        self.stats.paths_checked += 1
        segs = tuple(tuple(range(*s)) for s in path)
        options = until_deadline(self.options, self.deadline)
        if cutoff:
            # only a solution better than the incumbent matters: HiGHS prunes with it
            r = solve_configurations(
                self.problem, segs, options, cutoff_s=incumbent[0] * (1 - 1e-9)
            )
            self.stats.add(r)
            self.stats.saw_plan(r.objective_s)
            return (r.objective_s, segs, r.choice) if r.objective_s < incumbent[0] else incumbent
        r = solve_configurations(self.problem, segs, options)
        self.stats.add(r)
        self.stats.saw_plan(r.objective_s)
        return (r.objective_s, segs, r.choice) if math.isfinite(r.objective_s) else incumbent

    def best_first(
        self, h: np.ndarray, lower: float, incumbent: _Incumbent
    ) -> tuple[_Incumbent, float, str]:
        """Phase 2: segmentations best-first by bound (A*, h the heuristic), each complete
        one priced exactly, until the least open bound meets the incumbent; returns the
        incumbent, the final bound and the status."""
        heap: list[tuple[float, float, int, int, tuple[Segment, ...]]] = [(lower, 0.0, 0, 0, ())]
        gap, stats, pops = self.options.gap, self.stats, 0
        while heap:
            f, g, pos, used, path = heapq.heappop(heap)
            if f >= incumbent[0] / (1 + gap) - 1e-15:
                return incumbent, min(incumbent[0], f), "optimal"
            pops += 1
            if pops % 256 == 0 and (len(heap) > HEAP_LIMIT or self.out_of_time()):
                # f is the least bound of every segmentation not yet looked at
                stats.stop = self.stop_reason("path_cap")
                stats.notes.append(f"stopped with {len(heap)} partial segmentations open")
                return incumbent, f, "time_limit"
            if pos < self.n:
                self.expand(heap, h, g, pos, used, path)
                continue
            unpriced = [s for s in path if s not in self.priced]
            if unpriced:
                if not self.tighten(unpriced):
                    if self.out_of_time() or self.out_of_prices():
                        stats.stop = self.stop_reason("price_cap")
                        stats.notes.append(f"stopped after {self.milp_prices} segment prices")
                        return incumbent, f, "time_limit"
                    goal = incumbent[0] / (1 + gap)
                    for seg in unpriced:
                        if self.out_of_time() or self.out_of_prices():
                            break  # the path goes back with its bounds; said when popped
                        # every path still open costs >= f: through `seg`, the rest >= f - v
                        self.price(seg, goal - (f - float(self.values[seg])))
                g2 = float(sum(self.values[s] for s in path))
                heapq.heappush(heap, (g2, g2, pos, used, path))
                continue
            incumbent = self.check_path(path, incumbent, cutoff=True)
            if stats.paths_checked >= self.options.max_paths or self.out_of_time():
                stats.stop = self.stop_reason("path_cap")
                stats.notes.append(f"stopped after {stats.paths_checked} segmentations")
                return incumbent, f, "time_limit"
        return incumbent, incumbent[0], "optimal"

    def expand(self, heap: list, h: np.ndarray, g: float, pos: int, used: int, path: tuple) -> None:
        """Push every next segment [pos, j) of a partial segmentation."""
        if used + 1 > self.K:
            return
        for j in range(pos + 1, self.n + 1):
            v = float(self.values[pos, j])
            rest = float(h[j, used + 1])
            if not math.isfinite(v) or not math.isfinite(rest):
                continue
            if self.allowed is not None and not self.allowed[pos, j, used]:
                continue
            heapq.heappush(heap, (g + v + rest, g + v, j, used + 1, path + ((pos, j),)))


def knapsack_row(
    bounds: KnapsackBounds, rows: dict[int, np.ndarray], period: Periodicity | None, i: int
) -> np.ndarray:
    """bounds.row(i), kept in `rows`; copied from row i - p shifted by p when that row is
    known and every kernel its sweep read (up to the first segment that did not fit, or
    to n - p) equals its copy p later: the same arithmetic on the same numbers."""
    n = bounds.n
    src = i - period.period if period is not None else -1
    if period is not None and src in rows:
        p, before = period.period, rows[src]
        finite = np.nonzero(np.isfinite(before[src + 1 :]))[0]
        last = src + 1 + int(finite[-1]) if len(finite) else src
        if period.copyable(src, min(last + 1, n - p)):
            row = np.full(n + 1, math.inf)
            row[i + 1 :] = before[src + 1 : n - p + 1]
            rows[i] = row
            return row
    rows[i] = bounds.row(i)
    return rows[i]


def root_bound(problem: MappingProblem) -> float:
    """The least sum of separable segment bounds over all segmentations: a lower bound of
    the optimum that costs no MILP. Once per problem (the valve's bound may ask first)."""
    return _ROOTS.get(problem, lambda: _root_bound(problem))


_ROOTS: ByIdentity[float] = ByIdentity()


def _root_bound(problem: MappingProblem) -> float:
    n = len(problem.kernels)
    K = max(1, min(problem.max_configs, n))
    values = separable_bounds(problem)
    return float(backward(values, _allowed_mask(problem, n, K), K)[0, 0])


_SEPARABLE: list[tuple[weakref.ref, np.ndarray]] = []  # the last problem's, reused


def separable_bounds(problem: MappingProblem) -> np.ndarray:
    """`separable.separable_rows` (inf where a segment cannot fit), computed once for the same
    problem object: the root bound and the proof search of the alternation share it (about
    1.4 s on 3,936 kernels). Read-only: copy to change."""
    if _SEPARABLE and _SEPARABLE[0][0]() is problem:
        return _SEPARABLE[0][1]
    values = separable_rows(problem)
    values.flags.writeable = False
    _SEPARABLE[:] = [(weakref.ref(problem), values)]
    return values


def _allowed_mask(problem: MappingProblem, n: int, K: int) -> np.ndarray | None:
    """allowed[i, j, c]: segment [i, j) may be configuration c under the kernels' pins
    (None when nothing is pinned)."""
    pins = problem.pinned_configs
    if not pins or all(p < 0 for p in pins):
        return None
    allowed = np.zeros((n, n + 1, K), dtype=bool)
    for i in range(n):
        ok = np.ones(K, dtype=bool)
        for j in range(i + 1, n + 1):
            pin = pins[j - 1]
            if pin >= 0:
                keep = np.zeros(K, dtype=bool)
                if pin < K:
                    keep[pin] = True
                ok &= keep
            allowed[i, j] = ok
    return allowed


def with_bound(
    solution: GraphSolution, bound: float, stats: SearchStats, gap: float = 0.0
) -> GraphSolution:
    """`solution` with the proven `bound`; optimal when the bound is within the relative
    `gap`."""
    bound = min(max(bound, solution.bound_s), solution.objective_s)
    optimal = bound >= solution.objective_s / (1 + gap) * (1 - 1e-9)
    status = "optimal" if optimal else "time_limit"
    return GraphSolution(
        solution.configs, solution.choice, solution.objective_s, bound, status, stats
    )


HEAP_LIMIT = 200_000  # partial segmentations kept by the best-first search (memory guard)


def until_deadline(options: SolverOptions, deadline: float) -> SolverOptions:
    """`options` with the valve cut to what is left before `deadline` (at least
    MIN_LEFT_S: HiGHS then stops at once and says so)."""
    if not math.isfinite(deadline):
        return options
    left = max(MIN_LEFT_S, deadline - time.perf_counter())
    if options.time_limit_s > 0:
        left = min(left, options.time_limit_s)
    return replace(options, time_limit_s=left)
