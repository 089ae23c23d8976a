"""`mapshard explain` lists every outer candidate with its latency, memory per chip,
throughput per chip and why it lost; `mapshard bounds` prints the bounds it computed and
which resource binds (#38 items 7 and 9). Numbers checked by hand on a tiny model."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from report_fixtures import inference_plan

from mapshard import pipeline
from mapshard.cli import main
from mapshard.report.bounds import gemm_bounds, workload_gemms
from mapshard.report.explain import binding, choice_rows, format_explain

# A 4-layer toy Llama decoding 4 sequences (context 64) on 4 chips behind one switch.
H, LAYERS, HEADS, KV_HEADS, FFN, VOCAB, BATCH, CONTEXT = 256, 4, 4, 2, 512, 1024, 4, 64
CHIPS, DRAM_BYTES = 4, 4e6
TINY_DECODE = f"""name: "tiny4"
workload {{ llm_inference {{
  model {{ inline {{ name: "tiny" architecture: "llama" hidden_size: {H} num_layers: {LAYERS}
    num_heads: {HEADS} num_kv_heads: {KV_HEADS} intermediate_size: {FFN}
    vocab_size: {VOCAB} ffn: SWIGLU norm: RMSNORM }} }}
  phase: DECODE batch: {BATCH} input_len: {CONTEXT} output_len: 16 }} }}
system {{ num_chip: {CHIPS}
  accelerator {{ core: 4 systolic_width: 16 systolic_height: 16 sram_cap: 1048576 freq: 1.0 }}
  memory {{ dram_bw: 100 dram_cap: {DRAM_BYTES:g} }}
  topology {{ kind: SWITCH degree: {CHIPS} link_bw_GBps: 50 }} }}
"""
BF16 = 2  # bytes per weight, activation and KV element
KV_DIM = H // HEADS * KV_HEADS
# parameters by hand: per layer q, o (h x h), k, v (h x kv_dim), gate/up/down (3 h x ffn),
# two norms; embedding and LM head (untied, V x h each) and the final norm
PARAMS = LAYERS * (2 * H * H + 2 * H * KV_DIM + 3 * H * FFN + 2 * H) + 2 * VOCAB * H + H
# K and V of every layer for every sequence's context
KV_BYTES = 2 * LAYERS * BATCH * CONTEXT * KV_DIM * BF16
# a decode step's live activations for b tokens cannot exceed b tokens' logits, two hidden
# vectors and the gated MLP's two intermediates at once: a hand ceiling, not the model
ACT_CEILING_PER_TOKEN = (VOCAB + 2 * H + 2 * FFN) * BF16


@pytest.fixture(scope="module")
def scenario_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny4")
    (folder / "setup.txt").write_text(TINY_DECODE, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def plan(scenario_dir: Path):  # noqa: ANN201
    return pipeline.plan(pipeline.load_scenario(scenario_dir))


def test_every_candidate_with_hand_checked_memory_and_throughput(plan) -> None:  # noqa: ANN001
    assert PARAMS == plan.num_params == 2_885_888
    rows = choice_rows(plan)
    # TP x PP x DP = 4 chips: (1,1,4) (1,2,2) (1,4,1) (2,1,2) (2,2,1) (4,1,1), each once
    degrees = sorted(
        (c.parallelism["tp"], c.parallelism["pp"], c.parallelism["dp"]) for c in plan.choices
    )
    assert degrees == [(1, 1, 4), (1, 2, 2), (1, 4, 1), (2, 1, 2), (2, 2, 1), (4, 1, 1)]
    assert len(rows) == 6 and [r.status for r in rows].count("chosen") == 1
    for c, r in zip(plan.choices, rows):
        tp, pp, dp = (c.parallelism[k] for k in ("tp", "pp", "dp"))
        if r.status == "chosen":
            assert c.latency_s == pytest.approx(plan.latency_s)
            assert r.memory_per_chip_bytes == pytest.approx(plan.memory.total)
            assert plan.memory.weights >= PARAMS * BF16 / (tp * pp)
            # a decode step makes one token per sequence: tokens / latency / chips
            assert r.throughput_per_chip == pytest.approx(BATCH / plan.latency_s / CHIPS)
            assert r.why == ""
            continue
        # not solved: the floor = weights / (TP x PP) + its sequences' KV of its stage's
        # layers at 1/TP (one KV head per chip) + activations under the hand ceiling
        seqs = BATCH // dp
        weights = PARAMS * BF16 / (tp * pp)
        kv = KV_BYTES * seqs / BATCH / tp * math.ceil(LAYERS / pp) / LAYERS
        activations = r.memory_per_chip_bytes - weights - kv
        assert 0 < activations <= seqs * ACT_CEILING_PER_TOKEN, (tp, pp, dp)
        assert r.status == "pruned" and c.lower_bound_s >= plan.latency_s
        assert r.throughput_per_chip == pytest.approx(BATCH / c.lower_bound_s / CHIPS)
        assert r.why.startswith("cannot win: its roofline bound")
        if r.memory_per_chip_bytes > DRAM_BYTES:  # pure DP holds every weight: 5.8 MB
            assert (tp, pp) == (1, 1) and "nor would it fit" in r.why


def test_explain_text_marks_the_chosen_candidate(plan) -> None:  # noqa: ANN001
    text = format_explain(plan)
    table = [ln for ln in text.splitlines() if ln.startswith("  *  ") or ln.startswith("     ")]
    assert table[0].split()[:3] == ["choice", "placement", "latency"]
    assert sum(ln.startswith("  *  ") for ln in table) == 1
    assert len(table) == 1 + 6
    chosen = next(ln for ln in table if ln.startswith("  *  "))
    assert chosen.rstrip().endswith("chosen") and "tp=4" in chosen
    assert "6 candidates (1 chosen, 5 pruned)" in text


def test_an_moe_inference_plan_marks_its_chosen_candidate(tmp_path: Path) -> None:
    """Mixtral decode on 8 H100s: the plan's parallelism has EP 8 (its experts over the TP
    chips), which its candidates do not list; no row was marked chosen, and the chosen one
    read "as fast as the chosen one"."""
    (tmp_path / "setup.txt").write_text(
        'workload { llm_inference { model { hf_model: "Mixtral-8x7B-v0.1" } phase: DECODE '
        'batch: 8 context_len: 1024 } }\nsystem { chip: "H100-SXM5-80GB" num_chip: 8 }\n',
        encoding="utf-8",
    )
    moe = pipeline.plan(pipeline.load_scenario(tmp_path))
    assert moe.parallelism["ep"] > 1
    rows = choice_rows(moe)
    assert [r.status for r in rows].count("chosen") == 1


def test_bounds_prints_the_bounds_and_what_binds(
    scenario_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bounds", str(scenario_dir), "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    # q_proj: M=4 tokens, K=N=256; 1 MiB of SRAM holds every operand, so the traffic is
    # compulsory: (4*256 + 256*256 + 4*256) * 2 B = 135,168 B = 132 KiB; 2*4*256*256 FLOP /
    # 135,168 B = 3.88 FLOP/B, under the ridge 2.048 TFLOP/s / 100 GB/s = 20.5 FLOP/B: memory-
    # bound, 135,168 B / 100 GB/s = 1.35 us (compute 524,288 FLOP / 2.048 TFLOP/s = 256 ns)
    line = next(ln for ln in out.splitlines() if "decode/q_proj" in ln)
    assert "DRAM >= 132 KiB (compulsory)" in line
    assert "3.88 FLOP/B vs ridge 20.5 FLOP/B: memory-bound" in line
    assert ">= 1.35 us (compute 256 ns, memory 1.35 us)" in line
    assert "Binding: memory 6 of 6" in out
    assert "written:" in out and (tmp_path / "b" / "bounds.csv").is_file()


def test_gemm_bounds_compute_bound_and_no_tile_fits(scenario_dir: Path) -> None:
    scenario = pipeline.load_scenario(scenario_dir)
    system = scenario.system
    # 256^3 in bf16: compulsory (3 x 256^2) x 2 B = 393,216 B; 33.6 MFLOP / 2.048 TFLOP/s
    # = 16.4 us > 393,216 B / 100 GB/s = 3.93 us: compute binds
    big = gemm_bounds([("g", 256, 256, 256, 2.0)], system)[0]
    assert big.dram_bytes == pytest.approx(3 * 256 * 256 * 2)
    assert big.compute_s == pytest.approx(2 * 256**3 / 2.048e12)
    assert big.memory_s == pytest.approx(393_216 / 100e9)
    assert big.binds == "compute"
    # 4 bytes of SRAM: the smallest tile (one element of A, B and C: 6 B in bf16) overflows
    tiny = replace(system, chip=replace(system.chip, sram_bytes=4.0))
    none = gemm_bounds([("h", 8, 8, 8, 2.0)], tiny)[0]
    assert none.least_buffer_bytes == 6.0
    assert none.dram_bytes is None and none.binds == "SRAM (no tile fits)"
    assert len(workload_gemms(scenario.workload)) == 6


def test_explain_names_the_bound_the_tables_show() -> None:
    """Llama-3.1-8B decode kv_proj on H100 (us): launch 4.5, work 1.43 (compute 5.93 with
    the launch), DRAM 5.82; serialised the latency is 4.5 + max(1.43, 5.82) = 10.32, the
    tables' label memory: explain says memory-bound 5.82 us against its overhead 4.5 us
    (compute alone, 1.43 us, is the smaller), not compute-bound on the 5.93 us."""
    kernel = replace(
        inference_plan().phases[1].kernels[0],
        compute_s=5.93e-6,
        memory_s=5.82e-6,
        network_s=0.0,
        overhead_s=4.5e-6,
        floor_s=0.0,
        bound="memory",
    )
    res, t, nxt, t2 = binding(kernel)
    assert (res, nxt) == ("memory", "overhead")
    assert t == pytest.approx(5.82e-6) and t2 == pytest.approx(4.5e-6)


def test_bounds_takes_the_kernel_name_it_prints(
    scenario_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--kernel decode/q_proj`, as the listing names it, was "no GEMM kernel named"
    (found by fuzzing); a wrong name lists the valid ones."""
    out = str(tmp_path / "b")
    assert main(["bounds", str(scenario_dir), "--kernel", "decode/q_proj", "--out", out]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  decode")]
    assert len(lines) == 1 and "decode/q_proj" in lines[0]
    assert main(["bounds", str(scenario_dir), "--kernel", "q_proj", "--out", out + "2"]) == 0
    assert main(["bounds", str(scenario_dir), "--kernel", "nope", "--out", out + "3"]) == 2
    err = capsys.readouterr().err
    assert "no GEMM kernel named nope; valid: decode/q_proj, " in err
