"""Collective times: one alpha-beta model for every topology kind, composed hierarchically.

Sizes are the whole logical buffer `size_bytes` (for an all-reduce the vector each chip
contributes; for an all-gather the gathered result; for a reduce-scatter the input; for an
all-to-all the data each chip holds before the exchange, times the group size).
`link_bandwidth_Bps` of a level is one chip's injection bandwidth in one direction.

Per level with p chips, bandwidth b and per-step latency a (ring algorithm steps):
  all-reduce      2(p-1)/p * S / b + 2(p-1) a      (ring; reduce-scatter + all-gather)
  all-gather      (p-1)/p * S / b + (p-1) a
  reduce-scatter  (p-1)/p * S / b + (p-1) a
  all-to-all      switch/fully-connected: (p-1)/p * (S/p) / b + a
                  ring: floor(p^2/4) / (2p) * (S/p) / b + (p-1) a   (bidirectional: each
                  chunk goes the short way round, min(k, p-k) hops to the chip k away, so a
                  chip's hop-bytes are (S/p^2) floor(p^2/4), carried by its two outgoing
                  links at b each; a torus is this ring per dimension, DFModel's and the
                  bisection's 2-D torus figure)
  point-to-point  S / b + a
  broadcast       (p-1)/p * S / b + (p-1) a        (scatter + all-gather pipeline)
Switch and fully-connected levels take 1 step of latency (log2 p for switch trees is folded
into the level's latency); a torus level is a ring per dimension, run one after another on
S / (product of the dimensions done so far) for reduce-scatter phases.

Alpha-beta per level: a = the level's latency plus its efficiency's latency per step (the
calibrated software floor, NCCL's), and b = link bandwidth x the calibrated fraction at the
collective's message size: `bus_bw_curve` points (nccl-tests size: the all-reduce buffer,
the gathered output, the reduce-scatter input, one chip's all-to-all send buffer; p2p the
message) interpolated in log size and flat beyond the ends; an all-to-all, all-gather or
reduce-scatter reads the level's own curve for its kind where it has one (on an NVSwitch
level only the all-reduce gets NVLS's in-switch reduction; the two halves are capped by the
all-reduce's curve, HALVES). Without a
curve, b = util x bandwidth x m / (m + m_half) on the per-chip chunk m = S/p (the legacy
form: its S/b_eff = S/b + p m_half/b is a latency in disguise, hence the curve).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hardware.system import NetworkLevel, Topology
from solver.cost import memo

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p", "broadcast")
# An all-reduce's two halves: each at its own measured curve, never above the all-reduce's
# bus bandwidth (a ring moves half the all-reduce's bytes at the same rate; only NVLS's
# in-switch reduction lifts the all-reduce above them). The cap also keeps a chip's halves
# consistent where its all-reduce points come from another NCCL release than theirs.
HALVES = ("all_gather", "reduce_scatter")


def curve_fraction(curve: Sequence[tuple[float, float]], message_bytes: float) -> float:
    """Calibrated fraction of link bandwidth at `message_bytes`: linear in log size between
    the points, the end points' value beyond them."""
    if message_bytes <= curve[0][0]:
        return curve[0][1]
    for (m0, u0), (m1, u1) in zip(curve, curve[1:]):
        if message_bytes <= m1:
            w = math.log(message_bytes / m0) / math.log(m1 / m0)
            return u0 + w * (u1 - u0)
    return curve[-1][1]


def effective_bandwidth(
    level: NetworkLevel, message_bytes: float, chunk_bytes: float, kind: str = ""
) -> float:
    """Achievable bandwidth of one chip on this level for a collective of `message_bytes`
    (the curve's size) whose per-chip chunk is `chunk_bytes` (the legacy curve's size); an
    all-to-all, all-gather or reduce-scatter takes its kind's curve where the level has one."""
    eff = level.efficiency
    curve = eff.curve_for(kind)
    if curve:
        fraction = curve_fraction(curve, message_bytes)
        if kind in HALVES and eff.bus_bw_curve and curve is not eff.bus_bw_curve:
            fraction = min(fraction, curve_fraction(eff.bus_bw_curve, message_bytes))
        return level.link_bandwidth_Bps * fraction
    bw = level.link_bandwidth_Bps * (eff.bus_bw_util or 1.0)
    if eff.half_bw_bytes > 0 and chunk_bytes > 0:
        bw *= chunk_bytes / (chunk_bytes + eff.half_bw_bytes)
    return bw


def ring_all_to_all_hops(p: int) -> int:
    """sum over k = 1..p-1 of min(k, p - k): the hops one chip's all-to-all chunks travel
    on a bidirectional ring of p chips, each the short way round (= floor(p^2 / 4))."""
    return p * p // 4


def _steps(level: NetworkLevel, p: int) -> int:
    """Latency steps of a ring-like phase over p chips on this level."""
    if p <= 1:
        return 0
    if level.kind in (Topology.SWITCH, Topology.FULLY_CONNECTED):
        return 1
    return p - 1


def level_collective_time(kind: str, size_bytes: float, p: int, level: NetworkLevel) -> float:
    """Time of one collective over p chips of one level (seconds)."""
    if p <= 1 or size_bytes <= 0:
        return 0.0
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind}")
    if level.kind == Topology.TORUS and level.torus_dims:
        return _torus_time(kind, size_bytes, p, level)
    alpha = level.latency_s + level.efficiency.latency_s
    if kind == "p2p":
        return size_bytes / effective_bandwidth(level, size_bytes, size_bytes) + alpha
    message = size_bytes / p if kind == "all_to_all" else size_bytes
    bw = effective_bandwidth(level, message, size_bytes / p, kind)
    steps = _steps(level, p)
    frac = (p - 1) / p
    if kind == "all_reduce":
        return 2 * frac * size_bytes / bw + 2 * steps * alpha
    if kind in ("all_gather", "reduce_scatter", "broadcast"):
        return frac * size_bytes / bw + steps * alpha
    # all_to_all
    per_chip = size_bytes / p
    if level.kind == Topology.RING:
        return ring_all_to_all_hops(p) / (2 * p) * per_chip / bw + steps * alpha
    return frac * per_chip / bw + steps * alpha


def _torus_time(kind: str, size_bytes: float, p: int, level: NetworkLevel) -> float:
    """A torus is a ring per dimension; the group uses the innermost dimensions first."""
    dims = _group_dims(level.torus_dims, p)
    ring = NetworkLevel(
        name=level.name,
        kind=Topology.RING,
        degree=0,
        link_bandwidth_Bps=level.link_bandwidth_Bps,
        latency_s=level.latency_s,
        efficiency=level.efficiency,
    )
    return _hierarchical(kind, size_bytes, [(ring, d) for d in dims])


def _group_dims(torus_dims: Sequence[int], p: int) -> list[int]:
    out: list[int] = []
    remaining = p
    for d in torus_dims:
        if remaining <= 1:
            break
        take = math.gcd(d, remaining)
        if take > 1:
            out.append(take)
            remaining //= take
    if remaining > 1:
        out.append(remaining)
    return out


# collective times by (kind, size, each level's identity and degree): the outer search
# prices the same few hundred DP and pipeline collectives for thousands of candidates (a
# 16-GPU MoE training search: 127,000 calls, 227 distinct). The entry holds its levels, so
# their ids are not reused while it lives (as activations' floors).
COLLECTIVE_TIMES = memo.Memo(16_384)


def hierarchical_time(
    kind: str, size_bytes: float, span: Sequence[tuple[NetworkLevel, int]]
) -> float:
    """A collective over a group spanning several levels, innermost first (`_hierarchical`)."""
    key = (kind, size_bytes, *[(id(level), p) for level, p in span])
    hit = COLLECTIVE_TIMES.find(key)
    if hit is not None and all(a is b for a, (b, _) in zip(hit[0], span)):
        return hit[1]
    value = _hierarchical(kind, size_bytes, span)
    COLLECTIVE_TIMES.put(key, (tuple(level for level, _ in span), value))
    return value


def _hierarchical(kind: str, size_bytes: float, span: Sequence[tuple[NetworkLevel, int]]) -> float:
    """A collective over a group spanning several levels, innermost first.

    all-reduce = reduce-scatter inside, all-reduce across on the 1/p_inner shard, all-gather
    inside; all-gather / reduce-scatter run level by level on the share that level handles;
    an all-to-all moves, at every level l, (p_l - 1)/p_l of the data each chip holds; p2p and
    broadcast use the outermost level that the group spans.
    """
    span = [(lv, p) for lv, p in span if p > 1]
    if not span or size_bytes <= 0:
        return 0.0
    if len(span) == 1:
        return level_collective_time(kind, size_bytes, span[0][1], span[0][0])
    if kind in ("p2p", "broadcast"):
        level, _ = span[-1]
        p_total = math.prod(p for _, p in span)
        return level_collective_time(kind, size_bytes, p_total, level)
    inner_level, p_inner = span[0]
    rest = span[1:]
    shard = size_bytes / p_inner
    if kind == "all_reduce":
        return (
            level_collective_time("reduce_scatter", size_bytes, p_inner, inner_level)
            + _hierarchical("all_reduce", shard, rest)
            + level_collective_time("all_gather", size_bytes, p_inner, inner_level)
        )
    if kind == "reduce_scatter":
        return level_collective_time(kind, size_bytes, p_inner, inner_level) + _hierarchical(
            kind, shard, rest
        )
    if kind == "all_gather":
        return _hierarchical(kind, shard, rest) + level_collective_time(
            kind, size_bytes, p_inner, inner_level
        )
    # all_to_all: level by level, each chip exchanging all it holds with its peers of that
    # level (two-level textbook: (p_l - 1)/p_l of the per-chip data D at level l); the level
    # call takes p_l x D, since its size convention is the group's p x per-chip share.
    per_chip = size_bytes / math.prod(p for _, p in span)
    return sum(level_collective_time(kind, per_chip * p, p, lv) for lv, p in span)


def bytes_sent_per_chip(kind: str, size_bytes: float, p: int) -> float:
    """Bytes one chip injects into the network (for energy and reports)."""
    if p <= 1:
        return 0.0
    frac = (p - 1) / p
    return {
        "all_reduce": 2 * frac * size_bytes,
        "all_gather": frac * size_bytes,
        "reduce_scatter": frac * size_bytes,
        "broadcast": frac * size_bytes,
        "all_to_all": frac * size_bytes / p,
        "p2p": size_bytes,
    }[kind]
