"""The what-if re-solves reuse the base solve (each starts from the base plan's candidate;
finished graph solves are shared between them): their latencies must equal independent
full re-solves, each scaled setup solved fresh through the pipeline with nothing reused.

Tiny Llama training (tests/solver/test_outer_training.py's model) on one chip, global batch
2, every training knob free: micro-batch {1, 2} x recompute {none, selective, full} = 6
candidates per solve (ZeRO and interleaving have nothing to shard or split on one chip),
and each of the 8 scaled points (no network) is an outer search of its own."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from mapshard import pipeline
from mapshard.analyses.sensitivity import base_candidate, scaled_systems, sensitivity
from mapshard.scenario import Scenario
from solver.search.solve_memo import SOLUTIONS
from tests.solver.test_outer_training import setup_text


def _free_knobs(tmp_path: Path) -> Scenario:
    folder = tmp_path / "free"
    folder.mkdir()
    text = setup_text("", chips=1).replace("global_batch: 4", "global_batch: 2")
    (folder / "setup.txt").write_text(text, encoding="utf-8")
    return pipeline.load_scenario(folder)


def test_what_if_rows_equal_fresh_full_re_solves(tmp_path: Path) -> None:
    scenario = _free_knobs(tmp_path)
    plan = pipeline.plan(scenario)
    assert len(plan.training["searched"]) == 4  # every knob left to the search
    assert plan.stats.choices_total == 2 * 3
    table = sensitivity(scenario, plan, force=True)
    assert not SOLUTIONS.enabled  # switched back off after the table
    points = scaled_systems(scenario.system)
    assert [(r.resource, r.factor) for r in table.rows] == [(n, f) for n, f, _ in points]
    for row, (_, _, system) in zip(table.rows, points, strict=True):
        fresh = pipeline.plan(dataclasses.replace(scenario, system=system), table.time_limit_s)
        assert row.status == fresh.stats.status == "optimal", row
        assert row.latency_s == fresh.latency_s, row  # exact: the same plan's latency


def test_a_named_candidate_is_settled_first_and_the_optimum_stays(tmp_path: Path) -> None:
    """Start from the slowest solved candidate (the last an ordered search would pick):
    it is settled first, and the search still ends on the same best latency."""
    scenario = _free_knobs(tmp_path)
    plan = pipeline.plan(scenario)
    assert base_candidate(plan) is not None
    solved = [r for r in plan.choices if r.status == "solved"]
    worst = max(solved, key=lambda r: r.latency_s or 0.0)
    assert worst.latency_s is not None and worst.latency_s > plan.latency_s
    assert (plan.choices[0].placement, plan.choices[0].knobs) != (worst.placement, worst.knobs)
    again = pipeline.plan(scenario, start_with=(worst.placement, worst.knobs))
    first = again.choices[0]
    assert (first.placement, first.knobs) == (worst.placement, worst.knobs)
    assert first.latency_s == worst.latency_s
    assert again.latency_s == plan.latency_s
