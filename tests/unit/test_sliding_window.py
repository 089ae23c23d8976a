"""Sliding-window attention (GPT-OSS: every other layer attends to the last 128 keys): the
layers split into a full and a windowed phase, the windowed decode reads and keeps only the
window, and a windowed causal kernel executes only the key tiles its window reaches, all by
hand and against a tile-by-tile count."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.graph import KernelKind
from hardware.resolve import resolve_system
from schema import setup_pb2
from solver.cost import causal_attention
from solver.search import stages
from solver.search.infeasible import limits_of

# openai/gpt-oss-20b (shipped config): 24 layers, 12 of them sliding (window 128), 8 KV heads
# of 64: 2 x 8 x 64 = 1,024 cached elements per token per layer, BF16
KV_BYTES_PER_TOKEN_LAYER = 2 * 8 * 64 * 2


def _workload(workload: str):
    setup = text_format.Parse(f"workload {{ {workload} }}", setup_pb2.Setup())
    return build_workload(setup, Path("setup.txt"), 1)


def _attention(phase):
    return [k for k in phase.graph.kernels if k.kind == KernelKind.ATTENTION]


def _tiles_needed(seq_len: int, window: int, q_len: int = 0, tile: int = 128) -> int:
    """Tile pairs (query tile, key tile) holding at least one (query, key) pair with
    query - window < key <= query, counted pair by pair; `q_len`: the queries are the last
    q_len of the seq_len positions (a prefill chunk against its cache; 0 = all of them)."""
    q_len = q_len or seq_len
    needed = set()
    for i in range(q_len):
        pos = seq_len - q_len + i
        lo = max(0, pos - window + 1) if window else 0
        for kt in range(lo // tile, pos // tile + 1):
            needed.add((i // tile, kt))
    return len(needed)


def test_windowed_executed_share_against_a_tile_count():
    rng = random.Random(7)
    cases = [(4096, 128), (1000, 300), (700, 64), (2048, 0), (300, 1000)]
    cases += [(rng.randrange(130, 1500), rng.randrange(1, 1600)) for _ in range(6)]
    for s, w in cases:
        share = causal_attention.executed_share(s, w)
        assert share == pytest.approx(_tiles_needed(s, w) * 128 * 128 / s**2, rel=1e-12), (s, w)
    # 4,096 tokens, window 128: the first query tile 1 key tile, the other 31 two each
    assert causal_attention.executed_share(4096, 128) == pytest.approx(63 / 1024)


def test_the_chunk_share_against_a_tile_count():
    rng = random.Random(11)
    cases = [(512, 4096, 0), (100, 1000, 0), (300, 300, 0), (256, 2048, 512), (1000, 1500, 70)]
    cases += [
        (q, q + rng.randrange(0, 2000), rng.choice((0, rng.randrange(1, 900))))
        for q in (rng.randrange(2, 900) for _ in range(8))
    ]
    for q, kv, w in cases:
        share = causal_attention.executed_share(kv, w, q)
        by_count = _tiles_needed(kv, w, q) * 128 * 128 / (q * kv)
        assert share == pytest.approx(by_count, rel=1e-12), (q, kv, w)


def test_decode_splits_the_layers_and_keeps_only_the_window():
    w = _workload(
        'llm_inference { model { hf_model: "openai/gpt-oss-20b" } phase: DECODE batch: 8 '
        "input_len: 4096 output_len: 1 }"
    )
    phases = {p.name: p for p in w.phases}
    assert (phases["decode_full"].count, phases["decode_window"].count) == (12, 12)
    (full,) = _attention(phases["decode_full"])
    (windowed,) = _attention(phases["decode_window"])
    assert dict(full.dims)["kv_seq"] == 4096 and dict(windowed.dims)["kv_seq"] == 128
    # 12 layers x 8 sequences x 4,096 tokens + 12 x 8 x 128, 2,048 bytes each
    assert w.kv_cache_bytes == (12 * 8 * 4096 + 12 * 8 * 128) * KV_BYTES_PER_TOKEN_LAYER


def test_request_decode_reads_the_exact_mean_window():
    """Input 100, output 100: steps attend to 101..199 keys (mean 150); a window layer reads
    min(context, 128): (101 + ... + 128 + 71 x 128) / 99 = 12,294 / 99 -> 125."""
    w = _workload(
        'llm_inference { model { hf_model: "openai/gpt-oss-20b" } phase: REQUEST batch: 2 '
        "input_len: 100 output_len: 100 }"
    )
    phases = {p.name: p for p in w.phases}
    assert dict(_attention(phases["decode_full"])[0].dims)["kv_seq"] == 150
    assert dict(_attention(phases["decode_window"])[0].dims)["kv_seq"] == 125
    assert 12_294 / 99 == pytest.approx(124.18, abs=0.01)


def test_prefill_and_training_kernels_carry_the_window():
    prefill = _workload(
        'llm_inference { model { hf_model: "openai/gpt-oss-20b" } phase: PREFILL batch: 1 '
        "input_len: 2048 output_len: 1 }"
    )
    phases = {p.name: p for p in prefill.phases}
    assert [k.attention_window for k in _attention(phases["prefill_window"])] == [128]
    assert [k.attention_window for k in _attention(phases["prefill_full"])] == [0]
    training = _workload(
        'llm_training { model { hf_model: "openai/gpt-oss-20b" } global_batch: 8 '
        "micro_batch: 1 seq_len: 4096 }"
    )
    phases = {p.name: p for p in training.phases}
    windowed = _attention(phases["layer_window"])
    assert len(windowed) == 3 and all(k.attention_window == 128 for k in windowed)


def test_a_windowed_chunk_reads_its_window_in_whole_tiles_and_skips_the_band():
    # the last 512-token chunk of a 2,048-token prompt on a window-128 layer: its queries
    # need keys 1,409 on (the 127 before the chunk and the chunk's own); the kernel reads
    # whole key tiles from the cache's start, so from 1,408 (tile 11): 640 keys, and each
    # query sees its last 128 of them; the full layers see all 2,048
    chunked = _workload(
        'llm_inference { model { hf_model: "openai/gpt-oss-20b" } phase: CHUNKED_PREFILL '
        "chunk_size: 512 input_len: 2048 decode_batch: 0 }"
    )
    phases = {p.name: p for p in chunked.phases}
    (windowed,) = _attention(phases["chunked_prefill_window"])
    assert (windowed.dim_sizes["kv_seq"], windowed.attention_window) == (640, 128)
    (full,) = _attention(phases["chunked_prefill_full"])
    assert (full.dim_sizes["kv_seq"], full.attention_window) == (2048, 0)
    # query tile i at positions 128 + 128 i .. of the 640: key tiles i .. i + 1, 2 each
    share = causal_attention.executed_share(640, 128, 512)
    assert share == pytest.approx(8 * 128 * 128 / (512 * 640), rel=1e-12)


@pytest.mark.parametrize("prompt", [2000, 2048, 3000, 1300])
def test_a_windowed_chunk_runs_the_tiles_the_whole_cache_would(prompt):
    """The trimmed cache keeps the tile grid of the whole one: the executed tiles equal a
    pair-by-pair count over the whole prompt's positions."""
    chunk = 512
    w = _workload(
        'llm_inference { model { hf_model: "openai/gpt-oss-20b" } phase: CHUNKED_PREFILL '
        f"chunk_size: {chunk} input_len: {prompt} decode_batch: 0 }}"
    )
    (k,) = _attention({p.name: p for p in w.phases}["chunked_prefill_window"])
    kv = k.dim_sizes["kv_seq"]
    tiles = causal_attention.executed_share(kv, 128, chunk) * chunk * kv / 128**2
    assert tiles == pytest.approx(_tiles_needed(prompt, 128, chunk))


def test_a_window_longer_than_every_context_changes_nothing():
    w = _workload(
        'llm_inference { model { hf_model: "openai/gpt-oss-20b" } phase: DECODE batch: 4 '
        "input_len: 100 output_len: 1 }"
    )
    assert [p.name for p in w.phases] == ["decode", "decode_head"]
    assert w.kv_cache_bytes == 24 * 4 * 100 * KV_BYTES_PER_TOKEN_LAYER


def test_gemma2_slides_on_every_even_layer():
    """gemma-2-9b (shipped config: 42 layers, sliding_window 4096, no layer_types):
    transformers' Gemma 2 slides on layer_idx % 2 == 0, so 21 layers; at 8,192 tokens of
    context the window binds, at 4,096 it does not."""
    long = _workload(
        'llm_inference { model { hf_model: "google/gemma-2-9b" } phase: DECODE batch: 1 '
        "input_len: 8192 output_len: 1 }"
    )
    phases = {p.name: p for p in long.phases}
    assert (phases["decode_full"].count, phases["decode_window"].count) == (21, 21)
    assert dict(_attention(phases["decode_window"])[0].dims)["kv_seq"] == 4096
    short = _workload(
        'llm_inference { model { hf_model: "google/gemma-2-9b" } phase: DECODE batch: 1 '
        "input_len: 4096 output_len: 1 }"
    )
    assert [p.name for p in short.phases] == ["decode", "decode_head"]


def test_a_pipeline_stage_holds_its_share_of_each_layer_kind():
    """24 layers, 12 full and 12 windowed, over 8 stages: the busiest holds ceil(24 / 8) = 3
    layers, 1.5 of each kind on average (not ceil(12 / 8) = 2 of each); over 5 stages 5
    layers, 2.5 of each; a model of one kind keeps ceil(count / PP). The pipeline search
    still reaches one stage per layer (24, not 12)."""
    w = _workload(
        'llm_training { model { hf_model: "openai/gpt-oss-20b" } global_batch: 8 '
        "micro_batch: 1 seq_len: 4096 }"
    )
    full = next(p for p in w.phases if p.name == "layer_full")
    assert stages.model_layers(w) == 24
    assert stages.stage_layers(w, full, 8) == 1.5 and stages.stage_layers(w, full, 5) == 2.5
    assert stages.instances_per_stage(replace(full, count=24), 5, 24) == 5
    system = resolve_system(
        text_format.Parse('system { chip: "H100-SXM5-80GB" num_chip: 8 }', setup_pb2.Setup()),
        Path("setup.txt"),
    )
    assert limits_of(w, system).max_pp == 24
