"""The README's Python API example runs as written, and the API returns what the files
hold (the same numbers as `mapshard run`'s summary.json and CSVs)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mapshard
from schema import setup_pb2
from schema.errors import SetupError

ROOT = Path(__file__).resolve().parents[2]


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_runs(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(ROOT)
    exec(compile(_readme_example(), "README.md", "exec"), {})
    assert "optimal" in capsys.readouterr().out


def test_result_matches_the_written_files(tmp_path: Path) -> None:
    r = mapshard.solve(ROOT / "scenarios" / "llama31_8b_decode_h100")
    files = r.write(tmp_path / "r")
    assert {p.name for p in files} >= {"summary.json", "kernels.csv", "configs.csv"}
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["latency_s"] == r.summary["latency_s"]
    assert len(r.kernels) == summary["num_kernels"] == 15
    assert len(r.configs) == summary["num_configs"]
    assert set(r.kernels.columns) >= {"phase", "name", "bound", "compute_s", "memory_s"}


def test_text_and_message_inputs_and_bad_input() -> None:
    text = 'workload { gemm { M: 64 K: 64 N: 64 } } system { chip: "H100-SXM5-80GB" num_chip: 1 }'
    a = mapshard.solve(text)
    from google.protobuf import text_format

    b = mapshard.solve(text_format.Parse(text, setup_pb2.Setup()))
    assert a.summary["latency_s"] == b.summary["latency_s"] > 0
    with pytest.raises(SetupError) as err:
        mapshard.solve('workload { gemm { M: 0 K: 64 N: 64 } } system { chip: "H100-SXM5-80GB" }')
    assert all("\n" not in p for p in err.value.problems)


def test_an_unguarded_sweep_script_stops_at_once_saying_why(tmp_path: Path) -> None:
    """Sweep workers are spawned: each imports the main script, whose unguarded
    mapshard.sweep call then ran again in every worker and died. The sweep retried the
    dead workers for two minutes and returned no rows (found by fuzzing); now each worker
    says why and the sweep stops after a few such deaths."""
    (tmp_path / "sweep.txt").write_text(
        "inline { workload { gemm { M: 256 K: 256 N: 256 } }\n"
        '  system { chip: "H100-SXM5-80GB" num_chip: 1 } }\n'
        'axis { field: "workload.gemm.M" values: ["256", "512"] }\n'
    )
    (tmp_path / "script.py").write_text(
        "import mapshard\nprint(mapshard.sweep('sweep.txt', out='out', workers=1).shape)\n"
    )
    run = subprocess.run(
        [sys.executable, "script.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0
    assert 'call under `if __name__ == "__main__":`' in run.stderr
    assert "worker processes die as they start" in run.stderr
