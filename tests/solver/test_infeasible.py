"""Valid designs that cannot run: exit code 3, one line naming the binding resource with
its numbers and the smallest change that fits, and the same reason in a sweep's row.

Every expected number is derived here by hand from the scenario (parameter counts, tensor
bytes, tile sizes), not read back from MapShard.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard.cli import EXIT_INFEASIBLE, main
from mapshard.sweeps.points import canonical_text
from mapshard.sweeps.worker import Job, solve_point
from schema import setup_pb2

CHIP = """
  accelerator { bf16_tflops: 1000 sram_cap: 5e7 freq: 1.5 }
  memory { dram_bw: 3350 dram_cap: %s }"""

# A Llama-style dense model: 80 layers, hidden 8192, 8 KV heads of 128, MLP 28672.
H, LAYERS, KV_DIM, FF, VOCAB, CONTEXT = 8192, 80, 8 * 128, 28672, 32000, 1024
BIG_MODEL = f"""
workload {{ llm_inference {{
  model {{ inline {{ name: "m70" architecture: "llama" hidden_size: {H} num_layers: {LAYERS}
    num_heads: 64 num_kv_heads: 8 intermediate_size: {FF} vocab_size: {VOCAB} ffn: SWIGLU
    norm: RMSNORM }} }}
  phase: DECODE batch: 1 context_len: {CONTEXT} }} }}
system {{ num_chip: 1 {CHIP % "8e10"} }}
"""
# One GEMM, C[8192, 65536] = A[8192, 65536] B[65536, 65536], every operand an activation.
M, K, N = 8192, 65536, 65536
BIG_GEMM = f"""
workload {{ gemm {{ M: {M} K: {K} N: {N} }} }}
system {{ num_chip: 1 {CHIP % "4e9"} }}
"""
TINY_LLM = """
workload { llm_inference {
  model { inline { name: "tiny" architecture: "llama" hidden_size: 256 num_layers: 2
    num_heads: 4 num_kv_heads: 2 intermediate_size: 512 vocab_size: 1024 ffn: SWIGLU
    norm: RMSNORM } }
  phase: DECODE batch: 1 context_len: 128 } }
system { chip: "H100-SXM5-80GB" num_chip: 256
  topology { kind: SWITCH degree: 256 link_bw_GBps: 450 } }
"""
# DFModel style: a GEMM feeding an elementwise kernel, forced into one configuration.
FUSED = """
dataflow_graph {
  kernels { name: "Q" id: 1 type: SYSTOLIC
    gemm_input1_weight { outer: 1 M: 256 K: 512 N: 128 tiling: N_TILING } }
  kernels { name: "Act" id: 2 type: SIMD elementwise_input1 { outer: 1 M: 256 N: 128 } }
  connections { startIdx: 1 endIdx: 2 id: 1 }
}
system {
  num_chip: 1
  accelerator { core: 64 systolic_width: 16 systolic_height: 16 sram_cap: 1000 freq: 1.2 }
  memory { dram_bw: 1000 dram_cap: 1.6e10 }
}
execution { execution_style: DATAFLOW num_config: 1 compute_util: 0.9 word: 2 }
"""
TINY_SRAM = """
workload { gemm { M: 256 K: 256 N: 256 } }
system {
  num_chip: 1
  accelerator { core: 4 systolic_width: 16 systolic_height: 16 sram_cap: 4 freq: 1.0 }
  memory { dram_bw: 100 dram_cap: 1e9 }
}
"""


def _run(tmp_path: Path, setup: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    scenario = tmp_path / "scenario"
    scenario.mkdir()
    (scenario / "setup.txt").write_text(setup, encoding="utf-8")
    out = tmp_path / "out"
    code = main(["run", str(scenario), "--out", str(out), "--quiet"])
    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stdout + stderr
    assert not out.exists(), "an infeasible design wrote a result"
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return code, lines[0]


def test_weights_beyond_dram_name_the_layout_and_dram_that_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    per_layer = 2 * H * H + 2 * H * KV_DIM + 3 * H * FF + 2 * H  # q, o; k, v; MLP; 2 norms
    params = LAYERS * per_layer + 2 * VOCAB * H + H  # embedding, untied head, final norm
    weights = 2 * params  # bf16
    kv = 2 * LAYERS * CONTEXT * KV_DIM * 2  # K and V, bf16, one sequence
    need = weights + kv  # decode activations of one token are a few hundred KB
    assert 80e9 < need < 2 * 80e9  # two chips' worth: 2-way TP is the smallest fix

    code, line = _run(tmp_path, BIG_MODEL, capsys)

    assert code == EXIT_INFEASIBLE
    assert line.startswith("infeasible: DRAM capacity: best layout (single chip) needs ")
    assert f"needs {need / 2**30:.1f} GiB per chip (weights {weights / 2**30:.1f}," in line
    assert f"KV {kv / 2**30:.1f}), DRAM holds 74.5 GiB" in line  # 80e9 B
    assert "needs ≥ 2-way TP×PP (TP 2 × PP 1; num_chip ≥ 2)" in line
    assert f"or ≥ {math.ceil(need / 2**30 * 10) / 10:.1f} GiB of DRAM per chip" in line


def test_gemm_beyond_dram_needs_three_way_tensor_parallelism(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need = 2 * (M * K + K * N + M * N)  # A, B and C in bf16, split evenly by TP
    assert math.ceil(need / 4e9) == 3

    code, line = _run(tmp_path, BIG_GEMM, capsys)

    assert code == EXIT_INFEASIBLE
    assert f"activations {need / 2**30:.1f}, KV 0.0), DRAM holds 3.7 GiB" in line  # 4e9 B
    assert "needs ≥ 3-way TP×PP (TP 3 × PP 1; num_chip ≥ 3)" in line
    assert f"or ≥ {math.ceil(need / 2**30 * 10) / 10:.1f} GiB of DRAM per chip" in line


def test_the_layout_suggested_takes_a_tp_the_heads_allow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The suggestion is a layout the search (and a topology tag) accepts: TP 3 does not
    divide the 64 heads. At need / 2.6 bytes of DRAM per chip two chips are too few (TP 2
    or PP 2: half the weights each, need / 2 > need / 2.6), and of the 3-chip layouts PP 3
    fits: its busiest stage holds 27 of the 80 layers and the embedding, 2 x (27 x
    855,654,400 + 32,000 x 8,192) B = 46.7 GB, and their KV 0.1 GB, under 53.2 GB. The
    hint said TP 3 x PP 1, which a TP 3 tag then rejects (found by fuzzing)."""
    per_layer = 2 * H * H + 2 * H * KV_DIM + 3 * H * FF + 2 * H
    assert per_layer == 855_654_400
    need = 2 * (LAYERS * per_layer + 2 * VOCAB * H + H) + 2 * LAYERS * CONTEXT * KV_DIM * 2
    cap = need / 2.6
    stage = 2 * (27 * per_layer + VOCAB * H) + 2 * 27 * CONTEXT * KV_DIM * 2
    assert need / 2 > cap > stage
    setup = BIG_MODEL.replace("dram_cap: 8e10", f"dram_cap: {cap:.6e}")

    code, line = _run(tmp_path, setup, capsys)

    assert code == EXIT_INFEASIBLE
    assert "needs ≥ 3-way TP×PP (TP 1 × PP 3; num_chip ≥ 3)" in line


def test_more_chips_than_any_layout_can_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # inference: no DP; TP at most 64, PP at most one stage per layer (2 layers)
    code, line = _run(tmp_path, TINY_LLM, capsys)

    assert code == EXIT_INFEASIBLE
    assert line == (
        "infeasible: chip count: inference spreads over at most TP 64 × PP 2 (one pipeline "
        "stage per layer, no DP) = 128 chips, the system has 256; num_chip must be ≤ 128"
    )


def test_fused_configuration_beyond_sram_names_num_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Q's smallest tile is 1x1 output-stationary: Tm·Tn + Tm + Tn = 3 bf16 elements (6 B),
    # and feeding Act on chip adds its double-buffered 1x1 output tile (2 x 2 B). Act
    # streams whole rows (outer 1: one row of 256 x 128 in and out, double-buffered,
    # 262,144 B), capped at the SRAM: 1000 B. One configuration needs 6 + 4 + 1000 B.
    code, line = _run(tmp_path, FUSED, capsys)

    assert code == EXIT_INFEASIBLE
    assert line.startswith("infeasible: SRAM: phase graph: with num_config 1 the 2 kernels")
    assert "needs 1010 B of SRAM in one configuration, SRAM holds 1000 B" in line
    assert line.endswith("num_config must be ≥ 2 (kernels in order, each configuration fitting)")


def test_sram_below_the_smallest_tile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The smallest GEMM tile, 1x1 output-stationary, holds 3 bf16 elements: 6 B > 4 B.
    code, line = _run(tmp_path, TINY_SRAM, capsys)

    assert code == EXIT_INFEASIBLE
    assert line == (
        "infeasible: SRAM: phase gemm: kernel gemm has no tiling that fits 4 B of SRAM: its "
        "smallest tile (1x1 output, one element of each input) needs 6 B; SRAM must be ≥ 6 B "
        "per chip (system.accelerator.sram_cap)"
    )


def test_sweep_records_an_infeasible_point_with_its_reason(tmp_path: Path) -> None:
    need = 2 * (M * K + K * N + M * N)
    setup = setup_pb2.Setup()
    text_format.Parse(BIG_GEMM, setup)
    text = canonical_text(setup)
    job = Job("p0", {"point_id": "p0", "index": "0"}, text, "k0")

    row = solve_point(job, tmp_path / "sweep.txt", ())

    assert row["status"] == "infeasible"
    assert row["reason"].startswith("DRAM capacity: best layout (single chip) needs ")
    assert f"activations {need / 2**30:.1f}" in row["reason"]
    assert "needs ≥ 3-way TP×PP" in row["reason"]
    assert row["latency_s"] == ""


# A forward GEMM whose output (12 x 24 fp32 = 1152 B) a backward GEMM reads: a saved
# activation, held whole in SRAM when both share a configuration (solver/check.py).
SAVED = """
dataflow_graph {
  kernels { name: "f" id: 1 fwd_bwd: FWD einsum { kind: "GEMM"
    dims { name: "m" size: 12 } dims { name: "k" size: 8 } dims { name: "n" size: 24 }
    operands { name: "a" role: INPUT dims: "m" dims: "k" bytes_per_element: 4 }
    operands { name: "w" role: WEIGHT dims: "k" dims: "n" bytes_per_element: 4 }
    operands { name: "c" role: OUTPUT dims: "m" dims: "n" bytes_per_element: 4 } } }
  kernels { name: "b" id: 2 fwd_bwd: BWD einsum { kind: "GEMM"
    dims { name: "m2" size: 12 } dims { name: "k2" size: 24 } dims { name: "n2" size: 4 }
    operands { name: "a" role: INPUT dims: "m2" dims: "k2" bytes_per_element: 4 }
    operands { name: "w" role: WEIGHT dims: "k2" dims: "n2" bytes_per_element: 4 }
    operands { name: "c" role: OUTPUT dims: "m2" dims: "n2" bytes_per_element: 4 } } }
  connections { startIdx: 1 endIdx: 2 id: 1 end_operand: "a" }
}
system { num_chip: 1
  accelerator { sram_cap: 900 bf16_tflops: 0.001 }
  memory { dram_bw: 1 dram_cap: 0 } }
execution { execution_style: DATAFLOW num_config: 1 }
"""


def test_saved_activation_beyond_sram_in_one_configuration_names_num_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """num_config 1 puts f and b in one configuration, where b holds the saved 12 x 24 x 4 =
    1152 B > 900 B of SRAM: no mapping fits (found by tests/independent/, reported as
    'stopped at the time limit (0 s)'). Two configurations fit (each kernel's smallest tile,
    1 x 1: 3 elements = 12 B)."""
    code, line = _run(tmp_path, SAVED, capsys)
    assert code == EXIT_INFEASIBLE
    assert "infeasible: SRAM" in line and "num_config must be ≥ 2" in line, line
    # least sharing: 1152 held + f's 1x1 tile (3 elements) and its 1x1 output stream (2)
    # + b's 1x1 tile (3), at 4 B: 1152 + 20 + 12 = 1184 B = 1.16 KiB
    assert "needs 1.16 KiB of SRAM in one configuration, SRAM holds 900 B" in line, line


def _gemm_text(name: str, i: int, k: int, a: str, b: str) -> str:
    dims = f'dims {{ name: "m{i}" size: 12 }} dims {{ name: "k{i}" size: {k} }} '
    dims += f'dims {{ name: "n{i}" size: 12 }}'
    ops = (
        f'operands {{ name: "a" role: {a} dims: "m{i}" dims: "k{i}" bytes_per_element: 4 }} '
        f'operands {{ name: "b" role: {b} dims: "k{i}" dims: "n{i}" bytes_per_element: 4 }} '
        f'operands {{ name: "c" role: OUTPUT dims: "m{i}" dims: "n{i}" bytes_per_element: 4 }}'
    )
    return f'kernels {{ name: "{name}" id: {i} einsum {{ kind: "GEMM" {dims} {ops} }} }}\n'


# Two GEMMs feed both inputs of a third (12 x 12 x 12, fp32) in one configuration.
TWO_FED = (
    "dataflow_graph {\n"
    + _gemm_text("p1", 1, 4, "INPUT", "WEIGHT")
    + _gemm_text("p2", 2, 4, "INPUT", "WEIGHT")
    + _gemm_text("mm", 3, 12, "INPUT", "INPUT")
    + 'connections { startIdx: 1 endIdx: 3 id: 1 end_operand: "a" }\n'
    + 'connections { startIdx: 2 endIdx: 3 id: 2 end_operand: "b" }\n}\n'
    + "system { num_chip: 1 accelerator { sram_cap: 600 bf16_tflops: 0.001 }\n"
    + "  memory { dram_bw: 1 dram_cap: 0 } }\n"
    + "execution { execution_style: DATAFLOW num_config: 1 }\n"
)


def test_a_gemm_fed_on_both_inputs_must_hold_or_read_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by tests/independent/ (reported 'stopped at the time limit (0 s)'). mm's fed
    inputs cost no DRAM, but a tile that re-reads one holds it whole (144 elements =
    576 B). Reading both once needs Tm = M and Tn = N: 12*12 + 12 + 12 = 168 elements
    (672 B), more than the 150 that fit. Reading one once (Tn = N or Tm = M) takes at least
    a 1 x 12 panel, 12 + 12 + 1 = 25 elements (100 B), and holds the other: 676 B (a tile
    re-reading both holds 1152 B). p1 and p2 each: 1 x 1 tile (3 elements, 12 B) + its
    1 x 1 output stream (2 elements, 8 B). 676 + 2 * 20 = 716 B."""
    code, line = _run(tmp_path, TWO_FED, capsys)
    assert code == EXIT_INFEASIBLE
    assert "needs 716 B of SRAM in one configuration, SRAM holds 600 B" in line, line
    assert "num_config must be ≥ 2" in line, line
