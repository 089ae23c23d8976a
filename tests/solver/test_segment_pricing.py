"""Segment prices under fixed shardings: the exact knapsack over the (buffer, traffic)
Pareto front (per segment, and in one sweep over all segments) equals the MILP on every
segment of random graphs; the knapsack lower bounds for free shardings never exceed the
MILP's exact segment price; the Pareto filter keeps exactly the undominated points."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from solver_fixtures import random_chain, random_dag, small_system, tp2_problem

from generator.build import build_workload
from generator.chain import chain_instances
from schema import setup_pb2
from solver.fusion.alternate import restrict
from solver.fusion.fronts import merge, merge_all, thinned
from solver.fusion.segment_bound import KnapsackBounds
from solver.fusion.segment_price import (
    KnapsackPricer,
    fixed_sharding_prices,
    narrow_starts,
    pareto,
    segment_price,
    thin_starts,
)
from solver.fusion.segment_search import SearchStats, segment_search
from solver.fusion.separable import separable_rows
from solver.fusion.solve import solve_graph
from solver.milp.model import solve_configurations
from solver.options import SolverOptions


def _problem(seed: int, n: int, dag: bool):
    rng = random.Random(seed)
    graph = (random_dag if dag else random_chain)(rng, n)
    system = small_system(sram_bytes=rng.choice([4e3, 1e4, 3e4]), link_Bps=1e10)
    problem = tp2_problem(
        graph,
        system,
        dataflow=True,
        overlap=rng.random() < 0.5,
        max_configs=3,
        tiling_points=4,
    )
    return problem, rng


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dag", [False, True])
def test_sweep_prices_equal_milp(seed: int, dag: bool) -> None:
    problem, rng = _problem(seed, 8, dag)
    fixed, _ = restrict(problem, [rng.choice(m.shardings) for m in problem.kernels])
    prices = fixed_sharding_prices(fixed)
    assert prices is not None
    n = len(fixed.kernels)
    compared = 0
    for i, j in itertools.combinations(range(n + 1), 2):
        milp = solve_configurations(fixed, [list(range(i, j))], SolverOptions(gap=0.0))
        if milp.status == "infeasible":
            assert prices[i, j] == math.inf, (i, j)
            continue
        assert math.isclose(prices[i, j], milp.objective_s, rel_tol=1e-6), (i, j)
        compared += 1
    assert compared >= n


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("dag", [False, True])
def test_knapsack_bound_never_exceeds_the_segment_price(seed: int, dag: bool) -> None:
    problem, _ = _problem(seed, 7, dag)
    bounds = KnapsackBounds(problem)
    separable = separable_rows(problem)
    n = len(problem.kernels)
    tighter = 0
    for i in range(n):
        row = bounds.row(i)
        for j in range(i + 1, n + 1):
            milp = solve_configurations(problem, [list(range(i, j))], SolverOptions(gap=0.0))
            if milp.status == "infeasible":
                continue
            assert row[j] <= milp.objective_s * (1 + 1e-9), (i, j)
            assert separable[i, j] <= milp.objective_s * (1 + 1e-9), (i, j)
            tighter += row[j] > separable[i, j] * (1 + 1e-6)
    # layout conversions inside a segment and the shared SRAM make it bite somewhere
    assert tighter > 0


@pytest.mark.parametrize("seed", range(6))
def test_knapsack_price_equals_milp(seed: int) -> None:
    rng = random.Random(seed)
    graph = random_chain(rng, 7)
    system = small_system(sram_bytes=rng.choice([4e3, 1e4, 3e4]), link_Bps=1e10)
    problem = tp2_problem(
        graph,
        system,
        dataflow=True,
        overlap=rng.random() < 0.5,
        max_configs=3,
        tiling_points=4,
    )
    shardings = [rng.choice(m.shardings) for m in problem.kernels]
    fixed, _ = restrict(problem, shardings)
    n = len(fixed.kernels)
    compared = 0
    for i, j in itertools.combinations(range(n + 1), 2):
        price = segment_price(KnapsackPricer(fixed), (i, j))
        milp = solve_configurations(fixed, [list(range(i, j))], SolverOptions(gap=0.0))
        assert price is not None
        if milp.status == "infeasible":
            assert price == math.inf
            continue
        assert math.isclose(price, milp.objective_s, rel_tol=1e-6), (i, j)
        compared += 1
    assert compared >= n


def test_pareto_keeps_exactly_the_undominated_points() -> None:
    rng = random.Random(7)
    points = np.array([(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(60)], dtype=float)
    kept = {tuple(p) for p in pareto(points)}
    unique = {tuple(p) for p in points}
    expected = {
        p for p in unique if not any(q != p and q[0] <= p[0] and q[1] <= p[1] for q in unique)
    }
    assert kept == expected


def _undominated(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Brute force: the distinct points no other point is at least as good on both."""
    unique = set(points)
    kept = [p for p in unique if not any(q != p and q[0] <= p[0] and q[1] <= p[1] for q in unique)]
    return sorted(kept)


def _draw_front(rng: random.Random, base: float, step: float) -> np.ndarray:
    """A random Pareto front with buffers around `base` (2**53: adding 1 rounds, so two
    neighbours can become equal after a move) in multiples of `step`."""
    points = [(base + step * rng.randint(0, 40), float(rng.randint(0, 60))) for _ in range(25)]
    return np.array(_undominated(points), dtype=float).reshape(-1, 2)


@pytest.mark.parametrize("seed", range(40))
def test_merges_keep_exactly_the_undominated_sums(seed: int) -> None:
    """merge_all (one-choice runs moved and filtered once, several choices sorted by
    runs) gives, bit for bit, the rows of merging one kernel at a time by brute force:
    every front row plus every choice, in the same order of additions, cut at the cap,
    the undominated ones by increasing buffer."""
    rng = random.Random(seed)
    big = rng.random() < 0.5
    base, step = (2.0**53, rng.choice([1.0, 2.0, 3.0])) if big else (0.0, 1.0)
    front = _draw_front(rng, base, step)
    choices = []
    for _ in range(rng.randint(1, 6)):
        width = 1 if rng.random() < 0.6 else rng.randint(2, 5)
        drawn = [(step * rng.randint(0, 6) + rng.choice([0.0, 1.0]), float(rng.randint(0, 20)))
                 for _ in range(width)]  # fmt: skip
        choices.append(np.array(_undominated(drawn), dtype=float).reshape(-1, 2))
    cap = float(front[:, 0].max()) + step * rng.randint(0, 30) if len(front) else 0.0
    expected = [tuple(map(float, r)) for r in front]
    for c in choices:
        sums = [(b + cb, t + ct) for cb, ct in c for b, t in expected]
        expected = _undominated([p for p in sums if p[0] <= cap])
    got = merge_all(front, choices, cap)
    assert [tuple(map(float, r)) for r in got] == expected
    one = front
    for c in choices:
        one = merge(one, c, cap)
    assert np.array_equal(one, got)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("dag", [False, True])
def test_alternation_reaches_the_exact_search_optimum(seed: int, dag: bool) -> None:
    """Graphs past the direct search's size go through the sharding/segmentation
    alternation and its proof; both must give the exact optimum."""
    problem, _ = _problem(seed, 12, dag)
    options = SolverOptions(gap=0.0)
    exact = segment_search(problem, options, SearchStats())
    solved = solve_graph(problem, options)
    assert exact.status == solved.status == "optimal"
    assert math.isclose(solved.objective_s, exact.objective_s, rel_tol=1e-6)


def test_warm_start_keeps_the_optimum() -> None:
    problem, _ = _problem(3, 8, True)
    segments = [list(range(0, 3)), list(range(3, 8))]
    cold = solve_configurations(problem, segments, SolverOptions(gap=0.0))
    worst = [len(m.options) - 1 for m in problem.kernels]
    for start in (cold.choice, worst):
        warm = solve_configurations(problem, segments, SolverOptions(gap=0.0), start_choice=start)
        assert math.isclose(warm.objective_s, cold.objective_s, rel_tol=1e-9)


def test_cutoff_above_the_optimum_keeps_it() -> None:
    """The path checks prune with the incumbent; a plan below it must still be found (a
    cutoff below the optimum may give no plan, or one no better than the optimum)."""
    problem, _ = _problem(4, 8, True)
    segments = [list(range(0, 4)), list(range(4, 8))]
    best = solve_configurations(problem, segments, SolverOptions(gap=0.0))
    above = solve_configurations(
        problem, segments, SolverOptions(gap=0.0), cutoff_s=best.objective_s * 1.01
    )
    below = solve_configurations(
        problem, segments, SolverOptions(gap=0.0), cutoff_s=best.objective_s * 0.99
    )
    assert math.isclose(above.objective_s, best.objective_s, rel_tol=1e-9)
    assert below.objective_s >= best.objective_s * (1 - 1e-9)


def test_knapsack_bound_without_sram_matches_milp_infeasibility() -> None:
    from dataclasses import replace

    problem, _ = _problem(1, 5, True)
    problem = replace(problem, sram_bytes=0.0)
    row = KnapsackBounds(problem).row(0)
    for j in range(1, 6):
        milp = solve_configurations(problem, [list(range(0, j))], SolverOptions(gap=0.0))
        assert milp.status == "infeasible" and row[j] == math.inf


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dag", [False, True])
def test_thinned_prices_never_below_the_exact_ones(seed: int, dag: bool) -> None:
    """The heuristic sweep keeps real states only, so each price is a configuration that
    fits, at or above the exact price (coarse slices raise prices on several members of
    this family: `test_thinning_bites` keeps one of them honest)."""
    problem, rng = _problem(seed, 10, dag)
    fixed, _ = restrict(problem, [rng.choice(m.shardings) for m in problem.kernels])
    exact = fixed_sharding_prices(fixed)
    assert exact is not None
    for slices in (4, 64, 1 << 20):
        pricer = KnapsackPricer(fixed, fixed.sram_bytes / slices)
        n = len(fixed.kernels)
        for i in range(n):
            row = np.full(n + 1, math.inf)
            assert pricer.row(i, n, row)
            assert (row >= exact[i] * (1 - 1e-12)).all(), (slices, i)
            if slices == 1 << 20:  # slices far finer than any two buffers: exact
                np.testing.assert_allclose(row, exact[i], rtol=1e-12)


def test_thinned_front_keeps_the_least_traffic_state_of_each_slice() -> None:
    """By hand: states (buffer, traffic) in slices of 10 bytes."""
    front = np.array([[1.0, 90.0], [4.0, 80.0], [9.0, 70.0], [12.0, 60.0], [25.0, 50.0]])
    kept = thinned(front, 10.0)
    np.testing.assert_array_equal(kept, [[9.0, 70.0], [12.0, 60.0], [25.0, 50.0]])


def test_narrow_starts_take_the_least_crossing_position_of_each_window() -> None:
    """A chain of 9 kernels with skip edges: the bytes crossing each position, counted by
    hand from the least output of each producer to its last consumer."""
    problem, _ = _problem(3, 9, False)
    n = len(problem.kernels)
    crossing = [0.0] * (n + 1)
    for k, menu in enumerate(problem.kernels):
        last = max((e.dst for e in problem.out_edges(k)), default=None)
        if last is None:
            continue
        least = min(o.traffic_of(menu.output_operand) for o in menu.options)
        for position in range(k + 1, last + 1):
            crossing[position] += least
    for count in (2, 3, 5, 9):
        width = -(-(n - 1) // (count - 1))
        expected = [0]
        for a in range(1, n, width):
            window = list(range(a, min(n, a + width)))
            expected.append(min(window, key=lambda p: (crossing[p], p)))
        assert narrow_starts(problem, count) == expected, count


def test_thinning_bites() -> None:
    """Slices of a quarter of the SRAM raise some price of this chain above the exact one
    (the check above is not vacuous)."""
    problem, rng = _problem(3, 10, False)
    fixed, _ = restrict(problem, [rng.choice(m.shardings) for m in problem.kernels])
    exact = fixed_sharding_prices(fixed)
    thin = KnapsackPricer(fixed, fixed.sram_bytes / 4)
    n = len(fixed.kernels)
    raised = 0
    for i in range(n):
        row = np.full(n + 1, math.inf)
        assert thin.row(i, n, row)
        raised += int((row > exact[i] * (1 + 1e-9)).sum())
    assert raised > 0


@pytest.mark.parametrize("recompute", ["RECOMPUTE_NONE", "RECOMPUTE_FULL"])
def test_sweep_prices_of_a_chained_training_step_equal_each_segments_own_knapsack(
    recompute: str,
) -> None:
    """A chained training step keeps its forward activations pending until its backward
    reads them, leaving from the middle of the pending list in reverse order: the row
    sweep's merged pending front, kept as prefix merges, must give every segment the price
    of its own knapsack (every kernel of [i, j) merged in turn, each in its status there),
    computed here without the sweep."""
    text = (
        'workload { llm_training { model { inline { name: "tiny" architecture: "llama" '
        "hidden_size: 64 num_layers: 2 num_heads: 2 num_kv_heads: 2 intermediate_size: 128 "
        "vocab_size: 256 ffn: SWIGLU norm: RMSNORM } } global_batch: 2 micro_batch: 1 "
        f"seq_len: 32 recompute: {recompute} zero_stage: 0 virtual_pipeline: 1 }} }}"
    )
    w = build_workload(text_format.Parse(text, setup_pb2.Setup()), Path("setup.txt"), 1)
    layer = next(p for p in w.phases if p.role == "layer").graph
    graph = chain_instances(layer, 2)
    rng = random.Random(5)
    for sram in (6e4, 3e5):
        fixed = _fixed_shardings(graph, sram, rng)
        n = len(fixed.kernels)
        prices = fixed_sharding_prices(fixed)
        assert prices is not None
        pricer = KnapsackPricer(fixed)
        cap = fixed.sram_bytes * (1 + 1e-9)
        checked = finite = 0
        for i in range(0, n, 3):
            for j in range(i + 1, n + 1):
                front = np.zeros((1, 2))
                comp = net = ovh = 0.0
                for k in range(i, j):
                    menu = fixed.kernels[k]
                    front = merge(front, pricer.kernel(k).choices(i, j), cap)
                    comp += menu.options[0].compute_s + menu.overhead_s
                    ovh += menu.overhead_s
                    net += menu.options[0].network_s
                    net += sum(pricer.charges[id(e)] for e in fixed.conv_in_edges(k))
                want = math.inf
                if len(front):
                    mem = float(front[:, 1].min()) / fixed.dram_bandwidth_Bps
                    want = fixed.latency(comp, mem, net, ovh)
                got = prices[i, j]
                checked += 1
                if math.isinf(want):
                    assert math.isinf(got), (i, j)
                    continue
                finite += 1
                assert math.isclose(got, want, rel_tol=1e-9), (i, j, got, want)
        assert checked > 500 and finite > 100, (checked, finite)


def test_a_sweep_priced_at_some_ends_gives_those_prices_exactly() -> None:
    """A heuristic sweep over a long graph prices segments ending where another starts
    (`ends`); its steps in between still settle kernels and cut the dead states, so the
    prices at those ends are the full sweep's, bit for bit, thinned or not."""
    rng = random.Random(3)
    fixed = _fixed_shardings(random_dag(rng, 60), 3e4, rng)
    n = len(fixed.kernels)
    ends = frozenset(rng.sample(range(1, n + 1), 15)) | {n}
    for thin in (0.0, fixed.sram_bytes / 64):
        for i in range(0, n, 7):
            every, some = np.full(n + 1, math.inf), np.full(n + 1, math.inf)
            assert KnapsackPricer(fixed, thin).row(i, n, every)
            assert KnapsackPricer(fixed, thin).row(i, n, some, ends=ends)
            for j in range(i + 1, n + 1):
                assert some[j] == (every[j] if j in ends else math.inf), (thin, i, j)


def _fixed_shardings(graph, sram_bytes: float, rng: random.Random):
    """The DATAFLOW problem of `graph` on the small system, each kernel held to a random
    sharding of its menu."""
    problem = tp2_problem(
        graph,
        small_system(sram_bytes=sram_bytes, link_Bps=1e10),
        dataflow=True,
        overlap=True,
        max_configs=8,
        tiling_points=4,
    )
    fixed, _ = restrict(problem, [rng.choice(m.shardings) for m in problem.kernels])
    return fixed


def test_heuristic_sweeps_start_fewer_rows_on_larger_graphs() -> None:
    """256 starts up to 1,500 kernels, then 256 x 1,500 / n (a round's rows x kernels held),
    never below 64: 2,976 kernels -> 129 (384,000 / 2,976 = 129.03), 6,000 -> 64."""
    assert [thin_starts(n) for n in (300, 1_500, 1_501, 2_976, 6_000, 100_000)] == [
        256,
        256,
        255,
        129,
        64,
        64,
    ]
