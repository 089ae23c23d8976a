"""Profile import (Nsight Compute CSV, PyTorch Chrome trace), matching and calibration, on
the constructed samples in tests/data/profiles/ (see its README)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from hardware.resolve import resolve_system
from mapshard import pipeline
from mapshard.cli import main
from mapshard.fidelity.profile_io import (
    PLAN_CLASSES,
    MeasuredKernel,
    kernel_class,
    parse_number,
    read_ncu_csv,
    read_profile,
    read_trace_json,
)
from mapshard.fidelity.profile_match import calibrate, compare, launch_order, predicted_compute_s
from mapshard.profile import merge_override
from schema.errors import SetupError

DATA = Path(__file__).parents[1] / "data" / "profiles"
SCENARIO = DATA / "llama_2layer_prefill_h100"


@pytest.fixture(scope="module")
def plan():
    return pipeline.plan(pipeline.load_scenario(SCENARIO))


def test_numbers_with_quotes_and_thousands_separators():
    assert parse_number('"1,234.5"') == 1234.5
    assert parse_number("n/a") is None and parse_number("") is None


def test_ncu_raw_layout_units_row_and_bytes():
    ks = read_profile(DATA / "sample_ncu_raw.csv")
    assert len(ks) == 27 and [k.index for k in ks] == list(range(27))
    lm = ks[-1]  # the LM head GEMM: ~1 GB in ~400 us
    assert "xmma_gemm" in lm.name
    assert 300e-6 < lm.time_s < 500e-6
    assert 0.9e9 < lm.dram_bytes < 1.2e9
    assert lm.tensor_pct is not None


def test_ncu_details_layout_with_sectors_and_nanoseconds():
    raw = read_profile(DATA / "sample_ncu_raw.csv")[:6]
    det = read_profile(DATA / "sample_ncu_details.csv")
    assert len(det) == 6
    for a, b in zip(raw, det):
        assert a.name == b.name
        assert b.time_s == pytest.approx(a.time_s, rel=1e-3)
        assert b.dram_bytes == pytest.approx(a.dram_bytes, rel=1e-3)


def test_hand_written_ncu_rows():
    text = (
        '"ID","Kernel Name","gpu__time_duration.sum","dram__sectors_read.sum",'
        '"dram__sectors_write.sum"\n"","","msecond","sector","sector"\n'
        '"0","ampere_bf16_s16816gemm_bf16_64x64","1.5","1,000","24"\n'
    )
    (k,) = read_ncu_csv(text)
    assert (k.time_s, k.dram_bytes) == (1.5e-3, 1024 * 32)
    with pytest.raises(SetupError, match="gpu__time_duration"):
        read_ncu_csv('"ID","Kernel Name","dram__bytes_read.sum"\n"0","k","1"\n')


def test_trace_keeps_only_gpu_kernels_in_time_order():
    ks = read_profile(DATA / "sample_trace.json")
    raw = read_profile(DATA / "sample_ncu_raw.csv")
    assert [k.name for k in ks] == [k.name for k in raw]
    assert all(k.dram_bytes is None for k in ks)
    ev = (
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "b", "ts": 5, "dur": 2},'
        '{"ph": "X", "cat": "Kernel", "name": "a", "ts": 1, "dur": 3},'
        '{"ph": "X", "cat": "cpu_op", "name": "c", "ts": 0, "dur": 9}]}'
    )
    assert [(k.name, k.time_s) for k in read_trace_json(ev)] == [("a", 3e-6), ("b", 2e-6)]


@pytest.mark.parametrize(
    "name,cls",
    [
        ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", "gemm"),
        (
            "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn>",
            "gemm",
        ),
        ("ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_stages_64x5_tn", "gemm"),
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, 0, 0, "
            "cutlass::bfloat16_t>>",
            "attention",
        ),
        (
            "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)",
            "attention",
        ),
        ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*)", "norm"),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>", "norm"),
        (
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "collective",
        ),
        ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>", "elementwise"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
            "elementwise",
        ),
        ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>", "softmax"),
        ("Memcpy HtoD (Pageable -> Device)", "memory"),
        ("some_custom_kernel", "other"),
    ],
)
def test_kernel_classes_by_name(name, cls):
    assert kernel_class(name) == cls


def test_compare_matches_by_class_and_order(plan):
    cmp = compare(plan, read_profile(DATA / "sample_ncu_raw.csv"))
    rows = {(r.phase, r.kernel): r for r in cmp.rows}
    assert not cmp.unmatched
    assert rows[("prefill", "q_proj")].matched == 2  # one per layer
    assert rows[("prefill_head", "lm_head")].matched == 1
    assert rows[("prefill", "kv_write")].cls == "elementwise"
    # constructed with MapShard's own byte counts (+-1.5%): bytes agree
    for r in cmp.rows:
        if r.predicted_bytes > 1e6:
            assert r.bytes_ratio == pytest.approx(1.0, abs=0.03)
    # GEMMs were made at gemm_util 0.62 (vs the library's 0.704): measured is slower
    assert rows[("prefill", "mlp_gate_up")].time_ratio > 1.05


def test_calibrate_recovers_the_constructed_efficiency(plan):
    cmp = compare(plan, read_profile(DATA / "sample_ncu_raw.csv"))
    sc = pipeline.load_scenario(SCENARIO)
    eff = sc.system.chip.efficiency
    cal = calibrate(cmp.rows, eff.gemm_util, eff.kernel_overhead_s, sc.system.dram.bandwidth_Bps)
    assert cal.gemm_util == pytest.approx(0.62, abs=0.03)  # samples predate split-K occupancy
    assert cal.kernel_overhead_us == pytest.approx(3.0, abs=0.6)
    assert cal.dram_util == pytest.approx(0.80, abs=0.02)


def test_cli_compare_and_calibrate_write_files(tmp_path):
    out_csv = tmp_path / "cmp.csv"
    assert (
        main(
            [
                "profile",
                "compare",
                str(SCENARIO),
                str(DATA / "sample_trace.json"),
                "--out",
                str(out_csv),
            ]
        )
        == 0
    )
    rows = list(csv.DictReader(open(out_csv, newline="")))
    assert {"kernel", "measured_s", "predicted_s", "measured_dram_bytes"} <= set(rows[0])
    out_txt = tmp_path / "calibration.txt"
    assert (
        main(
            [
                "profile",
                "calibrate",
                str(SCENARIO),
                str(DATA / "sample_ncu_raw.csv"),
                "--out",
                str(out_txt),
            ]
        )
        == 0
    )
    text = out_txt.read_text()
    assert text.startswith("# Efficiency of H100-SXM5-80GB") and "gemm_util: 0.6" in text


def test_override_merges_into_a_setup_and_resolves(tmp_path):
    out_txt = tmp_path / "calibration.txt"
    assert (
        main(
            [
                "profile",
                "calibrate",
                str(SCENARIO),
                str(DATA / "sample_ncu_raw.csv"),
                "--out",
                str(out_txt),
            ]
        )
        == 0
    )
    sc = pipeline.load_scenario(SCENARIO)
    merged = merge_override(sc.setup, out_txt)
    chip = resolve_system(merged, sc.path).chip
    assert chip.efficiency.gemm_util == pytest.approx(0.62, abs=0.03)
    assert chip.efficiency.gemm_half_dim == sc.system.chip.efficiency.gemm_half_dim  # kept
    # pasting the block into the setup file by hand gives the same chip
    block = out_txt.read_text().split("\nsystem {", 1)[1].rsplit("}", 1)[0]
    setup_text = (
        (SCENARIO / "setup.txt")
        .read_text()
        .replace(
            'system { chip: "H100-SXM5-80GB" num_chip: 1 kernel_source: "none" }',
            'system { chip: "H100-SXM5-80GB" num_chip: 1 kernel_source: "none" ' + block + "}",
        )
    )
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "setup.txt").write_text(setup_text)
    pasted = pipeline.load_scenario(tmp_path / "s").system.chip
    assert pasted.efficiency == chip.efficiency


def test_profile_without_matching_kernels_is_bad_input(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "mystery", "ts": 0, "dur": 1}]}'
    )
    assert (
        main(["profile", "compare", str(SCENARIO), str(p), "--out", str(tmp_path / "c.csv")]) == 2
    )


NAMES = {
    "gemm": "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64",
    "attention": "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>",
    "norm": "void at::native::vectorized_layer_norm_kernel<float>",
    "softmax": "void at::native::cunn_SoftMaxForward<4, float>",
    "elementwise": "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add>",
    "embedding": "void at::native::indexSelectLargeIndex<c10::BFloat16>",
}
TRAIN = """workload { llm_training {
  model { inline { name: "tiny" architecture: "gpt2" hidden_size: 256 num_layers: 3
                   num_heads: 4 intermediate_size: 1024 vocab_size: 512 ffn: GELU
                   norm: LAYERNORM max_position_embeddings: 128 } }
  global_batch: 4 micro_batch: 2 seq_len: 128 recompute: RECOMPUTE_FULL } }
system { chip: "A100-SXM4-80GB" num_chip: 2
         topology { kind: SWITCH degree: 2 parallelism: "TP" } }
execution { execution_style: KERNEL_BY_KERNEL perfect_overlap: true }"""


def test_a_profile_in_launch_order_matches_every_kernel_of_a_training_step(tmp_path):
    """A profile made from the plan itself (framework launch order: forward of every layer,
    the head, then recompute/backward of every layer; NCCL after each collective) matches
    every launch to its own kernel."""
    (tmp_path / "setup.txt").write_text(TRAIN)
    plan = pipeline.plan(pipeline.load_scenario(tmp_path))
    measured = []
    for _, k in launch_order(plan):
        cls = PLAN_CLASSES[k.kind]
        measured.append(MeasuredKernel(len(measured), NAMES[cls], predicted_compute_s(k)))
        if k.network_s > 0:
            measured.append(
                MeasuredKernel(len(measured), "ncclDevKernel_AllReduce_Sum_bf16", k.network_s)
            )
    cmp = compare(plan, measured)
    assert not cmp.unmatched
    assert sum(r.matched for r in cmp.rows) == len(measured)
    for r in cmp.rows:
        assert r.time_ratio == pytest.approx(1.0), (r.phase, r.kernel, r.part)
    micro = plan.micro_batches
    layers = next(ph.count for ph in plan.phases if ph.role == "layer")
    assert {r.matched for r in cmp.rows if r.phase == "layer"} == {layers * micro}


@pytest.mark.parametrize("dur", ["NaN", "-5", "1e300", "Infinity"])
def test_a_trace_duration_that_is_no_time_is_bad_input(dur: str) -> None:
    """NaN, negative and absurd durations were read as kernel times, giving NaN and
    negative time ratios (found by fuzzing); the Nsight CSV path already refused NaN."""
    text = (
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 0, "dur": 5},'
        f' {{"ph": "X", "cat": "kernel", "name": "relu", "ts": 9, "dur": {dur}}}]}}'
    )
    with pytest.raises(SetupError, match=r"t.json: traceEvents\[1\] \('relu'\): dur .* is not"):
        read_trace_json(text, "t.json")
    assert read_trace_json(text.replace(dur, "7"), "t.json")[1].time_s == 7e-6


@pytest.mark.parametrize("ts", ['"abc"', "null", "[1]", "true"])
def test_a_trace_start_that_is_no_time_is_bad_input(ts: str) -> None:
    """A start time that is not a number was a ValueError / TypeError traceback."""
    text = (
        f'{{"traceEvents": [{{"ph": "X", "cat": "kernel", "name": "gemm", "ts": {ts}, "dur": 5}}]}}'
    )
    with pytest.raises(SetupError, match=r"t.json: traceEvents\[0\] \('gemm'\): ts .* is not"):
        read_trace_json(text, "t.json")


@pytest.mark.parametrize("cell", ["inf", "1e400", "-5"])
def test_an_nsight_time_that_is_no_time_is_bad_input(tmp_path: Path, cell: str) -> None:
    """The Nsight CSV path read infinite and negative durations, so `compare` printed
    ratios of inf and below 0; it now refuses them as the trace path does."""
    text = (DATA / "sample_ncu_raw.csv").read_text()
    rows = list(csv.reader(line for line in text.splitlines() if not line.startswith("==")))
    column = rows[0].index("gpu__time_duration.sum")
    rows[2][column] = cell  # the first kernel (row 1 holds the units)
    with pytest.raises(SetupError, match=r"kernel 0 .*gpu__time_duration.sum .* is not a kernel"):
        read_ncu_csv("\n".join(",".join(f'"{c}"' for c in r) for r in rows), "n.csv")


def test_an_output_edited_since_it_was_written_is_not_overwritten(tmp_path: Path) -> None:
    """`--out` was refused only when its first line was not MapShard's: an edited
    calibration.txt (meant to be edited) was overwritten."""
    out = tmp_path / "calibration.txt"
    args = ["profile", "calibrate", str(SCENARIO), str(DATA / "sample_ncu_raw.csv")]
    assert main([*args, "--out", str(out)]) == 0
    assert main([*args, "--out", str(out)]) == 0  # its own, unchanged: rewritten
    edited = out.read_text().replace("gemm_util: 0.6", "gemm_util: 0.5") + "# mine\n"
    out.write_text(edited)
    assert main([*args, "--out", str(out)]) == 2
    assert out.read_text() == edited
