"""A heartbeat on stderr while a run takes longer than a second: elapsed time, the stage
(loading, generating, solving, what-if re-solves) and, from the planner's first report, the
parallel choices settled, the best plan so far, the proven bound and the gap (validate: the
row being predicted, of how many); silent for quick runs, with --quiet, and when stderr is
not a terminal."""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    def __init__(self, enabled: bool = True, delay_s: float = 1.0):
        self.enabled = enabled and sys.stderr.isatty()
        self.delay_s = delay_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._latest = "loading the scenario"

    def update(self, state: object) -> None:
        """Planner callback: keep the latest state's one-line description."""
        self._latest = state.describe()  # type: ignore[attr-defined]

    def say(self, line: str) -> None:
        """Any stage's own one-line description (validate: the row being predicted)."""
        self._latest = line

    def __enter__(self) -> Progress:
        if self.enabled:
            self._start = time.perf_counter()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        if self._stop.wait(self.delay_s):
            return
        while not self._stop.wait(0.5):
            elapsed = time.perf_counter() - self._start
            line = f"{elapsed:5.1f} s  {self._latest}"
            sys.stderr.write("\r" + line[:110].ljust(110))
            sys.stderr.flush()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            sys.stderr.write("\r" + " " * 110 + "\r")
            sys.stderr.flush()
