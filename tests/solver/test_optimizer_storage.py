"""A training step pays the optimizer update of every stored weight copy, and the search sees
it (solver.search.dram_split step 1; the update itself: solver.search.assemble).

One head graph on 2 chips (TP 2; a ring of 1e12 B/s links and 1e-12 s hops, so collectives
cost next to nothing), a chip of 1e14 FLOP/s whose DRAM streams 1e11 B/s: every GEMM is
DRAM-bound, its time the bytes it moves / 1e11 B/s. C[t, o] = A[t, h] x W[h, o], 2 B per
element, h = o = 32: W is 1,024 parameters, stored whole (1,024 per chip) when the GEMM is
split on t, halved (512 per chip) when it is split on h or o.
Optimizer (Adam, mixed precision): per stored parameter a 2 B weight, a 2 B gradient, a 4 B
master copy and 4 B + 4 B moments = 16 B, each read and written once per step: 32 B per
parameter, 32,768 B = 3.2768e-7 s replicated, 16,384 B = 1.6384e-7 s split.
Global batch = micro-batch = 1, DP = PP = 1: the step is one run of the graph plus the update.
  t = 64 (A = C = 4,096 B): split on t moves A/2 + W + C/2 = 6,144 B -> 6.144e-8 s, on o
  A + W/2 + C/2 = 7,168 B -> 7.168e-8 s. Steps: 6.144e-8 + 3.2768e-7 = 3.8912e-7 s
  (replicated) vs 7.168e-8 + 1.6384e-7 = 2.3552e-7 s (split): the graph alone prefers the
  replicated weight, the step the split one.
  t = 1,024 (A = C = 65,536 B): 67,584 B -> 6.7584e-7 s on t, 99,328 B -> 9.9328e-7 s on o.
  Steps: 6.7584e-7 + 3.2768e-7 + SYNC_S = 1.00557e-6 s (replicated) vs 9.9328e-7 + 1.6384e-7
  = 1.15712e-6 s (split): replication pays for its update and its gradient sync.
The replicated W's gradient (1,024 x 2 B = 2,048 B) is all-reduced over the 2 chips once per
step, after the backward pass (solver.cost.weights.WeightRule): ring all-reduce
2 (p-1)/p S / b + 2 (p-1) a = 2,048 / 1e12 + 2e-12 = 2.05e-9 s (SYNC_S).
"""

from __future__ import annotations

import pytest

import solver.search.planner as planner
from generator.graph import KernelGraph, Phase, Workload
from hardware.system import MemoryLevel, NetworkLevel, System, Topology
from solver.check import mapping_cost
from solver.options import ExecutionOptions, SolverOptions
from solver.search import assemble
from solver.search.parallel import enumerate_choices
from solver.search.phase_problem import phase_problem
from solver.search.storage_rule import weight_rule
from tests.solver_fixtures import gemm, small_chip

DRAM_BPS = 1e11
ADAM_BYTES_PER_PARAM = 2 * (2 + 2 + 4 + 4 + 4)  # read + write of weight, grad, master, m, v
SYNC_S = 2 * (2 - 1) / 2 * 2_048 / 1e12 + 2 * (2 - 1) * 1e-12  # ring all-reduce of W's grad


def _system() -> System:
    return System(
        num_chips=2,
        chip=small_chip(1e6, peak=1e14),
        memory=(MemoryLevel("dram", 1e12, DRAM_BPS),),
        network=(NetworkLevel("ring", Topology.RING, 2, 1e12, 1e-12, ("TP",)),),
    )


def _workload(tokens: int) -> Workload:
    graph = KernelGraph("g", (gemm("g", tokens, 32, 32),), ())
    return Workload(kind="training", phases=(Phase("h", graph, role="head"),))


def _tp2():
    return next(c for c in enumerate_choices(_system(), 2, 1, 1) if c.degree("TP") == 2)


def test_the_update_of_a_replicated_weight_costs_twice_that_of_a_split_one():
    workload, tp2 = _workload(64), _tp2()
    assert workload.weight_bytes_per_param + workload.optimizer_bytes_per_param == 16
    whole = assemble.training_times(workload, tp2, {"h": 0.0}, DRAM_BPS, 1_024.0)
    half = assemble.training_times(workload, tp2, {"h": 0.0}, DRAM_BPS, 512.0)
    assert whole.optimizer_s == pytest.approx(1_024 * ADAM_BYTES_PER_PARAM / DRAM_BPS, rel=1e-12)
    assert whole.optimizer_s == pytest.approx(3.2768e-7, rel=1e-12)
    assert half.optimizer_s == pytest.approx(1.6384e-7, rel=1e-12)


def _brute_force(workload: Workload) -> tuple[float, str]:
    """Every option of the one kernel at TP 2, priced by solver.check (graph latency), plus
    the update of what it stores and the gradient sync of a replicated weight (SYNC_S)."""
    tp2 = _tp2()
    rule = weight_rule(workload, tp2)
    problem = phase_problem(
        workload.phases[0].graph, _system(), tp2, ExecutionOptions(dataflow=False), 1, rule
    )
    best = (float("inf"), "")
    for o, opt in enumerate(problem.kernels[0].options):
        graph_s = mapping_cost(problem, [[0]], (o,))[0]
        stored = sum(elems for _, elems in opt.weights)
        sync = SYNC_S if opt.sharding == "t" else 0.0  # split on tokens: W stored whole
        step = graph_s + stored * ADAM_BYTES_PER_PARAM / DRAM_BPS + sync
        best = min(best, (step, opt.sharding))
    return best


def _solve(workload: Workload, dataflow: bool):
    options = SolverOptions()
    execution = ExecutionOptions(dataflow=dataflow)
    return planner.search_workload(workload, _system(), execution, options)


@pytest.mark.parametrize(
    ("tokens", "step_s", "replicated", "dataflow"),
    [
        (64, 7.168e-8 + 1.6384e-7, False, False),  # the graph's optimum replicates, the step's
        (64, 7.168e-8 + 1.6384e-7, False, True),  # does not (fusion search: the same)
        (1_024, 6.7584e-7 + 3.2768e-7 + SYNC_S, True, False),
    ],
)
def test_the_search_charges_the_update_of_what_its_plan_stores(
    tokens, step_s, replicated, dataflow
):
    """The plan equals the brute force over every option with the whole step's cost (on
    main the 64-token graph kept its replicated weight, 3.8912e-7 s, called optimal)."""
    workload = _workload(tokens)
    plan = _solve(workload, dataflow)
    brute_s, brute_sharding = _brute_force(workload)
    assert brute_s == pytest.approx(step_s, rel=1e-6)
    assert plan.latency_s == pytest.approx(brute_s, rel=1e-9)
    # the bound's storage may sit dram_split.BELOW (1e-6, relative) under the plan's
    assert plan.stats.status == "optimal" and plan.stats.gap <= 1e-6
    sharding = plan.phases[0].kernels[0].sharding
    assert (sharding == "t") == replicated
    assert (brute_sharding == "t") == replicated
    assert plan.memory.weights == (1_024 if replicated else 512) * 2
