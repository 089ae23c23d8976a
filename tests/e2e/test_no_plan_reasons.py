"""Why a run has no plan says what binds (found by fuzzing `mapshard run`).

Qwen3-32B training with dropout on 16 H100s, all tensor-parallel: the memory no mapping
changes fits (77.1 of 80 GB), but every plan the search found keeps activations above
that floor (its dropout masks whole), so no plan fits. The run said its one parallel
choice "stopped at the time limit (60 s)", after 0.7 s: the DRAM binds, not the clock.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard.cli import EXIT_NO_PLAN, main
from solver.options import VALVE_STOP
from solver.search import footprint
from solver.search.infeasible import no_plan_text

SETUP = """
workload { llm_training { model { hf_model: "Qwen3-32B" } global_batch: 16 micro_batch: 2
  seq_len: 4096 recompute: RECOMPUTE_NONE zero_stage: 0 dropout: 0.1 } }
system { chip: "H100-SXM5-80GB" num_chip: 16
  topology { kind: SWITCH degree: 16 link_bw_GBps: 450 parallelism: "tp" } }
solver { time_limit_s: 60 }
"""


def test_plans_over_the_dram_say_the_dram_binds(tmp_path: Path, capsys) -> None:
    (tmp_path / "setup.txt").write_text(SETUP)
    assert main(["run", str(tmp_path), "--out", str(tmp_path / "out"), "--quiet"]) == 4
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "1 of 1 parallel choices: DRAM capacity binds" in err
    assert "time limit" not in err
    assert "recomputing activations" in err
    assert EXIT_NO_PLAN == 4


@pytest.mark.parametrize(
    ("stops", "said"),
    [
        ([footprint.LAYOUT_STOP], "DRAM capacity binds"),
        # the valve tripped too: then the clock may have cut a plan short
        ([footprint.LAYOUT_STOP, VALVE_STOP], "stopped at the time limit (60 s)"),
        ([VALVE_STOP], "stopped at the time limit (60 s)"),
    ],
)
def test_no_plan_text_names_the_layout_stop(stops: list[str], said: str) -> None:
    text = no_plan_text(["time_limit"], stops, True, 2, 3, 60.0)
    assert text is not None and text.startswith("2 of 3 parallel choices") and said in text
