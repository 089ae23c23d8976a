"""The stages every way into MapShard (`mapshard.run`, the analyses, sweeps, validation,
benchmarks) goes through, so they cannot drift apart. Each takes and returns frozen
artifacts:

  load(path) / load_message(setup, path) -> Loaded     parsed and validated setup
  resolve(loaded) -> System                            the machine, in SI units
  generate(loaded, system) -> Workload                 the kernel graph(s) for that machine
  solve(scenario, ...) -> Plan                         the MILP search (solver.api)
  check(scenario, plan) -> Plan                        independent re-check (solver.api)
  plan(scenario, ...) -> Plan                          solve + check + model comparison

`load_scenario` is load + resolve + generate. The run itself (analysis, what-if, writing)
is composed once, in mapshard/run.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from generator.build import build_workload
from generator.graph import Workload
from hardware.resolve import resolve_system, with_attention_kernel, with_host_op
from hardware.system import System
from mapshard.compat import check_degrees
from mapshard.scenario import (
    Loaded,
    Scenario,
    execution_options,
    plan_workload,
    scenario_options,
    setup_with_cost_model,
    solver_options,
)
from schema import setup_pb2
from schema.dfmodel import ignored_fields, normalise
from schema.dfmodel_spelling import respell, user_field
from schema.errors import SetupError
from schema.setup_io import load_setup
from schema.validation import validate_setup
from solver import api as solver_api
from solver.plan import Plan


@dataclass(frozen=True)
class Stage:
    """A progress report between solver reports: which stage a run is in."""

    text: str

    def describe(self) -> str:
        return self.text


# ---------------------------------------------------------------------------------------
# Stages
# ---------------------------------------------------------------------------------------


def load(scenario: str | Path, cost_model: str | None = None) -> Loaded:
    """Read a scenario folder (its setup.txt) or a setup file, and validate it;
    `cost_model` (--cost-model) replaces execution.cost_model first (validation reads it:
    DFModel's equations take an unset sram_cap as no limit)."""
    setup, path = load_setup(scenario)
    if cost_model is not None:
        setup = setup_with_cost_model(setup, cost_model)
    return load_message(setup, path)


def load_message(setup: setup_pb2.Setup, path: Path) -> Loaded:
    """Validate a Setup built in code (a sweep point, a validation row) as if read from
    `path`; raises SetupError listing every problem."""
    native, origins = respell(setup, Path(path))  # DFModel's other spellings, once
    try:
        validate_setup(native, Path(path), _solver_names)
    except SetupError as exc:
        raise SetupError([user_field(m, origins) for m in exc.problems]) from None
    return Loaded(setup=native, path=Path(path))


def _solver_names() -> list[str]:
    """The MILP solvers that can run here (asked only of a setup that names one)."""
    return solver_api.available_solvers()


def resolve(loaded: Loaded) -> System:
    """The machine: preset <- library chip <- the setup's overrides, after the DFModel seam
    has turned DFModel's fields into native ones (errors still name the user's fields).
    Kernels replayed from a CUDA graph (execution.cuda_graph) are not launch-paced: the
    chip's GEMM launch floor does not apply. execution.attention_kernel picks the chip's
    causal attention family; execution.host_op_us paces host loops (`with_host_op`)."""
    system = resolve_system(normalise(loaded.setup), loaded.path)
    system = with_attention_kernel(system, loaded.setup.execution.attention_kernel, loaded.path)
    if loaded.setup.execution.cuda_graph:
        chip = system.chip
        system = replace(
            system, chip=replace(chip, efficiency=replace(chip.efficiency, kernel_min_time_s=0.0))
        )
    return with_host_op(system, loaded.setup.execution.host_op_us)


def generate(loaded: Loaded, system: System) -> Workload:
    """The workload for the resolved machine: generators whose graph spans the machine
    (DLRM's global batch) get the resolved chip count, never the setup's raw field."""
    workload = build_workload(loaded.setup, loaded.path, system.num_chips)
    check_degrees(loaded.path, system, workload, loaded.setup.execution.placement)
    return workload


def solve(
    scenario: Scenario,
    time_limit_s: float | None = None,
    progress: Callable[..., None] | None = None,
    start_with: tuple[str, str] | None = None,
) -> Plan:
    """The MILP search. `progress` is called with the search's progress after each outer
    choice; `start_with` (placement, knobs) names a candidate to settle first (the what-if
    re-solves: solver.search.training_space.start_with). Use `plan` (solve + check) unless
    the plan is deliberately not checked."""
    check_cost_model(scenario)
    try:
        return solver_api.solve_workload(
            scenario.workload,
            scenario.system,
            scenario_options(scenario),
            solver_options(scenario.setup, time_limit_s),
            scenario.name,
            progress,
            start_with,
        )
    except SetupError as exc:  # found while solving (DFModel's branches): name the file
        where = str(scenario.path)
        raise SetupError([m if where in m else f"{where}: {m}" for m in exc.problems]) from None


def check_cost_model(scenario: Scenario) -> None:
    """What the DFModel cost model does not reproduce is refused, naming the file: a
    workload that is not one DFModel graph, multi-layer graphs (its partition into PP
    stages) and DFModel's workload branches other than LLM, DLRM, HPL and FFT (its
    gemm_fft_llm, vector_fft_llm, regular_fft_llm and mamba blocks)."""
    chosen = execution_options(scenario.setup).cost_model
    if chosen != "dfmodel":
        return
    graphs = scenario.workload.phases
    if len(graphs) != 1 or not solver_api.is_dfmodel_input(scenario.workload):
        raise SetupError(
            f"{scenario.path}: the DFModel cost model prices one DFModel dataflow_graph "
            "(kernel variants gemm_input1_weight, gemm_input1_input2, elementwise_input1, "
            "elementwise_input1_input2) or execution.llm; this setup's workload is not one "
            f"({len(graphs)} phase(s) of other kernels): use the native cost model"
        )
    branch = scenario.setup.execution.WhichOneof("workload_variant")
    if branch not in (None, "llm", "fft", "dlrm", "hpl"):
        raise SetupError(
            f"{scenario.path}: execution.{branch} is DFModel's {branch} branch, which the "
            "DFModel cost model does not reproduce (its LLM, DLRM, HPL and FFT branches and "
            "plain graphs only): use the native cost model"
        )
    per_graph = scenario.setup.execution.llm.num_layer_in_graph
    if per_graph > 1:
        raise SetupError(
            f"{scenario.path}: execution.llm.num_layer_in_graph must be 1 with the DFModel "
            f"cost model, got {per_graph}: DFModel first splits a multi-layer graph into PP "
            "partitions and prices the slowest, which is not reproduced"
        )


class PlanCheckError(AssertionError):
    """The solver returned a plan its own numbers contradict: a MapShard bug, not bad input."""


def check(scenario: Scenario, plan: Plan) -> Plan:
    """Re-check the plan independently of the MILP before anything reads it; raises
    PlanCheckError listing every violation."""
    problems = solver_api.verify_plan(
        plan,
        plan_workload(scenario, plan),
        scenario.system,
        scenario_options(scenario),
    )
    if problems:
        raise PlanCheckError(
            f"{scenario.name}: the plan fails its re-check: " + "; ".join(problems)
        )
    return plan


def load_scenario(scenario: str | Path) -> Scenario:
    """load -> resolve -> generate."""
    loaded = load(scenario)
    return assemble(loaded, resolve(loaded))


def assemble(loaded: Loaded, system: System, workload: Workload | None = None) -> Scenario:
    """The Scenario of a loaded setup on `system`; the workload is generated for it unless
    given (a sweep's cached workload, a validation row's pinned one)."""
    if workload is None:
        workload = generate(loaded, system)
    return Scenario(setup=loaded.setup, path=loaded.path, system=system, workload=workload)


def plan(
    scenario: Scenario,
    time_limit_s: float | None = None,
    progress: Callable[..., None] | None = None,
    start_with: tuple[str, str] | None = None,
) -> Plan:
    """solve -> check -> compare: the only way callers get a plan."""
    solved = solve(scenario, time_limit_s, progress, start_with)
    compared = compare_models(scenario, check(scenario, solved))
    ignored = ignored_fields(scenario.setup)  # DFModel fields no model reads: said
    return replace(compared, warnings=compared.warnings + ignored) if ignored else compared


def compare_models(scenario: Scenario, plan: Plan) -> Plan:
    """On a DFModel input priced by the native model, the terms where DFModel's equations
    differ (solver/compare_models.py) go with the plan to the terminal, report and
    summary.json."""
    if plan.cost_model != "native" or not solver_api.is_dfmodel_input(scenario.workload):
        return plan
    ex = scenario_options(scenario)
    terms = solver_api.compare(plan, scenario.workload, scenario.system, ex.overlap)
    rows = tuple((t.name, t.native_s, t.dfmodel_s) for t in terms)
    costs = solver_api.compare_cost(plan, scenario.system)
    return replace(plan, model_differences=rows, cost_differences=costs)
