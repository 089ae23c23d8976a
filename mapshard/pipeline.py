"""The pipeline, one function per stage:
parse -> validate -> resolve hardware -> generate graph -> plan (MILP) -> report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generator.graph import Workload
from hardware.system import System
from schema import setup_pb2
from schema.dtypes import precision_name
from schema.setup_io import load_setup
from solver.milp.linear import available_solvers
from solver.options import ExecutionOptions, SolverOptions
from solver.plan import Plan


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
    from schema.validation import validate_setup

    setup, path = load_setup(scenario)
    validate_setup(setup, path, available_solvers)
    system = resolve_system(setup, path)
    workload = build_workload(setup, path)
    return Scenario(setup=setup, path=path, system=system, workload=workload)


def execution_options(setup: setup_pb2.Setup) -> ExecutionOptions:
    ex = setup.execution
    precision = setup.workload.precision
    math_type = precision.math or precision.activation
    return ExecutionOptions(
        dataflow=ex.execution_style == setup_pb2.DATAFLOW,
        num_config=int(ex.num_config),
        overlap=bool(ex.perfect_overlap) or not setup.HasField("execution"),
        math_precision=precision_name(math_type, "bf16"),
        pin_sharding=ex.pin_sharding,
        pipeline_schedule=(ex.pipeline_schedule or "1f1b").lower(),
        serialize_network=ex.serialize_network,
    )


def solver_options(setup: setup_pb2.Setup, time_limit_s: float | None = None) -> SolverOptions:
    """`solver` wins over DFModel's `gurobi` block; the command line wins over both.
    DFModel's thread count is a Gurobi setting for a large server: HiGHS runs single-threaded
    unless `solver.threads` asks otherwise (one setting per process; see DESIGN.md)."""
    s, g = setup.solver, setup.gurobi
    limit = s.time_limit_s or g.time or 0.0
    if time_limit_s is not None:
        limit = time_limit_s
    return SolverOptions(
        time_limit_s=float(limit),
        gap=float(s.gap or g.gap or 1e-4),
        threads=int(s.threads or 1),
        name=s.name or "highs",
        node_limit=int(s.node_limit),
    )


def solve(scenario: Scenario, time_limit_s: float | None = None, progress=None) -> Plan:
    """`progress`: called with a `solver.search.planner.SearchProgress` after each parallel
    choice."""
    from solver.api import solve_workload as plan

    return plan(
        scenario.workload,
        scenario.system,
        execution_options(scenario.setup),
        solver_options(scenario.setup, time_limit_s),
        scenario.name,
        progress,
    )
