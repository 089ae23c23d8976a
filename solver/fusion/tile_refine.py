"""A fused search's proof over every tile when its GEMM menus were sampled (issue #33).

Why: a DATAFLOW GEMM whose per-status tile frontier is long searches a sample of it
(solver.cost.frontier.fusion_points), so the search's own proof holds over the sample
only. Every tile of the exact menu sits in a group (frontier.tile_groups, kept on the menu
as KernelMenu.tile_groups). A group's stand-in, its componentwise least buffer, output tile
and per-operand traffic, costs no more than any of its tiles whatever the status of the
operands (every status cost is monotone in those), so the same search over the stand-ins
(the relaxed problem) proves a bound over every tile. Where the relaxed plan leans on the
stand-in of a group of several tiles, that group is opened: its tiles join the searched
menus, and stand for themselves in the next bound. It ends when the bound meets the plan
within the gap (optimal over every tile), or when the relaxed plan is made of real tiles
only (then it is itself a plan over every tile), or after `tile_refinements` rounds of
cutting, or after a round whose cuts did not raise the bound (a bound of many loose groups
that would take many more, or one set by solver.fusion.fused_bound, which no cut moves;
the tiles cut so far are still searched for a plan): deterministic work, and a result it
stops says so (stop "tile_menus", "tile_bound").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from solver.by_identity import ByIdentity
from solver.cost.problem import KernelMenu, MappingProblem, Option, TileCost, TileGroup
from solver.fusion.segment_search import GraphSolution, until_deadline
from solver.options import VALVE_STOP, SolverOptions, past

STOP = "tile_menus"  # the stop reason when the opening budget ends short of a proof
STALLED = "tile_bound"  # the stop reason when a round of cuts left the bound where it was
STAND_IN = "least costs of {n} tiles"  # a stand-in's tile text (a bound's, never a plan's)

Search = Callable[[MappingProblem, SolverOptions], GraphSolution]


def _with_tile(base: Option, tile: TileCost) -> Option:
    return base.but(
        tile=tile.tile,
        buffer_bytes=tile.buffer_bytes,
        out_tile_bytes=tile.out_tile_bytes,
        traffic=tile.traffic,
    )


def _cost_key(o: Option) -> tuple:
    return (o.sharding, o.buffer_bytes, o.out_tile_bytes, o.traffic)


def _base(menu: KernelMenu, sharding: str) -> Option:
    """An option of `sharding`: what every tile of it shares (compute, network, weights)."""
    return next(o for o in menu.options if o.sharding == sharding)


def _stand_in(base: Option, tiles: tuple[TileCost, ...], seen: dict[int, tuple]) -> Option:
    """The componentwise least costs of `tiles`: no more than any of them in any status.
    `seen`: least costs by id of a part alive in the caller (copies of a layer share their
    groups' tile tuples: one computation each)."""
    if id(tiles) not in seen:
        seen[id(tiles)] = (tiles, _least_costs(tiles))  # the part kept: its id stays its own
    buffer_bytes, out_tile_bytes, least = seen[id(tiles)][1]
    return base.but(
        tile=STAND_IN.format(n=len(tiles)),
        buffer_bytes=buffer_bytes,
        out_tile_bytes=out_tile_bytes,
        traffic=least,
    )


def _least_costs(tiles: tuple[TileCost, ...]) -> tuple[float, float, tuple]:
    """(least buffer, least output tile, least traffic per operand) of `tiles`."""
    names = [name for name, _ in tiles[0].traffic]
    traffic = [dict(t.traffic) for t in tiles]
    least = tuple((x, min(d[x] for d in traffic)) for x in names)
    buffer_bytes = min(t.buffer_bytes for t in tiles)
    return buffer_bytes, min(t.out_tile_bytes for t in tiles), least


Part = tuple[TileCost, ...]  # tiles of one group that one stand-in covers
OPEN_WHOLE = 160  # a sharding with at most this many tiles is opened whole at once
PIECES = 4  # a larger group's part a plan leans on is cut into this many by buffer


def searched_problem(
    problem: MappingProblem, added: list[tuple[TileGroup, TileCost]]
) -> MappingProblem:
    """`problem` with every added tile appended to the menus that hold its group, in the
    order added (so a plan of an earlier round keeps its option indices)."""
    if not added:
        return problem
    kernels = []
    for menu in problem.kernels:
        groups = set(menu.live_groups)
        extra: list[Option] = []
        have = {_cost_key(o) for o in menu.options}
        for group, tile in added:
            if group in groups:
                o = _with_tile(_base(menu, group.sharding), tile)
                if _cost_key(o) not in have:
                    have.add(_cost_key(o))
                    extra.append(o)
        kernels.append(replace(menu, options=menu.options + tuple(extra)) if extra else menu)
    return replace(problem, kernels=tuple(kernels))


Origin = list[list[tuple[TileGroup, int] | None]]


def relaxed_problem(
    problem: MappingProblem, parts: dict[TileGroup, list[Part]]
) -> tuple[MappingProblem, Origin]:
    """`problem` with every sampled menu replaced by its groups' parts (a group not cut is
    one part): a part of one tile by that tile, any other by its stand-in. `origin[k][o]`:
    the (group, part index) option o of kernel k stands in for (None: a real tile). With
    no group cut, computed once per problem (the valve's bound and the first round ask)."""
    if not parts:
        return _UNCUT.get(problem, lambda: _relaxed_problem(problem, parts))
    return _relaxed_problem(problem, parts)


# the latest problem's only: the valve's bound and the first round ask within one solve,
# and a relaxed problem is as large as the problem (an outer search solves many)
_UNCUT: ByIdentity[tuple[MappingProblem, Origin]] = ByIdentity(size=1)


def _relaxed_problem(
    problem: MappingProblem, parts: dict[TileGroup, list[Part]]
) -> tuple[MappingProblem, Origin]:
    kernels: list[KernelMenu] = []
    origin: Origin = []
    seen: dict[int, tuple] = {}
    for menu in problem.kernels:
        if not menu.live_groups:
            kernels.append(menu)
            origin.append([None] * len(menu.options))
            continue
        grouped = {g.sharding for g in menu.live_groups}
        options = [o for o in menu.options if o.sharding not in grouped]
        where: list[tuple[TileGroup, int] | None] = [None] * len(options)
        for group in menu.live_groups:
            base = _base(menu, group.sharding)
            for i, part in enumerate(parts.get(group, [group.tiles])):
                single = len(part) == 1
                options.append(_with_tile(base, part[0]) if single else _stand_in(base, part, seen))
                where.append(None if single else (group, i))
        kernels.append(replace(menu, options=tuple(options)))
        origin.append(where)
    return replace(problem, kernels=tuple(kernels)), origin


def _as_plan(
    relaxed: MappingProblem, sol: GraphSolution, searched: MappingProblem
) -> GraphSolution | None:
    """The relaxed plan `sol`, made of real tiles only, as a plan of `searched` (its option
    indices), or None when one of its tiles is not on the searched menus."""
    choice = []
    for k, o in enumerate(sol.choice):
        index = {_cost_key(x): i for i, x in enumerate(searched.kernels[k].options)}
        i = index.get(_cost_key(relaxed.kernels[k].options[o]))
        if i is None:
            return None
        choice.append(i)
    return replace(sol, choice=tuple(choice))


def _cut(
    problem: MappingProblem,
    leaning: list[tuple[int, TileGroup, int]],
    parts: dict[TileGroup, list[Part]],
    added: list[tuple[TileGroup, TileCost]],
) -> None:
    """Cut the parts a relaxed plan leans on (kernel, group, part index): a sharding of at
    most OPEN_WHOLE tiles into single tiles, else the part into PIECES by buffer. Each new
    part's first tile joins the searched menus (`added`), so every part's first tile is on
    them (a group's first is a sampled tile's cost twin)."""
    for k, group, i in leaning:
        menu = problem.kernels[k]
        same = [g for g in menu.live_groups if g.sharding == group.sharding]
        if sum(len(g.tiles) for g in same) <= OPEN_WHOLE:
            for g in same:
                old = parts.get(g, [g.tiles])
                if len(old) < len(g.tiles):
                    firsts = {p[0] for p in old}
                    parts[g] = [(t,) for t in g.tiles]
                    added += [(g, t) for t in g.tiles if t not in firsts]
            continue
        current = parts.setdefault(group, [group.tiles])
        if i >= len(current) or len(current[i]) == 1:
            continue  # cut already (the same group leaned on by another kernel)
        part = current[i]
        step = -(-len(part) // PIECES)
        pieces = [part[j : j + step] for j in range(0, len(part), step)]
        parts[group] = current[:i] + pieces + current[i + 1 :]
        added += [(group, p[0]) for p in pieces[1:]]


def refine(
    problem: MappingProblem,
    sol: GraphSolution,
    options: SolverOptions,
    search: Search,
    deadline: float,
    rounds: int,
    valve_bound: Callable[[], float] = lambda: 0.0,
) -> GraphSolution:
    """`sol` (found over the sampled menus of `problem`) with a bound over every tile, and
    the better plans the cut groups' tiles give; `GraphSolution.problem` is the searched
    problem its option indices refer to when tiles were added. `valve_bound`: a bound over
    every tile without a search (solver.fusion.solve's root bound over the order it
    segments), the one reported when the valve trips before any relaxed search."""
    stats = replace(sol.stats, notes=list(sol.stats.notes))
    best, best_problem = sol, None  # the problem of best's option indices (None: problem's)
    bound = 0.0  # a latency is never negative: the bound before any relaxed search
    parts: dict[TileGroup, list[Part]] = {}
    added: list[tuple[TileGroup, TileCost]] = []
    searched = 0  # tiles of `added` the searched menus held at the last search over them
    stop = ""  # why the last relaxed search stopped short of its own proof
    for round_ in range(rounds + 1):
        if past(deadline):
            stop = VALVE_STOP
            if round_ == 0:  # no relaxed search ran: the bound that needs none
                bound = valve_bound()
            break
        relaxed, origin = relaxed_problem(problem, parts)
        r = search(relaxed, until_deadline(options, deadline))
        stats.milps += r.stats.milps
        stop = r.stats.stop
        stalled = round_ > 0 and r.bound_s <= bound * (1 + 1e-9)
        bound = max(bound, r.bound_s)
        if not math.isfinite(r.objective_s):
            break  # no relaxed plan: proven infeasible over every tile, or stopped
        leaning = [(k, *at) for k, o in enumerate(r.choice) if (at := origin[k][o])]
        if not leaning:  # real tiles only: a plan over every tile
            extended = searched_problem(problem, added)
            plan = _as_plan(relaxed, r, extended)
            if plan is not None and plan.objective_s < best.objective_s:
                best, best_problem = plan, (extended if added else None)
        if closed(best.objective_s, bound, options.gap) or not leaning:
            break
        if len(added) > searched and not past(deadline):  # search the cut groups' tiles
            extended = searched_problem(problem, added)
            s = search(extended, until_deadline(options, deadline))
            stats.milps += s.stats.milps
            searched = len(added)
            if s.objective_s < best.objective_s:
                best, best_problem = s, extended
            if closed(best.objective_s, bound, options.gap):
                break
        if stalled:  # cutting what the last plan leaned on did not raise the bound
            stop = STALLED
            break
        if round_ == rounds:
            break
        _cut(problem, list(dict.fromkeys(leaning)), parts, added)
    if bound == math.inf:  # no tile makes the graph fit
        return sol
    bound = min(bound, best.objective_s)
    cut = f"{len(added)} tile{'s' * (len(added) != 1)} cut out"
    stats.notes.append(f"bound over every tile (sampled menus, {cut}): {bound:.6g} s")
    status = best.status
    if closed(best.objective_s, bound, options.gap):
        status, stats.stop = "optimal", ""
    elif math.isfinite(best.objective_s):
        status = "time_limit"
        stats.stop = stats.stop or stop or STOP
    return replace(best, bound_s=bound, status=status, stats=stats, problem=best_problem)


def closed(objective_s: float, bound_s: float, gap: float) -> bool:
    """The plan is within the relative gap of the bound (both over every tile)."""
    if not math.isfinite(objective_s):
        return False
    return objective_s - bound_s <= gap * objective_s * (1 + 1e-9) + 1e-15
