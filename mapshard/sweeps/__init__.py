"""Design-space sweeps: many Setups from one base and a few axes, solved in local worker
processes or on a Dask cluster, stored row by row in a resumable results.csv, summarised as
Pareto fronts, best-point scenario folders and an HTML report.

Pipeline: load_sweep (parse + check) -> expand_points (set fields, validate, pre-filter;
an axis value or a base problem that fails every point is bad input, raised before
anything is solved) -> run_sweep (batches by workload, results store, resume) ->
write_outputs.
"""

from mapshard.sweeps.points import Point, expand_points
from mapshard.sweeps.runner import SweepOutcome, run_sweep
from mapshard.sweeps.spec import AxisSpec, FilterSpec, SweepSpec, load_sweep

__all__ = [
    "AxisSpec",
    "FilterSpec",
    "Point",
    "SweepOutcome",
    "SweepSpec",
    "expand_points",
    "load_sweep",
    "run_sweep",
]
