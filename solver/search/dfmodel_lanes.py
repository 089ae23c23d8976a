"""The configurations of a DFModel graph whose configuration cost is not a sum over its
kernels: lane/stage compute (solver/cost/dfmodel_lanes.py) and HPL's two-link network
(solver/cost/dfmodel_branches.py), searched exactly by solver/search/dfmodel_assign.py.

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

from generator.graph import KernelGraph
from schema.errors import SetupError
from solver.check import config_latency
from solver.cost import dfmodel_model as dm
from solver.cost import dfmodel_problem as dp
from solver.cost.dfmodel_lanes import LaneKernel, config_cycles, lane_kernel
from solver.cost.problem import MappingProblem
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.options import DFModelOptions
from solver.search import dfmodel_assign as da

# a set's network: (seconds, per-member shares); None = the sum of each kernel's network_s
NetworkRule = Callable[[Sequence[int]], tuple[float, list[float]]]


@dataclass(frozen=True)
class LaneCompute:
    """DFModel's lane/stage constants: per-kernel cycle tables, cores, tiles, clock."""

    kernels: tuple[LaneKernel, ...]
    cores: int
    num_tile: int
    freq_Hz: float  # as DFModel stores it (a float GHz)


@dataclass(frozen=True)
class SetPrice:
    latency_s: float
    compute: list[float]  # per member, summing to the set's compute
    network: list[float]


def set_price(
    graph: KernelGraph,
    costs: Sequence[dp.KernelCost],
    c: dp.StageTwo,
    members: Sequence[int],
    lanes: LaneCompute | None,
    network: NetworkRule | None,
) -> SetPrice | None:
    """DFModel's price of one configuration (module docstring); None when not allowed."""
    inside = set(members)
    if lanes is not None:
        target, cores = config_cycles([lanes.kernels[k] for k in members], lanes.cores)
        if target < 0:
            return None
        comp = target * lanes.num_tile / lanes.freq_Hz
        own = [lanes.kernels[k].cycles(t) for k, t in zip(members, cores)]
    else:
        own = [costs[k].compute_s for k in members]
        comp = sum(own)
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    moved = sum(
        costs[index[e.src]].out_bytes
        for e in graph.edges
        if (index[e.src] in inside) != (index[e.dst] in inside)
    )
    moved += sum(dp.memory_size(graph.kernels[k]) for k in members)
    mem = moved / c.dram_Bps
    if network is not None:
        net, net_own = network(members)
    else:
        net_own = [costs[k].network_s for k in members]
        net = sum(net_own)
    if math.isfinite(c.sram_bytes):
        sram = 0.0
        for k in members:
            buffer, stream = dp.sram_parts(graph, costs, k, c)
            feeds = any(
                e.src == graph.kernels[k].name and index[e.dst] in inside for e in graph.edges
            )
            sram += buffer + (stream if feeds else 0.0)
        if sram > c.sram_bytes * (1 + 1e-9) + 1e-6:
            return None
    latency = config_latency(comp, mem, net, 0.0, c.overlap, False)
    return SetPrice(latency, _shares(comp, own), _shares(net, net_own))


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
) -> tuple[MappingProblem, GraphSolution, float]:
    """The best configurations (solve_configs' contract: the problem over every kernel, its
    solution, a lower bound of the sum: here the sum itself, the search being exhaustive)."""
    from solver.search.dfmodel_search import exact_price

    n = len(graph.kernels)
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    preds = [0] * n
    for e in graph.edges:
        preds[index[e.dst]] |= 1 << index[e.src]

    def price(members: Sequence[int]) -> float:
        got = set_price(graph, costs, c, members, lanes, network)
        return got.latency_s if got is not None else math.inf

    if in_order:
        configs = da.in_order(n, preds) or []
        total = sum(price(cf) for cf in configs) if configs else math.inf
    else:
        total, configs = da.best_assignment(n, preds, rules, price)
    stats = SearchStats()  # every assignment: the whole space
    found = GraphSolution((), (), total, total, "optimal", stats)
    if not math.isfinite(total):
        return exact_price(graph, costs, c, [], replace(found, status="infeasible"))
    shared = list(costs)
    for cf in configs:
        got = set_price(graph, costs, c, cf, lanes, network)
        assert got is not None  # priced above
        for k, comp, net in zip(cf, got.compute, got.network):
            shared[k] = replace(costs[k], compute_s=comp, network_s=net)
    problem, sol, floor = exact_price(graph, shared, c, configs, found)
    assert math.isclose(sol.objective_s, total, rel_tol=1e-9), (sol.objective_s, total)
    return problem, sol, floor


def lane_compute(
    graph: KernelGraph,
    shards: Sequence[tuple[int, int, int]],
    o: DFModelOptions,
    num_tile: int,
) -> LaneCompute:
    """DFModel's lane/stage tables of every kernel at its per-chip shard (M, K, N)."""
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
        widths = (o.lane_width, o.stage_width)
        simd = dm.dims_of(k).simd
        tables.append(lane_kernel(shard, simd, effective, widths, o.cores, streams))
    return LaneCompute(tuple(tables), o.cores, num_tile, dm.f32(o.freq_GHz) * 1e9)
