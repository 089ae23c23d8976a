"""MapShard: optimal mapping and sharding of workloads onto accelerator systems.

`mapshard.solve(setup)` and `mapshard.sweep(file)` are the Python API (mapshard/api.py).
They are looked up on first use (PEP 562 `__getattr__`, from `_API`), not imported with the
package: every `mapshard` command imports this package, and the API pulls in the pipeline,
the solver and the sweeps, which `mapshard --help` or `mapshard hardware` never need."""

from __future__ import annotations

from schema.lazy import module_getattr

__version__ = "0.1.0"
__all__ = ["Result", "solve", "sweep"]

#: public name -> (the module that defines it, its name there)
_API = {name: ("mapshard.api", name) for name in __all__}

__getattr__ = module_getattr(__name__, globals(), _API)


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
