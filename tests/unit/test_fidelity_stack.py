"""What the validation builder reads from a row's stack and machine, by hand: the decode
attention kernel family of a TensorRT-LLM release (its masked-MHA kernel, one thread block
per query head, where XQA does not cover the model) and the link share of a group inside a
fully connected node."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from mapshard.fidelity.cases import Case, parse_extra, read_cases
from mapshard.fidelity.scenarios import (
    Unmodelable,
    build_setup,
    decode_attention,
    grad_reduce_fp32,
    scale_up_share,
)
from schema import setup_pb2
from schema.errors import SetupError

SHARED, PER_HEAD = setup_pb2.KV_SHARED, setup_pb2.KV_PER_QUERY_HEAD

DATA = Path(__file__).parents[1] / "data" / "validation"


# the columns XQA's coverage reads: Llama-2-70B (G = 8, head 128), Falcon-180B (G = 29,
# head 64), Mistral-7B (G = 4, head 128), GPT-J (MHA, head 256)
MODELS = {
    "llama70b": {"heads": "64", "kv_heads": "8", "head_dim": "128"},
    "falcon180b": {"heads": "232", "kv_heads": "8", "head_dim": "64"},
    "mistral7b": {"heads": "32", "kv_heads": "8", "head_dim": "128"},
    "gptj": {"heads": "16", "kv_heads": "16", "head_dim": "256"},
}


def _case(model: str = "llama70b", **extra: str) -> Case:
    text = ";".join(f"{k}={v}" for k, v in extra.items())
    return Case({"extra_params": text, **MODELS[model]}, parse_extra(text))


TRT = {"engine": "TensorRT-LLM"}


@pytest.mark.parametrize(
    "model,extra,mode",
    [
        ("llama70b", {**TRT, "engine_version": "0.6.1"}, PER_HEAD),
        ("llama70b", {**TRT, "engine_version": "0.7.1"}, PER_HEAD),
        ("llama70b", {**TRT, "engine_version": "0.8.0"}, SHARED),  # XQA: G 8, head 128
        ("falcon180b", {**TRT, "engine_version": "0.8.0"}, PER_HEAD),  # head 64: masked MHA
        ("mistral7b", {**TRT, "engine_version": "0.9.0"}, PER_HEAD),  # G 4: not in 0.8-0.10
        ("mistral7b", {**TRT, "engine_version": "0.11.0"}, SHARED),  # XQA's JIT path
        ("gptj", {**TRT, "engine_version": "0.11.0"}, PER_HEAD),  # MHA: masked MHA
        ("llama70b", TRT, SHARED),  # version not stated: the setup's default
        ("llama70b", {"engine": "optimum-habana", "engine_version": "0.1"}, SHARED),
        (
            "llama70b",
            {**TRT, "engine_version": "0.10", "decode_attention": "kv_per_query_head"},
            PER_HEAD,
        ),
    ],
)
def test_the_rule_follows_the_rows_serving_stack(model, extra, mode):
    assert decode_attention(_case(model, **extra)) == mode


def test_bad_values_are_unmodelable():
    with pytest.raises(Unmodelable, match="decode_attention=fast"):
        decode_attention(_case(decode_attention="fast"))
    with pytest.raises(Unmodelable, match="engine_version=v1"):
        decode_attention(_case(engine="TensorRT-LLM", engine_version="v1"))
    text = "engine=TensorRT-LLM;engine_version=0.8.0"
    with pytest.raises(Unmodelable, match="needs heads, kv_heads and head_dim"):
        decode_attention(Case({"extra_params": text}, parse_extra(text)))


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


@pytest.mark.parametrize("row,qk_norm", [("M-H200-R006", True), ("M-H200-R002", False)])
def test_a_row_cut_to_fewer_layers_keeps_the_models_qk_norm(row: str, qk_norm: bool):
    """Qwen3-30B-A3B cut to 4 layers is inline (the shipped config has 48) and keeps the
    per-head q/k norms its config names; Mixtral has none."""
    cases = [c for c in read_cases(DATA / "validation_public_check.csv") if c.id == row]
    setup, _ = build_setup(cases[0])
    model = setup.workload.llm_training.model
    assert model.WhichOneof("source") == "inline"
    assert model.inline.qk_norm is qk_norm
