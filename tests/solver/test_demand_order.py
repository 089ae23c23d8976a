"""solver.fusion.ideals.demand_order: the order a large DAG's search segments (issue #39)."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

from google.protobuf import text_format

from generator.chain import chain_instances
from generator.graph import KernelGraph, Pass
from mapshard import pipeline
from schema import setup_pb2
from solver.fusion.ideals import demand_order
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.fusion.solve import _in_order, _in_problem_order


def _problem(n: int, pairs: list[tuple[int, int]]) -> SimpleNamespace:
    """What demand_order reads of a MappingProblem: the kernel count and the edges."""
    edges = [SimpleNamespace(src=a, dst=b, wrap=False) for a, b in pairs]
    return SimpleNamespace(kernels=[None] * n, edges=edges)


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
    assert demand_order(_problem(15, pairs)) == want


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
    for _ in range(200):
        n = rng.randint(1, 40)
        pairs = [(a, b) for b in range(n) for a in range(b) if rng.random() < 0.1]
        order = demand_order(_problem(n, pairs))
        assert sorted(order) == list(range(n))
        pos = {k: i for i, k in enumerate(order)}
        assert all(pos[a] < pos[b] for a, b in pairs)
        # the kernels the deepest sinks need, found by a search of their own
        depth = _depths(n, pairs)
        sinks = [k for k in range(n) if not any(a == k for a, _ in pairs)]
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
