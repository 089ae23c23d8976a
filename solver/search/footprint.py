"""A plan's DRAM footprint per chip: weights, gradients and optimizer state (the parameters
it stores, at solver.search.storage_rule's bytes each), activations and the KV cache (at the
shares its shardings leave on a chip, solver.search.activations).

Why one module: the pre-solve check (a candidate whose floor does not fit is rejected), the
DRAM left to the weights (solver.search.dram_split), the final check of a plan and the
reported `memory_per_chip_bytes` are one count, so a plan the report calls fitting is the
plan the search checked (DESIGN.md, "time and memory agree").

Training activations, on the busiest pipeline stage (Korthikanti et al. 2022): every layer
of the stage keeps its activations (`kept`) for each micro-batch in flight, and the stage
that runs the LM head holds, on top of its layers' activations, the head's peak (`peak`:
the FP32 logits, their softmax and gradient under the Megatron-LM loss). The first stage of
1F1B holds min(PP, m) micro-batches (x 1 + (PP - 1) / (v PP) interleaved, v model chunks per
stage); the last stage one, or with v > 1 chunks (v - 1) PP + 1 chunks of L / v layers
(Megatron-LM's warm-up count for the last rank), each at most m v. Without pipelining one
stage holds one micro-batch and the head. The embedding's output is the first layer's input
(counted there) and its weight gradient is the gradients' term: it adds nothing.
Inference (and forward-only graphs): the largest peak of a phase (they run one after the
other); the KV cache of the stage's ceil(L / PP) of the L layers at the share its readers
and writers leave on a chip (a head split within a KV group reads every KV head whole).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from generator.graph import Pass, Phase, Workload
from solver.cost import memo
from solver.cost.problem import MappingProblem
from solver.plan import MemoryUse
from solver.search.activations import (
    Layout,
    PhaseActivations,
    Shardings,
    phase_activations,
    shardings_of,
)
from solver.search.parallel import Choice
from solver.search.stages import (
    boundary_bytes,
    head_phases,
    instances_per_stage,
    layer_phases,
    micro_batches,
    model_layers,
    stage_layers,
    weight_group,
)
from solver.search.storage_rule import param_bytes, rank_params

# phase name -> kernel name -> sharding: a plan's shardings (None: the floor of every plan)
PlanShardings = Mapping[str, Shardings]
# phase name -> (its problem, the option index each kernel chose)
Plans = Mapping[str, tuple[MappingProblem, Sequence[int]]]
# The graphs' plans fit together only with their activations at the floor, which their
# shardings exceed: the inner problems' memory rows count weights alone, so a plan of other
# shardings might fit. The candidate keeps its bound and no plan (SolveStats.stop_reason).
LAYOUT_STOP = "activation_layout"
LAYOUT_TEXT = (
    "no plan whose activations fit: the plans found keep activations above their floor "
    "(tensors whole that could be split)"
)


def plan_shardings(plans: Plans) -> dict[str, dict[str, str]]:
    """Every phase's kernel shardings, from its (problem, option per kernel)."""
    return {name: shardings_of(problem, choice) for name, (problem, choice) in plans.items()}


def stored_params(
    workload: Workload, pp: int, per_instance: dict[str, float]
) -> dict[tuple[str, str], float]:
    """Parameters stored per chip per weight group, from each phase's parameters per graph
    instance (`per_instance`, by phase name)."""
    groups: dict[tuple[str, str], float] = {}
    for p in workload.phases:
        n = per_instance.get(p.name, 0.0) * instances_per_stage(p, pp, model_layers(workload))
        key = weight_group(p, pp)
        groups[key] = max(groups.get(key, 0.0), n)
    return groups


def unmapped_params(workload: Workload) -> float:
    """Model parameters no forward kernel reads as a WEIGHT operand (e.g. a tied or
    gathered embedding table counted in num_params): assumed split over TP x PP."""
    full = {
        p.name: sum(k.weight_params for k in p.graph.kernels if k.pass_ == Pass.FWD)
        for p in workload.phases
    }
    mapped = sum(stored_params(workload, 1, full).values())
    return max(0.0, rank_params(workload) - mapped)


def memory_use(
    workload: Workload,
    choice: Choice,
    capacity: float,
    stored: float | None = None,
    shardings: PlanShardings | None = None,
) -> MemoryUse:
    """Per-chip DRAM footprint: weights, gradients, optimizer state, activations, KV cache.

    `stored`: parameters stored per chip as the mapping's shardings leave them
    (solver.cost.weights.WeightRule; `stored_params` + `unmapped_params` / (TP x PP)),
    each taking solver.search.storage_rule.param_bytes. None: every parameter split over
    TP x PP, the least any mapping can store (a lower bound, for suggestions).
    `shardings`: the plan's, by phase; None: activations and KV cache at their floor."""
    tp, pp, dp = choice.degree("TP"), choice.degree("PP"), choice.degree("DP")
    if stored is None:
        stored = rank_params(workload) / (tp * pp)
    # the one rule the DRAM split prices storage by (WeightRule.bytes_per_param = its total)
    per = param_bytes(workload, choice)
    weights = stored * per.weights
    if workload.resident_bytes > 0:
        # in-place data (HPL's matrix) counted once, split over every chip, plus the
        # workspace: not each kernel's input and output, which alias the same storage
        chips = tp * pp * dp
        act = workload.resident_bytes / chips + workload.workspace_bytes
        return MemoryUse(weights=weights, activations=act, capacity=capacity)
    act, kv = activation_bytes(workload, choice, shardings)
    if workload.kind != "training" or workload.forward_only:  # no gradients, no optimizer
        return MemoryUse(weights=weights, kv_cache=kv, activations=act, capacity=capacity)
    return MemoryUse(
        weights=weights,
        gradients=stored * per.gradients,
        optimizer=stored * per.optimizer,
        activations=act,
        kv_cache=kv,
        capacity=capacity,
    )


def activation_bytes(
    workload: Workload,
    choice: Choice,
    shardings: PlanShardings | None = None,
    phases: Mapping[str, PhaseActivations] | None = None,
) -> tuple[float, float]:
    """(activations, KV cache) per chip (module docstring); `phases`: each phase's
    activations when already known (else computed at `shardings`)."""
    tp = choice.degree("TP")
    if phases is None:
        phases = {
            p.name: planned_activations(
                workload, p, tp, None if shardings is None else shardings.get(p.name)
            )
            for p in workload.phases
        }
    kv = _kv_cache(workload, choice, phases)
    if workload.kind != "training" or workload.forward_only:
        return max((a.peak for a in phases.values()), default=0.0), kv
    return _training(workload, choice, phases), kv


# a plan's activations by (phase identity, TP, the plan's shardings, and what else
# activations.kept_bytes reads: the key of activations.phase_activations' floors): the DRAM
# split, the plan and a sweep's later points (on other chips, sharing the phase) ask for
# the same plan's again; phases are frozen and held, so their ids cannot be reused while kept
PLANNED = memo.Memo(2048)


def planned_activations(
    workload: Workload, phase: Phase, tp: int, shardings: Shardings | None
) -> PhaseActivations:
    """activations.phase_activations of the phase at `shardings` (None: the floor)."""
    if shardings is None:
        return phase_activations(workload, phase, Layout(tp))
    key = (id(phase), tp, workload.recompute, workload.backward_reads_wired)
    key += (boundary_bytes(workload, phase), tuple(sorted(shardings.items())))
    hit = PLANNED.find(key)
    if hit is not None and hit[0] is phase:
        return hit[1]
    value = phase_activations(workload, phase, Layout(tp, shardings))
    PLANNED.put(key, (phase, value))
    return value


def _training(workload: Workload, choice: Choice, phases: Mapping[str, PhaseActivations]) -> float:
    """The busiest stage's activations (module docstring): the first stage's layers for its
    micro-batches in flight, or the last stage's and the LM head's peak on top."""
    pp, v = choice.degree("PP"), max(workload.virtual_pipeline, 1)
    m = micro_batches(workload, choice.data_ranks())
    per_mb = max(workload.instances_per_micro_batch, 1)
    stack = per_mb * sum(
        stage_layers(workload, p, pp) * phases[p.name].kept for p in layer_phases(workload)
    )
    head = per_mb * max(
        (phases[p.name].peak for p in head_phases(workload) if p.role != "embed"), default=0.0
    )
    first = min(pp, m) * interleave_memory_factor(pp, v) * stack
    if pp <= 1:
        return first + head
    last = (min((v - 1) * pp + 1, m * v) / v if v > 1 else 1.0) * stack
    return max(first, last + head)


def _kv_cache(workload: Workload, choice: Choice, phases: Mapping[str, PhaseActivations]) -> float:
    """The KV cache of the stage's layers at the share its kernels leave on a chip."""
    if workload.kv_cache_bytes <= 0:
        return 0.0
    tp, pp = choice.degree("TP"), choice.degree("PP")
    share = max((a.kv_share for a in phases.values()), default=0.0) or 1 / tp
    layers = workload.model.num_layers if workload.model and workload.model.num_layers else pp
    return workload.kv_cache_bytes * share * math.ceil(layers / pp) / layers


def interleave_memory_factor(pp: int, interleave: int) -> float:
    """Activations the first stage holds with v model chunks per stage, relative to 1F1B:
    1 + (p - 1) / (v p) (Korthikanti et al. 2022, sec. 4.2.3; Calculon's Megatron model
    uses the same factor): the warm-up runs extra forward chunks before the first backward."""
    if pp <= 1 or interleave <= 1:
        return 1.0
    return 1 + (pp - 1) / (interleave * pp)


@dataclass
class LayoutBytes:
    """Bytes per chip the activations and KV cache of a combination of the graphs' plans
    take above their floor (the DRAM split's slack already leaves the floor out): what the
    split adds to their weights' storage before it calls a combination fitting."""

    workload: Workload
    choice: Choice
    floor: float = field(init=False)
    _memo: dict[tuple, PhaseActivations] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.floor = sum(activation_bytes(self.workload, self.choice))

    def __call__(self, plans: Plans) -> float:
        tp = self.choice.degree("TP")
        phases: dict[str, PhaseActivations] = {}
        for p in self.workload.phases:
            if p.name not in plans:
                phases[p.name] = phase_activations(self.workload, p, Layout(tp))
                continue
            problem, choice = plans[p.name]
            key = (p.name, id(problem), tuple(choice))
            if key not in self._memo:
                shardings = shardings_of(problem, choice)
                self._memo[key] = planned_activations(self.workload, p, tp, shardings)
            phases[p.name] = self._memo[key]
        total = sum(activation_bytes(self.workload, self.choice, phases=phases))
        return max(total - self.floor, 0.0)
