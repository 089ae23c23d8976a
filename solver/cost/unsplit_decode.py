"""Decode attention without a KV split, priced from the SMs its thread blocks occupy.

A group-aware decode kernel that gives each (sequence, KV head) one thread block over the
whole cache (PyTorch's SDPA flash kernel with a KV head's G query heads as G query rows:
setup.proto DecodeAttention KV_SHARED_UNSPLIT) runs batch x KV heads blocks. At small batch
that is fewer blocks than SMs (Llama-3.1-8B at batch 1: 8 blocks on 132 SMs), and each
block streams its K/V at what one SM can pull from DRAM, far below the chip's bandwidth;
split-KV kernels (FlashDecoding, XQA) cut the cache into chunks to fill the SMs instead.
So the kernel takes, per wave of one block per SM, one block's K/V bytes at one SM's
streaming bandwidth plus a fixed time (the Q load, the softmax's end, the O store):
  waves x (2 kv_tokens head_dim kv_bytes / sm_stream_Bps + wave_s),
  waves = ceil(sequences x kv_heads / SMs),
never below its FLOP at the fused-attention rate; the menus add the DRAM bound (the whole
cache at the chip's bandwidth) as the kernel's memory side, which binds once the blocks fill
the SMs. The two numbers are the chip file's efficiency.unsplit_decode_attention (fitted by
`python -m mapshard.fidelity.fit_attention`).
"""

from __future__ import annotations

import math


def block_bytes(kv_tokens: int, head_dim: int, kv_bytes: float) -> float:
    """One block's K and V: one KV head of one sequence."""
    return 2.0 * kv_tokens * head_dim * kv_bytes


def seconds(
    blocks: int, bytes_per_block: float, cores: int, sm_stream_Bps: float, wave_s: float
) -> float:
    """The streaming time of `blocks` blocks of `bytes_per_block` in waves over `cores`."""
    waves = math.ceil(blocks / max(cores, 1))
    return waves * (bytes_per_block / sm_stream_Bps + wave_s)
