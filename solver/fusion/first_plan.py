"""A feasible plan without a search, for when the wall-clock valve stops one before its
first plan (issue #36 item 9: a 1,500-kernel DATAFLOW chain said "no plan" at 20 s though
a plan always existed).

Built in time linear in the graph, no MILP: every kernel, in the problem's topological
order, takes the option of least time alone plus the layout conversions from its
producers' options, among those that hold at most a share of the SRAM (the whole SRAM for
its buffer first, then 1/2, 1/4, ... of it fused, then the option storing the fewest
weight parameters and holding the least, then the one holding the least); then the
kernels are cut greedily into
configurations, each extended while it fits the SRAM. For a fixed choice that cut has the
fewest configurations: a configuration's SRAM is a sum of non-negative terms, each present
only when both ends of its edge are inside, so a run of kernels inside a fitting one fits
too. Kernel by kernel, each kernel is its own configuration. Each choice whose cut
fits num_config and the DRAM row is priced and checked by the independent evaluator
(solver.check.mapping_cost: the SRAM of every configuration), and the cheapest is kept;
none: no plan. A first plan only: on small random graphs from the optimum to some 30
times it.

The valve uses it (solver.fusion.solve), and the large-graph search starts from it when
one configuration per kernel is not a plan (solver.fusion.alternate): an incumbent from
the start, deterministic, so a work budget's verdict stays the same on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from solver.by_identity import ByIdentity
from solver.check import hold_bytes, least_sram_option, mapping_cost, options_sram_bytes
from solver.cost.problem import MappingProblem, Option
from solver.cost.weights import stored_params

NOTE = (
    "the valve stopped the search before its first plan: the plan is the first one "
    "(greedy options, the fewest configurations that fit; solver.fusion.first_plan)"
)
SRAM_SLACK = 1e-9  # relative, as solver.check.config_cost's feasibility test
# shares of the SRAM one kernel may hold, each tried (1: any option whose buffer fits
# alone, the fastest first plans), with num_config / n and its half and quarter (about
# n / num_config kernels in a configuration)
SRAM_SHARES = (1.0, 1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 64, 1 / 256)


def first_plan(
    problem: MappingProblem,
) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...], float] | None:
    """(configurations, option per kernel, latency) of a feasible plan, or None when the
    cheap construction finds none (pinned configurations, an order that is not
    topological, every choice over the SRAM, num_config or the DRAM row)."""
    n = len(problem.kernels)
    if n == 0 or problem.any_config_pinned:
        return None
    if any(e.src >= e.dst for e in problem.edges if not e.wrap):
        return None
    tried: set[tuple[int, ...]] = set()
    best: tuple[tuple[tuple[int, ...], ...], tuple[int, ...], float] | None = None
    facts = _Facts(problem)
    per_config = max(1, problem.max_configs) / n  # a configuration's share of the kernels
    shares = sorted({*SRAM_SHARES, per_config, per_config / 2, per_config / 4}, reverse=True)
    least = least_sram_cut(problem)
    for share in (*shares, 0.0, -1.0, None):  # each built and priced in linear time
        if share is None:  # the cut with the fewest configurations any choice allows
            if least is None:
                continue
            configs, choice = least
        else:
            if share > 0:
                choice = _greedy_choice(problem, facts, share)
            else:
                choice = facts.leanest if share == 0 else facts.least_held
            configs = _fewest_configs(problem, choice)
        if choice in tried or not _stores_within_budget(problem, choice):
            continue
        tried.add(choice)
        if configs is None or len(configs) > max(problem.max_configs, 1):
            continue
        latency_s, _ = mapping_cost(problem, configs, choice)
        if math.isfinite(latency_s) and (best is None or latency_s < best[2]):
            best = (configs, choice, latency_s)
    return best


def least_sram_cut(
    problem: MappingProblem, cap_bytes: float | None = None
) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]] | None:
    """The fewest configurations of the kernels in index order that fit `cap_bytes` of SRAM
    (default: the chip's) over every choice of options, with the choice of each kernel's
    least-SRAM option in its configuration; None when a kernel does not fit alone.

    A configuration's SRAM is a sum of one term per kernel that depends on its own option
    only (buffer, the stream tile of an output consumed inside, the inputs it holds:
    solver.check.kernel_sram_bytes), so its least is the sum of each term's least; adding a
    kernel never lowers a term, so a run of kernels inside a fitting configuration fits too,
    and cutting greedily (extend while it fits) gives the fewest configurations. Linear in
    the graph: a kernel's term is computed when it joins and again when it gains its first
    consumer inside (nothing else changes it). Cached per problem for the chip's SRAM (the
    search and its first plan both ask). Kernel by kernel: one configuration per kernel."""
    if cap_bytes is None:
        return _CUTS.get(problem, lambda: _least_sram_cut(problem, problem.sram_bytes))
    return _least_sram_cut(problem, cap_bytes)


# per problem: its least_sram_cut at the chip's SRAM
_CUTS: ByIdentity[tuple[tuple[tuple[int, ...], ...], tuple[int, ...]] | None] = ByIdentity()


def _least_sram_cut(
    problem: MappingProblem, cap: float
) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]] | None:
    n = len(problem.kernels)
    if not problem.dataflow:
        choice = tuple(least_sram_option(problem, k, {k})[0] for k in range(n))
        return tuple((k,) for k in range(n)), choice
    configs: list[tuple[int, ...]] = []
    choice: list[int] = [0] * n
    start, total = 0, 0.0
    members: set[int] = set()
    streaming: set[int] = set()  # members with a consumer inside
    term: dict[int, float] = {}
    k = 0
    while k < n:
        members.add(k)
        fresh = {e.src for e in problem.in_edges(k) if e.src in members} - streaming - {k}
        least = {p: least_sram_option(problem, p, members) for p in (k, *sorted(fresh))}
        grow = sum(sram - term.get(p, 0.0) for p, (_, sram) in least.items())
        if not _fits_cap(total + grow, cap):
            members.discard(k)
            if k == start:
                return None
            configs.append(tuple(range(start, k)))
            start, total = k, 0.0
            members.clear()
            streaming.clear()
            term.clear()
            continue
        total += grow
        streaming |= fresh
        for p, (o, sram) in least.items():
            choice[p], term[p] = o, sram
        k += 1
    configs.append(tuple(range(start, n)))
    return tuple(configs), tuple(choice)


def fewest_configs(problem: MappingProblem) -> float:
    """The fewest configurations any plan of the kernels in index order needs to fit the
    SRAM (least_sram_cut); inf when a kernel does not fit alone."""
    cut = least_sram_cut(problem)
    return math.inf if cut is None else len(cut[0])


def _fits_cap(sram_bytes: float, cap_bytes: float) -> bool:
    return sram_bytes <= cap_bytes * (1 + SRAM_SLACK) + 1e-6


def _solo_latency(problem: MappingProblem, k: int, opt: Option) -> float:
    """Seconds of kernel k's option alone in its configuration (edges not charged)."""
    menu = problem.kernels[k]
    memory_s = sum(t for _, t in opt.traffic) / problem.dram_bandwidth_Bps
    compute_s = opt.compute_s + menu.overhead_s
    return problem.latency(compute_s, memory_s, opt.network_s, menu.overhead_s)


def _held(problem: MappingProblem, k: int) -> list[float]:
    """SRAM bytes of each of kernel k's options with every neighbour in its configuration
    (solver.check.kernel_sram_bytes)."""
    near = {e.src for e in problem.in_edges(k)} | {e.dst for e in problem.out_edges(k)}
    return options_sram_bytes(problem, k, near)


def _fits(problem: MappingProblem, sram_bytes: float) -> bool:
    return _fits_cap(sram_bytes, problem.sram_bytes)


class _Facts:
    """Per kernel and option, what every greedy choice reads: the latency alone and the
    SRAM held fused; per kernel, its leanest option (computed once, not once a share)."""

    def __init__(self, problem: MappingProblem):
        self.solo = [
            [_solo_latency(problem, k, opt) for opt in menu.options]
            for k, menu in enumerate(problem.kernels)
        ]
        self.held = [_held(problem, k) for k in range(len(problem.kernels))]
        self.sharding = [
            [menu.sharding_index(o) for o in range(len(menu.options))] for menu in problem.kernels
        ]
        self.leanest = tuple(_leanest(problem, self, k) for k in range(len(problem.kernels)))
        # the option holding the least SRAM fused, then the fastest (weights not counted)
        self.least_held = tuple(
            min(range(len(h)), key=lambda o, h=h, s=s: (h[o], s[o], o))
            for h, s in zip(self.held, self.solo, strict=True)
        )


def _greedy_choice(problem: MappingProblem, facts: _Facts, share: float) -> tuple[int, ...]:
    """Per kernel in order, the option of least solo latency plus the layout conversions
    from its producers' options already chosen, among those whose buffer fits the SRAM
    (share 1) or that hold at most `share` of it fused (so about 1/share kernels fit one
    configuration); the leanest where none does."""
    choice: list[int] = []
    for k, menu in enumerate(problem.kernels):
        opts = menu.options
        if share >= 1:
            allowed = [o for o in range(len(opts)) if _fits(problem, opts[o].buffer_bytes)]
        else:
            cap = share * problem.sram_bytes
            allowed = [o for o in range(len(opts)) if facts.held[k][o] <= cap]
        if not allowed:
            choice.append(facts.leanest[k])
            continue
        conv_s = _conversions(problem, facts, choice, k)
        sharding = facts.sharding[k]
        choice.append(min(allowed, key=lambda o: (facts.solo[k][o] + conv_s[sharding[o]], o)))
    return tuple(choice)


def _conversions(problem: MappingProblem, facts: _Facts, choice: list[int], k: int) -> list[float]:
    """Per sharding of kernel k, the conversions from its producers' chosen options (every
    edge charged: the groups' one-payment rule only lowers it); an option's greedy key is
    its latency alone plus its sharding's."""
    sharding, ins = facts.sharding, problem.in_edges(k)
    return [
        sum(e.conv[sharding[e.src][choice[e.src]]][b] for e in ins)
        for b in range(len(problem.kernels[k].shardings))
    ]


def _leanest(problem: MappingProblem, facts: _Facts, k: int) -> int:
    """Kernel k's option storing the fewest weight parameters, then holding the least SRAM
    when fused, then the fastest."""
    opts = problem.kernels[k].options

    def key(o: int) -> tuple[float, float, float, int]:
        weights = sum(elems for _, elems in opts[o].weights)
        return (weights, facts.held[k][o], facts.solo[k][o], o)

    return min(range(len(opts)), key=key)


def _stores_within_budget(problem: MappingProblem, choice: Sequence[int]) -> bool:
    """The DRAM row (milp.model.add_memory_capacity): the parameters the choice stores
    fit the graph instance's budget."""
    per_param, budget = problem.resident_bytes_per_param, problem.resident_budget_bytes
    if per_param <= 0 or not math.isfinite(budget):
        return True
    return stored_params(problem, tuple(choice)) * per_param <= budget * (1 + SRAM_SLACK)


def _fewest_configs(
    problem: MappingProblem, choice: Sequence[int]
) -> tuple[tuple[int, ...], ...] | None:
    """The greedy cut of the kernels (index order) into configurations that fit the SRAM
    under `choice`, or None when a kernel does not fit alone. Kernel by kernel: one per
    kernel."""
    n = len(problem.kernels)
    if not problem.dataflow:
        return tuple((k,) for k in range(n))
    configs: list[tuple[int, ...]] = []
    start, sram = 0, 0.0
    streaming: set[int] = set()  # producers in the configuration whose stream tile counts
    for k in range(n):
        grow, producers = _added_sram(problem, choice, k, start, streaming)
        if k > start and not _fits(problem, sram + grow):
            configs.append(tuple(range(start, k)))
            start, sram = k, 0.0
            streaming.clear()
            grow, producers = _added_sram(problem, choice, k, start, streaming)
        if not _fits(problem, sram + grow):
            return None
        sram += grow
        streaming.update(producers)
    configs.append(tuple(range(start, n)))
    return tuple(configs)


def _added_sram(
    problem: MappingProblem, choice: Sequence[int], k: int, start: int, streaming: set[int]
) -> tuple[float, set[int]]:
    """The SRAM bytes kernel k adds to the configuration of kernels start..k-1 (solver.check's
    SRAM_k: its buffer and the inputs it holds, plus the stream tile of each producer
    inside that gains its first consumer inside), and those producers."""
    opt = problem.kernels[k].options[choice[k]]
    edges = problem.in_edges(k)
    inside = [e for e in edges if start <= e.src < k]
    holds = sum(
        hold_bytes(problem, k, choice[k], x, any(e.saved for e in edges if e.dst_operand == x))
        for x in sorted({e.dst_operand for e in inside})
    )
    producers = {e.src for e in inside} - streaming
    tiles = sum(problem.kernels[p].options[choice[p]].out_tile_bytes for p in sorted(producers))
    return opt.buffer_bytes + holds + tiles, producers
