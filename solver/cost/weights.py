"""How a mapping stores weights and pays for replicating them (WeightRule)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from generator.graph import Kernel, OperandRole, Pass, Phase, Workload
from solver.cost.collectives import bytes_sent_per_chip, hierarchical_time
from solver.cost.memo import per_phases
from solver.cost.problem import REPLICATED, KernelMenu, MappingProblem, Span, WeightFact


@dataclass(frozen=True)
class WeightRule:
    """Weights as the mapping stores them (DESIGN.md, honesty rules).

    Storage: every kernel that reads a weight (forward, recompute, backward) needs its
    share of it on every chip: 1/TP of it (ceil of the split dim) when the kernel's
    sharding splits a dim of the weight, the whole weight otherwise. A weight is stored
    once, as large as its most demanding reader needs (the MILP row is a max over its
    readers): a forward pass split on heads whose backward pass is split on tokens stores
    the whole weight. Readers of one weight are the kernels whose names differ only by the
    `_recompute` / `_bwd` suffix of the generators (`weight_id`).
    `bytes_per_param`: resident DRAM bytes per stored parameter (weights, and in training
    gradients and optimizer state, each divided by DP at its ZeRO stage; the rule
    footprint.memory_use counts too: solver.search.storage_rule).
    Training: a weight stored whole on every chip of the TP group (any of its readers
    replicates it) has its gradient synchronised over the group once per step
    (`grad_bytes_per_param` bytes per parameter): all-gathered when a WGRAD kernel of the
    graph computes it (`reduced_gradients`: that kernel's own sharding pays the reduction
    of partial sums, a reduce-scatter or an all-reduce once per step,
    `per_step_gradient_reduction`; reduce-scatter + all-gather = all-reduce, Megatron's
    sequence-parallel LayerNorm weights), all-reduced otherwise. Like the optimizer update of
    every stored copy, the sync is the step's (assemble.training_times, from `StepWeights`),
    not a kernel's: whether a weight is replicated is the max over its readers, which no
    per-option cost carries. The search sees both through solver.search.dram_split."""

    bytes_per_param: float
    grad_bytes_per_param: float = 0.0  # 0: no gradient (inference)


@dataclass(frozen=True)
class StepWeights:
    """What a plan's stored weights cost the training step besides their bytes, in
    parameters (per graph instance, or per chip once assembled): those whose gradient is
    all-reduced / all-gathered over the TP group (replicated, WeightRule), and those a
    graph's own OPTIMIZER kernel updates (`<kernel>_optimizer`: the graph charges their
    update, the step does not)."""

    all_reduce: float = 0.0
    all_gather: float = 0.0
    self_updated: float = 0.0


WEIGHT_READER_SUFFIXES = ("_recompute", "_bwd")
# generators name a weight's gradient kernel after its forward kernel (generator/ops.py,
# dfmodel_gpt.py: `<name>_weight_update`, `<name>_bwd_weight_update`)
GRADIENT_SUFFIX = "_weight_update"


def weight_owner(name: str) -> str:
    """The forward kernel whose weights a reader (or gradient kernel) named `name` uses."""
    owner = name.removesuffix(GRADIENT_SUFFIX)
    for suffix in WEIGHT_READER_SUFFIXES:
        owner = owner.removesuffix(suffix)
    return owner


def weight_id(kernel: Kernel, operand: str) -> str:
    """The identity of a weight operand across the kernels that read it (WeightRule)."""
    return f"{weight_owner(kernel.name)}/{operand}"


def reduced_gradients(kernels: tuple[Kernel, ...] | list[Kernel]) -> frozenset[tuple[str, int]]:
    """(forward kernel, parameters) of every weight gradient a WGRAD kernel of the graph
    computes: its own menu pays the reduction of partial sums over the TP group."""
    return frozenset(
        (weight_owner(k.name), k.operand_elements(o))
        for k in kernels
        if k.pass_ == Pass.WGRAD
        for o in k.outputs
    )


def gathered_weights(kernel: Kernel, reduced: frozenset[tuple[str, int]]) -> frozenset[str]:
    """The kernel's WEIGHT operands whose gradient a WGRAD kernel computes (matched by owner
    and size; `reduced_gradients`): their replicas all-gather it (WeightRule)."""
    owner = weight_owner(kernel.name)
    return frozenset(
        o.name
        for o in kernel.operands
        if o.role == OperandRole.WEIGHT and (owner, kernel.operand_elements(o)) in reduced
    )


def step_sync_s(weights: StepWeights, grad_bytes_per_param: float, tp_span: Span) -> float:
    """Seconds of the once-per-step gradient sync of the replicated weights a chip stores
    (WeightRule): one all-gather and one all-reduce over the TP group, each of every
    gradient of its kind (bucketed, as Megatron-LM reduces a bucket of gradients)."""
    return hierarchical_time(
        "all_gather", weights.all_gather * grad_bytes_per_param, tp_span
    ) + hierarchical_time("all_reduce", weights.all_reduce * grad_bytes_per_param, tp_span)


def weight_storage(
    kernel: Kernel, sharding: str, tp: int
) -> tuple[tuple[tuple[str, float], ...], tuple[str, ...]]:
    """((weight, parameters needed per chip), ...) of the kernel's WEIGHT operands under
    `sharding`, and the weights it replicates over the TP group (WeightRule)."""
    sizes = kernel.dim_sizes
    split = sharding.split("+")[0]
    needs: list[tuple[str, float]] = []
    replicated: list[str] = []
    for op in kernel.operands:
        if op.role != OperandRole.WEIGHT:
            continue
        elems = float(kernel.operand_elements(op))
        if tp > 1 and split != REPLICATED and split in op.dims:
            needs.append(
                (weight_id(kernel, op.name), elems / sizes[split] * math.ceil(sizes[split] / tp))
            )
        else:
            needs.append((weight_id(kernel, op.name), elems))
            if tp > 1:
                replicated.append(weight_id(kernel, op.name))
    return tuple(needs), tuple(replicated)


OPTIMIZER_SUFFIX = "_optimizer"  # generator.proto_graph.PASS_SUFFIX


def weight_facts(kernels: list[Kernel]) -> tuple[WeightFact, ...]:
    """Every weight the graph's kernels read (WeightRule), with how its replicas sync
    (`reduced_gradients`) and whether an OPTIMIZER kernel of the graph updates it (named
    after its forward kernel: `<kernel>_optimizer`)."""
    reduced = reduced_gradients(kernels)
    updated = {
        weight_owner(k.name.removesuffix(OPTIMIZER_SUFFIX))
        for k in kernels
        if k.pass_ == Pass.OPTIMIZER
    }
    facts: dict[str, WeightFact] = {}
    for k in kernels:
        gathered = gathered_weights(k, reduced)
        for op in k.operands:
            if op.role == OperandRole.WEIGHT:
                w = weight_id(k, op.name)
                kind = "all_gather" if op.name in gathered else "all_reduce"
                elems = float(k.operand_elements(op))
                if w not in facts or facts[w].params < elems:
                    facts[w] = WeightFact(w, elems, kind, weight_owner(k.name) in updated)
    return tuple(facts[w] for w in sorted(facts))


def step_weights(problem: MappingProblem, choice: tuple[int, ...]) -> StepWeights:
    """`StepWeights` per graph instance of the chosen options: every weight one of its
    readers replicates, and the stored parameters of the weights the graph updates."""
    stored: dict[str, float] = {}
    replicated: set[str] = set()
    for menu, o in zip(problem.kernels, choice):
        if o < 0:
            continue
        for w, elems in menu.options[o].weights:
            stored[w] = max(stored.get(w, 0.0), elems)
        replicated.update(menu.options[o].replicated)
    sync = {"all_reduce": 0.0, "all_gather": 0.0}
    own = 0.0
    for f in problem.weight_facts:
        if f.weight in replicated:
            sync[f.sync] += f.params
        if f.self_updated:
            own += stored.get(f.weight, 0.0)
    return StepWeights(sync["all_reduce"], sync["all_gather"], own)


def floor_weights(problem: MappingProblem, stored: float) -> StepWeights:
    """A `StepWeights` per graph instance that charges the step no more than any plan
    storing at least `stored` parameters per instance does (the DRAM split's bound). Sync:
    the weights some reader always replicates, plus the storage above the least, spread
    over the weights that can hold it, those that sync the fewest parameters per parameter
    of storage first (a fractional knapsack). A weight w may store, above its least, up to
    its largest split need (`part_w`) for free, and its whole only as a replica, which
    syncs full_w for the full_w - part_w stored beyond that. When the weights that can
    hold it sync by one kind (all-reduce or all-gather), the knapsack over parameters is a
    floor of that kind's seconds; when they mix kinds, it is counted as all-gathers (an
    all-gather of B bytes never takes longer than an all-reduce of B; by parameters alone a
    smaller all-reduce could be preferred to a larger but cheaper all-gather). All-gathered
    as one collective when both kinds remain. Self-updated: as many of the graph's updated
    weights' parameters as the storage above the others' least allows."""
    least, must, needs = _least_needs(problem)
    facts = problem.weight_facts
    sync = {"all_reduce": 0.0, "all_gather": 0.0}
    room: list[tuple[float, float]] = []  # (synced per stored, storage)
    kinds: set[str] = set()
    for f in facts:
        if f.weight in must:
            sync[f.sync] += f.params
        elif least.get(f.weight, f.params) < f.params:
            part = max(n for n in needs[f.weight] if n < f.params)
            room.append((0.0, part - least[f.weight]))
            room.append((f.params / (f.params - part), f.params - part))
            kinds.add(f.sync)
    kind = kinds.pop() if len(kinds) == 1 else "all_gather"
    extra = max(stored - sum(least.values()), 0.0)
    for ratio, size in sorted(room):
        take = min(extra, size)
        sync[kind] += ratio * take
        extra -= take
    if sync["all_reduce"] > 0 and sync["all_gather"] > 0:  # mixed: no more than gathers
        sync = {"all_reduce": 0.0, "all_gather": sum(sync.values())}
    own = sum(f.params for f in facts if f.self_updated)
    others = sum(least.get(f.weight, 0.0) for f in facts if not f.self_updated)
    return StepWeights(sync["all_reduce"], sync["all_gather"], min(own, stored - others))


def _least_needs(
    problem: MappingProblem,
) -> tuple[dict[str, float], set[str], dict[str, set[float]]]:
    """Per weight: the least any plan stores (the max over its readers of their least
    need), whether a reader replicates it in every option, and every need of its readers."""
    least: dict[str, float] = {}
    must: set[str] = set()
    needs: dict[str, set[float]] = {}
    for menu in problem.kernels:
        need: dict[str, float] = {}
        always: set[str] | None = None
        for opt in menu.options:
            for w, elems in opt.weights:
                need[w] = min(need.get(w, math.inf), elems)
                needs.setdefault(w, set()).add(elems)
            rep = set(opt.replicated)
            always = rep if always is None else always & rep
        for w, elems in need.items():
            least[w] = max(least.get(w, 0.0), elems)
        must |= always or set()
    return least, must, needs


def least_stored(problem: MappingProblem) -> float:
    """Parameters per graph instance the weights take at least: each weight as large as
    the least any of its readers can need (a lower bound: one kernel's weights share its
    sharding)."""
    return sum(_least_needs(problem)[0].values())


def stored_params(problem: MappingProblem, choice: tuple[int, ...]) -> float:
    """Parameters per graph instance the chosen options store (each weight as large as
    its most demanding reader needs)."""
    stored: dict[str, float] = {}
    for menu, o in zip(problem.kernels, choice):
        if o < 0:
            continue
        for w, elems in menu.options[o].weights:
            stored[w] = max(stored.get(w, 0.0), elems)
    return sum(stored.values())


def per_step_gradient_reduction(
    kernel: Kernel, menu: KernelMenu, tp: int, tp_span: Span, micro_batches: int
) -> KernelMenu:
    """A weight-gradient kernel split over TP on a reduction dim (tokens: the sequence-
    parallel LayerNorm gradient) produces partial gradients that accumulate locally over the
    step's micro-batches and are all-reduced once per step (Megatron-LM reduces them after
    the last micro-batch; reduce-scattered, for a "+rs" sharding): each of the
    `micro_batches` instances pays 1/micro_batches of the collective that `own_network`
    charged it in full."""
    if kernel.pass_ != Pass.WGRAD or tp <= 1 or micro_batches <= 1:
        return menu
    out_bytes_full = sum(kernel.operand_bytes(o) for o in kernel.outputs)
    keep = 1.0 / micro_batches
    options = []
    for o in menu.options:
        split = o.sharding.split("+")[0]
        if split != REPLICATED and split in kernel.reduction_dims:
            # the same collective `own_network` charged: reduce-scatter or all-reduce
            kind = "reduce_scatter" if o.sharding.endswith("+rs") else "all_reduce"
            full_t = hierarchical_time(kind, out_bytes_full, tp_span)
            full_b = bytes_sent_per_chip(kind, out_bytes_full, tp)
            o = replace(
                o,
                network_s=max(o.network_s - full_t * (1 - keep), 0.0),
                network_bytes=max(o.network_bytes - full_b * (1 - keep), 0.0),
                collective=f"{o.collective} (once per step of {micro_batches} micro-batches)",
            )
        options.append(o)
    return replace(menu, options=tuple(options))


def self_updated_params(workload: Workload) -> float:
    """Parameters (whole model) of the forward kernels whose optimizer update a graph's own
    OPTIMIZER kernel (`<kernel>_optimizer`, solver.cost.weights.weight_facts) charges."""
    return _self_updated(workload.phases)


@per_phases
def _self_updated(phases: tuple[Phase, ...]) -> float:
    total = 0.0
    for p in phases:
        owners = {
            weight_owner(k.name.removesuffix(OPTIMIZER_SUFFIX))
            for k in p.graph.kernels
            if k.pass_ == Pass.OPTIMIZER
        }
        total += p.count * sum(
            k.weight_params for k in p.graph.kernels if k.pass_ == Pass.FWD and k.name in owners
        )
    return total
