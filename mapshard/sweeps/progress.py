"""The sweep's progress bar on stderr (one line redrawn in place: done/total, rate, ETA and
counts by status) and its final summary line. The bar is drawn only on a terminal and never
with --quiet; the summary is printed unless --quiet."""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

from mapshard.sweeps.metrics import STATUSES


def fmt_duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def fmt_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{s} {counts[s]}" for s in STATUSES if counts.get(s))


class SweepProgress:
    def __init__(
        self,
        total: int,
        already: int,
        enabled: bool = True,
        stream: TextIO | None = None,
        min_interval_s: float = 0.2,
    ):
        self.stream = stream or sys.stderr
        self.enabled = enabled and self.stream.isatty()
        self.total = total
        self.already = already  # finished in earlier runs
        self.done = already
        self.start = time.perf_counter()
        self.min_interval_s = min_interval_s
        self._last = 0.0
        self._width = 0

    def rebase(self, done: int) -> None:
        """Count rate and ETA from here (points known without solving are not progress)."""
        self.already = self.done = done
        self.start = time.perf_counter()

    def update(self, done: int, counts: dict[str, int], force: bool = False) -> None:
        self.done = done
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self._last < self.min_interval_s:
            return
        self._last = now
        line = self.line(counts, now)
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def line(self, counts: dict[str, int], now: float | None = None) -> str:
        now = time.perf_counter() if now is None else now
        elapsed = now - self.start
        ran = self.done - self.already
        rate = ran / elapsed if elapsed > 0 else 0.0
        left = self.total - self.done
        eta = fmt_duration(left / rate) if rate > 0 else "?"
        cols = shutil.get_terminal_size((100, 20)).columns
        frac = self.done / self.total if self.total else 1.0
        bar_w = max(10, min(30, cols - 70))
        filled = int(round(frac * bar_w))
        text = (
            f"[{'#' * filled}{'.' * (bar_w - filled)}] {self.done}/{self.total} "
            f"{frac:4.0%}  {rate:.2f} pt/s  ETA {eta}  {fmt_counts(counts)}"
        )
        return text[: cols - 1]

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def summary_line(
    total: int, counts: dict[str, int], ran: int, elapsed_s: float, repeats: int = 0
) -> str:
    rate = ran / elapsed_s if elapsed_s > 0 else 0.0
    earlier = total - ran
    text = (
        f"sweep: {total} points ({fmt_counts(counts) or 'none'}); {ran} run in "
        f"{fmt_duration(elapsed_s)}, {rate:.2f} points/s"
    )
    if earlier:
        text += f"; {earlier} from earlier runs"
    if repeats:
        text += f"; {repeats} combinations repeated an earlier point's setup"
    return text
