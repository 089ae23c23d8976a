"""Independent evaluation of a mapping, outside Pyomo.

Recomputes every configuration's compute, memory and network time and SRAM use from the
chosen options in plain Python. The MILP's objective terms must equal these numbers, and
brute-force enumeration over all mappings of small problems uses this function as the truth.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from solver.cost.latency import config_latency
from solver.cost.menus import MappingProblem


@dataclass(frozen=True)
class ConfigCost:
    kernels: tuple[int, ...]
    compute_s: float
    memory_s: float
    network_s: float
    sram_bytes: float
    latency_s: float
    feasible: bool


def kernel_memory_bytes(problem: MappingProblem, k: int, option: int, members: set[int]) -> float:
    """DRAM bytes of kernel k's option when the kernels in `members` share its configuration."""
    menu = problem.kernels[k]
    opt = menu.options[option]
    internal_inputs = {e.dst_operand for e in problem.in_edges(k) if e.src in members}
    outs = problem.out_edges(k)
    output_internal = bool(outs) and all(e.dst in members for e in outs)
    total = 0.0
    for name, traffic in opt.traffic:
        if name in internal_inputs:
            continue
        if name == menu.output_operand and output_internal:
            continue
        total += traffic
    return total


def config_cost(
    problem: MappingProblem, members: Sequence[int], choice: Sequence[int]
) -> ConfigCost:
    """Cost of one configuration; `choice[k]` is the option index of kernel k (all kernels)."""
    group = set(members)
    comp = mem_bytes = net = sram = ovh = 0.0
    for k in members:
        menu = problem.kernels[k]
        opt = menu.options[choice[k]]
        comp += opt.compute_s + menu.overhead_s
        ovh += menu.overhead_s
        net += opt.network_s
        mem_bytes += kernel_memory_bytes(problem, k, choice[k], group)
        sram += opt.buffer_bytes
        outs = problem.out_edges(k)
        if any(e.dst in group for e in outs):
            sram += opt.out_tile_bytes
    if problem.edges:
        sharding = [
            menu.sharding_index(o) if o >= 0 else 0 for menu, o in zip(problem.kernels, choice)
        ]
        for e, charge in zip(problem.edges, problem.edge_charges(sharding)):
            if e.dst in group:
                net += charge
    mem = mem_bytes / problem.dram_bandwidth_Bps
    latency = config_latency(comp, mem, net, ovh, problem.overlap, problem.serialize_network)
    feasible = sram <= problem.sram_bytes * (1 + 1e-9) + 1e-6
    return ConfigCost(tuple(members), comp, mem, net, sram, latency, feasible)


def mapping_cost(
    problem: MappingProblem, configs: Sequence[Sequence[int]], choice: Sequence[int]
) -> tuple[float, list[ConfigCost]]:
    """Total latency (sum over configurations) and the per-configuration costs."""
    costs = [config_cost(problem, members, choice) for members in configs]
    if not all(c.feasible for c in costs):
        return math.inf, costs
    return sum(c.latency_s for c in costs), costs


def brute_force(problem: MappingProblem) -> tuple[float, list[list[int]], tuple[int, ...]]:
    """Exhaustive optimum: every legal grouping into configurations (dataflow: any
    assignment with Config[u] <= Config[v] on every edge) x every option of every kernel."""
    n = len(problem.kernels)
    if problem.dataflow:
        segmentations = legal_groupings(problem)
    else:
        segmentations = [[[k] for k in range(n)]]
    best = (math.inf, [], ())
    ranges = [range(len(m.options)) for m in problem.kernels]
    for choice in itertools.product(*ranges):
        for segs in segmentations:
            if not _pins_ok(problem, segs):
                continue
            total, _ = mapping_cost(problem, segs, choice)
            if total < best[0] - 1e-15:
                best = (total, segs, choice)
    return best


def legal_groupings(problem: MappingProblem) -> list[list[list[int]]]:
    """Every assignment of the kernels to configurations 0..m-1 (m <= max_configs, none
    empty) with Config[u] <= Config[v] on every edge, as lists of kernel indices."""
    n, k_max = len(problem.kernels), max(1, problem.max_configs)
    edges = [(e.src, e.dst) for k in range(n) for e in problem.in_edges(k)]
    out = []
    for assign in itertools.product(range(min(k_max, n)), repeat=n):
        used = set(assign)
        if used != set(range(len(used))):
            continue
        if any(assign[u] > assign[v] for u, v in edges):
            continue
        out.append([[k for k in range(n) if assign[k] == c] for c in range(len(used))])
    return out


def _pins_ok(problem: MappingProblem, segs: Sequence[Sequence[int]]) -> bool:
    for c, seg in enumerate(segs):
        for k in seg:
            pin = problem.pinned_configs[k] if problem.pinned_configs else -1
            if pin >= 0 and pin != c:
                return False
    return True
