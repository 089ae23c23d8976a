"""What runs in a worker process: a batch of points (runner.make_batches: a run of whole
systems across the sweep's workloads).

The workload is generated once per workload key and kept in a per-process cache bounded by
its kernels, so the points of a key (in this batch and later ones landing in the same
process) pay graph generation, Pyomo import and HiGHS start-up once. The solver keeps, per
process, the kernel menus and conversion tables it built (solver/cost/memo.py) and,
switched on here, the solutions of graphs whose search finished (solver/search/
solve_memo.py), each under the full value of its inputs: a later point with equal inputs
reuses them and gets the same numbers.
Each point reports ("start", batch, point_id) before and ("row", batch, row) after it is
solved, through a sink set up per process (a socket to the driver for local workers, a Dask
event topic on a cluster), so the driver can store a row the moment its point finishes and
knows which point a dead worker was running.
"""

from __future__ import annotations

import gc
import importlib
import os
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from mapshard import pipeline
from mapshard.scenario import Loaded
from mapshard.sweeps import metrics
from mapshard.sweeps.points import pre_solve_metrics, resolved
from mapshard.sweeps.spec import FilterSpec
from schema import setup_pb2
from schema.errors import InfeasibleError, NoPlanError, SetupError
from solver.api import SOLUTIONS

# Generated workloads kept per process, bounded by their kernels (the memory they take): a
# batch of whole systems (runner.make_batches) meets each of the sweep's workloads once per
# system, so a worker holding them all generates each once.
_CACHE_KERNELS = 50_000
# key -> (the Workload or the exception, its kernels)
_WORKLOADS: OrderedDict[str, tuple[Any, int]] = OrderedDict()
_LOCK = threading.Lock()  # one solve at a time per process (HiGHS/Pyomo state is global)
_SINK: Callable[[tuple[Any, ...]], None] | None = None
# Young-generation collections every GC_ALLOCATIONS net allocations, not Python's 700: a
# worker keeps memos of hundreds of thousands of objects, which the older generations'
# collections scan again and again (benchmarks/sweep.py's points in one process: 5.6% of
# the CPU of decode points and 8.3% of whole-request points at 700, 2.2% and 2.9% here).
# Only cyclic garbage waits longer: reference counting frees the rest at once.
GC_ALLOCATIONS = 10_000


@dataclass(frozen=True)
class Job:
    point_id: str
    cells: dict[str, str]  # point_id, index, axis values
    text: str  # the point's Setup, canonical text
    workload_key: str
    data: bytes = b""  # the same Setup, serialized (b"" = parse `text`)


@dataclass(frozen=True)
class Batch:
    batch_id: int
    base_path: str  # setup file that relative paths are relative to
    jobs: tuple[Job, ...]
    filters: tuple[FilterSpec, ...]  # every filter is checked again on the solved plan
    topic: str = ""  # Dask event topic for per-point reports ("" = the process sink)


def run_batch(batch: Batch) -> list[dict[str, str]]:
    """Solve every point of a batch; returns the rows (also reported one by one)."""
    SOLUTIONS.enabled = True  # this process runs sweep points: reuse equal graphs' solutions
    gc.set_threshold(GC_ALLOCATIONS, *gc.get_threshold()[1:])
    rows = []
    for job in batch.jobs:
        _report(batch, ("start", batch.batch_id, job.point_id))
        row = solve_point(job, Path(batch.base_path), batch.filters)
        _report(batch, ("row", batch.batch_id, row))
        rows.append(row)
    return rows


def solve_point(job: Job, base_path: Path, filters: tuple[FilterSpec, ...]) -> dict[str, str]:
    """One point's results row. Never raises for a bad, infeasible or unsolvable point."""
    t0 = time.perf_counter()
    values: dict[str, Any] = {}
    try:
        # validated when the sweep expanded its points (sweep.points.check_point)
        loaded = Loaded(_setup(job), base_path)
        system = resolved(loaded)
        # known before the solve: an infeasible point's row says what it would rest on too
        values["chip_calibration"] = system.chip.calibration.status
        values["cost_basis"] = metrics.cost_basis(
            system, pre_solve_metrics(system).get("system_cost")
        )
        workload = _workload(job.workload_key, loaded, system)
        scenario = pipeline.assemble(loaded, system, workload)
        with _LOCK:
            plan = pipeline.plan(scenario)
    except SetupError as exc:
        return _row(job, "failed", "; ".join(exc.problems), values)
    except InfeasibleError as exc:
        reason = f"{exc.resource}: {exc.reason}"
        values["solve_time_s"] = time.perf_counter() - t0
        return _row(
            job, "infeasible", reason + (f"; {exc.suggestion}" if exc.suggestion else ""), values
        )
    except NoPlanError as exc:
        values["solve_time_s"] = time.perf_counter() - t0
        return _row(job, "time_limit", f"no plan within the time limit: {exc}", values)
    except Exception as exc:  # a bug on one point must not stop the sweep: record it
        return _row(job, "failed", f"{type(exc).__name__}: {exc}", values)
    values = metrics.plan_metrics(plan, metrics.cost_basis(system, plan.system_cost))
    status = plan.stats.status if plan.stats.status in metrics.SOLVED else "optimal"
    for f in filters:
        value = values.get(f.metric)
        why = metrics.violated(
            f.metric, value if isinstance(value, (int, float)) else None, f.min, f.max
        )
        if why:
            return _row(job, "filtered", why, values)
    return _row(job, status, "", values)


def _setup(job: Job) -> setup_pb2.Setup:
    """The point's Setup: from its binary form when the driver sent one (the same message
    as its canonical text, parsed in microseconds), else from the text."""
    if job.data:
        return setup_pb2.Setup.FromString(job.data)
    return text_format.Parse(job.text, setup_pb2.Setup())


def _workload(key: str, loaded: Any, system: Any) -> Any:
    """The generated workload of a key on this many chips, built once per process (errors
    are cached too). The chip count is part of the key: a generator may size its graph by
    the machine (DLRM's global batch), and the workload key leaves `system` out."""
    key = f"{key}/{system.num_chips}"
    with _LOCK:
        if key in _WORKLOADS:
            _WORKLOADS.move_to_end(key)
            cached = _WORKLOADS[key][0]
        else:
            try:
                cached = pipeline.generate(loaded, system)
            except Exception as exc:  # re-raised for every point of this key
                cached = exc
            kernels = 1
            if not isinstance(cached, Exception):
                kernels += sum(len(p.graph.kernels) for p in cached.phases)
            _WORKLOADS[key] = (cached, kernels)
            while len(_WORKLOADS) > 1 and sum(n for _, n in _WORKLOADS.values()) > _CACHE_KERNELS:
                _WORKLOADS.popitem(last=False)
    if isinstance(cached, Exception):
        raise cached
    return cached


def _row(job: Job, status: str, reason: str, values: dict[str, Any]) -> dict[str, str]:
    row = dict(job.cells)
    row["status"] = status
    row["reason"] = " ".join(reason.split())
    for name in metrics.RECORDED:
        row[name] = metrics.format_value(values.get(name))
    return row


def _report(batch: Batch, message: tuple[Any, ...]) -> None:
    if batch.topic:
        from distributed import get_worker

        get_worker().log_event(batch.topic, list(message))
    elif _SINK is not None:
        _SINK(message)


# ---------------------------------------------------------------------------------------
# Local worker processes
# ---------------------------------------------------------------------------------------


def init_local_worker(address: str, authkey: bytes, driver_pid: int) -> None:
    """ProcessPoolExecutor initializer: Ctrl-C is the driver's business; SIGTERM (the
    driver stopping the pool) ends the worker through Python's own exit, so what the
    solver stack registered with multiprocessing's resource tracker (Pyomo's lock) is
    released rather than reported leaked; reports go over a private socket to the driver;
    the process exits when the driver is gone."""
    from multiprocessing.connection import Client

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_cleanly)
    conn = Client(address, family="AF_UNIX", authkey=authkey)

    def send(message: tuple[Any, ...]) -> None:
        try:
            conn.send(message)
        except OSError:  # the driver is gone
            os._exit(1)

    global _SINK
    _SINK = send
    threading.Thread(target=_watch_parent, args=(driver_pid,), daemon=True).start()
    _warm_up()


def ready() -> None:
    """A task that does nothing: submitted to start a worker process before its first
    batch (sweeps.backends)."""


def _exit_cleanly(signum: int, frame: object) -> None:
    sys.exit(0)


def _warm_up() -> None:
    """Load HiGHS before the first point, so a first MILP solve's time is the solve's.
    Only HiGHS: the default backend calls it directly (solver.milp.linear), and Pyomo, a
    quarter of a second per worker, is imported by the setups that ask for it."""
    try:
        importlib.import_module("highspy")
    except ImportError:  # the solve that needs it says so
        pass


def _watch_parent(driver_pid: int) -> None:
    while True:
        if os.getppid() != driver_pid:
            os._exit(1)
        time.sleep(0.5)
