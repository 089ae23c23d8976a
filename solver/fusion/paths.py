"""Shortest paths over segment values: values[i, j] is a bound (or price) of segment
[i, j) of a kernel order, and a segmentation is a path 0 -> n of at most K segments."""

from __future__ import annotations

import math

import numpy as np


def backward(values: np.ndarray, allowed: np.ndarray | None, K: int) -> np.ndarray:
    """h[pos, used]: a lower bound of the cost to finish from pos having used `used`
    configs (exact at [0, 0]). Without pins, first the shortest path with no limit on the
    count: where its path from 0 (the one best_path follows) uses at most K segments it is
    also the optimum under the limit, and everywhere a lower bound of the limited one (a
    relaxation), so h is that, whatever `used` is: O(n x reach) instead of O(n x reach x
    K) (K = 576 on a 96-layer model)."""
    n = values.shape[0]
    # segments past a row's last finite bound cannot be on a path: leave them out (the
    # same minimum, without an n x n x K sweep on graphs of thousands of kernels)
    finite = np.isfinite(values)
    ends = np.where(finite.any(axis=1), n - np.argmax(finite[:, ::-1], axis=1), 0)
    if allowed is None:
        h1 = unlimited_paths(values, ends)
        if segment_count(values, h1) <= K:
            return np.broadcast_to(h1[:, None], (n + 1, K + 1))
    h = np.full((n + 1, K + 1), math.inf)
    h[n, :] = 0.0
    for pos in range(n - 1, -1, -1):
        end = int(ends[pos]) + 1
        if end <= pos + 1:
            continue
        cand = values[pos, pos + 1 : end, None] + h[pos + 1 : end, 1:]
        if allowed is not None:
            cand = np.where(allowed[pos, pos + 1 : end, :], cand, math.inf)
        h[pos, :K] = cand.min(axis=0)
    return h


def unlimited_paths(values: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """h[pos]: the least bound to finish from pos, any number of segments."""
    n = values.shape[0]
    h = np.full(n + 1, math.inf)
    h[n] = 0.0
    for pos in range(n - 1, -1, -1):
        end = int(ends[pos]) + 1
        if end > pos + 1:
            h[pos] = (values[pos, pos + 1 : end] + h[pos + 1 : end]).min()
    return h


def segment_count(values: np.ndarray, h: np.ndarray) -> float:
    """Segments on the path from 0 that best_path follows under h (inf: none)."""
    n = values.shape[0]
    if not math.isfinite(h[0]):
        return math.inf
    pos, count = 0, 0
    while pos < n:
        pos += 1 + int(np.argmin(values[pos, pos + 1 :] + h[pos + 1 :]))
        count += 1
    return count
