"""An evaluator of one mapping, written from the rules (DESIGN.md, issue #14, and the rules
the product's docstrings state), sharing no code with the product.

A mapping gives every kernel a sharding (which loop dim is split over the p chips of the
one tensor-parallel group), an integer tile, and a configuration index (Config[u] <=
Config[v] on every edge). Its latency is the sum over configurations of
  max(C, M, N)   (overlap)   or   C + M + N   (no overlap)
  C = sum over members of FLOP per chip / achievable rate + the per-kernel overhead
  M = DRAM bytes per chip / (DRAM bandwidth x its efficiency)
  N = members' own collectives + layout conversions charged to this configuration

Data movement of a GEMM C[M,N] = A[M,K] B[K,N] on per-chip sizes, buffer in elements (x the
widest element), pass counts as ceilings (DESIGN.md, "Data movement per kernel"):
  output-stationary Tm x Tn: buffer TmTn + Tm + Tn, A read ceil(N/Tn) times, B ceil(M/Tm)
  A-panel resident Tm x N:   buffer Tm K + K + Tm,   A read once, B ceil(M/Tm) times
  B-panel resident M x Tn:   buffer Tn K + K + Tn,   A read ceil(N/Tn) times, B once
C is written once; a fused consumer needs a stream buffer of two output tiles (2 Tm Tn).
An elementwise kernel streams rows (its outer dim): buffer two rows of every tensor, output
stream two rows.

Fusion (one configuration c holds several kernels):
- an input fed by an edge from a kernel in c costs no DRAM; it is held whole in SRAM when
  the tile re-reads it (its traffic exceeds its size) or when it is a saved activation (a
  forward kernel's output read by a backward kernel: it lives from one pass to the other),
  else the producer's stream carries it;
- an output costs no DRAM when every consumer is in c; a producer with a consumer in c
  keeps its output stream buffer;
- SRAM of c = sum of members' buffers + streams + held inputs <= the chip's SRAM.

Sharding over p chips (p = the number of chips: an explicit graph spreads over one group):
a dim of size >= p is split in ceil(size/p) pieces; FLOP scale with the per-chip share.
Splitting a GEMM's reduction dim K leaves partial sums: all-reduced (output whole on every
chip), or reduce-scattered ("+rs", output split along its first dim of size >= p), each on
the whole output. An edge whose producer leaves its output split along one axis and whose
consumer needs another split pays an all-to-all of the whole tensor, or an all-gather when
the consumer needs it whole; a whole (replicated) output is sliced for free. One produced
tensor pays each distinct target layout once, in the earliest configuration that holds a
consumer needing it.

Collectives on one level of p chips, per step latency a = level latency + calibrated step
latency, bandwidth b = link bandwidth x bus efficiency, steps s = 1 (switch) or p - 1 (ring):
  all-reduce 2(p-1)/p S/b + 2 s a; all-gather, reduce-scatter (p-1)/p S/b + s a;
  all-to-all (S/p per chip) switch (p-1)/p (S/p)/b + s a, ring floor(p^2/4)/(2p) (S/p)/b + s a
  (bidirectional: each chunk the short way round, over a chip's two outgoing links).
Two levels compose hierarchically (collective_s).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from independent.instances import Instance, Link, Machine, Op


@dataclass(frozen=True)
class Sharding:
    dim: str | None  # split loop dim; None = every chip computes the whole kernel
    scatter: bool = False  # a split reduction dim whose partial sums are reduce-scattered

    @property
    def label(self) -> str:
        if self.dim is None:
            return "none"
        return self.dim + ("+rs" if self.scatter else "")


@dataclass(frozen=True)
class Tile:
    family: str  # "os" | "a_res" | "b_res" | "stream"
    tm: int
    tn: int
    buffer_bytes: float
    traffic: tuple[tuple[str, float], ...]  # DRAM bytes per tensor, this tile, no fusion
    sizes: tuple[tuple[str, float], ...]  # compulsory bytes per tensor (per chip)
    stream_bytes: float  # output stream buffer when a consumer is fused


def parse_sharding(label: str) -> Sharding:
    if label == "none":
        return Sharding(None)
    if label.endswith("+rs"):
        return Sharding(label[:-3], True)
    return Sharding(label)


def shardings(op: Op, p: int) -> list[Sharding]:
    """Replicated, every dim of size >= p, and for a reduction dim also its '+rs' form."""
    out = [Sharding(None)]
    if p <= 1:
        return out
    for d, size in op.dims:
        if size < p:
            continue
        out.append(Sharding(d))
        if d not in op.out.axes and _scatter_axis(op, p) is not None:
            out.append(Sharding(d, True))
    return out


def _scatter_axis(op: Op, p: int) -> int | None:
    sizes = op.size
    return next((i for i, a in enumerate(op.out.axes) if sizes[a] >= p), None)


def local_sizes(op: Op, sh: Sharding, p: int) -> dict[str, int]:
    sizes = op.size
    if sh.dim is not None and p > 1:
        sizes[sh.dim] = -(-sizes[sh.dim] // p)
    return sizes


def out_axis(op: Op, sh: Sharding, p: int) -> int | None:
    """Axis of the output tensor it is left split along (None = whole on every chip)."""
    if sh.dim is None or p <= 1:
        return None
    if sh.scatter:
        return _scatter_axis(op, p)
    axes = op.out.axes
    return axes.index(sh.dim) if sh.dim in axes else None


def need_axis(op: Op, operand: str, sh: Sharding) -> int | None:
    """Axis of `operand` the consumer needs split (None = whole)."""
    axes = op.tensor(operand).axes
    return axes.index(sh.dim) if sh.dim is not None and sh.dim in axes else None


def _bytes(op: Op, name: str, sizes: dict[str, int]) -> float:
    t = op.tensor(name)
    return math.prod(sizes[a] for a in t.axes) * t.bytes_per_element


# --------------------------------------------------------------------------------------
# Compute and network
# --------------------------------------------------------------------------------------


def compute_s(op: Op, sh: Sharding, m: Machine) -> float:
    """FLOP per chip over the achievable rate, plus the fixed per-kernel overhead."""
    full, local = op.size, local_sizes(op, sh, m.chips)
    share = math.prod(local.values()) / math.prod(full.values())
    rate = m.matrix_flops * m.gemm_util if op.kind == "gemm" else m.vector_flops * m.vector_util
    return op.flop * share / rate + m.overhead_s


def level_s(kind: str, size: float, level: tuple[str, int, float, float], m: Machine) -> float:
    """One collective over the p chips of one level (module docstring)."""
    topology, p, link_Bps, latency_s = level
    if p <= 1 or size <= 0:
        return 0.0
    a = latency_s + m.step_latency_s
    b = link_Bps * m.bus_util
    steps = 1 if topology == "SWITCH" else p - 1
    if kind == "all_reduce":
        return 2 * (p - 1) / p * size / b + 2 * steps * a
    if kind in ("all_gather", "reduce_scatter"):
        return (p - 1) / p * size / b + steps * a
    assert kind == "all_to_all", kind
    per_chip = size / p
    if topology == "RING":
        return p * p // 4 / (2 * p) * per_chip / b + steps * a  # bidirectional ring
    return (p - 1) / p * per_chip / b + steps * a


def collective_s(kind: str, size: float, m: Machine) -> float:
    """Over every chip: one level, or two levels (inner of p_in chips, outer of p_out).
    Two levels compose as the textbook hierarchical algorithms: an all-reduce is a
    reduce-scatter inside, an all-reduce across on the 1/p_in share, an all-gather inside;
    a reduce-scatter (all-gather) runs inside on S (last) and across on S/p_in; an
    all-to-all exchanges at each level (p_l - 1)/p_l of the S/p each chip holds."""
    levels = m.levels
    if len(levels) == 1:
        return level_s(kind, size, levels[0], m)
    inner, outer = levels
    share = size / inner[1]
    if kind == "all_reduce":
        return (
            level_s("reduce_scatter", size, inner, m)
            + level_s("all_reduce", share, outer, m)
            + level_s("all_gather", size, inner, m)
        )
    if kind in ("reduce_scatter", "all_gather"):
        return level_s(kind, size, inner, m) + level_s(kind, share, outer, m)
    per_chip = size / (inner[1] * outer[1])
    return sum(level_s(kind, per_chip * lv[1], lv, m) for lv in levels)


def own_network_s(op: Op, sh: Sharding, m: Machine) -> float:
    """A split reduction dim: the whole output is all-reduced (or reduce-scattered)."""
    if sh.dim is None or m.chips <= 1 or sh.dim in op.out.axes:
        return 0.0
    kind = "reduce_scatter" if sh.scatter else "all_reduce"
    return collective_s(kind, _bytes(op, op.out.name, op.size), m)


def conversion(inst: Instance, e: Link, s_src: Sharding, s_dst: Sharding) -> tuple[object, float]:
    """(target layout, seconds) of the tensor on edge e: the layout is the consumer's needed
    axis (positions match between the producer's output and the consumer's operand)."""
    src, dst, m = inst.ops[e.src], inst.ops[e.dst], inst.machine
    need = need_axis(dst, e.operand, s_dst)
    have = out_axis(src, s_src, m.chips)
    if have is None or need == have:
        return need, 0.0
    kind = "all_gather" if need is None else "all_to_all"
    return need, collective_s(kind, _bytes(src, src.out.name, src.size), m)


# --------------------------------------------------------------------------------------
# Tiles
# --------------------------------------------------------------------------------------


def gemm_tile(
    op: Op,
    local: tuple[tuple[str, int], ...],
    family: str,
    tm: int,
    tn: int,
    size: dict[str, float] | None = None,
) -> Tile:
    """One tile's buffer, per-tensor traffic and output stream (module docstring). `size`:
    the per-chip bytes of each tensor, {name: _bytes(op, name, dict(local))}, when the
    caller has them (tiles() builds thousands of tiles of one kernel)."""
    sizes = dict(local)
    (_, big_m), (_, big_k), (_, big_n) = local
    a, b = op.inputs
    c = op.out
    elem = max(t.bytes_per_element for t in op.tensors)
    pm, pn = -(-big_m // tm), -(-big_n // tn)
    if family == "os":
        buf, ra, rb = tm * tn + tm + tn, pn, pm
    elif family == "a_res":
        assert tn == big_n
        buf, ra, rb = tm * big_k + big_k + tm, 1, pm
    else:
        assert family == "b_res" and tm == big_m
        buf, ra, rb = tn * big_k + big_k + tn, pn, 1
    if size is None:
        size = {t.name: _bytes(op, t.name, sizes) for t in op.tensors}
    traffic = {a.name: size[a.name] * ra, b.name: size[b.name] * rb, c.name: size[c.name]}
    return Tile(
        family,
        tm,
        tn,
        buf * elem,
        tuple(sorted(traffic.items())),
        tuple(sorted(size.items())),
        2 * tm * tn * c.bytes_per_element,
    )


def stream_tile(op: Op, local: tuple[tuple[str, int], ...]) -> Tile:
    sizes = dict(local)
    rows = sizes[op.dims[0][0]]
    size = {t.name: _bytes(op, t.name, sizes) for t in op.tensors}
    items = tuple(sorted(size.items()))
    return Tile(
        "stream", 0, 0, 2 * sum(size.values()) / rows, items, items, 2 * size[op.out.name] / rows
    )


@functools.cache
def tiles(op: Op, local: tuple[tuple[str, int], ...], sram_bytes: float) -> tuple[Tile, ...]:
    """Every integer tile that fits the SRAM, less the ones another tile beats or ties on
    every cost the model charges. Exact reductions: (1) for one family and one pair of pass
    counts the smallest tile has the same traffic and no more buffer or stream; (2) every
    cost (DRAM bytes, SRAM, whether a fused input is re-read) is non-decreasing in (buffer,
    A traffic, B traffic, stream), so a tile dominated in those four is never needed."""
    if op.kind != "gemm":
        t = stream_tile(op, local)
        return (t,) if t.buffer_bytes <= sram_bytes else ()
    (_, big_m), _, (_, big_n) = local
    best: dict[tuple, Tile] = {}
    # (1) up front: the smallest tile of each pass count p is ceil(size / p)
    size = {t.name: _bytes(op, t.name, dict(local)) for t in op.tensors}
    ms, ns = _smallest_per_pass(big_m), _smallest_per_pass(big_n)
    cands = [("os", tm, tn) for tm in ms for tn in ns]
    cands += [("a_res", tm, big_n) for tm in ms]
    cands += [("b_res", big_m, tn) for tn in ns]
    for fam, tm, tn in cands:
        if _buffer_bytes(op, local, fam, tm, tn) > sram_bytes:
            continue  # gemm_tile's buffer, computed alone: the tile would not fit
        t = gemm_tile(op, local, fam, tm, tn, size)
        key = (fam, -(-big_m // tm), -(-big_n // tn))
        old = best.get(key)
        if old is None or (t.buffer_bytes, t.stream_bytes) < (old.buffer_bytes, old.stream_bytes):
            best[key] = t
    pts = [(_vec(op, t), t) for t in best.values()]
    if not pts:
        return ()
    # (2): tile i goes when some j is <= on all four and differs, or ties with j < i. In
    # (vector, index) order every such j comes before i, and i goes exactly when an earlier
    # tile is <= on all four; an earlier tile that went has a kept beater <= i too. So
    # each block of that order is compared with itself and with the tiles kept before it.
    order = sorted(range(len(pts)), key=lambda i: (pts[i][0], i))
    vec = np.array([pts[i][0] for i in order], dtype=float)
    kept = vec[:0]
    beaten = np.zeros(len(pts), dtype=bool)
    for start in range(0, len(order), _BLOCK):
        block = vec[start : start + _BLOCK]
        earlier = np.triu(np.ones((len(block), len(block)), dtype=bool), k=1)  # [j, i]: j < i
        out = ((block[:, None, :] <= block[None, :, :]).all(axis=2) & earlier).any(axis=0)
        if len(kept):
            out |= (kept[:, None, :] <= block[None, :, :]).all(axis=2).any(axis=0)
        beaten[order[start : start + _BLOCK]] = out
        kept = np.concatenate([kept, block[~out]])
    return tuple(t for (_, t), out in zip(pts, beaten) if not out)


_BLOCK = 256  # tiles compared at once in tiles()' step (2)


def _buffer_bytes(op: Op, local: tuple[tuple[str, int], ...], family: str, tm: int, tn: int):
    """gemm_tile(op, local, family, tm, tn).buffer_bytes, without the rest of the tile."""
    (_, big_m), (_, big_k), (_, big_n) = local
    elem = max(t.bytes_per_element for t in op.tensors)
    if family == "os":
        buf = tm * tn + tm + tn
    elif family == "a_res":
        buf = tm * big_k + big_k + tm
    else:
        buf = tn * big_k + big_k + tn
    return buf * elem


def _smallest_per_pass(size: int) -> list[int]:
    """The smallest tile t with ceil(size / t) = p, for every pass count p reachable."""
    return sorted({-(-size // p) for p in range(1, size + 1)})


def _vec(op: Op, t: Tile) -> tuple[float, ...]:
    traffic = dict(t.traffic)
    a, b = op.inputs
    return (t.buffer_bytes, traffic[a.name], traffic[b.name], t.stream_bytes)


# --------------------------------------------------------------------------------------
# One kernel inside one configuration, and a whole plan
# --------------------------------------------------------------------------------------


def kernel_in_config(
    inst: Instance, k: int, t: Tile, members: frozenset[int]
) -> tuple[float, float]:
    """(DRAM bytes, SRAM bytes) of kernel k with tile t when `members` share its
    configuration (module docstring, fusion)."""
    op = inst.ops[k]
    fed = {e.operand for e in inst.links if e.dst == k and e.src in members}
    outs = [e.dst for e in inst.links if e.src == k]
    traffic, size = dict(t.traffic), dict(t.sizes)
    dram = 0.0
    sram = t.buffer_bytes
    saved = {
        e.operand
        for e in inst.links
        if e.dst == k and e.src in members and op.backward and not inst.ops[e.src].backward
    }
    for x in op.inputs:
        if x.name in fed:
            if x.name in saved or traffic[x.name] > size[x.name] * (1 + 1e-12):
                sram += size[x.name]
        else:
            dram += traffic[x.name]
    if not (outs and all(v in members for v in outs)):
        dram += traffic[op.out.name]
    if any(v in members for v in outs):
        sram += t.stream_bytes
    return dram, sram


def charged_network(inst: Instance, assign: list[int], shard: list[Sharding]) -> dict[int, float]:
    """Network seconds per configuration: own collectives and layout conversions (each
    distinct target layout of a produced tensor once, at its earliest consumer's config)."""
    net: dict[int, float] = {}
    for k, op in enumerate(inst.ops):
        net[assign[k]] = net.get(assign[k], 0.0) + own_network_s(op, shard[k], inst.machine)
    where: dict[tuple[int, object], tuple[int, float]] = {}
    for e in inst.links:
        layout, sec = conversion(inst, e, shard[e.src], shard[e.dst])
        if sec <= 0:
            continue
        key = (e.src, layout)
        c = assign[e.dst]
        if key not in where or c < where[key][0]:
            where[key] = (c, sec)
    for c, sec in where.values():
        net[c] = net.get(c, 0.0) + sec
    return net


def combine(c: float, mem: float, net: float, overlap: bool) -> float:
    return max(c, mem, net) if overlap else c + mem + net


def plan_latency(
    inst: Instance, assign: list[int], shard: list[Sharding], tile: list[Tile]
) -> float:
    """Latency of one complete mapping (inf when a configuration overflows SRAM)."""
    m = inst.machine
    net = charged_network(inst, assign, shard)
    total = 0.0
    for c in sorted(set(assign)):
        members = frozenset(k for k in range(len(inst.ops)) if assign[k] == c)
        comp = dram = sram = 0.0
        for k in sorted(members):
            comp += compute_s(inst.ops[k], shard[k], m)
            d, s = kernel_in_config(inst, k, tile[k], members)
            dram += d
            sram += s
        if sram > m.sram_bytes * (1 + 1e-9):
            return math.inf
        total += combine(comp, dram / (m.dram_Bps * m.dram_util), net.get(c, 0.0), inst.overlap)
    return total
