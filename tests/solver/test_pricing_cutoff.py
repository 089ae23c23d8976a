"""Segment pricing under a cutoff (solver.fusion.segment_search): with an incumbent, a
pricing MILP stops once it proves the price that rules out every path through its
segment. The optimum must not move: on small TP=2 chains (every assignment with
Config[u] <= Config[v] is a segmentation of the chain) the search seeded with an
incumbent 5% (or 1e-6) worse than the optimum still returns the exhaustive optimum, proven."""

from __future__ import annotations

import functools
import random

import pytest
from solver_fixtures import random_chain, small_system, tp2_problem

from solver.check import brute_force
from solver.fusion.segment_search import GraphSolution, SearchStats, segment_search
from solver.options import SolverOptions


def _problem(seed: int):
    rng = random.Random(100 + seed)
    graph = random_chain(rng, 4)
    system = small_system(sram_bytes=rng.choice([2e3, 4e3, 8e3]), link_Bps=1e10)
    return tp2_problem(
        graph, system, dataflow=True, overlap=bool(seed % 2), max_configs=2, tiling_points=3
    )


@functools.cache
def _exhaustive(seed: int):
    """brute_force of the seed's problem, once per module (both `worse` of a seed share it:
    the problem is rebuilt identically from the seed, the enumeration takes seconds)."""
    return brute_force(_problem(seed))


@pytest.mark.parametrize("worse", [1.05, 1 + 1e-6])
@pytest.mark.parametrize("seed", range(5))
def test_seeded_search_finds_the_brute_force_optimum(seed: int, worse: float) -> None:
    problem = _problem(seed)
    exact, segs, choice = _exhaustive(seed)
    assert exact < float("inf")
    # an incumbent just above the optimum: the cutoffs derived from it are finite, and only
    # the true optimum beats it
    seed_plan = GraphSolution(
        tuple(tuple(s) for s in segs),
        tuple(choice),
        exact * worse,
        0.0,
        "time_limit",
        SearchStats(),
    )
    sol = segment_search(problem, SolverOptions(gap=0.0), SearchStats(), seed_plan)
    assert sol.status == "optimal"
    assert sol.objective_s == pytest.approx(exact, rel=1e-9)
    assert sol.bound_s == pytest.approx(exact, rel=1e-6)
