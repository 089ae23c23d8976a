"""Cheap separable lower bounds of every segment [i, j) of a kernel order, row by row in
numpy (O(n) array work per start position, no Python loop over segments: a 96-layer
model in one graph has ~4,000 kernels and ~8 million segments that fit some SRAM).

Each kernel contributes its own least compute (with its launch overhead), least network
time, least buffer and least traffic per operand, whatever the other kernels take, so every
sum below is at most the segment's true value under any choice of options:
  - SRAM: the kernels' least buffers, a producer whose first consumer is in the segment
    also holding its least stream tile (buffer + output tile); a segment whose least SRAM
    exceeds the chip's cannot be one configuration (inf);
  - DRAM traffic: every operand that is not an intermediate of the segment (weights, inputs
    from producers before i) at its least, and the output of a kernel while some consumer
    is past the segment's end (or it has none: the output leaves the chip);
  - the configuration latency rule (solver.cost.latency) of those sums, monotone in each.
The row of start i is the running sums over j of per-kernel terms, so three incremental
arrays carry what depends on i: each kernel's input traffic from producers before i, the
stream tiles of producers at or after i, and a difference array of pending outputs.
"""

from __future__ import annotations

import math

import numpy as np

from solver.cost.problem import MappingProblem


class _Terms:
    """Per-kernel least values (index k) that the rows add up."""

    def __init__(self, problem: MappingProblem):
        kernels, n = problem.kernels, len(problem.kernels)
        self.comp = np.array([min(o.compute_s for o in m.options) + m.overhead_s for m in kernels])
        self.overhead = np.array([m.overhead_s for m in kernels], dtype=float)
        self.net = np.array([min(o.network_s for o in m.options) for m in kernels])
        self.buf = np.array([min(o.buffer_bytes for o in m.options) for m in kernels])
        fused = np.array(
            [min(o.buffer_bytes + o.out_tile_bytes for o in m.options) for m in kernels]
        )
        self.first_consumer = np.full(n, -1)
        self.last_use = np.full(n, n)  # n: the output always leaves the chip
        for k in range(n):
            outs = [e.dst for e in problem.out_edges(k)]
            if outs:
                self.first_consumer[k], self.last_use[k] = min(outs), max(outs)
        self.stream_extra = fused - self.buf
        self.weights = np.zeros(n)
        self.outputs = np.zeros(n)
        self.inputs_from: list[list[tuple[int, float]]] = [[] for _ in range(n)]  # by producer
        for k, menu in enumerate(kernels):
            fed = {e.dst_operand: e.src for e in problem.in_edges(k)}
            names = {name for o in menu.options for name, _ in o.traffic}
            for name in sorted(names):
                least = min(o.traffic_of(name) for o in menu.options)
                if name == menu.output_operand:
                    continue
                if name in fed:
                    self.inputs_from[fed[name]].append((k, least))
                else:
                    self.weights[k] += least
            self.outputs[k] = min(o.traffic_of(menu.output_operand) for o in menu.options)


def separable_rows(problem: MappingProblem) -> np.ndarray:
    """values[i, j] (seconds): the separable lower bound of segment [i, j), inf where its
    least SRAM exceeds the chip's or j <= i."""
    n = len(problem.kernels)
    t = _Terms(problem)
    values = np.full((n, n + 1), math.inf)
    limit = problem.sram_bytes * (1 + 1e-9)
    bw = problem.dram_bandwidth_Bps
    # inputs[k]: traffic of k's inputs whose producer is before the current start i
    inputs = np.zeros(n)
    for src in range(n):
        for k, least in t.inputs_from[src]:
            inputs[k] += least
    stream = np.zeros(n)  # stream tiles of producers >= i, at their first consumer
    pending = np.zeros(n + 2)  # +out at k + 1, -out at last_use + 1, kernels >= i
    for i in range(n - 1, -1, -1):
        for k, least in t.inputs_from[i]:
            inputs[k] -= least  # producer i is no longer before the start
        if t.first_consumer[i] >= 0:
            stream[t.first_consumer[i]] += t.stream_extra[i]
        pending[i + 1] += t.outputs[i]
        pending[t.last_use[i] + 1] -= t.outputs[i]
        sram = np.cumsum(t.buf[i:] + stream[i:])
        over = np.nonzero(sram > limit)[0]
        stop = int(over[0]) if len(over) else n - i  # segments [i, i + 1 .. i + stop]
        if stop == 0:
            continue
        end = i + stop
        c = np.cumsum(t.comp[i:end])
        w = np.cumsum(t.net[i:end])
        m = np.cumsum(t.weights[i:end] + inputs[i:end])
        m += np.cumsum(pending[i + 1 : end + 1])
        mem = m / bw
        o = np.cumsum(t.overhead[i:end]) if problem.serialize_network else 0.0
        values[i, i + 1 : end + 1] = problem.latency(c, mem, w, o)
    return values
