"""Fitting a chip's efficiency parameters to measurements, reproducibly.

The chip files' `efficiency` blocks cite the numbers this module computes from the
validation cases (tests/test_efficiency_fit.py checks they agree), so every fitted value
can be re-derived:
- dram_util: STREAM/BabelStream copy bandwidth / DRAM peak (memory_copy rows);
- gemm_util, gemm_half_dim, kernel_overhead_us, kernel_min_time_us and the wave tile
  (gemm_tile_m x gemm_tile_n, one of TILES): least mean |relative error| of the GEMM model
  against every GEMM point of the chip: the gemm rows, the same source's companion sizes
  in extra_params (also_<n>cube_flops, also_down_proj_s), and the separately timed GEMMs of
  layer rows (op_qkv_s, op_wo_s, op_w1_s, op_w2_s, op_qk_s, op_av_s). The model is the
  solver's kernel time, max(min time, overhead + max(compute at the
  `solver.cost.efficiency` fraction, compulsory DRAM bytes at the chip's copy bandwidth)),
  so a bandwidth-bound point constrains the overhead instead of being dropped, and the
  smallest GEMMs (launch-paced) set the min time instead of inflating the overhead that
  every larger kernel pays. Each source (the measurement campaign: its GitHub
  repository) weighs the same however many points it has: the A100 sources disagree by ~15%
  at like shapes (LLMCompass torch.matmul 0.87-0.92 of peak, cuBLASLt 0.81, vidur 0.77), and
  counting points let the one with the most points set the plateau. Precisions named in
  `split` get a plateau of their own (gemm_util_by_precision), the others share gemm_util;
- vector_util: least mean |relative error| of the solver's vector-kernel time,
  overhead + max(nominal FLOP / (vector peak x util), bytes / achievable DRAM bandwidth),
  against the softmax, LayerNorm and GeLU ops a layer_prefill row timed one by one (the
  nominal FLOP per element are the generator's, generator/ops.py);
- collective latency_us and bus_bw_at_size per scale-up level (alpha-beta, where a small
  message is measured): the latency floor of the smallest messages, and at each larger size
  the fraction of the link left once that latency is taken off (capped at 1: NVLS in-switch
  reduction exceeds the ring bound, see the chip files); chips without a small-message point
  keep the legacy bus_bw_util + half_bw_bytes (the largest size and the 64 MiB point).
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from generator.ops import ACT_FLOP, NORM_FLOP, SOFTMAX_FLOP
from hardware.resolve import resolve_system
from hardware.system import Chip, System
from mapshard.fidelity.cases import Case
from schema import setup_pb2
from solver.api import for_precision, gemm_compute_time

HALF_DIMS = tuple(range(0, 1025, 16))
OVERHEADS_US = tuple(x / 2 for x in range(0, 21))  # launch + fill/drain: 0-10 us
MIN_TIMES_US = tuple(x / 2 for x in range(0, 41))  # launch-rate floor of a GEMM: 0-20 us
UTILS = tuple(u / 1000 for u in range(400, 1001, 2))
# Per-multiprocessor output tiles of large-GEMM kernels: 128x256 (cuBLAS / CUTLASS on sm80 and
# sm90; one SM's half of Blackwell's 2-SM 256x256 MMA) and 128x128. A 256x256 FP32 accumulator
# (256 KiB) is a whole NVIDIA register file, so no NVIDIA SM runs one. Which tile a chip's
# wave model uses is fitted like the other parameters: the library's heuristic picks a tile
# per shape, and the tile whose waves best reproduce the chip's measured shapes stands for
# them. Ties go to the first.
TILES = ((128, 256), (128, 128))


@dataclass(frozen=True)
class GemmPoint:
    """One measured GEMM (`batch` independent ones): shape, precision, time, source."""

    source: str  # row id (+ companion key)
    m: int
    n: int
    k: int
    precision: str
    time_s: float
    batch: int = 1
    family: str = ""  # the measurement campaign (source repository); equal weight per family

    @property
    def flop(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch


def layer_op_points(c: Case) -> list[GemmPoint]:
    """The GEMMs a layer row timed one by one (LLMCompass's op_<name>_s keys), on one chip's
    tensor-parallel shard (t = tp): qkv = three [T, h] x [h, h/t] GEMMs (T = batch x
    tokens), wo [T, h/t] x [h/t, h], w1 [T, h] x [h, f/t], w2 [T, f/t] x [f/t, h]; the
    attention products are batched over batch x heads/t: qk [s, d] x [d, s], av [s, s] x
    [s, d] (d = head_dim, s = input_len). Prefill rows only: a decode step's GEMMs take
    tens of microseconds, which wall-clock timing fills with host launch overhead."""
    if c.kind != "layer_prefill" or "op_qkv_s" not in c.extra:
        return []
    t = max(c.int("tp", 1), 1)
    h, f, d = c.int("hidden"), c.int("ffn_hidden"), c.int("head_dim")
    b, heads, prec = c.int("batch", 1), c.int("heads"), c.text("precision")
    s = s_kv = c.int("input_len")
    tokens = b * s
    shapes = {  # key: (m, n, k, batch, calls)
        "op_qkv_s": (tokens, h // t, h, 1, 3),
        "op_wo_s": (tokens, h, h // t, 1, 1),
        "op_w1_s": (tokens, f // t, h, 1, 1),
        "op_w2_s": (tokens, h, f // t, 1, 1),
        "op_qk_s": (s, s_kv, d, b * heads // t, 1),
        "op_av_s": (s, d, s_kv, b * heads // t, 1),
    }
    out = []
    for key, (m, n, k, batch, calls) in shapes.items():
        if min(m, n, k, batch) > 0 and c.extra_float(key) > 0:
            time_s = c.extra_float(key) / calls
            out.append(GemmPoint(f"{c.id}:{key}", m, n, k, prec, time_s, batch))
    return out


_REPO = re.compile(r"[\w.-]+/[\w.-]+")


def family(c: Case) -> str:
    """The measurement campaign of a row: the first owner/name in its `source`."""
    found = _REPO.search(c.text("source"))
    return found.group(0) if found else c.text("source")


def gemm_points(cases: list[Case], chip: str, kernel_only: bool = False) -> list[GemmPoint]:
    """Every GEMM measurement of `chip`: rows plus their companion sizes; rows timed as
    kernel duration alone only with `kernel_only` (benchmarks/xla_gemm_fit.py's what-if)."""
    out = []
    for c in cases:
        if c.usable and c.text("chip") == chip:
            out.extend(replace(p, family=family(c)) for p in layer_op_points(c))
        if c.kind != "gemm" or not c.usable or c.text("chip") != chip:
            continue
        if c.kernel_only and not kernel_only:
            continue  # kernel-only timings: not what the fitted model prices (cases.py)
        m, k, n, prec, fam = c.int("m"), c.int("k"), c.int("n"), c.text("precision"), family(c)
        b, value = max(c.int("batch", 1), 1), c.measured or 0.0
        t = value if c.metric == "kernel_time_s" else 2.0 * b * m * n * k / value
        out.append(GemmPoint(c.id, m, n, k, prec, t, b, fam))
        for key, raw in sorted(c.extra.items()):
            cube = re.fullmatch(r"also_(\d+)cube_flops", key)
            if cube:
                d = int(cube.group(1))
                t = 2.0 * d**3 / float(raw)
                out.append(GemmPoint(f"{c.id}:{key}", d, d, d, prec, t, 1, fam))
            elif key == "also_down_proj_s":  # vidur mlp.csv: down_proj is (m, k=n/2) x (n/2, k)
                out.append(GemmPoint(f"{c.id}:{key}", m, k, n // 2, prec, float(raw), 1, fam))
    return out


def library_system(chip: str) -> System:
    """One chip of the hardware library, resolved as a setup naming it would be."""
    s = setup_pb2.Setup()
    s.system.chip = chip
    s.system.num_chip = 1
    return resolve_system(s, Path("library"))


def copy_Bps(system: System) -> float:
    """The chip's STREAM-copy bandwidth (the DRAM floor of the GEMM fit)."""
    return system.dram.bandwidth_Bps * (system.chip.efficiency.dram_util or 1.0)


def model_time(chip: Chip, p: GemmPoint, overhead_s: float) -> float:
    """Compute-side time of a GEMM point under the chip's efficiency model (the plateau of
    the point's precision, the min time less `overhead_s` as its floor)."""
    c = replace(chip, efficiency=replace(chip.efficiency, kernel_overhead_s=overhead_s))
    c = for_precision(c, p.precision)
    return overhead_s + gemm_compute_time(c, p.flop, chip.peak(p.precision), p.m, p.n, p.k, p.batch)


def memory_time(p: GemmPoint, dram_Bps: float) -> float:
    """Compulsory DRAM time of a point: A, B read and C written once (FP8 GEMMs take 1-byte
    inputs and write a 16-bit C, as cuBLASLt's FP8 GEMMs do)."""
    a = 1.0 if p.precision == "fp8" else 4.0 if p.precision in ("fp32", "tf32") else 2.0
    c = max(a, 2.0)
    return ((p.m * p.k + p.k * p.n) * a + p.m * p.n * c) * p.batch / dram_Bps


def family_weights(points: list[GemmPoint]) -> list[float]:
    """1 / (points of the same family): every measurement campaign weighs the same."""
    count: dict[str, int] = {}
    for p in points:
        count[p.family] = count.get(p.family, 0) + 1
    return [1.0 / count[p.family] for p in points]


@dataclass(frozen=True)
class GemmFit:
    gemm_util: float  # 0 when every point's precision has a plateau of its own
    gemm_half_dim: float
    kernel_overhead_us: float
    mean_abs_err: float
    max_abs_err: float
    points: tuple[GemmPoint, ...]
    by_precision: tuple[tuple[str, float], ...] = ()  # the split precisions' plateaus
    kernel_min_time_us: float = 0.0  # launch-rate floor (0 = none)
    tile: tuple[int, int] = (0, 0)  # (gemm_tile_m, gemm_tile_n): the wave tile, one of TILES


def fit_gemm(
    chip: Chip,
    points: list[GemmPoint],
    fix_overhead_us: float | None = None,
    fix_half_dim: float | None = None,
    split: tuple[str, ...] = (),
    copy_Bps: float = 0.0,
    fix_min_time_us: float | None = None,
    fix_tile: tuple[int, int] | None = None,
) -> GemmFit:
    """Grid search of (plateaus, gemm_half_dim, kernel_overhead_us, kernel_min_time_us, wave
    tile from TILES) minimising the family-weighted mean absolute relative time error over
    `points` of max(min time, overhead + max(compute, compulsory DRAM bytes / copy_Bps))
    (copy_Bps 0: no DRAM floor). Each precision in `split` gets its own plateau, the other
    points share gemm_util; for a given tile, roll-off, overhead and min time each group's
    best plateau is independent of the others'. Ties go to the earlier tile, then the smaller
    roll-off, overhead and min time (in that order). With fewer than three points only the
    plateau is determined: pass the others (taken from a chip of the same SM architecture).
    `mean_abs_err` is the plain (unweighted) mean."""
    assert points, "no GEMM points to fit"
    import numpy as np

    overheads = np.array(OVERHEADS_US if fix_overhead_us is None else (fix_overhead_us,))
    mins = np.array(MIN_TIMES_US if fix_min_time_us is None else (fix_min_time_us,))
    utils = np.array(UTILS)
    times = np.array([p.time_s for p in points])
    weights = np.array(family_weights(points))
    floor = np.array([memory_time(p, copy_Bps) if copy_Bps > 0 else 0.0 for p in points])
    keys = [p.precision if p.precision in split else "" for p in points]
    groups = {g: [i for i, k in enumerate(keys) if k == g] for g in dict.fromkeys(keys)}
    best: tuple | None = None
    halves = HALF_DIMS if fix_half_dim is None else (fix_half_dim,)
    plain = replace(
        chip.efficiency,
        gemm_util=1.0,
        gemm_util_by_precision=(),
        gemm_half_dim_by_precision=(),
        kernel_min_time_s=0.0,
    )
    tiles = TILES if fix_tile is None else (fix_tile,)
    for tile, half in itertools.product(tiles, halves):
        shape = replace(plain, gemm_half_dim=float(half), gemm_tile_m=tile[0], gemm_tile_n=tile[1])
        base = replace(chip, efficiency=shape)
        raw = np.array([model_time(base, p, 0.0) for p in points])
        work = np.maximum(raw[None, :] / utils[:, None], floor[None, :]) / times  # (util, pt)
        for ovh in overheads:
            # a min time at or below the overhead never binds: one candidate stands for them
            live = [0.0] + [m for m in mins if m > ovh] if mins[0] <= ovh else list(mins)
            busy = work + ovh * 1e-6 / times  # (util, point), relative to the measurement
            rel = np.maximum(busy[None], (np.array(live)[:, None] * 1e-6 / times)[:, None, :])
            errs = np.abs(rel - 1)  # (min time, util, point)
            total = np.zeros(len(live))
            pick = {}
            for g, idx in groups.items():
                sums = errs[..., idx] @ weights[idx]  # (min time, util)
                pick[g] = sums.argmin(axis=-1)
                total += sums.min(axis=-1)
            f = int(total.argmin())  # the first minimum: the smallest min time
            if best is None or total[f] < best[0] - 1e-12:
                chosen = {g: float(utils[pick[g][f]]) for g in groups}
                err = np.zeros(len(points))
                for g, idx in groups.items():
                    err[idx] = errs[f, pick[g][f], idx]
                min_us = live[f] if fix_min_time_us is None else fix_min_time_us
                best = (float(total[f]), float(half), float(ovh), float(min_us), chosen, err, tile)
    assert best is not None
    _, half, ovh, min_us, chosen, err, tile = best
    by_precision = tuple(sorted((g, u) for g, u in chosen.items() if g))
    return GemmFit(
        chosen.get("", 0.0),
        half,
        ovh,
        float(err.mean()),
        float(err.max()),
        tuple(points),
        by_precision,
        min_us,
        tile,
    )


VECTOR_UTILS = tuple(u / 1000 for u in range(5, 1001))


@dataclass(frozen=True)
class VectorPoint:
    """One measured elementwise/normalisation op: nominal FLOP, DRAM bytes, time."""

    source: str
    flop: float
    bytes_: float
    time_s: float


def vector_points(cases: list[Case], chip: str) -> list[VectorPoint]:
    """The vector ops layer_prefill rows of `chip` timed one by one (op_softmax_s over the
    b x heads/t x s x s scores; op_ln0_s, op_ln1_s LayerNorms over T x h; op_gelu_s over
    T x f/t; t = tp, T = b x s), each element read and written once at 2 bytes."""
    out = []
    for c in cases:
        if c.kind != "layer_prefill" or not c.usable or c.text("chip") != chip:
            continue
        t = max(c.int("tp", 1), 1)
        b, s, h, f = c.int("batch", 1), c.int("input_len"), c.int("hidden"), c.int("ffn_hidden")
        ops = {
            "op_softmax_s": (b * c.int("heads") // t * s * s, SOFTMAX_FLOP),
            "op_ln0_s": (b * s * h, NORM_FLOP["layer"]),
            "op_ln1_s": (b * s * h, NORM_FLOP["layer"]),
            "op_gelu_s": (b * s * f // t, ACT_FLOP),
        }
        for key, (elements, per_element) in ops.items():
            if elements > 0 and c.extra_float(key) > 0:
                out.append(
                    VectorPoint(
                        f"{c.id}:{key}", per_element * elements, 4.0 * elements, c.extra_float(key)
                    )
                )
    return out


def fit_vector_util(
    points: list[VectorPoint], vector_flops: float, dram_Bps: float, overhead_s: float
) -> tuple[float, float]:
    """(util, mean |relative error|): the vector_util that best reproduces `points` with the
    solver's kernel time overhead + max(flop / (vector_flops x util), bytes / dram_Bps)."""
    assert points, "no vector points to fit"
    best = (math.inf, 1.0)
    for u in VECTOR_UTILS:
        err = sum(
            abs((overhead_s + max(p.flop / (vector_flops * u), p.bytes_ / dram_Bps)) / p.time_s - 1)
            for p in points
        ) / len(points)
        if err < best[0] - 1e-12:
            best = (err, u)
    return best[1], best[0]


def fit_dram_util(cases: list[Case], chip: str, dram_Bps: float) -> tuple[float, list[str]]:
    """Mean measured copy bandwidth / peak over the chip's memory_copy rows."""
    rows = [
        c
        for c in cases
        if c.kind == "memory_copy" and c.usable and c.text("chip") == chip and c.measured
    ]
    if not rows:
        return 0.0, []
    return sum(c.measured / dram_Bps for c in rows) / len(rows), [c.id for c in rows]


@dataclass(frozen=True)
class CollectiveFit:
    bus_bw_util: float
    half_bw_bytes: float  # legacy curve, only where no small message is measured
    uncapped_util: float
    sources: tuple[str, ...]
    latency_us: float = 0.0  # alpha per step, from the smallest measured messages
    curve: tuple[tuple[float, float], ...] = ()  # (message bytes, fraction of the link)


SMALL_MESSAGE = 2**12  # at or below: the time is the latency floor
_ALSO = re.compile(r"also_(busbw|time)_(\d+)(B|KiB|MiB|GiB)_(Bps|s)$")
_UNIT = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def _busbw(c: Case) -> float:
    """Bus bandwidth of a collective row (time rows converted with the nccl-tests rule)."""
    if c.metric == "bus_bandwidth_Bps":
        return c.measured or 0.0
    n = c.int("num_chips")
    t = c.measured or math.inf
    return c.float("message_bytes") / t * 2 * (n - 1) / n


def _busbw_64mib(c: Case) -> float:
    if "also_busbw_64MiB_Bps" in c.extra:
        return c.extra_float("also_busbw_64MiB_Bps")
    if "also_time_64MiB_s" in c.extra:
        n = c.int("num_chips")
        return 2**26 / c.extra_float("also_time_64MiB_s") * 2 * (n - 1) / n
    return 0.0


def all_reduce_points(c: Case) -> dict[float, float]:
    """{message bytes: nccl-tests bus bandwidth} of a row: its value and the same sweep's
    companion sizes in extra_params (also_busbw_<size>_Bps, also_time_<size>_s)."""
    n = c.int("num_chips")
    out = {c.float("message_bytes"): _busbw(c)}
    for key in c.extra:
        m = _ALSO.match(key)
        if not m:
            continue
        size = float(int(m.group(2)) * _UNIT[m.group(3)])
        v = c.extra_float(key)
        out[size] = v if m.group(1) == "busbw" else size / v * 2 * (n - 1) / n
    return out


def fit_collective(cases: list[Case], chip: str, link_Bps: float) -> CollectiveFit | None:
    """Scale-up all-reduce efficiency of one switch / fully-connected level (one latency
    step per phase: 2 per all-reduce).

    With a small-message point (<= 4 KiB): alpha-beta, latency_us = the mean of the small
    messages' time / 2, and at every larger measured size the fraction of the link reached
    once the latency is taken off, bus bytes / (t - 2 latency) / link (mean over rows at
    that size, capped at 1); bus_bw_util is the largest size's. Without one: the legacy
    form, bus_bw_util = bus bandwidth at the largest size / link, half_bw_bytes from the
    64 MiB point."""
    rows = [
        c
        for c in cases
        if c.kind == "collective"
        and c.usable
        and c.text("chip") == chip
        and c.text("collective") == "all_reduce"
        and c.int("num_chips") <= (c.int("chips_per_node") or c.int("num_chips"))
    ]
    large = [c for c in rows if c.float("message_bytes") >= 2**30]
    if not large:
        return None
    raw = sum(_busbw(c) for c in large) / len(large) / link_Bps
    util = min(raw, 1.0)
    sources = tuple(sorted({c.id for c in rows}))
    points: dict[tuple[int, float], float] = {}  # (chips, size) -> bus bandwidth
    for c in rows:
        for size, bw in all_reduce_points(c).items():
            points.setdefault((c.int("num_chips"), size), bw)
    small = [(n, m, bw) for (n, m), bw in points.items() if m <= SMALL_MESSAGE]
    if small:
        times = [m * 2 * (n - 1) / n / bw for n, m, bw in small]
        alpha = sum(times) / len(times) / 2
        by_size: dict[float, list[float]] = {}
        for (n, m), bw in points.items():
            if m > SMALL_MESSAGE:
                bus_bytes = m * 2 * (n - 1) / n
                t = bus_bytes / bw
                by_size.setdefault(m, []).append(bus_bytes / (t - 2 * alpha) / link_Bps)
        curve = tuple(
            (m, round(min(sum(us) / len(us), 1.0), 3)) for m, us in sorted(by_size.items())
        )
        return CollectiveFit(round(util, 3), 0.0, raw, sources, round(alpha * 1e6, 2), curve)
    halves = []
    for c in rows:
        b64 = _busbw_64mib(c) if c.float("message_bytes") != 2**26 else _busbw(c)
        if b64 > 0:
            chunk = 2**26 / c.int("num_chips")  # effective_bandwidth sees size / p
            halves.append(chunk * max(util * link_Bps / b64 - 1, 0.0))
    half = sum(halves) / len(halves) if halves else 0.0
    return CollectiveFit(round(util, 3), float(f"{half:.3g}"), raw, sources)
