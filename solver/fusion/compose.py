"""A first plan for L copies of a layer in one graph, composed from one window solved once.

In a periodic kernel order (period p: kernel k + p is kernel k's copy, solver/fusion/period)
a segmentation that repeats with the period is made of windows [r + m p, r + (m + 1) p) for
an offset r, plus a head [0, r) and a tail. In a plan that repeats a window, an edge that
enters window m comes from the same options one window earlier, so one window's cost is
at most its MILP with those edges wrapped onto its own kernels (`steady_window`; equal
but for a conversion group, whose entering edges it charges one by one where the plan
pays each layout once): solved once per offset (`solve_configurations`, every sharding
in play) and copied to every interior window. Offsets are tried in order, each window
MILP cut off at the best window so far (HiGHS prunes with it) and capped at
WINDOW_NODES; the search stops at a window whose price meets the least separable bound
of any window within a tenth of the relative gap (none can be cheaper by more). The head
and the tail are then one MILP each, with the neighbouring copied window pinned to its
options (`pin`), so the conversions across are the real ones. Every budget here is work
(WINDOW_NODES, at most MAX_OFFSETS offsets), so the composed plan is the same on every
machine; the valve's deadline only cuts the offsets short, and then the caller says so.

This is only an upper bound: the composed plan (configurations, every kernel's option) is
re-priced as a whole by the independent evaluator (solver.check.mapping_cost) and must fit
the SRAM of each configuration, num_config and the DRAM; the proof of its gap is the
caller's (the root bound and the proof search over every segmentation and sharding).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from solver.check import mapping_cost
from solver.cost.problem import EdgeCost, KernelMenu, MappingProblem, Option
from solver.fusion.bridges import fits_dram
from solver.fusion.period import find_period, menu_ids
from solver.fusion.segment_search import SearchStats, separable_bounds, until_deadline
from solver.milp.model import MilpResult, solve_configurations
from solver.options import SolverOptions, past

MIN_WINDOWS = 4  # windows (so at least two interior ones) for a composition to pay
# branch-and-bound nodes per offset's window MILP (an upper bound needs no proof; a node
# limit, unlike seconds, gives each window the same plan on every machine)
WINDOW_NODES = 100
MAX_OFFSETS = 64  # offsets tried, in order (a period longer than this tries its first ones)


@dataclass(frozen=True)
class Composed:
    """A composed plan: its configurations, every kernel's option and its exact latency."""

    configs: tuple[tuple[int, ...], ...]
    choice: tuple[int, ...]
    objective_s: float


def steady_window(problem: MappingProblem, a: int, p: int) -> MappingProblem | None:
    """Window [a, a + p) of a plan that repeats it: kernels a.. as 0.., an edge entering
    from the previous window becomes a wrap edge from its producer's copy in this window
    (the conversion between two consecutive windows' options, paid at the consumer, no
    fusion; alone, out of its conversion group), an edge leaving feeds a ghost kernel p
    (the output goes to DRAM). None when an edge spans more than one window or is a wrap
    edge already."""
    ghost = KernelMenu("ghost", (_GHOST,), ("ghost",), ("in",), "out")
    edges: list[EdgeCost] = []
    for e in problem.edges:
        src_in, dst_in = a <= e.src < a + p, a <= e.dst < a + p
        if src_in and dst_in:
            edges.append(replace(e, src=e.src - a, dst=e.dst - a))
        elif dst_in:
            if e.src < a - p or e.wrap:
                return None
            one = dict(group=-1, layouts=(), lead=True, wrap=True)
            edges.append(replace(e, src=e.src + p - a, dst=e.dst - a, **one))
        elif src_in:
            if e.dst >= a + 2 * p:
                return None
            zero = tuple((0.0,) for _ in e.conv)
            edges.append(EdgeCost(e.src - a, p, "in", zero))
    edges.sort(key=lambda e: (e.dst, e.src))
    first: dict[int, int] = {}
    for i, e in enumerate(edges):
        if e.group >= 0:
            first.setdefault(e.group, i)
    edges = [
        replace(e, lead=first[e.group] == i) if e.group >= 0 else e for i, e in enumerate(edges)
    ]
    kernels = (*problem.kernels[a : a + p], ghost)
    return replace(problem, kernels=kernels, edges=tuple(edges), pinned_configs=())


_GHOST = Option(
    sharding="ghost",
    tile="ghost",
    compute_s=0.0,
    network_s=0.0,
    network_bytes=0.0,
    buffer_bytes=0.0,
    out_tile_bytes=0.0,
    traffic=(),
)


def _steady_price(
    problem: MappingProblem,
    a: int,
    p: int,
    options: SolverOptions,
    stats: SearchStats,
    cutoff_s: float,
) -> MilpResult | None:
    """The window [a, a + p) repeated: its MILP (steady_window), choices indexed like the
    problem's kernels; None when the window is not one."""
    sub = steady_window(problem, a, p)
    if sub is None:
        return None
    window = [list(range(p))]
    r = solve_configurations(sub, window, options, cutoff_s=cutoff_s, later=frozenset({p}))
    stats.add(r)
    choice = [-1] * len(problem.kernels)
    if r.choice:
        choice[a : a + p] = r.choice[:p]
    return replace(r, choice=tuple(choice))


def _best_window(
    problem: MappingProblem, p: int, options: SolverOptions, stats: SearchStats, deadline: float
) -> tuple[int, MilpResult] | None:
    """The offset whose interior window (the second one, [p + r, 2p + r)) is cheapest
    among the first MAX_OFFSETS (fewer only when the valve's `deadline` passes; the stop
    is then recorded), with its MILP (its choice indexed like the problem's kernels)."""
    values = separable_bounds(problem)
    floor = min(float(values[p + r, 2 * p + r]) for r in range(p))
    best: tuple[int, MilpResult] | None = None
    for r in range(min(p, MAX_OFFSETS)):
        if past(deadline):
            stats.stop = "time_limit"
            break
        cut = best[1].objective_s * (1 - 1e-9) if best is not None else math.inf
        step = replace(until_deadline(options, deadline), node_limit=WINDOW_NODES)
        res = _steady_price(problem, p + r, p, step, stats, cut)
        if res is None:
            return None
        if math.isfinite(res.objective_s) and (best is None or res.objective_s < cut):
            best = (r, res)
        if best is not None and best[1].objective_s <= floor * (1 + options.gap / 10 + 1e-9):
            break  # no window is cheaper than its separable bound (within a tenth of the gap)
    return best


def compose(
    problem: MappingProblem, options: SolverOptions, stats: SearchStats, deadline: float
) -> Composed | None:
    """The composed plan of the best window (`_best_window`; the valve's `deadline` in
    perf_counter seconds), or None when the problem has no period with MIN_WINDOWS
    windows or nothing composed fits."""
    n = len(problem.kernels)
    if problem.any_config_pinned:
        return None  # a periodic segmentation ignores the pins
    p = find_period(problem)
    if p is None or n // p < MIN_WINDOWS:
        return None
    found = _best_window(problem, p, options, stats, deadline)
    if found is None:
        return None
    r, inner = found
    ids = menu_ids(problem)
    windows = [(r + m * p, r + (m + 1) * p) for m in range((n - r) // p)]
    segments = ([(0, r)] if r else []) + windows
    if windows[-1][1] < n:
        segments.append((windows[-1][1], n))
    copied = [
        a - r >= p and b + p <= n and bool(np.array_equal(ids[a:b], ids[p + r : 2 * p + r]))
        for a, b in segments
    ]
    if not any(copied):
        return None
    choice = [-1] * n
    for (a, b), same in zip(segments, copied, strict=True):
        if same:
            choice[a:b] = inner.choice[p + r : 2 * p + r]
    first = copied.index(True)
    last = len(copied) - 1 - copied[::-1].index(True)
    ends = [(segments[:first], segments[first], True)]
    ends.append((segments[last + 1 :], segments[last], False))
    for group, fixed, before in ends:
        if not group:
            continue
        if not _solve_end(problem, group, fixed, before, choice, options, stats, deadline):
            return None
    configs = tuple(tuple(range(a, b)) for a, b in segments)
    if len(configs) > problem.max_configs or not fits_dram(problem, dict(enumerate(choice))):
        return None
    cost, _ = mapping_cost(problem, configs, choice)
    if not math.isfinite(cost):
        return None
    stats.notes.append(f"composed plan: period {p}, offset {r}, {len(configs)} configurations")
    return Composed(configs, tuple(choice), cost)


def _solve_end(
    problem: MappingProblem,
    group: list[tuple[int, int]],
    fixed: tuple[int, int],
    group_first: bool,
    choice: list[int],
    options: SolverOptions,
    stats: SearchStats,
    deadline: float,
) -> bool:
    """The options of the head or tail segments `group` (into `choice`), solved as one MILP
    with the neighbouring copied window `fixed` pinned to its options in `choice`, so that
    the conversions across are the real ones; False when it finds none."""
    pinned, back = pin(problem, {k: choice[k] for k in range(*fixed)})
    segs = [*group, fixed] if group_first else [fixed, *group]
    configs = [list(range(a, b)) for a, b in segs]
    res = solve_configurations(pinned, configs, until_deadline(options, deadline))
    stats.add(res)
    if not math.isfinite(res.objective_s):
        return False
    for a, b in group:
        for k in range(a, b):
            choice[k] = back[k][res.choice[k]]
    return True


def pin(problem: MappingProblem, fixed: dict[int, int]) -> tuple[MappingProblem, list[list[int]]]:
    """The problem with each kernel k in `fixed` limited to its option fixed[k]; and, per
    kernel, the original index of each kept option."""
    kernels, back = [], []
    for k, menu in enumerate(problem.kernels):
        if k not in fixed:
            kernels.append(menu)
            back.append(list(range(len(menu.options))))
            continue
        opt = menu.options[fixed[k]]
        kernels.append(replace(menu, options=(opt,), shardings=(opt.sharding,), tile_groups=()))
        back.append([fixed[k]])
    index = {k: problem.kernels[k].sharding_index(o) for k, o in fixed.items()}
    edges = []
    for e in problem.edges:
        rows = [index[e.src]] if e.src in index else range(len(e.conv))
        cols = [index[e.dst]] if e.dst in index else range(len(e.conv[0]))
        conv = tuple(tuple(e.conv[a][b] for b in cols) for a in rows)
        layouts = tuple(e.layouts[b] for b in cols) if e.layouts else ()
        edges.append(replace(e, conv=conv, layouts=layouts))
    return replace(problem, kernels=tuple(kernels), edges=tuple(edges)), back
