"""Independent evaluation of a mapping, outside Pyomo.

Recomputes every configuration's compute, memory and network time and SRAM use from the
chosen options in plain Python. The MILP's objective terms must equal these numbers, and
brute-force enumeration over all mappings of small problems uses this function as the truth.

Per-kernel data movement in a configuration c (THE rule; the MILP's SRAM and memory
expressions in solver/milp/model.py call these functions, the fusion pricers
solver/fusion/segment_price.py and segment_bound.py vectorise the same terms):

  fed_c(k)    = input operands x of k fed by an edge whose producer is in c
  internal(k) = k has consumers and all of them are in c
  DRAM_k      = sum_{x not in fed_c(k)} traffic_k(x)  - [internal(k)] * traffic_k(out)
  SRAM_k      = buffer_k + [some consumer of k in c] * stream_k
                + sum_{x in fed_c(k)} hold_k(x)
  hold_k(x)   = size_k(x)  if traffic_k(x) > size_k(x)   (the tiling re-reads x)
                           or x is a saved activation (forward producer, backward
                           consumer: it lives from the forward to the backward pass)
              = 0          otherwise (one pass: the producer's stream buffer stream_k
                           of its output tile carries it)
  SRAM_c = sum_{k in c} SRAM_k <= chip SRAM

size_k(x) is the operand's compulsory bytes per chip (Option.sizes), traffic_k(x) what the
chosen tiling would read from DRAM (Option.traffic). So an operand fused over an edge is
free in DRAM time only because it is held on chip: a re-read operand is held whole for
the consumer's lifetime in the configuration, and a saved activation whose forward
producer and backward consumer share a configuration is held whole too (time and memory
agree: if either end is in another configuration it goes through DRAM in both models).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from solver.cost.problem import KernelMenu, MappingProblem, config_rank


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
    """DRAM_k of the module docstring: DRAM bytes of kernel k's option when the kernels in
    `members` share its configuration."""
    internal_inputs, output_internal = _internal(problem, k, members)
    return _memory_bytes(problem.kernels[k], option, internal_inputs, output_internal)


def alone_bytes(problem: MappingProblem, k: int) -> list[tuple[float, float]]:
    """(SRAM_k, DRAM_k) of each of kernel k's options when it is a configuration alone:
    kernel_sram_bytes and kernel_memory_bytes with `members` = {k}, its edges read once."""
    members = {k}
    internal_inputs, output_internal = _internal(problem, k, members)
    streams = any(e.dst in members for e in problem.out_edges(k))
    fused = fused_inputs(problem, k, members)
    menu = problem.kernels[k]
    return [
        (
            _sram_bytes(problem, k, o, streams, fused),
            _memory_bytes(menu, o, internal_inputs, output_internal),
        )
        for o in range(len(menu.options))
    ]


def _internal(problem: MappingProblem, k: int, members: set[int]) -> tuple[set[str], bool]:
    """Kernel k's inputs fed from inside `members`, and whether its output stays inside."""
    internal_inputs = {e.dst_operand for e in problem.in_edges(k) if e.src in members}
    outs = problem.out_edges(k)
    return internal_inputs, bool(outs) and all(e.dst in members for e in outs)


def _memory_bytes(
    menu: KernelMenu, option: int, internal_inputs: set[str], output_internal: bool
) -> float:
    total = 0.0
    for name, traffic in menu.options[option].traffic:
        if name in internal_inputs:
            continue
        if name == menu.output_operand and output_internal:
            continue
        total += traffic
    return total


def fused_inputs(problem: MappingProblem, k: int, members: set[int]) -> dict[str, bool]:
    """Input operands of kernel k fed by an edge from inside `members` -> whether the
    operand is a saved activation (any edge into it is)."""
    edges = problem.in_edges(k)
    inside = {e.dst_operand for e in edges if e.src in members}
    return {x: any(e.saved for e in edges if e.dst_operand == x) for x in inside}


def hold_bytes(problem: MappingProblem, k: int, option: int, operand: str, saved: bool) -> float:
    """hold_k(x) of the module docstring: SRAM bytes a fused input takes for its lifetime."""
    opt = problem.kernels[k].options[option]
    size = opt.size_of(operand)
    if saved or opt.traffic_of(operand) > size * (1 + 1e-9):
        return size
    return 0.0


def kernel_sram_bytes(problem: MappingProblem, k: int, option: int, members: set[int]) -> float:
    """SRAM_k of the module docstring: kernel k's option when `members` share its
    configuration."""
    streams = any(e.dst in members for e in problem.out_edges(k))
    return _sram_bytes(problem, k, option, streams, fused_inputs(problem, k, members))


def options_sram_bytes(problem: MappingProblem, k: int, members: set[int]) -> list[float]:
    """SRAM_k of each of kernel k's options when `members` share its configuration."""
    streams = any(e.dst in members for e in problem.out_edges(k))
    fused = fused_inputs(problem, k, members)
    return [
        _sram_bytes(problem, k, o, streams, fused) for o in range(len(problem.kernels[k].options))
    ]


def least_sram_option(problem: MappingProblem, k: int, members: set[int]) -> tuple[int, float]:
    """Kernel k's option of least SRAM_k when `members` share its configuration (the first
    such option) and its bytes."""
    held = options_sram_bytes(problem, k, members)
    option = min(range(len(held)), key=held.__getitem__)
    return option, held[option]


def _sram_bytes(
    problem: MappingProblem, k: int, option: int, streams: bool, fused: dict[str, bool]
) -> float:
    """SRAM_k of one option: its buffer, its output's stream tile when a consumer is inside
    (`streams`), and the inputs it holds among those fed inside (`fused`)."""
    opt = problem.kernels[k].options[option]
    sram = opt.buffer_bytes + (opt.out_tile_bytes if streams else 0.0)
    for x, saved in fused.items():
        sram += hold_bytes(problem, k, option, x, saved)
    return sram


@dataclass(frozen=True)
class EdgeCharges:
    """Seconds each edge charges at its consumer's configuration for one mapping
    (MappingProblem.edge_charges), and the edges into each kernel: built once per
    mapping, so pricing all its configurations is linear in the graph, not quadratic."""

    charges: tuple[float, ...]
    into: dict[int, list[int]]  # kernel -> indices of the edges into it, ascending

    @classmethod
    def of(
        cls, problem: MappingProblem, choice: Sequence[int], rank: Sequence[int] | None = None
    ) -> EdgeCharges:
        sharding = [
            menu.sharding_index(o) if o >= 0 else 0 for menu, o in zip(problem.kernels, choice)
        ]
        into: dict[int, list[int]] = {}
        for i, e in enumerate(problem.edges):
            into.setdefault(e.dst, []).append(i)
        charges = problem.edge_charges(sharding, rank) if problem.edges else []
        return cls(tuple(charges), into)

    def charges_into(self, members: Sequence[int]) -> list[float]:
        """The charges of the edges into `members`, in edge order."""
        edges = sorted(i for k in set(members) for i in self.into.get(k, ()))
        return [self.charges[i] for i in edges]


def config_cost(
    problem: MappingProblem,
    members: Sequence[int],
    choice: Sequence[int],
    rank: Sequence[int] | None = None,
    charges: EdgeCharges | None = None,
) -> ConfigCost:
    """Cost of one configuration; `choice[k]` is the option index of kernel k (all kernels),
    `rank[k]` the position of k's configuration in the plan (MappingProblem.edge_charges:
    which configuration pays a layout two consumers need). `charges`: EdgeCharges.of the
    same choice and rank, when several configurations of one mapping are priced."""
    group = set(members)
    comp = mem_bytes = net = sram = ovh = 0.0
    for k in members:
        menu = problem.kernels[k]
        opt = menu.options[choice[k]]
        comp += opt.compute_s + menu.overhead_s
        ovh += menu.overhead_s
        net += opt.network_s
        mem_bytes += kernel_memory_bytes(problem, k, choice[k], group)
        sram += kernel_sram_bytes(problem, k, choice[k], group)
    if problem.edges:
        for charge in (charges or EdgeCharges.of(problem, choice, rank)).charges_into(members):
            net += charge
    mem = mem_bytes / problem.dram_bandwidth_Bps
    latency = problem.latency(comp, mem, net, ovh)
    feasible = sram <= problem.sram_bytes * (1 + 1e-9) + 1e-6
    return ConfigCost(tuple(members), comp, mem, net, sram, latency, feasible)


def mapping_cost(
    problem: MappingProblem, configs: Sequence[Sequence[int]], choice: Sequence[int]
) -> tuple[float, list[ConfigCost]]:
    """Total latency (sum over configurations) and the per-configuration costs."""
    costs = config_costs(problem, configs, choice)
    if not all(c.feasible for c in costs):
        return math.inf, costs
    return sum(c.latency_s for c in costs), costs


def config_costs(
    problem: MappingProblem, configs: Sequence[Sequence[int]], choice: Sequence[int]
) -> list[ConfigCost]:
    """config_cost of every configuration of one mapping, in time linear in the graph."""
    rank = config_rank(len(problem.kernels), configs)
    charges = EdgeCharges.of(problem, choice, rank)
    return [config_cost(problem, members, choice, rank, charges) for members in configs]


def brute_force(problem: MappingProblem) -> tuple[float, list[list[int]], tuple[int, ...]]:
    """Exhaustive optimum: every legal grouping into configurations (dataflow: any
    assignment with Config[u] <= Config[v] on every edge) x every option of every kernel.

    Enumerated by sharding vector first: a configuration's cost depends only on its
    members' options and on every kernel's sharding (the layout conversions), so once the
    shardings are fixed the options of one configuration's members are enumerated apart
    from the other configurations' (the same minimum as the full product, far fewer
    evaluations)."""
    n = len(problem.kernels)
    if problem.dataflow:
        segmentations = legal_groupings(problem)
    else:
        # kernel by kernel: one kernel per configuration, in any topological order (the
        # order decides which consumer of a tensor pays a layout two of them need)
        orders = topological_orders(problem) if placement_matters(problem) else [range(n)]
        segmentations = [[[k] for k in order] for order in orders]
    segmentations = [segs for segs in segmentations if _pins_ok(problem, segs)]
    by_shard = [_options_by_sharding(m) for m in problem.kernels]
    best: tuple[float, list[list[int]], tuple[int, ...]] = (math.inf, [], ())
    for shard in itertools.product(*[sorted(b) for b in by_shard]):
        filler = [by_shard[k][s][0] for k, s in enumerate(shard)]  # sets the shardings
        for segs in segmentations:
            rank = config_rank(n, segs)
            total, choice = 0.0, list(filler)
            for members in segs:
                latency, opts = _best_members(problem, members, shard, by_shard, filler, rank)
                total += latency
                for k, o in zip(members, opts):
                    choice[k] = o
            if total < best[0] - 1e-15:
                best = (total, segs, tuple(choice))
    return best


def _options_by_sharding(menu) -> dict[int, list[int]]:  # noqa: ANN001 (KernelMenu)
    out: dict[int, list[int]] = {}
    for o in range(len(menu.options)):
        out.setdefault(menu.sharding_index(o), []).append(o)
    return out


def _best_members(
    problem: MappingProblem,
    members: Sequence[int],
    shard: Sequence[int],
    by_shard: list[dict[int, list[int]]],
    filler: list[int],
    rank: Sequence[int],
) -> tuple[float, tuple[int, ...]]:
    """The least latency of one configuration over its members' options of the given
    shardings (inf when none fits the SRAM), and those options. A configuration's latency
    never falls when one member's compute, DRAM bytes or network time grows, and its SRAM
    is a sum over members, so an option no better than another on all four is skipped."""
    best, best_opts = math.inf, tuple(by_shard[k][shard[k]][0] for k in members)
    choice = list(filler)
    group = set(members)
    kept = [_undominated(problem, k, by_shard[k][shard[k]], group) for k in members]
    for opts in itertools.product(*kept):
        for k, o in zip(members, opts):
            choice[k] = o
        cost = config_cost(problem, members, choice, rank)
        if cost.feasible and cost.latency_s < best:
            best, best_opts = cost.latency_s, opts
    return best, best_opts


def _undominated(problem: MappingProblem, k: int, options: list[int], group: set[int]):
    """`options` of kernel k in `group` without those another option matches or beats on
    compute, network, DRAM bytes and SRAM bytes (the first of equals kept)."""
    menu = problem.kernels[k]
    vec = [
        (
            menu.options[o].compute_s,
            menu.options[o].network_s,
            kernel_memory_bytes(problem, k, o, group),
            kernel_sram_bytes(problem, k, o, group),
        )
        for o in options
    ]
    kept = []
    for i, o in enumerate(options):
        if not any(
            j != i and all(a <= b for a, b in zip(vec[j], vec[i])) and (vec[j] != vec[i] or j < i)
            for j in range(len(options))
        ):
            kept.append(o)
    return kept


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


def placement_matters(problem: MappingProblem) -> bool:
    """Whether the configuration that pays a shared layout conversion changes the latency:
    only when a configuration's network time overlaps its other terms (wholly, or by a
    hidden share under a serialised network), and some produced tensor has several
    consumers."""
    return problem.network_overlapped and any(e.group >= 0 for e in problem.edges)


def topological_orders(problem: MappingProblem) -> list[list[int]]:
    """Every topological order of the graph (small graphs only: the brute force's)."""
    n = len(problem.kernels)
    preds = [{e.src for e in problem.in_edges(k)} for k in range(n)]
    out: list[list[int]] = []

    def extend(order: list[int], placed: set[int]) -> None:
        if len(order) == n:
            out.append(list(order))
            return
        for k in range(n):
            if k not in placed and preds[k] <= placed:
                order.append(k)
                placed.add(k)
                extend(order, placed)
                order.pop()
                placed.remove(k)

    extend([], set())
    return out


def _pins_ok(problem: MappingProblem, segs: Sequence[Sequence[int]]) -> bool:
    for c, seg in enumerate(segs):
        for k in seg:
            pin = problem.pinned_configs[k] if problem.pinned_configs else -1
            if pin >= 0 and pin != c:
                return False
    return True
