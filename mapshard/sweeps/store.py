"""results.csv: one row per finished point, appended by the driver the moment it finishes.

Crash safety: the file is opened O_APPEND and the rows that reach the driver together
(usually one, a few when workers finish at once) are written as complete lines with a
single os.write, then fsync'ed; rows never contain a newline. On open, a trailing partial line
(an interrupted write) is cut off, and rows that cannot be a finished point — the wrong
number of cells, an unknown status, an index that is not a number, a point_id already
stored — are removed from the file (rewritten atomically) and reported, so the rows read
back are exactly the points that finished, each once; their point_ids are skipped on
resume. Only the driver writes the file.
"""

from __future__ import annotations

import csv
import fcntl
import io
import os
from collections.abc import Iterable
from pathlib import Path

from mapshard.sweeps.metrics import STATUSES
from schema.errors import SetupError

RESULTS_NAME = "results.csv"


def csv_line(cells: Iterable[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(
        [c.replace("\r", " ").replace("\n", " ") for c in cells]
    )
    return buf.getvalue()


class ResultsStore:
    def __init__(self, path: Path, columns: tuple[str, ...]):
        self.path = Path(path)
        self.columns = columns
        self._fd: int | None = None
        self._lock: int | None = None
        self.dropped: list[str] = []  # rows removed on open, each with its reason

    def open(self, point_ids: set[str] | None = None) -> dict[str, dict[str, str]]:
        """Open for appending (creating the file with its header); returns the rows already
        there, by point_id. Raises SetupError when the file belongs to another sweep (its
        columns differ, or it holds points that are not among `point_ids`: a sweep extended
        by new points resumes, a different one never appends to it) or another driver is
        writing it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        try:
            rows = self._recover()
            foreign = sorted(set(rows) - point_ids) if point_ids is not None else []
            if foreign:
                raise SetupError(
                    f"{self.path}: holds {len(foreign)} point(s) that are not in this sweep "
                    f"(e.g. point_id {foreign[0]}); it is another sweep's results: give "
                    "another --out or remove the file"
                )
        except BaseException:
            self.close()
            raise
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        return rows

    def append(self, row: dict[str, str]) -> None:
        self.append_many([row])

    def append_many(self, rows: list[dict[str, str]]) -> None:
        """Rows that arrived together: one write and one fsync for all of them (an
        interrupted write leaves whole rows and at most one partial last line, which
        `open` cuts off)."""
        assert self._fd is not None, "open() the store first"
        if not rows:
            return
        data = "".join(csv_line(r.get(c, "") for c in self.columns) for r in rows)
        raw = data.encode("utf-8")
        written = os.write(self._fd, raw)
        assert written == len(raw), "short write to results.csv"
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock is not None:
            os.close(self._lock)  # releases the lock
            self._lock = None

    def _take_lock(self) -> None:
        """One driver per results file (the kernel drops the lock when a driver dies)."""
        lock = os.open(self.path.with_name(f".{self.path.name}.lock"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            raise SetupError(
                f"{self.path}: another `mapshard sweep` is writing this file; wait "
                "for it to finish or give another --out"
            ) from None
        self._lock = lock

    def _recover(self) -> dict[str, dict[str, str]]:
        header = csv_line(self.columns)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        if b"\n" not in data:  # missing, empty or a partial header
            write_atomic(self.path, header.encode("utf-8"))
            return {}
        end = data.rfind(b"\n") + 1
        if end < len(data):
            os.truncate(self.path, end)  # an interrupted append
        lines = data[:end].decode("utf-8", errors="replace").splitlines()
        found = next(csv.reader([lines[0]]))
        if tuple(found) != self.columns:
            raise SetupError(
                f"{self.path}: its columns ({', '.join(found)}) are not this sweep's "
                f"({', '.join(self.columns)}); give another --out folder or remove the file"
            )
        rows: dict[str, dict[str, str]] = {}
        self.dropped = []
        for number, cells in enumerate(csv.reader(lines[1:]), start=2):
            problem = self._row_problem(cells, rows)
            if problem:
                self.dropped.append(f"line {number}: {problem}")
                continue
            row = dict(zip(self.columns, cells))
            rows[row["point_id"]] = row
        if self.dropped:  # keep only the good rows: a dropped one is never read again
            kept = [csv_line(r[c] for c in self.columns) for r in rows.values()]
            write_atomic(self.path, (header + "".join(kept)).encode("utf-8"))
        return rows

    def _row_problem(self, cells: list[str], rows: dict[str, dict[str, str]]) -> str:
        """Why a stored row is not a finished point ("" when it is one)."""
        if len(cells) != len(self.columns):
            return f"{len(cells)} cells where the header has {len(self.columns)}"
        row = dict(zip(self.columns, cells))
        if row.get("status") not in STATUSES:
            return f"status {row.get('status')!r} is none of {', '.join(STATUSES)}"
        if not row.get("index", "").isdigit() or not row.get("point_id"):
            return "no point_id or a non-numeric index"
        if row["point_id"] in rows:
            return f"point_id {row['point_id']} is stored already"
        return ""


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file so readers see the old or the new content, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_rows(path: Path) -> list[dict[str, str]]:
    """Every complete row of a results file (for reports and tests)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
