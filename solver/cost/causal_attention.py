"""Causal self-attention priced from the tiles a fused kernel executes (issue #35).

A decoder's fused attention over q_len = kv_len tokens (a training or prefill layer) walks
128 x 128 tiles of the score matrix: each (sequence, head) pair's query tiles go to the SMs
as work items, and each item loops over the key tiles up to its diagonal, which it runs
whole (FlashAttention-3 forward, head dim 128: Shah et al. 2024, arXiv 2407.08608, section
3.1; cuDNN's Hopper kernels tile the same way). So of the non-causal FLOP count the
generators give (4 b s^2 H d) a kernel executes T (T + 1) / 2 tiles of T^2, T = ceil(s /
128): 1/2 + 64/s of it, not the half a FLOP convention counts. A sliding-window layer (each
query sees the last w keys) runs only the key tiles that reach into its window. A prefill
chunk of at least one tile of queries against the cache that ends with it (chunked prefill)
is the same kernel with its queries shifted to the newest positions (a bottom-right
aligned mask): each query tile runs the key tiles up to its shifted diagonal.

Time = that executed work at a fraction of the 16-bit matrix peak, plus the softmax's
exponentials, one per executed score, at the SMs' cited special-function rate
(core_rates.exp_rate), which do not hide under the products (without them a 64-wide head
is priced ~20% too fast and a 256-wide one ~14% too slow against NVIDIA's measured tables,
benchmarks/attention_tables.py), plus a fixed time per wave of work items over the SMs
(loading the Q tile, the softmax epilogue, writing O: what does not shrink with the key
loop). The backward's two kernels (query and key/value gradients) take the same shape with
their own fraction and wave time. The two numbers per pass are the chip file's
efficiency.causal_attention entry of the kernel family the setup runs
(execution.attention_kernel; fitted by mapshard.fidelity.fit_attention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from generator.graph import Kernel, KernelKind, OperandRole

TILE = 128  # query rows and key columns per tile


@dataclass(frozen=True)
class CausalAttentionShape:
    """A causal attention kernel's per-chip extents (self-attention, or a prefill chunk
    against its cache)."""

    pairs: int  # (sequence, query head) pairs on the chip: batch x query heads
    # the chip's query rows: kv_len (or the chunk), or its share when the queries are split
    q_len: int
    kv_len: int  # the keys the kernel is causal over (a chunk's: its cache, chunk included)
    window: int = 0  # a sliding-window layer's window in tokens (0 = none)
    # a prefill chunk against a KV cache: the queries are the last chunk_len of the kv_len
    # positions (the chunk's whole length; q_len is the chip's share); 0 = the queries are
    # the sequence itself (self-attention)
    chunk_len: int = 0


def kernel_shape(kernel: Kernel, sizes: dict[str, int]) -> CausalAttentionShape | None:
    """The per-chip extents (`sizes`) of a causal attention kernel: a decoder layer's fused
    attention of a sequence over itself (generator/llm_layer.py; the queries possibly split
    across chips), or of a prefill chunk over a KV cache that ends with it (chunked
    prefill: the chunk's queries are the newest positions); None for any other (decode)."""
    if kernel.kind != KernelKind.ATTENTION or "head_dim" not in sizes:
        return None
    q, kv = sizes.get("q_seq", 0), sizes.get("kv_seq", 0)
    heads = sizes.get("heads") or sizes.get("kv_heads", 0) * sizes.get("group", 1)
    if q <= 1 or kv < q or heads <= 0:
        return None
    chunk = 0
    if any(o.role == OperandRole.KV_CACHE for o in kernel.operands):
        if q < TILE:  # a few queries against a cache: no tile to fill (decode-like kernels)
            return None
        chunk = kernel.dim_sizes.get("q_seq", q)  # the whole chunk, whatever the chip's share
    pairs = sizes.get("batch", 1) * heads
    return CausalAttentionShape(pairs, q, kv, kernel.attention_window, chunk)


def query_tiles(seq_len: int) -> int:
    return math.ceil(seq_len / TILE)


def executed_share(seq_len: int, window: int = 0, chunk_len: int = 0) -> float:
    """The share of the non-causal FLOP a tiled causal kernel executes: the tiles on and
    below the diagonal, each whole (above 1 below one tile: a short sequence pads it). With
    a sliding window of w tokens, query tile i (positions iT .. iT + T - 1) needs the keys
    from iT - w + 1 on: key tiles floor(max(0, iT - w + 1) / T) .. i. A chunk of c queries
    against a cache of seq_len keys that ends with it (`chunk_len` c) shifts the query
    positions by seq_len - c: its tiles run the key tiles up to the diagonal the shift
    moves right (a bottom-right aligned mask), over c x seq_len."""
    q = chunk_len if 0 < chunk_len < seq_len else seq_len
    windowed = 0 < window < seq_len
    if q == seq_len and not windowed:
        tiles = query_tiles(seq_len)
        executed = tiles * (tiles + 1) / 2
    else:
        executed = 0
        for i in range(query_tiles(q)):
            first = seq_len - q + i * TILE  # the tile's first and last query positions
            last = seq_len - q + min((i + 1) * TILE, q) - 1
            lowest = max(0, first - window + 1) // TILE if windowed else 0
            executed += last // TILE - lowest + 1
    return executed * TILE * TILE / (q * seq_len)


def waves(shape: CausalAttentionShape, cores: int) -> int:
    """Rounds of work items (one query tile of one pair each) over the SMs."""
    return math.ceil(shape.pairs * query_tiles(shape.q_len) / max(cores, 1))


# exponentials per score (query-key pair) a kernel takes: the forward one (P = exp(S - m));
# the backward recomputes P once, half of it in each of its two kernels
FWD_EXPS_PER_SCORE = 1.0
BWD_EXPS_PER_SCORE = 0.5


def seconds(
    shape: CausalAttentionShape,
    flop: float,
    peak_flops: float,
    util: float,
    wave_s: float,
    cores: int,
    exp_per_s: float = 0.0,
    exps_per_score: float = FWD_EXPS_PER_SCORE,
) -> float:
    """Compute time of one kernel: `flop` is its non-causal count (the generators'), run at
    `util` of `peak_flops` on the executed share; the executed scores' exponentials at
    `exp_per_s` (the SMs' special-function rate: per score the same whatever the head
    dim, so a 64-wide head spends twice the share of its time on them a 128-wide one does;
    0 = not priced), after the products, not beside them; plus `wave_s` per wave. A chip
    holding a share of the queries (q_len below kv_len or the chunk: the search or context
    parallelism split them) runs that share of the causal work, as a load-balanced split
    gives each chip (Megatron's context parallel pairs early and late chunks)."""
    share = executed_share(shape.kv_len, shape.window, shape.chunk_len)
    products = flop * share / (peak_flops * util)
    softmax = 0.0
    if exp_per_s > 0:
        scores = shape.pairs * shape.q_len * shape.kv_len * share
        softmax = scores * exps_per_score / exp_per_s
    return products + softmax + waves(shape, cores) * wave_s
