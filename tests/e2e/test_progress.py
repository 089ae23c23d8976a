"""The planner reports its progress after each parallel choice: the best plan so far never
gets worse, the bound never exceeds it, and the last report is the returned plan."""

from __future__ import annotations

import math
from pathlib import Path

from mapshard import pipeline
from mapshard.progress import Progress

ROOT = Path(__file__).resolve().parents[2]


def test_progress_reports_incumbent_and_bound() -> None:
    scenario = pipeline.load_scenario(ROOT / "scenarios/llama31_70b_decode_8xh100")
    seen = []
    plan = pipeline.plan(scenario, 30.0, seen.append)
    assert seen, "no progress reported"
    assert [p.choices_done for p in seen] == sorted(p.choices_done for p in seen)
    assert all(p.choices_total == seen[0].choices_total for p in seen)
    best = [p.best_latency_s for p in seen]
    assert all(b2 <= b1 for b1, b2 in zip(best, best[1:]))
    assert all(p.bound_s <= p.best_latency_s * (1 + 1e-9) for p in seen)
    assert math.isclose(seen[-1].best_latency_s, plan.stats.objective, rel_tol=1e-12)
    assert "choice" in seen[-1].describe() and "gap" in seen[-1].describe()


def test_the_first_report_comes_before_any_choice_is_solved() -> None:
    """From the first second the line says which choice runs and its roofline bound."""
    scenario = pipeline.load_scenario(ROOT / "scenarios/llama31_70b_decode_8xh100")
    seen = []
    pipeline.plan(scenario, 30.0, seen.append)
    first = seen[0]
    assert first.choices_done == 0 and not math.isfinite(first.best_latency_s)
    assert "no plan yet, roofline bound" in first.describe()
    assert 0 < first.bound_s <= seen[-1].best_latency_s


def test_the_progress_line_names_the_stage(monkeypatch) -> None:
    import io
    import time

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    monkeypatch.setattr("sys.stderr", err)
    with Progress(delay_s=0.0) as progress:
        progress.update(pipeline.Stage("generating the kernel graph"))
        time.sleep(0.7)
    assert "generating the kernel graph" in err.getvalue()
