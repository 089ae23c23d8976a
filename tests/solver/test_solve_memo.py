"""The sweep worker's memo of graph solutions (solver/search/solve_memo.py) and of menus
(solver/cost/memo.py): an equal problem, built again from scratch, gets the solution the
first solve found without a second solve; anything a limit stopped is solved again; a
memoised menu build returns the menus a plain build returns."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from solver.cost import memo
from solver.fusion.solve import solve_graph
from solver.options import SolverOptions
from solver.search.solve_memo import SOLUTIONS, solve_graph_memo
from tests.solver_fixtures import random_chain, small_system, tp2_problem


def _problem(seed: int = 3):
    """A fresh kernel-by-kernel TP-2 problem (new objects every call, equal by value)."""
    graph = random_chain(random.Random(seed), 5)
    return tp2_problem(
        graph, small_system(), dataflow=False, overlap=True, max_configs=0, tiling_points=4
    )


@pytest.fixture
def solutions_on():
    memo.set_enabled(True)
    yield
    memo.restore()


def test_equal_problem_is_solved_once(solutions_on: None) -> None:
    calls = []

    def counting(problem, options):
        calls.append(problem)
        return solve_graph(problem, options)

    options = SolverOptions()
    first = solve_graph_memo(_problem(), options, counting)
    again = _problem()
    assert again is not calls[0] and again == calls[0]
    second = solve_graph_memo(again, options, counting)
    assert len(calls) == 1 and second is first
    assert first.status == "optimal"
    # another gap, or another problem (one kernel's menu differs): solved again
    solve_graph_memo(_problem(), replace(options, gap=1e-3), counting)
    solve_graph_memo(_problem(seed=4), options, counting)
    assert len(calls) == 3


def test_a_hit_does_not_depend_on_the_time_limit(solutions_on: None) -> None:
    """A solve the work budgets ended is what a fresh one returns on any machine: a later
    run with a tiny valve gets it too (it used to be solved again when the stored solve
    had taken longer than the new limit: an answer that depended on the machine)."""
    calls = []

    def counting(problem, options):
        calls.append(problem)
        return solve_graph(problem, options)

    first = solve_graph_memo(_problem(), SolverOptions(), counting)
    second = solve_graph_memo(_problem(), SolverOptions(time_limit_s=1e-6), counting)
    assert len(calls) == 1 and second is first


def test_stopped_search_is_not_kept(solutions_on: None) -> None:
    calls = []

    def stopped(problem, options):
        calls.append(problem)
        sol = solve_graph(problem, options)
        sol.stats.stop = "time_limit"
        return replace(sol, status="time_limit")

    solve_graph_memo(_problem(), SolverOptions(), stopped)
    solve_graph_memo(_problem(), SolverOptions(), stopped)
    assert len(calls) == 2


def test_dataflow_search_is_not_kept(solutions_on: None) -> None:
    """DATAFLOW problems are not compared (large: comparing costs more than it saves)."""
    calls = []

    def counting(problem, options):
        calls.append(problem)
        return solve_graph(problem, options)

    graph = random_chain(random.Random(5), 4)
    for _ in range(2):
        problem = tp2_problem(
            graph, small_system(), dataflow=True, overlap=True, max_configs=0, tiling_points=4
        )
        solve_graph_memo(problem, SolverOptions(), counting)
    assert len(calls) == 2


def test_off_by_default_outside_sweeps() -> None:
    """`mapshard run` and the tests solve every graph (tests replace solve_graph)."""
    memo.restore()
    assert not SOLUTIONS.enabled
    assert memo.MENUS.enabled and memo.CONVERSIONS.enabled


def test_memoised_menus_equal_plain_menus() -> None:
    memo.set_enabled(False)
    try:
        plain = [_problem(seed) for seed in range(6)]
    finally:
        memo.restore()
    fast = [_problem(seed) for seed in range(6)] + [_problem(seed) for seed in range(6)]
    assert memo.MENUS.hits > 0 and memo.CONVERSIONS.hits > 0
    assert fast == plain + plain


def test_memo_drops_least_recent_by_weight() -> None:
    """size 10, entries of weight 4: a third entry (total 12 > 10) drops the least recently
    used one, and reading an entry makes it the most recent."""
    m = memo.Memo(10, weight=len)
    try:
        m.put("a", "xxxx")
        m.put("b", "yyyy")
        assert m.find("a") == "xxxx"  # now "b" is the least recent
        m.put("c", "zzzz")
        assert m.find("b") is None and m.find("a") == "xxxx" and m.find("c") == "zzzz"
        assert len(m) == 2
        assert m.get("d", str.upper, "ww") == "WW"  # weight 2: 4 + 4 + 2 = 10 fits
        assert len(m) == 3
    finally:
        memo.ALL.remove(m)
