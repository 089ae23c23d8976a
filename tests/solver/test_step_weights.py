"""What stored weights cost the training step besides their bytes (solver.cost.weights.
StepWeights): the TP gradient sync of every weight a reader replicates, forward or backward,
and no second update of the weights a graph's own OPTIMIZER kernel updates.

Backward-only replica. Two chips (TP 2) on one ring of 1e10 B/s links, 1e-7 s per step; a chip
of 1e14 FLOP/s whose DRAM streams 1e11 B/s. The forward GEMM C[t, o] = A[t, h] x W[h, o]
(t = 256, h = o = 32, 2 B per element) is pinned to its column split (o, Megatron's q_proj);
its backward GEMM dA[t, h] = dC[t, o] x W[h, o]^T reads the same W. Split on tokens, the
backward needs all of W on both chips: W is stored whole (1,024 parameters) and its
gradient, 1,024 x 2 B = 2,048 B, is all-reduced over the two chips once per step: ring
2 (p-1)/p S / b + 2 (p-1) a = 2,048 / 1e10 + 2e-7 = 4.048e-7 s (SYNC_S). Main charged the sync
only when the forward kernel replicated W. The backward on tokens converts dC from its o split
to a t split: a 2-chip ring all-to-all of 256 x 32 x 2 = 16,384 B, floor(p^2/4) / (2p) x
(S/p) / b = 1/4 x 8,192 / 1e10 = 2.048e-7 s, for a step of 8.8848e-7 s without the sync and
1.29328e-6 s with it, still below the backward split on h (1.33904e-6 s). The brute force
below prices every option pair with solver.check and adds the update (32 B per stored
parameter, test_optimizer_storage.py) and SYNC_S when a reader splits tokens.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

import solver.search.planner as planner
from generator.graph import (
    Edge,
    Kernel,
    KernelGraph,
    KernelKind,
    Operand,
    OperandRole,
    Pass,
    Phase,
    Workload,
)
from generator.proto_graph import graph_from_proto
from generator.proto_write import graph_to_proto
from hardware.system import MemoryLevel, NetworkLevel, System, Topology
from solver.check import mapping_cost
from solver.cost.problem import Option, WeightFact
from solver.cost.weights import StepWeights, floor_weights, self_updated_params, step_weights
from solver.options import ExecutionOptions, SolverOptions
from solver.search.parallel import enumerate_choices
from solver.search.phase_problem import phase_problem
from solver.search.storage_rule import weight_rule
from tests.solver_fixtures import gemm, small_chip

DRAM_BPS, LINK_BPS, ALPHA = 1e11, 1e10, 1e-7
ADAM_BYTES_PER_PARAM = 2 * (2 + 2 + 4 + 4 + 4)  # read + write of weight, grad, master, m, v
SYNC_S = 2 * (2 - 1) / 2 * 2_048 / LINK_BPS + 2 * (2 - 1) * ALPHA  # 4.048e-7 s


def _system(chips: int = 2) -> System:
    return System(
        num_chips=chips,
        chip=small_chip(1e6, peak=1e14),
        memory=(MemoryLevel("dram", 1e12, DRAM_BPS),),
        network=(NetworkLevel("ring", Topology.RING, chips, LINK_BPS, ALPHA, ("TP",)),),
    )


def _backward(tokens: int) -> Kernel:
    return Kernel(
        name="g_bwd",
        kind=KernelKind.GEMM,
        dims=(("t", tokens), ("g_o", 32), ("h", 32)),
        operands=(
            Operand("dc", OperandRole.INPUT, ("t", "g_o"), 2),
            Operand("w", OperandRole.WEIGHT, ("h", "g_o"), 2),
            Operand("da", OperandRole.OUTPUT, ("t", "h"), 2),
        ),
        flop=2.0 * tokens * 32 * 32,
        pass_=Pass.BWD,
    )


def _workload() -> Workload:
    forward = replace(gemm("g", 256, 32, 32), pinned_sharding="g_o")
    graph = KernelGraph("fb", (forward, _backward(256)), (Edge("g", "g_bwd", "dc"),))
    return Workload(kind="training", phases=(Phase("h", graph, role="head"),))


def _problem(workload: Workload, chips: int = 2):
    system = _system(chips)
    choice = next(c for c in enumerate_choices(system, chips, 1, 1) if c.degree("TP") == chips)
    rule = weight_rule(workload, choice)
    execution = ExecutionOptions(dataflow=False)
    return phase_problem(workload.phases[0].graph, system, choice, execution, 1, rule)


def _brute_force(problem) -> dict[tuple[str, ...], float]:
    """The step of every option pair: graph (solver.check) + update + sync by hand."""
    steps: dict[tuple[str, ...], float] = {}
    for choice in itertools.product(*(range(len(m.options)) for m in problem.kernels)):
        graph_s = mapping_cost(problem, [[0], [1]], choice)[0]
        opts = [m.options[o] for m, o in zip(problem.kernels, choice, strict=True)]
        stored = max(elems for o in opts for _, elems in o.weights)  # one weight, W
        tokens = any(o.sharding.split("+")[0] in ("t", "none") for o in opts)
        step = graph_s + stored * ADAM_BYTES_PER_PARAM / DRAM_BPS + (SYNC_S if tokens else 0.0)
        key = tuple(o.sharding for o in opts)
        steps[key] = min(steps.get(key, float("inf")), step)
    return steps


def test_a_weight_only_the_backward_replicates_pays_its_gradient_sync():
    workload = _workload()
    problem = _problem(workload)
    assert [m.name for m in problem.kernels] == ["g", "g_bwd"]
    steps = _brute_force(problem)
    # the backward on tokens: 8.8848e-7 s of kernels and conversion, plus the sync
    assert steps[("g_o", "t")] == pytest.approx(8.8848e-7 + SYNC_S, rel=1e-9)
    assert steps[("g_o", "h")] == pytest.approx(1.33904e-6, rel=1e-9)
    best = min(steps.values())
    assert best == steps[("g_o", "t")]
    plan = planner.search_workload(
        workload, _system(), ExecutionOptions(dataflow=False), SolverOptions()
    )
    assert plan.latency_s == pytest.approx(best, rel=1e-9)  # the sync is in the search's step
    assert [k.sharding.split("+")[0] for k in plan.phases[0].kernels] == ["g_o", "t"]
    assert plan.stats.status == "optimal"


def test_step_weights_of_a_backward_replica_and_their_floor_by_hand():
    """W is 1,024 parameters, 512 per chip split. Backward on tokens: 1,024 all-reduced
    (no WGRAD kernel computes W's gradient). The floor: nothing at the least storage (512);
    storing 1,024, the 512 above the least are a replica's half: 512 x 1,024 / (1,024 - 512)
    = 1,024 parameters all-reduced (W is the only weight that can hold the storage: its kind)."""
    problem = _problem(_workload())
    index = {m.name: {o.sharding: i for i, o in enumerate(m.options)} for m in problem.kernels}
    replica = step_weights(problem, (index["g"]["g_o"], index["g_bwd"]["t"]))
    assert replica == StepWeights(all_reduce=1_024.0)
    split = step_weights(problem, (index["g"]["g_o"], index["g_bwd"]["h"]))
    assert split == StepWeights()
    assert floor_weights(problem, 512.0) == StepWeights()
    assert floor_weights(problem, 1_024.0) == StepWeights(all_reduce=1_024.0)


def _optimizer_kernel(name: str) -> Kernel:
    """A DFModel-style update of a 32 x 32 weight: reads weight, gradient and two moments,
    writes them back (elementwise over the weight's elements)."""
    dims = ("h", f"{name}_o")
    return Kernel(
        name=f"{name}_optimizer",
        kind=KernelKind.ELEMENTWISE,
        dims=(("h", 32), (f"{name}_o", 32)),
        operands=(
            Operand("grad", OperandRole.INPUT, dims, 2),
            Operand("state", OperandRole.OUTPUT, dims, 14),
        ),
        flop=8.0 * 32 * 32,
        pass_=Pass.OPTIMIZER,
    )


def test_a_graph_that_updates_its_own_weight_is_not_updated_again_by_the_step():
    """One chip. g1 (W1) and g2 (W2), 1,024 parameters each; the proto graph (written with
    generator.proto_write and read back: the `_optimizer` suffix keeps the pass) updates W1
    itself in `g1_optimizer`, charged per graph instance as DFModel does. The step updates
    only W2: 1,024 x 32 B / 1e11 B/s = 3.2768e-7 s (not 6.5536e-7 s)."""
    g1 = gemm("g1", 64, 32, 32, a_dims=("t", "h"))
    g2 = gemm("g2", 64, 32, 32, a_dims=("t", "g1_o"))
    kernels = (g1, g2, _optimizer_kernel("g1"))
    written = KernelGraph("layer", kernels, (Edge("g1", "g2", "a"),))
    graph = graph_from_proto(graph_to_proto(written), path="test.textproto", name="layer")
    assert {k.name: k.pass_ for k in graph.kernels}["g1_optimizer"] == Pass.OPTIMIZER
    workload = Workload(kind="training", phases=(Phase("layer", graph),))
    assert self_updated_params(workload) == 1_024
    plan = planner.search_workload(
        workload, _system(1), ExecutionOptions(dataflow=False), SolverOptions()
    )
    update_s = 1_024 * ADAM_BYTES_PER_PARAM / DRAM_BPS
    assert update_s == pytest.approx(3.2768e-7, rel=1e-12)
    assert plan.time_breakdown["optimizer"] == pytest.approx(update_s, rel=1e-12)
    graph_s = plan.phases[0].latency_s
    assert plan.latency_s == pytest.approx(graph_s + update_s, rel=1e-12)
    assert "g1_optimizer" in [k.name for k in plan.phases[0].kernels]  # the graph's charge
    problem = _problem(workload, chips=1)
    assert step_weights(problem, (0,) * len(problem.kernels)).self_updated == 1_024


def test_floor_of_replicas_of_two_kinds_never_exceeds_a_plan():
    """The review's counterexample, TP 4: A (all-reduced) 4 parameters, 1 per chip split;
    B (all-gathered) 6 parameters, 1.5 split. Storing 5.5 (least 2.5 + 3): by parameters the
    cheapest replica is A's 3 extra (4 synced) but a plan storing B whole (7 >= 5.5) syncs
    an all-gather of 6, half an all-reduce per byte. With the kinds mixed the floor counts
    all-gathers: 4 parameters all-gathered, under both plans' sync."""
    from types import SimpleNamespace

    def menu(w: str, split: float, full: float) -> SimpleNamespace:
        def opt(elems: float, rep: tuple[str, ...]) -> Option:
            return Option(
                "s", "t", 0.0, 0.0, 0.0, 0.0, 0.0, (), weights=((w, elems),), replicated=rep
            )

        return SimpleNamespace(options=(opt(split, ()), opt(full, (w,))))

    facts = (WeightFact("A", 4.0, "all_reduce"), WeightFact("B", 6.0, "all_gather"))
    problem = SimpleNamespace(
        kernels=(menu("A", 1.0, 4.0), menu("B", 1.5, 6.0)), weight_facts=facts
    )
    floor = floor_weights(problem, 5.5)
    assert floor == StepWeights(all_gather=4.0)
    # every plan storing >= 5.5: A whole (all-reduce 4) or B whole (all-gather 6) or both
    assert floor.all_gather <= 6.0 and floor.all_reduce == 0.0
