"""The scenario: a loaded setup, the machine it resolves to and its kernel graph, and the
one translation of a setup into the solver's options (execution, DFModel, solver). Every
caller (run, the analyses, sweeps, validation, the writers) reads options from here."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from generator.graph import Workload
from generator.precision import default_dtype
from hardware.system import System
from schema import setup_pb2
from schema.dfmodel import native_solver
from schema.dtypes import precision_name
from solver import api as solver_api
from solver.options import (
    MAX_PATHS,
    MAX_PRICED,
    TILE_MENU_SIZE,
    TILE_REFINEMENTS,
    DFModelOptions,
    ExecutionOptions,
    SolverOptions,
)
from solver.plan import Plan


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


def plan_workload(scenario: Scenario, plan: Plan) -> Workload:
    """The workload the plan was made for: the scenario's, with the training knobs the
    outer search chose (micro-batch, recompute, ZeRO stage, interleaving) pinned."""
    return solver_api.chosen_workload(scenario.workload, plan.training, plan.parallelism)


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
        placement=ex.placement,
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
        hbd=int(setup.system.HBD),
        second_dram_cap=float(setup.system.memory.second_dram_cap),
        second_dram_Bps=float(setup.system.memory.second_dram_bw) * 1e9,
        newer_schema=bool(ex.effective_stage or ex.overlap),
    )


def solver_options(setup: setup_pb2.Setup, time_limit_s: float | None = None) -> SolverOptions:
    """`solver` wins over DFModel's `gurobi` block; the command line wins over both (the
    time limit: a safety valve, the work budgets decide the answer). DFModel's thread
    count is a Gurobi setting for a large server: HiGHS runs single-threaded unless
    `solver.threads` asks otherwise (one setting per process; see DESIGN.md)."""
    s = native_solver(setup)  # DFModel's `gurobi` filled in (schema.dfmodel)
    limit = s.time_limit_s
    if time_limit_s is not None:
        limit = time_limit_s
    return SolverOptions(
        time_limit_s=float(limit),
        gap=float(s.gap or 1e-4),
        threads=int(s.threads or 1),
        name=s.name or "highs",
        node_limit=int(s.node_limit),  # 0: solver.options.NODE_LIMIT
        max_paths=int(s.max_paths or MAX_PATHS),
        max_priced=int(s.max_priced or MAX_PRICED),
        max_candidates=int(s.max_candidates),
        tile_menu_size=int(s.tile_menu_size or TILE_MENU_SIZE),
        tile_refinements=int(s.tile_refinements or TILE_REFINEMENTS),
    )
