"""The exact kernel-by-kernel elimination (solver/milp/exact_kbk.py) against HiGHS and
against exhaustive enumeration (solver.check.brute_force: every option of every kernel in
every topological order) on small random graphs with sharding choices, layout
conversions and produced tensors read by several consumers; and the problems it must hand
back to the MILP."""

from __future__ import annotations

import itertools
import math
import random
import time
from dataclasses import replace

import pytest
from solver_fixtures import (
    elementwise,
    gemm,
    random_chain,
    random_dag,
    residual_add,
    small_system,
    tp2_problem,
)

from generator.graph import Edge, KernelGraph, KernelKind
from solver.check import brute_force, mapping_cost
from solver.cost.problem import KernelMenu, MappingProblem, Option
from solver.fusion import alternate
from solver.milp import exact_kbk
from solver.milp.exact_kbk import solve_kbk
from solver.milp.model import solve_configurations
from solver.options import SolverOptions
from solver.search.exact_first import EXACT_SOLVER, solve_graph_exact_first, solved_by

EXACT = SolverOptions(gap=0.0)


def _fan_graph(rng: random.Random, consumers: int) -> KernelGraph:
    """A norm whose output [t, h] is read whole by `consumers` projections (unordered by
    the graph) and by a residual add after the first projection's own norm (an ordered
    consumer, with two projections only: brute force stays fast): one conversion group
    whose payer the run order decides."""
    t, h = rng.choice([16, 32]), rng.choice([16, 32])
    ln = elementwise("ln", t, h, dims=("t", "h"))
    projs = [gemm(f"p{i}", t, h, rng.choice([16, 32]), a_dims=("t", "h")) for i in range(consumers)]
    kernels = [ln, *projs]
    edges = [Edge("ln", p.name, "a", tensor_bytes=t * h * 2) for p in projs]
    if consumers == 2 and rng.random() < 0.8:  # p0 -> width h -> residual add with ln's output
        back = gemm("back", t, projs[0].dims[-1][1], h, a_dims=("t", "p0_o"))
        add = residual_add("add", t, h, ("t", "back_o"))
        kernels += [back, add]
        edges += [
            Edge("p0", "back", "a", tensor_bytes=projs[0].operand_bytes(projs[0].outputs[0])),
            Edge("back", "add", "x", tensor_bytes=t * h * 2),
            Edge("ln", "add", "r", tensor_bytes=t * h * 2),
        ]
    return KernelGraph("fan", tuple(kernels), tuple(edges))


def _random_problem(seed: int):
    rng = random.Random(seed)
    graph = _fan_graph(rng, rng.choice([2, 3])) if seed % 3 else random_chain(rng, 4)
    system = small_system(
        num_chips=2, sram_bytes=rng.choice([3e3, 8e3, 3e4]), link_Bps=rng.choice([1e8, 1e10])
    )
    overlap = rng.random() < 0.7
    return tp2_problem(
        graph, system, dataflow=False, overlap=overlap, max_configs=0, tiling_points=2
    )


def _exact_optimum(problem):
    """The elimination's plan and the enumeration's optimum, asserting that they and HiGHS
    (order free, exact gap) agree."""
    found = solve_kbk(problem)
    assert found is not None
    best, _, _ = brute_force(problem)
    n = len(problem.kernels)
    milp = solve_configurations(problem, [(k,) for k in range(n)], EXACT, order_free=True)
    assert milp.status == "optimal"
    assert math.isclose(found.objective_s, best, rel_tol=1e-9)
    assert math.isclose(milp.objective_s, best, rel_tol=1e-6)
    return found, best


@pytest.mark.parametrize("seed", range(10))
def test_exact_equals_highs_and_brute_force(seed: int) -> None:
    problem = _random_problem(seed)
    found, _ = _exact_optimum(problem)
    n = len(problem.kernels)
    # the plan it returns prices to its objective in the independent evaluator, and its
    # run order is a topological order of the graph
    recheck, costs = mapping_cost(problem, [(k,) for k in found.order], found.choice)
    assert recheck == found.objective_s and all(c.feasible for c in costs)
    pos = {k: i for i, k in enumerate(found.order)}
    assert sorted(found.order) == list(range(n))
    assert all(pos[e.src] < pos[e.dst] for k in range(n) for e in problem.in_edges(k))


def _reduction_split_chain(seed: int):
    """A random chain whose GEMMs must split their reduction dim over the 2 chips (each
    then all-reduces its output): every plan pays network time."""
    rng = random.Random(seed)
    graph = random_chain(rng, 4)
    kernels = []
    for k in graph.kernels:
        if k.kind == KernelKind.GEMM:
            out = {d for o in k.outputs for d in o.dims}
            reduction = tuple(d for d, _ in k.dims if d not in out)
            k = replace(k, must_split=True, shardable_dims=reduction)
        kernels.append(k)
    system = small_system(num_chips=2, sram_bytes=rng.choice([3e3, 8e3, 3e4]), link_Bps=1e10)
    chain = KernelGraph(graph.name, tuple(kernels), graph.edges)
    problem = tp2_problem(
        chain, system, dataflow=False, overlap=True, max_configs=0, tiling_points=2
    )
    return replace(problem, serialize_network=True)


@pytest.mark.parametrize("seed", range(6))
def test_a_partly_hidden_network_is_solved_exactly(seed: int) -> None:
    """GPU kernel by kernel with the framework's TP comm overlap: latency = overhead +
    max(X, N) + 0.7 min(X, N) (hidden share 0.3). The elimination, HiGHS (its epigraph rows)
    and the enumeration agree, and the optimum lies strictly between the fully serial and
    the fully hidden ones (each exact under its own rule)."""
    base = _reduction_split_chain(seed)
    _, best = _exact_optimum(replace(base, network_hidden_share=0.3))
    serial, _, _ = brute_force(base)
    hidden_all, _, _ = brute_force(replace(base, network_hidden_share=1.0))
    assert hidden_all < best < serial


def test_fan_problems_have_a_group_whose_payer_the_order_decides() -> None:
    """The random instances above exercise the shared-conversion rule: several seeds have
    a group with two or more unordered consumers and the network overlapping."""
    shared = [
        s
        for s in range(10)
        if (p := _random_problem(s)).network_overlapped
        and sum(e.group >= 0 and p.kernels[e.dst].name.startswith("p") for e in p.edges) >= 2
    ]
    assert len(shared) >= 3


def test_one_sharding_per_kernel_is_solved_alone() -> None:
    """One chip: every kernel has one sharding, the optimum is each kernel's fastest tile
    (no conversion between kernels): the sum of per-kernel minima, by hand."""
    rng = random.Random(7)
    system = small_system(num_chips=2, sram_bytes=3e4)
    problem = tp2_problem(
        random_chain(rng, 5), system, dataflow=False, overlap=True, max_configs=0, tiling_points=3
    )
    one = replace(
        problem,
        kernels=tuple(
            replace(
                m,
                options=tuple(o for o in m.options if o.sharding == m.shardings[0]),
                shardings=m.shardings[:1],
            )  # fmt: skip
            for m in problem.kernels
        ),
        edges=tuple(replace(e, conv=((e.conv[0][0],),)) for e in problem.edges),
    )
    found = solve_kbk(one)
    assert found is not None and found.order == tuple(range(len(one.kernels)))
    per_kernel = []
    for k in range(len(one.kernels)):
        costs = [mapping_cost(one, [(k,)], [o] * len(one.kernels))[1][0] for o in range(
            len(one.kernels[k].options))]  # fmt: skip
        per_kernel.append(min(c.latency_s for c in costs if c.feasible))
    assert math.isclose(found.objective_s, sum(per_kernel), rel_tol=1e-12)


def _with_weights(problem):
    """Every kernel stores a weight: 1000 parameters per chip replicated, 500 split."""
    kernels = tuple(
        replace(
            m,
            options=tuple(
                replace(o, weights=((f"w{k}", 1000.0 if o.sharding == "none" else 500.0),))
                for o in m.options
            ),
        )  # fmt: skip
        for k, m in enumerate(problem.kernels)
    )
    return replace(problem, kernels=kernels, resident_bytes_per_param=2.0)


def test_binding_dram_row_is_handed_to_the_milp() -> None:
    """The unconstrained optimum stores more weights than a budget just below its own:
    refused (None), and the MILP finds a slower plan that fits. With the budget at the
    optimum's own weights it is accepted and equals HiGHS."""
    problem = _with_weights(_random_problem(4))
    free = solve_kbk(problem)
    assert free is not None
    stored: dict[str, float] = {}
    for k, o in enumerate(free.choice):
        for w, elems in problem.kernels[k].options[o].weights:
            stored[w] = max(stored.get(w, 0.0), elems * 2.0)
    need = sum(stored.values())
    singles = [(k,) for k in range(len(problem.kernels))]
    fits = replace(problem, resident_budget_bytes=need)
    found = solve_kbk(fits)
    milp = solve_configurations(fits, singles, EXACT, order_free=True)
    assert found is not None and math.isclose(found.objective_s, milp.objective_s, rel_tol=1e-6)
    tight = replace(problem, resident_budget_bytes=need * 0.9)
    assert solve_kbk(tight) is None
    milp = solve_configurations(tight, singles, EXACT, order_free=True)
    if milp.status == "optimal":  # a plan with fewer stored weights exists: no faster
        assert milp.objective_s >= free.objective_s * (1 - 1e-9)
    sol = solve_graph_exact_first(tight, EXACT)
    assert solved_by(sol, "highs") == "highs"


def test_wide_fan_equals_highs_and_a_table_past_the_limit_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Five unordered consumers of one tensor (120 run orders, the payer of each layout
    picked by the search): equal to HiGHS, with and without overlap. With TABLE_LIMIT
    below the group's table (5 consumers x 5 shardings x 2 payer bits: 5^5 x 2^5 = 100,000
    entries) it is refused and the graph solve goes to HiGHS."""
    system = small_system(num_chips=2, sram_bytes=3e4, link_Bps=1e8)
    problem = tp2_problem(
        _fan_graph(random.Random(1), 5),
        system,
        dataflow=False,
        overlap=True,
        max_configs=0,
        tiling_points=1,
    )
    n = len(problem.kernels)
    assert problem.network_overlapped and [len(m.shardings) for m in problem.kernels[1:]] == [5] * 5
    for p in (problem, replace(problem, overlap=False)):
        found = solve_kbk(p)
        milp = solve_configurations(p, [(k,) for k in range(n)], EXACT, order_free=True)
        assert found is not None
        assert math.isclose(found.objective_s, milp.objective_s, rel_tol=1e-6)
        sol = solve_graph_exact_first(p, EXACT)
        assert (
            solved_by(sol, "highs") == EXACT_SOLVER and sol.status == "optimal" and sol.gap == 0.0
        )
    monkeypatch.setattr(exact_kbk, "TABLE_LIMIT", 5**5 * 2**5 - 1)
    assert solve_kbk(problem) is None
    assert solved_by(solve_graph_exact_first(problem, EXACT), "highs") == "highs"


def test_equal_latency_plans_prefer_fewer_stored_weights() -> None:
    """Two kernels, no edges. Kernel a: a replicated and a split option of equal latency
    (1 us compute each): the split one, storing 500 < 1000 weight elements, is taken
    though listed second. Kernel b: the split option stores less but takes 2 us > 1 us:
    latency first. Objective 1 us + 1 us = 2 us."""

    def option(sharding: str, compute_s: float, weights: float) -> Option:
        return Option(sharding, "t", compute_s, 0.0, 0.0, 0.0, 0.0, (), weights=(("w", weights),))

    def menu(name: str, split_s: float) -> KernelMenu:
        opts = (option("none", 1e-6, 1000.0), option("x", split_s, 500.0))
        return KernelMenu(name, opts, ("none", "x"), ("in",), "out")

    problem = MappingProblem(
        kernels=(menu("a", 1e-6), menu("b", 2e-6)),
        edges=(),
        sram_bytes=1e6,
        dram_bandwidth_Bps=1e12,
        overlap=True,
        dataflow=False,
        max_configs=0,
    )
    found = solve_kbk(problem)
    assert found is not None and found.choice == (1, 0)
    assert math.isclose(found.objective_s, 2e-6, rel_tol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_a_dataflow_problems_one_kernel_per_configuration_seed_is_exact(seed: int) -> None:
    """The fusion search's seed (one configuration per kernel, solver.fusion.alternate) on
    DATAFLOW problems of random DAGs: the elimination's plan is a plan of that problem (the
    checker prices its configurations to its objective) and equals the optimum of HiGHS at
    a zero gap with the run order free, and, where the options are few enough to list,
    the least checked cost over every option per kernel in the index order's run."""
    rng = random.Random(100 + seed)
    graph = random_dag(rng, rng.randint(3, 4))
    system = small_system(num_chips=2, sram_bytes=rng.choice([3e3, 3e4]), link_Bps=1e10)
    problem = tp2_problem(
        graph, system, dataflow=True, overlap=True, max_configs=2, tiling_points=2
    )
    exact = alternate._exact_singles(problem, math.inf)
    assert exact is not None
    configs, result = exact
    n = len(problem.kernels)
    assert sorted(k for (k,) in configs) == list(range(n))
    recheck, costs = mapping_cost(problem, configs, result.choice)
    assert recheck == result.objective_s and all(c.feasible for c in costs)
    singles = [(k,) for k in range(n)]
    milp = solve_configurations(problem, singles, EXACT, order_free=True)
    assert milp.status == "optimal"
    assert math.isclose(result.objective_s, milp.objective_s, rel_tol=1e-6)
    choices = list(itertools.product(*(range(len(m.options)) for m in problem.kernels)))
    if len(choices) <= 30_000:
        best = math.inf
        for choice in choices:
            cost, costs = mapping_cost(problem, singles, choice)
            if all(c.feasible for c in costs):
                best = min(best, cost)
        assert result.objective_s <= best * (1 + 1e-9)


def test_an_elimination_past_its_deadline_says_none_and_keeps_nothing() -> None:
    """The valve: a deadline already passed gives None (the MILP or the greedy plan then
    decides) and leaves no entry behind, so the same problem without one is solved."""
    problem = _random_problem(1)
    exact_kbk.UNBUDGETED.clear()
    assert solve_kbk(problem, deadline=time.perf_counter() - 1.0) is None
    assert len(exact_kbk.UNBUDGETED) == 0
    assert solve_kbk(problem) is not None
