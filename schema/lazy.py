"""Names resolved on first use: a module names what it would import as (module, attribute)
pairs and imports each when a run first needs it, so start-up pays only for what the run
uses (generator.build.FAMILIES, mapshard.run.STEPS, the PEP 562 `__getattr__` of
mapshard, solver.api and solver.dfmodel)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Ref = tuple[str, str]  # (module, attribute)


def load(ref: Ref) -> Any:
    """The attribute `ref` names, its module imported now."""
    module, attribute = ref
    return getattr(importlib.import_module(module), attribute)


def module_getattr(
    owner: str, namespace: dict[str, Any], names: dict[str, Ref]
) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562) for module `owner` that resolves `names` on first
    use and keeps each in the module's `namespace` (its globals), so the next lookup is a
    plain attribute."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {owner!r} has no attribute {name!r}")
        value = namespace[name] = load(names[name])
        return value

    return __getattr__
