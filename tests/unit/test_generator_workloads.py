"""DLRM, HPL, FFT and GEMM generators, every scenario folder, and the generated-files export."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.export import generated_files
from generator.graph import KernelKind, OperandRole, Pass
from mapshard.outdir import MARKER, replace_folder
from schema import setup_pb2
from schema.errors import SetupError
from schema.setup_io import load_setup

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p for p in (ROOT / "scenarios").iterdir() if (p / "setup.txt").is_file())
KINDS = {
    "gpt3_175b_train_a100": "training",
    "mixtral_8x7b_train_64xb200_ep8": "training",
    "dlrm_tpuv4": "dlrm",
    "hpl_8node_h100": "hpl",
    "fft_1024": "fft",
    "gemm_h100": "gemm",
    "attention_decode_h200": "attention",
    "dfmodel_gpt3_1t_sn30": "training",
}


def build(text: str, num_chips: int = 1):
    return build_workload(text_format.Parse(text, setup_pb2.Setup()), Path("setup.txt"), num_chips)


@pytest.mark.parametrize("folder", SCENARIOS, ids=[p.name for p in SCENARIOS])
def test_every_scenario_builds(folder):
    setup, path = load_setup(folder)
    w = build_workload(setup, path, setup.system.num_chip or 1)
    assert w.kind == KINDS.get(folder.name, "inference")
    assert w.flop_per_step > 0 and w.phases
    for phase in w.phases:
        phase.graph.topological_order()  # acyclic
    if folder.name != "dfmodel_gpt3_1t_sn30":  # DFModel's file, kept as published
        assert (folder / "README.md").read_text().strip().count("\n") == 0
        assert setup.solver.time_limit_s == 600  # a safety valve: work budgets decide
    if folder.name == "llama31_8b_decode_h100":
        r = setup.workload.llm_inference
        assert (r.phase, r.batch, r.context_len) == (setup_pb2.DECODE, 8, 1024)
        assert (setup.system.chip, setup.system.num_chip) == ("H100-SXM5-80GB", 1)


@pytest.mark.parametrize(
    "n,b,samples", [(4096, 256, 0), (4096, 256, 3), (10000, 384, 5), (240000, 1024, 8)]
)
def test_hpl_flop_total(n, b, samples):
    """On one process (a 1 x 1 grid) the arithmetic kernels total 2/3 N^3 + 2 N^2 within 1%
    (exactly: unblocked LU's 2/3 N^3 - N^2/2 - N/6 plus two N^2 solves); data movement (row
    swaps, pivots, the panel broadcast) carries one op per element moved on top. The first
    panel stands alone; each sampled phase's critical path is the next iterations' panels
    (tests/unit/test_hpl_grid.py prices a P x Q grid)."""
    w = build(f"workload {{ hpl {{ N: {n} B: {b} sample_iterations: {samples} }} }}")
    arith = sum(
        k.flop * p.count
        for p in w.phases
        for k in p.graph.kernels
        if k.name not in ("row_swap", "panel_broadcast", "pivot")
    )
    assert arith == pytest.approx(2 / 3 * n**3 + 2 * n**2, rel=1e-2)
    assert arith == pytest.approx(2 / 3 * n**3 - n**2 / 2 - n / 6 + 2 * n**2, rel=1e-9)
    assert w.flop_per_step == pytest.approx(arith, rel=1e-12)
    iters = math.ceil(n / b)
    lu = [p for p in w.phases if p.name.startswith("lu_") and not p.overlaps]
    assert sum(p.count for p in lu) == iters - 1  # the last iteration has no update
    assert len(lu) == (samples or iters) - (samples == 0)
    panels = [p for p in w.phases if p.name.endswith("panel")]
    assert sum(p.count for p in panels) == iters  # the first, then one beside each update
    g = lu[0].graph
    grid = build(f"workload {{ hpl {{ N: {n} B: {b} }} }}", 8).phases[0].graph
    assert grid.kernel("panel_broadcast").communication.value == "BROADCAST"
    assert g.kernel("update").kind == KernelKind.GEMM
    assert g.kernel("update").operand("a22").bytes_per_element == 8  # FP64


def test_fft_flop_and_passes():
    w = build("workload { fft { length: 1048576 batch: 3 } }")
    n = 1048576
    assert w.flop_per_step == pytest.approx(
        5 * n * math.log2(n) * 3 + 2 * 3 * n, rel=1e-12
    )  # passes + two transposes
    passes = [k for k in w.phases[0].graph.kernels if k.name.startswith("fft_pass")]
    assert sum(k.flop for k in passes) == pytest.approx(5 * n * math.log2(n) * 3, rel=1e-12)
    assert len(passes) == 3
    tr = w.phases[0].graph.kernel("transpose_1")
    assert tr.communication.value == "ALL_TO_ALL" and tr.communication_bytes == 3 * n * 8
    assert "digit_0" not in passes[0].shardable_dims and "digit_1" in passes[0].shardable_dims
    w = build("workload { fft { length: 1000 } }")
    assert sum(k.flop for k in w.phases[0].graph.kernels if k.name.startswith("fft_pass")) == (
        pytest.approx(5 * 1000 * math.log2(1000))
    )


def test_gemm():
    w = build("workload { gemm { M: 128 K: 64 N: 32 batch: 2 weight_operand: true } }")
    (k,) = w.phases[0].graph.kernels
    assert k.kind == KernelKind.BATCHED_GEMM and k.flop == 2 * 2 * 128 * 64 * 32
    assert k.operand("b").role == OperandRole.WEIGHT and w.model.num_params == 2 * 64 * 32
    w = build("workload { gemm { M: 8 K: 8 N: 8 } }")
    assert w.phases[0].graph.kernels[0].kind == KernelKind.GEMM and w.model is None
    with pytest.raises(SetupError, match=r"workload\.gemm\.K must be > 0"):
        build("workload { gemm { M: 8 N: 8 } }")


def test_dlrm():
    w = build(
        "workload { dlrm { mlp_dim: 64 bottom_num_mlp: 2 "
        "top_num_mlp: 3 pooled_row: 5 row: 1000 num_table: 3 emb_dim: 16 "
        "micro_batch_size: 8 dense_features: 13 } }",
        num_chips=4,
    )
    g = w.phases[0].graph
    B, T, E, D = 32, 3, 16, 64
    emb = g.kernel("embedding")
    assert emb.kind == KernelKind.EMBEDDING and emb.flop == B * T * 5 * E
    assert emb.communication.value == "ALL_TO_ALL" and emb.communication_bytes == B * T * E * 2
    inter = E + T * (T + 1) // 2
    mlp = (13 * D + D) + (D * E + E) + (inter * D + D) + (D * D + D) + (D * 1 + 1)
    assert w.model.num_params == 1000 * T * E + mlp
    assert g.kernel("interaction").flop == B * E * T * (T + 1)
    assert {k.pass_ for k in g.kernels} == {Pass.FWD, Pass.BWD, Pass.WGRAD}
    assert "bottom_mlp_1_bwd" not in {k.name for k in g.kernels}  # dense inputs need no grad


def test_setup_errors():
    with pytest.raises(SetupError, match="nothing to map"):
        build('system { chip: "H100-SXM5-80GB" }')
    with pytest.raises(SetupError, match="not both"):
        build(
            "dataflow_graph { kernels { name: 'a' id: 1 elementwise_input1 { M: 1 N: 1 } } }"
            " workload { gemm { M: 1 K: 1 N: 1 } }"
        )
    with pytest.raises(SetupError) as err:
        build("workload { llm_inference { model { hf_model: 'Llama-3.1-8B' } phase: PREFILL } }")
    assert "workload.llm_inference.input_len must be > 0" in str(err.value)


def test_generated_files(tmp_path):
    setup, path = load_setup(ROOT / "scenarios" / "llama31_8b_decode_h100")
    w = build_workload(setup, path, 1)
    files = replace_folder(tmp_path / "out", generated_files(w, setup))
    names = sorted(p.name for p in files)
    assert names == ["graph_decode.txt", "graph_decode_head.txt", "kernels.csv", "summary.json"]
    assert [p.name for p in (tmp_path / "out").glob(".*")] == [MARKER]  # no temp files left
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["num_params"] == 8_030_261_248 == summary["num_active_params"]
    assert summary["flop_per_step"] == pytest.approx(w.flop_per_step)
    assert summary["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 1024 * 2 * 8
    rows = list(csv.DictReader((tmp_path / "out" / "kernels.csv").open()))
    total = rows[-1]
    assert total["phase"] == "TOTAL"
    assert float(total["flop"]) == pytest.approx(w.flop_per_step, rel=1e-5)
    assert sum(float(r["flop_total"]) for r in rows[:-1]) == pytest.approx(
        w.flop_per_step, rel=1e-5
    )
    att = next(r for r in rows if r["name"] == "attention")
    assert att["class"] == "Va_Mqa" and att["count"] == "32" and "kv_seq=1024" in att["dims"]
    again, p2 = load_setup(tmp_path / "out" / "graph_decode.txt")
    w2 = build_workload(again, p2, 1)
    assert w2.phases[0].graph.kernels == w.phases[0].graph.kernels
    assert w2.phases[0].count == 32 and again.system.chip == "H100-SXM5-80GB"
    replace_folder(tmp_path / "g", generated_files(build("workload { gemm { M: 8 K: 8 N: 8 } }")))
    assert (tmp_path / "g" / "graph.txt").is_file()
