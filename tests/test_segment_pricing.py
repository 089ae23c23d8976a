"""Segment prices under fixed shardings: the exact knapsack over the (buffer, traffic)
Pareto front equals the MILP on every segment of random graphs, and the Pareto filter keeps
exactly the undominated points."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from solver_fixtures import random_chain, small_system, tp2_problem

from solver.alternate import restrict
from solver.fusion import _pareto, _price_fixed_sharding
from solver.milp import solve_configurations
from solver.options import SolverOptions


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
        price = _price_fixed_sharding(fixed, (i, j))
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
    kept = {tuple(p) for p in _pareto(points)}
    unique = {tuple(p) for p in points}
    expected = {
        p for p in unique if not any(q != p and q[0] <= p[0] and q[1] <= p[1] for q in unique)
    }
    assert kept == expected
