"""Data-parallel synchronisation per training step: DDP's gradient all-reduce and the ZeRO
stages' reduce-scatter / all-gather, each overlapped with compute the way the frameworks do,
charging only the exposed part. Closed forms, checked by hand in tests.

Notation (per chip, one pipeline stage): G = gradient bytes, P = parameter bytes (both of
the TP x PP shard, before any ZeRO split), u = the overlap unit (one DDP bucket or FSDP
unit: `min(BUCKET_BYTES, X)` of the tensor X moved), T_c(X) = alpha-beta time of
collective c on X bytes over the DP group (solver.cost.collectives), f / b = forward /
backward compute time of one micro-batch on the stage, m = micro-batches per step.

Rule: a collective issued bucket by bucket as the compute produces (or needs) its data
hides under that compute; what stays exposed is the larger of the one bucket that cannot
overlap (the last gradient bucket, the first parameter unit) and the collective's excess
over the compute window: exposed = max(T(u), T(X) - window).
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
forward. Not modelled: the slowdown of compute kernels that share the chip with a running
collective (SM/DMA contention).
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.cost.collectives import hierarchical_time
from solver.search.parallel import Span

# PyTorch DDP's default gradient bucket (bucket_cap_mb=25), also the FSDP unit floor.
BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class DataParallelSync:
    """Network time of the DP collectives in one step: exposed (charged) and in total."""

    exposed_s: float
    total_s: float


def _exposed(kind: str, size: float, window_s: float, span: Span, unit: float) -> float:
    """max(T(u), T(size) - window): the part of one bucketed collective compute cannot hide."""
    whole = hierarchical_time(kind, size, span)
    first = hierarchical_time(kind, min(unit, size), span)
    return max(first, whole - window_s)


def dp_sync(
    zero_stage: int,
    span: Span,
    grad_bytes: float,
    param_bytes: float,
    fwd_s: float,
    bwd_s: float,
    micro_batches: int,
    unit_bytes: float = BUCKET_BYTES,
) -> DataParallelSync:
    """The step's DP collectives by ZeRO stage (module docstring: rules and sources)."""
    if not any(p > 1 for _, p in span):
        return DataParallelSync(0.0, 0.0)
    m = max(micro_batches, 1)
    u = unit_bytes
    if zero_stage <= 0:
        total = hierarchical_time("all_reduce", grad_bytes, span)
        return DataParallelSync(_exposed("all_reduce", grad_bytes, bwd_s, span, u), total)
    rs = hierarchical_time("reduce_scatter", grad_bytes, span)
    ag = hierarchical_time("all_gather", param_bytes, span)
    if zero_stage >= 3:
        fwd = _exposed("all_gather", param_bytes, fwd_s, span, u)
        first_ag = hierarchical_time("all_gather", min(u, param_bytes), span)
        bwd = max(first_ag, ag + rs - bwd_s)
        return DataParallelSync(m * (fwd + bwd), m * (2 * ag + rs))
    gather = _exposed("all_gather", param_bytes, fwd_s, span, u)
    reduce = _exposed("reduce_scatter", grad_bytes, bwd_s, span, u)
    if zero_stage == 2:
        return DataParallelSync(m * reduce + gather, m * rs + ag)
    return DataParallelSync(reduce + gather, rs + ag)
