"""The inner problem's data: per-kernel option menus, per-edge conversion costs and the
MappingProblem the MILP, the fusion searches and the brute-force checker all read. Every
number in it is a constant for one outer choice; solver/cost/menus.py builds it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import cached_property

from hardware.system import NetworkLevel
from solver.cost.latency import Seconds, config_latency

Span = Sequence[tuple[NetworkLevel, int]]
REPLICATED = "none"


@dataclass(frozen=True)
class Option:
    """One (sharding, tiling) choice of a kernel, with its per-chip costs."""

    sharding: str
    tile: str
    compute_s: float
    network_s: float  # the kernel's own collective(s)
    network_bytes: float
    buffer_bytes: float  # on-chip buffer of the tiling
    out_tile_bytes: float  # stream buffer when the output feeds a fused consumer
    traffic: tuple[tuple[str, float], ...]  # DRAM bytes per operand name, per chip
    collective: str = ""
    flop_per_chip: float = 0.0
    # Parameters (elements) of each WEIGHT operand this sharding needs on every chip, by
    # weight identity (WeightRule): (weight, elements per chip)
    weights: tuple[tuple[str, float], ...] = ()
    # weights this sharding stores whole on every chip of the TP group: their gradient is
    # synchronised once per step by the step, not the kernel (solver.cost.weights)
    replicated: tuple[str, ...] = ()
    # compulsory bytes per operand, per chip (traffic above it means the tiling re-reads)
    sizes: tuple[tuple[str, float], ...] = ()
    # where compute_s comes from (solver.cost.kernel_times: a measured table and its
    # version, the fitted roofline, or the peak, uncalibrated)
    time_source: str = ""
    # the part of compute_s that is the launch-rate floor (kernel_times.KernelTime.floor_s)
    floor_s: float = 0.0

    def traffic_of(self, operand: str) -> float:
        return _named_value(self.traffic, operand)

    def size_of(self, operand: str) -> float:
        return _named_value(self.sizes, operand)

    def but(self, **changes: object) -> Option:
        """dataclasses.replace(self, **changes) at a fifth of its cost (the menus of a
        3,000-kernel graph make ~150,000 such copies): an option has no __post_init__ and
        caches nothing, so a copy of its fields with some replaced is a valid option."""
        unknown = changes.keys() - OPTION_FIELDS
        if unknown:
            raise TypeError(f"Option has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(Option)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.pop("_hash", None)  # were a hash ever kept (hashed_once): not the copy's
        copy.__dict__.update(changes)
        return copy


OPTION_FIELDS = frozenset(f.name for f in fields(Option))


def _named_value(pairs: tuple[tuple[str, float], ...], name: str) -> float:
    """The value of `name` in (name, value) pairs of distinct names, 0 if absent: a scan of
    the few operands, twice as fast as a dict built per call (a million calls a plan)."""
    for key, value in pairs:
        if key == name:
            return value
    return 0.0


@dataclass(frozen=True)
class WeightFact:
    """A weight of a graph (solver.cost.weights.weight_facts): identity, parameters, the
    collective that syncs its replicas' gradient, and whether the graph's own OPTIMIZER
    kernel updates it."""

    weight: str
    params: float
    sync: str  # "all_gather" or "all_reduce"
    self_updated: bool = False


@dataclass(frozen=True)
class TileCost:
    """One tile's costs: what an Option of the same sharding changes with the tile."""

    tile: str
    buffer_bytes: float
    out_tile_bytes: float
    traffic: tuple[tuple[str, float], ...]


def hashed_once(self: object) -> int:
    """The dataclass's own hash (every compared field, in order), computed once per object:
    deep frozen dataclasses shared by many problems (menus, tile groups) are hashed by every
    dict they key (the solution memo, solver.search.solve_memo; the tile refinement's parts)
    and would otherwise re-hash every nested tile each time. Kept out of the pickled state
    (`state_without_hash`): a string's hash differs between processes."""
    kept = self.__dict__.get("_hash")
    if kept is None:
        names = _HASHED.get(type(self))
        if names is None:
            names = tuple(f.name for f in fields(self) if (f.compare if f.hash is None else f.hash))
            _HASHED[type(self)] = names
        kept = hash(tuple(getattr(self, f) for f in names))
        object.__setattr__(self, "_hash", kept)
    return kept


def state_without_hash(self: object) -> dict[str, object]:
    state = dict(self.__dict__)
    state.pop("_hash", None)
    return state


_HASHED: dict[type, tuple[str, ...]] = {}  # the fields the dataclass would hash, per class


@dataclass(frozen=True)
class TileGroup:
    """Tiles of one sharding's exact menu between two sampled buffers
    (solver.cost.frontier.tile_groups); the first is (a cost twin of) a sampled tile."""

    sharding: str
    tiles: tuple[TileCost, ...]

    __hash__ = hashed_once  # keys the tile refinement's parts, every round

    def __getstate__(self) -> dict[str, object]:
        return state_without_hash(self)


@dataclass(frozen=True)
class KernelMenu:
    name: str
    options: tuple[Option, ...]
    shardings: tuple[str, ...]  # distinct shardings, in option order
    input_operands: tuple[str, ...]  # operands that can be fed by an edge
    output_operand: str
    overhead_s: float = 0.0
    # where its tile menu samples a long status frontier (frontier.fusion_points): the
    # options hold the sampled tiles, `tile_groups` every tile (solver.fusion.tile_refine
    # bounds the search over them and opens the groups a bound leans on)
    tile_groups: tuple[TileGroup, ...] = ()

    __hash__ = hashed_once  # menus are shared by many problems (solver.cost.memo)

    def __getstate__(self) -> dict[str, object]:
        return state_without_hash(self)

    @property
    def live_groups(self) -> tuple[TileGroup, ...]:
        """The tile groups of the shardings this menu holds (a restricted menu keeps its
        whole menu's groups)."""
        return tuple(g for g in self.tile_groups if g.sharding in self.shardings)

    def sharding_index(self, option: int) -> int:
        return self.shardings.index(self.options[option].sharding)


@dataclass(frozen=True)
class EdgeCost:
    src: int  # kernel index (position in MappingProblem.kernels)
    dst: int
    dst_operand: str
    # conversion seconds, [sharding index of src][sharding index of dst]
    conv: tuple[tuple[float, ...], ...]
    # a forward activation read by the backward pass (or its recompute): fused, it stays
    # on chip for its whole lifetime (solver/check.py, fused-operand rule)
    saved: bool = False
    # across the boundary of two instances of a repeated graph (src's output is the next
    # instance's input read by dst): charged like any edge at dst, but no order and no
    # fusion between src and dst (in_edges / out_edges leave it out; conv_in_edges has it)
    wrap: bool = False
    # One collective per produced tensor and target layout: edges carrying the whole of
    # one producer's output share a `group` (-1 = alone); `layouts[b]` names the layout
    # (in the producer's dims) that consumer sharding b needs, and conv[a][b] depends on
    # (a, layouts[b]) only. The group pays each distinct layout once, in the earliest
    # configuration holding a consumer that needs it (MappingProblem.edge_charges).
    # `lead` marks the group's first consumer in the problem's order: whatever it needs is
    # paid at its configuration in any segmentation of that order (a bound's anchor).
    group: int = -1
    layouts: tuple[int, ...] = ()
    lead: bool = True


@dataclass(frozen=True)
class MappingProblem:
    """The inner problem: kernels in a topological order, options, edges, chip limits."""

    kernels: tuple[KernelMenu, ...]
    edges: tuple[EdgeCost, ...]
    sram_bytes: float
    dram_bandwidth_Bps: float
    overlap: bool
    dataflow: bool
    max_configs: int
    pinned_configs: tuple[int, ...] = ()  # per kernel, -1 = free
    serialize_network: bool = False
    # the share of the shorter of network and compute/memory that hides under the other
    # when the network is serialised (solver.cost.latency; 0 = none)
    network_hidden_share: float = 0.0
    # DRAM capacity row (milp.model.add_memory_capacity): resident bytes per stored weight
    # parameter and the bytes one graph instance's weights may take per chip.
    resident_bytes_per_param: float = 0.0
    resident_budget_bytes: float = math.inf
    weight_facts: tuple[WeightFact, ...] = ()  # every weight its kernels read

    def out_edges(self, k: int) -> list[EdgeCost]:
        """Edges along which k's output flows within one instance (fusion, order)."""
        return self._adjacency[0].get(k, [])

    def in_edges(self, k: int) -> list[EdgeCost]:
        """Edges feeding k within one instance (fusion, order)."""
        return self._adjacency[1].get(k, [])

    def conv_in_edges(self, k: int) -> list[EdgeCost]:
        """Every edge whose layout conversion k's configuration pays: in_edges plus the
        boundary (wrap) edges into k."""
        return self._adjacency[2].get(k, [])

    def edge_charges(
        self, sharding: Sequence[int], rank: Sequence[int] | None = None
    ) -> list[float]:
        """Seconds each edge charges (at its consumer's configuration) when kernel k takes
        sharding index sharding[k]: conv[a][b], except that a group pays each distinct
        target layout once, on the edge of the consumer needing it that runs first.
        `rank[k]`: the position of k's configuration in the plan (default: the kernel
        index, right for any segmentation of the problem's own order); equal ranks share
        a configuration, so which of them pays does not matter."""
        out = [0.0] * len(self.edges)
        payer: dict[tuple[int, int, int], int] = {}
        for i, e in enumerate(self.edges):
            a, b = sharding[e.src], sharding[e.dst]
            if e.group < 0:
                out[i] = e.conv[a][b]
                continue
            key = (e.group, a, e.layouts[b])
            first = payer.get(key)
            if first is None or _position(e, i, rank) < _position(self.edges[first], first, rank):
                payer[key] = i
        for i in payer.values():
            e = self.edges[i]
            out[i] = e.conv[sharding[e.src]][sharding[e.dst]]
        return out

    def latency(
        self, compute_s: Seconds, memory_s: Seconds, network_s: Seconds, overhead_s: Seconds
    ) -> Seconds:
        """A configuration's latency under this problem's rule (solver.cost.latency)."""
        return config_latency(
            compute_s,
            memory_s,
            network_s,
            overhead_s,
            self.overlap,
            self.serialize_network,
            self.network_hidden_share,
        )

    @property
    def any_config_pinned(self) -> bool:
        """Whether some kernel is pinned to a configuration (`pinned_configs`)."""
        return any(q >= 0 for q in self.pinned_configs)

    @property
    def network_overlapped(self) -> bool:
        """A configuration's network time overlaps its other terms (max), so which
        configuration pays a shared layout conversion changes the latency (a serialised
        network with a hidden share is not additive either)."""
        if self.serialize_network:  # the rule ignores `overlap` there
            return self.network_hidden_share > 0
        return self.overlap

    @cached_property
    def _adjacency(
        self,
    ) -> tuple[dict[int, list[EdgeCost]], dict[int, list[EdgeCost]], dict[int, list[EdgeCost]]]:
        outs: dict[int, list[EdgeCost]] = {}
        ins: dict[int, list[EdgeCost]] = {}
        conv_ins: dict[int, list[EdgeCost]] = {}
        for e in self.edges:
            conv_ins.setdefault(e.dst, []).append(e)
            if e.wrap:
                continue
            outs.setdefault(e.src, []).append(e)
            ins.setdefault(e.dst, []).append(e)
        return outs, ins, conv_ins


def _position(e: EdgeCost, index: int, rank: Sequence[int] | None) -> tuple[int, int, int]:
    """Where edge e's consumer runs: its configuration's rank, then the consumer and edge
    index (a deterministic tie-break inside one configuration)."""
    return (rank[e.dst] if rank is not None else e.dst, e.dst, index)


def config_rank(num_kernels: int, configs: Sequence[Sequence[int]]) -> list[int]:
    """rank[k]: the position of kernel k's configuration in `configs` (-1 if absent)."""
    rank = [-1] * num_kernels
    for c, members in enumerate(configs):
        for k in members:
            rank[k] = c
    return rank
