"""Weights as the mapping stores them (solver.cost.menus.WeightRule), by hand.

A 2-GEMM training graph on 2 chips (one ring level):
  g1: C1[t, o1] = A[t, h] x W1[h, o1]   (t=64, h=32, o1=32)
  g2: C2[t, o2] = C1[t, o1] x W2[o1, o2] (o2=32)
W1 and W2 have 32 x 32 = 1024 parameters each.
"""

from __future__ import annotations

import math

import pytest

from generator.graph import Edge, Kernel, KernelGraph, KernelKind, Operand, OperandRole, Pass
from hardware.system import NetworkLevel, Topology
from solver.cost.menus import build_problem
from solver.cost.weights import WeightRule, step_sync_s, step_weights
from solver.fusion.solve import solve_graph
from solver.milp.model import build_model
from solver.options import SolverOptions
from tests.solver_fixtures import gemm, small_chip

LINK_BPS = 5e9
ALPHA = 1e-6
# training, no ZeRO: weight 2 B + gradient 2 B + optimizer state 12 B per parameter
RULE = WeightRule(bytes_per_param=16.0, grad_bytes_per_param=2.0)


def _graph() -> KernelGraph:
    g1 = gemm("g1", 64, 32, 32, a_dims=("t", "h"))
    g2 = gemm("g2", 64, 32, 32, a_dims=("t", "g1_o"))
    return KernelGraph("two_gemms", (g1, g2), (Edge("g1", "g2", "a"),))


def _problem(rule: WeightRule = RULE, link_Bps: float = LINK_BPS, budget: float = math.inf):
    level = NetworkLevel("ring", Topology.RING, 2, link_Bps, ALPHA, ("TP",))
    problem = build_problem(
        _graph(),
        small_chip(sram_bytes=1e6),
        1e11,
        2,
        ((level, 2),),
        {},
        "bf16",
        dataflow=False,
        overlap=True,
        max_configs=0,
        weights=rule,
    )
    from dataclasses import replace

    return replace(problem, resident_budget_bytes=budget)


def _option(problem, kernel: int, sharding: str):
    return next(o for o in problem.kernels[kernel].options if o.sharding == sharding)


def _stored_bytes(option, per_param: float = 16.0) -> float:
    return sum(elems for _, elems in option.weights) * per_param


def test_replicated_weight_takes_twice_the_memory_of_the_split_one():
    p = _problem()
    # g1 split on tokens: every chip holds all of W1, 1024 params x 16 B = 16384 B
    assert _stored_bytes(_option(p, 0, "t")) == 1024 * 16 == 16384
    # split on o1 (a dim of W1): 512 params per chip x 16 B = 8192 B
    assert _stored_bytes(_option(p, 0, "g1_o")) == 512 * 16 == 8192
    assert _stored_bytes(_option(p, 0, "h")) == 8192  # h is a dim of W1 too
    assert _stored_bytes(_option(p, 0, "none")) == 16384
    assert _stored_bytes(_option(p, 0, "t")) == 2 * _stored_bytes(_option(p, 0, "g1_o"))


def _index(problem, kernel: int, sharding: str) -> int:
    return next(i for i, o in enumerate(problem.kernels[kernel].options) if o.sharding == sharding)


def test_gradient_all_reduce_of_a_replicated_weight_is_the_ring_formula():
    """The step syncs W1's gradient when g1 replicates it; the kernel pays none of it."""
    p = _problem()
    grad = 1024 * 2.0  # W1's gradient, bf16
    ring = 2 * (2 - 1) / 2 * grad / LINK_BPS + 2 * (2 - 1) * ALPHA
    span = ((NetworkLevel("ring", Topology.RING, 2, LINK_BPS, ALPHA, ("TP",)), 2),)
    choice = (_index(p, 0, "t"), _index(p, 1, "g2_o"))
    weights = step_weights(p, choice)
    assert (weights.all_reduce, weights.all_gather) == (1024, 0)  # W1 only: g2 splits W2
    assert step_sync_s(weights, RULE.grad_bytes_per_param, span) == pytest.approx(ring, rel=1e-12)
    # t is not a reduction dim of g1: no network time of its own
    assert _option(p, 0, "t").network_s == 0.0
    # split weights have no gradient to synchronise
    split = step_weights(p, (_index(p, 0, "g1_o"), _index(p, 1, "g2_o")))
    assert (split.all_reduce, split.all_gather) == (0, 0)
    # the own all-reduce of a split reduction dim is unchanged: C1 = 64 x 32 x 2 B
    out = 64 * 32 * 2.0
    assert _option(p, 0, "h").network_s == pytest.approx(out / LINK_BPS + 2 * ALPHA, rel=1e-12)


def test_inference_rule_has_no_gradient_sync():
    p = _problem(WeightRule(bytes_per_param=2.0))
    assert _option(p, 0, "t").network_s == 0.0
    assert _stored_bytes(_option(p, 0, "t"), 2.0) == 2048


def _solve(problem):
    return solve_graph(problem, SolverOptions())


def test_capacity_that_forbids_replication_makes_the_search_split_the_weights():
    # slow links: every collective costs more than the GEMMs, so with room to spare the
    # best plan splits both GEMMs on tokens and replicates both weights
    free = _problem(WeightRule(16.0, 2.0), link_Bps=1e6)
    sol = _solve(free)
    shard = [free.kernels[k].options[o].sharding for k, o in enumerate(sol.choice)]
    assert shard == ["t", "t"]
    # DRAM left for exactly both weights split: 2 x 512 params x 16 B
    tight = _problem(WeightRule(16.0, 2.0), link_Bps=1e6, budget=2 * 8192)
    sol2 = _solve(tight)
    shard2 = [tight.kernels[k].options[o].sharding for k, o in enumerate(sol2.choice)]
    assert shard2[0] in ("h", "g1_o") and shard2[1] in ("g1_o", "g2_o"), shard2
    stored = sum(_stored_bytes(tight.kernels[k].options[o]) for k, o in enumerate(sol2.choice))
    assert stored == 2 * 8192
    assert sol2.objective_s > sol.objective_s
    model, _, _ = build_model(tight, [[0], [1]])
    assert "memory_capacity[graph]" in model.row_names


def test_a_weight_is_stored_as_large_as_its_most_demanding_reader():
    """The backward GEMM of g1 (dA = dC1 x W1^T) reads W1 too: split on tokens it needs
    all of W1, so W1 is stored whole even when the forward GEMM splits it."""
    from dataclasses import replace

    g1 = gemm("g1", 64, 32, 32, a_dims=("t", "h"))
    bwd = Kernel(
        name="g1_bwd",
        kind=KernelKind.GEMM,
        dims=(("t", 64), ("g1_o", 32), ("h", 32)),
        operands=(
            Operand("dc", OperandRole.INPUT, ("t", "g1_o"), 2),
            Operand("w", OperandRole.WEIGHT, ("h", "g1_o"), 2),
            Operand("da", OperandRole.OUTPUT, ("t", "h"), 2),
        ),
        flop=2.0 * 64 * 32 * 32,
        pass_=Pass.BWD,
    )
    graph = KernelGraph("fwd_bwd", (g1, bwd), (Edge("g1", "g1_bwd", "dc"),))
    level = NetworkLevel("ring", Topology.RING, 2, 1e6, ALPHA, ("TP",))
    problem = build_problem(
        graph,
        small_chip(1e6),
        1e11,
        2,
        ((level, 2),),
        {},
        "bf16",
        False,
        True,
        0,
        weights=WeightRule(16.0, 2.0),
    )
    ids = {w for m in problem.kernels for o in m.options for w, _ in o.weights}
    assert ids == {"g1/w"}
    # room for W1 split only (512 params x 16 B): both readers must split a dim of W1
    tight = replace(problem, resident_budget_bytes=8192)
    sol = _solve(tight)
    shard = [tight.kernels[k].options[o].sharding for k, o in enumerate(sol.choice)]
    assert shard[0] in ("h", "g1_o") and shard[1] in ("h", "g1_o"), shard
    # room for all of W1: at least one reader takes the tokens split (cheapest on slow links)
    roomy = replace(problem, resident_budget_bytes=16384)
    sol = _solve(roomy)
    shard = [roomy.kernels[k].options[o].sharding for k, o in enumerate(sol.choice)]
    assert "t" in shard
