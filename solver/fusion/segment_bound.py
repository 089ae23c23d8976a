"""Lower bounds of a segment's latency that see the SRAM limit, for any sharding.

A configuration's latency is max(C, M, N) (overlap), C + M + N (no overlap) or
overhead + max(C - overhead, M) + N (serialised network): in every case at least a
weighted sum w_C*C + w_M*M + w_N*N (+ a constant) for weights from a small fixed set.
A weighted sum is separable over the kernels (a layout conversion counted at its cheapest
producer sharding), so its least value with every kernel's buffers fitting the SRAM
together is a multiple-choice knapsack. Buffers are rounded down to 1/GRID of the SRAM,
which only enlarges the feasible set, so the knapsack's optimum, solved exactly by a
dynamic program over the grid, is still a lower bound. Where the SRAM binds this is much
tighter than per-kernel minima (the knapsack forces small tiles, hence more traffic).
The segments from one start position share their prefix, so one sweep bounds them all.
"""

from __future__ import annotations

import math

import numpy as np

from solver.cost.latency import bound_weights
from solver.cost.problem import MappingProblem
from solver.fusion.segment_price import KernelTraffic

GRID = 512  # buffer units per SRAM


class KnapsackBounds:
    """Rows of bounds by start position, computed on first use."""

    def __init__(self, problem: MappingProblem):
        self.problem = problem
        self.weights, self.constant_weight = bound_weights(
            problem.overlap, problem.serialize_network
        )
        # bytes per buffer unit (no SRAM: any buffer overflows the grid)
        self.unit = problem.sram_bytes / GRID if problem.sram_bytes > 0 else 1e-30
        self.n = len(problem.kernels)
        self.kernels = [_KernelValues(problem, k, self.weights, self.unit) for k in range(self.n)]
        # (producer, consumer) -> weighted extra conversion [producer sharding a, weight,
        # consumer sharding b] over the cheapest producer sharding
        self.delta: dict[tuple[int, int], np.ndarray] = {}
        for e in problem.edges:
            if not e.lead:
                continue  # a conversion group is bounded by its lead edge alone
            conv = np.array(e.conv)
            extra = conv - conv.min(axis=0, keepdims=True)
            d = extra[:, None, :] * self.weights[None, :, 2:3]
            key = (e.src, e.dst)
            self.delta[key] = self.delta.get(key, 0.0) + d

    def row(self, i: int) -> np.ndarray:
        """bounds[j] (seconds) of segments [i, j) for j in 0..n (inf where no tiling fits
        or j <= i)."""
        n, W = self.n, len(self.weights)
        out = np.full(n + 1, math.inf)
        # least weighted value with at most b buffer units, by the sharding of `last`
        f = np.zeros((1, W, GRID + 1))
        last = -1
        pending: list[int] = []
        overhead = 0.0
        for j in range(i + 1, n + 1):
            k = j - 1
            overhead += self.problem.kernels[k].overhead_s
            pending.append(k)
            still = []
            for p in pending:
                if self.kernels[p].settled(j):
                    f, last = self._merge(f, last, p, i, j), p
                else:
                    still.append(p)
            pending = still
            g, g_last = f, last
            for p in pending[:-1]:
                g, g_last = self._merge(g, g_last, p, i, j), p
            if pending:
                best = self._merge(g, g_last, pending[-1], i, j, only_full=True)
            else:
                best = g[:, :, GRID].min(axis=0)
            if not np.isfinite(best).any():
                break  # buffers only grow with j: no longer segment from i fits either
            out[j] = float((best + self.constant_weight * overhead).max())
        return out

    def _merge(
        self, f: np.ndarray, last: int, k: int, i: int, j: int, only_full: bool = False
    ) -> np.ndarray:
        """f with kernel k added (new state: k's sharding). The conversion on edges from
        `last` to k is exact in the sharding states; other edges are at their cheapest.
        only_full: just the values at the full SRAM, least over k's shardings (W,)."""
        kv = self.kernels[k]
        delta = self.delta.get((last, k))
        loose = f.min(axis=0) if delta is None else None
        results = []
        for b, (units, values) in enumerate(kv.choices(i, j)):
            if delta is None:
                h = loose
            else:
                h = (f + delta[:, :, b][:, :, None]).min(axis=0)
            if only_full:
                fits = units <= GRID
                if fits.any():
                    results.append((h[:, GRID - units[fits]] + values[:, fits]).min(axis=1))
            else:
                results.append(_merge(h, units, values))
        if only_full:
            if not results:
                return np.full(len(self.weights), math.inf)
            return np.min(results, axis=0)
        return np.stack(results)


class _KernelValues:
    """One kernel's options as (buffer units, weighted values), by its status in a segment."""

    def __init__(self, problem: MappingProblem, k: int, weights: np.ndarray, unit: float):
        menu = problem.kernels[k]
        self.traffic = KernelTraffic(problem, k)
        self.bandwidth_Bps = problem.dram_bandwidth_Bps
        self.weights = weights
        options = menu.options
        add_overhead = 0.0 if problem.serialize_network else menu.overhead_s
        self.compute = np.array([o.compute_s + add_overhead for o in options])
        network = np.array([o.network_s for o in options])
        sharding = np.array([menu.sharding_index(o) for o in range(len(options))])
        for e in problem.conv_in_edges(k):
            if not e.lead:
                continue  # a conversion group is bounded by its lead edge alone
            cheapest = np.array(e.conv).min(axis=0)  # per consumer sharding
            network = network + cheapest[sharding]
        self.network = network
        self.unit = unit
        self.sharding = sharding
        self.num_shardings = len(menu.shardings)
        self._cache: dict[tuple, list[tuple[np.ndarray, np.ndarray]]] = {}

    def settled(self, j: int) -> bool:
        return self.traffic.settled(j)

    def choices(self, i: int, j: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per sharding: (units per choice, values (weights x choices)), one choice per
        distinct unit count (its least value for every weight)."""
        key = self.traffic.status(i, j)
        if key not in self._cache:
            buffer, traffic = self.traffic.buffer_traffic(key)
            memory = traffic / self.bandwidth_Bps
            units = np.floor(buffer / self.unit * (1 - 1e-12))
            units = np.minimum(units, GRID + 1).astype(np.int64)  # past the grid: never fits
            values = self.weights @ np.stack([self.compute, memory, self.network])
            per_sharding = []
            for s in range(self.num_shardings):
                mine = self.sharding == s
                distinct = np.unique(units[mine])
                best = np.stack(
                    [values[:, mine & (units == u)].min(axis=1) for u in distinct], axis=1
                )
                # a choice with more units and no smaller value for any weight never
                # lowers the knapsack: keep the Pareto choices only (exact, and fewer
                # merges where the fused-status menus are long)
                seen = np.minimum.accumulate(
                    np.concatenate([np.full((len(best), 1), math.inf), best[:, :-1]], axis=1),
                    axis=1,
                )
                keep = (best < seen).any(axis=0)
                per_sharding.append((distinct[keep], best[:, keep]))
            self._cache[key] = per_sharding
        return self._cache[key]


def _merge(f: np.ndarray, units: np.ndarray, values: np.ndarray) -> np.ndarray:
    """f'[w, b] = min over choices c with units[c] <= b of f[w, b - units[c]] + values[w, c]."""
    out = np.full_like(f, math.inf)
    for c, u in enumerate(units):
        if u > GRID:
            continue
        np.minimum(out[:, u:], f[:, : GRID + 1 - u] + values[:, c : c + 1], out=out[:, u:])
    return out
