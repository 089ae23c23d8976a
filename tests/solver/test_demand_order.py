"""solver.fusion.ideals.demand_order: the order a large DAG's search segments (issue #39)."""

from __future__ import annotations

import random
from types import SimpleNamespace

from solver.fusion.ideals import demand_order
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.fusion.solve import _in_order, _in_problem_order


def _problem(n: int, pairs: list[tuple[int, int]]) -> SimpleNamespace:
    """What demand_order reads of a MappingProblem: the kernel count and the edges."""
    edges = [SimpleNamespace(src=a, dst=b, wrap=False) for a, b in pairs]
    return SimpleNamespace(kernels=[None] * n, edges=edges)


def test_two_layers_of_a_training_step_by_hand() -> None:
    # f0 -> f1 (forward); r1 -> b1, r0 -> b0 (recomputations read checkpoints: no
    # producer); b1 -> b0 (the input gradient); b1 -> w1, b0 -> w0 (weight updates)
    f0, f1, r0, r1, b1, b0, w1, w0 = range(8)
    pairs = [(f0, f1), (r1, b1), (r0, b0), (b1, b0), (b1, w1), (b0, w0)]
    # each recomputation just before its backward, each update just after it
    assert demand_order(_problem(8, pairs)) == [f0, f1, r1, b1, w1, r0, b0, w0]


def test_a_chain_keeps_its_order() -> None:
    n = 50
    assert demand_order(_problem(n, [(k, k + 1) for k in range(n - 1)])) == list(range(n))


def test_random_dags_give_topological_permutations() -> None:
    rng = random.Random(3)
    for _ in range(200):
        n = rng.randint(1, 40)
        pairs = [(a, b) for b in range(n) for a in range(b) if rng.random() < 0.1]
        order = demand_order(_problem(n, pairs))
        assert sorted(order) == list(range(n))
        pos = {k: i for i, k in enumerate(order)}
        assert all(pos[a] < pos[b] for a, b in pairs)
        # a sink comes right after its last producer, or after sinks placed there too
        for k in range(n):
            producers = [a for a, b in pairs if b == k]
            if producers and not any(a == k for a, _ in pairs):
                last = max(pos[a] for a in producers)
                between = order[last + 1 : pos[k]]
                assert all(not any(a == j for a, _ in pairs) for j in between)


def test_a_plan_moves_to_a_kernel_order_and_back_unchanged() -> None:
    """solve._in_order (the deferred proof's seed in the order it searches) undoes
    _in_problem_order: kernel k at position p of the order, by hand on 4 kernels."""
    order = [2, 0, 3, 1]  # position p holds kernel order[p]
    sol = GraphSolution(((0, 2), (1, 3)), (5, 6, 7, 8), 1.0, 0.5, "optimal", SearchStats())
    moved = _in_order(sol, order)
    # kernel 0 is at position 1, kernel 2 at 0, kernel 1 at 3, kernel 3 at 2
    assert moved.configs == ((0, 1), (2, 3)) and moved.choice == (7, 5, 8, 6)
    assert _in_problem_order(moved, order) == sol
