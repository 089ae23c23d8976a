"""Data-parallel synchronisation per training step: DDP's gradient all-reduce and the ZeRO
stages' reduce-scatter / all-gather, each overlapped with compute the way the frameworks do,
charging only the exposed part. Closed forms, checked by hand in tests.

Notation (per chip, one pipeline stage): G = gradient bytes, P = parameter bytes (both of
the TP x PP shard, before any ZeRO split), u = the overlap unit (one DDP bucket or FSDP
unit: `min(BUCKET_BYTES, X)` of the tensor X moved), T_c(X) = alpha-beta time of
collective c on X bytes over the DP group (solver.cost.collectives), f / b = forward /
backward compute time of one micro-batch on the stage, m = micro-batches per step.

Rule: a collective issued bucket by bucket as the compute produces (or needs) its data
runs beside that compute; what stays exposed is the larger of the one bucket that cannot
overlap (the last gradient bucket, the first parameter unit) and what the collective adds
to the compute window under the one latency rule (solver.cost.latency.exposed_under: its
excess over the window plus the unhidden share 1 - h of the overlap, the NCCL kernels and
the GEMMs contending for the SMs and memory): exposed = max(T(u), E(T(X), window)) with
E(N, W) = N - h min(N, W); h = 1 (perfect overlap) gives max(T(u), T(X) - window). The
formulas below write that perfect case; every "- window" reads E.
  ZeRO-0 (DDP):        max(T_ar(u), T_ar(G) - b)                          once per step
  ZeRO-1 (Megatron distributed optimizer; overlap_grad_reduce / overlap_param_gather):
                       max(T_rs(u), T_rs(G) - b) + max(T_ag(u), T_ag(P) - f)   once per step
  ZeRO-2:              m * max(T_rs(u), T_rs(G) - b)   (sharded gradients: every micro-
                       batch reduces into its shard) + max(T_ag(u), T_ag(P) - f)
  ZeRO-3 / FSDP FULL_SHARD, per micro-batch (parameters gathered before use, freed after):
                       forward  max(T_ag(u), T_ag(P) - f)
                       backward max(T_ag(u), T_ag(P) + T_rs(G) - b)   (re-gather + reduce)
                       times m, no step-end gather (each rank updates its own shard).
The gradient window is the last micro-batch's backward (gradient accumulation holds the
reduction until then); the parameter gather of ZeRO-1/2 hides under the next step's first
forward. h is the chip's calibrated share on a kernel-by-kernel GPU (ExecutionOptions.
comm_hidden_share), 1 otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.cost.collectives import hierarchical_time
from solver.cost.latency import exposed_under
from solver.search.parallel import Span

# PyTorch DDP's default gradient bucket (bucket_cap_mb=25), also the FSDP unit floor.
BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class DataParallelSync:
    """Network time of the DP collectives in one step: exposed (charged) and in total."""

    exposed_s: float
    total_s: float


def _exposed(
    kind: str, size: float, window_s: float, span: Span, unit: float, hidden: float
) -> float:
    """max(T(u), E(T(size), window)): what one bucketed collective adds to its window."""
    whole = hierarchical_time(kind, size, span)
    first = hierarchical_time(kind, min(unit, size), span)
    return max(first, exposed_under(whole, window_s, hidden))


def dp_sync(
    zero_stage: int,
    span: Span,
    grad_bytes: float,
    param_bytes: float,
    fwd_s: float,
    bwd_s: float,
    micro_batches: int,
    unit_bytes: float = BUCKET_BYTES,
    hidden: float = 1.0,
) -> DataParallelSync:
    """The step's DP collectives by ZeRO stage (module docstring: rules and sources);
    `hidden`: the share h of the overlap that hides."""
    if not any(p > 1 for _, p in span):
        return DataParallelSync(0.0, 0.0)
    m = max(micro_batches, 1)
    u = unit_bytes
    if zero_stage <= 0:
        total = hierarchical_time("all_reduce", grad_bytes, span)
        return DataParallelSync(_exposed("all_reduce", grad_bytes, bwd_s, span, u, hidden), total)
    rs = hierarchical_time("reduce_scatter", grad_bytes, span)
    ag = hierarchical_time("all_gather", param_bytes, span)
    if zero_stage >= 3:
        fwd = _exposed("all_gather", param_bytes, fwd_s, span, u, hidden)
        first_ag = hierarchical_time("all_gather", min(u, param_bytes), span)
        bwd = max(first_ag, exposed_under(ag + rs, bwd_s, hidden))
        return DataParallelSync(m * (fwd + bwd), m * (2 * ag + rs))
    gather = _exposed("all_gather", param_bytes, fwd_s, span, u, hidden)
    reduce = _exposed("reduce_scatter", grad_bytes, bwd_s, span, u, hidden)
    if zero_stage == 2:
        return DataParallelSync(m * reduce + gather, m * rs + ag)
    return DataParallelSync(reduce + gather, rs + ag)
