"""The spine: every way into MapShard (the CLI, sweeps, validation, benchmarks) runs
load -> resolve -> generate -> solve -> check -> write through these functions, so the
stages cannot drift apart again. Each stage takes and returns frozen artifacts:

  load(path) / load_message(setup, path) -> Loaded     parsed and validated setup
  resolve(loaded) -> System                            the machine, in SI units
  generate(loaded, system) -> Workload                 the kernel graph(s) for that machine
  solve(scenario, ...) -> Plan                         the MILP search (solver.api)
  check(scenario, plan) -> Plan                        independent re-check (solver.verify)
  write(scenario, plan, out) -> list[Path]             the result folder

Composed entry points: `load_scenario` (load+resolve+generate), `plan` (solve+check),
`run` (everything, for `mapshard run`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from generator.graph import Workload
from generator.precision import default_dtype
from hardware.system import System
from schema import setup_pb2
from schema.dfmodel import native_solver, normalise
from schema.dtypes import precision_name
from solver.options import DFModelOptions, ExecutionOptions, SolverOptions
from solver.plan import Plan

if TYPE_CHECKING:
    from mapshard.sensitivity import Sensitivity
    from mapshard.serving import Serving
    from mapshard.stream import StreamView


@dataclass(frozen=True)
class Loaded:
    """A parsed and validated setup; `path` is the file relative paths are relative to."""

    setup: setup_pb2.Setup
    path: Path


@dataclass(frozen=True)
class Scenario:
    """A resolved scenario: everything the solver needs."""

    setup: setup_pb2.Setup
    path: Path  # the setup file
    system: System
    workload: Workload

    @property
    def name(self) -> str:
        return self.setup.name or self.path.parent.name


@dataclass(frozen=True)
class Stage:
    """A progress report between solver reports: which stage a run is in."""

    text: str

    def describe(self) -> str:
        return self.text


@dataclass(frozen=True)
class Result:
    """What `run` produced: the scenario, its checked plan and the files written."""

    scenario: Scenario
    plan: Plan
    out: Path
    files: tuple[Path, ...]
    sensitivity: Sensitivity | None = None
    serving: Serving | None = None
    stream: StreamView | None = None


# ---------------------------------------------------------------------------------------
# Stages
# ---------------------------------------------------------------------------------------


def load(scenario: str | Path, cost_model: str | None = None) -> Loaded:
    """Read a scenario folder (its setup.txt) or a setup file, and validate it;
    `cost_model` (--cost-model) replaces execution.cost_model first (validation reads it:
    DFModel's equations take an unset sram_cap as no limit)."""
    from schema.setup_io import load_setup

    setup, path = load_setup(scenario)
    if cost_model is not None:
        setup = setup_with_cost_model(setup, cost_model)
    return load_message(setup, path)


def load_message(setup: setup_pb2.Setup, path: Path) -> Loaded:
    """Validate a Setup built in code (a sweep point, a validation row) as if read from
    `path`; raises SetupError listing every problem."""
    from schema.dfmodel_spelling import respell, user_field
    from schema.errors import SetupError
    from schema.validation import validate_setup
    from solver.milp.linear import available_solvers

    native, origins = respell(setup, Path(path))  # DFModel's other spellings, once
    try:
        validate_setup(native, Path(path), available_solvers)
    except SetupError as exc:
        raise SetupError([user_field(m, origins) for m in exc.problems]) from None
    return Loaded(setup=native, path=Path(path))


def resolve(loaded: Loaded) -> System:
    """The machine: preset <- library chip <- the setup's overrides, after the DFModel seam
    has turned DFModel's fields into native ones (errors still name the user's fields)."""
    from hardware.resolve import resolve_system

    return resolve_system(normalise(loaded.setup), loaded.path)


def generate(loaded: Loaded, system: System) -> Workload:
    """The workload for the resolved machine: generators whose graph spans the machine
    (DLRM's global batch) get the resolved chip count, never the setup's raw field."""
    from generator.build import build_workload
    from mapshard.compat import check_degrees

    workload = build_workload(loaded.setup, loaded.path, system.num_chips)
    check_degrees(loaded.path, system, workload)
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
    from schema.errors import SetupError
    from solver.api import solve_workload

    check_cost_model(scenario)
    try:
        return solve_workload(
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
    from schema.errors import SetupError
    from solver.compare_models import is_dfmodel_input

    chosen = execution_options(scenario.setup).cost_model
    if chosen != "dfmodel":
        return
    graphs = scenario.workload.phases
    if len(graphs) != 1 or not is_dfmodel_input(scenario.workload):
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
    from solver.verify import verify_plan

    problems = verify_plan(
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


def write(
    scenario: Scenario,
    plan: Plan,
    out: str | Path,
    sensitivity: Sensitivity | None = None,
    serving: Serving | None = None,
    stream: StreamView | None = None,
) -> list[Path]:
    """The result folder, atomically; the workload gives mapping.dot the graph's real
    edges and the report its data-movement frontier; `sensitivity` adds the what-if table,
    `serving` the TTFT/TPOT/throughput-versus-batch table, `stream` the request-stream view."""
    from mapshard.dfmodel_final import FILE_NAME, dse_final_text
    from mapshard.plan_text import plan_setup_texts
    from mapshard.report.write import write_results

    text = plan_setup_texts(scenario, plan)
    final = dse_final_text(scenario, plan)  # DFModel's record, for DFModel graphs
    extra = {FILE_NAME: final} if final is not None else None
    return write_results(
        plan,
        out,
        text,
        scenario.system,
        plan_workload(scenario, plan),
        extra,
        sensitivity,
        serving,
        stream,
    )


def plan_workload(scenario: Scenario, plan: Plan) -> Workload:
    """The workload the plan was made for: the scenario's, with the training knobs the
    outer search chose (micro-batch, recompute, ZeRO stage, interleaving) pinned."""
    from solver.api import chosen_workload

    return chosen_workload(scenario.workload, plan.training)


def what_if(
    scenario: Scenario, plan: Plan, time_limit_s: float | None = None, force: bool = True
) -> Sensitivity:
    """Each resource scaled x0.5 and x2, re-solved by `plan` (mapshard/sensitivity.py);
    without `force`, large DATAFLOW graphs get a table that says why it is empty."""
    from mapshard.sensitivity import sensitivity

    return sensitivity(scenario, plan, time_limit_s, force)


# ---------------------------------------------------------------------------------------
# Composed entry points
# ---------------------------------------------------------------------------------------


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
    return compare_models(scenario, check(scenario, solved))


def compare_models(scenario: Scenario, plan: Plan) -> Plan:
    """On a DFModel input priced by the native model, the terms where DFModel's equations
    differ (solver/compare_models.py) go with the plan to the terminal, report and
    summary.json."""
    from solver.compare_models import compare, compare_cost, is_dfmodel_input

    if plan.cost_model != "native" or not is_dfmodel_input(scenario.workload):
        return plan
    ex = scenario_options(scenario)
    terms = compare(plan, scenario.workload, scenario.system, ex.overlap)
    rows = tuple((t.name, t.native_s, t.dfmodel_s) for t in terms)
    costs = compare_cost(plan, scenario.system)
    return replace(plan, model_differences=rows, cost_differences=costs)


def with_cost_model(scenario: Scenario, cost_model: str | None) -> Scenario:
    """The scenario with execution.cost_model set to `cost_model` (None: unchanged), so
    that every stage reading the execution options sees the same choice."""
    if cost_model is None:
        return scenario
    return replace(scenario, setup=setup_with_cost_model(scenario.setup, cost_model))


def setup_with_cost_model(setup: setup_pb2.Setup, cost_model: str) -> setup_pb2.Setup:
    """A copy of `setup` with execution.cost_model set to `cost_model`."""
    out = setup_pb2.Setup()
    out.CopyFrom(setup)
    # a DFModel file may still name the block `miscellany` (respelled after loading)
    block = (
        out.miscellany
        if out.HasField("miscellany") and not out.HasField("execution")
        else out.execution
    )
    block.cost_model = setup_pb2.CostModel.Value(cost_model.upper())
    return out


def run(
    scenario: str | Path,
    out: str | Path,
    time_limit_s: float | None = None,
    progress: Callable[..., None] | None = None,
    sensitivity: bool | None = False,
    cost_model: str | None = None,
) -> Result:
    """`mapshard run`: load -> resolve -> generate -> solve -> check [-> what-if] -> write.
    `sensitivity`: True computes the what-if table, None computes it unless the graph is a
    large DATAFLOW one (the table then says why), False leaves it out. `cost_model`
    (--cost-model) replaces the setup's execution.cost_model.
    The result folder is checked before the solve, so a bad --out costs no solver time.
    Interrupted after a first plan, it writes that plan (status "interrupted") and re-raises
    schema.errors.Interrupted with `.result` set."""
    from mapshard import serving, stream
    from mapshard.report.write import check_writable
    from schema.errors import Interrupted

    say = progress or (lambda stage: None)
    loaded = load(scenario, cost_model)
    system = resolve(loaded)
    check_writable(out)
    say(Stage("generating the kernel graph"))
    view = flow = None
    if serving.wanted(loaded.setup):  # one solve per batch / input length
        view, sc, p = serving.serve(loaded, system, time_limit_s)
    elif stream.wanted(loaded.setup):  # step grid solved, request stream simulated
        say(Stage("solving engine steps and simulating the request stream"))
        flow, sc, p = stream.run_stream(loaded, system, time_limit_s)
    else:
        sc = with_cost_model(assemble(loaded, system), cost_model)
        try:
            p = plan(sc, time_limit_s, progress)
        except Interrupted as stop:  # Ctrl-C / SIGTERM after a first plan: write it
            p = check(sc, stop.plan)  # type: ignore[arg-type]
            stop.result = Result(sc, p, Path(out), tuple(write(sc, p, out)))
            raise
    table = None
    if flow is not None and sensitivity is None:
        sensitivity = False  # a stream's plan is one of many steps: --what-if asks for it
    if sensitivity is not False:  # None: unless the graph is too large (sensitivity.py)
        say(Stage("what-if: re-solving with each resource x0.5 and x2"))
        table = what_if(sc, p, time_limit_s, force=sensitivity is True)
    say(Stage("writing the report"))
    files = write(sc, p, out, table, view, flow)
    return Result(sc, p, Path(out), tuple(files), sensitivity=table, serving=view, stream=flow)


# ---------------------------------------------------------------------------------------
# Setup -> solver options
# ---------------------------------------------------------------------------------------


def overlap_mode(setup: setup_pb2.Setup, chip_overlap: str = "") -> str:
    """The overlap the plan assumes ("perfect", "serial_network" or "none"), first found:
    execution.overlap; the legacy flags (serialize_network, perfect_overlap); the chip's
    calibrated mode (`chip_overlap`, hardware Chip.overlap from ChipSpec.overlap); else
    "perfect" without an execution block and "none" with one (DFModel's meaning of
    perfect_overlap: false). `run` and `validate` both resolve it here."""
    ex = setup.execution
    names = {
        setup_pb2.PERFECT: "perfect",
        setup_pb2.SERIAL_NETWORK: "serial_network",
        setup_pb2.NO_OVERLAP: "none",
    }
    if ex.overlap in names:
        return names[ex.overlap]
    if ex.serialize_network:
        return "serial_network"
    if ex.perfect_overlap:
        return "perfect"
    if chip_overlap:
        return chip_overlap
    return "none" if setup.HasField("execution") else "perfect"


def scenario_options(scenario: Scenario) -> ExecutionOptions:
    """The solver options a scenario runs with: its setup on its resolved chip."""
    chip = scenario.system.chip
    return execution_options(scenario.setup, chip.overlap, chip.efficiency.tp_comm_hidden_share)


def execution_options(
    setup: setup_pb2.Setup, chip_overlap: str = "", chip_tp_comm_hidden: float = 0.0
) -> ExecutionOptions:
    """Solver options from the setup; `chip_overlap`: the resolved chip's calibrated overlap
    (System.chip.overlap), the default when the setup names none; `chip_tp_comm_hidden`:
    its tp_comm_hidden_share. "" is right only for a setup without a library chip (a
    DFModel file); a scenario's options come from `scenario_options` (it has the chip)."""
    ex = setup.execution
    precision = setup.workload.precision
    math_type = precision.math or precision.activation
    mode = overlap_mode(setup, chip_overlap)
    default_math = default_dtype(setup).lower()  # HPL fp64, FFT fp32, else bf16
    fft = ex.WhichOneof("workload_variant") == "fft"  # DFModel's FFT branch
    # the chip's contention share (serial only): TP collectives with the recipe's overlap;
    # step-level overlaps (DP buckets, p2p) always, perfect when the chip has no share
    serial_h = chip_tp_comm_hidden if mode == "serial_network" else 0.0
    return ExecutionOptions(
        dataflow=ex.execution_style == setup_pb2.DATAFLOW,
        num_config=int(ex.num_config),
        overlap=mode != "none",
        math_precision=precision_name(math_type, default_math),
        pin_sharding=ex.pin_sharding,
        pipeline_schedule=(ex.pipeline_schedule or "1f1b").lower(),
        serialize_network=mode == "serial_network",
        network_hidden_share=serial_h if ex.tp_comm_overlap else 0.0,
        tp_comm_overlap=ex.tp_comm_overlap,
        comm_hidden_share=serial_h or 1.0,
        cost_model=setup_pb2.CostModel.Name(ex.cost_model).lower(),
        word_bytes=float(ex.word or 2.0),
        fft_copies=max(int(ex.fft.num_copy), 1) if fft else 0,
        fft_length=int(ex.fft.length) if fft else 0,
        dfmodel=dfmodel_options(setup),
    )


def dfmodel_options(setup: setup_pb2.Setup) -> DFModelOptions:
    """DFModel's workload block and lane/stage fields (read by --cost-model dfmodel only)."""
    ex, acc = setup.execution, setup.system.accelerator
    branch = ex.WhichOneof("workload_variant") or ""
    block = getattr(ex, branch) if branch else None
    word = float(ex.word or 2.0)
    copies = int(getattr(block, "num_copy", 0) or 1)
    table = 0.0
    if branch == "dlrm":
        table = float(ex.dlrm.num_table * ex.dlrm.row * ex.dlrm.emb_dim) * word
    return DFModelOptions(
        branch=branch,
        num_copy=copies,
        global_batch=int(ex.dlrm.global_batch_size) if branch == "dlrm" else 1,
        table_bytes=table,
        hpl_n=int(ex.hpl.n) if branch == "hpl" else 0,
        tile_size=int(ex.llm.tile_size) if branch == "llm" else 0,
        effective_stage=int(ex.effective_stage or getattr(block, "effective_stage", 0) or 0),
        lane_width=int(acc.systolic_width),
        stage_width=int(acc.systolic_height),
        cores=int(acc.core),
        freq_GHz=float(acc.freq),
        pmu=int(acc.pmu),
        pmu_cap=float(acc.pmu_cap),
        sram_bounded=acc.sram_cap > 0,
        separate_rs_ag_for_ar=bool(ex.separate_rs_ag_for_ar),
        newer_schema=bool(ex.effective_stage or ex.overlap),
    )


def solver_options(setup: setup_pb2.Setup, time_limit_s: float | None = None) -> SolverOptions:
    """`solver` wins over DFModel's `gurobi` block; the command line wins over both.
    DFModel's thread count is a Gurobi setting for a large server: HiGHS runs single-threaded
    unless `solver.threads` asks otherwise (one setting per process; see DESIGN.md)."""
    s = native_solver(setup)  # DFModel's `gurobi` filled in (schema.dfmodel)
    limit = s.time_limit_s
    if time_limit_s is not None:
        limit = time_limit_s
    return SolverOptions(
        time_limit_s=float(limit),
        gap=float(s.gap or 1e-4),
        threads=int(s.threads or 1),
        name=s.name or "highs",
        node_limit=int(s.node_limit),
    )
