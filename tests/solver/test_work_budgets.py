"""Work budgets decide the answer; the wall clock is only a safety valve (issue #33 item 2).

Each budget (solver {} node_limit, max_paths, max_priced, max_candidates) stops a search
the same way on every machine: where it binds before the valve, the plan, its bound and
the stop are the same whatever the time limit. A stop names the limit that made it, and a
candidate a budget skipped is "not_solved", never "pruned"."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from google.protobuf import text_format
from solver_fixtures import random_chain, small_system, tp2_problem

from mapshard import pipeline
from mapshard.scenario import solver_options
from schema import setup_pb2, validation
from schema.errors import SetupError
from solver import options as solver_defaults
from solver.fusion.solve import solve_graph
from solver.milp.linear import LinearModel, solve
from solver.options import VALVE_STOP, SolverOptions

# 8 chips on slow links: the roofline winner (TP 8) is solved first and is not the best
# plan, and the other candidate's bound is below it (neither skippable nor prunable)
SLOW_LINKS_8_CHIPS = """
workload { llm_inference {
  model { inline { name: "tiny" architecture: "llama" hidden_size: 256 num_layers: 2
    num_heads: 4 num_kv_heads: 2 intermediate_size: 512 vocab_size: 1024 ffn: SWIGLU
    norm: RMSNORM } }
  phase: REQUEST batch: 4 input_len: 64 output_len: 16 } }
system { num_chip: 8
  accelerator { core: 4 systolic_width: 16 systolic_height: 16 sram_cap: 1048576 freq: 1.0 }
  memory { dram_bw: 100 dram_cap: 1e9 }
  topology { kind: SWITCH degree: 8 link_bw_GBps: 0.2 } }
solver { max_candidates: 1 }
"""


def _outcome(sol) -> tuple:
    return (sol.configs, sol.choice, sol.objective_s, sol.bound_s, sol.status, sol.stats.stop)


def test_a_path_budget_gives_the_same_plan_whatever_the_time_limit() -> None:
    """A 6-kernel fused chain whose first segmentation is not proven: max_paths 1 stops
    the search there, with or without a (generous) valve: one outcome."""
    graph = random_chain(random.Random(3), 6)
    problem = tp2_problem(
        graph, small_system(sram_bytes=2e4), dataflow=True, overlap=True, max_configs=6,
        tiling_points=4,
    )  # fmt: skip
    runs = [
        solve_graph(problem, SolverOptions(gap=0.0, max_paths=1, time_limit_s=limit))
        for limit in (0.0, 1e6)
    ]
    assert runs[0].status == "time_limit" and runs[0].stats.stop == "path_cap"
    assert _outcome(runs[0]) == _outcome(runs[1])
    assert runs[0].bound_s < runs[0].objective_s


def _knapsack(n: int, m: int, seed: int = 1) -> LinearModel:
    rng = random.Random(seed)
    lp = LinearModel()
    cols = [lp.add_col(cost=-rng.randint(10, 100), upper=1, integer=True) for _ in range(n)]
    for _ in range(m):
        w = {c: float(rng.randint(1, 60)) for c in cols}
        lp.add_row(w, upper=sum(w.values()) / 3)
    return lp


def test_a_node_budget_stops_a_milp_the_same_way_and_says_so() -> None:
    """HiGHS's mip_max_nodes: a knapsack that needs branching stops at 2 nodes with its
    incumbent and bound, the same with or without a time limit, and says "node_limit"."""
    lp = _knapsack(20, 10)
    runs = [solve(lp, gap=0.0, node_limit=2, time_limit_s=limit) for limit in (0.0, 1e6)]
    assert (runs[0].status, runs[0].stop) == ("time_limit", "node_limit")
    assert runs[0].bound < runs[0].objective
    same = [(r.status, r.stop, r.objective, r.bound, r.values) for r in runs]  # not solve_s
    assert same[0] == same[1]
    proven = solve(lp, gap=0.0)
    assert (proven.status, proven.stop) == ("optimal", "")
    assert runs[0].bound <= proven.objective <= runs[0].objective


def test_the_candidate_budget_binds_before_the_valve(tmp_path: Path) -> None:
    """max_candidates 1 stops after the roofline winner whatever the time limit (even
    1 ms: the budget is checked first, and the exact elimination needs no clock); each
    other candidate is pruned by its own bound or, its bound below the plan, "not_solved"
    (never "pruned"), and those bounds make the gap."""
    (tmp_path / "setup.txt").write_text(SLOW_LINKS_8_CHIPS, encoding="utf-8")
    outcomes = set()
    for limit in (0.001, None, 1e6):
        plan = pipeline.plan(pipeline.load_scenario(tmp_path), limit)
        st = plan.stats
        assert (st.status, st.stop_reason) == ("time_limit", "candidate_cap")
        first, *rest = plan.choices
        assert first.status == "solved" and rest
        # solved in bound order: the roofline winner first
        assert [c.lower_bound_s for c in plan.choices] == sorted(
            c.lower_bound_s for c in plan.choices
        )
        for c in rest:
            unsolved = c.lower_bound_s < plan.latency_s
            assert c.status == ("not_solved" if unsolved else "pruned"), c
        skipped = [c.lower_bound_s for c in rest if c.status == "not_solved"]
        assert skipped and st.bound == pytest.approx(min(skipped), rel=1e-12)
        # a work budget is the same everywhere: every candidate's memory floor is reported
        assert all(c.memory_per_chip_bytes for c in plan.choices)
        outcomes.add((plan.latency_s, st.bound, tuple(c.status for c in plan.choices)))
    assert len(outcomes) == 1


def test_past_the_valve_the_unreached_candidates_floors_are_not_computed(tmp_path: Path) -> None:
    """The valve trips after the first candidate: the others are labelled by their bounds,
    but their memory floors (report-only, thousands on a large space) are left unknown."""
    text = SLOW_LINKS_8_CHIPS.replace("solver { max_candidates: 1 }", "")
    (tmp_path / "setup.txt").write_text(text, encoding="utf-8")
    plan = pipeline.plan(pipeline.load_scenario(tmp_path), 1e-6)
    assert plan.stats.stop_reason == VALVE_STOP
    first, *rest = plan.choices
    assert first.status == "solved" and first.memory_per_chip_bytes
    assert rest and all(c.memory_per_chip_bytes is None for c in rest)
    assert {c.status for c in rest} <= {"pruned", "not_solved"}


def _setup(solver: str) -> setup_pb2.Setup:
    text = 'system { chip: "H100-SXM5-80GB" num_chip: 1 }\n'
    text += "workload { gemm { M: 64 K: 64 N: 64 } }\n"
    return text_format.Parse(text + solver, setup_pb2.Setup())


def test_budgets_are_read_with_their_defaults_and_validated_strictly() -> None:
    default = solver_options(_setup(""))
    assert (default.nodes, default.max_paths, default.max_priced, default.max_candidates) == (
        solver_defaults.NODE_LIMIT, solver_defaults.MAX_PATHS, solver_defaults.MAX_PRICED, 0
    )  # fmt: skip
    set_ = solver_options(
        _setup("solver { node_limit: 7 max_paths: 3 max_priced: 9 max_candidates: 2 }")
    )
    assert (set_.nodes, set_.max_paths, set_.max_priced, set_.max_candidates) == (7, 3, 9, 2)
    bad = _setup("solver { node_limit: -1 max_paths: 3000000000 max_candidates: -2 }")
    with pytest.raises(SetupError) as err:
        validation.validate_setup(bad, Path("setup.txt"))
    text = str(err.value)
    assert "solver.node_limit is negative" in text and "(0 = 10000 nodes per MILP)" in text
    assert "solver.max_paths is too large" in text
    assert "solver.max_candidates is negative" in text


def test_the_validation_messages_name_the_solver_defaults() -> None:
    """schema cannot import solver: its words for "0" must match the solver's numbers."""
    texts = validation.WORK_BUDGETS
    assert texts["node_limit"].startswith(f"{solver_defaults.NODE_LIMIT} ")
    assert texts["max_paths"].startswith(f"{solver_defaults.MAX_PATHS} ")
    assert texts["max_priced"].startswith(f"{solver_defaults.MAX_PRICED} ")
