"""The solver's public entry points: the application calls these and nothing else of the
solver's insides (menus, MILPs and searches may move; these names stay)."""

from __future__ import annotations

from solver.search.planner import search_workload as solve_workload
from solver.search.training_space import chosen_workload

__all__ = ["chosen_workload", "solve_workload"]
