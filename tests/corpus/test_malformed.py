"""Every broken input in tests/malformed/ is reported as bad input, never as a crash.

Each case runs the real command line in-process (`mapshard run CASE --out TMP`) and must
exit with code 2, print only `error: ...` lines that name the file, mention what
cases.csv expects (the line:col, the field path, the suggestion) and write nothing into
the corpus. Cases that only hardware.resolve or generator.build can detect (unknown chips,
degree products, cycles, unsupported models) are checked the same way, so the documented
behaviour of those modules is pinned here too.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mapshard.cli import EXIT_BAD_INPUT, main

CORPUS = Path(__file__).parents[1] / "malformed"
MANIFEST = CORPUS / "cases.csv"
MIN_CASES = 110


def _read_manifest() -> list[dict[str, str]]:
    with open(MANIFEST, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _params() -> list:
    return [
        pytest.param(row["case"], row["expect"].split(" | "), id=row["case"])
        for row in _read_manifest()
    ]


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under root with its size and modification time."""
    return {
        str(p.relative_to(root)): (p.stat().st_size if p.is_file() else -1, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("name, expected", _params())
def test_malformed_case_is_reported(
    name: str, expected: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CORPUS / name
    before = _snapshot(CORPUS)
    out = tmp_path / "out"

    code = main(["run", str(case), "--out", str(out)])

    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stdout + stderr
    assert code == EXIT_BAD_INPUT, f"exit code {code}; stderr:\n{stderr}"
    lines = stderr.splitlines()
    assert lines, "no message on stderr"
    for line in lines:
        assert line.startswith("error: "), line
        assert name in line, f"the message does not name the file: {line}"
    for substring in expected:
        assert substring in stderr, f"{substring!r} not in:\n{stderr}"
    assert _snapshot(CORPUS) == before, "the run wrote into the corpus"
    assert not (out / "summary.json").exists(), "bad input produced a result"


def test_manifest_lists_every_case_once() -> None:
    """The manifest and the folder agree, so no case is silently skipped."""
    names = [row["case"] for row in _read_manifest()]
    assert len(names) == len(set(names))
    on_disk = {p.name for p in CORPUS.iterdir() if p.name != MANIFEST.name}
    assert set(names) == on_disk
    assert len(names) >= MIN_CASES
    assert all(row["expect"].strip() for row in _read_manifest())
