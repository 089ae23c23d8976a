"""The configurations of a DFModel graph whose configuration cost is not a sum over its
kernels: lane/stage compute (solver/dfmodel/lanes.py) and HPL's two-link network
(solver/dfmodel/branches.py), searched exactly by solver/dfmodel/assign.py.

A set's price is DFModel's: compute (lane/stage min-max, or the sum of FLOP / util x
peak), memory (every edge with exactly one end in the set, the producer's output per chip,
plus the kernels' memory_size, over the DRAM bandwidth), network (each kernel's own, or a
branch's rule), combined by the overlap; a set over the SRAM (where DFModel has the row) is
not allowed. The found configurations are then written as the common MappingProblem with
each kernel's compute (network) its share of the set's, in proportion to its own cycles
(bytes): the configuration's totals are DFModel's, re-checked by solver/check.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import solver.dfmodel.assign as da
import solver.dfmodel.model as dm
import solver.dfmodel.pmu as pmu
import solver.dfmodel.problem as dp
from generator.graph import KernelGraph
from schema.errors import SetupError
from solver.cost.problem import MappingProblem
from solver.dfmodel.lanes import LaneKernel, config_cycles, lane_kernel
from solver.dfmodel.pmu import PmuChip, PmuData
from solver.dfmodel.price import exact_price
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.options import DFModelOptions

# a set's network: (seconds, per-member shares); None = the sum of each kernel's network_s
NetworkRule = Callable[[Sequence[int]], tuple[float, list[float]]]


@dataclass(frozen=True)
class LaneCompute:
    """DFModel's lane/stage constants: per-kernel cycle tables, cores, tiles, clock."""

    kernels: tuple[LaneKernel, ...]
    cores: int
    num_tile: int
    freq_Hz: float  # as DFModel stores it (a float GHz)
    pmu: PmuData | None = None  # a chip with pmu > 0: DFModel's PMU rows (pmu.py)
    streams_per_config: bool = False  # DFModel's newer schema (DFModelOptions.newer_schema)


@dataclass(frozen=True)
class SetPrice:
    latency_s: float
    compute: list[float]  # per member, summing to the set's compute
    network: list[float]
    memory_s: float = 0.0
    network_s: float = 0.0
    edge_scale: float = 1.0  # the members' edge bytes (one tile, x num_input: newer schema)
    size_scale: float = 1.0  # their memory_size


@dataclass(frozen=True)
class SetTables:
    """Per-kernel constants of set_price, computed once per search (not per set)."""

    edges: tuple[tuple[int, int, float], ...]  # (producer, consumer, producer's out bytes)
    # per kernel, its edges as (the other end, the producer's out bytes), in edge order: a
    # set's moved bytes read from its members' edges, not from every edge of the graph
    ends: tuple[tuple[tuple[int, float], ...], ...]
    sizes: tuple[float, ...]  # memory_size per kernel
    sram: tuple[tuple[float, float, int], ...]  # (buffer, stream, consumers mask)
    streams: tuple[int, ...]  # num_input (1 when unset)
    streamed: tuple[bool, ...]  # num_input set


def set_tables(graph: KernelGraph, costs: Sequence[dp.KernelCost], c: dp.StageTwo) -> SetTables:
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    edges = tuple((index[e.src], index[e.dst], costs[index[e.src]].out_bytes) for e in graph.edges)
    sram = []
    for k in range(len(graph.kernels)):
        buffer, stream = (
            dp.sram_parts(graph, costs, k, c) if math.isfinite(c.sram_bytes) else (0, 0)
        )
        consumers = sum(1 << d for s, d, _ in edges if s == k)
        sram.append((buffer, stream, consumers))
    kernels = graph.kernels
    ends: list[list[tuple[int, float]]] = [[] for _ in kernels]
    for src, dst, size in edges:
        if src != dst:  # an edge inside one kernel never crosses a set's border
            ends[src].append((dst, size))
            ends[dst].append((src, size))
    return SetTables(
        edges,
        tuple(map(tuple, ends)),
        tuple(dp.memory_size(k) for k in kernels),
        tuple(sram),
        tuple(_streams(k) for k in kernels),
        tuple(_streamed(k) for k in kernels),
    )


def set_price(
    graph: KernelGraph,
    costs: Sequence[dp.KernelCost],
    c: dp.StageTwo,
    members: Sequence[int],
    lanes: LaneCompute | None,
    network: NetworkRule | None,
    tables: SetTables | None = None,
    shares: bool = True,
) -> SetPrice | None:
    """DFModel's price of one configuration (module docstring); None when not allowed.
    DFModel's newer schema (lanes.streams_per_config): a configuration with a streamed
    kernel runs one tile (compute, edges and collectives at 1 / num_tile) and its II is
    multiplied by its largest num_input."""
    t = tables or set_tables(graph, costs, c)
    mask = sum(1 << k for k in members)
    tiles, times = 1.0, 1  # this configuration's tiles / num_tile, its num_input factor
    if lanes is not None and lanes.streams_per_config and any(t.streamed[k] for k in members):
        tiles, times = 1.0 / lanes.num_tile, max(t.streams[k] for k in members)
    if lanes is not None:
        target, cores = config_cycles([lanes.kernels[k] for k in members], lanes.cores)
        if target < 0:
            return None
        comp = target * lanes.num_tile * tiles / lanes.freq_Hz
        own = [lanes.kernels[k].cycles(n) for k, n in zip(members, cores)] if shares else []
    else:
        own = [costs[k].compute_s for k in members]
        comp = sum(own)
    moved = tiles * sum(b for k in members for o, b in t.ends[k] if not mask >> o & 1)
    mem = (moved + sum(t.sizes[k] for k in members)) / c.dram_Bps
    if network is not None:
        net, net_own = network(members)
    else:
        net_own = [costs[k].network_s * tiles for k in members]
        net = sum(net_own)
    if math.isfinite(c.sram_bytes):
        sram = sum(t.sram[k][0] + (t.sram[k][1] if t.sram[k][2] & mask else 0) for k in members)
        if sram > c.sram_bytes * (1 + 1e-9) + 1e-6:
            return None
    latency = dp.config_ii(c, comp, mem, net) * times
    if not shares:  # the search needs the latency alone
        return SetPrice(latency, [], [])
    return SetPrice(
        latency,
        _shares(comp * times, own),
        _shares(net * times, net_own),
        mem * times,
        net * times,
        tiles * times,
        float(times),
    )


def _streams(kernel) -> int:
    extra = kernel.dfmodel_extra
    return extra.num_input if extra is not None and extra.num_input > 0 else 1


def _streamed(kernel) -> bool:
    return kernel.dfmodel_extra is not None and kernel.dfmodel_extra.num_input > 0


def _shares(total: float, own: Sequence[float]) -> list[float]:
    weight = sum(own)
    if weight <= 0:
        return [total / len(own)] * len(own) if own else []
    return [total * x / weight for x in own]


def lane_configs(
    graph: KernelGraph,
    costs: list[dp.KernelCost],
    c: dp.StageTwo,
    rules: da.Rules,
    in_order: bool,
    lanes: LaneCompute | None,
    network: NetworkRule | None = None,
    quick: bool = False,
) -> tuple[MappingProblem, GraphSolution, float]:
    """The best configurations (solve_configs' contract: the problem over every kernel, its
    solution, a lower bound of the sum: here the sum itself, the search being exhaustive)."""
    n = len(graph.kernels)
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    preds = [0] * n
    for e in graph.edges:
        preds[index[e.dst]] |= 1 << index[e.src]

    tables = set_tables(graph, costs, c)

    def price(members: Sequence[int]) -> float:
        got = set_price(graph, costs, c, members, lanes, network, tables, shares=False)
        return got.latency_s if got is not None else math.inf

    if lanes is not None and lanes.pmu is not None and not quick:
        return pmu_configs(graph, costs, c, rules, in_order, lanes, network, preds)
    if in_order:
        configs = da.in_order(n, preds) or []
        total = sum(price(cf) for cf in configs) if configs else math.inf
    else:
        total, configs = da.best_assignment(n, preds, rules, price)
    if quick:  # the total alone, without PMU rows a lower bound (to order num_tile counts)
        return None, GraphSolution((), (), total, total, "optimal", SearchStats()), total  # type: ignore[return-value]
    stats = SearchStats()  # every assignment: the whole space
    found = GraphSolution((), (), total, total, "optimal", stats)
    if not math.isfinite(total):
        return exact_price(graph, costs, c, [], replace(found, status="infeasible"))
    prices = [set_price(graph, costs, c, cf, lanes, network) for cf in configs]
    return _assemble(graph, costs, c, configs, prices, found)


def _assemble(graph, costs, c, configs, prices, found):
    """The configurations written as the common MappingProblem (each kernel's compute and
    network its share of its configuration's), re-priced by solver/check.py: equal."""
    shared = list(costs)
    for cf, got in zip(configs, prices):
        assert got is not None  # priced by the search
        for k, comp, net in zip(cf, got.compute, got.network):
            shared[k] = replace(
                costs[k],
                compute_s=comp,
                network_s=net,
                edge_scale=got.edge_scale,
                size_scale=got.size_scale,
            )
    problem, sol, floor = exact_price(graph, shared, c, configs, found)
    assert math.isclose(sol.objective_s, found.objective_s, rel_tol=1e-6), (
        sol.objective_s,
        found.objective_s,
    )
    return problem, sol, floor


def pmu_configs(graph, costs, c, rules, in_order, lanes: LaneCompute, network, preds):
    """The best assignment under DFModel's PMU rows (solver/dfmodel/pmu.py):
    assignments in order of their price without those rows (a lower bound); each priced
    by the cores-and-PMUs MILP until the next bound reaches the best."""
    n = len(graph.kernels)
    data = lanes.pmu
    assert data is not None
    candidates = [da.in_order(n, preds) or []] if in_order else pmu.assignments(n, preds, rules)
    priced = []
    for configs in candidates:
        prices = [set_price(graph, costs, c, cf, lanes, network) for cf in configs]
        if configs and all(p is not None for p in prices):
            priced.append((sum(p.latency_s for p in prices), configs, prices))
    priced.sort(key=lambda t: t[0])
    best = None
    per_cycle = lanes.num_tile / lanes.freq_Hz
    for bound, configs, prices in priced:
        if best is not None and bound >= best[0] * (1 - 1e-12):
            break
        fixed = [(p.memory_s, p.network_s) for p in prices]
        got = pmu.solve_assignment(
            graph, configs, data.menus, data.streams, data.shards, data.word, data.chip,
            fixed, c.overlap, per_cycle, c.serialize_network,
        )  # fmt: skip
        if got is not None and (best is None or got[0] < best[0]):
            best = (got[0], configs, prices, got[1])
    stats = SearchStats()
    if best is None:
        found = GraphSolution((), (), math.inf, math.inf, "infeasible", stats)
        return _assemble(graph, costs, c, [], [], found)
    total, configs, prices, picks = best
    exact = []
    for cf, p in zip(configs, prices):
        own = [data.menus[k][picks[k]][2] * data.streams[k] for k in cf]
        comp = max(own) * per_cycle
        mem, net = p.memory_s, p.network_s
        latency = dp.config_ii(c, comp, mem, net)
        exact.append(SetPrice(latency, _shares(comp, own), p.network, mem, net))
    total = sum(p.latency_s for p in exact)
    found = GraphSolution((), (), total, total, "optimal", stats)
    return _assemble(graph, costs, c, configs, exact, found)


def lane_compute(
    graph: KernelGraph,
    shards: Sequence[tuple[int, int, int]],
    o: DFModelOptions,
    num_tile: int,
    word: float = 2.0,
    peak_flops: float = 0.0,
) -> LaneCompute:
    """DFModel's lane/stage tables of every kernel at its per-chip shard (M, K, N).
    `peak_flops` (DFModel's GFLOPS = 2 W H core freq, as it stores freq): the clock is
    peak / (2 W H core), so that a what-if that scales the chip's peak scales it too
    (0: the setup's freq)."""
    if min(o.cores, o.lane_width, o.stage_width) <= 0 or o.freq_GHz <= 0:
        raise SetupError(
            "--cost-model dfmodel: DFModel's lane/stage compute (compute_util 0) needs "
            "system.accelerator core, systolic_width, systolic_height and freq"
        )
    tables = []
    for k, shard in zip(graph.kernels, shards):
        extra = k.dfmodel_extra
        effective = 0
        if extra is not None and extra.use_effective_stage:
            if o.effective_stage <= 0:
                raise SetupError(
                    f"--cost-model dfmodel: kernel {k.name} has use_effective_stage but "
                    "execution.effective_stage is not set (DFModel needs it > 0)"
                )
            effective = o.effective_stage
        streams = extra.num_input if extra is not None and extra.num_input > 0 else 1
        if o.newer_schema:  # num_input multiplies the configuration's II instead
            streams = 1
        widths = (o.lane_width, o.stage_width)
        simd = dm.dims_of(k).simd
        tables.append(lane_kernel(shard, simd, effective, widths, o.cores, streams))
    data = None
    if o.pmu > 0 and o.newer_schema and any(_streamed(k) for k in graph.kernels):
        raise SetupError(
            "--cost-model dfmodel: DFModel's PMU rows (accelerator.pmu) together with its "
            "newer schema's per-configuration num_input are not reproduced"
        )
    if o.pmu > 0:  # DFModel's place-and-route rows instead of its SRAM row
        chip = PmuChip(o.pmu, dm.f32(o.pmu_cap), o.cores, (o.lane_width, o.stage_width))
        menus, streams = [], []
        for k, shard in zip(graph.kernels, shards):
            extra = k.dfmodel_extra
            effective = o.effective_stage if extra is not None and extra.use_effective_stage else 0
            simd = dm.dims_of(k).simd
            whole = any(op.role.name == "WEIGHT" for op in k.operands)
            menus.append(tuple(pmu.pairs(shard, simd, effective, chip.widths, o.cores, whole)))
            streams.append(extra.num_input if extra is not None and extra.num_input > 0 else 1)
        data = PmuData(chip, tuple(menus), tuple(streams), tuple(shards), word)
    units = 2 * o.lane_width * o.stage_width * o.cores
    freq = peak_flops / units if peak_flops > 0 else dm.f32(o.freq_GHz) * 1e9
    return LaneCompute(tuple(tables), o.cores, num_tile, freq, data, o.newer_schema)
