"""Owned output folders (mapshard/outdir.py): whatever a marker says, only plain files
MapShard wrote are ever replaced; timing.json is listed without a hash; a killed writer's
hidden sibling is cleaned by the next write."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mapshard.outdir import MARKER, replace_folder
from schema.errors import SetupError

HEADER = "MapShard result folder; MapShard may replace it. Files:\n"


def _owned(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    replace_folder(out, {"summary.json": "{}\n", "timing.json": "{}\n"})
    return out


def test_timing_json_is_listed_without_a_hash(tmp_path: Path) -> None:
    out = _owned(tmp_path)
    lines = (out / MARKER).read_text().splitlines()[1:]
    assert "timing.json" in lines  # the name alone
    assert any(line.startswith("summary.json ") and len(line.split()[1]) == 64 for line in lines)
    (out / "timing.json").write_text('{"solve_time_s": 1}\n')  # differs every run anyway
    replace_folder(out, {"summary.json": "{}\n", "timing.json": "{}\n"})


@pytest.mark.parametrize(
    "make",
    [
        lambda d: (d / "data").mkdir(),  # a folder the marker names
        lambda d: (d / "data").symlink_to(d.parent),  # a link the marker names
        lambda d: (d / "data").write_text("user's"),  # a file listed with no hash
    ],
    ids=["folder", "symlink", "unhashed-file"],
)
def test_a_hand_written_marker_never_gets_a_user_entry_replaced(tmp_path: Path, make) -> None:
    out = tmp_path / "out"
    out.mkdir()
    make(out)
    (out / MARKER).write_text(HEADER + "data\n")
    with pytest.raises(SetupError, match="did not write"):
        replace_folder(out, {"summary.json": "{}\n"})
    assert (out / "data").exists() or (out / "data").is_symlink()


def test_a_marker_naming_a_path_outside_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "precious").write_text("keep")
    (out / MARKER).write_text(HEADER + "../precious 0\n")
    (out / "note.txt").write_text("x")
    with pytest.raises(SetupError):
        replace_folder(out, {"summary.json": "{}\n"})
    assert (tmp_path / "precious").read_text() == "keep"


def test_a_killed_writers_sibling_is_removed_and_a_live_ones_kept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f".out.tmp-{int(dead.stdout)}-abc"
    stale.mkdir()
    (stale / "summary.json").write_text("{}")
    live = tmp_path / f".out.tmp-{os.getppid()}-def"  # the test runner's parent is alive
    live.mkdir()
    other = tmp_path / ".another.tmp-1-x"  # not this folder's sibling
    other.mkdir()
    replace_folder(tmp_path / "out", {"summary.json": "{}\n"})
    assert not stale.exists() and live.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")) == [live.name]
