"""Where batches run: local worker processes (default) or a Dask distributed cluster.

Both backends offer the same small interface to the driver: submit a batch (optionally
"solo": alone, to find which point kills its worker), wait for futures, collect the
per-point reports workers send while a batch runs, tell a worker crash from other errors,
and close (killing local workers on an interrupt).

Local: `concurrent.futures.ProcessPoolExecutor` with the "spawn" start method (HiGHS fixes
its thread count per process; spawn gives each worker a clean interpreter). Workers report
over a private Unix socket, one connection per worker (no lock shared between processes, so
a worker killed mid-report cannot block the others). A pool broken by a dead worker is
replaced; solo batches run in a separate one-worker pool so a second crash names its point.

Dask: `distributed.Client(address)`; tasks report through `Worker.log_event` on a topic the
client subscribes to. Dask re-runs a task whose worker died; `KilledWorker` (the task
killed several workers) is the crash signal. Use one thread per Dask worker: a worker runs
one solve at a time (Pyomo and HiGHS keep per-process state).
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import queue
import socket
import threading
import uuid
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from mapshard.sweeps.worker import Batch, init_local_worker, ready, run_batch
from schema.errors import SetupError

TERM_GRACE_S = 2.0  # a stopped worker's time to exit cleanly before it is killed


class _Inbox:
    """A Unix-socket listener in the driver; one reader thread per worker connection."""

    def __init__(self) -> None:
        from multiprocessing.connection import Listener

        self.authkey = os.urandom(16)
        self.listener = Listener(family="AF_UNIX", backlog=128, authkey=self.authkey)
        self.address: str = str(self.listener.address)
        self.messages: queue.Queue[Any] = queue.Queue()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn = self.listener.accept()
            except OSError:
                if self._closed:
                    return
                continue
            except Exception:  # a worker died during the handshake
                continue
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: Any) -> None:
        try:
            while True:
                self.messages.put(conn.recv())
        except Exception:  # EOF (worker exited) or a message cut by a kill
            conn.close()

    def close(self) -> None:
        self._closed = True
        try:  # wake the accept() call so its thread ends
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(self.address)
        except OSError:
            pass
        try:
            self.listener.close()
        except OSError:
            pass


def drain(q: queue.Queue[Any], timeout: float) -> list[Any]:
    """Everything in the queue, waiting up to `timeout` for the first item."""
    out = []
    try:
        out.append(q.get(timeout=timeout) if timeout > 0 else q.get_nowait())
        while True:
            out.append(q.get_nowait())
    except queue.Empty:
        return out


class LocalBackend:
    name = "local"

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self.inbox = _Inbox()
        self._ctx = multiprocessing.get_context("spawn")
        self._main = self._pool(self.workers)
        self._solo: cf.ProcessPoolExecutor | None = None
        self._pool_of: dict[cf.Future[Any], cf.ProcessPoolExecutor] = {}
        self._closed = False

    def _pool(self, n: int) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(
            max_workers=n,
            mp_context=self._ctx,
            initializer=init_local_worker,
            initargs=(self.inbox.address, self.inbox.authkey, os.getpid()),
        )

    def start(self, n: int) -> None:
        """Start `n` workers (at most all) now, not on the first batches: a spawned
        worker's imports take a second, spent while the driver expands the points."""
        # the pool adds a process for each task submitted while none is idle
        for _ in range(min(n, self.workers)):
            self._main.submit(ready)

    @property
    def capacity(self) -> int:
        return self.workers

    def submit(self, batch: Batch, solo: bool = False) -> cf.Future[Any]:
        if solo:
            if self._solo is None:
                self._solo = self._pool(1)
            pool = self._solo
        else:
            pool = self._main
        fut = pool.submit(run_batch, batch)
        self._pool_of[fut] = pool
        return fut

    def wait(self, futures: list[Any], timeout: float) -> list[Any]:
        done, _ = cf.wait(futures, timeout=timeout, return_when=cf.FIRST_COMPLETED)
        return list(done)

    def reports(self, timeout: float) -> list[Any]:
        return drain(self.inbox.messages, timeout)

    def is_crash(self, exc: BaseException) -> bool:
        return isinstance(exc, BrokenProcessPool)

    def forget(self, fut: Any) -> None:
        """A finished future; replace its pool if that pool broke."""
        pool = self._pool_of.pop(fut, None)
        exc = fut.exception() if fut.done() and not fut.cancelled() else None
        if pool is None or not isinstance(exc, BrokenProcessPool):
            return
        if pool is self._main:
            _kill(pool)
            self._main = self._pool(self.workers)
        elif pool is self._solo:
            _kill(pool)
            self._solo = None

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        """`fn` of each item, computed in the workers side by side (after the sweep: the
        plots of its outputs), in order; computed here when the pool is broken."""
        try:
            return list(self._main.map(fn, items))
        except BrokenProcessPool:
            return [fn(item) for item in items]

    def close(self, kill: bool = False) -> None:
        """Stop the workers (`kill`: now, else after their tasks); a second call does
        nothing."""
        if self._closed:
            return
        self._closed = True
        for pool in (self._main, self._solo):
            if pool is None:
                continue
            if kill:
                _kill(pool)
            else:
                pool.shutdown(wait=True)
        self.inbox.close()


def _kill(pool: cf.ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel queued work and end its processes (an interrupt, or a pool
    broken by a dead worker): SIGTERM first, which a worker turns into a clean exit
    (worker._exit_cleanly), then SIGKILL for one still running after TERM_GRACE_S (a solve
    deep in HiGHS)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        try:
            proc.terminate()
        except (OSError, ValueError):
            pass
    for proc in processes:
        try:
            proc.join(timeout=TERM_GRACE_S)
            if proc.is_alive():
                proc.kill()
                proc.join()  # SIGKILL cannot be caught: it ends, however loaded the machine
        except (OSError, ValueError, AssertionError):
            pass
    pool.shutdown(wait=True)  # the pool's manager thread sees the dead workers and cleans up


def _check_address(address: str) -> None:
    """ValueError for an address no Client could use, found before a Client starts its
    event-loop thread (on a loaded machine that start alone can outlast Dask's own 10 s
    wait, and then the user's mistake surfaces as Dask's AssertionError)."""
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.security import Security

    scheme, location = parse_address(address)
    registry.get_backend(scheme)  # ValueError: unknown address scheme
    if scheme in ("tcp", "tls", "ws", "wss"):
        parse_host_port(location)  # ValueError: missing port number
    if scheme in ("tls", "wss") and Security().get_connection_args("client")["ssl_context"] is None:
        raise ValueError(f"{scheme}:// without an ssl_context: Dask's TLS configuration is unset")


class DaskBackend:
    name = "dask"

    def __init__(self, address: str):
        try:
            from distributed import Client
        except ImportError:
            raise SetupError(
                "--cluster needs dask.distributed: pip install 'mapshard[cluster]'"
            ) from None
        try:
            _check_address(address)
            self.client = Client(address, timeout="20s")
        except (ValueError, TypeError) as exc:  # no port, an unknown protocol, TLS unset
            raise SetupError(
                f"--cluster {address}: not a usable Dask scheduler address ({exc}); give "
                "tcp://HOST:PORT, e.g. tcp://127.0.0.1:8786 (tls:// needs Dask's TLS "
                "configuration)"
            ) from None
        except (OSError, TimeoutError) as exc:
            raise SetupError(
                f"--cluster {address}: cannot reach the Dask scheduler "
                f"({exc}); start one bound to a private address, e.g. `dask scheduler --host "
                "127.0.0.1` on this machine (see README: Sweeps on a Dask cluster)"
            ) from None
        self.topic = f"mapshard-sweep-{uuid.uuid4().hex}"
        self.messages: queue.Queue[Any] = queue.Queue()
        self.client.subscribe_topic(self.topic, self._on_event)
        self._closed = False

    def _on_event(self, event: Any) -> None:
        msg = event[1] if isinstance(event, (tuple, list)) and len(event) == 2 else event
        self.messages.put(tuple(msg))

    @property
    def capacity(self) -> int:
        try:
            return max(1, sum(self.client.nthreads().values()))
        except Exception:
            return 1

    def submit(self, batch: Batch, solo: bool = False) -> Any:
        from dataclasses import replace

        return self.client.submit(run_batch, replace(batch, topic=self.topic), pure=False)

    def wait(self, futures: list[Any], timeout: float) -> list[Any]:
        from distributed import wait

        try:
            done, _ = wait(futures, timeout=timeout, return_when="FIRST_COMPLETED")
        except TimeoutError:
            return []
        return list(done)

    def reports(self, timeout: float) -> list[Any]:
        return drain(self.messages, timeout)

    def is_crash(self, exc: BaseException) -> bool:
        from distributed.scheduler import KilledWorker

        return isinstance(exc, KilledWorker)

    def forget(self, fut: Any) -> None:
        fut.release()

    def start(self, n: int) -> None:
        """Nothing to start: the cluster's workers are running."""

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        """`fn` of each item, computed here (a cluster's workers need not have what the
        outputs need, matplotlib)."""
        return [fn(item) for item in items]

    def close(self, kill: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.client.unsubscribe_topic(self.topic)
        except Exception:
            pass
        self.client.close()
