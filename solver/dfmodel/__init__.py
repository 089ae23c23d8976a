"""`--cost-model dfmodel`: DFModel's equations (model, problem, lanes, branches, fft) and
MapShard's exact search under them (search, assign, lane_search, pmu, price, the branch
searches); the native planner calls `search_dfmodel` and nothing else of it."""

from solver.dfmodel.plan import search_dfmodel

__all__ = ["search_dfmodel"]
