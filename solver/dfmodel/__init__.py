"""`--cost-model dfmodel`: DFModel's equations (model, problem, lanes, branches, fft) and
MapShard's exact search under them (search, assign, lane_search, pmu, price, the branch
searches); the native planner calls `search_dfmodel` and nothing else of it, and the
application asks `is_dfmodel_input` (through solver.api) whether the two models are compared.

`search_dfmodel` imports the search (solver/dfmodel/plan.py and everything under it) when
it is first called, through `_ENTRY` (`importlib.import_module`), not with the package: the
native planner imports this package on every run, and only a setup priced by DFModel's
equations (execution.cost_model DFMODEL, `--cost-model dfmodel`) ever calls it."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from generator.graph import Workload
from hardware.system import System
from solver.options import ExecutionOptions, SolverOptions
from solver.plan import Plan

__all__ = ["is_dfmodel_input", "search_dfmodel"]

#: the search's entry point (module, function), imported on the first call
_ENTRY = ("solver.dfmodel.plan", "search_dfmodel")


def is_dfmodel_input(workload: Workload) -> bool:
    """A workload built from DFModel's kernel variants."""
    return any(k.dfmodel_type for p in workload.phases for k in p.graph.kernels)


def search_dfmodel(
    workload: Workload,
    system: System,
    execution: ExecutionOptions,
    options: SolverOptions,
    scenario: str = "",
    progress: Callable | None = None,
) -> Plan:
    """The best plan under DFModel's equations (solver/dfmodel/plan.py search_dfmodel)."""
    module, function = _ENTRY
    search = getattr(importlib.import_module(module), function)
    return search(workload, system, execution, options, scenario, progress)
