"""THE configuration-latency rule: the one place that says how a configuration's compute,
memory and network times (and its kernels' launch overheads) make its latency.

  overlap (default):     L = max(C, M, N)
  no overlap:            L = C + M + N
  serialised network:    L = overhead + max(C - overhead, M) + N
                         (GPU kernel-by-kernel: the collective runs after the compute on one
                         stream and the launch overheads add)

C always counts the kernels' launch overheads. Every evaluator calls `config_latency`; the
MILP writes the same rule as epigraph rows from `epigraph_rows`; the knapsack lower bounds
take their weights from `bound_weights`.
"""

from __future__ import annotations

import numpy as np

COMPUTE, MEMORY, NETWORK = "compute", "memory", "network"


Seconds = float | np.ndarray


def config_latency(
    compute_s: Seconds,
    memory_s: Seconds,
    network_s: Seconds,
    overhead_s: Seconds,
    overlap: bool,
    serialize_network: bool = False,
) -> Seconds:
    """Latency of one configuration (seconds); `compute_s` includes `overhead_s`.
    Elementwise when any argument is a numpy array (the exact kernel-by-kernel tables, the
    separable segment bounds' rows), with the builtin max for plain numbers (hot loops)."""
    arrays = any(isinstance(x, np.ndarray) for x in (compute_s, memory_s, network_s, overhead_s))
    top = np.maximum if arrays else max
    if serialize_network:
        return overhead_s + top(compute_s - overhead_s, memory_s) + network_s
    if overlap:
        return top(top(compute_s, memory_s), network_s)
    return compute_s + memory_s + network_s


def epigraph_rows(
    overlap: bool, serialize_network: bool = False
) -> list[tuple[tuple[str, ...], bool]]:
    """The rule as linear lower bounds of L: rows (parts, with_overhead) meaning
    L >= sum of `parts` (+ the overhead when `with_overhead`). Their maximum is
    `config_latency` (for the serialised network, max(C + N, overhead + M + N))."""
    if serialize_network:
        return [((COMPUTE, NETWORK), False), ((MEMORY, NETWORK), True)]
    if overlap:
        return [((COMPUTE,), False), ((MEMORY,), False), ((NETWORK,), False)]
    return [((COMPUTE, MEMORY, NETWORK), False)]


def bound_weights(overlap: bool, serialize_network: bool = False) -> tuple[np.ndarray, float]:
    """Weight vectors (w_C, w_M, w_N) with latency >= w . (C, M, N) + c * overhead, and c.
    C counts kernel overheads, except under a serialised network where they are the
    constant term."""
    if serialize_network:
        lam = np.linspace(0.0, 1.0, 5)
        return np.stack([lam, 1 - lam, np.ones_like(lam)], axis=1), 1.0
    if not overlap:
        return np.ones((1, 3)), 0.0
    steps = 4
    grid = [
        (a / steps, b / steps, (steps - a - b) / steps)
        for a in range(steps + 1)
        for b in range(steps + 1 - a)
    ]
    return np.array(grid), 0.0
