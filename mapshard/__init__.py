"""MapShard: optimal mapping and sharding of workloads onto accelerator systems.

`mapshard.solve(setup)` and `mapshard.sweep(file)` are the Python API (mapshard/api.py)."""

from mapshard.api import Result, solve, sweep

__version__ = "0.1.0"
__all__ = ["Result", "solve", "sweep"]
