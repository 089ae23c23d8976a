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
Under expert parallelism an EP rank's own experts reduce over DP x CP only, the dense rest
over EP x DP x CP (Megatron-LM's expert-data-parallel group): T(X) is then the sum of the
two groups' collectives, run in the same buckets and windows.
The gradient window is the last micro-batch's backward (gradient accumulation holds the
reduction until then); the parameter gather of ZeRO-1/2 hides under the next step's first
forward. h is the chip's calibrated share on a kernel-by-kernel GPU (ExecutionOptions.
comm_hidden_share), 1 otherwise; a collective the run does not overlap (LlmTraining.
dp_overlap: Megatron-LM's local DDP, overlap_grad_reduce / overlap_param_gather off) takes
h = 0, so E(N, W) = N: its whole time adds to the step.
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.cost.collectives import hierarchical_time
from solver.cost.latency import exposed_under
from solver.search.parallel import Span

# PyTorch DDP's default gradient bucket (bucket_cap_mb=25), also the FSDP unit floor.
BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class SyncGroup:
    """Gradients (G) and ZeRO parameters (P) per chip that a set of ranks other than the
    step's DP group shares: an EP rank's experts, reduced over DP x CP only."""

    span: Span
    grad_bytes: float
    param_bytes: float


@dataclass(frozen=True)
class DataParallelSync:
    """Network time of the DP collectives in one step: exposed (charged) and in total."""

    exposed_s: float
    total_s: float


def _time(kind: str, sizes: tuple[tuple[float, Span], ...]) -> float:
    """Alpha-beta time of collective `kind` on each (bytes, span), one after the other."""
    return sum(hierarchical_time(kind, size, span) for size, span in sizes)


def _exposed(
    kind: str,
    sizes: tuple[tuple[float, Span], ...],
    window_s: float,
    unit: float,
    hidden: float,
) -> float:
    """max(T(u), E(T(size), window)): what one bucketed collective adds to its window (the
    first bucket: the largest group's)."""
    whole = _time(kind, sizes)
    first = max(hierarchical_time(kind, min(unit, size), span) for size, span in sizes)
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
    experts: SyncGroup | None = None,
    param_hidden: float | None = None,
) -> DataParallelSync:
    """The step's DP collectives by ZeRO stage (module docstring: rules and sources);
    `hidden`: the share h of the overlap that hides; `experts`: gradients and parameters
    reduced over a group of their own (EP), in the same buckets and windows;
    `param_hidden`: h of the ZeRO parameter all-gathers (None: `hidden`; 0: not overlapped)."""
    groups = [SyncGroup(span, grad_bytes, param_bytes), *([experts] if experts else [])]
    groups = [g for g in groups if any(p > 1 for _, p in g.span)]
    if not groups:
        return DataParallelSync(0.0, 0.0)
    m = max(micro_batches, 1)
    u = unit_bytes
    p_hidden = hidden if param_hidden is None else param_hidden
    grads = tuple((g.grad_bytes, g.span) for g in groups)
    params = tuple((g.param_bytes, g.span) for g in groups)
    if zero_stage <= 0:
        total = _time("all_reduce", grads)
        return DataParallelSync(_exposed("all_reduce", grads, bwd_s, u, hidden), total)
    rs = _time("reduce_scatter", grads)
    ag = _time("all_gather", params)
    if zero_stage >= 3:
        fwd = _exposed("all_gather", params, fwd_s, u, p_hidden)
        first_ag = max(hierarchical_time("all_gather", min(u, p), s) for p, s in params)
        bwd = max(first_ag, exposed_under(ag + rs, bwd_s, min(hidden, p_hidden)))
        return DataParallelSync(m * (fwd + bwd), m * (2 * ag + rs))
    gather = _exposed("all_gather", params, fwd_s, u, p_hidden)
    reduce = _exposed("reduce_scatter", grads, bwd_s, u, hidden)
    if zero_stage == 2:
        return DataParallelSync(m * reduce + gather, m * rs + ag)
    return DataParallelSync(reduce + gather, rs + ag)
