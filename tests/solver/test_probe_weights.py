"""Knapsack segment bounds with probe-chosen weights (solver.fusion.segment_bound): under
overlap the latency max(C, M, N) is at least every convex combination of C, M and N, so
the extra weight points may only raise a bound, never past the segment's exact price (the
MILP solved to a zero gap), and the exact search keeps the brute-force optimum."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from solver_fixtures import random_chain, small_system, tp2_problem

import solver.fusion.segment_bound as segment_bound
from solver.check import brute_force
from solver.fusion.segment_bound import KnapsackBounds, simplex_grid
from solver.fusion.segment_search import SearchStats, segment_search
from solver.milp.model import solve_configurations
from solver.options import SolverOptions


def _chain(seed: int, n: int, tiling_points: int = 4):
    rng = random.Random(seed)
    system = small_system(sram_bytes=rng.choice([4e3, 1e4]), link_Bps=1e10)
    return tp2_problem(
        random_chain(rng, n),
        system,
        dataflow=True,
        overlap=True,
        max_configs=3,
        tiling_points=tiling_points,
    )


def test_simplex_grid_points() -> None:
    # steps 2: (a, b) with a + b <= 2 -> 6 points, each summing to 1
    grid = simplex_grid(2)
    assert len(grid) == 6
    assert np.allclose(grid.sum(axis=1), 1.0)
    assert {tuple(w) for w in grid} == {
        (0.0, 0.0, 1.0),
        (0.0, 0.5, 0.5),
        (0.0, 1.0, 0.0),
        (0.5, 0.0, 0.5),
        (0.5, 0.5, 0.0),
        (1.0, 0.0, 0.0),
    }


@pytest.mark.parametrize("seed", range(4))
def test_probed_bound_between_coarse_bound_and_exact_price(seed: int) -> None:
    problem = _chain(seed, 7)
    coarse = KnapsackBounds(problem)  # 7 kernels: below PROBE_KERNELS, the fixed grid
    probed = KnapsackBounds(problem, probe_from=1)
    assert len(probed.weights) >= len(coarse.weights)
    # the fixed grid comes first, unchanged: every coarse weight is still there
    assert np.array_equal(probed.weights[: len(coarse.weights)], coarse.weights)
    n = len(problem.kernels)
    for i in range(n):
        low, high = coarse.row(i), probed.row(i)
        assert np.all((high >= low) | ~np.isfinite(low)), i
        for j in range(i + 1, n + 1):
            milp = solve_configurations(problem, [list(range(i, j))], SolverOptions(gap=0.0))
            if milp.status == "infeasible":
                continue
            assert high[j] <= milp.objective_s * (1 + 1e-9), (i, j)


# (kernels, seed): brute force under a second each (4 kernels of 20-26 options take 18 s)
@pytest.mark.parametrize(("n", "seed"), [(4, 0), (4, 2), (3, 1), (3, 3)])
def test_exact_search_with_probed_weights_keeps_the_brute_force_optimum(
    n: int, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = _chain(seed, n, tiling_points=2)
    best, _, _ = brute_force(problem)
    monkeypatch.setattr(segment_bound, "PROBE_KERNELS", 1)
    found = segment_search(problem, SolverOptions(gap=0.0), SearchStats())
    assert found.status == "optimal"
    assert math.isclose(found.objective_s, best, rel_tol=1e-6)


def test_probe_adds_weights_that_bind_on_a_long_chain() -> None:
    """A 100-kernel chain under a tight SRAM (the synthetic benchmark's regime): some
    segment's bound comes from a point off the coarse grid, and every bound is at least
    the coarse one."""
    problem = _chain(5, 100)
    probed = KnapsackBounds(problem)
    coarse_count = len(KnapsackBounds(problem, probe_from=10**9).weights)
    assert len(probed.weights) > coarse_count
    rows = [probed.row(i) for i in itertools.islice(range(0, 100, 25), 4)]
    assert all(np.isfinite(r).any() for r in rows)


def test_a_past_deadline_stops_the_probe_and_bounds_nothing_it_did_not_sweep() -> None:
    """The valve in the set-up (a 2,993-kernel graph once spent 27 minutes here against a
    900 s limit): past the deadline the probe keeps the fixed grid and a row claims no
    bound (0), never "does not fit" (inf)."""
    problem = _chain(5, 100)
    coarse = KnapsackBounds(problem, probe_from=10**9)
    late = KnapsackBounds(problem, deadline=-math.inf)
    assert late.tripped
    assert np.array_equal(late.weights, coarse.weights)
    row = late.row(10)
    assert np.all(np.isinf(row[:11])) and np.all(row[11:] == 0.0)


def test_a_row_cut_short_keeps_what_it_swept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A deadline passing in the middle of a sweep: the segments swept keep their bounds,
    the rest get 0."""
    problem = _chain(5, 100)
    full = KnapsackBounds(problem, probe_from=10**9).row(0)
    calls = []

    def after_40_checks(deadline: float) -> bool:
        calls.append(deadline)
        return len(calls) > 40

    monkeypatch.setattr(segment_bound, "past", after_40_checks)
    cut = KnapsackBounds(problem, probe_from=10**9, deadline=1.0)
    row = cut.row(0)
    assert cut.tripped
    swept = np.nonzero(row > 0)[0]
    assert 0 < len(swept) < np.isfinite(full).sum()
    assert np.array_equal(row[swept], full[swept])
    assert np.all(row[swept[-1] + 1 :] == 0.0)


def test_a_search_past_its_deadline_in_set_up_says_time_limit() -> None:
    problem = _chain(5, 100)
    stats = SearchStats()
    found = segment_search(problem, SolverOptions(), stats, deadline=-math.inf)
    assert found.status == "time_limit" and stats.stop == "time_limit"
    assert found.bound_s >= 0.0 and math.isfinite(found.bound_s)
