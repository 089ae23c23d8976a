"""The collectives a kernel needs by itself, whatever its neighbours do: the reduction of a
split reduction dim over the TP group, and the kernel's own communication (an expert
all-to-all, DFModel's FFT transpose, HPL's broadcast and row swap) over its group."""

from __future__ import annotations

import math

from generator.graph import Communication, Kernel
from solver.cost.collectives import bytes_sent_per_chip, hierarchical_time
from solver.cost.problem import REPLICATED, Span


def own_network(
    kernel: Kernel,
    sharding: str,
    tp: int,
    tp_span: Span,
    group_spans: dict[str, Span],
    out_bytes_full: float,
) -> tuple[float, float, str]:
    """Collectives the kernel needs by itself: a split reduction dim, and its implied
    communication (all-to-all of expert dispatch, ...). Periodic DP gradient reductions are
    charged once per step by the assembly, not here."""
    time_s, sent, labels = 0.0, 0.0, []
    split = sharding.split("+")[0]
    if tp > 1 and split != REPLICATED and split in kernel.reduction_dims:
        kind = "reduce_scatter" if sharding.endswith("+rs") else "all_reduce"
        time_s += hierarchical_time(kind, out_bytes_full, tp_span)
        sent += bytes_sent_per_chip(kind, out_bytes_full, tp)
        labels.append(f"{kind} {out_bytes_full / 1e6:.3g} MB over tp")
    span = group_spans.get(kernel.communication_group or "tp", ())
    p = math.prod(q for _, q in span) if span else 1
    for comm, size in (
        (kernel.communication, kernel.communication_bytes),
        (kernel.communication_2, kernel.communication_2_bytes),
    ):
        if comm in (Communication.NONE, Communication.ALL_REDUCE_PERIODIC) or p <= 1:
            continue
        kind = COLLECTIVE_KIND[comm]
        time_s += hierarchical_time(kind, size, span)
        sent += bytes_sent_per_chip(kind, size, p)
        labels.append(f"{kind} {size / 1e6:.3g} MB over {kernel.communication_group or 'tp'}")
    return time_s, sent, "; ".join(labels)


COLLECTIVE_KIND = {
    Communication.ALL_REDUCE: "all_reduce",
    Communication.ALL_TO_ALL: "all_to_all",
    Communication.ALL_GATHER: "all_gather",
    Communication.REDUCE_SCATTER: "reduce_scatter",
    Communication.POINT_TO_POINT: "p2p",
    Communication.BROADCAST: "broadcast",
}
