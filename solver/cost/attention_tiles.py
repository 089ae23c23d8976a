"""Tilings of a fused attention kernel: what its working set takes on chip and what it re-reads.

A fused attention kernel (forward, or either backward half) solves one independent problem
per (batch, key/value head): the dims every operand shares, less the innermost (the head
dim, part of a row). The operands with the output's dims are its resident side (forward:
query and output; d-query backward: query, output, d-output and d-query; key/value
backward: key/value and their gradient); the others are streamed (forward: the key/value
rows). A tile holds Br resident rows of one problem with their accumulators while the
streamed rows pass through in chunks of Bc:
  buffer(Br)  = Br x resident bytes per row + 2 Bc x streamed bytes per row (double
                buffered) + Br x Bc scores x the widest element
  traffic(Br) = resident operands once + ceil(rows / Br) x the streamed operands
so only a tile holding every resident row of a problem reads the streamed side once (a
flash-attention kernel's re-reads of K/V, charged where they go: to DRAM, or to SRAM held
whole when the streamed operand is fed on chip, solver/check.hold_bytes).
"""

from __future__ import annotations

import math

from generator.graph import Kernel, OperandRole

CHUNK_ROWS = 128  # Bc: streamed rows per chunk
MIN_ROWS = 16  # the smallest resident tile offered


def attention_tilings(
    kernel: Kernel, sizes: dict[str, int], compulsory: dict[str, float], sram_bytes: float
) -> list[tuple[str, float, dict[str, float], float]] | None:
    """(tile, buffer bytes, traffic per operand, output stream-buffer bytes) per resident
    tile that fits `sram_bytes`, Pareto over (buffer, traffic); None when the kernel's
    operands do not have the resident/streamed structure (the caller streams rows)."""
    out = kernel.outputs[0]
    # a weight of the kernel (GPT-OSS's softmax sinks, one value per head) is read once and
    # is not part of the per-problem structure
    data = [op for op in kernel.operands if op.role != OperandRole.WEIGHT]
    shared = set(out.dims)
    for op in data:
        shared &= set(op.dims)
    ins = [op for op in data if op.role != OperandRole.OUTPUT]
    resident = [op for op in ins if set(op.dims) == set(out.dims)]
    streamed = [op for op in ins if set(op.dims) != set(out.dims)]
    if not shared or not streamed or len(kernel.outputs) != 1:
        return None
    head = out.dims[-1]
    problems = math.prod(sizes[d] for d in shared if d != head)
    rows = math.prod(sizes[d] for d in out.dims if d not in shared)
    stream_dims = {d for op in streamed for d in op.dims if d not in shared}
    stream_rows = math.prod(sizes[d] for d in stream_dims)
    res_bytes = sum(compulsory[op.name] for op in (*resident, out))
    str_bytes = sum(compulsory[op.name] for op in streamed)
    res_row = res_bytes / (problems * rows)
    str_row = str_bytes / (problems * stream_rows)
    out_row = compulsory[out.name] / (problems * rows)
    elem = max(op.bytes_per_element for op in kernel.operands)
    chunk = min(CHUNK_ROWS, stream_rows)
    candidates = {rows}
    br = MIN_ROWS
    while br < rows:
        candidates.add(br)
        br *= 2
    points = []
    for br in sorted(candidates):
        buffer = br * res_row + 2 * chunk * str_row + br * chunk * elem
        passes = math.ceil(rows / br)
        traffic = {op.name: compulsory[op.name] for op in kernel.operands}
        for op in streamed:
            traffic[op.name] = passes * compulsory[op.name]
        if buffer <= sram_bytes:
            points.append((f"attn:Br={br},Bc={chunk}", buffer, traffic, 2 * br * out_row))
    return _pareto(points)


def _pareto(
    points: list[tuple[str, float, dict[str, float], float]],
) -> list[tuple[str, float, dict[str, float], float]]:
    """Drop a tile that needs more buffer and reads no less than another."""
    kept = []
    for p in points:
        cost = (p[1], sum(p[2].values()))
        if not any(_better((q[1], sum(q[2].values())), cost) for q in points):
            kept.append(p)
    return kept


def _better(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[0] and a[1] <= b[1] and a != b
