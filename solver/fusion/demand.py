"""The one kernel order a large DATAFLOW graph's search segments (solver.fusion.solve).

A plan is a segmentation of one topological order, so every tensor whose producer and
consumer the order keeps far apart crosses many possible cuts: wherever a configuration
ends between them, it goes through DRAM. Two orders "as a computation runs on demand" are
built and the one whose tensors live shortest is searched (`span`: bytes x positions
spanned, summed over the edges):

- `pull_order`: each sink in the problem's own order pulls its producers, depth first,
  then each sink moves up to just after its last producer. Where every layer's backward
  starts from a gradient of its own (DFModel's GPT layers chained forward only), this runs
  each layer's backward right after its forward and keeps its saved activations close.
- `deepest_order`: the kernels the deepest outputs need (the ancestors of the sinks at the
  greatest depth, depth = the longest path from a source: a training step's last input
  gradient) are pulled from those sinks, each kernel's deepest producer first, so a
  recomputation reading a checkpoint runs right before its layer's backward; every other
  kernel (a weight update, the forward of a last layer whose output leaves the graph, a
  recomputed tensor no backward reads) runs as soon as its last producer has. On L layers
  chained as a training step (generator.chain) this is every forward layer, then each
  layer's recomputation and backward in turn. There `pull_order` let a dead-end
  recomputation (a sink of its own, early in the problem's order) pull every layer's
  recomputation ahead of the first backward: 71 chained GPT-3 layers were 23% above their
  bound after 60 CPU-s in that order, 4-7% in this one.

Measured (`python benchmarks/graph_family.py --grid`, `benchmarks/solve.py`): the span
picks `deepest_order` on every generated training step and DFModel's README case,
`pull_order` on benchmarks/solve.py's layers_8 and layers_32 (2x and 7x shorter spans).
"""

from __future__ import annotations

from collections.abc import Callable

from generator.layers import longest_paths
from solver.by_identity import ByIdentity
from solver.cost.problem import MappingProblem


def demand_order(problem: MappingProblem) -> list[int]:
    """The order of the two (module docstring) with the shorter `span` (the deepest-first
    one on a tie); once per problem (the search, its deferred proof and the valve's bound
    ask). A copy: the caller may keep it."""
    return list(_CHOSEN.get(problem, lambda: _choose(problem)))


_CHOSEN: ByIdentity[tuple[int, ...]] = ByIdentity()


def _choose(problem: MappingProblem) -> tuple[int, ...]:
    deepest = deepest_order(problem)
    pulled = pull_order(problem)
    nbytes = edge_bytes(problem)
    return tuple(
        pulled if span(problem, pulled, nbytes) < span(problem, deepest, nbytes) else deepest
    )


def span(problem: MappingProblem, order: list[int], nbytes: list[float] | None = None) -> float:
    """Sum over the edges of the tensor's bytes (`edge_bytes`, computed when not given)
    times the positions between producer and consumer."""
    nbytes = edge_bytes(problem) if nbytes is None else nbytes
    pos = [0] * len(order)
    for i, k in enumerate(order):
        pos[k] = i
    total = 0.0
    for e, size in zip(problem.edges, nbytes, strict=True):
        if e.src != e.dst and not e.wrap:
            total += size * (pos[e.dst] - pos[e.src])
    return total


def edge_bytes(problem: MappingProblem) -> list[float]:
    """Per edge, the consumer's least compulsory bytes of the operand it feeds, per chip
    (its least traffic where the menu records no sizes; 0 for a kernel without options)."""
    out = []
    for e in problem.edges:
        options = problem.kernels[e.dst].options
        least = min((o.size_of(e.dst_operand) for o in options), default=0.0)
        if least <= 0:
            least = min((o.traffic_of(e.dst_operand) for o in options), default=0.0)
        out.append(least)
    return out


def _graph(problem: MappingProblem) -> tuple[list[list[int]], list[list[int]]]:
    """Producers and consumers of each kernel within one instance (wrap edges left out)."""
    n = len(problem.kernels)
    pred: list[list[int]] = [[] for _ in range(n)]
    succ: list[list[int]] = [[] for _ in range(n)]
    for e in problem.edges:
        if e.src != e.dst and not e.wrap:
            pred[e.dst].append(e.src)
            succ[e.src].append(e.dst)
    return pred, succ


def _pull(
    pred: list[list[int]], sinks: list[int], placed: list[bool], place: Callable[[int], None]
) -> None:
    """Each sink in turn pulls its unplaced producers, depth first in `pred` order, then
    itself (`place`)."""
    for sink in sinks:
        stack = [(sink, 0)]
        while stack:  # iterative post-order: a chain of thousands of kernels is deep
            k, i = stack.pop()
            if placed[k]:
                continue
            producers = pred[k]
            while i < len(producers) and placed[producers[i]]:
                i += 1  # each producer looked at once: a sink reading 20,000 kernels
            if i < len(producers):
                stack.append((k, i + 1))
                stack.append((producers[i], 0))
                continue
            place(k)


def pull_order(problem: MappingProblem) -> list[int]:
    """Each sink in index order pulls its producers (lowest index first), then every sink
    moves up to just after its last producer."""
    pred, succ = _graph(problem)
    for p in pred:
        p.sort()
    n = len(pred)
    placed = [False] * n
    order: list[int] = []

    def place(k: int) -> None:
        placed[k] = True
        order.append(k)

    _pull(pred, [k for k in range(n) if not succ[k]], placed, place)
    pos = {k: i for i, k in enumerate(order)}
    after: dict[int, list[int]] = {}
    for k in order:
        if not succ[k] and pred[k]:
            after.setdefault(max(pred[k], key=pos.__getitem__), []).append(k)
    out: list[int] = []
    for k in order:
        if not succ[k] and pred[k]:
            continue
        out.append(k)
        out.extend(after.get(k, ()))
    return out


def deepest_order(problem: MappingProblem) -> list[int]:
    """The ancestors of the deepest sinks pulled from them, deepest producer first; every
    other kernel placed as soon as its last producer is (module docstring)."""
    pred, succ = _graph(problem)
    n = len(pred)
    depth = longest_paths(succ)
    sinks = [k for k in range(n) if not succ[k]]
    top = max((depth[k] for k in sinks), default=0)
    deepest = [k for k in sinks if depth[k] == top]
    live = _ancestors(deepest, pred)
    for p in pred:
        p.sort(key=lambda q: (-depth[q], q))
    placer = _Placer(pred, succ, live)
    for k in range(n):
        if not pred[k] and not live[k]:
            placer.place(k)
    _pull(pred, deepest, placer.placed, placer.place)
    return placer.order


def _ancestors(roots: list[int], pred: list[list[int]]) -> list[bool]:
    """Whether each kernel is one of `roots` or feeds one of them."""
    seen = [False] * len(pred)
    stack = list(roots)
    while stack:
        k = stack.pop()
        if not seen[k]:
            seen[k] = True
            stack.extend(pred[k])
    return seen


class _Placer:
    """An order under construction: placing a kernel also places, right after it, every
    kernel outside `live` that it made ready (sinks first, so that a weight update follows
    its last producer directly; then the others, each with what it makes ready)."""

    def __init__(self, pred: list[list[int]], succ: list[list[int]], live: list[bool]):
        self.succ, self.live = succ, live
        self.left = [len(p) for p in pred]
        self.placed = [False] * len(pred)
        self.order: list[int] = []

    def place(self, k: int) -> None:
        stack = [k]
        while stack:
            j = stack.pop()
            if self.placed[j]:
                continue
            self.placed[j] = True
            self.order.append(j)
            ready = []
            for v in self.succ[j]:
                self.left[v] -= 1
                if self.left[v] == 0 and not self.live[v]:
                    ready.append(v)
            # popped in ascending (sinks first, then index) order
            ready.sort(key=lambda v: (bool(self.succ[v]), v), reverse=True)
            stack.extend(ready)
