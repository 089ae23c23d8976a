"""A plan returned at the time limit or on a work budget respects num_config, the SRAM and
the graph order (verify_plan), and the status says which limit stopped the search. The
work budgets stop the same way on every machine; the time-limit case asserts only what
holds whatever the machine's speed."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from solver_fixtures import random_chain, small_system

from generator.graph import Phase, Workload
from schema.errors import NoPlanError
from solver.api import solve_workload
from solver.options import ExecutionOptions, SolverOptions
from solver.verify import verify_plan


def _setup(n: int, seed: int = 5):
    graph = random_chain(random.Random(seed), n)
    system = small_system(num_chips=2, sram_bytes=2e4)
    system = replace(system, network=(replace(system.network[0], parallelism=("TP",)),))
    workload = Workload(kind="graph", phases=(Phase("graph", graph),))
    return workload, system


@pytest.mark.parametrize(
    "options,kernels,seed",
    [
        (SolverOptions(time_limit_s=0.5, gap=0.0), 150, 5),
        # a 9-kernel chain whose first path is not proven (seed 1)
        (SolverOptions(gap=0.0, max_paths=1), 9, 1),
    ],
    ids=["time_limit", "path_cap"],
)
def test_stopped_plan_is_feasible(options, kernels, seed):
    workload, system = _setup(kernels, seed)
    execution = ExecutionOptions(dataflow=True, num_config=6, overlap=True)
    try:
        plan = solve_workload(workload, system, execution, options)
    except NoPlanError:
        return  # "no plan" (exit 4) is honest; a violating plan is not
    assert verify_plan(plan, workload, system, execution) == []
    for phase in plan.phases:
        assert len(phase.configs) <= 6
    if plan.stats.status == "optimal":
        assert plan.stats.stop_reason == "proof"
    else:
        assert plan.stats.stop_reason in ("time_limit", "path_cap")
    if options.max_paths == 1:  # a budget: the same stop on any machine
        assert (plan.stats.status, plan.stats.stop_reason) == ("time_limit", "path_cap")


def test_a_price_budget_before_a_first_plan_names_itself():
    """The segment-price budget spent before any segmentation is priced: no plan, and the
    message names the budget to raise (not the time limit)."""
    workload, system = _setup(16, 4)
    execution = ExecutionOptions(dataflow=True, num_config=6, overlap=True)
    with pytest.raises(NoPlanError, match=r"work budget solver.max_priced .*raise solver"):
        solve_workload(workload, system, execution, SolverOptions(gap=0.0, max_priced=3))
