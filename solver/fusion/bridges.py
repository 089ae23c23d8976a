"""Kernel-by-kernel (one configuration per kernel) mapping of a large graph by dynamic
programming over its bridges, exactly.

With one kernel per configuration, kernels interact only through their edges' layout
conversions (paid in the consumer's configuration). An edge that is a bridge of the
undirected graph (removing it disconnects the graph) and carries a tensor alone (no
conversion group) splits the problem in two that share one number: the producer's
sharding a. So, blocks joined by such bridges form a tree, and a block's best cost given
a is the message it sends along its bridge:
  - a block holding the producer u: its optimum with u restricted to sharding a; the
    block across sees a "ghost" producer whose option a costs that much (its latency is
    that number) and whose edge into the consumer keeps the real conversions;
  - a block holding the consumer v: its optimum with a ghost producer fixed to sharding a
    (it costs nothing; its edge carries the real conversions into v); the block across
    sees a ghost consumer of u whose conversion from sharding a is that number.
Each block is one small MILP per state (solver.milp.model.solve_configurations, exact), the
root one MILP; choices are read back top down. Messages are shifted to a least value of
0 (and rounded to the picosecond), so identical blocks (a model's repeated layers) are
identical MILPs, solved once.
The DRAM capacity row couples all kernels; it is left out of the blocks and checked on
the answer (the full MILP runs when it fails, or when the graph has no usable bridge)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from generator.layers import bridge_indices, components, wide_bridges
from solver.check import mapping_cost
from solver.cost.problem import EdgeCost, KernelMenu, MappingProblem, Option
from solver.fusion.period import menu_ids, menu_key
from solver.fusion.segment_search import until_deadline
from solver.milp.model import MilpResult, solve_configurations
from solver.options import SolverOptions, past

MIN_SIDE = 8  # kernels on each side of a bridge worth cutting (smaller: one MILP anyway)


def bridges(problem: MappingProblem) -> list[int]:
    """Indices of the problem's edges that are bridges of its undirected multigraph."""
    return bridge_indices(len(problem.kernels), [(e.src, e.dst) for e in problem.edges])


def _components(n: int, edges: list[EdgeCost], removed: set[int]) -> list[int]:
    """Component id of every kernel once the edges in `removed` are taken out."""
    return components(n, [(e.src, e.dst) for e in edges], removed)


@dataclass(frozen=True)
class BlockTree:
    """Blocks (kernel lists, in the problem's order) and the bridges joining them: a forest,
    one tree per connected component of the graph (a kernel with no edge is a tree of its
    own), each rooted at its block holding the component's first kernel: `parent_edge[b]`
    (edge index; -1 for a root), `order` (every block, parents before children)."""

    members: tuple[tuple[int, ...], ...]
    block_of: tuple[int, ...]
    parent_edge: tuple[int, ...]
    order: tuple[int, ...]


def block_tree(problem: MappingProblem) -> BlockTree | None:
    """The tree of blocks joined by the bridges worth cutting (a lone edge, MIN_SIDE
    kernels on each side); None when there is none."""
    n, edges = len(problem.kernels), list(problem.edges)
    count: dict[int, int] = {}
    for e in edges:
        count[e.group] = count.get(e.group, 0) + 1
    # a conversion group of one edge is an edge alone
    wide = wide_bridges(n, [(e.src, e.dst) for e in edges], MIN_SIDE)
    keep = {i for i in wide if edges[i].group < 0 or count[edges[i].group] == 1}
    return _tree(n, edges, keep) if keep else None


def _tree(n: int, edges: list[EdgeCost], cut: set[int]) -> BlockTree:
    block_of = _components(n, edges, cut)
    count = max(block_of) + 1
    members: list[list[int]] = [[] for _ in range(count)]
    for k, b in enumerate(block_of):
        members[b].append(k)
    links: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(cut):
        links[block_of[edges[i].src]].append(i)
        links[block_of[edges[i].dst]].append(i)
    parent_edge = [-2] * count
    order: list[int] = []
    for root in dict.fromkeys(block_of):  # blocks by their first kernel: one per component
        if parent_edge[root] != -2:
            continue
        parent_edge[root] = -1
        queue = [root]
        while queue:
            b = queue.pop(0)
            order.append(b)
            for i in links[b]:
                other = block_of[edges[i].src] + block_of[edges[i].dst] - b
                if parent_edge[other] == -2:
                    parent_edge[other] = i
                    queue.append(other)
    return BlockTree(
        tuple(tuple(m) for m in members), tuple(block_of), tuple(parent_edge), tuple(order)
    )


def _ghost(name: str, labels: tuple[str, ...], costs: tuple[float, ...]) -> KernelMenu:
    """A kernel that is only a number per sharding: option a's latency is costs[a] (as
    compute time: every latency rule gives that number for a kernel with nothing else)."""
    options = tuple(
        Option(
            sharding=s,
            tile="ghost",
            compute_s=c,
            network_s=0.0,
            network_bytes=0.0,
            buffer_bytes=0.0,
            out_tile_bytes=0.0,
            traffic=(),
        )
        for s, c in zip(labels, costs)
    )
    return KernelMenu(name, options, labels, ("in",), "out")


@dataclass(frozen=True)
class _Message:
    """What a block tells the block across its bridge `edge`: per state (a sharding index
    of the bridge's producer), the least cost of its side (shifted to a least of 0) and
    the options its side then takes."""

    edge: int
    child_has_src: bool
    states: tuple[int, ...]
    costs: tuple[float, ...]
    choices: tuple[dict[int, int], ...]


@dataclass
class _Sub:
    """One block's MILP: the problem, where each member sits in it, each member's kept
    option indices, and where each child's ghost sits."""

    problem: MappingProblem
    pos: dict[int, int]
    back: dict[int, list[int]]
    ghost_at: dict[int, int]  # message edge -> ghost kernel index (child holds the src)
    key: str


class _Builder:
    """Builds the block MILPs of one problem (menus restricted to some shardings, ghosts)."""

    def __init__(self, problem: MappingProblem):
        self.problem = problem
        self.menu_id = [int(i) for i in menu_ids(problem)]

    def build(
        self,
        members: tuple[int, ...],
        messages: list[_Message],
        parent: tuple[int, int, bool] | None,
    ) -> _Sub:
        """`parent`: (bridge edge, state a, this block holds its producer) or None."""
        p = self.problem
        allowed = {k: list(range(len(p.kernels[k].shardings))) for k in members}
        if parent is not None and parent[2]:
            allowed[p.edges[parent[0]].src] = [parent[1]]
        for msg in messages:
            if not msg.child_has_src:
                u = p.edges[msg.edge].src
                allowed[u] = [a for a in allowed[u] if a in msg.states]
        heads: list[tuple[KernelMenu, EdgeCost, tuple]] = []  # ghost producers, first
        ghost_at: dict[int, int] = {}
        for msg in messages:
            if msg.child_has_src:
                e = p.edges[msg.edge]
                labels = tuple(p.kernels[e.src].shardings[a] for a in msg.states)
                ghost_at[msg.edge] = len(heads)
                heads.append((_ghost(f"ghost{msg.edge}", labels, msg.costs), e, msg.states))
        if parent is not None and not parent[2]:
            e = p.edges[parent[0]]
            label = (p.kernels[e.src].shardings[parent[1]],)
            heads.append((_ghost("ghost_parent", label, (0.0,)), e, (parent[1],)))
        pos = {k: len(heads) + i for i, k in enumerate(members)}
        kernels: list[KernelMenu] = [g for g, _, _ in heads]
        back: dict[int, list[int]] = {}
        for k in members:
            menu = p.kernels[k]
            keep = [menu.shardings[a] for a in allowed[k]]
            back[k] = [o for o, opt in enumerate(menu.options) if opt.sharding in keep]
            opts = tuple(menu.options[o] for o in back[k])
            kernels.append(replace(menu, options=opts, shardings=tuple(keep)))
        edges: list[EdgeCost] = []
        for e in p.edges:
            if e.src in pos and e.dst in pos:
                edges.append(self._slice(e, pos, allowed, allowed[e.src]))
        for g, (_, e, states) in enumerate(heads):
            edges.append(replace(self._slice(e, {**pos, e.src: g}, allowed, states), group=-1))
        for msg in messages:
            if not msg.child_has_src:
                u = p.edges[msg.edge].src
                cost = dict(zip(msg.states, msg.costs, strict=True))
                conv = tuple((cost[a],) for a in allowed[u])
                edges.append(EdgeCost(pos[u], len(kernels), "in", conv))
                kernels.append(_ghost(f"ghost{msg.edge}", ("ghost",), (0.0,)))
        sub = replace(
            p,
            kernels=tuple(kernels),
            edges=tuple(edges),
            max_configs=len(kernels),
            pinned_configs=(),
            resident_budget_bytes=math.inf,
        )
        return _Sub(sub, pos, back, ghost_at, self._key(sub, members, allowed, len(heads)))

    def _slice(
        self, e: EdgeCost, pos: dict[int, int], allowed: dict[int, list[int]], rows: list[int]
    ) -> EdgeCost:
        cols = allowed[e.dst]
        return replace(
            e,
            src=pos[e.src],
            dst=pos[e.dst],
            conv=tuple(tuple(e.conv[a][b] for b in cols) for a in rows),
            layouts=tuple(e.layouts[b] for b in cols) if e.layouts else (),
        )

    def _key(self, sub: MappingProblem, members: tuple[int, ...], allowed: dict, heads: int) -> str:
        """Equal for blocks that are the same MILP (names and weight identities aside)."""
        ghosts = [menu_key(m) for m in sub.kernels[:heads]]
        ghosts += [menu_key(m) for m in sub.kernels[heads + len(members) :]]
        kernels = [(self.menu_id[k], tuple(allowed[k])) for k in members]
        groups: dict[int, int] = {}
        edges = [
            (e.src, e.dst, e.dst_operand, e.conv, e.saved, e.wrap, e.layouts, e.lead)
            + ((groups.setdefault(e.group, len(groups)),) if e.group >= 0 else (-1,))
            for e in sub.edges
        ]
        return repr((ghosts, kernels, edges))


class _Solver:
    """The dynamic programme over one block tree; `results` caches block MILPs by key."""

    def __init__(
        self, problem: MappingProblem, tree: BlockTree, options: SolverOptions, deadline: float
    ):
        self.problem, self.tree, self.options = problem, tree, options
        self.deadline = deadline
        self.builder = _Builder(problem)
        self.cache: dict[str, MilpResult] = {}
        self.total = 0.0  # the optimum: the root MILP's plus every message's shift
        self.runs: list[MilpResult] = []

    def solve(self, sub: _Sub) -> MilpResult:
        if sub.key not in self.cache:
            configs = tuple((i,) for i in range(len(sub.problem.kernels)))
            options = until_deadline(self.options, self.deadline)
            r = solve_configurations(sub.problem, configs, options)
            self.runs.append(r)
            self.cache[sub.key] = r
        return self.cache[sub.key]

    def choices(self, sub: _Sub, r: MilpResult, messages: list[_Message]) -> dict[int, int]:
        """Original option of every kernel of the block and of the subtrees below it."""
        p = self.problem
        out = {k: sub.back[k][r.choice[i]] for k, i in sub.pos.items()}
        for msg in messages:
            e = p.edges[msg.edge]
            if msg.child_has_src:
                state = msg.states[r.choice[sub.ghost_at[msg.edge]]]
            else:
                state = p.kernels[e.src].sharding_index(out[e.src])
            out.update(msg.choices[msg.states.index(state)])
        return out

    def message(self, b: int, messages: list[_Message]) -> _Message | None:
        """Block b's message across its parent bridge (None: no state is feasible)."""
        e = self.tree.parent_edge[b]
        has_src = self.tree.block_of[self.problem.edges[e].src] == b
        members = self.tree.members[b]
        states, costs, picks = [], [], []
        for a in range(len(self.problem.kernels[self.problem.edges[e].src].shardings)):
            if past(self.deadline):  # the valve: the caller sees it and stops
                return None
            sub = self.builder.build(members, messages, (e, a, has_src))
            r = self.solve(sub)
            if r.status == "infeasible" or not math.isfinite(r.objective_s):
                continue
            states.append(a)
            costs.append(r.objective_s)
            picks.append(self.choices(sub, r, messages))
        if not states:
            return None
        least = min(costs)
        self.total += least  # what the shift takes out of the side's costs
        # rounded to the picosecond: a repeated layer's message is then the same numbers
        # as its neighbour's, not equal up to the last bit, so their MILPs are one MILP
        shifted = tuple(round(c - least, 12) for c in costs)
        return _Message(e, has_src, tuple(states), shifted, tuple(picks))

    def run(self) -> dict[int, int] | None:
        """Every kernel's option, or None when a block has no feasible state."""
        tree = self.tree
        inbox: dict[int, list[_Message]] = {b: [] for b in tree.order}
        roots = [b for b in tree.order if tree.parent_edge[b] < 0]
        for b in reversed(tree.order):
            if tree.parent_edge[b] < 0:
                continue
            msg = self.message(b, inbox[b])
            if msg is None:
                return None
            e = self.problem.edges[msg.edge]
            other = tree.block_of[e.src] + tree.block_of[e.dst] - b
            inbox[other].append(msg)
        picked: dict[int, int] = {}
        for root in roots:  # the components share no edge: each tree's optimum adds up
            sub = self.builder.build(tree.members[root], inbox[root], None)
            r = self.solve(sub)
            if r.status == "infeasible" or not math.isfinite(r.objective_s):
                return None
            self.total += r.objective_s
            picked.update(self.choices(sub, r, inbox[root]))
        return picked


def solve_singles(
    problem: MappingProblem, options: SolverOptions, deadline: float = math.inf
) -> MilpResult | None:
    """One configuration per kernel, solved block by block over the graph's bridges: the
    same optimum as one MILP over the whole graph (each block MILP to `options.gap`).
    None when it does not apply (no bridge worth cutting, pinned kernels, a block with no
    feasible state, or the DRAM capacity row violated): the caller runs the full MILP.
    `deadline` (perf_counter seconds) caps each block MILP's time limit; past it, no
    further block is solved (None: the caller checks the deadline)."""
    if problem.any_config_pinned:
        return None
    tree = block_tree(problem)
    if tree is None:
        return None
    dp = _Solver(problem, tree, options, deadline)
    picked = dp.run()
    runs = dp.runs
    if picked is None or not fits_dram(problem, picked):
        return None
    n = len(problem.kernels)
    choice = tuple(picked[k] for k in range(n))
    objective = dp.total
    if n <= problem.max_configs:  # a plan in its own right: priced by the checker
        objective, _ = mapping_cost(problem, tuple((k,) for k in range(n)), choice)
    status = "optimal" if all(r.status == "optimal" for r in runs) else "time_limit"
    return MilpResult(
        status=status,
        objective_s=objective,
        bound_s=0.0,  # a seed for the fusion search, which proves its own bound
        choice=choice,
        num_vars=max(r.num_vars for r in runs),
        num_binaries=max(r.num_binaries for r in runs),
        num_rows=max(r.num_rows for r in runs),
        build_s=sum(r.build_s for r in runs),
        solve_s=sum(r.solve_s for r in runs),
    )


def fits_dram(problem: MappingProblem, picked: dict[int, int]) -> bool:
    """The DRAM capacity row of the full MILP (milp.model.add_memory_capacity) holds for
    the choice: each weight stored once at its largest per-chip need."""
    per_param, budget = problem.resident_bytes_per_param, problem.resident_budget_bytes
    if not math.isfinite(budget) or per_param <= 0:
        return True
    storage: dict[str, float] = {}
    for k, o in picked.items():
        for w, elems in problem.kernels[k].options[o].weights:
            storage[w] = max(storage.get(w, 0.0), elems * per_param)
    return sum(storage.values()) <= max(budget, 0.0) * (1 + 1e-9)
