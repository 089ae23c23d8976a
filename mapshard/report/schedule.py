"""The non-interleaved 1F1B pipeline schedule, timed pass by pass (for trace.json).

Stage s of S runs min(S-s-1, M) forward passes, then alternates one forward and one backward,
then the remaining backwards. A forward of micro-batch m waits for the same forward on the
stage before, a backward for the same backward on the stage after. Every pass is timed as
start = max(the stage is free, its input is ready), end = start + its duration, exactly the
arithmetic of a pass-by-pass event loop, but computed for all stages at once: each round
times, on every stage whose next input is ready, its next pass. A round is a few array
operations over the stages, and a schedule of S stages and M micro-batches takes about
2M + 2S rounds (DFModel's GPT-3 1T: 128 stages x 3,072 micro-batches, 786,432 passes, in
6,398 rounds rather than as many Python steps as passes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Schedule:
    """Row s: stage s's passes in the order it runs them (2M columns)."""

    forward: np.ndarray  # bool: a forward pass (else backward)
    micro: np.ndarray  # int: its micro-batch
    start_s: np.ndarray
    end_s: np.ndarray

    @property
    def makespan_s(self) -> float:
        return float(self.end_s.max()) if self.end_s.size else 0.0


def pass_order(stages: int, micro: int) -> tuple[np.ndarray, np.ndarray]:
    """(forward, micro-batch) of pass p on stage s, as [S, 2M] arrays: warm-up forwards
    0..w-1 (w = min(S-s-1, M)), then F(w+i), B(i) alternating, then the last backwards."""
    p = np.arange(2 * micro)[None, :]
    w = np.minimum(stages - 1 - np.arange(stages), micro)[:, None]
    i = p - w
    warm = p < w
    steady = (p >= w) & (p < 2 * micro - w)
    forward = warm | (steady & (i % 2 == 0))
    m = np.where(warm, p, np.where(steady, np.where(i % 2 == 0, w + i // 2, i // 2), p - micro))
    return forward, m


def _position(stage: np.ndarray, m: np.ndarray, forward: bool, stages: int, micro: int):
    """Column of the forward (or backward) of micro-batch m on `stage` (pass_order's)."""
    w = np.minimum(stages - 1 - stage, micro)
    if forward:
        return np.where(m < w, m, 2 * m - w)
    return np.where(m < micro - w, w + 2 * m + 1, micro + m)


def one_f_one_b(stages: int, micro: int, fwd_s: list[float], bwd_s: list[float]) -> Schedule:
    """Start and end of every pass of the 1F1B schedule (`fwd_s[s]`, `bwd_s[s]`: stage s's
    forward and backward pass times)."""
    forward, m = pass_order(stages, micro)
    n = 2 * micro
    row = n + 1  # a stage's passes, then a slot that is never ready (the stage is done)
    stage = np.repeat(np.arange(stages), n).reshape(stages, n)
    zero, never = stages * row, stages * row + 1  # slots holding 0.0 (no wait) and NaN
    f_dep = np.where(
        stage > 0, (stage - 1) * row + _position(stage - 1, m, True, stages, micro), zero
    )
    b_dep = np.where(
        stage < stages - 1, (stage + 1) * row + _position(stage + 1, m, False, stages, micro), zero
    )
    dep = np.full((stages, row), never)
    dep[:, :n] = np.where(forward, f_dep, b_dep)
    dep = dep.ravel()
    prev = np.arange(stages * row) - 1  # the pass before on the same stage
    prev[::row] = zero  # a stage's first pass: free from 0
    dur = np.zeros((stages, row))
    dur[:, :n] = np.where(forward, np.asarray(fwd_s)[:, None], np.asarray(bwd_s)[:, None])
    dur = dur.ravel()
    end = np.full(stages * row + 2, np.nan)
    end[zero] = 0.0
    start = np.zeros(stages * row)
    ptr = np.arange(stages) * row  # each stage's next pass
    left = stages * n
    while left:
        # every stage at once; where the input is not ready the NaN it reads is written
        # back over the NaN already there, and the stage stays on that pass
        ready = end[dep[ptr]]
        begin = np.maximum(end[prev[ptr]], ready)
        start[ptr] = begin
        end[ptr] = begin + dur[ptr]
        ok = ready == ready
        done = int(np.count_nonzero(ok))
        assert done, "1F1B schedule deadlocked"
        ptr += ok
        left -= done
    return Schedule(
        forward,
        m,
        start.reshape(stages, row)[:, :n],
        end[: stages * row].reshape(stages, row)[:, :n],
    )
