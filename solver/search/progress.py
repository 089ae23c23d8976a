"""The outer search's progress report: what the progress line shows while it runs."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SearchProgress:
    """Where the outer search stands, after each parallel choice it settles."""

    choices_done: int
    choices_total: int
    best_latency_s: float  # inf until a first plan
    bound_s: float  # least latency any unsettled or solved choice could still reach

    def describe(self) -> str:
        text = f"choice {self.choices_done}/{self.choices_total}"
        if not math.isfinite(self.best_latency_s):
            return text + f", no plan yet, roofline bound {self.bound_s:.4g} s"
        gap = max(0.0, 1 - self.bound_s / self.best_latency_s) if self.best_latency_s else 0
        best = f", best {self.best_latency_s:.4g} s, bound {self.bound_s:.4g} s"
        return text + best + f" (gap {gap:.1%})"
