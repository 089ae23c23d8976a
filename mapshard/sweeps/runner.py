"""The sweep driver: expand the points, skip those already in results.csv, run the rest in
batches on a backend, store each row the moment it arrives, then write the outputs (the
backend's workers, idle by then, draw the plots side by side).

Batches: runs of whole systems (the hardware, cost and solver axes' values) across the
workloads, in workload order (make_batches), so a worker builds a system's kernel menus once
and generates each graph once (the worker keeps its graphs: worker._workload).
A worker that dies takes its running point with it: the points it had finished are already
stored (reported one by one), the ones it had not started are queued again, and each point
that was running is re-run alone; if it kills its worker again it is recorded as `failed`.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mapshard.sweeps import metrics
from mapshard.sweeps.backends import DaskBackend, LocalBackend
from mapshard.sweeps.outputs import check_sweep_folder
from mapshard.sweeps.outputs import write_outputs as _write
from mapshard.sweeps.points import NOT_WORKLOAD, Point, expand_points
from mapshard.sweeps.progress import SweepProgress, summary_line
from mapshard.sweeps.spec import SweepSpec, load_sweep
from mapshard.sweeps.store import RESULTS_NAME, ResultsStore
from mapshard.sweeps.worker import Batch, Job
from schema.errors import SetupError, Terminated

# Points per batch at most: a batch is a run of whole systems across the workloads
# (make_batches); smaller batches share fewer menus, larger ones finish less evenly.
MAX_CHUNK = 256


@dataclass
class SweepOutcome:
    out: Path
    spec: SweepSpec
    points: list[Point]
    rows: list[dict[str, str]]  # this sweep's rows, in point order
    counts: dict[str, int]
    ran: int  # points finished in this run
    elapsed_s: float
    repeats: int = 0
    interrupted: bool = False
    outputs: list[Path] = field(default_factory=list)
    terminated: bool = False  # the interrupt was SIGTERM (exit 143), not Ctrl-C (130)
    dropped: tuple[str, ...] = ()  # results.csv rows removed on resume, with the reason
    kept: list[str] = field(default_factory=list)  # best_* files the user edited: not rewritten

    @property
    def summary(self) -> str:
        return summary_line(len(self.points), self.counts, self.ran, self.elapsed_s, self.repeats)


def default_out(sweep_path: Path) -> Path:
    sweep_path = Path(sweep_path)
    folder = sweep_path if sweep_path.is_dir() else sweep_path.parent
    return folder / "results"


def run_sweep(
    sweep: SweepSpec | str | Path,
    out: str | Path | None = None,
    workers: int = 0,
    cluster: str | None = None,
    quiet: bool = False,
    chunk: int = MAX_CHUNK,
    write_outputs: bool = True,
) -> SweepOutcome:
    """Run (or resume) a sweep into `out`. `workers` local processes (0 = os.cpu_count()),
    or the Dask scheduler at `cluster`. Raises SetupError for a bad sweep file; an
    interrupt (Ctrl-C, SIGTERM) returns with `interrupted` set and every finished row kept."""
    spec = sweep if isinstance(sweep, SweepSpec) else load_sweep(sweep)
    out = Path(out) if out is not None else default_out(spec.path)
    if out.exists() and not out.is_dir():
        raise SetupError(f"{out}: the sweep's output path is a file, not a folder; give a "
                         "folder for --out (new, or a sweep's own to resume it)")  # fmt: skip
    check_sweep_folder(out)
    t0 = time.perf_counter()
    # a new local sweep has points to solve: its workers start (and import the solver
    # stack) while the points expand, rather than after
    backend = _backend(workers, cluster) if _starts_early(out, cluster) else None
    try:
        if backend is not None:
            backend.start(spec.num_points)
        outcome, backend = _sweep(spec, out, backend, workers, cluster, quiet, chunk, t0)
        if write_outputs and not outcome.interrupted:
            # the workers, idle now, draw the plots side by side
            outcome.outputs = _write(outcome, backend.map if backend is not None else None)
    except BaseException:
        if backend is not None:
            backend.close(kill=True)
        raise
    if backend is not None:
        backend.close(kill=outcome.interrupted)
    return outcome


def _sweep(
    spec: SweepSpec,
    out: Path,
    backend: Any | None,
    workers: int,
    cluster: str | None,
    quiet: bool,
    chunk: int,
    t0: float,
) -> tuple[SweepOutcome, Any | None]:
    """Expand, resume and solve the points; returns the outcome and the backend (the one
    given, or one started for the points left to solve), still open."""
    points, repeats = expand_points(spec)
    store = ResultsStore(out / RESULTS_NAME, spec.columns)
    stored = store.open({p.point_id: p.index for p in points})
    driver = _Driver(spec, store, stored, points, quiet)
    terminated = False
    try:
        with _sigterm_as_interrupt():
            driver.record_many([p.row for p in points if p.row is not None])
            driver.progress.rebase(len(driver.written))
            jobs = [p for p in points if p.row is None and p.point_id not in driver.written]
            if jobs:
                backend = backend or _backend(workers, cluster)
                driver.run(backend, make_batches(jobs, spec, backend.capacity, chunk))
            if not driver.interrupted:  # every point's row: in point order
                done = {**stored, **driver.rows}
                store.rewrite([done[p.point_id] for p in points if p.point_id in done])
    except KeyboardInterrupt as exc:
        driver.interrupted = True
        terminated = isinstance(exc, Terminated)
    finally:
        driver.progress.close()
        store.close()
    rows_by_id = {**stored, **driver.rows}
    rows = [rows_by_id[p.point_id] for p in points if p.point_id in rows_by_id]
    outcome = SweepOutcome(
        out,
        spec,
        points,
        rows,
        _counts(rows),
        driver.ran,
        time.perf_counter() - t0,
        repeats,
        driver.interrupted,
        terminated=terminated,
        dropped=tuple(store.dropped),
    )
    return outcome, backend


def make_batches(
    points: list[Point], spec: SweepSpec, capacity: int, chunk: int = MAX_CHUNK
) -> list[Batch]:
    """Batches of whole systems (the values of the axes that set hardware, cost or solver
    fields), about two per worker and at most `chunk` points, each in workload order.

    Why: a worker keeps its kernel menus by value (solver/cost/memo.py), and those are
    shared by the points of one system across workloads (a decode GEMM's menu does not
    depend on the context length), while the generated graphs are shared by the points of
    one workload (worker._workload). Batches of one workload over many systems had every
    worker build every system's menus; a run of whole systems builds them in one process,
    and workload order inside it meets each graph's points together."""
    if not points:
        return []
    system_axes = [i for i, a in enumerate(spec.axes) if a.field.parts[0][0] in NOT_WORKLOAD]
    systems: dict[tuple[str, ...], list[Point]] = {}
    for p in points:
        systems.setdefault(tuple(p.labels[i] for i in system_axes), []).append(p)
    size = max(1, min(chunk, math.ceil(len(points) / max(1, 2 * capacity))))
    runs: list[list[Point]] = [[]]
    for group in systems.values():
        if runs[-1] and len(runs[-1]) + len(group) > size:
            runs.append([])
        runs[-1].extend(group)
    workload_rank: dict[str, int] = {}
    for p in points:
        workload_rank.setdefault(p.workload_key, len(workload_rank))
    batches: list[Batch] = []
    for run in runs:
        run.sort(key=lambda p: workload_rank[p.workload_key])  # stable: systems in order
        for start in range(0, len(run), size):
            jobs = tuple(
                Job(p.point_id, p.cells(spec.axis_names), p.text, p.workload_key, p.data)
                for p in run[start : start + size]
            )
            batches.append(_batch(len(batches), jobs, spec))
    return batches


def _batch(batch_id: int, jobs: tuple[Job, ...], spec: SweepSpec) -> Batch:
    return Batch(batch_id, str(spec.base_path), jobs, spec.filters)


def _backend(workers: int, cluster: str | None) -> Any:
    if cluster:
        return DaskBackend(cluster)
    return LocalBackend(workers or os.cpu_count() or 1)


def _starts_early(out: Path, cluster: str | None) -> bool:
    """Whether to start local workers before the points expand: a new sweep (no
    results.csv to resume from) has every valid point to solve."""
    return not cluster and not (out / RESULTS_NAME).exists()


# Worker processes dying before their batch's first point, this many times in a row, stop
# the sweep: they die as they start (a script that runs a sweep at import, unguarded, has
# every spawned worker start that sweep again), and retrying would never end.
DEAD_AT_START = 3
WORKERS_DIE_AT_START = (
    "the sweep's worker processes die as they start, before any point (their own error is "
    "printed above): a Python script that calls mapshard.sweep must make the call under "
    '`if __name__ == "__main__":`, since each worker is a new process that imports it'
)


class _Driver:
    def __init__(
        self,
        spec: SweepSpec,
        store: ResultsStore,
        stored: dict[str, dict[str, str]],
        points: list[Point],
        quiet: bool,
    ):
        self.spec = spec
        self.store = store
        ids = {p.point_id for p in points}
        self.written: set[str] = {pid for pid in stored if pid in ids}
        self.rows: dict[str, dict[str, str]] = {}
        self.counts: dict[str, int] = _counts([stored[pid] for pid in self.written])
        self.ran = 0
        self.interrupted = False
        self.progress = SweepProgress(len(points), len(self.written), enabled=not quiet)
        self.quiet = quiet
        self._next_id = 0
        self._started: dict[int, set[str]] = {}
        self._dead_at_start = 0  # worker deaths in a row before a batch's first point

    def record(self, row: dict[str, str]) -> None:
        """Store a finished point's row (once)."""
        self.record_many([row])

    def record_many(self, rows: list[dict[str, str]]) -> None:
        """Store finished points' rows (each once), in one write to results.csv."""
        new: dict[str, dict[str, str]] = {}
        for row in rows:
            if row["point_id"] not in self.written:
                new.setdefault(row["point_id"], row)
        if not new:
            return
        self.store.append_many(list(new.values()))
        for pid, row in new.items():
            self.written.add(pid)
            self.rows[pid] = row
            self.ran += 1
            self.counts[row["status"]] = self.counts.get(row["status"], 0) + 1
        self.progress.update(len(self.written), self.counts)

    def _handle(self, messages: list[Any]) -> None:
        rows = []
        for msg in messages:
            kind = msg[0]
            if kind == "start":
                self._started.setdefault(int(msg[1]), set()).add(str(msg[2]))
            elif kind == "row":
                rows.append(dict(msg[2]))
        self.record_many(rows)

    def run(self, backend: Any, batches: list[Batch]) -> None:
        self._next_id = len(batches)
        pending: deque[tuple[Batch, bool]] = deque((b, False) for b in batches)
        inflight: dict[Any, tuple[Batch, bool]] = {}
        limit = max(2, 2 * backend.capacity)
        try:
            while pending or inflight:
                while pending and len(inflight) < limit:
                    batch, solo = pending.popleft()
                    todo = tuple(j for j in batch.jobs if j.point_id not in self.written)
                    if todo:
                        batch = _batch(batch.batch_id, todo, self.spec)
                        inflight[backend.submit(batch, solo=solo)] = (batch, solo)
                self._handle(backend.reports(0))
                for fut in backend.wait(list(inflight), timeout=0.25):
                    batch, solo = inflight.pop(fut)
                    self._finish(backend, fut, batch, solo, pending)
                self.progress.update(len(self.written), self.counts, force=False)
            self._handle(backend.reports(0))
        except BaseException:  # an interrupt or a bug: the workers stop now
            backend.close(kill=True)
            raise

    def _finish(
        self, backend: Any, fut: Any, batch: Batch, solo: bool, pending: deque[tuple[Batch, bool]]
    ) -> None:
        try:
            rows, exc = fut.result(), None
        except Exception as e:  # a dead worker, or a bug outside solve_point
            rows, exc = None, e
        if exc is not None and backend.is_crash(exc):
            time.sleep(0.1)  # let the dead worker's last reports arrive
        self._handle(backend.reports(0))
        backend.forget(fut)
        if rows is not None:
            self._dead_at_start = 0
            self.record_many(rows)
            return
        assert exc is not None
        left = [j for j in batch.jobs if j.point_id not in self.written]
        if not backend.is_crash(exc):
            for j in left:
                self.record(_failed(j, f"{type(exc).__name__}: {exc}"))
            return
        if solo:
            for j in left:
                self.record(
                    _failed(
                        j,
                        "the worker process died while solving this point "
                        f"(twice; {type(exc).__name__})",
                    )
                )
            return
        started = self._started.get(batch.batch_id, set())
        running = [j for j in left if j.point_id in started]
        rest = tuple(j for j in left if j.point_id not in started)
        if not running:  # died before its first point: retried, but not for ever
            self._dead_at_start += 1
            if self._dead_at_start >= DEAD_AT_START:
                raise SetupError([WORKERS_DIE_AT_START])
        if rest:
            pending.appendleft((self._new_batch(rest), False))
        for j in running:  # run alone: a second crash names the point
            pending.appendleft((self._new_batch((j,)), True))

    def _new_batch(self, jobs: tuple[Job, ...]) -> Batch:
        self._next_id += 1
        return _batch(self._next_id, jobs, self.spec)


def _failed(job: Job, reason: str) -> dict[str, str]:
    row = dict(job.cells)
    row.update({"status": "failed", "reason": reason})
    row.update({m: "" for m in metrics.RECORDED})
    return row


def _counts(rows: list[dict[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the driver like Ctrl-C (rows kept, workers killed), as Terminated so
    that the command exits 143."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Terminated

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
