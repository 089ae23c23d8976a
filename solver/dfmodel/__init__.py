"""`--cost-model dfmodel`: DFModel's equations (model, problem, lanes, branches, fft) and
MapShard's exact search under them (search, assign, lane_search, pmu, price, the branch
searches); the native planner calls `search_dfmodel` and nothing else of it, and the
application asks `is_dfmodel_input` (through solver.api) whether the two models are compared.

`search_dfmodel` is looked up on first use (PEP 562 `__getattr__`, from `_ENTRY`), which
imports the search (solver/dfmodel/plan.py and everything under it) then, not with the
package: the native planner imports this package on every run and reads the name at its
call, and only a setup priced by DFModel's equations (execution.cost_model DFMODEL,
`--cost-model dfmodel`) ever calls it."""

from __future__ import annotations

from generator.graph import Workload
from schema.lazy import module_getattr

__all__ = ["is_dfmodel_input", "search_dfmodel"]

#: the search's entry point (module, function), imported on the first call
_ENTRY = ("solver.dfmodel.plan", "search_dfmodel")


def is_dfmodel_input(workload: Workload) -> bool:
    """A workload built from DFModel's kernel variants."""
    return any(k.dfmodel_type for p in workload.phases for k in p.graph.kernels)


__getattr__ = module_getattr(__name__, globals(), {"search_dfmodel": _ENTRY})
