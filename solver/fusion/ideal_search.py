"""Exact fusion search over the whole configuration space: paths in the lattice of ideals.

DESIGN.md 7: with Config[u] <= Config[v] on every edge, the kernels of configurations 0..c
form an ideal of the DAG, so a plan is a path empty = I_0 < I_1 < ... < I_m = all with
m <= K, configuration c being S_c = I_{c+1} - I_c. A configuration's cost depends on its
kernel set only, so the search is the segment search of `segment_search` with ideals in
place of positions and kernel sets in place of ranges:
  1. every transition (I, J) gets the cheap separable lower bound of S = J - I;
  2. the sets on the best path (backward shortest path over (ideal, configurations
     used)) are priced exactly (the knapsack when every kernel has one sharding, else the
     small MILP on S alone, a lower bound) until the best path is fully priced;
  3. paths are enumerated best-first (A*) and each complete one gets its exact cost from
     one MILP over its configurations, until the next bound meets the incumbent.
On a chain the ideals are the prefixes and this is the segment search itself (which
`solve_graph` keeps for chains). The caller counts the ideals first: the lattice grows
roughly like n^width, and wide graphs go to the search over several orders instead.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from solver.cost.problem import MappingProblem
from solver.fusion.ideals import members, predecessor_masks
from solver.fusion.segment_price import KnapsackPricer, set_price
from solver.fusion.segment_search import (
    HEAP_LIMIT,
    GraphSolution,
    SearchStats,
    until_deadline,
    with_bound,
)
from solver.milp.model import solve_configurations
from solver.options import SolverOptions, deadline_of, past

IDEAL_LIMIT = 3000  # ideals enumerated before the exact search gives way to orders
TRANSITION_LIMIT = 150_000  # (ideal, larger ideal) pairs whose set may fit the SRAM


class _SetBounds:
    """The separable lower bound of `separable.separable_rows`, for any kernel set."""

    def __init__(self, problem: MappingProblem):
        self.problem = problem
        kernels = problem.kernels
        n = len(kernels)
        self.comp = [min(o.compute_s for o in m.options) + m.overhead_s for m in kernels]
        self.net = [min(o.network_s for o in m.options) for m in kernels]
        self.buf = [min(o.buffer_bytes for o in m.options) for m in kernels]
        self.buf_fused = [
            min(o.buffer_bytes + o.out_tile_bytes for o in m.options) for m in kernels
        ]
        self.consumers = [0] * n
        for e in problem.edges:
            if not e.wrap:  # the next instance's reader: never in this configuration
                self.consumers[e.src] |= 1 << e.dst
        self.weights, self.inputs, self.outputs = [], [], []
        for k, menu in enumerate(kernels):
            fed = {e.dst_operand: e.src for e in problem.in_edges(k)}
            names = {name for o in menu.options for name, _ in o.traffic}
            w, ins = 0.0, []
            for name in sorted(names):
                if name == menu.output_operand:
                    continue
                least = min(o.traffic_of(name) for o in menu.options)
                if name in fed:
                    ins.append((fed[name], least))
                else:
                    w += least
            self.weights.append(w)
            self.inputs.append(ins)
            self.outputs.append(min(o.traffic_of(menu.output_operand) for o in menu.options))

    def least_buffer(self, mask: int) -> float:
        return sum(
            self.buf_fused[k] if self.consumers[k] & mask else self.buf[k] for k in members(mask)
        )

    def bound(self, mask: int) -> float:
        p = self.problem
        ks = members(mask)
        if self.least_buffer(mask) > p.sram_bytes * (1 + 1e-9):
            return math.inf
        c = sum(self.comp[k] for k in ks)
        o = sum(p.kernels[k].overhead_s for k in ks)
        w = sum(self.net[k] for k in ks)
        m = 0.0
        for k in ks:
            m += self.weights[k] + sum(t for src, t in self.inputs[k] if not mask >> src & 1)
            cons = self.consumers[k]
            if not cons or cons & mask != cons:
                m += self.outputs[k]
        return p.latency(c, m / p.dram_bandwidth_Bps, w, o)


class IdealSearch:
    """One exact search over the ideal lattice; `solve` returns None when the lattice
    has more transitions than TRANSITION_LIMIT (the caller falls back)."""

    def __init__(
        self,
        problem: MappingProblem,
        ideals: list[int],
        options: SolverOptions,
        stats: SearchStats,
        deadline: float = math.inf,
    ):
        self.problem, self.options, self.stats = problem, options, stats
        self.deadline = min(deadline, deadline_of(options))
        self.milp_prices = 0  # sets priced by a MILP (the max_priced budget)
        n = len(problem.kernels)
        self.K = max(1, min(problem.max_configs, n))
        self.ideals = ideals
        self.index = {m: i for i, m in enumerate(ideals)}
        self.full = (1 << n) - 1
        self.bounds = _SetBounds(problem)
        self.values: dict[int, float] = {}  # kernel set -> best proven lower bound
        self.priced: set[int] = set()
        pure = all(len(m.shardings) == 1 for m in problem.kernels)
        self.pricer = KnapsackPricer(problem) if pure else None
        self.pins = _pin_masks(problem, self.K)

    # -- the lattice ------------------------------------------------------------------

    def build(self) -> bool:
        """Transitions (I -> J, S = J - I) whose S may fit the SRAM; False past the limit."""
        pred = predecessor_masks(self.problem)
        n, cap = len(self.problem.kernels), self.problem.sram_bytes * (1 + 1e-9)
        self.trans: list[list[tuple[int, int]]] = [[] for _ in self.ideals]
        count = 0
        for i, start in enumerate(self.ideals):
            seen = {start}
            stack = [start]
            while stack:
                cur = stack.pop()
                for k in range(n):
                    bit = 1 << k
                    if cur & bit or pred[k] & cur != pred[k]:
                        continue
                    nxt = cur | bit
                    if nxt in seen:
                        continue
                    seen.add(nxt)
                    s = nxt & ~start
                    if s not in self.values:
                        if self.bounds.least_buffer(s) > cap:
                            self.values[s] = math.inf
                        else:
                            self.values[s] = self.bounds.bound(s)
                    if not math.isfinite(self.values[s]):
                        continue  # buffers only grow: no superset from `start` fits
                    self.trans[i].append((self.index[nxt], s))
                    stack.append(nxt)
                    count += 1
                    if count > TRANSITION_LIMIT:
                        return False
        return True

    def allowed(self, s: int, j: int, used: int) -> bool:
        if self.pins is None:
            return True
        pinned, eq, le = self.pins
        if used >= self.K:
            return False
        return (s & pinned) & ~eq[used] == 0 and le[used] & self.ideals[j] == le[used]

    def backward(self) -> np.ndarray:
        """h[i, used]: least bound to finish from ideal i having used `used` configs."""
        N, K = len(self.ideals), self.K
        h = np.full((N, K + 1), math.inf)
        h[N - 1, :] = 0.0
        for i in range(N - 2, -1, -1):
            row = h[i]
            for j, s in self.trans[i]:
                v = self.values[s]
                for used in range(K):
                    if self.allowed(s, j, used):
                        cand = v + h[j, used + 1]
                        if cand < row[used]:
                            row[used] = cand
        return h

    def best_path(self, h: np.ndarray) -> list[int]:
        path, i, used = [], 0, 0
        while i != len(self.ideals) - 1:
            best = min(
                (
                    (self.values[s] + h[j, used + 1], j, s)
                    for j, s in self.trans[i]
                    if self.allowed(s, j, used)
                ),
                key=lambda t: t[0],
            )
            path.append(best[2])
            i, used = best[1], used + 1
        return path

    # -- prices and exact costs -------------------------------------------------------

    def price(self, s: int, enough: float = math.inf) -> None:
        """The exact price of kernel set `s`; `enough` as in segment_search's price: a
        price at or above it rules out every path through `s` (the MILP's cutoff)."""
        ks = members(s)
        if self.pricer is not None:
            fast = set_price(self.pricer, ks)
            if fast is not None:
                self.values[s] = max(self.values[s], fast) if math.isfinite(fast) else fast
                self.priced.add(s)
                return
        cut = enough if math.isfinite(enough) and enough > self.values[s] else math.inf
        options = until_deadline(self.options, self.deadline)
        r = solve_configurations(self.problem, [ks], options, cutoff_s=cut)
        self.stats.add(r)
        self.stats.segments_priced += 1
        self.milp_prices += 1
        # infeasible under a cutoff: nothing below it (inf without one)
        v = cut if r.status == "infeasible" else max(self.values[s], min(r.bound_s, cut))
        self.values[s] = v
        self.priced.add(s)

    def check_path(self, path: tuple[int, ...], incumbent: tuple, cutoff: bool) -> tuple:
        self.stats.paths_checked += 1
        configs = tuple(tuple(members(s)) for s in path)
        options = until_deadline(self.options, self.deadline)
        cut = incumbent[0] * (1 - 1e-9) if cutoff else math.inf
        r = solve_configurations(self.problem, configs, options, cutoff_s=cut)
        self.stats.add(r)
        if math.isfinite(r.objective_s) and r.objective_s < incumbent[0]:
            return (r.objective_s, configs, r.choice)
        return incumbent

    def out_of_time(self) -> bool:
        """The valve: past the deadline (the only stop that may differ between runs)."""
        return past(self.deadline)

    def out_of_work(self) -> str:
        """The stop due now: "time_limit" (the valve), "price_cap" (max_priced), or ""."""
        if self.out_of_time():
            return "time_limit"
        return "price_cap" if self.milp_prices >= self.options.max_priced else ""

    # -- the search -------------------------------------------------------------------

    def solve(self, incumbent_solution: GraphSolution | None = None) -> GraphSolution | None:
        if not self.build():
            return None
        stats, gap = self.stats, self.options.gap
        stats.notes.append(
            f"ideal lattice: {len(self.ideals)} ideals, "
            f"{sum(len(t) for t in self.trans)} transitions"
        )
        incumbent: tuple = (math.inf, (), ())
        if incumbent_solution is not None and math.isfinite(incumbent_solution.objective_s):
            inc = incumbent_solution
            incumbent = (inc.objective_s, inc.configs, inc.choice)
        while True:  # phase 1: price the best path until it is fully priced
            h = self.backward()
            lower = float(h[0, 0])
            if not math.isfinite(lower):
                return GraphSolution((), (), math.inf, math.inf, "infeasible", stats)
            if lower >= incumbent[0] / (1 + gap):
                assert incumbent_solution is not None
                return with_bound(incumbent_solution, lower, stats, gap)
            path = self.best_path(h)
            todo = [s for s in path if s not in self.priced]
            if not todo:
                break
            stop = self.out_of_work()
            if stop:
                stats.stop = stop
                if incumbent_solution is not None:
                    return with_bound(incumbent_solution, lower, stats, gap)
                return GraphSolution((), (), math.inf, lower, "time_limit", stats)
            goal = incumbent[0] / (1 + gap)
            for s in todo:
                if self.out_of_work():
                    break  # said at the top of the next round
                # the best path is the cheapest through s: the rest costs lower - v
                self.price(s, goal - (lower - self.values[s]))
        if not math.isfinite(incumbent[0]):
            incumbent = self.check_path(tuple(path), incumbent, cutoff=False)
        incumbent, bound, status = self.best_first(h, lower, incumbent)
        if not math.isfinite(incumbent[0]):
            status = "infeasible" if status == "optimal" else "time_limit"
            return GraphSolution((), (), math.inf, bound, status, stats)
        bound = min(max(bound, lower), incumbent[0])
        return GraphSolution(incumbent[1], incumbent[2], incumbent[0], bound, status, stats)

    def best_first(self, h: np.ndarray, lower: float, incumbent: tuple) -> tuple:
        heap: list[tuple[float, float, int, int, tuple[int, ...]]] = [(lower, 0.0, 0, 0, ())]
        gap, stats, pops, last = self.options.gap, self.stats, 0, len(self.ideals) - 1
        while heap:
            f, g, i, used, path = heapq.heappop(heap)
            if f >= incumbent[0] / (1 + gap) - 1e-15:
                return incumbent, min(incumbent[0], f), "optimal"
            pops += 1
            if pops % 256 == 0 and (len(heap) > HEAP_LIMIT or self.out_of_time()):
                stats.stop = "time_limit" if self.out_of_time() else "path_cap"
                stats.notes.append(f"stopped with {len(heap)} partial paths open")
                return incumbent, f, "time_limit"
            if i != last:
                if used >= self.K:
                    continue
                for j, s in self.trans[i]:
                    v = self.values[s]
                    rest = h[j, used + 1]
                    if math.isfinite(v) and math.isfinite(rest) and self.allowed(s, j, used):
                        heapq.heappush(heap, (g + v + rest, g + v, j, used + 1, path + (s,)))
                continue
            unpriced = [s for s in path if s not in self.priced]
            if unpriced:
                stop = self.out_of_work()
                if stop:
                    stats.stop = stop
                    stats.notes.append(f"stopped after {self.milp_prices} set prices")
                    return incumbent, f, "time_limit"
                goal = incumbent[0] / (1 + gap)
                for s in unpriced:
                    if self.out_of_work():
                        break  # the path goes back with its bounds; said when popped
                    # every open path costs >= f: through s, the rest >= f - v
                    self.price(s, goal - (f - self.values[s]))
                g2 = float(sum(self.values[s] for s in path))
                if math.isfinite(g2):
                    heapq.heappush(heap, (g2, g2, i, used, path))
                continue
            incumbent = self.check_path(path, incumbent, cutoff=True)
            if stats.paths_checked >= self.options.max_paths:
                stats.stop = "path_cap"
                stats.notes.append(f"stopped after {stats.paths_checked} paths (path cap)")
                return incumbent, f, "time_limit"
            if self.out_of_time():
                stats.stop = "time_limit"
                return incumbent, f, "time_limit"
        return incumbent, incumbent[0], "optimal"


def _pin_masks(problem: MappingProblem, K: int) -> tuple[int, list[int], list[int]] | None:
    """(every pinned kernel, per configuration c: the kernels pinned to c, those pinned
    to c or before); None when nothing is pinned."""
    pins = problem.pinned_configs
    if not pins or all(p < 0 for p in pins):
        return None
    pinned = sum(1 << k for k, p in enumerate(pins) if p >= 0)
    eq = [sum(1 << k for k, p in enumerate(pins) if p == c) for c in range(K)]
    le = [sum(1 << k for k, p in enumerate(pins) if 0 <= p <= c) for c in range(K)]
    return pinned, eq, le
