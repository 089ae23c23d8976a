"""Dominated options (solver.milp.model.dominated_options) are fixed to 0 in the MILP:
an option is dropped only when another of the same sharding and the same stored weights
is no worse in compute, DRAM bytes, network time and SRAM, so the optimum cannot move."""

from __future__ import annotations

import random

from solver_fixtures import random_chain, small_system, tp2_problem

from solver.check import brute_force
from solver.cost.problem import KernelMenu, Option
from solver.milp.model import dominated_options, solve_configurations
from solver.options import SolverOptions


def _option(sharding: str, tile: str) -> Option:
    return Option(sharding, tile, 0.0, 0.0, 0.0, 0.0, 0.0, ())


def test_dominance_by_hand() -> None:
    # terms per option: (compute s, DRAM bytes, network s, SRAM bytes)
    menu = KernelMenu(
        "k",
        (
            _option("M", "a"),  # 0: (1, 2, 0, 5)
            _option("M", "b"),  # 1: (1, 3, 0, 5) -> 0 is no worse anywhere, better in DRAM
            _option("M", "c"),  # 2: (1, 1, 0, 9) -> less DRAM than 0, more SRAM: kept
            _option("N", "b"),  # 3: the terms of 1 but another sharding: kept
            _option("M", "d"),  # 4: equal to 0 -> the lower index (0) stays
            _option("M", "e"),  # 5: (2, 3, 1, 9) -> 0 beats it; 0 is kept, not 1 or 4
        ),
        ("M", "N"),
        ("in",),
        "out",
    )
    terms = [(1, 2, 0, 5), (1, 3, 0, 5), (1, 1, 0, 9), (1, 3, 0, 5), (1, 2, 0, 5), (2, 3, 1, 9)]
    got = dominated_options(menu, terms)
    assert set(got) == {1, 4, 5}
    assert got[1] == 0 and got[4] == 0 and got[5] == 0


def test_other_weights_are_never_dominated() -> None:
    a = Option("M", "a", 0.0, 0.0, 0.0, 0.0, 0.0, (), weights=(("w", 10.0),))
    b = Option("M", "b", 0.0, 0.0, 0.0, 0.0, 0.0, (), weights=(("w", 20.0),))
    menu = KernelMenu("k", (a, b), ("M",), ("in",), "out")
    assert dominated_options(menu, [(1, 1, 1, 1), (1, 1, 1, 1)]) == {}


def test_optimum_unchanged_against_brute_force() -> None:
    """Fixed segmentations on small TP=2 chains: the MILP (dominated options fixed to 0)
    equals the exhaustive optimum over every option of every kernel."""
    options = SolverOptions(gap=0.0)
    for seed in range(6):
        rng = random.Random(seed)
        graph = random_chain(rng, 3)
        system = small_system(sram_bytes=4e3, link_Bps=1e10)
        problem = tp2_problem(
            graph, system, dataflow=True, overlap=bool(seed % 2), max_configs=1, tiling_points=4
        )
        exact, _, _ = brute_force(problem)
        r = solve_configurations(problem, [(0, 1, 2)], options)
        assert abs(r.objective_s - exact) <= 1e-9 * max(1.0, exact), seed
