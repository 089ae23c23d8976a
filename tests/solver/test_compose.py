"""Whole-model DATAFLOW graphs (L copies of a layer): the composed first plan is a plan
whose exact cost is what it claims and never below the proven optimum; a steady-state
window's MILP is at least what that window costs inside a plan that repeats it; the
shortest-path bound without the num_config dimension equals the exhaustive optimum over
segmentations when its path fits and never exceeds it otherwise; the numpy separable
bounds equal their definition summed kernel by kernel."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from solver_fixtures import random_dag, small_system, tp2_problem
from test_period import LAYER, _problem

from solver.check import config_cost, config_rank, mapping_cost
from solver.fusion.compose import compose, steady_window
from solver.fusion.paths import backward
from solver.fusion.segment_search import SearchStats, root_bound
from solver.fusion.separable import separable_rows
from solver.fusion.solve import solve_graph
from solver.milp.model import solve_configurations
from solver.options import SolverOptions


def test_composed_plan_prices_as_claimed_and_is_never_below_the_optimum() -> None:
    problem = _problem(4)  # 4 copies of a 5-kernel layer, 20 kernels
    stats = SearchStats()
    plan = compose(problem, SolverOptions(gap=0.0), stats, math.inf)
    assert plan is not None
    n = len(problem.kernels)
    # a segmentation of the order into windows of one layer's length (the head and the
    # tail shorter), every kernel once, within num_config
    assert [k for c in plan.configs for k in c] == list(range(n))
    assert all(len(c) <= LAYER for c in plan.configs)
    assert len(plan.configs) <= problem.max_configs
    # its cost, re-priced configuration by configuration by the independent evaluator
    rank = config_rank(n, plan.configs)
    costs = [config_cost(problem, c, plan.choice, rank) for c in plan.configs]
    assert all(c.feasible for c in costs)
    assert plan.objective_s == pytest.approx(sum(c.latency_s for c in costs), rel=1e-12)
    # an upper bound: the exact search (gap 0) proves nothing cheaper exists
    best = solve_graph(problem, SolverOptions(gap=0.0))
    assert best.status == "optimal"
    assert best.objective_s <= plan.objective_s * (1 + 1e-9)
    assert root_bound(problem) <= best.objective_s * (1 + 1e-9)


@pytest.mark.parametrize("offset", range(LAYER))
def test_steady_window_is_at_least_what_the_window_costs_when_repeated(offset: int) -> None:
    problem = _problem(6)
    n, start = len(problem.kernels), LAYER + offset
    sub = steady_window(problem, start, LAYER)
    assert sub is not None
    r = solve_configurations(sub, [list(range(LAYER))], SolverOptions(gap=0.0))
    assert r.status == "optimal"
    # every kernel takes the option of its place in the window (the layers' menus are
    # equal: the copies differ in names only), windows from `offset` on
    choice = [r.choice[(k - offset) % LAYER] for k in range(n)]
    windows = [tuple(range(a, min(a + LAYER, n))) for a in range(offset, n, LAYER)]
    configs = ([tuple(range(offset))] if offset else []) + windows
    total, costs = mapping_cost(problem, configs, choice)
    assert math.isfinite(total)
    # an interior window (its producers one window earlier took the same options): the
    # steady MILP charges each entering edge's conversion, the plan each layout once
    inner = costs[3 if offset else 2]
    assert inner.kernels == tuple(range(2 * LAYER + offset, 3 * LAYER + offset))
    assert inner.latency_s <= r.objective_s * (1 + 1e-9)


def _segmentations(n: int):
    """Every segmentation of positions 0..n: tuples of (start, end)."""
    for cuts in itertools.product((False, True), repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        yield tuple(zip(bounds[:-1], bounds[1:], strict=True))


@pytest.mark.parametrize("seed", range(6))
def test_shortest_path_bound_against_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 7
    values = rng.uniform(1.0, 3.0, size=(n, n + 1))
    # short segments cheap per kernel, some segments do not fit (inf)
    for i in range(n):
        values[i, : i + 1] = math.inf
        for j in range(i + 1, n + 1):
            values[i, j] *= 0.6 + 0.5 * (j - i)
            if j - i > 4 or rng.random() < 0.15:
                values[i, j] = math.inf
    for K in range(1, n + 1):
        best = min(
            (sum(values[s] for s in segs) for segs in _segmentations(n) if len(segs) <= K),
            default=math.inf,
        )
        h = backward(values, None, K)
        if math.isinf(best):
            assert math.isinf(h[0, 0]) or h[0, 0] <= best
            continue
        # a lower bound always; the optimum under the limit (the path it follows fits)
        assert h[0, 0] <= best * (1 + 1e-12)
        unlimited = min(sum(values[s] for s in segs) for segs in _segmentations(n))
        assert h[0, 0] in (pytest.approx(best), pytest.approx(unlimited))


@pytest.mark.parametrize("seed", range(4))
def test_separable_rows_equal_their_definition(seed: int) -> None:
    rng = random.Random(seed)
    system = small_system(sram_bytes=rng.choice([4e3, 1e4, 3e4]), link_Bps=1e10)
    problem = tp2_problem(
        random_dag(rng, 9),
        system,
        dataflow=True,
        overlap=seed % 2 == 0,
        max_configs=3,
        tiling_points=4,
    )
    values = separable_rows(problem)
    n, kernels = len(problem.kernels), problem.kernels
    for i, j in itertools.combinations(range(n + 1), 2):
        seg = set(range(i, j))
        comp = sum(
            min(o.compute_s for o in kernels[k].options) + kernels[k].overhead_s for k in seg
        )
        net = sum(min(o.network_s for o in kernels[k].options) for k in seg)
        sram = traffic = 0.0
        for k in seg:
            menu = kernels[k]
            outs = problem.out_edges(k)
            streams = any(e.dst in seg for e in outs)
            sram += min(
                o.buffer_bytes + (o.out_tile_bytes if streams else 0.0) for o in menu.options
            )
            fed_inside = {e.dst_operand for e in problem.in_edges(k) if e.src in seg}
            for name in {x for o in menu.options for x, _ in o.traffic}:
                if name == menu.output_operand:
                    # written while a consumer is past the segment (or it has none)
                    if outs and all(e.dst < j for e in outs):
                        continue
                elif name in fed_inside:
                    continue
                traffic += min(o.traffic_of(name) for o in menu.options)
        mem = traffic / problem.dram_bandwidth_Bps
        if sram > problem.sram_bytes * (1 + 1e-9):
            assert values[i, j] == math.inf, (i, j)
            continue
        expect = max(comp, mem, net) if problem.overlap else comp + mem + net
        assert values[i, j] == pytest.approx(expect, rel=1e-12), (i, j)
