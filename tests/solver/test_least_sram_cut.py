"""The fewest configurations any plan of an order needs to fit the SRAM
(solver.fusion.first_plan.least_sram_cut): on small random chains (a chain has one order),
every segmentation under every choice of options is enumerated and checked with the
independent SRAM rule (solver.check.kernel_sram_bytes): the least number of configurations
of a fitting plan must equal the cut's, and the cut's own choice must fit. Then a search
asked for fewer configurations says "infeasible" at once, naming num_config."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from solver_fixtures import random_chain, small_system, tp2_problem

from solver.check import kernel_sram_bytes
from solver.fusion.first_plan import fewest_configs, least_sram_cut
from solver.fusion.solve import solve_graph
from solver.options import SolverOptions


def _problem(seed: int, max_configs: int = 5):
    rng = random.Random(700 + seed)
    graph = random_chain(rng, rng.randint(3, 5))
    system = small_system(sram_bytes=rng.choice([100, 200, 300, 500]), link_Bps=1e10)
    return tp2_problem(
        graph, system, dataflow=True, overlap=True, max_configs=max_configs, tiling_points=2
    )


def _cap(problem) -> float:
    return problem.sram_bytes * (1 + 1e-9) + 1e-6


def _fits(problem, configs, choice) -> bool:
    return all(
        sum(kernel_sram_bytes(problem, k, choice[k], set(c)) for k in c) <= _cap(problem)
        for c in configs
    )


def _config_fits(problem, config: tuple[int, ...]) -> bool:
    """Some choice of options of the configuration's kernels fits the SRAM: a depth-first
    search over them (each kernel's SRAM depends on its own option and the members)."""
    members = set(config)
    held = [
        sorted(
            kernel_sram_bytes(problem, k, o, members)
            for o in range(len(problem.kernels[k].options))
        )
        for k in config
    ]

    def search(i: int, used: float) -> bool:
        if used > _cap(problem):
            return False
        if i == len(held):
            return True
        return any(search(i + 1, used + h) for h in held[i])

    return search(0, 0.0)


def _segmentations(n: int):
    for cuts in itertools.product((False, True), repeat=n - 1):
        configs, start = [], 0
        for i, cut in enumerate(cuts, start=1):
            if cut:
                configs.append(tuple(range(start, i)))
                start = i
        configs.append(tuple(range(start, n)))
        yield tuple(configs)


def _fewest_by_enumeration(problem) -> float:
    best = math.inf
    for configs in _segmentations(len(problem.kernels)):
        if len(configs) < best and all(_config_fits(problem, c) for c in configs):
            best = len(configs)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_fewest_configurations_match_enumeration(seed: int) -> None:
    problem = _problem(seed)
    expected = _fewest_by_enumeration(problem)
    assert fewest_configs(problem) == expected
    cut = least_sram_cut(problem)
    if math.isfinite(expected):
        assert cut is not None and _fits(problem, *cut)
    else:
        assert cut is None


def test_too_few_configurations_are_infeasible_at_once() -> None:
    # a chain whose least cut needs at least two configurations, asked for one less
    for seed in range(40):
        problem = _problem(seed)
        need = fewest_configs(problem)
        if 2 <= need < math.inf:
            break
    else:
        raise AssertionError("no seed needs two configurations or more")
    tight = _problem(seed, max_configs=int(need) - 1)
    sol = solve_graph(tight, SolverOptions(gap=0.0))
    assert sol.status == "infeasible" and sol.bound_s == math.inf
    assert sol.stats.milps == 0  # proven without a search
    assert math.isfinite(solve_graph(_problem(seed, int(need)), SolverOptions()).objective_s)
