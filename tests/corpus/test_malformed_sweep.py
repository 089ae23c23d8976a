"""Every broken sweep file in tests/malformed_sweep/ is reported as bad input, never as a
crash and never as a sweep of failed points.

Each case is a folder holding `sweep.txt` (and, for some, the base scenario it names); the
real command line runs in-process (`mapshard sweep CASE --out TMP`) and must exit with code
2 before anything is solved, print exactly the number of `error: ...` lines cases.csv
gives (one per problem), each naming the sweep file (or the folder, when it holds none),
contain what cases.csv expects (line:col or field path, what would be valid) and write
nothing, neither into the corpus nor into the results folder.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mapshard.cli import EXIT_BAD_INPUT, main

CORPUS = Path(__file__).parents[1] / "malformed_sweep"
MANIFEST = CORPUS / "cases.csv"
MIN_CASES = 40


def _read_manifest() -> list[dict[str, str]]:
    with open(MANIFEST, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _params() -> list:
    return [
        pytest.param(row["case"], int(row["lines"]), row["expect"].split(" | "), id=row["case"])
        for row in _read_manifest()
    ]


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root with its size and modification time."""
    return {
        str(p.relative_to(root)): (p.stat().st_size if p.is_file() else -1, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("name, num_lines, expected", _params())
def test_malformed_sweep_is_reported(
    name: str,
    num_lines: int,
    expected: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = _snapshot(CORPUS)
    out = tmp_path / "out"

    code = main(["sweep", str(CORPUS / name), "--out", str(out), "--quiet"])

    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stdout + stderr
    assert code == EXIT_BAD_INPUT, f"exit code {code}; stderr:\n{stderr}"
    lines = stderr.splitlines()
    assert len(lines) == num_lines, f"expected {num_lines} line(s):\n{stderr}"
    for line in lines:
        assert line.startswith("error: "), line
        assert f"{name}/sweep.txt" in line or line.startswith(f"error: {CORPUS / name}: "), line
    for substring in expected:
        assert substring in stderr, f"{substring!r} not in:\n{stderr}"
    assert _snapshot(CORPUS) == before, "the sweep wrote into the corpus"
    assert not out.exists(), "bad input created the results folder"


def test_manifest_lists_every_case_once() -> None:
    """The manifest and the folder agree, so no case is silently skipped."""
    rows = _read_manifest()
    names = [row["case"] for row in rows]
    assert len(names) == len(set(names))
    on_disk = {p.name for p in CORPUS.iterdir() if p.name != MANIFEST.name}
    assert set(names) == on_disk
    assert len(names) >= MIN_CASES
    assert all(row["expect"].strip() and int(row["lines"]) >= 1 for row in rows)
