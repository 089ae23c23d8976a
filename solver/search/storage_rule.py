"""DRAM bytes per stored parameter: the one rule the DRAM split and the memory check share.

Why: the outer search prices a graph's weight storage twice, once while choosing (the
memory row of every inner problem and solver.search.dram_split, through
`WeightRule.bytes_per_param`) and once when it checks the plan (footprint.memory_use). Two
copies of the ZeRO arithmetic drifted apart once (the FSDP gathered share was charged by
the check only), and the split then chose plans the check found over capacity. Both now
read `param_bytes`: the check's weights, gradients and optimizer state are the stored
parameters times its three terms, and the split's bytes per parameter is their sum.
"""

from __future__ import annotations

from dataclasses import dataclass

from generator.graph import Pass, Workload
from solver.cost.weights import WeightRule
from solver.search.parallel import Choice
from solver.search.stages import layer_phases, stage_layers


@dataclass(frozen=True)
class ParamBytes:
    """Bytes per chip each stored parameter takes (a parameter a mapping stores on the chip,
    solver.cost.weights.stored_params): its weight, its gradient and its optimizer state
    beyond them, each at its ZeRO stage's share."""

    weights: float
    gradients: float = 0.0
    optimizer: float = 0.0

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def param_count(workload: Workload) -> float:
    """The model's parameters (all of them, every expert included)."""
    if workload.model and workload.model.num_params:
        return float(workload.model.num_params)
    total = 0.0
    for p in workload.phases:
        for k in p.graph.kernels:
            if k.pass_ == Pass.FWD:
                total += k.weight_params * p.count
    return total


def rank_params(workload: Workload) -> float:
    """The parameters one EP rank's graphs hold: the model's, less the experts the other EP
    ranks hold (param_count without EP)."""
    ep = max(workload.expert_parallel, 1)
    experts = workload.model.num_expert_params if workload.model else 0
    return param_count(workload) - experts * (1 - 1 / ep)


def expert_share(workload: Workload) -> float:
    """Of an EP rank's parameters, the share its own experts take (0 without EP): they
    reduce and shard over DP x CP, the dense rest over EP x DP x CP."""
    ep = max(workload.expert_parallel, 1)
    if ep <= 1 or workload.model is None or not workload.model.num_expert_params:
        return 0.0
    return workload.model.num_expert_params / ep / rank_params(workload)


def zero_shard(workload: Workload, choice: Choice) -> float:
    """Ranks a stored parameter's ZeRO shard is split over, on average: DP x CP, and EP x
    DP x CP for the dense parameters of an EP rank (1 / shard = the mean of 1 / ranks)."""
    ranks = choice.degree("DP") * choice.degree("CP")
    share, ep = expert_share(workload), choice.degree("EP")
    if share <= 0 or ep <= 1:
        return float(ranks * ep)
    return 1 / (share / ranks + (1 - share) / (ranks * ep))


def param_bytes(workload: Workload, choice: Choice) -> ParamBytes:
    """Inference and forward-only graphs keep the weights alone. Training keeps a gradient
    and the optimizer state beyond weight and gradient (optimizer_bytes_per_param - weight
    bytes: the FP32 master copy and Adam's moments), sharded over the DP x CP group from
    ZeRO-1 (optimizer state), -2 (+ gradients), -3 (+ weights, plus the gathered share,
    `fsdp_gathered_share`)."""
    wbytes = workload.weight_bytes_per_param
    if workload.kind != "training" or workload.forward_only:  # no gradients, no optimizer
        return ParamBytes(wbytes)
    z = workload.zero_stage
    shard = zero_shard(workload, choice)  # ZeRO shards over the DP x CP (x EP) group
    opt_extra = max(workload.optimizer_bytes_per_param - wbytes, 0.0)
    return ParamBytes(
        weights=wbytes * (1 / (shard if z >= 3 else 1) + fsdp_gathered_share(workload, choice)),
        gradients=wbytes / (shard if z >= 2 else 1),
        optimizer=opt_extra / (shard if z >= 1 else 1),
    )


def fsdp_gathered_share(workload: Workload, choice: Choice) -> float:
    """Under ZeRO-3 (FSDP), the share of a chip's stored parameters held gathered besides
    its shard: the unit in use and the prefetched next one (one layer each), (shard - 1) /
    shard of each. 0 below ZeRO-3."""
    shard = zero_shard(workload, choice)
    if workload.zero_stage < 3 or shard <= 1:
        return 0.0
    pp = choice.degree("PP")
    layers_here = sum(stage_layers(workload, p, pp) for p in layer_phases(workload))
    return min(2 / (layers_here or 1), 1.0) * (shard - 1) / shard


def weight_rule(workload: Workload, choice: Choice) -> WeightRule:
    """How the chosen shardings store weights for this choice (solver.cost.weights.WeightRule):
    resident bytes per stored parameter (`param_bytes`, as footprint.memory_use counts
    them), and in training the gradient bytes per parameter a replicated weight syncs once
    per step (assemble.training_times)."""
    wbytes = workload.weight_bytes_per_param
    per_param = param_bytes(workload, choice).total
    if workload.kind != "training" or workload.forward_only:  # no gradients to reduce
        return WeightRule(per_param)
    return WeightRule(per_param, wbytes)
