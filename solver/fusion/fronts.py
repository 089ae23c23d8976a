"""Pareto fronts of (buffer bytes, traffic bytes): the knapsack states a fixed-sharding
segment sweep (solver.fusion.segment_price) carries, merged kernel by kernel.

Rows by increasing buffer and falling traffic: the last row that fits a cap has the least
traffic under it.
"""

from __future__ import annotations

import math

import numpy as np


def merge(front: np.ndarray, choices: np.ndarray, cap: float) -> np.ndarray:
    """The Pareto front of every (front row + choice) whose buffer fits `cap`."""
    if len(choices) == 1:
        return shifted(front, [choices[0]], cap)
    # choice-major: each choice's copy of the front is a sorted run, which a stable sort
    # (timsort) merges in O(N log C) where lexsort sorts everything
    buf = (choices[:, None, 0] + front[None, :, 0]).ravel()
    traffic = (choices[:, None, 1] + front[None, :, 1]).ravel()
    keep = buf <= cap
    buf, traffic = buf[keep], traffic[keep]
    if not len(buf):
        return np.zeros((0, 2))
    # array methods and preallocated outputs, not numpy's function wrappers: a sweep makes
    # hundreds of thousands of small merges, where the wrappers cost more than the work
    order = buf.argsort(kind="stable")
    buf, traffic = buf[order], traffic[order]
    best_before = np.empty_like(traffic)  # least traffic of the rows before each
    best_before[0] = np.inf
    np.minimum.accumulate(traffic[:-1], out=best_before[1:])
    kept = traffic < best_before
    buf, traffic = buf[kept], traffic[kept]
    # rows of equal buffer: the kept ones fall in traffic, so the last has the least (the
    # one row `pareto`'s (buffer, traffic) order keeps)
    last = np.empty(len(buf), dtype=bool)
    np.not_equal(buf[1:], buf[:-1], out=last[:-1])
    last[-1] = True
    return _rows(buf[last], traffic[last])


def _rows(buf: np.ndarray, traffic: np.ndarray) -> np.ndarray:
    """The (buffer, traffic) rows of two equal-length columns."""
    out = np.empty((len(buf), 2))
    out[:, 0] = buf
    out[:, 1] = traffic
    return out


def merge_all(front: np.ndarray, choices: list[np.ndarray], cap: float) -> np.ndarray:
    """`merge` of each of `choices` in turn. A run of one-choice kernels (most kernels of
    a fixed sharding have one tiling) moves the front by constants, added in the same
    order (the same sums, bit for bit), and is cut and filtered once at its end: a row
    over `cap` or dominated after one move stays so after the next (buffers only grow,
    equal numbers stay equal under the same additions)."""
    run: list[np.ndarray] = []
    for c in choices:
        if len(c) == 1:
            run.append(c[0])
            continue
        if run:
            front, run = shifted(front, run, cap), []
        front = merge(front, c, cap)
    return shifted(front, run, cap) if run else front


def shifted(front: np.ndarray, moves: list[np.ndarray], cap: float) -> np.ndarray:
    """The front moved by each (buffer, traffic) of `moves` in turn, cut at `cap`. A front
    moved by a constant stays sorted and non-dominated unless rounding makes two
    neighbours equal; only then the full filter runs, so the rows are those `pareto`
    keeps, bit for bit."""
    buf, traffic = front[:, 0], front[:, 1]
    for move in moves:
        buf, traffic = buf + move[0], traffic + move[1]
    fits = int(buf.searchsorted(cap, side="right"))
    buf, traffic = buf[:fits], traffic[:fits]
    if fits > 1 and not (
        bool((buf[1:] > buf[:-1]).all()) and bool((traffic[1:] < traffic[:-1]).all())
    ):
        return pareto(_rows(buf, traffic))
    return _rows(buf, traffic)


def thinned(front: np.ndarray, slice_bytes: float) -> np.ndarray:
    """Of a front's states (by increasing buffer, falling traffic) whose buffers share one
    slice of `slice_bytes`, the last (least traffic)."""
    if len(front) < 2:
        return front
    slices = np.floor(front[:, 0] / slice_bytes)
    last = np.append(slices[1:] != slices[:-1], True)
    return front[last]


def least_traffic(front: np.ndarray, choices: np.ndarray, cap: float) -> float:
    """min over a front row and a choice whose buffers fit `cap` of their traffic sum."""
    if not len(front):
        return math.inf
    # front rows by increasing buffer and decreasing traffic: the last that fits
    idx = front[:, 0].searchsorted(cap - choices[:, 0], side="right") - 1
    fits = idx >= 0
    if not fits.any():
        return math.inf
    return float((front[idx[fits], 1] + choices[fits, 1]).min())


def pareto(points: np.ndarray) -> np.ndarray:
    """Rows (buffer, traffic) not dominated, by increasing buffer (so the last row has the
    least traffic)."""
    if not len(points):
        return points.reshape(0, 2)
    order = np.lexsort((points[:, 1], points[:, 0]))
    points = points[order]
    best_before = np.minimum.accumulate(np.concatenate(([np.inf], points[:-1, 1])))
    return points[points[:, 1] < best_before]
