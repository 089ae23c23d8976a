"""MapShard: optimal mapping and sharding of workloads onto accelerator systems.

`mapshard.solve(setup)` and `mapshard.sweep(file)` are the Python API (mapshard/api.py);
they are imported on first use, so the command line starts fast."""

__version__ = "0.1.0"
__all__ = ["Result", "solve", "sweep"]


def __getattr__(name: str):
    if name in __all__:
        from mapshard import api

        return getattr(api, name)
    raise AttributeError(f"module 'mapshard' has no attribute {name!r}")
