"""The scenario `mapshard validate` predicts for a row is the setup it implies, run as a user
runs it (issue #35): the row's setup is written to a setup.txt, `mapshard run` plans it, and
its summary.json gives the same time, hence the same metric, as `validate`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard.cli import main
from mapshard.fidelity.cases import Case, read_cases
from mapshard.fidelity.predict import metric_from_time, predict
from mapshard.fidelity.scenarios import build_setup
from schema import setup_pb2

DATA = Path(__file__).parents[1] / "data" / "validation"
FILES = {
    "dev": DATA / "validation_dev_structured.csv",
    "fit": DATA / "validation_public_fit.csv",
    "check": DATA / "validation_public_check.csv",
}
# summary.json's time for each kind (the quantity validate converts into the metric)
TIME_KEY = {
    "gemm": "latency_s",
    "attention_fwd": "latency_s",
    "training_step": "iteration_time_s",
    "inference_prefill": "ttft_s",
    "inference_static_batch": "latency_s",
}


def row(file: str, row_id: str) -> Case:
    return next(c for c in read_cases(FILES[file]) if c.id == row_id)


def run_is_validate(case: Case, where: Path, tmp_path: Path) -> float:
    """Write the row's setup, `mapshard run` it, check it gives validate's time and metric;
    the time."""
    setup, _ = build_setup(case)
    folder = tmp_path / case.id
    folder.mkdir(parents=True)
    (folder / "setup.txt").write_text(text_format.MessageToString(setup), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["run", str(folder), "--out", str(out), "--quiet", "--no-sensitivity"]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    run_time_s = summary[TIME_KEY[case.kind]]
    validated = predict(case, where)
    assert validated.detail.startswith(f"t={run_time_s:.4g}s")
    chip_peak = 0.0  # these rows' metrics are time- or FLOP-convention-based, not MFU
    assert metric_from_time(case, run_time_s, chip_peak) == pytest.approx(validated.value, rel=1e-9)
    return run_time_s


@pytest.mark.parametrize(
    "file,row_id",
    [
        ("dev", "K01"),  # one A100 GEMM
        ("fit", "P-TRT01"),  # GPT-J 6B static batch on one H100, TensorRT-LLM's engine keys
        # GPT 1.7B on 32 A100s: DP 32 = 8 in a node x 4 nodes, one parallelism on two levels
        ("dev", "T01"),
        # Llama-2 7B FP8 on 8 H100s: ZeRO-1, FP32 gradient reduction, the NeMo recipe's keys
        ("fit", "P-NEM05"),
        # Qwen3-235B-A22B on 256 H100s: EP 32 folded over the TP pairs (expert-TP 1)
        ("check", "P-NEM34"),
        # one attention kernel: an H200 decode step (GQA 32/8, 4,096 cached tokens), an
        # H200 causal backward (attn_pass=bwd), FlashAttention-3's H100 forward figure
        ("check", "M-H200-A015"),
        ("check", "M-H200-P002"),
        ("fit", "P-ATT01"),
    ],
)
def test_mapshard_run_of_the_rows_setup_predicts_what_validate_does(file, row_id, tmp_path):
    run_is_validate(row(file, row_id), FILES[file], tmp_path)


def test_a_local_ddp_row_runs_its_all_reduce_after_the_backward(tmp_path):
    """T01 as Megatron-LM's local DDP runs a step (`ddp_impl=local`, the SC'21 script's
    setting from 39B up; T01 itself ran PyTorch DDP): the setup says DP_OVERLAP_NONE,
    `mapshard run` of it is what validate predicts, and the step is slower than with the
    overlapped buckets by at most the whole all-reduce: 1.7B fp16 gradients (24 layers x 12
    h^2 + the 51200 x h embedding, 2 bytes each) over 32 ranks, which even as one flat ring
    at the 25 GB/s scale-out link and half its bandwidth takes 2 x 31/32 x G / 12.5e9 s."""
    torch_ddp = row("dev", "T01")
    local = replace(torch_ddp, extra={**torch_ddp.extra, "ddp_impl": "local"})
    assert build_setup(local)[0].workload.llm_training.dp_overlap == setup_pb2.DP_OVERLAP_NONE
    slow = run_is_validate(local, FILES["dev"], tmp_path / "local")
    fast = run_is_validate(torch_ddp, FILES["dev"], tmp_path / "torch")
    grad_bytes = 2 * (24 * 12 * 2304**2 + 51200 * 2304)
    assert 0 < slow - fast <= 2 * 31 / 32 * grad_bytes / 12.5e9
