"""A fused attention kernel's working set takes SRAM, and a tile smaller than a problem's query
rows re-reads K/V (issue #14: nothing on chip is free). Numbers by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

import mapshard
from generator.graph import Kernel, KernelKind, Operand, OperandRole
from solver.cost.attention_tiles import attention_tilings
from solver.cost.gemm_roles import compulsory_bytes
from solver.search.infeasible import least_attention_tile

IN = OperandRole.INPUT
ROOT = Path(__file__).resolve().parents[2]


def _forward(q_seq: int, kv_seq: int, kv_heads: int, group: int, head_dim: int) -> Kernel:
    """Dims as the LLM generator writes them: query (batch, q_seq, kv_heads, group, head_dim),
    key/value (batch, kv_seq, kv, kv_heads, head_dim), bf16."""
    dims = (
        ("batch", 1),
        ("q_seq", q_seq),
        ("kv_heads", kv_heads),
        ("group", group),
        ("head_dim", head_dim),
        ("kv_seq", kv_seq),
        ("kv", 2),
    )
    q_dims = ("batch", "q_seq", "kv_heads", "group", "head_dim")
    return Kernel(
        name="attn",
        kind=KernelKind.ATTENTION,
        dims=dims,
        operands=(
            Operand("q", IN, q_dims, 2),
            Operand("kv", IN, ("batch", "kv_seq", "kv", "kv_heads", "head_dim"), 2),
            Operand("out", OperandRole.OUTPUT, q_dims, 2),
        ),
        flop=4.0 * q_seq * kv_seq * kv_heads * group * head_dim,
    )


def _tiles(kernel: Kernel, sram_bytes: float):
    sizes = dict(kernel.dims)
    return attention_tilings(kernel, sizes, compulsory_bytes(kernel, sizes), sram_bytes)


def test_prefill_tile_buffer_and_kv_rereads_by_hand() -> None:
    """q_seq = kv_seq = 1024, 8 heads of 128, no GQA. Per head (8 problems): 1024 query rows
    of 128 x 2 B query + 128 x 2 B output = 512 B; 2048 K/V rows of 256 B; Bc = 128:
    buffer(Br) = 512 Br + 2 x 128 x 256 + Br x 128 x 2 = 768 Br + 65,536 B.
    Br = 1024: 851,968 B, K/V (4 MiB) read once. With 500,000 B of SRAM the largest tile is
    Br = 512 (458,752 B): K/V read ceil(1024/512) = 2 times = 8 MiB."""
    kernel = _forward(1024, 1024, 8, 1, 128)
    whole = _tiles(kernel, 1e9)
    assert [t[0] for t in whole][-1] == "attn:Br=1024,Bc=128"
    assert whole[-1][1] == pytest.approx(768 * 1024 + 65536)
    assert whole[-1][2] == pytest.approx({"q": 2**21, "kv": 2**22, "out": 2**21})
    assert whole[0][0] == "attn:Br=16,Bc=128"
    assert whole[0][2]["kv"] == pytest.approx(64 * 2**22)  # ceil(1024/16) passes
    tight = _tiles(kernel, 500_000)
    assert tight[-1][0] == "attn:Br=512,Bc=128"
    assert tight[-1][1] == pytest.approx(768 * 512 + 65536)
    assert tight[-1][2]["kv"] == pytest.approx(2 * 2**22)
    assert tight[-1][3] == pytest.approx(2 * 512 * 256)  # output stream buffer: 2 tiles


def test_a_softmax_sink_weight_leaves_the_tiles_as_they_were() -> None:
    """GPT-OSS's sinks (one learned logit per query head, a weight of the kernel) are read
    once: the problems, rows and K/V re-reads are those of the kernel without them (they
    once broke the per-problem structure: a GPT-OSS prefill paid hundreds of K/V re-reads)."""
    plain = _forward(1024, 1024, 2, 4, 128)
    sinks = Operand("sinks", OperandRole.WEIGHT, ("kv_heads", "group"), 2)
    with_sinks = Kernel(
        name="attn",
        kind=KernelKind.ATTENTION,
        dims=plain.dims,
        operands=(*plain.operands, sinks),
        flop=plain.flop,
    )
    expected = _tiles(plain, 1e9)
    got = _tiles(with_sinks, 1e9)
    assert [t[0] for t in got] == [t[0] for t in expected]
    for g, e in zip(got, expected, strict=True):
        assert g[2] == pytest.approx({**e[2], "sinks": 2 * 4 * 2})


def test_gqa_decode_reads_kv_once_with_a_small_tile() -> None:
    """Decode (q_seq 1), 2 KV heads x 4 query heads each, kv_seq 4096, head_dim 128: a
    problem is one KV head, its 4 query rows (one per head of the group) fit one tile:
    buffer 4 x 512 + 2 x 128 x 256 + 4 x 128 x 2 = 68,608 B, the 4 MiB cache read once."""
    tiles = _tiles(_forward(1, 4096, 2, 4, 128), 1e6)
    assert [t[0] for t in tiles] == ["attn:Br=4,Bc=128"]
    assert tiles[0][1] == pytest.approx(4 * 512 + 65536 + 4 * 128 * 2)
    assert tiles[0][2]["kv"] == pytest.approx(4096 * 2 * 2 * 128 * 2)


def test_nothing_fits_gives_no_tile() -> None:
    assert _tiles(_forward(1024, 1024, 8, 1, 128), 60_000) == []


def test_the_default_scenario_plans_attention_with_a_tile() -> None:
    """End to end: the shipped decode scenario's attention kernels carry an attention tile."""
    plan = mapshard.solve(ROOT / "scenarios" / "llama31_8b_decode_h100").plan
    tiles = {k.tile for k in plan.kernels() if k.name == "attention"}
    assert tiles and all(t.startswith("attn:Br=") for t in tiles), tiles


def test_an_attention_kernel_that_fits_no_sram_is_explained() -> None:
    """The smallest tile of the forward kernel above is Br = 16: 768 x 16 + 65,536 =
    77,824 B (76 KiB); with 60,000 B of SRAM nothing fits, and the reason names that tile."""
    name, need = least_attention_tile(_forward(1024, 1024, 8, 1, 128))
    assert name.startswith("attn:Br=16,Bc=128") and need == pytest.approx(77_824)
