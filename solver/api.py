"""The solver's public entry points: the application calls these (and solver.plan's records,
solver.options' option records) and nothing else of the solver's insides; menus, MILPs and
searches may move, these names stay.

Each name is looked up on first use (PEP 562 `__getattr__`, from `_API`), not imported with
this module: the application imports the façade while it is still reading a setup, and the
search behind it (the planner, its fusion and MILP searches, numpy) or DFModel's model
family (the comparison of the two models, its HPL process grid) is needed only once a run
solves, and the latter only for a DFModel input. Callers that want the laziness read the
names off the module at the point of use (`solver_api.solve_workload(...)`); a
`from solver.api import name` still works and imports that name's module at once."""

from __future__ import annotations

from schema.lazy import module_getattr

#: public name -> (the module that defines it, its name there)
_API: dict[str, tuple[str, str]] = {
    "BWD_EXPS_PER_SCORE": ("solver.cost.causal_attention", "BWD_EXPS_PER_SCORE"),
    "CausalAttentionShape": ("solver.cost.causal_attention", "CausalAttentionShape"),
    "FWD_EXPS_PER_SCORE": ("solver.cost.causal_attention", "FWD_EXPS_PER_SCORE"),
    "SOLUTIONS": ("solver.search.solve_memo", "SOLUTIONS"),
    "Term": ("solver.compare_models", "Term"),
    "achieved_dram_Bps": ("solver.cost.efficiency", "achieved_dram_Bps"),
    "available_solvers": ("solver.milp.linear", "available_solvers"),
    "causal_attention_seconds": ("solver.cost.causal_attention", "seconds"),
    "chosen_workload": ("solver.search.training_space", "chosen_workload"),
    "compare": ("solver.compare_models", "compare"),
    "compare_cost": ("solver.compare_models", "compare_cost"),
    "config_latency": ("solver.cost.latency", "config_latency"),
    "describe_model_differences": ("solver.compare_models", "describe"),
    "dram_efficiency": ("solver.cost.efficiency", "dram_efficiency"),
    "exp_rate": ("solver.cost.core_rates", "exp_rate"),
    "for_precision": ("solver.cost.efficiency", "for_precision"),
    "gemm_compute_time": ("solver.cost.efficiency", "gemm_compute_time"),
    "gemm_dims": ("solver.cost.gemm_roles", "gemm_dims"),
    "gemm_efficiency": ("solver.cost.efficiency", "gemm_efficiency"),
    "gemm_frontier": ("solver.cost.frontier", "gemm_frontier"),
    "hierarchical_time": ("solver.cost.collectives", "hierarchical_time"),
    "hpl_grid": ("solver.dfmodel.branches", "hpl_grid"),
    "is_dfmodel_input": ("solver.dfmodel", "is_dfmodel_input"),
    "load_backends": ("solver.milp.linear", "load_backends"),
    "solve_workload": ("solver.search.planner", "search_workload"),
    "unsplit_block_bytes": ("solver.cost.unsplit_decode", "block_bytes"),
    "unsplit_decode_seconds": ("solver.cost.unsplit_decode", "seconds"),
    "verify_plan": ("solver.verify", "verify_plan"),
}

__all__ = sorted(_API)


__getattr__ = module_getattr(__name__, globals(), _API)


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
