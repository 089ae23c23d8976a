"""Why a valid design cannot run its workload, and the smallest change that would let it.

A design fails on one of three resources: DRAM capacity per chip (weights, optimizer state,
activations, KV cache of the layout), SRAM per configuration (a kernel's smallest tile, or
kernels that num_config forces to share a configuration), or the chip count (more chips
than any layout of the workload can use). Each reason carries demand / capacity, so the
planner reports the layout that misses by the least; the fix is computed from the same
formulas the planner checks (footprint.memory_use, check.config_cost's SRAM sum), never
from a rule of thumb.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from generator.graph import Kernel, KernelGraph, KernelKind, Pass, Workload
from hardware.system import System
from schema.errors import InfeasibleError
from solver.check import kernel_sram_bytes
from solver.cost.attention_tiles import attention_tilings
from solver.cost.gemm_roles import compulsory_bytes
from solver.cost.problem import MappingProblem
from solver.fusion.first_plan import fewest_configs, least_sram_cut
from solver.fusion.segment_search import GraphSolution
from solver.fusion.solve import permuted, searched_order
from solver.options import BUDGET_OF_STOP, VALVE_STOP
from solver.plan import MemoryUse
from solver.search import footprint
from solver.search.degrees import tp_fits
from solver.search.parallel import Choice
from solver.search.stages import model_layers, splits_batch

TAGS_HINT = "set the topology's parallelism tags to that layout, or leave them empty to search"


@dataclass(frozen=True)
class Limits:
    """The largest degrees the planner searches for a workload (limits_of)."""

    max_tp: int
    max_pp: int
    max_dp: int
    allow_dp: bool


def limits_of(workload: Workload, system: System) -> Limits:
    """The degrees searched: TP up to 64 and one pipeline stage per layer at most for LLMs
    (DP in training; in inference the replica counts the workload's variants serve);
    distributed kernels (HPL, FFT, DLRM, GEMM, explicit graphs) spread over one group of
    all chips, or for a graph run once per batch item, over replicas of a group."""
    layers = model_layers(workload)
    if workload.kind == "training":
        max_dp = max(1, workload.global_batch // max(workload.micro_batch, 1))
        return Limits(max_tp=64, max_pp=layers, max_dp=max_dp, allow_dp=True)
    if workload.kind == "inference":
        replicas = max((b.replicas for b in workload.variants or (workload,)), default=1)
        return Limits(max_tp=64, max_pp=layers, max_dp=replicas, allow_dp=replicas > 1)
    # a forward graph run once per batch item (DFModel's DLRM inference: Phase.steps)
    # spreads its items over data-parallel replicas too, as DFModel does; a graph with a
    # backward pass stays on one group (replicas would owe a gradient sync no step charges)
    forward = all(k.pass_ == Pass.FWD for p in workload.phases for k in p.graph.kernels)
    batch = max(p.steps for p in workload.phases) if workload.kind == "graph" and forward else 1
    return Limits(max_tp=system.num_chips, max_pp=1, max_dp=batch, allow_dp=batch > 1)


def any_tp(limits: Limits) -> Limits:
    """A distributed kernel can spread over any number of chips: for suggesting more."""
    return replace(limits, max_tp=2**20)


@dataclass(frozen=True)
class Reason:
    """One layout that does not fit: the resource, demand against capacity in words, and
    demand / capacity (inf when the excess cannot be put in one number)."""

    resource: str
    text: str
    ratio: float
    suggestion: str = ""
    memory_total: float = math.inf  # DRAM bytes per chip the layout needs
    activations: float = 0.0  # ... of which activations (DRAM reasons)


def dram_reason(memory: MemoryUse) -> Reason:
    text = (
        f"needs {_gb(memory.total)} GiB per chip (weights {_gb(memory.weights)}, "
        f"gradients+optimizer {_gb(memory.gradients + memory.optimizer)}, activations "
        f"{_gb(memory.activations)}, KV {_gb(memory.kv_cache)}), DRAM holds "
        f"{_gb(memory.capacity)} GiB"
    )
    ratio = memory.total / memory.capacity
    return Reason("DRAM capacity", text, ratio, "", memory.total, memory.activations)


UNEXPLAINED = "unexplained"  # a graph search proved infeasible that no resource explains
UNEXPLAINED_TEXT = (
    "the fusion search found no mapping of a phase although neither SRAM (every kernel "
    "fits), DRAM capacity (none without the DRAM row either) nor the chip count rules "
    "one out: a search defect; please report the setup"
)
# the DRAM split chose plans that footprint.memory_use finds over capacity (the split and the
# check price storage by solver.search.storage_rule; never seen since they share it)
SPLIT_OVER = "split_over_capacity"
SPLIT_OVER_TEXT = (
    "the DRAM split among the graphs chose plans whose memory the plan's check finds over "
    "the chip's capacity: a search defect; please report the setup"
)
# stop reasons that are search defects, and what a search with no plan says of them
DEFECTS = ((UNEXPLAINED, UNEXPLAINED_TEXT), (SPLIT_OVER, SPLIT_OVER_TEXT))
# a search that ended with plans over the DRAM (footprint.LAYOUT_STOP), not the time limit
LAYOUT_NO_PLAN = (
    "DRAM capacity binds: the plans found keep activations above their floor (tensors "
    "whole that could be split) and only that floor fits; recomputing activations, a "
    "smaller micro-batch or batch, or more chips would make it fit"
)
NUMERICS_TEXT = (
    "HiGHS could not solve the mapping problem (numerical trouble): a setup value many "
    "orders of magnitude from the others (a bandwidth, size or rate) is the usual cause; "
    "check the units"
)


def no_plan_text(
    statuses: list[str],
    stops: list[str],
    stopped: bool,
    no_plan: int,
    choices: int,
    time_limit_s: float,
) -> str | None:
    """Why a search found no plan, when it is not the infeasibility of every choice: a
    solver error; else, when choices stopped before a first plan (`stopped`: `no_plan` of
    the `choices`, or none was found infeasible), a search defect (`DEFECTS`) short of the
    time limit, a work budget (BUDGET_OF_STOP), or the time limit. None: infeasible."""
    if "error" in statuses:
        return NUMERICS_TEXT
    if not stopped:
        return None
    for stop, text in DEFECTS:
        if stop in stops and VALVE_STOP not in stops:
            return text
    if footprint.LAYOUT_STOP in stops and VALVE_STOP not in stops:
        return f"{no_plan} of {choices} parallel choices: {LAYOUT_NO_PLAN}"
    budget = next((BUDGET_OF_STOP[s] for s in stops if s in BUDGET_OF_STOP), "")
    if budget and VALVE_STOP not in stops:
        why, field = f"stopped on the work budget solver.{budget}", f"solver.{budget}"
    else:
        why = f"stopped at the time limit ({time_limit_s:g} s)"
        field = "solver.time_limit_s (or --time-limit)"
    return f"{no_plan} of {choices} parallel choices {why} before a first plan; raise {field}"


def phase_reason(
    problem: MappingProblem,
    phase: str,
    floor: MemoryUse,
    sol: GraphSolution,
    unbudgeted: Callable[[], tuple[MappingProblem, GraphSolution]],
) -> Reason | None:
    """Why a phase's graph search returned infeasible: the SRAM (sram_reason), else the
    DRAM row, but only once the same problem without that row (`unbudgeted`, solved on
    this path only) has a mapping: a proof of infeasibility that the row does not cause
    is no verdict on DRAM. None: the search stopped first (a finite bound), or nothing
    explains it (the caller reports no plan, never an infeasible problem)."""
    failed = sram_reason(problem, phase)
    if failed is not None or sol.bound_s < math.inf:
        return failed
    if not math.isfinite(problem.resident_budget_bytes):
        return None
    if not math.isfinite(unbudgeted()[1].objective_s):
        return None
    return weights_reason(problem, phase, floor)


def weights_reason(problem: MappingProblem, phase: str, floor: MemoryUse) -> Reason | None:
    """No sharding of the phase stores its weights in the DRAM left to them (the MILP row
    memory_capacity[graph]) although each weight alone could be split that far: one
    kernel's weights share its sharding, or readers of a weight need different layouts.
    None when the phase has no DRAM row (the search stopped for another reason)."""
    if not math.isfinite(problem.resident_budget_bytes) or problem.resident_bytes_per_param <= 0:
        return None
    text = (
        f"phase {phase}: no sharding stores its weights in the "
        f"{_gb(problem.resident_budget_bytes)} GiB per layer instance that DRAM leaves them "
        f"(with every weight at its least, the layout would need {_gb(floor.total)} GiB of "
        f"{_gb(floor.capacity)} GiB)"
    )
    return Reason("DRAM capacity", text, 1.0 + 1e-9, "", floor.total)


def sram_reason(problem: MappingProblem, phase: str) -> Reason | None:
    """A kernel whose smallest tile exceeds the SRAM, or kernels forced to share a
    configuration (num_config) whose smallest joint footprint exceeds it; None when a
    mapping provably fits (the search then stopped at its limit before finding one)."""
    sram = problem.sram_bytes
    alone = [min(o.buffer_bytes for o in m.options) for m in problem.kernels]
    worst = max(range(len(alone)), key=lambda k: alone[k])
    if alone[worst] > sram * (1 + 1e-9):
        need = alone[worst]
        text = (
            f"phase {phase}: kernel {problem.kernels[worst].name} needs at least "
            f"{_bytes(need)} of on-chip buffer even alone (its smallest tile), SRAM holds "
            f"{_bytes(sram)}"
        )
        fix = f"SRAM must be ≥ {_bytes(need, up=True)} per chip (system.accelerator.sram_cap)"
        return Reason("SRAM", text, need / sram, fix)
    n, k_max = len(problem.kernels), max(1, problem.max_configs)
    if problem.any_config_pinned:  # pinned configurations: no formula
        text = f"phase {phase}: no mapping with the pinned configurations fits the SRAM"
        return Reason("SRAM", text, math.inf, "unpin kernels or use a chip with more SRAM")
    if not problem.dataflow:
        return None  # every kernel fits alone, and alone is what kernel-by-kernel does
    order = searched_order(problem)
    ordered = problem if order is None else permuted(problem, order)
    fewest = fewest_configs(ordered)
    if fewest <= k_max:
        return None
    where = "" if order is None or order == sorted(order) else " (in the order searched)"
    if n > PEAK_KERNELS:  # the least SRAM that would do takes one cut per bisection step
        text = (
            f"phase {phase}: with num_config {k_max} the {n} kernels must share "
            f"configurations{where}, and no sharing fits {_bytes(sram)} of SRAM"
        )
        fix = f"num_config must be ≥ {int(fewest)} (kernels in order, each configuration fitting)"
        return Reason("SRAM", text, fewest / k_max, fix)
    need = _least_peak(ordered, k_max)
    text = (
        f"phase {phase}: with num_config {k_max} the {n} kernels must share "
        f"configurations{where}, and the smallest sharing needs {_bytes(need)} of SRAM in "
        f"one configuration, SRAM holds {_bytes(sram)}"
    )
    fix = f"num_config must be ≥ {int(fewest)} (kernels in order, each configuration fitting)"
    if not _clamped(problem):
        fix += f", or SRAM ≥ {_bytes(need, up=True)} per chip"
    return Reason("SRAM", text, need / sram, fix)


def untileable(problem: MappingProblem, graph: KernelGraph, phase: str) -> Reason | None:
    """A kernel with no tiling at all that fits the SRAM (an empty menu). A GEMM's smallest
    tile is output-stationary 1x1: Tm·Tn + Tm + Tn = 3 elements (DESIGN.md)."""
    empty = [m.name for m in problem.kernels if not m.options]
    if not empty:
        return None
    kernel = graph.kernel(empty[0])
    sram = problem.sram_bytes
    if kernel.pinned_tile:
        text = (
            f"phase {phase}: kernel {kernel.name} pins tile {kernel.pinned_tile!r}, which is not "
            f"a tile of its per-chip shape under any of its shardings or does not fit "
            f"{_bytes(sram)} of SRAM"
        )
        fix = f"clear or change the tile of kernel {kernel.name} (its execution.pin or kernel tile)"
        return Reason("tile pin", text, math.inf, fix)
    need = 3 * max(o.bytes_per_element for o in kernel.operands)
    smallest = "1x1 output, one element of each input"
    attention = least_attention_tile(kernel)
    if attention is not None:
        smallest, need = attention
    text = (
        f"phase {phase}: kernel {kernel.name} has no tiling that fits {_bytes(sram)} of "
        f"SRAM: its smallest tile ({smallest}) needs {_bytes(need)}"
    )
    fix = f"SRAM must be ≥ {_bytes(need, up=True)} per chip (system.accelerator.sram_cap)"
    return Reason("SRAM", text, need / sram if sram > 0 else math.inf, fix)


def least_attention_tile(kernel: Kernel) -> tuple[str, float] | None:
    """(description, bytes) of a fused attention kernel's smallest tile (its per-row bytes
    do not change with sharding); None for any other kernel."""
    if kernel.kind != KernelKind.ATTENTION:
        return None
    sizes = dict(kernel.dims)
    tiles = attention_tilings(kernel, sizes, compulsory_bytes(kernel, sizes), math.inf)
    if not tiles:
        return None
    name, buffer, _, _ = tiles[0]
    return f"{name}: query rows with their accumulators, a K/V chunk, the scores", buffer


def no_layout(workload: Workload, system: System, limits: Limits) -> InfeasibleError:
    """No (TP, PP, DP) layout uses exactly the machine's chips."""
    n = system.num_chips
    most = limits.max_tp * limits.max_pp * (limits.max_dp if limits.allow_dp else 1)
    shape = ", ".join(f"{lv.name}:{lv.degree or '?'}" for lv in system.network)
    if n > most:
        dp = f" × DP {limits.max_dp}" if limits.allow_dp else ""
        why = "one pipeline stage per layer" + ("" if limits.allow_dp else ", no DP")
        return InfeasibleError(
            "chip count",
            f"{workload.kind} spreads over at most TP {limits.max_tp} × PP {limits.max_pp}"
            f"{dp} ({why}) = {most} chips, the system has {n}",
            f"num_chip must be ≤ {most}",
        )
    return InfeasibleError(
        "chip count",
        f"no TP×PP×DP layout of {n} chips can be placed on the topology levels ({shape}): "
        "a group must take whole levels or divide the next one",
        "make the level degrees multiply to num_chip with groups that divide them "
        "(or leave degrees at 0 to search them)",
    )


def raise_infeasible(
    reasons: list[tuple[Reason, str]], workload: Workload, system: System, limits: Limits
) -> None:
    """Raise for the layout that misses by the least; DRAM gets the smallest layout and the
    smallest DRAM per chip that fit."""
    best, where = min(reasons, key=lambda r: r[0].ratio)
    if best.resource != "DRAM capacity":
        raise InfeasibleError(best.resource, best.text, best.suggestion)
    least = min(r.memory_total for r, _ in reasons if r.resource == "DRAM capacity")
    fixes = []
    layout = smallest_layout(workload, system.dram.capacity_bytes, limits)
    if layout is not None:
        tp, pp, dp = layout
        cp, ep = workload.context_parallel, workload.expert_parallel  # the workload's own
        chips = tp * pp * dp * cp * ep
        shown = f"TP {tp} × PP {pp}" + (f" × DP {dp}" if dp > 1 else "")
        shown += "".join(f" × {n} {d}" for n, d in (("CP", cp), ("EP", ep)) if d > 1)
        more = f"num_chip ≥ {chips}" if chips > system.num_chips else TAGS_HINT
        fixes.append(f"needs ≥ {tp * pp}-way TP×PP ({shown}; {more})")
    fixes.append(f"≥ {_gb(least, up=True)} GiB of DRAM per chip")
    passes = prefill_pass_fix(workload, best, system.dram.capacity_bytes)
    if passes:
        fixes.append(passes)
    raise InfeasibleError(
        "DRAM capacity", f"best layout ({where}) {best.text}", ", or ".join(fixes)
    )


def prefill_pass_fix(workload: Workload, best: Reason, capacity: float) -> str:
    """For a static-batch prefill whose activations (one pass of the whole batch) are what
    does not fit on the best layout: the largest prefill_tokens_per_pass that fits it.
    Activations scale with the sequences of a pass, everything else stays, so p passes
    need total - activations + activations / p <= capacity. "" when passes cannot help."""
    if workload.kind != "inference" or workload.phase not in ("prefill", "request"):
        return ""
    rest = best.memory_total - best.activations
    if best.activations <= 0 or rest >= capacity or workload.batch < 2:
        return ""
    passes = math.ceil(best.activations / (capacity - rest))
    seqs = workload.batch // max(workload.replicas, 1) // passes
    if seqs < 1:
        return ""
    tokens = seqs * max(workload.input_len, 1)
    return f"prefill in passes: llm_inference.prefill_tokens_per_pass ≤ {tokens}"


def smallest_layout(
    workload: Workload, capacity: float, limits: Limits
) -> tuple[int, int, int] | None:
    """The (tp, pp, dp) with the fewest chips whose memory_use fits `capacity`, among the
    degrees the planner searches (small integers and powers of two; TP degrees the model's
    attention can take, solver.search.degrees.tp_fits), beside the workload's own CP and
    EP degrees; None when none fits."""
    tps = [tp for tp in _degrees(limits.max_tp) if tp_fits(workload)(tp)]
    pps = _degrees(limits.max_pp)
    dps = _degrees(limits.max_dp) if limits.allow_dp else [1]
    for tp, pp, dp in sorted(
        itertools.product(tps, pps, dps), key=lambda d: (d[0] * d[1] * d[2], d[1], d[2])
    ):
        degrees = (("CP", workload.context_parallel), ("DP", dp), ("EP", workload.expert_parallel))
        choice = Choice((*degrees, ("PP", pp), ("TP", tp)), (), ())
        if not splits_batch(workload, choice.data_ranks()):
            continue  # a layout the batch split refuses (training_space.expand)
        if footprint.memory_use(workload, choice, capacity).total <= capacity * (1 + 1e-9):
            return tp, pp, dp
    return None


def _degrees(most: int) -> list[int]:
    small = range(1, min(most, 8) + 1)
    powers = (2**e for e in range(4, 31) if 2**e <= most)
    return sorted({*small, *powers, most} if most <= 4096 else {*small, *powers})


PEAK_KERNELS = 500  # beyond, the infeasibility says num_config only (no SRAM figure)


def _least_peak(problem: MappingProblem, k_max: int) -> float:
    """Least possible largest-configuration SRAM over cuts of the order into at most k_max
    configurations: a bisection on the cap of least_sram_cut (the fewest configurations
    only grows as the cap falls), then the largest configuration of the cut at the cap
    found, a real configuration's SRAM (solver.check.kernel_sram_bytes)."""
    whole = least_sram_cut(problem, math.inf)
    assert whole is not None
    lo, hi = 0.0, _peak(problem, *whole)
    for _ in range(60):
        if hi - lo <= 1e-9 * hi:
            break
        mid = (lo + hi) / 2
        cut = least_sram_cut(problem, mid)
        if cut is not None and len(cut[0]) <= k_max:
            hi = mid
        else:
            lo = mid
    cut = least_sram_cut(problem, hi)
    assert cut is not None
    return _peak(problem, *cut)


def _peak(
    problem: MappingProblem, configs: tuple[tuple[int, ...], ...], choice: tuple[int, ...]
) -> float:
    """The largest configuration's SRAM of a plan (solver.check's SRAM_k summed)."""
    return max(sum(kernel_sram_bytes(problem, k, choice[k], set(c)) for k in c) for c in configs)


def _clamped(problem: MappingProblem) -> bool:
    """A menu entry capped at the SRAM size (a streamed kernel's buffer is min(need, SRAM)):
    its true need is unknown here, so no SRAM size can be promised."""
    sram = problem.sram_bytes
    return any(
        o.buffer_bytes >= sram * (1 - 1e-9) or o.out_tile_bytes >= sram * (1 - 1e-9)
        for m in problem.kernels
        for o in m.options
    )


def _gb(x: float, up: bool = False) -> str:
    """Bytes in GiB, one decimal (as every report quotes memory); `up` rounds up."""
    gib = x / 2**30
    return f"{math.ceil(gib * 10) / 10:.1f}" if up else f"{gib:.1f}"


def _bytes(x: float, up: bool = False) -> str:
    """Bytes in B, KiB or MiB; a requirement (`up`) is rounded up, so it suffices."""
    for unit, size, digits in (("MiB", 2**20, 2), ("KiB", 2**10, 2), ("B", 1, 0)):
        if x >= size or unit == "B":
            value = x / size
            if up:
                value = math.ceil(value * 10**digits - 1e-9) / 10**digits
            return f"{value:.{digits}f} {unit}"
    raise AssertionError("unreachable")
