"""What the validation builder reads from a row's stack and machine, by hand: decode
attention that reads the KV cache once per query head (TensorRT-LLM's masked-MHA generation
kernel before XQA) and the link share of a group inside a fully connected node."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from generator.build import build_workload
from mapshard.fidelity.cases import Case, parse_extra, read_cases
from mapshard.fidelity.scenarios import Unmodelable, build_setup, decode_attention
from schema import setup_pb2
from schema.errors import SetupError

DATA = Path(__file__).parents[1] / "data" / "validation"


def kv_cache_bytes(hf_model: str, mode: int, batch: int = 4, context: int = 512) -> float:
    """KV-cache bytes the fused decode attention kernel reads in one layer."""
    s = setup_pb2.Setup()
    i = s.workload.llm_inference
    i.model.hf_model = hf_model
    i.phase, i.batch, i.context_len = setup_pb2.DECODE, batch, context
    i.decode_attention = mode
    g = build_workload(s, Path("setup.txt"), 1).phases[0].graph
    att = g.kernel("attention")
    return sum(att.operand_bytes(o) for o in att.operands if o.role.name == "KV_CACHE")


def test_gqa_decode_reads_each_kv_head_once_per_query_head():
    """Llama-3.1-8B: 32 query heads over 8 KV heads (G = 4), head_dim 128, 16-bit cache:
    shared = K and V x 8 heads x 128 x 512 tokens x 4 sequences x 2 bytes = 8 MiB; one read
    per query head is G = 4 times that."""
    shared = kv_cache_bytes("Llama-3.1-8B", setup_pb2.KV_SHARED)
    assert shared == 2 * 8 * 128 * 512 * 4 * 2 == 8 * 2**20
    assert kv_cache_bytes("Llama-3.1-8B", setup_pb2.KV_PER_QUERY_HEAD) == 4 * shared


def test_only_the_decode_attentions_cache_reads_change():
    """Same FLOP everywhere; every operand of every kernel keeps its bytes except the KV
    cache of the decode phase's attention kernel."""
    s = setup_pb2.Setup()
    i = s.workload.llm_inference
    i.model.hf_model = "Llama-3.1-8B"
    i.phase, i.batch, i.input_len, i.output_len = setup_pb2.REQUEST, 2, 64, 8
    plain = build_workload(s, Path("setup.txt"), 1)
    i.decode_attention = setup_pb2.KV_PER_QUERY_HEAD
    per_head = build_workload(s, Path("setup.txt"), 1)
    changed = set()
    for a, b in zip(plain.phases, per_head.phases):
        for x, y in zip(a.graph.kernels, b.graph.kernels):
            assert x.flop == y.flop, x.name
            for ox, oy in zip(x.operands, y.operands):
                if x.operand_bytes(ox) != y.operand_bytes(oy):
                    changed.add((a.name, x.name, ox.name))
    assert changed == {("decode", "attention", "kv_cache")}


def _case(**extra: str) -> Case:
    text = ";".join(f"{k}={v}" for k, v in extra.items())
    return Case({"extra_params": text}, parse_extra(text))


@pytest.mark.parametrize(
    "extra,mode",
    [
        ({"engine": "TensorRT-LLM", "engine_version": "0.6.1"}, setup_pb2.KV_PER_QUERY_HEAD),
        ({"engine": "TensorRT-LLM", "engine_version": "0.7.1"}, setup_pb2.KV_PER_QUERY_HEAD),
        ({"engine": "TensorRT-LLM", "engine_version": "0.8.0"}, setup_pb2.KV_SHARED),
        ({"engine": "TensorRT-LLM", "engine_version": "0.10"}, setup_pb2.KV_SHARED),
        ({"engine": "TensorRT-LLM"}, setup_pb2.KV_SHARED),  # version not stated
        ({"engine": "optimum-habana", "engine_version": "0.1"}, setup_pb2.KV_SHARED),
        (
            {
                "engine": "TensorRT-LLM",
                "engine_version": "0.10",
                "decode_attention": "kv_per_query_head",
            },
            setup_pb2.KV_PER_QUERY_HEAD,
        ),  # noqa: E501
    ],
)
def test_the_rule_follows_the_rows_serving_stack(extra, mode):
    assert decode_attention(_case(**extra)) == mode


def test_bad_values_are_unmodelable():
    with pytest.raises(Unmodelable, match="decode_attention=fast"):
        decode_attention(_case(decode_attention="fast"))
    with pytest.raises(Unmodelable, match="engine_version=v1"):
        decode_attention(_case(engine="TensorRT-LLM", engine_version="v1"))


def test_the_tensorrt_llm_v061_rows_get_it_in_their_setup():
    rows = {c.id: c for c in read_cases(DATA / "validation_public_check.csv")}
    setup, _ = build_setup(rows["P-TRT11"])  # Llama-2-70B, TensorRT-LLM v0.6.1
    assert setup.workload.llm_inference.decode_attention == setup_pb2.KV_PER_QUERY_HEAD
    setup, _ = build_setup(rows["P-AZL03"])  # Llama-3-70B, version not stated
    assert setup.workload.llm_inference.decode_attention == setup_pb2.KV_SHARED


def test_a_fully_connected_node_gives_a_small_group_its_share_of_links():
    """HLS-Gaudi3: 21 x 200 GbE scale-up ports all-to-all over 8 chips, 525 GB/s per chip
    per direction, 3 ports = 75 GB/s to each peer. A TP 2 run (P-GD305) uses one peer's
    links: 525 x 1/7 = 75 GB/s; a switch (H100) keeps its full 450 GB/s for TP 2."""
    from mapshard.fidelity.scenarios import scale_up_share

    rows = {c.id: c for c in read_cases(DATA / "validation_public_fit.csv")}
    setup, _ = build_setup(rows["P-GD305"])
    (level,) = setup.system.topology
    assert (level.degree, level.kind) == (2, setup_pb2.FULLY_CONNECTED)
    assert level.link_bw_GBps == pytest.approx(525 / 7) == pytest.approx(75.0)
    assert scale_up_share(rows["P-GD317"], setup_pb2.ChipSpec(vendor="Intel"), 8) == 1.0
    setup, _ = build_setup(rows["P-TRT08"])  # Llama-2-70B TP 2 on H100 (NVSwitch)
    assert setup.system.topology[0].link_bw_GBps == 450


def test_grad_reduce_dtype_sets_the_fp32_gradient_reduction():
    """extra_params grad_reduce_dtype: fp32 for the NeMo 24.07 launcher rows (apex
    DistributedFusedAdam's FP32 grad_sync_dtype), bf16 for the Megatron-Bridge rows; absent:
    16-bit; anything else is an error naming the valid values."""
    from mapshard.fidelity.scenarios import grad_reduce_fp32

    rows = {c.id: c for c in read_cases(DATA / "validation_public_check.csv")}
    assert build_setup(rows["P-NEM01"])[0].workload.llm_training.grad_reduce_fp32
    assert not build_setup(rows["P-NEM22"])[0].workload.llm_training.grad_reduce_fp32
    assert not grad_reduce_fp32(_case())
    with pytest.raises(Unmodelable, match="grad_reduce_dtype=fp64 is not fp32, bf16, fp16"):
        grad_reduce_fp32(_case(grad_reduce_dtype="fp64"))


@pytest.mark.parametrize("value", ["-1.5", "0", "nan", "inf", "fast"])
def test_a_measured_value_that_is_no_measurement_is_refused(tmp_path: Path, value: str) -> None:
    """A negative, zero, non-finite or non-numeric `value` is a one-line error naming the
    file, the line and the row, never a silently skipped or negative-error row."""
    source = Path(__file__).resolve().parents[1] / "data/validation/validation_dev_structured.csv"
    header, first, *_ = source.read_text(encoding="utf-8").splitlines()
    cells = next(csv.reader([first]))
    cells[next(csv.reader([header])).index("value")] = value
    bad = tmp_path / "cases.csv"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(cells)
    bad.write_text(header + "\n" + out.getvalue(), encoding="utf-8")
    with pytest.raises(SetupError, match=rf"cases.csv: line 2: value '{value}' of {cells[0]}"):
        read_cases(bad)
