"""One kernel's options as (buffer bytes, traffic bytes) points by its status in a
segment (its output read inside or not, its inputs fed from inside or not): what the
fixed-sharding knapsack of solver.fusion.segment_price merges and the SRAM knapsack bounds
of solver.fusion.segment_bound read."""

from __future__ import annotations

import bisect
import math

import numpy as np

from solver.check import hold_bytes
from solver.cost.problem import MappingProblem
from solver.fusion.fronts import pareto


class KernelTraffic:
    """One kernel's options as (buffer, traffic) points, by its status in a segment."""

    def __init__(self, problem: MappingProblem, k: int):
        menu = problem.kernels[k]
        consumers = [e.dst for e in problem.out_edges(k)]
        self.consumers = frozenset(consumers)
        self.first_use = min(consumers) if consumers else math.inf
        self.last_use = max(consumers) if consumers else math.inf
        self.has_consumers = bool(consumers)
        fed: dict[str, int] = {}  # operand -> its latest producer (fused if that one is)
        for e in problem.in_edges(k):
            fed[e.dst_operand] = max(fed.get(e.dst_operand, -1), e.src)
        self.fed = fed
        self.producers: dict[str, set[int]] = {}
        for e in problem.in_edges(k):
            self.producers.setdefault(e.dst_operand, set()).add(e.src)
        saved = {x: any(e.saved for e in problem.in_edges(k) if e.dst_operand == x) for x in fed}
        names = sorted({name for o in menu.options for name, _ in o.traffic})
        self.own = np.array(
            [
                sum(t for name, t in o.traffic if name not in fed and name != menu.output_operand)
                for o in menu.options
            ]
        )
        self.inputs = {
            name: np.array([o.traffic_of(name) for o in menu.options])
            for name in names
            if name in fed and name != menu.output_operand
        }
        # SRAM a fused input takes (solver.check.hold_bytes)
        self.hold = {
            name: np.array(
                [hold_bytes(problem, k, o, name, saved[name]) for o in range(len(menu.options))]
            )
            for name in self.inputs
        }
        self.output = np.array([o.traffic_of(menu.output_operand) for o in menu.options])
        self.buffer = np.array([o.buffer_bytes for o in menu.options])
        self.out_tile = np.array([o.out_tile_bytes for o in menu.options])
        self._cache: dict[tuple[bool, bool, frozenset[str]], np.ndarray] = {}
        # `choices` by (fused_out, internal_out, how many inputs are fed from before i):
        # the inputs fed from before i are the first of them by producer index
        self._fed_before = sorted(fed[name] for name in self.inputs)
        self._by_count: dict[tuple[bool, bool, int], np.ndarray] = {}

    def settled(self, j: int) -> bool:
        """Its status cannot change in any longer segment [i, j' >= j)."""
        return not self.has_consumers or self.last_use < j

    def status(self, i: int, j: int) -> tuple[bool, bool, frozenset[str]]:
        """In segment [i, j): (output feeds a consumer inside, output stays inside, inputs
        fed from before i)."""
        fused_out = self.first_use < j
        internal_out = self.has_consumers and self.last_use < j
        outside = frozenset(name for name in self.inputs if self.fed[name] < i)
        return fused_out, internal_out, outside

    def status_in(self, group: set[int]) -> tuple[bool, bool, frozenset[str]]:
        """`status` for a configuration that is any kernel set `group` (k in it)."""
        inside = self.consumers & group
        fused_out = bool(inside)
        internal_out = self.has_consumers and len(inside) == len(self.consumers)
        outside = frozenset(name for name in self.inputs if not self.producers[name] & group)
        return fused_out, internal_out, outside

    def buffer_traffic(
        self, status: tuple[bool, bool, frozenset[str]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per option: on-chip bytes and DRAM bytes in that status (solver.check's
        kernel_sram_bytes and kernel_memory_bytes)."""
        fused_out, internal_out, outside = status
        traffic = self.own.copy()
        sram = self.buffer + (self.out_tile if fused_out else 0.0)
        for name in self.inputs:
            if name in outside:
                traffic = traffic + self.inputs[name]
            else:
                sram = sram + self.hold[name]
        if not internal_out:
            traffic = traffic + self.output
        return sram, traffic

    def choices(self, i: int, j: int) -> np.ndarray:
        """The Pareto front of its options in segment [i, j) (`status`), looked up without
        building the status on the rows' hot path."""
        fused_out = self.first_use < j
        internal_out = self.has_consumers and self.last_use < j
        count = (fused_out, internal_out, bisect.bisect_left(self._fed_before, i))
        found = self._by_count.get(count)
        if found is None:
            key = self.status(i, j)
            if key not in self._cache:
                self._cache[key] = pareto(np.stack(self.buffer_traffic(key), axis=1))
            found = self._by_count[count] = self._cache[key]
        return found
