"""The training knobs of the outer search (issue #19): micro-batch size, recompute mode, ZeRO
stage and interleaving depth, searched beside the TP/PP/DP choices when the setup leaves
them unset (setup.proto LlmTraining; generator.llm_training.searched_knobs).

Why they are searched and not defaulted: recompute and ZeRO trade time for DRAM, the
micro-batch trades kernel efficiency and pipeline bubble for activation memory, and
interleaving trades bubble for point-to-point traffic and activation memory. Which trade
wins depends on the machine, and the DRAM capacity decides which candidates exist at all.

Each candidate pins every knob and one parallel choice, so every collective, shard and
pipeline factor is a constant and the inner MILP stays linear (DESIGN.md 1). Candidates
are ordered by the roofline bound of their step and pruned like the TP/PP/DP choices
(planner); a candidate whose least DRAM footprint (`footprint.memory_use` with every
parameter split over TP x PP, the least any mapping stores) exceeds the capacity is
rejected before any MILP is built.

The grid, per parallel choice (the same valid values as Calculon's Megatron search,
calculon/megatron.py get_valid_pipeline_interleavings / get_valid_minibatch_sizes):
  micro-batch  divisors of global_batch / DP
  recompute    none, selective, full
  ZeRO stage   0-3 when DP x CP > 1 (else 0: there is nothing to shard)
  interleave   divisors of the layers per pipeline stage when PP > 1 (else 1)
A knob the setup gives is pinned to that one value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from generator.graph import Workload
from hardware.system import System
from solver.cost.weights import WeightRule
from solver.options import ExecutionOptions
from solver.search import footprint, infeasible, stages
from solver.search.bounds import roofline_phase_latency, step_times
from solver.search.degrees import fits_expert_layout, serves
from solver.search.parallel import Choice, divisors, spans_key

ZERO_STAGES = (0, 1, 2, 3)
# The weight rule of the relaxation that bounds a group of candidates: weights take no
# DRAM (the gradient sync of replicas is the step's, as the update is). Every real rule only adds
# cost and constraints to the same menus, so each graph's latency under it is a lower
# bound for every ZeRO stage and interleaving depth (settle.Settler.graph_bound).
FREE_WEIGHTS = WeightRule(0.0, 0.0)


@dataclass(frozen=True)
class Candidate:
    """One point of the outer search: a workload with every training knob pinned (its
    graphs built for its micro-batch and recompute mode) and one parallel choice."""

    workload: Workload
    choice: Choice


def expand(workload: Workload, choices: list[Choice]) -> list[Candidate]:
    """Every candidate of the grid (module docstring), parallel choice outermost; a
    workload with nothing searched gives one candidate per choice."""
    if not workload.searched:
        return [
            Candidate(workload, c)
            for c in choices
            if fits_expert_layout(workload, c) and stages.splits_batch(workload, c.data_ranks())
        ]
    bases = workload.variants or (workload,)
    out = []
    # one pinned workload per (base, ZeRO, interleave), shared by every choice: equal
    # values either way, but built once, and per-graph sums cached by identity stay hits
    pinned: dict[tuple[int, int, int], Workload] = {}
    for choice in choices:
        for i, base in enumerate(bases):
            if not serves(base, choice) or not stages.splits_batch(base, choice.data_ranks()):
                continue
            for z in zero_stages(base, choice):
                for v in interleavings(base, choice):
                    if (i, z, v) not in pinned:
                        pinned[i, z, v] = replace(
                            base, zero_stage=z, virtual_pipeline=v, variants=()
                        )
                    out.append(Candidate(pinned[i, z, v], choice))
    return out


def group_key(cand: Candidate) -> tuple:
    """Candidates with one key share their graphs, TP degree, placement and micro-batch
    count: they differ only in ZeRO stage or interleaving depth."""
    choice = cand.choice
    per_rank = choice.data_ranks() * max(cand.workload.micro_batch, 1)
    return (
        id(cand.workload.phases),
        spans_key(choice.spans),
        -(-cand.workload.global_batch // per_rank),
    )


def group_sizes(candidates: list[Candidate]) -> dict[tuple, int]:
    sizes: dict[tuple, int] = {}
    for cand in candidates:
        key = group_key(cand)
        sizes[key] = sizes.get(key, 0) + 1
    return sizes


def batch_split_problem(workload: Workload, choices: list[Choice]) -> str:
    """Why no candidate is left when every layout fails `stages.splits_batch` alone ("" when
    some layout passes it, or none was dropped for it)."""
    kept = [c for c in choices if fits_expert_layout(workload, c)]
    if not kept or any(stages.splits_batch(workload, c.data_ranks()) for c in kept):
        return ""
    ranks = ", ".join(str(r) for r in sorted({c.data_ranks() for c in kept}))
    micro = (
        "the micro-batch sizes searched"
        if "micro_batch" in workload.searched
        else f"micro-batches of {max(workload.micro_batch, 1)}"
    )
    return (
        f"global_batch {workload.global_batch} does not split into whole {micro} over the "
        f"data ranks (DP x EP = {ranks} on the layouts this system allows): give a "
        "global_batch divisible by micro_batch x DP x EP (Megatron-LM asserts it)"
    )


def zero_stages(workload: Workload, choice: Choice) -> tuple[int, ...]:
    """The ZeRO stages a searched zero_stage tries: every stage over weight replicas, stage
    0 alone without (nothing to shard). dp_overlap "grad_reduce" overlaps a ZeRO parameter
    all-gather, which stage 0 has not (a setup pinning both is bad input), so stage 0 is
    left out there, and stage 1 stands for "nothing to shard": the stage plan.txt then
    pins is one the setup accepts."""
    if "zero_stage" not in workload.searched:
        return (workload.zero_stage,)
    stages = ZERO_STAGES if choice.weight_replicas() > 1 else (0,)
    if workload.dp_overlap == "grad_reduce":
        stages = tuple(s for s in stages if s > 0) or (1,)
    return stages


def interleavings(workload: Workload, choice: Choice) -> tuple[int, ...]:
    """The model chunks per pipeline stage a candidate tries: the divisors of a stage's
    layers (searched), or the one given where it divides them (a chunk is whole layers, as
    Megatron-LM requires; 16 chunks of 8 layers credited half-layer chunks' bubble)."""
    pp = choice.degree("PP")
    layers = stages.model_layers(workload)
    per = math.ceil(layers / pp) if pp > 1 else 0
    if "virtual_pipeline" not in workload.searched:
        vp = workload.virtual_pipeline
        return (vp,) if vp <= 1 or pp <= 1 or per % vp == 0 else ()
    if pp <= 1:
        return (1,)
    return tuple(divisors(per))


def ordered_bounds(
    candidates: list[Candidate], system: System, execution: ExecutionOptions
) -> list[tuple[float, int, Candidate]]:
    """(roofline bound, index, candidate), cheapest bound first (ties: grid order). The
    per-graph part of the bound depends only on the graphs and TP: computed once each."""
    cache: dict[tuple[int, int], dict[str, float]] = {}
    out = []
    for i, cand in enumerate(candidates):
        tp = cand.choice.degree("TP")
        key = (id(cand.workload.phases), tp)
        if key not in cache:
            cache[key] = roofline_phase_latency(cand.workload, system, tp, execution)
        hidden = execution.comm_hidden_share
        lb = step_times(cand.workload, cand.choice, cache[key], system, hidden=hidden).latency_s
        out.append((lb, i, cand))
    out.sort(key=lambda t: (t[0], t[1]))
    return out


def start_with(
    bounds: list[tuple[float, int, Candidate]], key: tuple[str, str] | None
) -> list[tuple[float, int, Candidate]]:
    """`bounds` with the first candidate that `key` names (its placement and knobs, as a
    ChoiceResult spells them) moved to the front, else as is. Why: the what-if re-solves
    start from the base plan's candidate, so the roofline pruning has a near-optimal
    incumbent from the first settle. Exact: a candidate is pruned only when its own lower
    bound reaches a plan actually found, whatever the order, so the best latency is the
    same (up to the pruning's 1e-9 relative tolerance; equal-latency ties may go to another
    plan, and the proven bound can come out tighter or looser)."""
    if key is None:
        return bounds
    for i, (_, _, cand) in enumerate(bounds):
        if (cand.choice.describe(), describe(cand.workload)) == key:
            return [bounds[i], *bounds[:i], *bounds[i + 1 :]]
    return bounds


def memory_floor_reason(cand: Candidate, capacity_bytes: float) -> infeasible.Reason | None:
    """Why the candidate cannot fit however its kernels are sharded (its footprint with
    every parameter split over TP x PP exceeds the DRAM), or None."""
    memory = footprint.memory_use(cand.workload, cand.choice, capacity_bytes)
    if memory.total > capacity_bytes * (1 + 1e-9):
        return infeasible.dram_reason(memory)
    return None


def knob_values(workload: Workload, tp: int = 1) -> dict[str, object]:
    """The training knobs of a (pinned) workload and which were searched, for reports;
    empty for other workloads. The expert layout as the setup gives it (Megatron's EP and
    ETP under TP degree `tp`: solver.search.expert_group)."""
    if workload.kind != "training" or workload.forward_only:
        return {}
    knobs: dict[str, object] = {
        "micro_batch": workload.micro_batch,
        "recompute": workload.recompute,
        "zero_stage": workload.zero_stage,
        "virtual_pipeline": workload.virtual_pipeline,
    }
    if "expert_parallel" in workload.searched or "expert_tensor_parallel" in workload.searched:
        ep, etp = expert_layout_degrees(workload, tp)
        knobs["expert_parallel"] = ep
        if "expert_tensor_parallel" in workload.searched:
            knobs["expert_tensor_parallel"] = etp
    return knobs | {"searched": list(workload.searched)}


def expert_layout_degrees(workload: Workload, tp: int) -> tuple[int, int]:
    """(EP, ETP) as the setup states them, under TP degree `tp` (expert_group's rule)."""
    if workload.expert_tensor_parallel == 1:
        return workload.expert_parallel * tp, 1
    return workload.expert_parallel, tp


def describe(workload: Workload, tp: int = 1) -> str:
    """The searched knobs of a candidate in words ("" when none is searched); a searched
    expert layout as the setup writes it (Megatron's EP, the chips of one EP group, and
    expert_tensor_parallel), on a TP degree of `tp`."""
    folded = workload.expert_tensor_parallel == 1
    ep = workload.expert_parallel * (tp if folded else 1)
    text = {
        "micro_batch": f"micro-batch {workload.micro_batch}",
        "recompute": f"recompute {workload.recompute}",
        "zero_stage": f"ZeRO-{workload.zero_stage}",
        "virtual_pipeline": f"interleave {workload.virtual_pipeline}",
        "expert_parallel": f"expert_parallel {ep}",
        "expert_tensor_parallel": f"expert_tensor_parallel {1 if folded else tp}",
    }
    return ", ".join(text[k] for k in workload.searched if k in text)


def chosen_workload(
    workload: Workload, knobs: dict[str, object], parallelism: dict[str, int] | None = None
) -> Workload:
    """The pinned workload a plan was made for, from the setup's workload, the plan's
    `training` knobs and (inference replicas) its `parallelism` (the independent re-check
    and the report need its graphs)."""
    if "replicas" in workload.searched:
        dp = (parallelism or {}).get("dp", 1)
        return next(b for b in workload.variants if b.replicas == dp)
    if not workload.searched or not knobs:
        return workload
    bases = workload.variants or (workload,)
    tp = (parallelism or {}).get("tp", 1)
    ep = knobs.get("expert_parallel", 0)
    etp = knobs.get("expert_tensor_parallel", 0)
    base = next(
        b
        for b in bases
        if b.micro_batch == knobs["micro_batch"]
        and b.recompute == knobs["recompute"]
        and (not ep or expert_layout_degrees(b, tp)[0] == ep)
        and (not etp or expert_layout_degrees(b, tp)[1] == etp)
    )
    z, v = knobs["zero_stage"], knobs["virtual_pipeline"]
    assert isinstance(z, int) and isinstance(v, int)
    return replace(base, zero_stage=z, virtual_pipeline=v, variants=())


def least_memory(workload: Workload) -> Workload:
    """The searched knobs at their least memory (smallest micro-batch, full recompute,
    ZeRO-3, no interleaving, the largest EP degree): what a suggestion of more chips or
    DRAM must assume."""
    if not workload.searched or "replicas" in workload.searched:
        return workload
    bases, searched = workload.variants or (workload,), workload.searched
    knobs = {
        "micro_batch": min(b.micro_batch for b in bases)
        if "micro_batch" in searched
        else workload.micro_batch,
        "recompute": "full" if "recompute" in searched else workload.recompute,
        "zero_stage": 3 if "zero_stage" in searched else workload.zero_stage,
        "virtual_pipeline": 1 if "virtual_pipeline" in searched else workload.virtual_pipeline,
        "expert_parallel": max(b.expert_parallel for b in bases),
    }
    return chosen_workload(workload, knobs)
