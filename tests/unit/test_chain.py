"""generator.chain: layers chained as a training step runs them (issue #39's graphs)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format
from solver_fixtures import elementwise, gemm

from generator.build import build_workload
from generator.chain import chain_instances, copy_name
from generator.graph import Edge, KernelGraph, Pass
from schema import setup_pb2


def _layer() -> KernelGraph:
    """A toy layer: forward f1 -> f2, its recomputation f1_recompute -> b1, backward
    b1 -> b2 (b1 also reads f1's output), the output into the next layer's f1, the input
    gradient into the previous layer's b1."""
    f1, f2 = gemm("f1", 8, 16, 16), elementwise("f2", 8, 16, dims=("t", "f1_o"))
    r1 = replace(f1, name="f1_recompute", pass_=Pass.RECOMPUTE)
    b1 = elementwise("b1", 8, 16, dims=("t", "f1_o"))
    b2 = elementwise("b2", 8, 16, dims=("t", "f1_o"))
    b1, b2 = replace(b1, pass_=Pass.BWD), replace(b2, pass_=Pass.BWD)
    edges = (
        Edge("f1", "f2", "x"),
        Edge("f1", "b1", "x"),
        Edge("f1_recompute", "b1", "x"),
        Edge("b1", "b2", "x"),
    )
    boundary = (Edge("f2", "f1", "a"), Edge("b2", "b1", "x"))
    return KernelGraph("layer", (f1, f2, r1, b1, b2), edges, boundary)


def test_one_copy_is_the_layer() -> None:
    layer = _layer()
    assert chain_instances(layer, 1) is layer
    with pytest.raises(ValueError):
        chain_instances(layer, 0)


def test_forward_runs_down_and_backward_up_the_layers() -> None:
    layer, copies = _layer(), 3
    chained = chain_instances(layer, copies)
    assert len(chained.kernels) == 5 * copies
    names = {k.name for k in chained.kernels}
    kinds = ("f1", "f2", "f1_recompute", "b1", "b2")
    assert names == {copy_name(i, k) for i in range(copies) for k in kinds}
    pairs = {(e.src, e.dst) for e in chained.edges}
    # 4 inner edges per copy, and three boundary edges between each neighbouring pair
    assert len(chained.edges) == 4 * copies + 3 * (copies - 1)
    for i in range(copies - 1):
        assert (f"L{i}_f2", f"L{i + 1}_f1") in pairs  # output -> next layer's input
        assert (f"L{i}_f2", f"L{i + 1}_f1_recompute") in pairs  # ... its checkpoint
        assert (f"L{i + 1}_b2", f"L{i}_b1") in pairs  # input grad -> previous layer
    # the graph's own boundary: last layer's output into the next instance's first layer,
    # the first layer's input gradient into the previous instance's last layer
    assert {(e.src, e.dst) for e in chained.boundary} == {("L2_f2", "L0_f1"), ("L0_b2", "L2_b1")}
    # a training step's order: every forward before the backward that reads it
    assert chained.flop == pytest.approx(copies * layer.flop)
    order = chained.canonical_order()
    pos = {name: i for i, name in enumerate(order)}
    assert all(pos[e.src] < pos[e.dst] for e in chained.edges)


@pytest.mark.parametrize(
    "model", ["GPT-3-175B-gpt2style", "Llama-3.1-8B", "Mixtral-8x7B-v0.1", "Qwen3-8B"]
)
def test_every_reader_of_a_gradient_waits_for_the_next_layer(model: str) -> None:
    """On generated layers of four families: the previous layer's output gradient is read
    by several kernels (the last GEMM's input and weight gradients, the residual's gradient
    sum) and the next layer's input by two (its first norm, its residual add); in a chained
    step every one of them has its edge from the neighbouring copy's producer, and the
    order runs every edge forward."""
    text = (
        f'workload {{ llm_training {{ model {{ hf_model: "{model}" }} '
        "global_batch: 4 seq_len: 128 recompute: RECOMPUTE_FULL } }"
    )
    w = build_workload(text_format.Parse(text, setup_pb2.Setup()), Path("setup.txt"), 1)
    layer = next(p for p in w.phases if p.role == "layer").graph
    readers: dict[str, set[str]] = {}
    for e in layer.boundary:
        readers.setdefault(e.src, set()).add(e.dst)
    assert len(readers) == 2 and all(len(r) >= 2 for r in readers.values())
    chained = chain_instances(layer, 3)
    pairs = {(e.src, e.dst) for e in chained.edges}
    for e in layer.boundary:
        backward = layer.kernel(e.src).pass_ != Pass.FWD
        for i in range(2):
            src, dst = (i + 1, i) if backward else (i, i + 1)
            assert (copy_name(src, e.src), copy_name(dst, e.dst)) in pairs
    order = chained.canonical_order()
    pos = {name: k for k, name in enumerate(order)}
    assert all(pos[e.src] < pos[e.dst] for e in chained.edges)
