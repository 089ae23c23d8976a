"""DFModel's configurations when a configuration's cost is not a sum over its kernels
(lane/stage compute: the slowest kernel on its share of the cores; HPL: the slower of two
links): an exact search over every assignment DFModel allows.

An assignment with Config[u] <= Config[v] on every edge is a chain of down-sets (ideals)
I_0 <= I_1 <= ... of the graph, configuration j = I_j minus I_(j-1), and a configuration's
cost under DFModel's rules depends on its kernel set alone (its D matrix charges every
edge with exactly one end in it). So the least sum over at most C configurations is a
shortest path over (ideal, configurations used): exact, every set priced once. DFModel's
other rows are filters on a set: the forward/backward split of a training graph, the
configuration a kernel pins, and its num_input rule (a kernel with num_input set never
shares a configuration with one without).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from schema.errors import SetupError

MAX_IDEALS = 5000  # beyond this the enumeration is too slow for a run: refused


@dataclass(frozen=True)
class Rules:
    """What DFModel allows a configuration j (0-based) to hold."""

    num_configs: int
    pins: tuple[int, ...] = ()  # per kernel, -1 = free
    backward: tuple[bool, ...] = ()  # per kernel; empty = no training split
    streamed: tuple[bool, ...] = ()  # per kernel: num_input set

    def split(self) -> tuple[int, int]:
        """(last forward configuration, first backward one) of DFModel's training split."""
        c = self.num_configs
        if c % 2 == 0:
            return c // 2 - 1, c // 2
        return c // 2, c // 2

    def allows(self, j: int, members: Sequence[int]) -> bool:
        if self.pins and any(self.pins[k] not in (-1, j) for k in members):
            return False
        if self.streamed and len({self.streamed[k] for k in members}) > 1:
            return False
        if self.backward and any(self.backward):
            last_fwd, first_bwd = self.split()
            for k in members:
                if (self.backward[k] and j < first_bwd) or (not self.backward[k] and j > last_fwd):
                    return False
        return True


def ideals(n: int, preds: Sequence[int]) -> list[int]:
    """Every down-set of the graph as a bit mask (kernel k = bit k), smallest first."""
    seen, frontier = {0}, [0]
    while frontier:
        nxt = []
        for ideal in frontier:
            for k in range(n):
                if not ideal >> k & 1 and preds[k] & ~ideal == 0:
                    grown = ideal | 1 << k
                    if grown not in seen:
                        seen.add(grown)
                        nxt.append(grown)
        if len(seen) > MAX_IDEALS:
            raise SetupError(
                f"--cost-model dfmodel: the graph has more than {MAX_IDEALS} down-sets; "
                "DFModel's lane/stage and HPL configurations are searched exhaustively, "
                "which is too slow for it"
            )
        frontier = nxt
    return sorted(seen, key=lambda m: (bin(m).count("1"), m))


def members(mask: int) -> tuple[int, ...]:
    """The kernels of a set mask in increasing order (one step per member, not per kernel
    of the graph)."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return tuple(out)


def best_assignment(
    n: int,
    preds: Sequence[int],
    rules: Rules,
    cost: Callable[[tuple[int, ...]], float],
) -> tuple[float, list[list[int]]]:
    """(least total, its non-empty configurations in order) over every assignment of the n
    kernels to at most rules.num_configs configurations; `cost(members)` is a set's
    latency (math.inf: not allowed). (math.inf, []) when none is allowed."""
    full = (1 << n) - 1
    cache: dict[int, float] = {}

    def price(mask: int) -> float:
        if mask not in cache:
            cache[mask] = cost(members(mask))
        return cache[mask]

    layer: dict[int, tuple[float, list[int]]] = {0: (0.0, [])}
    for steps in transitions(n, tuple(preds), rules):
        nxt: dict[int, tuple[float, list[int]]] = {}
        for low, high in steps:
            if low not in layer:
                continue
            total, path = layer[low]
            step = 0.0 if high == low else price(high & ~low)
            if step == math.inf:
                continue
            if high not in nxt or total + step < nxt[high][0]:
                nxt[high] = (total + step, path + [high & ~low])
        layer = nxt
    if full not in layer:
        return math.inf, []
    total, masks = layer[full]
    return total, [[k for k in range(n) if m >> k & 1] for m in masks if m]


@functools.lru_cache(maxsize=8)
def transitions(
    n: int, preds: tuple[int, ...], rules: Rules
) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per configuration j, every (ideal before, ideal after) step the rules allow (the
    same whatever the prices: computed once, e.g. for every num_tile tried)."""
    full = (1 << n) - 1
    downs = ideals(n, preds)
    reach = {0}
    out = []
    for j in range(rules.num_configs):
        last = j == rules.num_configs - 1
        steps = []
        for low in sorted(reach):
            for high in (full,) if last else downs:
                if high & low != low:
                    continue
                members = tuple(k for k in range(n) if (high & ~low) >> k & 1)
                if high == low or rules.allows(j, members):
                    steps.append((low, high))
        reach = {high for _, high in steps}
        out.append(tuple(steps))
    return tuple(out)


def in_order(n: int, preds: Sequence[int]) -> list[list[int]] | None:
    """DFModel's Config[i] = i (kernel by kernel, or as many configurations as kernels):
    one configuration per kernel in the file's order; None when an edge runs backwards."""
    if any(preds[k] >> j & 1 for k in range(n) for j in range(k, n)):
        return None
    return [[k] for k in range(n)]
