"""The MILP optimum equals exhaustive enumeration of all plans on small random graphs.

Brute force (solver.check.brute_force) walks every contiguous segmentation into at most K
configurations and every (sharding, tiling) option of every kernel, pricing each plan with
the plain-Python evaluator; the MILP and fusion search must reach the same optimum.
"""

from __future__ import annotations

import math
import random

import pytest
from solver_fixtures import random_chain, small_system, tp2_problem

from solver.check import brute_force, mapping_cost
from solver.fusion.solve import solve_graph
from solver.milp.model import solve_configurations
from solver.options import SolverOptions

CASES = [(seed, dataflow) for seed in range(16) for dataflow in (False, True)]


@pytest.mark.parametrize(
    "seed,dataflow", CASES, ids=[f"seed{s}-{'df' if d else 'kbk'}" for s, d in CASES]
)
def test_milp_equals_brute_force(seed: int, dataflow: bool) -> None:
    rng = random.Random(seed)
    # fused menus are large: 3-kernel DATAFLOW chains here (4-kernel ones took 14 s each);
    # tests/independent/ covers 2-5-kernel DATAFLOW chains and DAGs with its own evaluator
    graph = random_chain(rng, rng.randint(3, 3 if dataflow else 5))
    system = small_system(
        sram_bytes=rng.choice([3e3, 8e3, 3e4]), link_Bps=rng.choice([1e9, 1e10, 1e11])
    )
    problem = tp2_problem(
        graph,
        system,
        dataflow=dataflow,
        overlap=rng.random() < 0.5,
        max_configs=rng.choice([2, 3]),
        tiling_points=2,
    )
    solution = solve_graph(problem, SolverOptions(gap=0.0))
    best, _, _ = brute_force(problem)
    assert solution.status == "optimal"
    # the optimum over the menus; a DATAFLOW search whose sampled menus' bound added tiles
    # may beat it (tests/solver/test_sampled_menus_bound.py checks every tile)
    assert solution.objective_s <= best * (1 + 1e-6)
    if solution.problem is None:
        assert math.isclose(solution.objective_s, best, rel_tol=1e-6)
    # the plan re-check outside Pyomo reproduces the objective (on the menus it chose from:
    # sampled ones with the tiles their bound's search added)
    searched = solution.problem or problem
    recheck, costs = mapping_cost(searched, solution.configs, solution.choice)
    assert math.isclose(recheck, solution.objective_s, rel_tol=1e-6)
    assert all(c.feasible for c in costs)


@pytest.mark.parametrize("seed", range(4))
def test_pyomo_backend_reaches_the_brute_force_optimum(seed: int) -> None:
    """The same arrays solved through Pyomo (any solver `solver.name` names) give the
    enumerated optimum, like the direct HiGHS path."""
    rng = random.Random(100 + seed)
    graph = random_chain(rng, 4)
    system = small_system(sram_bytes=3e4, link_Bps=1e10)
    problem = tp2_problem(
        graph,
        system,
        dataflow=False,
        overlap=True,
        max_configs=4,
        tiling_points=2,
    )
    best, _, _ = brute_force(problem)
    singles = [(k,) for k in range(len(problem.kernels))]
    via_pyomo = solve_configurations(problem, singles, SolverOptions(gap=0.0), backend="pyomo")
    direct = solve_configurations(problem, singles, SolverOptions(gap=0.0), backend="highs")
    assert via_pyomo.status == direct.status == "optimal"
    assert math.isclose(via_pyomo.objective_s, best, rel_tol=1e-6)
    assert math.isclose(direct.objective_s, best, rel_tol=1e-6)
