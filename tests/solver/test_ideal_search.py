"""The fusion search covers every assignment with Config[u] <= Config[v] on every edge (the
lattice of ideals, DESIGN.md 7), so its optimum does not depend on how the kernels are
numbered; pinned legal assignments are solved, illegal ones are setup errors."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from solver_fixtures import elementwise, gemm, residual_add, small_system, tp2_problem

from generator.graph import Edge, KernelGraph
from schema.errors import SetupError
from solver.check import brute_force
from solver.fusion.ideals import enumerate_ideals, is_chain_order
from solver.fusion.solve import solve_graph
from solver.options import SolverOptions

OPTIONS = SolverOptions(gap=0.0, time_limit_s=0.0)


def diamond(numbering: tuple[str, ...], h: int = 64) -> KernelGraph:
    """A -> B, A -> C, B -> D, C -> D; `numbering` is the declaration order."""
    kernels = {
        "A": gemm("A", 32, h, h),
        "B": gemm("B", 32, h, h, a_dims=("t", "A_o")),
        "C": gemm("C", 32, h, h, a_dims=("t", "A_o")),
        "D": residual_add("D", 32, h, ("t", "B_o")),
    }
    nbytes = 32 * h * 2
    edges = (
        Edge("A", "B", "a", tensor_bytes=nbytes),
        Edge("A", "C", "a", tensor_bytes=nbytes),
        Edge("B", "D", "x", tensor_bytes=nbytes),
        Edge("C", "D", "r", tensor_bytes=nbytes),
    )
    return KernelGraph("diamond", tuple(kernels[n] for n in numbering), edges)


def branchy_dag(rng: random.Random, n_kernels: int) -> KernelGraph:
    """Random DAG with parallel branches: every GEMM reads any earlier kernel's output
    (not just the previous one), residual adds join two earlier kernels of one shape."""
    tokens, width = 16, rng.choice([16, 32])
    kernels, edges = [], []
    for i in range(n_kernels):
        name = f"k{i}"
        if i >= 2 and rng.random() < 0.35:
            a, b = rng.sample(range(i), 2)
            k = residual_add(name, tokens, width, ("t", "h"))
            for src, operand in ((a, "x"), (b, "r")):
                edges.append(Edge(f"k{src}", name, operand, tensor_bytes=tokens * width * 2))
        elif i >= 1 and rng.random() < 0.3:
            src = rng.randrange(i)
            k = elementwise(name, tokens, width, dims=("t", "h"))
            edges.append(Edge(f"k{src}", name, "x", tensor_bytes=tokens * width * 2))
        else:
            k = gemm(name, tokens, width, width)
            if i >= 1:
                src = rng.randrange(i)
                edges.append(Edge(f"k{src}", name, "a", tensor_bytes=tokens * width * 2))
        kernels.append(k)
    return KernelGraph("branchy", tuple(kernels), tuple(edges))


def renumbered(graph: KernelGraph, rng: random.Random) -> KernelGraph:
    """The same graph with its kernels declared in another order (and renamed)."""
    perm = list(range(len(graph.kernels)))
    rng.shuffle(perm)
    names = {k.name: f"r{j}" for j, k in enumerate(graph.kernels)}
    kernels = tuple(replace(graph.kernels[p], name=names[graph.kernels[p].name]) for p in perm)
    edges = tuple(replace(e, src=names[e.src], dst=names[e.dst]) for e in graph.edges)
    return KernelGraph(graph.name, kernels, edges)


def problem_of(graph: KernelGraph, max_configs: int, sram: float, points: int = 3):
    system = small_system(num_chips=2, sram_bytes=sram)
    return tp2_problem(
        graph, system, dataflow=True, overlap=True, max_configs=max_configs, tiling_points=points
    )


def ideal_brute_force(problem) -> float:
    """Every assignment with Config[u] <= Config[v] (configurations numbered without
    gaps) x every option of every kernel (solver.check's enumeration, which never uses the
    search's segments or ideals)."""
    return brute_force(problem)[0]


def _diamond_two(numbering: tuple[str, ...], sram: float):
    """The diamond of issue #14: C -> D carries the wide tensor, B -> D the narrow one."""
    h, big = 64, 128
    kernels = {
        "A": gemm("A", 32, h, h),
        "B": gemm("B", 32, h, h, a_dims=("t", "A_o")),
        "C": gemm("C", 32, h, big, a_dims=("t", "A_o")),
        "D": gemm("D", 32, big, h, a_dims=("t", "C_o"), w=False),
    }
    edges = (
        Edge("A", "B", "a", tensor_bytes=32 * h * 2),
        Edge("A", "C", "a", tensor_bytes=32 * h * 2),
        Edge("B", "D", "w", tensor_bytes=32 * h * 2),
        Edge("C", "D", "a", tensor_bytes=32 * big * 2),
    )
    return problem_of(KernelGraph("d", tuple(kernels[n] for n in numbering), edges), 2, sram, 2)


@pytest.mark.parametrize("sram", [1e4, 8e4])
def test_diamond_numberings_agree_with_brute_force(sram):
    """A -> B, A -> C, B -> D, C -> D with num_config 2: both numberings find the optimum
    over every legal assignment ({A, C}, {B, D} included)."""
    values = []
    for numbering in (("A", "B", "C", "D"), ("A", "C", "B", "D")):
        problem = _diamond_two(numbering, sram)
        assert not is_chain_order(problem)
        sol = solve_graph(problem, OPTIONS)
        assert sol.status == "optimal" and not sol.stats.space
        values.append(sol.objective_s)
    best = ideal_brute_force(_diamond_two(("A", "B", "C", "D"), sram))
    assert values[0] == pytest.approx(best, rel=1e-9)
    assert values[1] == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_optimum_does_not_depend_on_numbering(seed):
    """Random DAGs with parallel branches, renumbered: the same optimal objective, equal
    to the brute force over every legal assignment on the small ones."""
    rng = random.Random(seed)
    n = 4 if seed < 3 else 6
    graph = branchy_dag(rng, n)
    k_max = rng.choice([2, 3])
    sram = rng.choice([2e4, 5e4])
    points = 2
    base = solve_graph(problem_of(graph, k_max, sram, points), OPTIONS)
    assert base.status == "optimal"
    for _ in range(2):
        other = solve_graph(problem_of(renumbered(graph, rng), k_max, sram, points), OPTIONS)
        assert other.status == "optimal"
        assert other.objective_s == pytest.approx(base.objective_s, rel=1e-9)
    if n <= 4:
        assert base.objective_s == pytest.approx(
            ideal_brute_force(problem_of(graph, k_max, sram, points)), rel=1e-9
        )


def _pinned(problem, pins: dict[str, int]):
    names = [m.name for m in problem.kernels]
    return replace(problem, pinned_configs=tuple(pins.get(name, -1) for name in names))


def test_pinned_legal_assignment_off_the_order_is_solved():
    """{A, C}, {B, D} is no segmentation of the order A, B, C, D, yet legal."""
    problem = _pinned(_diamond_two(("A", "B", "C", "D"), 2e4), {"A": 0, "C": 0, "B": 1, "D": 1})
    sol = solve_graph(problem, OPTIONS)
    assert sol.status == "optimal"
    names = [m.name for m in problem.kernels]
    assert [sorted(names[k] for k in c) for c in sol.configs] == [["A", "C"], ["B", "D"]]
    assert sol.objective_s == pytest.approx(ideal_brute_force(problem), rel=1e-9)


def test_pinned_backward_edge_is_a_setup_error():
    problem = _pinned(_diamond_two(("A", "B", "C", "D"), 2e4), {"B": 1, "D": 0})
    with pytest.raises(SetupError, match="B.*D"):
        solve_graph(problem, OPTIONS)


def test_ideals_of_a_chain_are_its_prefixes():
    problem = problem_of(diamond(("A", "B", "C", "D")), 2, 2e4)
    assert len(enumerate_ideals(problem, 100)) == 6  # {}, A, AB, AC, ABC, ABCD
    assert enumerate_ideals(problem, 5) is None
