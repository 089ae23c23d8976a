"""Design-space sweeps: many Setups from one base and a few axes, solved in local worker
processes or on a Dask cluster, stored row by row in a resumable results.csv, summarised as
Pareto fronts, best-point scenario folders and an HTML report.

Pipeline: load_sweep (parse + check) -> expand_points (set fields, validate, pre-filter;
an axis value or a base problem that fails every point is bad input, raised before
anything is solved) -> run_sweep (batches by workload, results store, resume) ->
write_outputs.
"""

from schema.lazy import module_getattr

# resolved on first use (PEP 562): a sweep worker imports mapshard.sweeps.worker, and this
# package's __init__ runs first; the driver's modules (runner, backends) are not its business
_NAMES = {
    "AxisSpec": ("mapshard.sweeps.spec", "AxisSpec"),
    "FilterSpec": ("mapshard.sweeps.spec", "FilterSpec"),
    "Point": ("mapshard.sweeps.points", "Point"),
    "SweepOutcome": ("mapshard.sweeps.runner", "SweepOutcome"),
    "SweepSpec": ("mapshard.sweeps.spec", "SweepSpec"),
    "expand_points": ("mapshard.sweeps.points", "expand_points"),
    "load_sweep": ("mapshard.sweeps.spec", "load_sweep"),
    "run_sweep": ("mapshard.sweeps.runner", "run_sweep"),
}
__getattr__ = module_getattr(__name__, globals(), _NAMES)

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
