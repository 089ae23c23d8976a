"""MapShard: optimal mapping and sharding of workloads onto accelerator systems.

`mapshard.solve(setup)` and `mapshard.sweep(file)` are the Python API (mapshard/api.py).
They are looked up on first use (PEP 562 `__getattr__`, from `_API`), not imported with the
package: every `mapshard` command imports this package, and the API pulls in the pipeline,
the solver and the sweeps, which `mapshard --help` or `mapshard hardware` never need."""

from __future__ import annotations

import importlib

__version__ = "0.1.0"
__all__ = ["Result", "solve", "sweep"]

#: public name -> the module that defines it
_API = {"Result": "mapshard.api", "solve": "mapshard.api", "sweep": "mapshard.api"}


def __getattr__(name: str) -> object:
    if name not in _API:
        raise AttributeError(f"module 'mapshard' has no attribute {name!r}")
    value = getattr(importlib.import_module(_API[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
