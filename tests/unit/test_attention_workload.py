"""workload.attention: one fused attention kernel (generator/attention.py), its FLOP and
bytes by hand, its setup checks, and its time where a measured table covers it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.graph import KernelKind, OperandRole, Pass
from mapshard import pipeline
from schema import setup_pb2
from schema.errors import SetupError


def _workload(attention: str):
    text = f"workload {{ attention {{ {attention} }} }}"
    return build_workload(text_format.Parse(text, setup_pb2.Setup()), Path("setup.txt"), 1)


def _plan(attention: str, chip: str):
    text = f'workload {{ attention {{ {attention} }} }} system {{ chip: "{chip}" num_chip: 1 }}'
    setup = text_format.Parse(text, setup_pb2.Setup())
    loaded = pipeline.load_message(setup, Path("setup.txt"))
    return pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))


def _bytes(kernel, name: str) -> float:
    (operand,) = [o for o in kernel.operands if o.name == name]
    return kernel.operand_bytes(operand)


def test_forward_flop_and_bytes_by_hand():
    w = _workload("batch: 2 heads: 4 head_dim: 64 q_len: 128")
    (k,) = w.phases[0].graph.kernels
    assert k.kind == KernelKind.ATTENTION and k.pass_ == Pass.FWD
    assert k.flop == 4 * 2 * 128 * 128 * 4 * 64  # 33,554,432
    assert _bytes(k, "q") == 2 * 128 * 4 * 64 * 2  # BF16 queries
    assert _bytes(k, "kv") == 2 * 128 * 2 * 4 * 64 * 2  # K and V stacked
    assert _bytes(k, "out") == 2 * 128 * 4 * 64 * 2


def test_backward_is_the_two_gradient_kernels():
    w = _workload("batch: 2 heads: 4 head_dim: 64 q_len: 128 backward: true")
    kernels = {k.name: k for k in w.phases[0].graph.kernels}
    assert set(kernels) == {"attention_bwd", "attention_kv_bwd"}
    for k in kernels.values():
        assert k.pass_ == Pass.BWD and k.flop == 1.25 * 4 * 2 * 128 * 128 * 4 * 64
        assert {o.name for o in k.inputs} == {"q", "kv", "out", "dout"}
    assert _bytes(kernels["attention_bwd"], "dq") == 2 * 128 * 4 * 64 * 2
    assert _bytes(kernels["attention_kv_bwd"], "dkv") == 2 * 128 * 2 * 4 * 64 * 2


def test_decode_reads_the_grouped_kv_cache():
    w = _workload("batch: 8 heads: 32 kv_heads: 8 head_dim: 128 q_len: 1 kv_len: 1024")
    (k,) = w.phases[0].graph.kernels
    assert k.flop == 4 * 8 * 1 * 1024 * 32 * 128  # 134,217,728
    (cache,) = [o for o in k.operands if o.role == OperandRole.KV_CACHE]
    assert k.operand_bytes(cache) == 8 * 1024 * 2 * 8 * 128 * 2  # 32 MiB of BF16 K and V
    assert k.dim_sizes["group"] == 4 and k.unit != "vector"
    assert w.kv_cache_bytes == 8 * 1024 * 2 * 8 * 128 * 2  # resident: counted in memory
    assert _workload("batch: 2 heads: 4 head_dim: 64 q_len: 128").kv_cache_bytes == 0
    per_head = _workload(
        "batch: 8 heads: 32 kv_heads: 8 head_dim: 128 q_len: 1 kv_len: 1024 "
        "decode_attention: KV_PER_QUERY_HEAD"
    )
    assert per_head.phases[0].graph.kernels[0].unit == "vector"


def test_a_decode_step_on_a_covered_chip_takes_the_measured_table():
    plan = _plan(
        "batch: 64 heads: 32 kv_heads: 8 head_dim: 128 q_len: 1 kv_len: 4096", "H200-SXM-141GB"
    )
    (k,) = plan.phases[0].kernels
    assert k.time_source.startswith("measured:trtllm")
    # the cache is read once: 64 x 4096 x 2 x 8 x 128 x 2 bytes = 1 GiB at least, and it
    # sits in the chip's memory beside the step's activations
    assert k.dram_bytes >= 64 * 4096 * 2 * 8 * 128 * 2
    assert plan.memory.kv_cache == 64 * 4096 * 2 * 8 * 128 * 2


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ("batch: 1 heads: 6 kv_heads: 4 head_dim: 64 q_len: 8", "kv_heads does not divide"),
        ("batch: 1 heads: 4 head_dim: 64 q_len: 8 kv_len: 4", "kv_len is shorter than q_len"),
        ("batch: 1 heads: 4 head_dim: 64 q_len: 1 kv_len: 8 backward: true", "backward needs"),
        ("heads: 4 head_dim: 64 q_len: 8", "workload.attention.batch must be >= 1"),
    ],
)
def test_bad_fields_name_the_field(fields, message):
    setup = text_format.Parse(f"workload {{ attention {{ {fields} }} }}", setup_pb2.Setup())
    with pytest.raises(SetupError, match=message):
        pipeline.load_message(setup, Path("setup.txt"))


def test_a_random_family_of_shapes_by_hand():
    """Twenty seeded shapes (MHA and GQA, prefill, backward, decode and chunked steps): the
    FLOP, every operand's bytes and the resident cache by the formulas, not by the code."""
    rng = random.Random(35)
    for _ in range(20):
        kv_heads = rng.choice([1, 2, 4, 8])
        heads = kv_heads * rng.choice([1, 2, 4, 8])
        b, d, q = rng.choice([1, 3, 16]), rng.choice([64, 128]), rng.choice([1, 7, 256])
        kv = q if rng.random() < 0.4 else q + rng.choice([1, 100, 4096])
        backward = kv == q and rng.random() < 0.5
        text = f"batch: {b} heads: {heads} kv_heads: {kv_heads} head_dim: {d} q_len: {q} "
        w = _workload(text + f"kv_len: {kv} backward: {str(backward).lower()}")
        kernels = w.phases[0].graph.kernels
        fwd = 4 * b * q * kv * heads * d
        q_bytes, kv_bytes = b * q * heads * d * 2, b * kv * 2 * kv_heads * d * 2
        if backward:
            assert len(kernels) == 2 and all(k.flop == 1.25 * fwd for k in kernels)
            continue
        (k,) = kernels
        assert k.flop == fwd and _bytes(k, "q") == q_bytes and _bytes(k, "out") == q_bytes
        cached = kv > q
        assert _bytes(k, "kv_cache" if cached else "kv") == kv_bytes
        assert w.kv_cache_bytes == (kv_bytes if cached else 0)
