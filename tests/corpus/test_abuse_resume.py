"""Abuse corpus, sweep resume (issue #36 class 2): results.csv corrupted by a seeded random
family of damages (duplicated, garbage, short/long, mis-indexed rows, unknown statuses, a
cut last line, a BOM, CRLF). The bad rows are reported and dropped, each missing point is
solved exactly once (counted by an in-process backend), and the final file holds exactly
one row per point, equal to an uninterrupted sweep's. A row of a point this sweep does not
have is another sweep's file: refused, the file left as it was. Two axes on one field are
refused before anything runs.
"""

from __future__ import annotations

import csv
import io
import random
from collections import Counter
from pathlib import Path

import pytest
from test_abuse_files import NUM_POINTS, SWEEP, InProcessBackend, command

from mapshard.cli import main
from mapshard.sweeps import runner
from mapshard.sweeps.metrics import TIMING_COLUMNS
from schema.errors import SetupError

SWEEP_CASES = 12  # random results.csv corruptions


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    sweep = tmp_path_factory.mktemp("sweep") / "sweep.txt"
    sweep.write_text(SWEEP, encoding="utf-8")
    return {"sweep": sweep}


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    counter: Counter[str] = Counter()
    monkeypatch.setattr(runner, "_backend", lambda workers, cluster: InProcessBackend(counter))
    return counter


@pytest.fixture(scope="module")
def reference(inputs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """results.csv of the uninterrupted sweep (in-process: rows do not depend on the
    backend, tests/e2e/test_sweep.py)."""
    out = tmp_path_factory.mktemp("reference") / "out"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "_backend", lambda w, c: InProcessBackend(Counter()))
        assert main(command("sweep", inputs, out)) == 0
    return (out / "results.csv").read_bytes()


def _rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"))))


def _comparable(data: bytes) -> dict[str, dict[str, str]]:
    rows = _rows(data)
    header = rows[0]
    keep = [i for i, c in enumerate(header) if c not in TIMING_COLUMNS]
    return {r[0]: {header[i]: r[i] for i in keep} for r in rows[1:]}


def _corrupt(rng: random.Random, reference: bytes) -> tuple[bytes, set[str], bool, int]:
    """A damaged results.csv, the point_ids whose good rows it keeps, whether it holds a
    point of another sweep (which must be refused, not resumed), and how many bad rows."""
    header, *good = reference.decode("utf-8").splitlines(keepends=True)
    kept = rng.sample(good, rng.randint(0, len(good)))
    lines = list(kept)
    foreign = False
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(8)
        if kind == 0 and not kept:
            kind = 1
        row = rng.choice(good).rstrip("\n").split(",")
        if kind == 0 and kept:  # a duplicate of a stored row, after it
            lines.append(rng.choice(kept))
        elif kind == 1:  # garbage
            lines.append(rng.choice(["garbage\n", "\x00\x01,,\n", ",,,,\n", "ü,☃\n", "\n"]))
        elif kind == 2:  # an extra cell
            lines.append(",".join(row + ["extra"]) + "\n")
        elif kind == 3:  # a missing cell
            lines.append(",".join(row[:-1]) + "\n")
        elif kind == 4:  # a known point under another point's index
            row[1] = str((int(row[1]) + 1) % NUM_POINTS)
            lines.append(",".join(row) + "\n")
        elif kind == 5:  # a non-numeric or negative index
            row[1] = rng.choice(["x", "-1", "1.5", ""])
            lines.append(",".join(row) + "\n")
        elif kind == 6:  # an unknown status
            row[3] = rng.choice(["done", "OPTIMAL", ""])
            lines.append(",".join(row) + "\n")
        else:  # a point of another sweep
            row[0] = f"{rng.getrandbits(64):016x}"
            lines.append(",".join(row) + "\n")
            foreign = True
    rng.shuffle(lines)
    # duplicates go after the row they repeat, so the stored one is the original
    ordered: list[str] = []
    for line in lines:
        if line in kept and line in ordered:
            ordered.append(line)
        elif line in kept:
            ordered.insert(0, line)
        else:
            ordered.append(line)
    text = header + "".join(ordered)
    if rng.random() < 0.3:  # a row cut by a kill
        text += rng.choice(good)[: rng.randint(1, 20)]
    data = text.encode("utf-8")
    if rng.random() < 0.25:
        data = data.replace(b"\n", b"\r\n")
    if rng.random() < 0.25:
        data = b"\xef\xbb\xbf" + data
    ids = {line.split(",")[0] for line in kept}
    return data, ids, foreign, len(lines) - len(kept)


def _resume(inputs: dict[str, Path], out: Path) -> runner.SweepOutcome:
    """The sweep resumed into `out` (no plots or report: the rows are what is tested)."""
    return runner.run_sweep(inputs["sweep"], out=out, quiet=True, write_outputs=False)


@pytest.mark.parametrize("seed", range(SWEEP_CASES))
def test_a_corrupted_results_csv_resumes_to_one_row_per_point(
    seed: int, inputs: dict[str, Path], reference: bytes, solved: Counter[str], tmp_path: Path
) -> None:
    rng = random.Random(f"resume-{seed}")
    damaged, kept, foreign, bad_rows = _corrupt(rng, reference)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_bytes(damaged)
    if foreign:
        with pytest.raises(SetupError) as refused:
            _resume(inputs, out)
        [problem] = refused.value.problems
        assert "results.csv" in problem and "not in this sweep" in problem
        assert "\n" not in problem
        assert (out / "results.csv").read_bytes() == damaged
        assert not solved
        return
    outcome = _resume(inputs, out)
    assert len(outcome.dropped) == bad_rows, outcome.dropped
    final = (out / "results.csv").read_bytes()
    assert final.count(b"\n") == NUM_POINTS + 1 and b"\r" not in final
    assert _comparable(final) == _comparable(reference)
    every = set(_comparable(reference))
    assert set(solved) == every - kept and max(solved.values(), default=1) == 1
    assert outcome.ran == len(every - kept)
    # a second resume finds every point stored and solves nothing
    solved.clear()
    again = _resume(inputs, out)
    assert again.ran == 0 and not again.dropped and not solved
    assert (out / "results.csv").read_bytes() == final


def test_resume_reports_the_dropped_rows_on_the_command_line(
    inputs: dict[str, Path],
    reference: bytes,
    solved: Counter[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    """What the CLI says about dropped rows: one warning line naming results.csv."""
    header, first, *_ = reference.decode("utf-8").splitlines(keepends=True)
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_text(header + first + first + "garbage\n", encoding="utf-8")
    assert main(command("sweep", inputs, out)) == 0
    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stdout + stderr
    warning = stderr.splitlines()[0]
    assert warning.startswith(f"warning: {out / 'results.csv'}: removed 2 row(s)"), stderr
    assert len(solved) == NUM_POINTS - 1 and max(solved.values()) == 1


SWEEP_FIELDS = {
    "workload.gemm.M": ["64", "128"],
    "workload.gemm.N": ["64", "256"],
    "system.memory.dram_bw": ["50", "100"],
    "system.accelerator.core": ["2", "4"],
    "execution.execution_style": ["DATAFLOW", "KERNEL_BY_KERNEL"],
}


@pytest.mark.parametrize("seed", range(6))
def test_two_axes_on_one_field_are_refused_before_anything_runs(seed: int, tmp_path: Path) -> None:
    """Among other axes, two on the same field (either order, any names): the later would
    win in every point and its column would be wrong; refused naming both axes."""
    rng = random.Random(f"two-axes-{seed}")
    fields = rng.sample(list(SWEEP_FIELDS), 3)
    twice = fields[0]
    order = [*fields, twice]
    rng.shuffle(order)
    first = order.index(twice)
    second = order.index(twice, first + 1)
    axes = "".join(
        f'axis {{ field: "{f}" name: "x{i}" values: {json_list(SWEEP_FIELDS[f])} }}\n'
        for i, f in enumerate(order)
    )
    sweep = tmp_path / "sweep.txt"
    sweep.write_text(SWEEP.split("axis {")[0] + axes, encoding="utf-8")
    with pytest.raises(SetupError) as refused:
        runner.run_sweep(sweep, out=tmp_path / "out", quiet=True)
    [problem] = refused.value.problems
    assert f"axis[{second}]: sets {twice}, which axis[{first}]" in problem, problem
    assert not (tmp_path / "out").exists()


def json_list(values: list[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"
