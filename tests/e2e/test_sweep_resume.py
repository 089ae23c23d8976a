"""Interrupted sweeps resume with no point lost and none duplicated: the driver killed with
SIGKILL (a subprocess running `mapshard sweep`), and a worker process killed mid-sweep."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from test_sweep import TINY_LLM, comparable, write_sweep

from mapshard.sweeps import load_sweep, run_sweep
from mapshard.sweeps.store import read_rows

pytestmark = pytest.mark.slow  # worker processes and signals: seconds each

AXES = """
axis { field: "workload.llm_inference.batch" values: ["1", "2", "4", "8"] }
axis { field: "system.memory.dram_bw" name: "dram" values: ["50", "100", "200", "400"] }
"""
TOTAL = 16


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _wait_rows(path: Path, rows: int, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while _lines(path) < rows + 1:  # + header
        assert time.monotonic() < end, f"no {rows} rows in {path} after {timeout_s} s"
        time.sleep(0.01)


def _check_complete(results: Path, reference: dict[str, dict[str, str]]) -> None:
    rows = read_rows(results)
    ids = Counter(r["point_id"] for r in rows)
    assert max(ids.values()) == 1, "a point was stored twice"
    assert comparable(rows) == reference


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    """The uninterrupted sweep's rows (without the wall-clock columns), once for the module:
    both tests compare their resumed results with it (rows do not depend on the number of
    workers: tests/e2e/test_sweep.py)."""
    folder = tmp_path_factory.mktemp("reference")
    sweep = write_sweep(folder, TINY_LLM + AXES)
    ref = run_sweep(load_sweep(sweep), out=folder / "ref", workers=2, quiet=True,
                    write_outputs=False)  # fmt: skip
    return comparable(ref.rows)


def test_driver_sigterm_then_sigkill_then_resume(
    tmp_path: Path, reference: dict[str, dict[str, str]]
) -> None:
    """SIGTERM: exit 143 with every finished row kept and nothing else printed (no
    multiprocessing noise); SIGKILL of the resumed driver: the next run completes it."""
    sweep = write_sweep(tmp_path, TINY_LLM + AXES)
    assert len(reference) == TOTAL

    out = tmp_path / "out"
    results = out / "results.csv"
    cmd = [
        sys.executable,
        "-m",
        "mapshard.cli",
        "sweep",
        str(sweep),
        "--workers",
        "1",
        "--out",
        str(out),
        "--quiet",
    ]
    # faulthandler: a driver that does not end after SIGTERM (seen once, beside two busy
    # loops, after it had printed its "interrupted" line) is sent SIGABRT, which makes it
    # print every thread's stack, so the failure says where it waits
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        _wait_rows(results, 2)
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"the driver did not end 30 s after SIGTERM; its threads:\n{err}")
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == 143, err
    assert err.startswith("interrupted: ") and err.count("\n") == 1, err
    termed = _lines(results) - 1
    assert 2 <= termed < TOTAL, "the SIGTERM came too late to test a resume"

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_rows(results, termed + 2)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    done_before = _lines(results) - 1
    assert termed + 2 <= done_before < TOTAL, "the kill came too late to test a resume"

    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    _check_complete(results, reference)
    assert _lines(results) - 1 == TOTAL


def test_a_killed_worker_loses_no_point(
    tmp_path: Path, reference: dict[str, dict[str, str]]
) -> None:
    sweep = write_sweep(tmp_path, TINY_LLM + AXES)
    spec = load_sweep(sweep)
    out = tmp_path / "out"
    outcome: list[object] = []
    driver = threading.Thread(
        target=lambda: outcome.append(
            run_sweep(spec, out=out, workers=2, quiet=True, write_outputs=False)
        )
    )
    driver.start()
    _wait_rows(out / "results.csv", 2)
    victims = [p for p in multiprocessing.active_children() if p.pid]
    assert victims, "no worker process to kill"
    os.kill(victims[0].pid, signal.SIGKILL)
    driver.join(timeout=120)
    assert not driver.is_alive()
    _check_complete(out / "results.csv", reference)
