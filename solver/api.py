"""The solver's public entry points: the application calls these and nothing else of the
solver's insides (menus, MILPs and searches may move; these names stay)."""

from __future__ import annotations

from solver.search.planner import search_workload as solve_workload

__all__ = ["solve_workload"]
