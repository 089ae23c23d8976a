"""DFModel's lane/stage compute (`compute_util: 0`), for `--cost-model dfmodel`.

Source: fengqian-ayce/DFModel src/intra_chip.py @ 04f93d5 (its `compute_util == 0` rows);
facts only, the code is MapShard's. Each kernel of a configuration gets Par_lane x
Par_stage cores (integers >= 1), at most `core` in the configuration together; with the
per-chip shard (M, K, N), lane width W (systolic_width), stage width H (systolic_height):
  SIMD:                 cycles = ceil(M / (lane W)) x N                  (stage = 1)
  SYSTOLIC:             cycles = ceil(M / (lane W)) x ceil(N / (stage H)) x K
  SYSTOLIC, use_effective_stage (effective_stage E):
                        cycles = ceil(M / (lane W)) x ceil(K / (stage E)) x N
  x num_input (DFModel's streaming count, 1 when unset) -- at 04f93d5; DFModel's newer
  schema (its SSM inputs, commit b9a3e2f) instead multiplies the configuration's II by its
  largest num_input and runs such a configuration as one tile (solver/dfmodel/lane_search.py)
A configuration's compute = max over its kernels of cycles x num_tile / freq (GHz -> ns).
DFModel chooses the split of the cores; here it is exact: f_k(t) = the least cycles of
kernel k on at most t cores, and the least T with sum_k min{t : f_k(t) <= T} <= core is the
configuration's min-max (every f_k is non-increasing, so the test is monotone in T).

A chip with `pmu > 0` adds DFModel's place-and-route rows, which couple the core split
with the buffers: solver/dfmodel/pmu.py (a MILP per assignment).
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LaneKernel:
    """One kernel's least cycles (x num_input) on at most t cores, t = 1..core; the list
    is stored negated so that bisect finds the fewest cores reaching a target."""

    neg_cycles: tuple[int, ...]  # index t - 1: -f(t), non-decreasing

    def cycles(self, cores: int) -> int:
        return -self.neg_cycles[min(cores, len(self.neg_cycles)) - 1]

    def cores_for(self, target: int) -> int:
        """The fewest cores whose cycles are <= target (len + 1 when none)."""
        return bisect.bisect_left(self.neg_cycles, -target) + 1


@functools.lru_cache(maxsize=4096)
def lane_kernel(
    shard: tuple[int, int, int],
    simd: bool,
    effective: int,
    widths: tuple[int, int],
    cores: int,
    num_input: int,
) -> LaneKernel:
    """f(t) for t = 1..cores. `effective` > 0: the use_effective_stage form with E =
    effective; `widths`: (lane width W, stage width H)."""
    m, k, n = shard
    lane_w, stage_w = widths
    best = [math.inf] * (cores + 1)
    lanes = min(cores, max(1, math.ceil(m / lane_w)))
    for lane in range(1, lanes + 1):
        mf = math.ceil(m / (lane * lane_w))
        if simd:
            best[lane] = min(best[lane], mf * n)
            continue
        depth, width = (k, effective) if effective > 0 else (n, stage_w)
        stages = min(cores // lane, max(1, math.ceil(depth / width)))
        for stage in range(1, stages + 1):
            nf = math.ceil(depth / (stage * width))
            cyc = mf * nf * (n if effective > 0 else k)
            best[lane * stage] = min(best[lane * stage], cyc)
    out, low = [], math.inf
    for t in range(1, cores + 1):
        low = min(low, best[t])
        out.append(-int(low) * max(num_input, 1))
    return LaneKernel(tuple(out))


_SEEN: dict[tuple[int, ...], tuple[tuple[LaneKernel, ...], tuple[int, list[int]]]] = {}


def config_cycles(kernels: Sequence[LaneKernel], cores: int) -> tuple[int, list[int]]:
    """(the configuration's least max-cycles, the cores each kernel takes); (-1, []) when
    the kernels outnumber the cores (each needs one). Remembered per set of tables (the
    exhaustive searches ask for the same set under every num_tile)."""
    key = (cores, *map(id, kernels))
    held = _SEEN.get(key)
    if held is not None and all(a is b for a, b in zip(held[0], kernels)):
        return held[1][0], list(held[1][1])
    got = _config_cycles(kernels, cores)
    if len(_SEEN) > 200_000:
        _SEEN.clear()
    _SEEN[key] = (tuple(kernels), got)
    return got[0], list(got[1])


def _config_cycles(kernels: Sequence[LaneKernel], cores: int) -> tuple[int, list[int]]:
    if not kernels:
        return 0, []
    if len(kernels) > cores:
        return -1, []
    # the least integer target that fits is a value some f_k takes (each kernel's core
    # count only changes there); everything on one core always fits, all cores bound it
    lo = max(-lk.neg_cycles[-1] for lk in kernels)
    hi = max(-lk.neg_cycles[0] for lk in kernels)

    def fits(target: int) -> bool:
        return sum(lk.cores_for(target) for lk in kernels) <= cores

    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo, [lk.cores_for(lo) for lk in kernels]
