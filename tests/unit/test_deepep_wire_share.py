"""DeepEP sends a token once to each chip holding one of its experts, not once per expert
(its dispatch layout: one flag per token and destination rank): the all-to-all moves the
expected distinct chips of a token's top-k, not k copies (own_network.wire_share)."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest

from generator.build import build_workload
from generator.graph import KernelGraph
from generator.proto_graph import graph_from_proto
from generator.proto_write import graph_to_proto
from hardware.system import NetworkLevel, Topology
from schema import setup_pb2
from solver.cost.collectives import hierarchical_time
from solver.cost.own_network import own_network, wire_share

DEEPEP, ALLTOALL = setup_pb2.MOE_DISPATCHER_DEEPEP, setup_pb2.MOE_DISPATCHER_ALLTOALL
EXCHANGES = {"dispatch", "combine", "dispatch_bwd", "combine_bwd"}


def _enumerated(experts: int, top_k: int, chips: int) -> float:
    """Mean distinct chips over every top_k-subset of the experts (expert x on chip
    x // (experts / chips)), over top_k: counted, not computed by a formula."""
    per_chip = experts // chips
    subsets = list(itertools.combinations(range(experts), top_k))
    distinct = sum(len({x // per_chip for x in s}) for s in subsets)
    return distinct / len(subsets) / top_k


def test_the_share_is_the_mean_over_every_routing():
    rng = random.Random(5)
    cases = [(8, 2, 8), (16, 8, 8), (16, 4, 4)]
    cases += [
        (chips * rng.randint(1, 2), rng.randint(2, 5), chips)
        for chips in (rng.choice((2, 4, 8)) for _ in range(8))
    ]
    for experts, top_k, chips in cases:
        top_k = min(top_k, experts)
        want = _enumerated(experts, top_k, chips)
        assert wire_share(experts, top_k, chips) == pytest.approx(want, rel=1e-12)
    # one expert a chip: k distinct chips, no saving; 32 experts top-8 on 8 chips: 5.64 of 8
    assert wire_share(8, 2, 8) == 1.0
    assert wire_share(32, 8, 8) == pytest.approx(1 - math.comb(28, 8) / math.comb(32, 8))
    # not deduplicated, uneven or trivial: every copy crosses
    assert wire_share(0, 8, 8) == wire_share(30, 8, 8) == wire_share(32, 1, 8) == 1.0


def _moe(dispatcher: int) -> KernelGraph:
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    m = t.model.inline
    m.name, m.architecture, m.hidden_size, m.num_layers = "moe", "mixtral", 256, 2
    m.num_heads, m.num_kv_heads, m.intermediate_size, m.vocab_size = 4, 4, 512, 1000
    m.num_experts, m.experts_per_token = 32, 8
    m.ffn, m.norm = setup_pb2.SWIGLU, setup_pb2.RMSNORM
    t.global_batch, t.micro_batch, t.seq_len = 8, 1, 128
    t.expert_parallel, t.expert_tensor_parallel, t.moe_dispatcher = 8, 1, dispatcher
    w = build_workload(s, Path("setup.txt"), 8)
    return next(p.graph for p in w.phases if any(k.name == "combine" for k in p.graph.kernels))


def test_deepeps_exchanges_carry_the_model_and_pay_the_share():
    graph = _moe(DEEPEP)
    marked = {k.name: (k.dedup_experts, k.dedup_top_k) for k in graph.kernels if k.dedup_experts}
    assert marked == dict.fromkeys(EXCHANGES, (32, 8))
    assert not any(k.dedup_experts for k in _moe(ALLTOALL).kernels)
    # the dispatch over 8 chips of one switch moves 1 - C(28,8)/C(32,8) of the copies
    node = NetworkLevel("node", Topology.SWITCH, 8, 450e9, 0.0)
    dispatch = graph.kernel("dispatch")
    span = ((node, 8),)
    got, _, _ = own_network(dispatch, "none", 1, (), {"ep": span}, 0.0)
    share = 1 - math.comb(28, 8) / math.comb(32, 8)
    want = hierarchical_time("all_to_all", dispatch.communication_bytes * 8 * share, span)
    assert got == pytest.approx(want, rel=1e-12)
    again = graph_from_proto(graph_to_proto(KernelGraph("g", (dispatch,))), path="x", name="g")
    assert (again.kernels[0].dedup_experts, again.kernels[0].dedup_top_k) == (32, 8)
