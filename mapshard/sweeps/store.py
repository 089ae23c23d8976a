"""results.csv: one row per finished point, appended by the driver the moment it finishes.

Crash safety: the file is opened O_APPEND and the rows that reach the driver together
(usually one, a few when workers finish at once) are written as complete lines with a
single os.write, then fsync'ed; rows never contain a newline. On open, a trailing partial line
(an interrupted write) is cut off, and rows that cannot be a finished point — the wrong
number of cells, an unknown status, an index that is not a number or not its point's, a
point_id already stored — are removed from the file (rewritten atomically, also to drop a
BOM or CRLF line ends an editor added) and reported, so the rows read back are exactly the
points that finished, each once; their point_ids are skipped on resume. A file with other
columns or with points this sweep does not have is another sweep's: refused, untouched.
Only the driver writes the file.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import os
from collections.abc import Iterable, Mapping
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

    def open(self, points: Mapping[str, int] | None = None) -> dict[str, dict[str, str]]:
        """Open for appending (creating the file with its header); returns the rows already
        there, by point_id. `points`: this sweep's point_id -> index. Raises SetupError,
        leaving the file as it was, when it belongs to another sweep (its columns differ,
        or it holds points that are not among `points`: a sweep extended by new points
        resumes, a different one never appends to it) or another driver is writing it."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._take_lock()
        except OSError as exc:  # --out under a file, a dangling link, no permission
            raise SetupError(
                f"{self.path.parent}: cannot write the sweep's results there "
                f"({exc.strerror or exc}); give a writable folder for --out"
            ) from None
        try:
            rows = self._recover(points)
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

    def rewrite(self, rows: list[dict[str, str]]) -> None:
        """The file as exactly `rows`, in their order, replaced atomically: rows are
        appended as workers finish them, in an order that depends on the machine's load;
        a finished sweep's file lists its points in order, the same on every run."""
        assert self._fd is not None, "open() the store first"
        header = csv_line(self.columns)
        data = header + "".join(csv_line(r.get(c, "") for c in self.columns) for r in rows)
        os.close(self._fd)
        self._fd = None
        write_atomic(self.path, data.encode("utf-8"))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

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

    def _recover(self, points: Mapping[str, int] | None) -> dict[str, dict[str, str]]:
        """The finished points' rows; the file rewritten (atomically, only after every
        check passed) as exactly those rows when it held anything else: a cut last line,
        a BOM, CRLF line ends, rows that are not finished points."""
        header = csv_line(self.columns)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        text = text.replace("\r\n", "\n").replace("\r", "\n")
        complete = text[: text.rfind("\n") + 1]  # without an interrupted append's last line
        if not complete and header.startswith(text):  # missing, empty or a partial header
            write_atomic(self.path, header.encode("utf-8"))
            return {}
        lines = complete.split("\n")[:-1] if complete else [text]
        found = next(csv.reader([lines[0]]), [])
        if tuple(found) != self.columns:
            raise SetupError(
                f"{self.path}: its columns ({', '.join(found)[:200]}) are not this sweep's "
                f"({', '.join(self.columns)}); give another --out folder or remove the file"
            )
        rows: dict[str, dict[str, str]] = {}
        dropped = []
        for number, line in enumerate(lines[1:], start=2):
            cells = next(csv.reader([line]), [])  # one row per line: rows hold no newline
            problem = self._row_problem(cells, rows, points)
            if problem:
                dropped.append(f"line {number}: {problem}")
                continue
            row = dict(zip(self.columns, cells))
            rows[row["point_id"]] = row
        foreign = sorted(set(rows) - set(points)) if points is not None else []
        if foreign:
            raise SetupError(
                f"{self.path}: holds {len(foreign)} point(s) that are not in this sweep "
                f"(e.g. point_id {foreign[0][:40]}); it is another sweep's results: give "
                "another --out or remove the file"
            )
        self.dropped = dropped
        kept = header + "".join(csv_line(r[c] for c in self.columns) for r in rows.values())
        if kept.encode("utf-8") != data:  # a dropped row is never read again
            write_atomic(self.path, kept.encode("utf-8"))
        return rows

    def _row_problem(
        self, cells: list[str], rows: dict[str, dict[str, str]], points: Mapping[str, int] | None
    ) -> str:
        """Why a stored row is not a finished point ("" when it is one)."""
        if len(cells) != len(self.columns):
            return f"{len(cells)} cells where the header has {len(self.columns)}"
        row = dict(zip(self.columns, cells))
        if row.get("status") not in STATUSES:
            return f"status {row.get('status', '')[:40]!r} is none of {', '.join(STATUSES)}"
        if not row.get("index", "").isdigit() or not row.get("point_id"):
            return "no point_id or a non-numeric index"
        pid = row["point_id"]
        if points is not None and pid in points and row["index"] != str(points[pid]):
            return f"point_id {pid} is point {points[pid]}, not {row['index'][:20]}"
        if pid in rows:
            return f"point_id {pid} is stored already"
        return ""


def write_atomic(path: Path, data: bytes) -> None:
    """Write a file so readers see the old or the new content, never a mix."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a folder of that name, no permission, disk full
        with contextlib.suppress(OSError):
            tmp.unlink()
        where = f"{exc.filename}: " if exc.filename else ""
        raise SetupError(f"{path}: cannot write it ({where}{exc.strerror or exc})") from None


def read_rows(path: Path) -> list[dict[str, str]]:
    """Every complete row of a results file (for reports and tests)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
