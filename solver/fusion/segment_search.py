"""Fusion search: configurations as contiguous segments of a topological order.

DESIGN.md 7: a compact "kernel i goes to configuration k" model has weak LP bounds. Here a
plan is a path over positions 0..n of the order with at most K segments (a shortest path,
whose LP relaxation is integral), and the exact optimum is proven by bounds:
  1. every segment gets a cheap separable lower bound (prefix sums, O(n^2));
  2. segments on the current best path are priced exactly by a small MILP
     (`milp.solve_configurations` on that segment alone; producers outside it take their
     cheapest conversion, so the price is still a lower bound) until the best path is made
     of priced segments only;
  3. that path's true cost comes from one MILP over the fixed segmentation with every edge
     exact (an upper bound); paths are then enumerated best-first by their bound (A* with
     the backward shortest-path distance as heuristic) until the next bound is no better
     than the incumbent: the incumbent is optimal over all segmentations.
Kernel-by-kernel execution is the special case of one kernel per configuration: one MILP.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from solver.cost.latency import config_latency
from solver.cost.menus import MappingProblem
from solver.fusion.segment_bound import KnapsackBounds
from solver.fusion.segment_price import fixed_sharding_prices
from solver.milp.model import MilpResult, solve_configurations
from solver.options import SolverOptions

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

    def add(self, r: MilpResult) -> None:
        self.milps += 1
        self.build_s += r.build_s
        self.solve_s += r.solve_s
        self.num_vars = max(self.num_vars, r.num_vars)
        self.num_binaries = max(self.num_binaries, r.num_binaries)
        self.num_rows = max(self.num_rows, r.num_rows)


@dataclass(frozen=True)
class GraphSolution:
    segments: tuple[tuple[int, ...], ...]
    choice: tuple[int, ...]
    objective_s: float
    bound_s: float
    status: str  # "optimal" | "time_limit" | "infeasible"
    stats: SearchStats

    @property
    def gap(self) -> float:
        if not math.isfinite(self.objective_s) or self.objective_s <= 0:
            return 0.0
        return max(0.0, (self.objective_s - self.bound_s) / self.objective_s)


def solve_graph(problem: MappingProblem, options: SolverOptions) -> GraphSolution:
    stats = SearchStats()
    n = len(problem.kernels)
    if not problem.dataflow or n == 1:
        segments = tuple((k,) for k in range(n))
        r = solve_configurations(problem, segments, options)
        stats.add(r)
        return GraphSolution(segments, r.choice, r.objective_s, r.bound_s, r.status, stats)
    from solver.fusion.alternate import alternate

    if _small(problem):
        return segment_search(problem, options, stats)
    return alternate(problem, options, stats)


def _small(problem: MappingProblem) -> bool:
    """Small enough for the direct exact search (every sharding combination in play)."""
    return len(problem.kernels) <= 10 or all(len(m.shardings) == 1 for m in problem.kernels)


class _Bounds:
    """Cheap separable lower bounds of every segment, O(n^2) with incremental sums."""

    def __init__(self, problem: MappingProblem):
        self.problem = problem
        n = len(problem.kernels)
        self.values: dict[Segment, float] = {}
        comp = [min(o.compute_s for o in m.options) + m.overhead_s for m in problem.kernels]
        net = [min(o.network_s for o in m.options) for m in problem.kernels]
        buf = [min(o.buffer_bytes for o in m.options) for m in problem.kernels]
        # a kernel whose output feeds a consumer in its segment also holds a stream buffer
        buf_fused = [
            min(o.buffer_bytes + o.out_tile_bytes for o in m.options) for m in problem.kernels
        ]
        fused_from: dict[int, list[int]] = {}  # first consumer -> producers it fuses
        for k in range(n):
            outs = [e.dst for e in problem.out_edges(k)]
            if outs:
                fused_from.setdefault(min(outs), []).append(k)
        bw = problem.dram_bandwidth_Bps
        weights, inputs, outputs, last_use = [], [], [], []
        for k, menu in enumerate(problem.kernels):
            fed = {e.dst_operand: e.src for e in problem.in_edges(k)}
            names = {name for o in menu.options for name, _ in o.traffic}
            w = 0.0
            ins: list[tuple[int, float]] = []
            for name in sorted(names):
                least = min(o.traffic_of(name) for o in menu.options)
                if name == menu.output_operand:
                    continue
                if name in fed:
                    ins.append((fed[name], least))
                else:
                    w += least
            weights.append(w)
            inputs.append(ins)
            outputs.append(min(o.traffic_of(menu.output_operand) for o in menu.options))
            outs = [e.dst for e in problem.out_edges(k)]
            last_use.append(max(outs) if outs else n)  # n: the output always leaves the chip
        for i in range(n):
            c = m = w = b = o = 0.0
            out_pending: dict[int, float] = {}
            for j in range(i + 1, n + 1):
                k = j - 1
                b += buf[k]
                b += sum(buf_fused[q] - buf[q] for q in fused_from.get(k, ()) if q >= i)
                if b > problem.sram_bytes * (1 + 1e-9):
                    break
                c += comp[k]
                o += problem.kernels[k].overhead_s
                w += net[k]
                m += weights[k] + sum(t for src, t in inputs[k] if src < i)
                if last_use[k] >= j:
                    out_pending[k] = outputs[k]
                for kk in [kk for kk in out_pending if last_use[kk] < j]:
                    del out_pending[kk]
                mem = (m + sum(out_pending.values())) / bw
                self.values[(i, j)] = config_latency(
                    c, mem, w, o, problem.overlap, problem.serialize_network
                )


def segment_search(
    problem: MappingProblem,
    options: SolverOptions,
    stats: SearchStats,
    incumbent_solution: GraphSolution | None = None,
    deadline: float = math.inf,
) -> GraphSolution:
    """Exact search; with an incumbent it only looks for better plans, and at `deadline`
    (perf_counter seconds) it stops with the best bound proven so far."""
    t_start = time.perf_counter()
    n = len(problem.kernels)
    K = max(1, min(problem.max_configs, n))
    values = np.full((n, n + 1), math.inf)  # values[i, j]: bound of segment [i, j)
    for (i, j), v in _Bounds(problem).values.items():
        values[i, j] = v
    allowed = _allowed_mask(problem, n, K)
    priced: set[Segment] = set()
    single = all(len(m.shardings) == 1 for m in problem.kernels)
    exact = fixed_sharding_prices(problem, deadline) if single else None
    if exact is not None:
        # every segment priced exactly: the shortest path below is the optimum
        values = exact
        priced = {(i, j) for i, j in zip(*np.nonzero(np.isfinite(exact)), strict=True)}

    knapsack = KnapsackBounds(problem) if exact is None else None
    tightened: set[int] = set()  # start positions whose knapsack bounds are in `values`

    def price(seg: Segment) -> None:
        if single:
            fast = _price_fixed_sharding(problem, seg)
            if fast is not None:
                values[seg] = fast
                priced.add(seg)
                return
        r = solve_configurations(problem, [list(range(*seg))], until_deadline(options, deadline))
        stats.add(r)
        stats.segments_priced += 1
        # a MILP stopped at its gap may prove less than the knapsack bound already did
        values[seg] = max(values[seg], r.bound_s) if r.status != "infeasible" else math.inf
        priced.add(seg)

    def tighten(segs: list[Segment]) -> bool:
        """Knapsack bounds for the start positions of `segs` (before any MILP); False when
        they are all in already."""
        starts = {i for i, _ in segs if i not in tightened}
        if knapsack is None or not starts:
            return False
        for i in sorted(starts):
            row = knapsack.row(i)
            keep = [j for j in range(i + 1, n + 1) if (i, j) in priced]
            kept = values[i, keep]
            np.maximum(values[i], row, out=values[i])
            values[i, keep] = kept
            tightened.add(i)
        return True

    def backward() -> np.ndarray:
        return _backward(values, allowed, K)

    def best_path(h: np.ndarray) -> list[Segment]:
        path, pos, used = [], 0, 0
        while pos < n:
            cand = values[pos, pos + 1 :] + h[pos + 1 :, used + 1]
            if allowed is not None:
                cand = np.where(allowed[pos, pos + 1 :, used], cand, math.inf)
            j = pos + 1 + int(np.argmin(cand))
            path.append((pos, j))
            pos, used = j, used + 1
        return path

    # Phase 1: price the segments of the best path until it is fully priced.
    while True:
        h = backward()
        if not math.isfinite(h[0, 0]):
            return GraphSolution((), (), math.inf, math.inf, "infeasible", stats)
        if incumbent_solution is not None and h[0, 0] >= incumbent_solution.objective_s / (
            1 + options.gap
        ):
            return with_bound(incumbent_solution, float(h[0, 0]), stats, options.gap)
        path = best_path(h)
        todo = [s for s in path if s not in priced]
        if not todo:
            break
        if time.perf_counter() > deadline:
            if incumbent_solution is not None:
                return with_bound(incumbent_solution, float(h[0, 0]), stats, options.gap)
            return GraphSolution((), (), math.inf, float(h[0, 0]), "time_limit", stats)
        if tighten(todo):
            continue
        for seg in todo:
            price(seg)
    lower = float(h[0, 0])

    # Phase 2: best-first enumeration of segmentations by bound; exact cost of each.
    incumbent: tuple[float, tuple, tuple] = (math.inf, (), ())
    if incumbent_solution is not None and math.isfinite(incumbent_solution.objective_s):
        incumbent = (
            incumbent_solution.objective_s,
            incumbent_solution.segments,
            incumbent_solution.choice,
        )
    if not math.isfinite(incumbent[0]):
        # the fully priced best path of phase 1 is a first plan
        segs = tuple(tuple(range(*seg)) for seg in path)
        r = solve_configurations(problem, segs, until_deadline(options, deadline))
        stats.add(r)
        stats.paths_checked += 1
        if math.isfinite(r.objective_s):
            incumbent = (r.objective_s, segs, r.choice)
    heap: list[tuple[float, float, int, int, tuple[Segment, ...]]] = [(lower, 0.0, 0, 0, ())]
    final_bound = lower
    status = "optimal"
    pops = 0
    while heap:
        f, g, pos, used, path = heapq.heappop(heap)
        if f >= incumbent[0] / (1 + options.gap) - 1e-15:
            final_bound = min(incumbent[0], f)
            break
        pops += 1
        if pops % 256 == 0 and (
            len(heap) > HEAP_LIMIT
            or _out_of_time(options, t_start)
            or time.perf_counter() > deadline
        ):
            # f is the least bound of every segmentation not yet looked at
            final_bound = f
            status = "time_limit"
            stats.notes.append(f"stopped with {len(heap)} partial segmentations open")
            break
        if pos == n:
            unpriced = [s for s in path if s not in priced]
            if unpriced:
                if not tighten(unpriced):
                    for seg in unpriced:
                        price(seg)
                g2 = float(sum(values[s] for s in path))
                heapq.heappush(heap, (g2, g2, pos, used, path))
                continue
            stats.paths_checked += 1
            segs = tuple(tuple(range(*s)) for s in path)
            # only a plan better than the incumbent matters: HiGHS prunes with it
            r = solve_configurations(
                problem, segs, until_deadline(options, deadline), cutoff_s=incumbent[0] * (1 - 1e-9)
            )
            stats.add(r)
            if r.objective_s < incumbent[0]:
                incumbent = (r.objective_s, segs, r.choice)
            if (
                stats.paths_checked >= options.max_paths
                or _out_of_time(options, t_start)
                or time.perf_counter() > deadline
            ):
                final_bound = f
                status = "time_limit"
                stats.notes.append(f"stopped after {stats.paths_checked} segmentations")
                break
            continue
        if used + 1 > K:
            continue
        for j in range(pos + 1, n + 1):
            v = float(values[pos, j])
            rest = float(h[j, used + 1])
            if not math.isfinite(v) or not math.isfinite(rest):
                continue
            if allowed is not None and not allowed[pos, j, used]:
                continue
            heapq.heappush(heap, (g + v + rest, g + v, j, used + 1, path + ((pos, j),)))
    else:
        final_bound = incumbent[0]
    if not math.isfinite(incumbent[0]):
        return GraphSolution((), (), math.inf, final_bound, "infeasible", stats)
    bound = min(max(final_bound, lower), incumbent[0])
    if status == "optimal" and bound < incumbent[0] / (1 + options.gap) - 1e-12:
        status = "time_limit"
    return GraphSolution(incumbent[1], incumbent[2], incumbent[0], bound, status, stats)


def _backward(values: np.ndarray, allowed: np.ndarray | None, K: int) -> np.ndarray:
    """h[pos, used]: least bound to finish from pos having used `used` configs."""
    n = values.shape[0]
    h = np.full((n + 1, K + 1), math.inf)
    h[n, :] = 0.0
    for pos in range(n - 1, -1, -1):
        cand = values[pos, pos + 1 :, None] + h[pos + 1 :, 1:]
        if allowed is not None:
            cand = np.where(allowed[pos, pos + 1 :, :], cand, math.inf)
        h[pos, :K] = cand.min(axis=0)
    return h


def root_bound(problem: MappingProblem) -> float:
    """The least sum of separable segment bounds over all segmentations: a lower bound of
    the optimum that costs no MILP."""
    n = len(problem.kernels)
    K = max(1, min(problem.max_configs, n))
    values = np.full((n, n + 1), math.inf)
    for (i, j), v in _Bounds(problem).values.items():
        values[i, j] = v
    return float(_backward(values, _allowed_mask(problem, n, K), K)[0, 0])


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
    plan: GraphSolution, bound: float, stats: SearchStats, gap: float = 0.0
) -> GraphSolution:
    """`plan` with the proven `bound`; optimal when the bound is within the relative `gap`."""
    bound = min(max(bound, plan.bound_s), plan.objective_s)
    optimal = bound >= plan.objective_s / (1 + gap) * (1 - 1e-9)
    status = "optimal" if optimal else "time_limit"
    return GraphSolution(plan.segments, plan.choice, plan.objective_s, bound, status, stats)


def _price_fixed_sharding(problem: MappingProblem, seg: Segment) -> float | None:
    """Exact price of a segment when every kernel has one sharding: compute and network
    are constants, and the least DRAM traffic whose tilings fit the SRAM together is a
    multiple-choice knapsack, solved exactly over the Pareto front of (buffer, traffic).
    None when that front grows past `PARETO_LIMIT` states (the MILP takes over)."""
    from solver.check import kernel_memory_bytes

    members = set(range(*seg))
    cap = problem.sram_bytes * (1 + 1e-9)
    comp = net = 0.0
    front = np.zeros((1, 2))  # rows: (buffer bytes, traffic bytes)
    for k in range(*seg):
        menu = problem.kernels[k]
        fused_out = any(e.dst in members for e in problem.out_edges(k))
        comp += menu.options[0].compute_s + menu.overhead_s
        net += min(o.network_s for o in menu.options)
        if (
            len({o.network_s for o in menu.options}) > 1
            or len({o.compute_s for o in menu.options}) > 1
        ):
            return None  # tilings that change compute or network: not a pure knapsack
        choices = _pareto(
            np.array(
                [
                    (
                        opt.buffer_bytes + (opt.out_tile_bytes if fused_out else 0.0),
                        kernel_memory_bytes(problem, k, o, members),
                    )
                    for o, opt in enumerate(menu.options)
                ]
            )
        )
        buf = (front[:, :1] + choices[None, :, 0]).ravel()
        traffic = (front[:, 1:] + choices[None, :, 1]).ravel()
        keep = buf <= cap
        front = _pareto(np.stack([buf[keep], traffic[keep]], axis=1))
        if not len(front):
            return math.inf
        if len(front) > PARETO_LIMIT:
            return None
    for e in problem.edges:
        if e.dst in members:
            net += e.conv[0][0]
    mem = front[-1][1] / problem.dram_bandwidth_Bps
    ovh = sum(problem.kernels[k].overhead_s for k in range(*seg))
    return config_latency(comp, mem, net, ovh, problem.overlap, problem.serialize_network)


PARETO_LIMIT = 4000
HEAP_LIMIT = 200_000  # partial segmentations kept by the best-first search (memory guard)


def _pareto(points: np.ndarray) -> np.ndarray:
    """Rows (buffer, traffic) not dominated, by increasing buffer (so the last row has the
    least traffic)."""
    order = np.lexsort((points[:, 1], points[:, 0]))
    points = points[order]
    best_before = np.minimum.accumulate(np.concatenate(([np.inf], points[:-1, 1])))
    return points[points[:, 1] < best_before]


def until_deadline(options: SolverOptions, deadline: float) -> SolverOptions:
    """`options` with the time limit cut to what is left before `deadline`."""
    if not math.isfinite(deadline):
        return options
    left = max(0.05, deadline - time.perf_counter())
    if options.time_limit_s > 0:
        left = min(left, options.time_limit_s)
    return replace(options, time_limit_s=left)


def _out_of_time(options: SolverOptions, t_start: float) -> bool:
    return options.time_limit_s > 0 and time.perf_counter() - t_start > options.time_limit_s
