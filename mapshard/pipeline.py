"""The pipeline, one function per stage:
parse -> validate -> resolve hardware -> generate graph -> plan (MILP) -> report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator.graph import Workload
from hardware.system import System
from mapshard import setup_pb2
from mapshard.setup_io import load_setup


@dataclass(frozen=True)
class Scenario:
    """A parsed, validated and resolved scenario: everything the solver needs."""

    setup: setup_pb2.Setup
    path: Path  # the setup file
    system: System
    workload: Workload

    @property
    def name(self) -> str:
        return self.setup.name or self.path.parent.name


def load_scenario(scenario: str | Path) -> Scenario:
    from generator.build import build_workload
    from hardware.resolve import resolve_system
    from mapshard.validation import validate_setup

    setup, path = load_setup(scenario)
    validate_setup(setup, path)
    system = resolve_system(setup, path)
    workload = build_workload(setup, path)
    return Scenario(setup=setup, path=path, system=system, workload=workload)
