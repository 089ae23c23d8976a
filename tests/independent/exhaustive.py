"""Exhaustive optimum of a small instance with the independent evaluator (model.py).

Enumerates every configuration assignment (DATAFLOW: every Config[u] <= Config[v] on every
edge with at most num_config non-empty configurations; KERNEL_BY_KERNEL: one kernel per
configuration, in every order the edges allow), every sharding of every kernel, and every
integer tile (model.tiles). For fixed assignment and shardings, compute and network times
are fixed and a configuration's latency is non-decreasing in its DRAM bytes, so its tiles
are chosen by the least DRAM bytes that fit the SRAM: found exactly by merging each
member's (SRAM, DRAM) Pareto set (a dominated pair can never be the better choice).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from independent.instances import Instance
from independent.model import (
    Sharding,
    Tile,
    combine,
    compute_s,
    conversion,
    gemm_tile,
    kernel_in_config,
    local_sizes,
    own_network_s,
    parse_sharding,
    plan_latency,
    shardings,
    stream_tile,
    tiles,
)


@dataclass(frozen=True)
class Best:
    latency_s: float
    assign: tuple[int, ...]
    shard: tuple[str, ...]


def assignments(inst: Instance) -> list[tuple[int, ...]]:
    """Configuration index per kernel: all legal ones (module docstring)."""
    n = len(inst.ops)
    edges = [(e.src, e.dst) for e in inst.links]
    if not inst.dataflow:
        return [
            tuple(perm)
            for perm in itertools.permutations(range(n))
            if all(perm[u] < perm[v] for u, v in edges)
        ]
    most = min(inst.num_config or n, n)
    out = []
    for assign in itertools.product(range(most), repeat=n):
        used = set(assign)
        if used == set(range(len(used))) and all(assign[u] <= assign[v] for u, v in edges):
            out.append(assign)
    return out


def _pareto(points: list[tuple[float, float]], sram_cap: float) -> list[tuple[float, float]]:
    """(sram, dram) pairs that fit, with no other pair at most as large in both."""
    pts = sorted(p for p in points if p[0] <= sram_cap * (1 + 1e-9))
    out: list[tuple[float, float]] = []
    for s, d in pts:
        if not out or d < out[-1][1]:
            out.append((s, d))
    return out


class Exhaustive:
    """The exhaustive search over one instance, with its caches."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        m = inst.machine
        self.options = [shardings(op, m.chips) for op in inst.ops]
        self.compute = {
            (k, sh): compute_s(op, sh, m) for k, op in enumerate(inst.ops) for sh in self.options[k]
        }
        self.own = {
            (k, sh): own_network_s(op, sh, m)
            for k, op in enumerate(inst.ops)
            for sh in self.options[k]
        }
        self.conv = {
            (j, a, b): conversion(inst, e, a, b)
            for j, e in enumerate(inst.links)
            for a in self.options[e.src]
            for b in self.options[e.dst]
        }
        self.memory: dict[tuple, float] = {}
        self.fronts: dict[tuple, list[tuple[float, float]]] = {}

    def tile_list(self, k: int, sh: Sharding) -> tuple[Tile, ...]:
        op = self.inst.ops[k]
        local = tuple((d, local_sizes(op, sh, self.inst.machine.chips)[d]) for d, _ in op.dims)
        return tiles(op, local, self.inst.machine.sram_bytes)

    def least_dram(self, members: frozenset[int], shard: tuple[Sharding, ...]) -> float:
        """Least DRAM bytes of a configuration over its members' tiles (inf: no fit)."""
        key = (members, tuple(shard[k] for k in sorted(members)))
        if key in self.memory:
            return self.memory[key]
        cap = self.inst.machine.sram_bytes
        front = [(0.0, 0.0)]
        for k in sorted(members):
            mine = self.kernel_front(k, shard[k], members)
            front = _pareto([(s0 + s1, d0 + d1) for s0, d0 in front for s1, d1 in mine], cap)
            if not front:
                break
        best = min((d for _, d in front), default=math.inf)
        self.memory[key] = best
        return best

    def kernel_front(
        self, k: int, sh: Sharding, members: frozenset[int]
    ) -> list[tuple[float, float]]:
        """Kernel k's (SRAM, DRAM) Pareto set over its tiles in a configuration of
        `members`: it depends on k's sharding only, so once per (k, sharding, members), not
        once per sharding of every other member."""
        key = (k, sh, members)
        if key not in self.fronts:
            self.fronts[key] = _pareto(
                [
                    (s, d)
                    for d, s in (
                        kernel_in_config(self.inst, k, t, members) for t in self.tile_list(k, sh)
                    )
                ],
                self.inst.machine.sram_bytes,
            )
        return self.fronts[key]

    def latency(
        self,
        assign: tuple[int, ...],
        shard: tuple[Sharding, ...],
        groups: list[frozenset[int]] | None = None,
    ) -> float:
        """`groups`: the members of each configuration of `assign`, when the caller has
        them (optimum() tries every sharding on one assignment)."""
        inst, m = self.inst, self.inst.machine
        net: dict[int, float] = {}
        for k, sh in enumerate(shard):
            net[assign[k]] = net.get(assign[k], 0.0) + self.own[(k, sh)]
        where: dict[tuple[int, object], tuple[int, float]] = {}
        for j, e in enumerate(inst.links):
            layout, sec = self.conv[(j, shard[e.src], shard[e.dst])]
            if sec > 0:
                c = assign[e.dst]
                key = (e.src, layout)
                if key not in where or c < where[key][0]:
                    where[key] = (c, sec)
        for c, sec in where.values():
            net[c] = net.get(c, 0.0) + sec
        total = 0.0
        bandwidth = m.dram_Bps * m.dram_util
        if groups is None:
            groups = _groups(assign)
        for c, members in enumerate(groups):
            dram = self.least_dram(members, shard)
            if math.isinf(dram):
                return math.inf
            comp = sum(self.compute[(k, shard[k])] for k in members)
            total += combine(comp, dram / bandwidth, net.get(c, 0.0), inst.overlap)
        return total

    def optimum(self) -> Best:
        best = Best(math.inf, (), ())
        for assign in assignments(self.inst):
            groups = _groups(assign)
            for shard in itertools.product(*self.options):
                lat = self.latency(assign, shard, groups)
                if lat < best.latency_s:
                    best = Best(lat, assign, tuple(s.label for s in shard))
        return best


def _groups(assign: tuple[int, ...]) -> list[frozenset[int]]:
    """The members of each configuration, in configuration order."""
    return [frozenset(k for k, a in enumerate(assign) if a == c) for c in range(max(assign) + 1)]


def optimum(inst: Instance) -> Best:
    return Exhaustive(inst).optimum()


_FAMILY = {"output_stationary": "os", "a_resident": "a_res", "b_resident": "b_res"}


def reprice(inst: Instance, rows: list[tuple[str, str, str, int]]) -> float:
    """Latency of a plan given as (kernel name, sharding, tile, configuration) rows, as
    the product writes them (tile "family:Tm=a,Tn=b" or "stream"), by model.plan_latency."""
    index = {f"{op.name}_{i}": i for i, op in enumerate(inst.ops)}
    n = len(inst.ops)
    assign, shard, tile = [0] * n, [Sharding(None)] * n, [None] * n
    for name, sharding, tile_text, config in rows:
        k = index[name]
        op = inst.ops[k]
        shard[k] = parse_sharding(sharding)
        local = tuple((d, local_sizes(op, shard[k], inst.machine.chips)[d]) for d, _ in op.dims)
        if tile_text == "stream":
            tile[k] = stream_tile(op, local)
        else:
            family, sizes = tile_text.split(":")
            tm, tn = (int(part.split("=")[1]) for part in sizes.split(","))
            tile[k] = gemm_tile(op, local, _FAMILY[family], tm, tn)
        assign[k] = config
    return plan_latency(inst, assign, shard, tile)  # type: ignore[arg-type]
