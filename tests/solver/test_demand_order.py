"""solver.fusion.demand: the order a large DAG's search segments (issue #39)."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

from google.protobuf import text_format

from generator.chain import chain_instances
from generator.graph import KernelGraph, Pass
from mapshard import pipeline
from schema import setup_pb2
from solver.fusion.demand import deepest_order, demand_order, pull_order, span
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.fusion.solve import _in_order, _in_problem_order


class _Problem(SimpleNamespace):
    """A stand-in MappingProblem (a class of its own: the order is kept by identity)."""


def _problem(
    n: int,
    pairs: list[tuple[int, int]],
    nbytes: dict[tuple[int, int], float] | None = None,
    wraps: list[tuple[int, int]] = (),
) -> _Problem:
    """What the orders read of a MappingProblem: the kernels' menus (an operand's
    compulsory bytes, `nbytes` per edge, 1 by default) and the edges (`wraps`: wrap edges,
    into the next instance)."""
    nbytes = nbytes or {}
    edges = [SimpleNamespace(src=a, dst=b, wrap=False, dst_operand=(a, b)) for a, b in pairs]
    edges += [SimpleNamespace(src=a, dst=b, wrap=True, dst_operand=(a, b)) for a, b in wraps]

    def menu() -> SimpleNamespace:
        option = SimpleNamespace(
            size_of=lambda edge: nbytes.get(edge, 1.0), traffic_of=lambda edge: 0.0
        )
        return SimpleNamespace(options=(option,))

    return _Problem(kernels=[menu() for _ in range(n)], edges=edges)


def test_two_layers_of_a_training_step_by_hand() -> None:
    # f0 -> f1 (forward); r1 -> b1, r0 -> b0 (recomputations read checkpoints: no
    # producer); b1 -> b0 (the input gradient); b1 -> w1, b0 -> w0 (weight updates)
    f0, f1, r0, r1, b1, b0, w1, w0 = range(8)
    pairs = [(f0, f1), (r1, b1), (r0, b0), (b1, b0), (b1, w1), (b0, w0)]
    # each recomputation just before its backward, each update just after it
    assert demand_order(_problem(8, pairs)) == [f0, f1, r1, b1, w1, r0, b0, w0]


def test_a_chain_keeps_its_order() -> None:
    n = 50
    assert demand_order(_problem(n, [(k, k + 1) for k in range(n - 1)])) == list(range(n))


def test_three_layers_with_dead_ends_by_hand() -> None:
    # forward f0 -> f1 -> f2 (f2's output leaves the graph); layer i's recomputation r_i
    # reads its input checkpoint (f_{i-1}; r0 the graph's input) and has a dead end d_i
    # (a recomputed tensor no backward reads: its own sink); b2 -> b1 -> b0 the input
    # gradient, b_i reads r_i, w_i updates layer i's weights. In index order (every
    # recomputation first, as a generator lists them) the old rule pulled from the sinks in
    # index order: f2, then d2, d1, d0 pulled every recomputation ahead of the backward.
    f0, f1, f2, r2, d2, r1, d1, r0, d0, b2, b1, b0, w2, w1, w0 = range(15)
    pairs = [(f0, f1), (f1, f2), (f1, r2), (f0, r1), (r2, d2), (r1, d1), (r0, d0)]
    pairs += [(r2, b2), (r1, b1), (r0, b0), (b2, b1), (b1, b0), (b2, w2), (b1, w1), (b0, w0)]
    # each layer's recomputation right before its backward, each dead end right after its
    # producer, the last forward layer right after the one before it
    want = [f0, f1, f2, r2, d2, b2, w2, r1, d1, b1, w1, r0, d0, b0, w0]
    problem = _problem(15, pairs)
    assert deepest_order(problem) == want
    pulled = [f0, f1, f2, r2, d2, r1, d1, r0, d0, b2, w2, b1, w1, b0, w0]
    assert pull_order(problem) == pulled
    # spans by hand (one byte an edge): positions dst - src over the edges in `pairs` order
    assert span(problem, want) == 1 + 1 + 2 + 7 + 1 + 1 + 1 + 2 + 2 + 2 + 4 + 4 + 1 + 1 + 1
    assert span(problem, pulled) == 1 + 1 + 2 + 5 + 1 + 1 + 1 + 6 + 6 + 6 + 2 + 2 + 1 + 1 + 1
    assert demand_order(problem) == want


def test_layers_with_backward_chains_of_their_own_by_hand() -> None:
    # DFModel's layers chained forward only (benchmarks/solve.py layers_L): the forward
    # a_i -> a_i' -> a_{i+1}; layer i's backward starts from a gradient of its own
    # (g_i -> c_i, a source), h_i reads c_i and the saved a_i', u_i updates its weights.
    # The deepest-first order starts every other layer's gradient chain at the front;
    # pulling the sinks in turn keeps each layer's backward next to its forward.
    a0, a0p, a1, a1p, a2, a2p, g0, c0, h0, g1, c1, h1, g2, c2, h2, u0, u1, u2 = range(18)
    pairs = [(a0, a0p), (a0p, a1), (a1, a1p), (a1p, a2), (a2, a2p)]
    for g, c, h, ap, u in ((g0, c0, h0, a0p, u0), (g1, c1, h1, a1p, u1), (g2, c2, h2, a2p, u2)):
        pairs += [(g, c), (c, h), (ap, h), (h, u)]
    problem = _problem(18, pairs)
    deepest = [g0, c0, g1, c1, a0, a0p, h0, u0, a1, a1p, h1, u1, a2, a2p, g2, c2, h2, u2]
    pulled = [a0, a0p, g0, c0, h0, u0, a1, a1p, g1, c1, h1, u1, a2, a2p, g2, c2, h2, u2]
    assert deepest_order(problem) == deepest
    assert pull_order(problem) == pulled
    # forward edges 9 / 13, layer 0 8 / 6, layer 1 10 / 6, layer 2 6 / 6
    assert span(problem, deepest) == 33 and span(problem, pulled) == 31
    assert demand_order(problem) == pulled


def test_span_weighs_each_edge_by_its_bytes() -> None:
    # 0 -> 1 -> 2 and 0 -> 2: in order [0, 1, 2] the 0 -> 2 tensor spans two positions
    problem = _problem(3, [(0, 1), (1, 2), (0, 2)], {(0, 1): 5.0, (1, 2): 7.0, (0, 2): 11.0})
    assert span(problem, [0, 1, 2]) == 5 + 7 + 2 * 11


def _depths(n: int, pairs: list[tuple[int, int]]) -> list[int]:
    """Longest path from a source, by relaxing the edges n times (independent of the
    order's own Kahn pass)."""
    depth = [0] * n
    for _ in range(n):
        for a, b in pairs:
            depth[b] = max(depth[b], depth[a] + 1)
    return depth


def test_random_dags_give_topological_permutations() -> None:
    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(0, 40)
        label = list(range(n))
        rng.shuffle(label)  # kernel indices in no topological order
        pairs = [(label[a], label[b]) for b in range(n) for a in range(b) if rng.random() < 0.1]
        pairs += pairs[: rng.randint(0, 2)]  # a tensor read twice by one kernel
        # ignored by every order: a self edge, and wrap edges (into the next instance,
        # here against the order, which would otherwise close a cycle)
        ignored = [(k, k) for k in range(n) if rng.random() < 0.05]
        wraps = [(b, a) for a, b in pairs if rng.random() < 0.1]
        problem = _problem(n, pairs + ignored, wraps=wraps)
        orders = [demand_order(problem), pull_order(problem), deepest_order(problem)]
        for order in orders:
            assert sorted(order) == list(range(n))
            pos = {k: i for i, k in enumerate(order)}
            assert all(pos[a] < pos[b] for a, b in pairs)
        if n == 0:
            continue
        consumers = {a for a, _ in pairs}
        # pull_order: a sink comes right after its last producer, or after sinks placed
        # there too
        order = orders[1]
        pos = {k: i for i, k in enumerate(order)}
        for k in set(range(n)) - consumers:
            producers = [a for a, b in pairs if b == k]
            if producers:
                last = max(pos[a] for a in producers)
                assert all(j not in consumers for j in order[last + 1 : pos[k]])
        # deepest_order: the kernels the deepest sinks need, found by a search of their own
        order = orders[2]
        pos = {k: i for i, k in enumerate(order)}
        depth = _depths(n, pairs)
        sinks = [k for k in range(n) if k not in consumers]
        top = max(depth[k] for k in sinks)
        needed = {k for k in sinks if depth[k] == top}
        grew = True
        while grew:
            more = {a for a, b in pairs if b in needed} - needed
            needed |= more
            grew = bool(more)
        # every other kernel runs as soon as it can: right after its last producer (or
        # at the start), with only other such kernels between
        for k in set(range(n)) - needed:
            producers = [a for a, b in pairs if b == k]
            last = max((pos[a] for a in producers), default=-1)
            assert all(j not in needed for j in order[last + 1 : pos[k]])


def test_a_plan_moves_to_a_kernel_order_and_back_unchanged() -> None:
    """solve._in_order (the deferred proof's seed in the order it searches) undoes
    _in_problem_order: kernel k at position p of the order, by hand on 4 kernels."""
    order = [2, 0, 3, 1]  # position p holds kernel order[p]
    sol = GraphSolution(((0, 2), (1, 3)), (5, 6, 7, 8), 1.0, 0.5, "optimal", SearchStats())
    moved = _in_order(sol, order)
    # kernel 0 is at position 1, kernel 2 at 0, kernel 1 at 3, kernel 3 at 2
    assert moved.configs == ((0, 1), (2, 3)) and moved.choice == (7, 5, 8, 6)
    assert _in_problem_order(moved, order) == sol


def _training_layer() -> KernelGraph:
    """A generated Llama-3.1-8B training layer with full recomputation."""
    setup = setup_pb2.Setup()
    text_format.Parse(
        'name: "layer" workload { llm_training { model { hf_model: "Llama-3.1-8B" } '
        "global_batch: 8 micro_batch: 1 seq_len: 2048 recompute: RECOMPUTE_FULL "
        "zero_stage: 0 virtual_pipeline: 1 } } "
        'system { chip: "H100-SXM5-80GB" num_chip: 8 } '
        "execution { execution_style: KERNEL_BY_KERNEL }",
        setup,
    )
    loaded = pipeline.load_message(setup, Path("layer"))
    scenario = pipeline.assemble(loaded, pipeline.resolve(loaded))
    return next(p.graph for p in scenario.workload.phases if p.name == "layer")


def test_chained_training_layers_run_forward_then_each_backward_block_in_turn() -> None:
    """On L generated layers chained as a training step (generator.chain), the order is
    every forward layer, then layer L-1's recomputation and backward, then L-2's, ...: each
    backward block after the first is the one before it with the layer number lowered by
    one (a periodic tail, what a segmentation repeats; the first differs at its edge: its
    output gradient comes from outside the graph)."""
    copies = 4
    graph = chain_instances(_training_layer(), copies)
    index = {k.name: i for i, k in enumerate(graph.kernels)}
    pairs = [(index[e.src], index[e.dst]) for e in graph.edges]
    order = [graph.kernels[k].name for k in demand_order(_problem(len(index), pairs))]
    layer = [int(name[1 : name.index("_")]) for name in order]
    forward = {k.name for k in graph.kernels if k.pass_ == Pass.FWD and "_recompute" not in k.name}
    # each layer's backward block (recomputation, backward, updates) is contiguous, from
    # the last layer down, after every forward kernel the backward needs
    tail = [i for i, name in enumerate(order) if name not in forward]
    blocks = [layer[i] for i in tail]
    assert blocks == sorted(blocks, reverse=True)
    size = len(tail) // copies
    assert len(tail) == size * copies
    strip = [name[name.index("_") :] for name in order]
    block = [[strip[i] for i in tail[b * size : (b + 1) * size]] for b in range(copies)]
    assert sorted(block[0]) == sorted(block[1])
    assert all(block[b] == block[1] for b in range(2, copies))
