"""The data-movement frontier of a GEMM: least DRAM traffic for a given on-chip buffer.

C[M,N] = A[M,K] B[K,N], buffer of S elements, C written once. Three tiling families, integer
tiles, ceiling pass counts (DESIGN.md; equal to the Orojenesis attainable frontier):
  output-stationary  Q = MN + MK*ceil(N/Tn) + KN*ceil(M/Tm),  Tm*Tn + Tm + Tn <= S
  A-panel resident   Q = MK + MN + KN*ceil(M/Tm),             Tm*K + K + Tm   <= S
  B-panel resident   Q = KN + MN + MK*ceil(N/Tn),             Tn*K + K + Tn   <= S
Only tile sizes that are the smallest for their pass count matter (Tm = ceil(M/p)), so the
candidates are the O(sqrt(M)) distinct ceilings, which keeps enumeration exact and fast.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

import numpy as np

from schema.tiles import TILE_FAMILIES


@dataclass(frozen=True)
class TilePoint:
    """One point of the frontier, in elements."""

    buffer: int  # on-chip elements used
    traffic: int  # DRAM elements moved (A + B + C)
    a_traffic: int
    b_traffic: int
    c_traffic: int
    family: str  # "output_stationary" | "a_resident" | "b_resident"
    tile_m: int
    tile_n: int

    def describe(self) -> str:
        return f"{self.family}:Tm={self.tile_m},Tn={self.tile_n}"


def pass_tiles(size: int) -> np.ndarray:
    """Smallest tile for every distinct pass count ceil(size/t), ascending."""
    size = int(size)
    root = math.isqrt(size) + 1
    p = np.arange(1, root + 1, dtype=np.int64)
    t = np.arange(1, root + 1, dtype=np.int64)
    cand = np.concatenate([-(-size // p), t])
    cand = cand[(cand >= 1) & (cand <= size)]
    passes = -(-size // cand)
    return np.unique(-(-size // passes))


def _candidates(m: int, k: int, n: int) -> tuple[np.ndarray, ...]:
    """All candidate tilings as arrays: buffer, a, b, c traffic, family code, Tm, Tn."""
    tm, tn = pass_tiles(m), pass_tiles(n)
    pm, pn = -(-m // tm), -(-n // tn)
    TM, TN = (x.ravel() for x in np.meshgrid(tm, tn, indexing="ij"))
    PM, PN = (x.ravel() for x in np.meshgrid(pm, pn, indexing="ij"))
    os_buf = TM * TN + TM + TN
    os_a, os_b = m * k * PN, k * n * PM
    ar_buf, ar_a, ar_b = tm * k + k + tm, np.full_like(tm, m * k), k * n * pm
    br_buf, br_a, br_b = tn * k + k + tn, m * k * pn, np.full_like(tn, k * n)
    buf = np.concatenate([os_buf, ar_buf, br_buf])
    a = np.concatenate([os_a, ar_a, br_a])
    b = np.concatenate([os_b, ar_b, br_b])
    fam = np.concatenate(
        [np.zeros(len(os_buf), np.int64), np.ones(len(tm), np.int64), np.full(len(tn), 2)]
    )
    tile_m = np.concatenate([TM, tm, np.full_like(tn, m)])
    tile_n = np.concatenate([TN, np.full_like(tm, n), tn])
    return buf, a, b, fam, tile_m, tile_n


_FAMILIES = TILE_FAMILIES  # the words a pin (schema.tiles) and plan.txt use


def _point(tiles: tuple[np.ndarray, ...], i: int, c_elements: int) -> TilePoint:
    """Candidate i of `_candidates`' arrays (buffer, a, b, family, Tm, Tn) as a TilePoint;
    its traffic is a + b + the output written once (`c_elements`)."""
    buf, a, b, fam, tm, tn = tiles
    return TilePoint(
        int(buf[i]),
        int(a[i] + b[i] + c_elements),
        int(a[i]),
        int(b[i]),
        c_elements,
        _FAMILIES[fam[i]],
        int(tm[i]),
        int(tn[i]),
    )


@functools.lru_cache(maxsize=4096)
def gemm_frontier(m: int, k: int, n: int) -> tuple[TilePoint, ...]:
    """Pareto frontier (buffer ascending, traffic strictly descending)."""
    m, k, n = int(m), int(k), int(n)
    buf, a, b, fam, tm, tn = _candidates(m, k, n)
    traffic = a + b + m * n
    order = np.lexsort((fam, traffic, buf))
    best = np.minimum.accumulate(traffic[order])
    keep = np.ones(len(order), dtype=bool)
    keep[1:] = best[1:] < best[:-1]
    out = [_point((buf, a, b, fam, tm, tn), int(i), m * n) for i in order[keep]]
    return tuple(out)


def menu(m: int, k: int, n: int, buffer_elements: float, size: int = 12) -> list[TilePoint]:
    """A menu of frontier points that fit the buffer: the compulsory-traffic end, the
    largest point that fits, and log-spaced points in between (always the best fitting one)."""
    front = [p for p in gemm_frontier(m, k, n) if p.buffer <= buffer_elements]
    if len(front) <= size:
        return front
    buffers = np.array([p.buffer for p in front], dtype=float)
    targets = np.geomspace(buffers[0], buffers[-1], size)
    chosen = {int(np.searchsorted(buffers, t, side="right") - 1) for t in targets}
    chosen.add(len(front) - 1)
    chosen.add(0)
    return [front[i] for i in sorted(chosen)]


@functools.lru_cache(maxsize=4096)
def best_fit(m: int, k: int, n: int, buffer_elements: float) -> tuple[TilePoint, ...]:
    """The frontier point with the largest buffer that fits (the least traffic), as
    `menu(m, k, n, buffer_elements, size=1)[-1:]`, without building the whole frontier.

    Why it is the same point: the frontier keeps, in (buffer, traffic, family, candidate
    order) order, each candidate that lowers the running least traffic, so its last point
    within the buffer is the first candidate in that order reaching the least traffic among
    those that fit. For an output-stationary Tm, a smaller Tn than the largest pass tile
    that fits has more passes over A, so strictly more traffic: only that largest Tn can
    reach the least traffic, and the other (Tm, Tn) pairs are never built (O(sqrt(M))
    candidates instead of O(sqrt(M) sqrt(N)))."""
    m, k, n = int(m), int(k), int(n)
    tm, tn = pass_tiles(m), pass_tiles(n)
    pm, pn = -(-m // tm), -(-n // tn)
    # output-stationary: per Tm, the largest Tn with Tm*Tn + Tm + Tn <= S
    room = (buffer_elements - tm) / (tm + 1)
    j = np.searchsorted(tn, np.floor(np.maximum(room, 0.0)), side="right") - 1
    ok = j >= 0
    i_os, j_os = np.nonzero(ok)[0], j[ok]
    TM, TN, PM, PN = tm[i_os], tn[j_os], pm[i_os], pn[j_os]
    buf = np.concatenate([TM * TN + TM + TN, tm * k + k + tm, tn * k + k + tn])
    a = np.concatenate([m * k * PN, np.full_like(tm, m * k), m * k * pn])
    b = np.concatenate([k * n * PM, k * n * pm, np.full_like(tn, k * n)])
    fam = np.concatenate(
        [np.zeros(len(TM), np.int64), np.ones(len(tm), np.int64), np.full(len(tn), 2)]
    )
    # the candidate's position in `_candidates` (meshgrid of tm x tn, then tm, then tn)
    n_os = len(tm) * len(tn)
    order = np.concatenate([i_os * len(tn) + j_os, n_os + np.arange(len(tm)),
                            n_os + len(tm) + np.arange(len(tn))])  # fmt: skip
    tile_m = np.concatenate([TM, tm, np.full_like(tn, m)])
    tile_n = np.concatenate([TN, np.full_like(tm, n), tn])
    fits = np.nonzero(buf <= buffer_elements)[0]
    if len(fits) == 0:
        return ()
    traffic = a + b + m * n
    least = fits[traffic[fits] == traffic[fits].min()]
    i = least[np.lexsort((order[least], fam[least], buf[least]))[0]]
    point = TilePoint(
        int(buf[i]), int(traffic[i]), int(a[i]), int(b[i]), m * n, _FAMILIES[fam[i]],
        int(tile_m[i]), int(tile_n[i]),
    )  # fmt: skip
    return (point,)


# --------------------------------------------------------------------------------------
# Menus that stay optimal when operands are fused (project issue #14)
# --------------------------------------------------------------------------------------
# Inside a fused configuration an operand fed over an in-configuration edge costs no DRAM
# traffic, but (solver/check.py, the fused-operand rule) takes its whole size in SRAM when
# the tiling re-reads it (its traffic exceeds its compulsory size), or always when it is a
# saved activation; a fused output takes the stream buffer 2*Tm*Tn. So a tile's cost in a
# configuration depends on each operand's status:
#   A, B in {dram, fused, held}, C in {dram, fused}
#   sram(t)    = buffer(t) + [A fused and a(t) > MK]*MK + [A held]*MK      (same for B, KN)
#                          + [C fused]*2*Tm*Tn
#   traffic(t) = [A dram]*a(t) + [B dram]*b(t)      (+ MN, the same for every tile)
# A tile can be optimal in some configuration only if it is on the (sram, traffic) Pareto
# frontier of some status; the menu is the union of those frontiers over the statuses the
# kernel's operands can have. A status frontier of at most EXACT_FRONTIER_FACTOR * size points is
# kept whole, so on such shapes the menu is exact: it holds every tile that is optimal for
# some status (a tile dominated in (buffer, a, b, Tm*Tn) is never needed, and every status
# cost is monotone in those four). A longer frontier (large GEMMs: hundreds to thousands of
# points) keeps its two extremes (least buffer, least traffic) and is sampled log-evenly
# along its buffer axis (the all-DRAM status with `size` points, every fused status with
# max(2, size // 4)), so the menu stays within about twice `size`; such a menu may miss a
# tile that a fused configuration would prefer. (Sampling every frontier that way made the
# independent brute force of tests/independent/ find plans up to 19% faster on small
# shapes.)

# Kept whole up to this many times `size`: 24 points at the default 10, above the longest
# per-status frontier of the independent brute force's instances (23) and below the 25+
# of the DFModel GPT-3 1T gallery GEMMs, whose menus would otherwise grow ~60% and slow
# its fusion search; at the small sizes other tests pass (2-4) menus stay small.
EXACT_FRONTIER_FACTOR = 2.4

DRAM, FUSED, HELD = "dram", "fused", "held"


def _pareto_2d(sram: np.ndarray, traffic: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Indices (of idx) on the (sram, traffic) frontier, sram ascending, traffic descending."""
    # every frontier point lies in the box between the two extremes (no more traffic than
    # the least-SRAM point, no more SRAM than the least-traffic point): an O(n) cut first
    s, t = sram[idx], traffic[idx]
    t0 = t[s == s.min()].min()
    s1 = s[t == t.min()].min()
    idx = idx[(t <= t0) & (s <= s1)]
    order = idx[np.lexsort((traffic[idx], sram[idx]))]
    t = traffic[order]
    best_before = np.minimum.accumulate(np.concatenate(([np.inf], t[:-1])))
    return order[t < best_before]


def _sample(front: np.ndarray, sram_at_front: np.ndarray, size: int) -> list[int]:
    """At most ~size indices of a frontier (`sram_at_front`: the SRAM at each of its points):
    both extremes and log-spaced buffers between."""
    if len(front) <= size:
        return [int(i) for i in front]
    buffers = sram_at_front.astype(float)
    lo = max(buffers[0], 1.0)
    targets = np.geomspace(lo, max(buffers[-1], lo), size)
    chosen = {int(np.searchsorted(buffers, t, side="right") - 1) for t in targets}
    chosen |= {0, len(front) - 1}
    return [int(front[i]) for i in sorted(c for c in chosen if c >= 0)]


def fusion_menu(
    m: int,
    k: int,
    n: int,
    buffer_elements: float,
    size: int = 12,
    a_states: tuple[str, ...] = (DRAM,),
    b_states: tuple[str, ...] = (DRAM,),
    c_states: tuple[str, ...] = (DRAM,),
) -> tuple[TilePoint, ...]:
    """Tiles that fit `buffer_elements` and can be optimal for some status of the operands
    (the states each operand may take: DRAM, FUSED, HELD; see the comment above), by
    increasing buffer. With every state DRAM it is `menu`'s total-traffic frontier."""
    return fusion_points(m, k, n, buffer_elements, size, a_states, b_states, c_states)[0]


@functools.lru_cache(maxsize=1024)
def fusion_points(
    m: int,
    k: int,
    n: int,
    buffer_elements: float,
    size: int,
    a_states: tuple[str, ...],
    b_states: tuple[str, ...],
    c_states: tuple[str, ...],
) -> tuple[tuple[TilePoint, ...], bool]:
    """fusion_menu and whether it sampled a status frontier (so it may miss a tile that
    some fused configuration would prefer). Cached (layers repeat their shapes)."""
    m, k, n = int(m), int(k), int(n)
    found = _status_fronts((m, k, n), buffer_elements, (a_states, b_states, c_states))
    if found is None:
        return (), False
    (buf, a, b, fam, tm, tn), fronts = found
    chosen: set[int] = set()
    sampled = False
    for status, front, sram_at_front in fronts:
        every = size if status == (DRAM, DRAM, DRAM) else max(2, size // 4)
        if len(front) <= EXACT_FRONTIER_FACTOR * size:
            every = len(front)  # short: every tile optimal for this status stays
        sampled = sampled or every < len(front)
        chosen.update(_sample(front, sram_at_front, every))
    # one tile per distinct (buffer, a, b, Tm*Tn): equal costs in every status
    unique: dict[tuple[int, int, int, int], int] = {}
    for i in sorted(chosen, key=lambda i: (buf[i], a[i] + b[i], fam[i], tm[i], tn[i])):
        unique.setdefault((int(buf[i]), int(a[i]), int(b[i]), int(tm[i] * tn[i])), i)
    points = tuple(_point((buf, a, b, fam, tm, tn), i, m * n) for i in unique.values())
    return points, sampled


@functools.lru_cache(maxsize=32)
def _status_fronts(
    shape: tuple[int, int, int],
    buffer_elements: float,
    states: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]],
) -> (
    tuple[tuple[np.ndarray, ...], tuple[tuple[tuple[str, str, str], np.ndarray, np.ndarray], ...]]
    | None
):
    """Per operand status, the (SRAM, traffic) frontier of the candidate tiles that fit
    alone; None when no tile fits. Shared by every menu size `fusion_points` samples (the
    tile groups keep each frontier whole, the menus sample it): computed once a shape, then
    kept small: the tiles on some frontier (buffer, a, b, family, Tm, Tn, in candidate
    order) and per status its frontier as indices into them with their SRAM there.
    `shape`: (M, K, N); `states`: the statuses of A, B and C."""
    m, k, n = shape
    a_states, b_states, c_states = states
    buf, a, b, fam, tm, tn = _candidates(m, k, n)
    fits = buf <= buffer_elements
    if not fits.any():
        return None
    # only the tiles that fit alone can fit with anything added: work on those
    buf, a, b, fam, tm, tn = (x[fits] for x in (buf, a, b, fam, tm, tn))
    fits = np.arange(len(buf))
    sizes = {"a": m * k, "b": k * n}
    fronts = []
    for sa in a_states:
        for sb in b_states:
            for sc in c_states:
                sram = buf.copy()
                traffic = np.zeros_like(buf)
                for state, q, full in ((sa, a, sizes["a"]), (sb, b, sizes["b"])):
                    if state == DRAM:
                        traffic = traffic + q
                    elif state == FUSED:
                        sram = sram + np.where(q > full, full, 0)
                    else:
                        sram = sram + full
                if sc == FUSED:
                    sram = sram + 2 * tm * tn
                ok = fits[sram[fits] <= buffer_elements]
                if not len(ok):
                    continue
                front = _pareto_2d(sram, traffic, ok)
                fronts.append(((sa, sb, sc), front, sram[front]))
    if not fronts:
        return (buf[:0], a[:0], b[:0], fam[:0], tm[:0], tn[:0]), ()
    kept = np.unique(np.concatenate([front for _, front, _ in fronts]))  # ascending
    compact = tuple((status, np.searchsorted(kept, front), sram) for status, front, sram in fronts)
    return (buf[kept], a[kept], b[kept], fam[kept], tm[kept], tn[kept]), compact


def tile_point(m: int, k: int, n: int, family: str, tile_m: int, tile_n: int) -> TilePoint | None:
    """The cost of one given tile (a pin from the input), by the same three formulas as the
    frontier; None when the tile is not a tile of this M x K x N (larger than the shape, or a
    resident panel that does not span the whole other side)."""
    m, k, n = int(m), int(k), int(n)
    if not (1 <= tile_m <= m and 1 <= tile_n <= n):
        return None
    pm, pn = -(-m // tile_m), -(-n // tile_n)
    if family == "output_stationary":
        buf, a, b = tile_m * tile_n + tile_m + tile_n, m * k * pn, k * n * pm
    elif family == "a_resident" and tile_n == n:
        buf, a, b = tile_m * k + k + tile_m, m * k, k * n * pm
    elif family == "b_resident" and tile_m == m:
        buf, a, b = tile_n * k + k + tile_n, m * k * pn, k * n
    else:
        return None
    return TilePoint(buf, a + b + m * n, a, b, m * n, family, tile_m, tile_n)


# Far above any status frontier's length: fusion_points keeps every frontier whole.
WHOLE = 1 << 30


@functools.lru_cache(maxsize=1024)
def tile_groups(
    m: int,
    k: int,
    n: int,
    buffer_elements: float,
    size: int,
    a_states: tuple[str, ...],
    b_states: tuple[str, ...],
    c_states: tuple[str, ...],
) -> tuple[tuple[TilePoint, ...], ...]:
    """Every tile of the exact menu (every frontier kept whole), in groups cut at the sampled
    menu's buffers: a group holds the tiles from one sampled buffer up to the next, so its
    first tile is (a cost twin of) a sampled one. Empty when nothing was sampled. Why: a
    group stands in a bound's search by its componentwise least costs, and a group the
    bound's plan leans on is opened tile by tile (solver.fusion.tile_refine)."""
    states = (a_states, b_states, c_states)
    sampled, was_sampled = fusion_points(m, k, n, buffer_elements, size, *states)
    if not was_sampled:
        return ()
    exact, _ = fusion_points(m, k, n, buffer_elements, WHOLE, *states)
    cuts = sorted({p.buffer for p in sampled})
    groups: dict[int, list[TilePoint]] = {}
    for p in exact:
        at = max(bisect.bisect_right(cuts, p.buffer) - 1, 0)
        groups.setdefault(at, []).append(p)
    return tuple(tuple(groups[at]) for at in sorted(groups))
