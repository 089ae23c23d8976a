"""Lower bounds of a segment's latency that see the SRAM limit, for any sharding.

A configuration's latency is max(C, M, N) (overlap), C + M + N (no overlap) or
overhead + max(C - overhead, M) + N (serialised network; with a hidden share h of the
shorter part, overhead + max(X, N) + (1 - h) min(X, N)): in every case at least a
weighted sum w_C*C + w_M*M + w_N*N (+ a constant) for weights from a small fixed set
(under overlap, any convex combination: on large problems a finer grid's points that bind
on a few probe rows are added).
A weighted sum is separable over the kernels (a layout conversion counted at its cheapest
producer sharding), so its least value with every kernel's buffers fitting the SRAM
together is a multiple-choice knapsack. Buffers are rounded down to 1/GRID of the SRAM,
which only enlarges the feasible set, so the knapsack's optimum, solved exactly by a
dynamic program over the grid, is still a lower bound. Where the SRAM binds this is much
tighter than per-kernel minima (the knapsack forces small tiles, hence more traffic).
The segments from one start position share their prefix, so one sweep bounds them all.
Every sweep checks the valve's deadline: past it, the probe keeps the weights it has and a
row leaves the segments it did not reach at 0 (no bound, still a valid one), and the
search that asked stops with stop reason "time_limit".
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from solver.cost.latency import bound_weights
from solver.cost.problem import MappingProblem
from solver.fusion.kernel_traffic import KernelTraffic
from solver.options import past

GRID = 512  # buffer units per SRAM
PROBE_KERNELS = 100  # from this size on, the weights are chosen by probe rows
PROBE_STEPS = 8  # the probe's grid: weights in multiples of 1/8
PROBE_ROWS = 3  # start positions probed, spread over the order


def simplex_grid(steps: int) -> np.ndarray:
    """Every (w_C, w_M, w_N) >= 0 summing to 1 in multiples of 1/steps."""
    return np.array(
        [
            (a / steps, b / steps, (steps - a - b) / steps)
            for a in range(steps + 1)
            for b in range(steps + 1 - a)
        ]
    )


class KnapsackBounds:
    """Rows of bounds by start position, computed on first use."""

    def __init__(
        self, problem: MappingProblem, probe_from: int | None = None, deadline: float = math.inf
    ):
        """probe_from: the fewest kernels for which probe rows pick extra weights
        (default PROBE_KERNELS); deadline: the valve (perf_counter seconds)."""
        self.problem = problem
        self.deadline = deadline
        self.tripped = False  # a sweep stopped at the deadline (its rest bounded by 0)
        self.weights, self.constant_weight = bound_weights(
            problem.overlap, problem.serialize_network, problem.network_hidden_share
        )
        # bytes per buffer unit (no SRAM: any buffer overflows the grid)
        self.unit = problem.sram_bytes / GRID if problem.sram_bytes > 0 else 1e-30
        self.n = len(problem.kernels)
        self.kernels = [_KernelValues(problem, k, self.unit) for k in range(self.n)]
        # (producer, consumer) -> extra conversion [producer sharding a, consumer sharding
        # b] over the cheapest producer sharding (weighted by w_N in `_reweigh`)
        self.extra: dict[tuple[int, int], np.ndarray] = {}
        for e in problem.edges:
            if not e.lead:
                continue  # a conversion group is bounded by its lead edge alone
            conv = np.array(e.conv)
            key = (e.src, e.dst)
            self.extra[key] = self.extra.get(key, 0.0) + (conv - conv.min(axis=0, keepdims=True))
        probe_from = PROBE_KERNELS if probe_from is None else probe_from
        # under overlap the latency max(C, M, N) is at least any convex combination
        simplex = problem.overlap and not problem.serialize_network
        if simplex and self.n >= probe_from:
            self.weights = self._probed_weights()
        self._reweigh(self.weights)

    def _reweigh(self, weights: np.ndarray) -> None:
        """Bound with weight vectors `weights` (any point of the simplex gives a valid
        bound; more points, a tighter one)."""
        self.weights = weights
        for kv in self.kernels:
            kv.reweigh(weights)
        self.delta = {
            key: extra[:, None, :] * weights[None, :, 2:3] for key, extra in self.extra.items()
        }

    def _probed_weights(self) -> np.ndarray:
        """The fixed grid plus the points of a finer grid that give some segment its
        bound on a few probe rows. Which balance of compute, memory and network binds
        is a property of the problem (a 200-kernel chain under a tight SRAM: memory
        against layout conversions, between the coarse grid's points, 15% below the finer
        grid's bound); the finer grid on every row would cost 3x."""
        fine = simplex_grid(PROBE_STEPS)
        self._reweigh(fine)
        used = np.zeros(len(fine), dtype=bool)
        for i in np.linspace(0, self.n - 1, PROBE_ROWS).astype(int):
            for values in self._row_values(int(i)):
                used[int(np.argmax(values))] = True
            if self.tripped:
                break  # the points found so far: any subset of the simplex bounds
        p = self.problem
        coarse = bound_weights(p.overlap, p.serialize_network, p.network_hidden_share)[0]
        extra = [w for w, u in zip(fine, used) if u and not np.isclose(coarse, w).all(1).any()]
        return np.concatenate([coarse, np.array(extra).reshape(-1, 3)])

    def row(self, i: int) -> np.ndarray:
        """bounds[j] (seconds) of segments [i, j) for j in 0..n (inf where no tiling fits
        or j <= i)."""
        out = np.full(self.n + 1, math.inf)
        reached = i
        for j, values in enumerate(self._row_values(i), start=i + 1):
            out[j] = float(values.max())
            reached = j
        if self.tripped:
            out[reached + 1 :] = 0.0  # not swept: no bound (inf would claim no fit)
        return out

    def _row_values(self, i: int) -> Iterator[np.ndarray]:
        """Per segment [i, j), j = i + 1, ... while one fits: its bound under each weight;
        stops early, setting `tripped`, once the deadline has passed."""
        n = self.n
        # least weighted value with at most b buffer units, by the sharding of `last`
        f = np.zeros((1, len(self.weights), GRID + 1))
        last = -1
        pending: list[int] = []
        overhead = 0.0
        for j in range(i + 1, n + 1):
            if past(self.deadline):
                self.tripped = True
                return
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
                if past(self.deadline):  # thousands of unsettled kernels re-merged per j
                    self.tripped = True
                    return
                g, g_last = self._merge(g, g_last, p, i, j), p
            if pending:
                best = self._merge(g, g_last, pending[-1], i, j, only_full=True)
            else:
                best = g[:, :, GRID].min(axis=0)
            if not np.isfinite(best).any():
                return  # buffers only grow with j: no longer segment from i fits either
            yield best + self.constant_weight * overhead

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

    def __init__(self, problem: MappingProblem, k: int, unit: float):
        menu = problem.kernels[k]
        self.traffic = KernelTraffic(problem, k)
        self.bandwidth_Bps = problem.dram_bandwidth_Bps
        self.weights = np.ones((1, 3))
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

    def reweigh(self, weights: np.ndarray) -> None:
        self.weights = weights
        self._cache.clear()

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
