"""THE configuration-latency rule: the one place that says how a configuration's compute,
memory and network times (and its kernels' launch overheads) make its latency.

  overlap (default):     L = max(C, M, N)
  no overlap:            L = C + M + N
  serialised network:    L = overhead + max(C - overhead, M) + N
                         (GPU kernel-by-kernel: the collective runs after the compute on one
                         stream and the launch overheads add)
  ... with a hidden share h (the framework overlaps the collectives with the GEMMs that
  produce or consume them, e.g. Transformer Engine userbuffers): with X = max(C - overhead, M),
                         L = overhead + max(X, N) + (1 - h) min(X, N)
                         h = 0 is the serialised network, h = 1 hides the shorter one
                         entirely; between, the two contend for the SMs and memory.

C always counts the kernels' launch overheads. Every evaluator calls `config_latency`
(through `MappingProblem.latency`, which passes the problem's flags); the MILP writes the
same rule as epigraph rows from `epigraph_rows`; the knapsack lower bounds take their
weights from `bound_weights`.

The step assembly applies the same rule to the collectives a framework runs beside compute
(the DP gradient buckets and parameter gathers, the interleaved pipeline's transfers, the
context-parallel ring's hops): what such a collective of N seconds adds to a compute window
of W seconds is `exposed_under(N, W, h)` = max(X, N) + (1 - h) min(X, N) - X with X = W,
i.e. max(0, N - W) + (1 - h) min(N, W); h = 1 is perfect overlap.
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
    network_hidden: float = 0.0,
) -> Seconds:
    """Latency of one configuration (seconds); `compute_s` includes `overhead_s`;
    `network_hidden`: the hidden share h of a serialised network (module docstring).
    Elementwise when any argument is a numpy array (the exact kernel-by-kernel tables, the
    separable segment bounds' rows), with the builtin max for plain numbers (hot loops)."""
    arrays = any(isinstance(x, np.ndarray) for x in (compute_s, memory_s, network_s, overhead_s))
    top = np.maximum if arrays else max
    if serialize_network:
        work = top(compute_s - overhead_s, memory_s)
        if network_hidden > 0:
            low = np.minimum(work, network_s) if arrays else min(work, network_s)
            return overhead_s + top(work, network_s) + (1 - network_hidden) * low
        return overhead_s + work + network_s
    if overlap:
        return top(top(compute_s, memory_s), network_s)
    return compute_s + memory_s + network_s


def exposed_under(network_s: float, work_s: float, hidden: float = 1.0) -> float:
    """Seconds a collective of `network_s` running beside `work_s` of compute adds to it: the
    excess over the window plus the unhidden (1 - `hidden`) share of the overlap, where the
    two contend for the SMs and memory (module docstring)."""
    return network_s - hidden * min(max(network_s, 0.0), max(work_s, 0.0))


Row = tuple[dict[str, float], float]


def epigraph_rows(
    overlap: bool, serialize_network: bool = False, network_hidden: float = 0.0
) -> list[Row]:
    """The rule as linear lower bounds of L: rows (coefficients, overhead coefficient)
    meaning L >= sum of coefficient x part + overhead coefficient x overhead. Their maximum
    is `config_latency`: for the serialised network max(C + N, overhead + M + N); with a
    hidden share h and r = 1 - h, max(C + rN, overhead + M + rN, N + rC + h overhead,
    overhead + N + rM), the two max(X + rN, N + rX) pieces of each X."""
    if serialize_network:
        r = 1.0 - network_hidden
        rows: list[Row] = [({COMPUTE: 1.0, NETWORK: r}, 0.0), ({MEMORY: 1.0, NETWORK: r}, 1.0)]
        if network_hidden > 0:
            rows += [({COMPUTE: r, NETWORK: 1.0}, network_hidden), ({MEMORY: r, NETWORK: 1.0}, 1.0)]
        return rows
    if overlap:
        return [({COMPUTE: 1.0}, 0.0), ({MEMORY: 1.0}, 0.0), ({NETWORK: 1.0}, 0.0)]
    return [({COMPUTE: 1.0, MEMORY: 1.0, NETWORK: 1.0}, 0.0)]


def bound_weights(
    overlap: bool, serialize_network: bool = False, network_hidden: float = 0.0
) -> tuple[np.ndarray, float]:
    """Weight vectors (w_C, w_M, w_N) with latency >= w . (C, M, N) + c * overhead, and c.
    C counts kernel overheads, except under a serialised network where they are the
    constant term (there X >= lam C + (1 - lam) M, so with r = 1 - h both
    (lam, 1 - lam, r) and (r lam, r (1 - lam), 1) bound it)."""
    if serialize_network:
        lam = np.linspace(0.0, 1.0, 5)
        r = 1.0 - network_hidden
        rows = np.stack([lam, 1 - lam, np.full_like(lam, r)], axis=1)
        if network_hidden > 0:
            rows = np.concatenate([rows, np.stack([r * lam, r * (1 - lam), np.ones_like(lam)], 1)])
        return rows, 1.0
    if not overlap:
        return np.ones((1, 3)), 0.0
    steps = 4
    grid = [
        (a / steps, b / steps, (steps - a - b) / steps)
        for a in range(steps + 1)
        for b in range(steps + 1 - a)
    ]
    return np.array(grid), 0.0
