"""Serving view: TTFT/TPOT/tokens/s versus batch in one run, and MAX_THROUGHPUT under a TPOT
limit picks the batch a person would pick from the per-batch TPOTs."""

from __future__ import annotations

import json
from pathlib import Path

import mapshard
from mapshard.cli import main

BATCHES = (1, 16, 32, 64)
DECODE = """name: "serving"
workload {{ llm_inference {{
  model {{ hf_model: "Llama-3.1-8B" }}
  phase: DECODE batch: {batch} context_len: 1024
  {serving}
}} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 1 }}
execution {{ execution_style: KERNEL_BY_KERNEL perfect_overlap: true }}
"""


def _folder(tmp_path: Path, serving: str) -> Path:
    folder = tmp_path / "scenario"
    folder.mkdir()
    (folder / "setup.txt").write_text(DECODE.format(batch=8, serving=serving))
    return folder


def test_max_throughput_under_a_tpot_limit_picks_the_batch_found_by_hand(tmp_path: Path) -> None:
    # Each batch solved on its own (no serving view): a decode step emits `batch` tokens per
    # TPOT, so tokens/s = batch / TPOT.
    tpot = {
        b: mapshard.solve(DECODE.format(batch=b, serving="")).summary["tpot_s"] for b in BATCHES
    }
    assert all(tpot[a] < tpot[b] for a, b in zip(BATCHES, BATCHES[1:]))  # bigger batch, slower
    # a limit halfway between the TPOTs of batch 32 and 64: by hand, the most tokens/s within
    # it is batch 32 (batch 64 is over; 32/TPOT_32 > 16/TPOT_16 > 1/TPOT_1)
    limit_s = (tpot[32] + tpot[64]) / 2
    within = [b for b in BATCHES if tpot[b] <= limit_s]
    by_hand = max(within, key=lambda b: b / tpot[b])
    assert by_hand == 32
    serving = (
        f"serving {{ objective: MAX_THROUGHPUT batch: {list(BATCHES)} "
        f"max_tpot_ms: {limit_s * 1e3!r} }}"
    )
    out = tmp_path / "r"
    assert main(["run", str(_folder(tmp_path, serving)), "--out", str(out), "--quiet",
                 "--no-sensitivity"]) == 0  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    view = summary["serving"]
    assert [p["batch"] for p in view["points"]] == list(BATCHES)
    assert [p["input_len"] for p in view["points"]] == [1024] * len(BATCHES)
    for p in view["points"]:
        assert p["tpot_s"] == tpot[p["batch"]]  # the same search as a plain run at that batch
        assert abs(p["tokens_per_s"] - p["batch"] / p["tpot_s"]) <= 1e-9 * p["tokens_per_s"]
        assert p["within_limits"] == (p["batch"] in within)
    assert view["points"][view["chosen"]]["batch"] == by_hand
    assert summary["tpot_s"] == tpot[by_hand]  # the plan is the chosen point's
    html = (out / "report.html").read_text()
    assert "Serving: latency and throughput versus batch" in html and "&lt;- plan" in html


def test_no_batch_within_the_limit_is_infeasible_with_the_reason(tmp_path, capsys) -> None:
    serving = "serving { objective: MAX_THROUGHPUT batch: [1, 8] max_tpot_ms: 0.5 }"
    folder = _folder(tmp_path, serving)
    assert main(["run", str(folder), "--out", str(tmp_path / "r"), "--no-sensitivity"]) == 3
    err = capsys.readouterr().err
    assert "infeasible: serving limits: no batch meets TPOT <= 500 us" in err


def test_a_zero_batch_is_bad_input_naming_the_field(tmp_path, capsys) -> None:
    folder = _folder(tmp_path, "serving { batch: [8, 0] max_ttft_ms: -1 }")
    assert main(["run", str(folder), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "workload.llm_inference.serving.batch[1] must be >= 1, got 0" in err
    assert "workload.llm_inference.serving.max_ttft_ms must be >= 0" in err
    assert "Traceback" not in err


def test_python_api_returns_the_serving_table_and_what_if() -> None:
    setup = DECODE.format(batch=8, serving="serving { batch: [1, 8] }")
    r = mapshard.solve(setup)
    assert list(r.serving["batch"]) == [1, 8]
    # MIN_LATENCY: the plan is the setup's own batch 8, the same as its row of the table
    assert r.summary["tpot_s"] == r.serving["tpot_s"][1]
    table = r.what_if()
    assert set(table["resource"]) >= {"compute", "DRAM bandwidth", "SRAM", "DRAM capacity"}
    assert table.attrs["binding"].startswith("DRAM bandwidth binds")


def test_points_that_all_fail_say_why_not_the_limits(tmp_path, capsys) -> None:
    """Every point over the DRAM: the run blamed "no latency limits" it was never given
    (found by fuzzing). Llama-3.1-8B decode at batch 256 and 128K of context: the KV cache
    alone is 2 x 32 layers x 8 x 128 x 2 B x 131,072 x 256 = 4,398 GB, over 80 GB."""
    folder = tmp_path / "scenario"
    folder.mkdir()
    text = DECODE.format(batch=256, serving="serving { objective: MAX_THROUGHPUT batch: [256] }")
    (folder / "setup.txt").write_text(text.replace("context_len: 1024", "context_len: 131072"))
    assert main(["run", str(folder), "--out", str(tmp_path / "r"), "--no-sensitivity"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("infeasible: DRAM capacity: ") and "serving limits" not in err


def test_a_chunked_prefill_step_has_no_serving_view(tmp_path, capsys) -> None:
    """One engine step has no tokens/s to maximise nor TPOT to bound: every point was
    rejected as over a TPOT limit it met (found by fuzzing)."""
    folder = tmp_path / "scenario"
    folder.mkdir()
    text = DECODE.format(batch=8, serving="serving { batch: [8] max_tpot_ms: 100 }")
    text = text.replace("phase: DECODE", "phase: CHUNKED_PREFILL chunk_size: 256 input_len: 4096")
    (folder / "setup.txt").write_text(text)
    assert main(["run", str(folder), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "workload.llm_inference.serving is a view of requests; a CHUNKED_PREFILL" in err


def test_min_latency_plan_txt_reruns_the_setups_own_point(tmp_path) -> None:
    """The setup's batch (8) is not among serving.batch: its plan came from the setup with
    its serving block, which plan.txt kept, so the rerun served every batch with batch 8's
    pins and failed (found by fuzzing)."""
    text = DECODE.format(batch=8, serving="serving { objective: MIN_LATENCY batch: [1, 16] }")
    first = mapshard.solve(text)
    first.write(tmp_path / "r")
    plan_txt = (tmp_path / "r" / "plan.txt").read_text()
    assert "serving {" not in plan_txt
    again = mapshard.solve(plan_txt)
    assert again.summary["latency_s"] == first.summary["latency_s"]
