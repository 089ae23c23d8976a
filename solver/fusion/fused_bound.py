"""A lower bound on every plan of a DATAFLOW graph: all its kernels in one configuration,
the SRAM limit lifted.

Why it holds: a plan's latency is the sum over its configurations of max_r a_r . x_c (the
latency rule's epigraph rows, solver.cost.latency, nonnegative coefficients), and a maximum
of linear functions is subadditive, so the sum is at least the rule applied to the totals.
Of those totals, compute and each kernel's own collectives do not depend on the grouping,
layout conversions are paid once per group and target layout wherever the consumers sit
(MappingProblem.edge_charges), and a kernel's DRAM traffic is least when every producer and
consumer shares its configuration. So the one-configuration problem, each sharding's least
compute, network and per-operand traffic over every tile it has (sampled or not), with no
SRAM limit, costs no more than any plan over every tile, in any order.

Why it matters: the segment bounds price each configuration apart, a layout conversion at
its producer's cheapest sharding, so a trade between replicated compute and collectives
that a long fused configuration makes is invisible to them (a five-layer GPT-3 training
step: segment bounds 30 % under the plan, this bound 1.9 %). Its shardings also seed the
sharding/segmentation alternation (solver.fusion.alternate) where one configuration holds
most kernels.

The MILP runs on a node budget (deterministic work); its proven dual bound is the bound.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

from solver.by_identity import ByIdentity
from solver.cost.problem import KernelMenu, MappingProblem
from solver.milp.model import solve_configurations
from solver.options import VALVE_STOP, SolverOptions

FUSED_NODES = 200  # branch-and-bound nodes of the one-configuration MILP
# the largest one-configuration MILP tried, in sharding choices plus the sharding pairs of
# edges with a layout conversion: its root LP grows faster than the graph (a 71-layer
# GPT-3-175B training step, 40,000 terms: 5 CPU-s; DFModel's GPT-3 1T, 96 layers in one
# graph, 124,000: 187 CPU-s, while its segment bounds prove the composed plan in ~30)
FUSED_TERMS = 60_000
LEAST_TILE = "least costs of every tile"  # a relaxed option's tile text (never a plan's)


@dataclass(frozen=True)
class FusedBound:
    bound_s: float  # 0 when the MILP proved nothing (stopped by the valve)
    shardings: tuple[str, ...]  # per kernel, of its best one-configuration labelling; () if none


def fused_bound(problem: MappingProblem, options: SolverOptions) -> FusedBound:
    """The bound of the module docstring for a DATAFLOW problem. Kept by the relaxed
    problem's content: the tile refinement's rounds (solver.fusion.tile_refine) search
    problems whose every-tile least costs are the same."""
    if not problem.dataflow or not problem.kernels or model_terms(problem) > FUSED_TERMS:
        return FusedBound(0.0, ())
    relaxed = _ONE.get(problem, lambda: one_configuration_problem(problem))
    found = _DONE.get(relaxed)
    if found is None:
        found, complete = _fused_bound(relaxed, options)
        if complete:  # a bound the valve cut short is not kept: it depends on the clock
            _DONE[relaxed] = found
        while len(_DONE) > KEPT:
            del _DONE[next(iter(_DONE))]
    return found


KEPT = 8  # one-configuration problems whose bounds are kept (a process's last few graphs)
_ONE: ByIdentity[MappingProblem] = ByIdentity()
_DONE: dict[MappingProblem, FusedBound] = {}


def _fused_bound(relaxed: MappingProblem, options: SolverOptions) -> tuple[FusedBound, bool]:
    """The bound and whether its MILP ran to its own end (not stopped by the valve)."""
    every = [list(range(len(relaxed.kernels)))]
    step = replace(options, node_limit=min(options.nodes, FUSED_NODES), gap=options.gap / 2)
    r = solve_configurations(relaxed, every, step)
    complete = r.stop != VALVE_STOP
    if r.status == "infeasible" or not math.isfinite(r.bound_s):
        # no labelling fits the DRAM capacity row: nothing does, but that is the
        # search's to say; this bound claims nothing
        return FusedBound(0.0, ()), complete
    shardings = tuple(m.options[o].sharding for m, o in zip(relaxed.kernels, r.choice))
    return FusedBound(max(0.0, r.bound_s), shardings if r.choice else ()), complete


def model_terms(problem: MappingProblem) -> int:
    """Sharding choices plus the sharding pairs of edges that convert a layout: the size of
    the one-configuration MILP."""
    kernels = problem.kernels
    pairs = sum(
        len(kernels[e.src].shardings) * len(kernels[e.dst].shardings)
        for e in problem.edges
        if any(c > 0 for row in e.conv for c in row)
    )
    return sum(len(m.shardings) for m in kernels) + pairs


def one_configuration_problem(problem: MappingProblem) -> MappingProblem:
    """`problem` with one option per kernel sharding, its least compute, network and
    per-operand traffic over every tile (the menu's options and its tile groups), no
    buffers and no SRAM limit."""
    groups: dict[tuple[int, str], dict[str, float]] = {}
    kernels = tuple(_least_menu(m, groups) for m in problem.kernels)
    return replace(problem, kernels=kernels, sram_bytes=math.inf)


def _least_menu(menu: KernelMenu, groups: dict[tuple[int, str], dict[str, float]]) -> KernelMenu:
    """`groups`: each operand's least traffic over the tiles of a menu's tile groups of one
    sharding, by the groups' identity: the copies of a chained layer share their groups
    (solver.cost.named_menus), which hold hundreds of tiles each."""
    options = []
    for s in menu.shardings:
        mine = [o for o in menu.options if o.sharding == s]
        names = [name for name, _ in mine[0].traffic]
        key = (id(menu.tile_groups), s)
        if key not in groups:
            groups[key] = _least_traffic(
                t.traffic for g in menu.tile_groups if g.sharding == s for t in g.tiles
            )
        best = _least_traffic((o.traffic for o in mine), dict(groups[key]))
        least = tuple((x, best.get(x, math.inf)) for x in names)
        options.append(
            mine[0].but(
                tile=LEAST_TILE,
                compute_s=min(o.compute_s for o in mine),
                network_s=min(o.network_s for o in mine),
                buffer_bytes=0.0,
                out_tile_bytes=0.0,
                traffic=least,
            )
        )
    return replace(menu, options=tuple(options), tile_groups=())


def _least_traffic(
    traffics: Iterable[tuple[tuple[str, float], ...]], best: dict[str, float] | None = None
) -> dict[str, float]:
    """Each operand's least bytes over `traffics` ((operand, bytes) pairs), into `best`."""
    best = {} if best is None else best
    for traffic in traffics:
        for x, v in traffic:
            if v < best.get(x, math.inf):
                best[x] = v
    return best
