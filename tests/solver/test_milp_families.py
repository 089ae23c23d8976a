"""The inner MILP is built from named constraint families (solver.milp.model): each row
carries its family's name, and switching a family off relaxes the model."""

from __future__ import annotations

import random

from solver_fixtures import random_chain, small_system, tp2_problem

from solver.milp import linear
from solver.milp.model import ConstraintSelection, build_model, solve_configurations
from solver.options import SolverOptions


def _problem(seed: int = 3):
    rng = random.Random(seed)
    graph = random_chain(rng, 4)
    system = small_system(sram_bytes=3e3, link_Bps=1e10)
    return tp2_problem(graph, system, dataflow=True, overlap=True, max_configs=2, tiling_points=3)


def test_rows_are_named_by_family() -> None:
    problem = _problem()
    segments = [(0, 1), (2, 3)]
    model, _, _ = build_model(problem, segments)
    assert len(model.row_names) == len(model.rows)
    names = set(model.row_names)
    assert {f"one_hot[kernel={k}]" for k in range(4)} <= names
    assert {"sram_capacity[config=0]", "sram_capacity[config=1]"} <= names
    assert {f"latency_epigraph[config=1,rule={r}]" for r in range(3)} <= names
    assert len(names) == len(model.row_names)  # names are unique


def test_switching_off_sram_capacity_only_lowers_the_optimum() -> None:
    options = SolverOptions(gap=0.0)
    segments = [(0, 1), (2, 3)]
    lower = 0
    for seed in range(4):
        problem = _problem(seed)
        full = solve_configurations(problem, segments, options)
        off = ConstraintSelection(sram_capacity=False)
        relaxed = solve_configurations(problem, segments, options, selection=off)
        assert relaxed.objective_s <= full.objective_s * (1 + 1e-9)
        lower += relaxed.objective_s < full.objective_s * (1 - 1e-9)
        model, _, _ = build_model(problem, segments, selection=off)
        assert not any(name.startswith("sram_capacity") for name in model.row_names)
        assert any(name.startswith("one_hot") for name in model.row_names)
    assert lower, "the SRAM binds in at least one of these problems"


def test_a_failed_highs_solve_is_an_error_not_a_time_limit():
    """HiGHS ending without a solution for another reason than a limit (here: unbounded)
    is reported as "error"; only limits read as "time_limit"."""
    m = linear.LinearModel()
    x = m.add_col(cost=-1.0, integer=True)
    y = m.add_col()
    m.add_row({x: 1.0, y: -1.0}, 0.0, linear.INF)
    r = linear.solve(m, gap=1e-4, time_limit_s=5, backend="highs", solver_name="highs", threads=1)
    assert r.status == "error" and r.objective == linear.INF
