"""The result folder belongs to MapShard only while nothing else touched it: an edited
plan.txt is kept, an unwritable --out is refused before the solve, OS errors are one line
(exit 2), and SIGTERM cleans up like Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from cli_fixtures import signal_mid_solve

from mapshard.cli import EXIT_BAD_INPUT, main

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "llama31_8b_decode_h100"


def _run(out: Path) -> int:
    return main(["run", str(SCENARIO), "--out", str(out), "--quiet"])


def test_an_edited_plan_txt_is_not_overwritten(tmp_path: Path, capsys) -> None:
    out = tmp_path / "r"
    assert _run(out) == 0
    assert _run(out) == 0  # an untouched result is replaced
    edited = (out / "plan.txt").read_text() + "# my edit\n"
    (out / "plan.txt").write_text(edited)
    capsys.readouterr()
    assert _run(out) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "plan.txt changed since MapShard wrote it" in err
    assert (out / "plan.txt").read_text() == edited


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_out_is_refused_before_the_solve(tmp_path: Path, capsys) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert _run(locked / "r") == EXIT_BAD_INPUT
    assert "cannot write the results" in capsys.readouterr().err


def test_out_under_a_file_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "afile").write_text("x")
    assert _run(tmp_path / "afile" / "r") == EXIT_BAD_INPUT
    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stdout + stderr
    assert len(stderr.splitlines()) == 1 and "cannot write the results" in stderr


@pytest.mark.slow
def test_sigterm_mid_solve_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stderr = signal_mid_solve(SCENARIO, out, signal.SIGTERM)
    assert code == 143, stderr
    assert stderr == "interrupted: nothing was written\n"
    assert list(tmp_path.iterdir()) == [], "something was written (or a temporary folder left)"


def test_generate_and_bounds_beside_results_never_over_user_files(tmp_path: Path, capsys) -> None:
    """Their default folders are siblings of results/ (a run after them still works), and
    a user's file of the same name is never overwritten."""
    scenario = tmp_path / "sc"
    scenario.mkdir()
    (scenario / "setup.txt").write_text((SCENARIO / "setup.txt").read_text())
    assert main(["generate", str(scenario)]) == 0
    assert main(["bounds", str(scenario)]) == 0
    assert main(["run", str(scenario), "--quiet"]) == 0
    assert {p.name for p in scenario.iterdir()} == {"setup.txt", "graph", "bounds", "results"}
    (scenario / "graph" / "kernels.csv").write_text("my own table\n")
    capsys.readouterr()
    assert main(["generate", str(scenario)]) == EXIT_BAD_INPUT
    assert "kernels.csv changed since MapShard wrote it" in capsys.readouterr().err
    assert (scenario / "graph" / "kernels.csv").read_text() == "my own table\n"


@pytest.mark.slow
def test_sigterm_after_a_first_plan_writes_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stderr = signal_mid_solve(SCENARIO, out, signal.SIGTERM, after_first_plan=True)
    assert code == 143, stderr
    assert stderr.startswith("interrupted: wrote the best plan found so far")
    assert json.loads((out / "summary.json").read_text())["status"] == "interrupted"


@pytest.mark.slow
def test_sigterm_in_the_what_if_table_writes_the_solved_plan(tmp_path: Path) -> None:
    """The plan is solved before the what-if table's re-solves start: a signal there
    writes it, with its own status, without the table (found by fuzzing: "nothing was
    written" after a whole solve)."""
    out = tmp_path / "out"
    code, stderr = signal_mid_solve(SCENARIO, out, signal.SIGTERM, in_what_if=True)
    assert code == 143, stderr
    assert stderr.startswith("interrupted during the what-if table: wrote the plan to")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "optimal"
    assert (out / "plan.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left
