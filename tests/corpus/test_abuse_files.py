"""Abuse corpus, the folders a run writes (issue #36 class 1): seeded random families, not
single cases (class 2, sweep resume, is in test_abuse_resume.py).

1. Marker abuse: a hand-written or stale `.mapshard-results` (folder names, links, `..`,
   absolute paths, unhashed names, garbage bytes, huge lines) beside the user's files,
   folders and links, for every command that writes a folder (run, generate, bounds,
   validate, compare, sweep), and `--out` naming a file, a path under a file or a link;
   `profile`'s one output file over a user's file, a folder or a link. Every case is
   refused with one `error:` line naming the path (exit 2), and every byte of the user's
   tree is as it was.
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import io
import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mapshard.cli import EXIT_BAD_INPUT, main
from mapshard.outdir import MARKER
from mapshard.sweeps import runner
from mapshard.sweeps.worker import Batch, run_batch
from solver.api import SOLUTIONS

ROOT = Path(__file__).resolve().parents[2]
GEMM_SETUP = (
    'name: "g"\nworkload { gemm { M: 64 K: 64 N: 64 } }\n'
    'system { chip: "H100-SXM5-80GB" num_chip: 1 }\n'
)
SWEEP = """inline {
  workload { gemm { M: 256 K: 256 N: 256 } }
  system { num_chip: 1
    accelerator { core: 4 systolic_width: 16 systolic_height: 16 sram_cap: 1048576 freq: 1.0 }
    memory { dram_bw: 100 dram_cap: 1e9 } }
  cost { accelerator_price: 1000 accelerator_power: 50 dram_unit_price: 1 }
}
axis { field: "workload.gemm.M" name: "M" values: ["64", "128", "256", "512", "1024"] }
"""
NUM_POINTS = 5
COMMANDS = ("run", "generate", "bounds", "validate", "compare", "sweep")
MARKER_CASES = 5  # random markers per command


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry under root: a file's bytes, a link's target, or 'dir'."""
    out: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = path.read_bytes()
    return out


def assert_one_error_line(code: int, out: str, err: str, names: str) -> None:
    assert "Traceback" not in out + err
    assert code == EXIT_BAD_INPUT, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert names in lines[0], (names, err)


# ---------------------------------------------------------------------------------------
# inputs every command needs (made once per module: the suite stays fast)
# ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inputs")
    scenario = root / "sc"
    scenario.mkdir()
    (scenario / "setup.txt").write_text(GEMM_SETUP)
    for name in ("r0", "r1"):
        assert main(["run", str(scenario), "--out", str(root / name), "--quiet"]) == 0
    dev = ROOT / "tests" / "data" / "validation" / "validation_dev_structured.csv"
    with open(dev, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    skipped = next(r for r in rows[1:] if r[header.index("usable")] == "0")
    cases = root / "cases.csv"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, skipped])
    cases.write_text(buf.getvalue(), encoding="utf-8")
    sweep = root / "sweep" / "sweep.txt"
    sweep.parent.mkdir()
    sweep.write_text(SWEEP)
    return {"scenario": scenario, "r0": root / "r0", "r1": root / "r1", "cases": cases,
            "sweep": sweep}  # fmt: skip


def command(name: str, inputs: dict[str, Path], out: Path) -> list[str]:
    """The command line of `name` writing to `out` (only its own inputs are read)."""
    o = str(out)
    args = {
        "run": lambda: ["run", str(inputs["scenario"]), "--out", o, "--quiet", "--no-sensitivity"],
        "generate": lambda: ["generate", str(inputs["scenario"]), "--out", o],
        "bounds": lambda: ["bounds", str(inputs["scenario"]), "--out", o],
        "validate": lambda: ["validate", str(inputs["cases"]), "--out", o, "--quiet",
                             "--single-pass"],
        "compare": lambda: ["compare", str(inputs["r0"]), str(inputs["r1"]), "--out", o],
        "sweep": lambda: ["sweep", str(inputs["sweep"]), "--out", o, "--quiet", "--workers",
                          "1"],
    }  # fmt: skip
    return args[name]()


# ---------------------------------------------------------------------------------------
# 1. marker abuse
# ---------------------------------------------------------------------------------------


def _user_tree(case: Path) -> Path:
    """A folder the user owns: files, a sub-folder, links in and out, plus a precious file
    outside that a link points at."""
    precious = case / "precious"
    precious.mkdir()
    (precious / "thesis.txt").write_bytes(b"years of work\n")
    out = case / "out"
    (out / "data").mkdir(parents=True)
    (out / "data" / "a.csv").write_bytes(b"1,2\n")
    (out / "notes.txt").write_bytes(b"mine\n")
    (out / "plan.txt").write_bytes(b"# my own plan\n")  # a name MapShard writes
    (out / "summary.json").write_bytes(b'{"mine": 1}\n')
    os.symlink(precious / "thesis.txt", out / "link")
    os.symlink(precious, out / "dlink")
    os.symlink(case / "nowhere", out / "dangling")
    return out


def _marker_bytes(rng: random.Random, case: Path) -> bytes:
    """A hand-written or stale marker: names of the folder's entries with or without
    (wrong) hashes, paths out of it, garbage bytes, a huge line, odd line endings."""
    names = ["data", "data/a.csv", "notes.txt", "plan.txt", "summary.json", "link", "dlink",
             "dangling", "..", ".", "", str(case / "precious"), "../precious/thesis.txt",
             "timing.json", MARKER, "nul\x00name", "./notes.txt", "data\\a.csv"]  # fmt: skip
    first = rng.choice([b"MapShard result folder; MapShard may replace it. Files:\n", b"", b"\n"])
    lines = []
    for _ in range(rng.randint(1, 12)):
        name = rng.choice(names)
        kind = rng.randrange(5)
        if kind == 0:
            lines.append(name.encode("utf-8", "surrogateescape"))
        elif kind == 1:
            lines.append(f"{name} {rng.getrandbits(256):064x}".encode())
        elif kind == 2:
            lines.append(f"{name} not-a-hash".encode())
        elif kind == 3:
            lines.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))))
        else:
            lines.append(name.encode() * rng.randint(1000, 20000))
    end = rng.choice([b"\n", b"\r\n", b"\r"])
    return first + end.join(lines) + rng.choice([end, b""])


def _marker_cases() -> list[Any]:
    return [
        pytest.param(cmd, seed, id=f"{cmd}-{seed}")
        for cmd in COMMANDS
        for seed in range(MARKER_CASES)
    ]


@pytest.mark.parametrize("cmd, seed", _marker_cases())
def test_a_forged_marker_never_costs_a_user_file(
    cmd: str, seed: int, inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    rng = random.Random(f"marker-{cmd}-{seed}")
    out = _user_tree(tmp_path)
    marker = _marker_bytes(rng, tmp_path)
    if rng.random() < 0.8:
        (out / MARKER).write_bytes(marker)
    else:  # a marker that is a folder, or a link to the user's file
        if rng.random() < 0.5:
            (out / MARKER).mkdir()
        else:
            os.symlink(out / "notes.txt", out / MARKER)
    before = snapshot(tmp_path)
    code = main(command(cmd, inputs, out))
    stdout, stderr = capsys.readouterr()
    assert_one_error_line(code, stdout, stderr, str(out))
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("cmd", COMMANDS)
def test_a_stale_marker_of_a_real_result_beside_user_files(
    cmd: str,
    inputs: dict[str, Path],
    solved: Counter[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    """A real result folder the user then added to (a file, a folder, a link) or edited
    the marker of (listing the additions, with and without hashes): refused, untouched."""
    out = tmp_path / "out"
    args = command(cmd, inputs, out)
    assert main(args) == 0
    capsys.readouterr()
    if cmd == "sweep":  # a sweep's folder has no marker: a user's file beside its own
        (out / "mine.txt").write_bytes(b"mine\n")
        (out / MARKER).write_bytes(b"x\nmine.txt\n")
    else:
        (out / "mine").mkdir()
        (out / "mine" / "f.txt").write_bytes(b"mine\n")
        os.symlink(out / "mine" / "f.txt", out / "alias")
        with open(out / MARKER, "ab") as f:
            f.write(b"mine\nalias 00\nmine/f.txt\n")
    before = snapshot(tmp_path)
    code = main(args)
    stdout, stderr = capsys.readouterr()
    assert_one_error_line(code, stdout, stderr, str(out))
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("cmd", COMMANDS)
@pytest.mark.parametrize("where", ["a file", "under a file", "a link to a folder", "dangling"])
def test_out_that_is_not_a_folder_to_own(
    cmd: str,
    where: str,
    inputs: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
) -> None:
    afile = tmp_path / "afile"
    afile.write_bytes(b"mine\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "x.txt").write_bytes(b"x\n")
    out = {
        "a file": afile,
        "under a file": afile / "r",
        "a link to a folder": tmp_path / "link",
        "dangling": tmp_path / "dangling",
    }[where]
    if where == "a link to a folder":
        os.symlink(folder, out)
    if where == "dangling":
        os.symlink(tmp_path / "nowhere", out)
    before = snapshot(tmp_path)
    code = main(command(cmd, inputs, out))
    stdout, stderr = capsys.readouterr()
    assert_one_error_line(code, stdout, stderr, str(out))
    assert snapshot(tmp_path) == before


class InProcessBackend:
    """Runs each batch in this process and counts the solves of each point (the local
    backend's protocol without its processes: a resume test needs no pool)."""

    name = "in-process"
    capacity = 1

    def __init__(self, solved: Counter[str]) -> None:
        self.solved = solved

    def submit(self, batch: Batch, solo: bool = False) -> cf.Future[Any]:
        self.solved.update(j.point_id for j in batch.jobs)
        fut: cf.Future[Any] = cf.Future()
        enabled = SOLUTIONS.enabled
        try:
            fut.set_result(run_batch(batch))
        finally:
            SOLUTIONS.enabled = enabled
        return fut

    def wait(self, futures: list[Any], timeout: float) -> list[Any]:
        return [f for f in futures if f.done()]

    def reports(self, timeout: float) -> list[Any]:
        return []

    def is_crash(self, exc: BaseException) -> bool:
        return False

    def forget(self, fut: Any) -> None:
        return None

    def start(self, n: int) -> None:
        return None

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        return [fn(item) for item in items]

    def close(self, kill: bool = False) -> None:
        return None


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    counter: Counter[str] = Counter()
    monkeypatch.setattr(runner, "_backend", lambda workers, cluster: InProcessBackend(counter))
    return counter


PROFILES = ROOT / "tests" / "data" / "profiles"


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("action", ["compare", "calibrate"])
def test_profile_out_never_costs_a_user_file(
    action: str, seed: int, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`mapshard profile` writes one file: --out naming a user's file (random content, even
    one that starts like a CSV), a folder, a link or a path under a file is refused."""
    rng = random.Random(f"profile-{action}-{seed}")
    (tmp_path / "mine.txt").write_bytes(bytes(rng.getrandbits(8) for _ in range(64)))
    (tmp_path / "table.csv").write_bytes(b"phase,kernel\nmine,1\n")
    (tmp_path / "folder").mkdir()
    os.symlink(tmp_path / "mine.txt", tmp_path / "link")
    out = tmp_path / rng.choice(["mine.txt", "table.csv", "folder", "link", "mine.txt/x"])
    before = snapshot(tmp_path)
    args = ["profile", action, str(PROFILES / "llama_2layer_prefill_h100"),
            str(PROFILES / "sample_trace.json"), "--out", str(out)]  # fmt: skip
    code = main(args)
    stdout, stderr = capsys.readouterr()
    assert_one_error_line(code, stdout, stderr, str(out))
    assert snapshot(tmp_path) == before
