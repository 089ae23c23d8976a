"""A replicated weight's gradient is synchronised once per step, once (solver.cost.weights).

C[t, o] = A[t, h] x W[h, o] on 2 chips (one ring of 5e9 B/s links, 1e-6 s per step), t = 64,
h = o = 32: W's gradient is 1,024 x 2 B = 2,048 B. Ring formulas over p = 2 chips
(solver/cost/collectives.py's docstring): all-reduce 2 (p-1)/p S / b + 2 (p-1) a =
2,048 / 5e9 + 2e-6 s; all-gather and reduce-scatter (p-1)/p S / b + (p-1) a =
1,024 / 5e9 + 1e-6 s each.
With no gradient kernel in the graph (a forward-only graph's weight), the step all-reduces the
gradient of a replicated W. With the gradient kernel dW[h, o] = sum_t A[t, h] dC[t, o]
split on tokens (Megatron's sequence-parallel LayerNorm weights), the partial sums are
reduce-scattered by the gradient kernel and all-gathered for the replicas: one all-reduce in
all, not the gradient kernel's reduction plus a second all-reduce. The sync is the step's
(solver.cost.weights.StepWeights), never a kernel option's network time.
"""

from __future__ import annotations

import pytest

from generator.graph import Kernel, KernelGraph, KernelKind, Operand, OperandRole, Pass
from hardware.system import NetworkLevel, Topology
from solver.cost.menus import build_problem
from solver.cost.weights import WeightRule, step_sync_s, step_weights
from tests.solver_fixtures import gemm, small_chip

LINK_BPS, ALPHA, GRAD_B = 5e9, 1e-6, 1_024 * 2.0
ALL_REDUCE_S = 2 * (2 - 1) / 2 * GRAD_B / LINK_BPS + 2 * (2 - 1) * ALPHA
HALF_S = (2 - 1) / 2 * GRAD_B / LINK_BPS + (2 - 1) * ALPHA  # all-gather or reduce-scatter
RULE = WeightRule(bytes_per_param=16.0, grad_bytes_per_param=2.0)
LEVEL = NetworkLevel("ring", Topology.RING, 2, LINK_BPS, ALPHA, ("TP",))
SPAN = ((LEVEL, 2),)


def _wgrad() -> Kernel:
    return Kernel(
        name="g_weight_update",
        kind=KernelKind.GEMM,
        dims=(("h", 32), ("g_o", 32), ("t", 64)),
        operands=(
            Operand("a", OperandRole.INPUT, ("t", "h"), 2),
            Operand("dc", OperandRole.INPUT, ("t", "g_o"), 2),
            Operand("dweight", OperandRole.OUTPUT, ("h", "g_o"), 2),
        ),
        flop=2.0 * 64 * 32 * 32,
        pass_=Pass.WGRAD,
    )


def _problem(with_wgrad: bool):
    return _problem_of((gemm("g", 64, 32, 32), *((_wgrad(),) if with_wgrad else ())))


def _problem_of(kernels: tuple[Kernel, ...]):
    return build_problem(
        KernelGraph("g", kernels, ()),
        small_chip(sram_bytes=1e6),
        1e11,
        2,
        SPAN,
        {},
        "bf16",
        dataflow=False,
        overlap=True,
        max_configs=0,
        weights=RULE,
    )


def _sync_s(problem, **shardings: str) -> float:
    """The step's sync of the plan whose kernels take `shardings` (first tiling of each)."""
    choice = tuple(
        next(i for i, o in enumerate(m.options) if o.sharding == shardings[m.name])
        for m in problem.kernels
    )
    return step_sync_s(step_weights(problem, choice), RULE.grad_bytes_per_param, SPAN)


def _option(problem, kernel: str, sharding: str):
    menu = next(m for m in problem.kernels if m.name == kernel)
    return next(o for o in menu.options if o.sharding == sharding)


def test_without_a_gradient_kernel_the_replica_pays_the_all_reduce():
    p = _problem(with_wgrad=False)
    assert _sync_s(p, g="t") == pytest.approx(ALL_REDUCE_S, rel=1e-12)
    assert _option(p, "g", "t").network_s == 0.0  # the step's, not the kernel's


def test_sequence_parallel_weight_pays_one_all_reduce_in_all():
    p = _problem(with_wgrad=True)
    scatter = _option(p, "g_weight_update", "t+rs")
    assert scatter.network_s == pytest.approx(HALF_S, rel=1e-12)  # its reduce-scatter
    assert _sync_s(p, g="t", g_weight_update="t+rs") == pytest.approx(
        HALF_S, rel=1e-12
    )  # the all-gather
    assert _sync_s(p, g="t", g_weight_update="t+rs") + scatter.network_s == pytest.approx(
        ALL_REDUCE_S, rel=1e-12
    )
    # a split weight needs no gather: the reduce-scatter leaves each chip its slice
    assert _sync_s(p, g="g_o", g_weight_update="t+rs") == 0.0


def test_only_the_weight_a_gradient_kernel_computes_is_gathered():
    """A kernel with two weights, a 16 x 32 table (512 parameters, 1,024 B of gradient) whose
    gradient kernel exists and a 64 x 32 position table (2,048 parameters, 4,096 B) whose
    gradient no kernel computes (matched by owner and size). Replicated (no split): the
    table's gradient is all-gathered, 1,024 / 2 / 5e9 + 1e-6 s, the other all-reduced,
    2 x 4,096 / 2 / 5e9 + 2e-6 s."""
    lookup = Kernel(
        name="emb",
        kind=KernelKind.ELEMENTWISE,
        dims=(("t", 64), ("h", 32), ("v", 16)),
        operands=(
            Operand("x", OperandRole.INPUT, ("t", "h"), 2),
            Operand("table", OperandRole.WEIGHT, ("v", "h"), 2),
            Operand("pos", OperandRole.WEIGHT, ("t", "h"), 2),
            Operand("y", OperandRole.OUTPUT, ("t", "h"), 2),
        ),
        flop=64.0 * 32,
    )
    update = Kernel(
        name="emb_weight_update",
        kind=KernelKind.ELEMENTWISE,
        dims=(("t", 64), ("h", 32), ("v", 16)),
        operands=(
            Operand("dy", OperandRole.INPUT, ("t", "h"), 2),
            Operand("dtable", OperandRole.OUTPUT, ("v", "h"), 2),
        ),
        flop=64.0 * 32,
        pass_=Pass.WGRAD,
    )
    p = _problem_of((lookup, update))
    gather = (2 - 1) / 2 * 1_024 / LINK_BPS + (2 - 1) * ALPHA
    reduce = 2 * (2 - 1) / 2 * 4_096 / LINK_BPS + 2 * (2 - 1) * ALPHA
    assert _sync_s(p, emb="none", emb_weight_update="t") == pytest.approx(
        gather + reduce, rel=1e-12
    )
