"""The one-configuration bound (solver.fusion.fused_bound) never exceeds the optimum.

Checked against exhaustive enumeration (solver.check.brute_force: every contiguous
segmentation into at most K configurations, every option) on random chains and DAGs under
every latency rule (overlap, no overlap, a serialised network with and without a hidden
share): the bound is a relaxation, so it must sit at or below every plan; and where the SRAM
holds every kernel at once and K = 1, the one configuration is the plan, so the bound equals
the enumerated optimum (over menus without sampled tiles, where both see the same options).
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from solver_fixtures import random_chain, random_dag, small_system, tp2_problem

from solver.check import brute_force
from solver.cost.problem import KernelMenu, Option, TileCost, TileGroup
from solver.fusion.fused_bound import fused_bound, one_configuration_problem
from solver.options import SolverOptions

EXACT = SolverOptions(gap=1e-9)
RULES = [
    {"overlap": True},
    {"overlap": False},
    {"overlap": True, "serialize_network": True},
    {"overlap": True, "serialize_network": True, "network_hidden_share": 0.4},
]


def _problem(seed: int, sram_bytes: float, max_configs: int):
    rng = random.Random(seed)
    make = random_dag if seed % 2 else random_chain
    graph = make(rng, 3 if seed % 2 == 0 else 4)
    system = small_system(sram_bytes=sram_bytes, link_Bps=rng.choice([1e9, 1e10, 1e11]))
    problem = tp2_problem(
        graph, system, dataflow=True, overlap=True, max_configs=max_configs, tiling_points=2
    )
    return replace(problem, **RULES[seed % len(RULES)])


@pytest.mark.parametrize("seed", range(12))
def test_bound_at_most_the_enumerated_optimum(seed: int) -> None:
    rng = random.Random(100 + seed)
    problem = _problem(seed, rng.choice([3e3, 8e3, 3e4]), rng.choice([1, 2, 3]))
    best, _, _ = brute_force(problem)
    bound = fused_bound(problem, EXACT).bound_s
    assert bound >= 0.0
    if math.isfinite(best):
        assert bound <= best * (1 + 1e-6), (bound, best)


@pytest.mark.parametrize("seed", range(8))
def test_bound_is_the_optimum_when_one_configuration_holds_everything(seed: int) -> None:
    problem = _problem(seed, 1e12, 1)
    problem = replace(problem, kernels=tuple(replace(m, tile_groups=()) for m in problem.kernels))
    best, _, _ = brute_force(problem)
    assert math.isclose(fused_bound(problem, EXACT).bound_s, best, rel_tol=1e-6)


def test_relaxed_option_takes_each_least_cost_over_every_tile() -> None:
    """One sharding, two sampled options and a tile group: the relaxed option's compute,
    network and per-operand traffic are each the least over all of them (by hand)."""

    def option(compute_s: float, network_s: float, a: float, w: float) -> Option:
        return Option(
            sharding="s",
            tile="t",
            compute_s=compute_s,
            network_s=network_s,
            network_bytes=0.0,
            buffer_bytes=100.0,
            out_tile_bytes=10.0,
            traffic=(("a", a), ("w", w), ("out", 5.0)),
        )

    menu = KernelMenu(
        name="k",
        options=(option(2.0, 1.0, 40.0, 9.0), option(3.0, 0.5, 30.0, 12.0)),
        shardings=("s",),
        input_operands=("a",),
        output_operand="out",
        tile_groups=(
            TileGroup("s", (TileCost("g", 50.0, 5.0, (("a", 35.0), ("w", 7.0), ("out", 4.0))),)),
        ),
    )
    problem = tp2_problem(
        random_chain(random.Random(0), 2),
        small_system(),
        dataflow=True,
        overlap=True,
        max_configs=1,
        tiling_points=2,
    )
    relaxed = one_configuration_problem(replace(problem, kernels=(menu,), edges=()))
    (only,) = relaxed.kernels[0].options
    assert (only.compute_s, only.network_s) == (2.0, 0.5)
    assert dict(only.traffic) == {"a": 30.0, "w": 7.0, "out": 4.0}
    assert (only.buffer_bytes, only.out_tile_bytes) == (0.0, 0.0)
    assert relaxed.sram_bytes == math.inf
