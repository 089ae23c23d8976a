"""Budgets, the time limit and interrupts: a stopped solve keeps its best plan with a proven
gap and a warning (exit 0); no plan in time is exit 4 (never a false "infeasible"); Ctrl-C
ends with exit 130 and one line, leaving no half-written result folder.

HiGHS runs are not reproducible when cut by wall time (DESIGN.md), so the stops used here
are work budgets (the outer search's candidate budget: the same stop on every machine) and
the wall-clock valve only where nothing depends on the machine's speed: with a 1 ms limit
the planner always stops after the first choice, whose graphs the exact kernel-by-kernel
elimination solves without a clock. "No plan in time" cannot be forced on a real MILP
reproducibly, so those tests replace the graph search with a search that stops empty.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
from pathlib import Path

import pytest
from cli_fixtures import signal_mid_solve
from report_fixtures import training_plan

from mapshard import pipeline
from mapshard.cli import EXIT_NO_PLAN, main
from mapshard.report.write import write_results
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.options import SolverOptions
from solver.search import planner

ROOT = Path(__file__).resolve().parents[2]
TINY_LLM_4_CHIPS = """
workload { llm_inference {
  model { inline { name: "tiny" architecture: "llama" hidden_size: 256 num_layers: 2
    num_heads: 4 num_kv_heads: 2 intermediate_size: 512 vocab_size: 1024 ffn: SWIGLU
    norm: RMSNORM } }
  phase: REQUEST batch: 4 input_len: 64 output_len: 16 } }
system { num_chip: 4
  accelerator { core: 4 systolic_width: 16 systolic_height: 16 sram_cap: 1048576 freq: 1.0 }
  memory { dram_bw: 100 dram_cap: 1e9 }
  topology { kind: SWITCH degree: 4 link_bw_GBps: 50 } }
"""


# 8 chips on slow links: the roofline winner (TP 8) is solved first and is not the best
# plan; TP 4 x PP 2's bound is below it, so it can be neither skipped nor pruned
SLOW_LINKS_8_CHIPS = TINY_LLM_4_CHIPS.replace("num_chip: 4", "num_chip: 8").replace(
    "degree: 4 link_bw_GBps: 50", "degree: 8 link_bw_GBps: 0.2"
)


def _folder(tmp_path: Path, text: str, name: str = "tiny") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "setup.txt").write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return _folder(tmp_path, TINY_LLM_4_CHIPS)


def test_a_candidate_budget_keeps_the_best_plan_with_a_proven_gap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """solver.max_candidates: 1 stops after the roofline winner, the same on every machine;
    the candidate it skipped is "not_solved" (never "pruned": its bound is below the plan)
    and its bound is in the gap."""
    scenario = _folder(tmp_path, SLOW_LINKS_8_CHIPS + "solver { max_candidates: 1 }\n")
    plan = pipeline.plan(pipeline.load_scenario(scenario))
    st = plan.stats
    assert (st.status, st.stop_reason) == ("time_limit", "candidate_cap")
    assert st.choices_solved == 1 and st.choices_not_solved >= 1
    skipped = [c for c in plan.choices if c.status == "not_solved"]
    assert {c.reason for c in skipped} == {"work budget (solver.max_candidates)"}
    assert all(c.lower_bound_s < plan.latency_s for c in skipped)
    # proven: no skipped choice can beat the bound, and the gap is measured against it
    assert st.bound <= min(c.lower_bound_s for c in skipped)
    assert 0 < st.bound <= plan.latency_s
    assert st.gap == pytest.approx((plan.latency_s - st.bound) / plan.latency_s)
    # the unbudgeted search solves both and finds the skipped one better
    full = pipeline.plan(pipeline.load_scenario(_folder(tmp_path, SLOW_LINKS_8_CHIPS, "all")))
    assert full.stats.status == "optimal" and full.latency_s < plan.latency_s

    out = tmp_path / "out"
    code = main(["run", str(scenario), "--out", str(out), "--quiet"])
    stdout, stderr = capsys.readouterr()
    assert code == 0 and "Traceback" not in stdout + stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["status"], summary["stop_reason"]) == ("time_limit", "candidate_cap")
    assert summary["choices_not_solved"] == st.choices_not_solved
    assert summary["gap"] == pytest.approx(st.gap)
    assert stderr.splitlines() == [
        "warning: stopped on the outer search's candidate budget (solver max_candidates); "
        f"the plan is within {summary['gap']:.2%} of optimal"
    ]


def test_the_time_limit_is_a_valve_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 1 ms limit trips after the first candidate (solved by the exact elimination,
    which needs no clock): the rest are "not_solved" for the time limit, and the result
    names the clock."""
    scenario = _folder(tmp_path, SLOW_LINKS_8_CHIPS)
    plan = pipeline.plan(pipeline.load_scenario(scenario), 0.001)
    st = plan.stats
    assert (st.status, st.stop_reason) == ("time_limit", "time_limit")
    assert st.choices_solved == 1 and st.choices_not_solved >= 1
    assert {c.reason for c in plan.choices if c.status == "not_solved"} == {"time limit"}

    out = tmp_path / "out"
    code = main(["run", str(scenario), "--out", str(out), "--quiet", "--time-limit", "0.001"])
    stdout, stderr = capsys.readouterr()
    assert code == 0 and "Traceback" not in stdout + stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["status"], summary["stop_reason"]) == ("time_limit", "time_limit")
    assert stderr.splitlines() == [
        f"warning: stopped at the time limit; the plan is within {summary['gap']:.2%} of optimal"
    ]


def test_the_search_trips_its_valve_early_enough_to_build_the_plan_in_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search's valve is VALVE_SHARE (95%) of the limit: building the plan and its
    re-check come after it and fit in the rest. The messages keep the user's limit."""
    assert SolverOptions(time_limit_s=10.0).for_search().time_limit_s == pytest.approx(9.5)
    assert SolverOptions().for_search().time_limit_s == 0.0  # no limit: none
    seen: list[float] = []
    real = planner.Settler

    def settler(*args, **kwargs):
        seen.append(args[3].time_limit_s)  # (workload, system, execution, options, ...)
        return real(*args, **kwargs)

    monkeypatch.setattr(planner, "Settler", settler)
    scenario = _folder(tmp_path, SLOW_LINKS_8_CHIPS)
    plan = pipeline.plan(pipeline.load_scenario(scenario), 40.0)
    assert seen == [pytest.approx(38.0)] and plan.stats.status == "optimal"


def test_a_valve_stop_that_skips_nothing_unprunable_is_optimal(scenario: Path) -> None:
    """The 4-chip scenario's second candidate is pruned by its own bound against the first
    plan: a valve that trips after the first candidate costs nothing, and nothing says it
    did."""
    plan = pipeline.plan(pipeline.load_scenario(scenario), 0.001)
    assert (plan.stats.status, plan.stats.stop_reason, plan.stats.gap) == ("optimal", "proof", 0)
    first, *rest = plan.choices
    assert first.status == "solved" and rest and all(c.status == "pruned" for c in rest)


def test_optimal_only_within_the_gap_asked_over_the_whole_step(
    scenario: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every graph search proves its plan, but the step's bound (the terms priced around
    the graphs) sits 10% below the plan: the result is not "optimal" and says why."""
    exact = planner.proven_bound

    def loose(best, system, hidden=1.0) -> float:
        return 0.9 * exact(best, system, hidden)

    monkeypatch.setattr(planner, "proven_bound", loose)
    plan = pipeline.plan(pipeline.load_scenario(scenario))
    st = plan.stats
    assert (st.status, st.stop_reason) == ("time_limit", "step_bound")
    assert st.gap == pytest.approx(0.1)

    out = scenario.parent / "out"
    assert main(["run", str(scenario), "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warning: stopped short of proving the step around its proven graphs; "
        "the plan is within 10.00% of optimal"
    ]


def _stopped_search(status: str):
    """A graph search that stopped at its limit without any plan."""

    def search(problem, options) -> GraphSolution:
        return GraphSolution((), (), math.inf, 0.0, status, SearchStats())

    return search


@pytest.mark.parametrize("status", ["time_limit", "infeasible"])
def test_no_plan_in_time_is_exit_4(
    status: str,
    scenario: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ "infeasible" from a stopped search is not trusted when every kernel fits the SRAM
    on its own (kernel-by-kernel needs no more): it is still "no plan in time"."""
    monkeypatch.setattr(planner, "solve_graph", _stopped_search(status))
    out = tmp_path / "out"

    code = main(["run", str(scenario), "--out", str(out), "--quiet", "--time-limit", "30"])

    stdout, stderr = capsys.readouterr()
    assert code == EXIT_NO_PLAN and "Traceback" not in stdout + stderr
    assert len(stderr.splitlines()) == 1
    assert re.fullmatch(
        r"no plan: (\d+) of \1 parallel choices stopped at the time limit \(30 s\) before a "
        r"first plan; raise solver.time_limit_s \(or --time-limit\)\n",
        stderr,
    ), stderr
    assert not out.exists()


@pytest.mark.slow
def test_ctrl_c_after_a_first_plan_writes_it_marked_interrupted(tmp_path: Path) -> None:
    """SIGINT once the search holds a plan: that plan is written, marked "interrupted" with
    its gap to the proven bound, and re-checked like any other; exit 130, one line."""
    out = tmp_path / "out"
    scenario = ROOT / "scenarios" / "llama31_70b_decode_8xh100"
    code, stderr = signal_mid_solve(scenario, out, signal.SIGINT, after_first_plan=True)
    assert code == 130, stderr
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith(f"interrupted: wrote the best plan found so far to {out} ")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["stop_reason"] == "interrupted"
    assert 0 <= summary["gap"] < 1 and summary["latency_s"] >= summary["bound"]
    assert summary["choices_solved"] >= 1
    assert f"within {summary['gap']:.2%} of optimal" in stderr


@pytest.mark.slow
def test_ctrl_c_mid_solve_ends_cleanly(tmp_path: Path) -> None:
    """SIGINT before the solver has a plan: exit 130, one line, nothing written."""
    out = tmp_path / "out"
    scenario = ROOT / "scenarios" / "llama31_70b_decode_8xh100"
    code, stderr = signal_mid_solve(scenario, out, signal.SIGINT)
    assert code == 130, stderr
    assert stderr == "interrupted: nothing was written\n"
    assert list(tmp_path.iterdir()) == [], "something was written"


def test_interrupt_while_replacing_a_result_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C between moving the old result aside and moving the new one in: the old
    result is put back and no temporary folder is left."""
    monkeypatch.setattr("mapshard.report.write.report_html", lambda *a: "<html></html>\n")
    monkeypatch.setattr("mapshard.report.write.render_svg", lambda *a: None)
    plan = training_plan()
    out = tmp_path / "res"
    write_results(plan, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    renames: list[tuple[str, str]] = []
    real_rename = os.rename

    def rename(src, dst) -> None:
        renames.append((str(src), str(dst)))
        if len(renames) == 2:  # the new result moving in
            raise KeyboardInterrupt
        real_rename(src, dst)

    monkeypatch.setattr("mapshard.outdir.os.rename", rename)
    with pytest.raises(KeyboardInterrupt):
        write_results(plan, out, setup_text_with_plan="new")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["res"]
