"""The solver's public entry points: the application calls these (and solver.plan's records,
solver.options' option records) and nothing else of the solver's insides; menus, MILPs and
searches may move, these names stay."""

from __future__ import annotations

from solver.compare_models import Term, compare, compare_cost, is_dfmodel_input
from solver.compare_models import describe as describe_model_differences
from solver.cost.collectives import hierarchical_time
from solver.cost.efficiency import (
    achieved_dram_Bps,
    dram_efficiency,
    for_precision,
    gemm_compute_time,
    gemm_efficiency,
)
from solver.cost.frontier import gemm_frontier
from solver.cost.latency import config_latency
from solver.cost.menus import gemm_dims
from solver.dfmodel.branches import hpl_grid
from solver.milp.linear import available_solvers, load_backends
from solver.search.planner import search_workload as solve_workload
from solver.search.solve_memo import SOLUTIONS
from solver.search.training_space import chosen_workload
from solver.verify import verify_plan

__all__ = [
    "SOLUTIONS",
    "Term",
    "achieved_dram_Bps",
    "available_solvers",
    "chosen_workload",
    "compare",
    "compare_cost",
    "config_latency",
    "describe_model_differences",
    "dram_efficiency",
    "for_precision",
    "gemm_compute_time",
    "gemm_dims",
    "gemm_efficiency",
    "gemm_frontier",
    "hierarchical_time",
    "hpl_grid",
    "is_dfmodel_input",
    "load_backends",
    "solve_workload",
    "verify_plan",
]
