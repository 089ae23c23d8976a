"""One phase's inner problem for a candidate of the outer search: how it is built, what
its build depends on (so candidates share builds), and the memory row's parameter cap."""

from __future__ import annotations

import math

from generator.graph import KernelGraph, Pass, Phase, Workload
from hardware.system import System
from solver.cost import efficiency, memo
from solver.cost.menus import build_problem
from solver.cost.problem import MappingProblem, Span
from solver.cost.weights import WeightRule
from solver.options import TILE_MENU_SIZE, ExecutionOptions
from solver.search.parallel import Choice, spans_key
from solver.search.process_grid import dfmodel_grid, dfmodel_hpl_graph, grid_spans


def build_key(phase: Phase, choice: Choice, micro_batches: int) -> tuple:
    """What a phase's problem build depends on; not the weight rule: its bytes per
    parameter are the memory row's coefficient alone (solver.cost.menus.build_problem), set
    per candidate, so candidates that differ in ZeRO stage share one build, and a replicated
    weight's gradient sync is the step's (solver.cost.weights.StepWeights)."""
    held = -(-phase.steps // choice.data_ranks())  # a superset of held_instances' inputs
    return (id(phase.graph), choice.degree("TP"), spans_key(choice.spans), micro_batches, held)


def held_instances(workload: Workload, phase: Phase, choice: Choice, dataflow: bool) -> int:
    """Independent graph instances one chip runs per step, each configuration for all of
    them back to back (DATAFLOW), so a weight kept on chip is read once for all of them
    (solver.cost.tilings.held_tiles): a graph run once per batch item (Phase.steps, DFModel's
    DLRM), its share of the items on each data-parallel replica, when the graph is forward
    only; else 1 (decode steps depend on each other; a training step's 1F1B order
    interleaves micro-batches; a backward pass would hold every item's saved activations)."""
    if not dataflow or workload.kind != "graph":
        return 1
    if any(k.pass_ != Pass.FWD for k in phase.graph.kernels):
        return 1
    return -(-phase.steps // choice.data_ranks())


def param_cap(problem: MappingProblem) -> float:
    """The memory row's limit on stored parameters per graph instance (inf: no row)."""
    per_param, budget = problem.resident_bytes_per_param, problem.resident_budget_bytes
    return budget / per_param if per_param > 0 and math.isfinite(budget) else math.inf


def micro_batches_of(workload: Workload, choice: Choice) -> int:
    """Graph instances per step that accumulate weight gradients (assemble.training_times'
    count): global batch / (micro-batch x DP x EP) in training, else 1."""
    if workload.kind != "training":
        return 1
    micro = max(workload.micro_batch, 1)
    return max(1, math.ceil(workload.global_batch / (micro * choice.data_ranks())))


def phase_problem(
    graph: KernelGraph,
    system: System,
    choice: Choice,
    execution: ExecutionOptions,
    micro_batches: int = 1,
    weights: WeightRule | None = None,
    tile_menu_size: int = TILE_MENU_SIZE,
    grid: tuple[int, int] = (0, 0),
    expert_span: Span | None = None,
    held: int = 1,
) -> MappingProblem:
    """`grid`: the workload's HPL process grid (Workload.process_grid; (0, 0) = none);
    `expert_span`: the chips an MoE layer's all-to-all runs over (solver.search.expert_group;
    None = the choice's EP span); `held`: `held_instances`."""
    spans = {name.lower(): span for name, span in choice.spans}
    if expert_span is not None:
        spans["ep"] = expert_span
    # every chip: DFModel's non-LLM graphs run their kernels' collectives over all of them
    spans["all"] = tuple(level for _, span in choice.spans for level in span)
    # HPL's process rows and columns (solver.search.process_grid)
    if grid != (0, 0):
        spans.update(grid_spans(choice.levels, *grid))
    elif execution.dfmodel.branch == "hpl":
        x, y = dfmodel_grid(choice.levels)
        spans.update(grid_spans(choice.levels, x, y, row_major=False))
        graph = dfmodel_hpl_graph(graph, x, y)
    chip = efficiency.for_precision(system.chip, execution.math_precision)
    tp, tp_span = choice.degree("TP"), choice.span("TP")
    args = (graph, chip, system.dram.bandwidth_Bps, tp, tp_span, spans)
    args += (execution.math_precision, execution.dataflow, execution.overlap)
    args += (execution.num_config, tile_menu_size, execution.serialize_network, micro_batches)
    args += (weights, execution.network_hidden_share, held)
    # every argument by value but the graph, by identity: a graph's problem also reads
    # fields equality leaves out (the canonical order reads `order_sharding` and the
    # repr); the graph is frozen and held in the entry, so its id names it while kept
    key = (id(graph), memo.value_key(*args[1:]))
    hit = memo.PROBLEMS.find(key)
    if hit is not None and hit[0] is graph:
        return hit[1]
    problem = build_problem(*args)
    memo.PROBLEMS.put(key, (graph, problem))
    return problem
