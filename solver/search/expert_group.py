"""The expert-parallel group of a parallel choice: which chips exchange an MoE layer's routed
tokens, and at which bandwidth.

Rank order (Megatron-core, parallel_state): the dense layers see the chips as TP x CP x DP x
PP, innermost first (`tp-cp-dp-pp`); the MoE layers as ETP x EP x EDP x PP over the same
ranks, with the same pipeline groups. Within one pipeline stage, global rank
r = t + TP (c + CP d) (t the TP index, c the CP index, d the data-parallel index); an EP
group is EP ranks of the expert view:
- ETP = TP (`expert_tensor_parallel` 0): chips with the same t (and c), EP consecutive data
  indices: stride TP x CP. MapShard's choice places them as its EP degree, carved from the
  data-parallel ranks next to CP (solver.search.parallel.ORDERS).
- ETP = 1 (folded): EP consecutive ranks, the TP chips first: (EP / TP) TP groups of TP
  consecutive chips, so the group stays inside one NVLink node while TP x EP / TP fits it.
  The choice's EP degree is then EP / TP, and the group spans the TP levels, then the EP
  levels (`expert_span`). Context-parallel ranks stay expert-data-parallel here (Megatron-core
  folds CP into EP too; the two differ only with CP > 1).

The dispatcher sets the bandwidth: NCCL all-to-all at the levels' calibrated all-to-all
curve; DeepEP-style kernels at their published bottleneck bandwidth (DeepEP README, H800 +
CX7, 4096 tokens x 7168 hidden, top-8: 153 GB/s over NVLink of H800's 200 GB/s per
direction, 43 GB/s over 400 Gb/s RDMA at EP 16).
"""

from __future__ import annotations

from dataclasses import replace

from generator.graph import Workload
from hardware.system import CollectiveEfficiency, NetworkLevel
from solver.cost.problem import Span
from solver.search.parallel import Choice

# DeepEP normal kernels' bottleneck bandwidth / the link's, on the scale-up (NVLink) and
# scale-out (RDMA) levels (module docstring)
DEEPEP_NVLINK_SHARE = 153 / 200
DEEPEP_RDMA_SHARE = 43 / 50


def folded(workload: Workload) -> bool:
    """Whether the workload's EP group folds over the TP chips (expert_tensor_parallel 1)."""
    return workload.expert_tensor_parallel == 1


def expert_span(workload: Workload, choice: Choice, levels: tuple[NetworkLevel, ...]) -> Span:
    """The levels (innermost first) and group sizes of the EP group of `choice`: its EP
    degree's span, after the TP span when folded; at DeepEP's bandwidth under that
    dispatcher (`levels`: the system's, whose innermost link is the scale-up one)."""
    span = choice.span("EP")
    if folded(workload):
        span = one_group_per_level(choice.span("TP") + span)
    if workload.moe_dispatcher != "deepep" or not levels:
        return span
    nvlink = levels[0].link_bandwidth_Bps
    return tuple((deepep_level(lv, lv.link_bandwidth_Bps >= nvlink), p) for lv, p in span)


def one_group_per_level(span: Span) -> Span:
    """The span with a level that TP and EP split between them (one NVLink node holding
    the TP pairs and the EP ranks beyond them) as one group on it: its chips exchange
    directly, (p - 1) / p of their tokens, not level by level as across distinct levels."""
    out: list[tuple[NetworkLevel, int]] = []
    for lv, p in span:
        if out and out[-1][0] is lv:
            out[-1] = (lv, out[-1][1] * p)
        else:
            out.append((lv, p))
    return tuple(out)


def deepep_level(level: NetworkLevel, scale_up: bool) -> NetworkLevel:
    """The level as DeepEP's kernels see it: a flat all-to-all share of its links, no
    software step latency beyond the link's own (no NCCL protocol)."""
    share = DEEPEP_NVLINK_SHARE if scale_up else DEEPEP_RDMA_SHARE
    eff = CollectiveEfficiency(bus_bw_util=share, all_to_all_curve=((1.0, share),))
    return replace(level, efficiency=eff)


def expert_parallel_degree(workload: Workload, choice: Choice) -> tuple[int, int]:
    """(EP, ETP) as Megatron-core counts them: the chips of one EP group and the experts'
    tensor-parallel degree; (1, 1) for a model without experts."""
    if workload.model is None or workload.model.num_experts <= 0:
        return 1, 1
    tp, ep = choice.degree("TP"), choice.degree("EP")
    return (ep * tp, 1) if folded(workload) else (ep, tp)


def expert_parallel_groups(
    tp: int, cp: int, dp: int, pp: int, ep: int, etp: int
) -> list[tuple[int, ...]]:
    """Megatron-core's EP groups as global ranks (module docstring): the expert view
    ETP x EP x EDP x PP of the ranks, innermost first, with EDP = TP x CP x DP / (ETP x EP);
    a group holds the ranks of one (ETP index, EDP index, PP index)."""
    stage = tp * cp * dp
    if stage % (etp * ep):
        raise ValueError(f"ETP {etp} x EP {ep} does not divide TP x CP x DP = {stage}")
    edp = stage // (etp * ep)
    groups = []
    for p in range(pp):
        for e in range(edp):
            for t in range(etp):
                base = p * stage + e * etp * ep + t
                groups.append(tuple(base + etp * i for i in range(ep)))
    return groups
