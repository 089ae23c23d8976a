"""`mapshard validate`: the dev measurements end to end, and the pieces by hand."""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import replace
from pathlib import Path

import pytest

import mapshard.validate_cases as vc
from mapshard import pipeline
from mapshard.cli import main
from mapshard.fidelity import flops
from mapshard.fidelity.cases import BOUNDS_PCT, Case, parse_extra, read_cases
from mapshard.fidelity.predict import metric_from_time, predict
from mapshard.fidelity.report import COLUMNS
from mapshard.fidelity.scenarios import (
    LevelSpec,
    Unmodelable,
    attention_impl,
    load_case_scenario,
    place_degrees,
)
from mapshard.outdir import MARKER
from mapshard.validate_cases import run_validation_command
from schema import setup_pb2

DATA = Path(__file__).parents[1] / "data" / "validation"
DEV = DATA / "validation_dev_structured.csv"


@pytest.fixture(scope="module")
def dev_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("val")
    rc = run_validation_command(argparse.Namespace(cases=str(DEV), out=str(out), check=True))
    with open(out / "validation.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(out / "validation_summary.csv", newline="") as f:
        summary = {r["group"]: r for r in csv.DictReader(f)}
    return rc, out, rows, summary


ROOT_VALIDATION = Path(__file__).resolve().parents[1] / "data" / "validation"


def test_one_row_per_case_with_the_contract_columns(dev_run):
    _, out, rows, _ = dev_run
    ids = [c.id for c in read_cases(DEV)]
    assert [r["id"] for r in rows] == ids
    with open(out / "validation.csv", newline="") as f:
        assert tuple(next(csv.reader(f))) == COLUMNS
    k15 = next(r for r in rows if r["id"] == "K15")
    assert k15["predicted"] == "" and k15["reason"].startswith("skipped: usable=0")
    for r in rows:
        if r["id"] != "K15":
            assert r["predicted"] != "", r
            err = (float(r["predicted"]) - float(r["measured"])) / float(r["measured"]) * 100
            assert float(r["error_pct"]) == pytest.approx(err, abs=1e-3)


@pytest.mark.parametrize(
    "group",
    ["gemm", "memory_copy", "collective", "training", "inference"],
)
def test_dev_error_within_bound(dev_run, group):
    """The issue's bounds on the dev data (mean |error|: 5% GEMM, memory, collective; 8%
    training; 15% inference), one parameter set per chip."""
    _, _, _, summary = dev_run
    assert float(summary[group]["mean_abs_error_pct"]) <= BOUNDS_PCT[group]
    assert summary[group]["within_bound"] == "true"


def test_dev_bounds_are_the_issues():
    assert BOUNDS_PCT == {
        "gemm": 5.0,
        "memory_copy": 5.0,
        "collective": 5.0,
        "training": 8.0,
        "inference": 15.0,
    }


def test_dev_summary_values_are_what_the_report_states(dev_run):
    """Regression pins of the numbers quoted in the Fidelity report; a model change must
    update them (the bound checks above are the real tests)."""
    summary = dev_run[3]
    expected = {
        # wave tiles fitted (GB200 128x256 per SM, MI300X 128x128); was 4.77 (+ H100/H200
        # launch floors, kernel_min_time_us, #16; 4.93 before)
        "gemm": 4.87,
        # H200 dram_util the mean of K13's 4.01 TB/s and the lent H200's own 4.24 TB/s copy
        # (M-H200-C001): K13 +2.9% (0.05 -> 0.99 over the three copy rows; A100, H100 unchanged)
        "memory_copy": 0.99,
        "collective": 2.52,  # GB200 alpha-beta from its full nccl-tests sweep; was 2.77
        # A100 plateau 0.832 from that fit (was 10.29 at 0.90: 7.54); the step's optimizer
        # update of replicated weights seen by the search (7.56) and a replica's gradient
        # all-gathered after its WGRAD kernel's reduction, not all-reduced twice (7.66);
        # the sync of every replica, the backward's too, charged once by the step, not in
        # the forward kernel's network time (7.61: T03, T04 slower, T11, T12 faster); the
        # loss in FP32 as Megatron runs it, 40 bytes per logit element, was 6 (7.29: T01-T04
        # slower, toward their measured steps); the optimizer step, FP8 casts and CP merges
        # at the derated DRAM bandwidth every memory-bound kernel gets, not the raw peak
        # (7.07: T01-T04, T12 closer, T11 3.6% from 2.8%); memory counting the FP32 loss
        # peak and activations as each kernel's sharding leaves them, and inference
        # replicas searched (6.90: T04 7.24 -> 6.21%, the other rows unchanged); the
        # all-gathers and reduce-scatters at NCCL's measured curves for them, capped by the
        # all-reduce's (6.78: T02-T04, T12 closer, T11 3.64 -> 3.74%); a biased GEMM priced
        # as the GEMM it is, its bias an epilogue (5.61: T01-T04, T12 closer, T11 3.74 ->
        # 7.08%; GPT-3's linear layers all carry biases)
        "training": 5.61,
        # I13 (ops timed one by one) -25% at the 0.5 us overhead; I12 +9.9% under LLMCompass's
        # own Megatron split (its GEMMs ~8% above the A100 plateau); I10 -2.1% with
        # TensorRT-LLM gptSession's 3.6 ms per generate call; was 6.99 with a
        # searched token split LLMCompass never ran; A100 overhead 0.5 us with an 18 us GEMM
        # floor once the 1024^3 cuBLASLt point joined the fit (8.28: I13 -25.6%); biased
        # GEMMs priced as GEMMs (8.46: I12 9.90 -> 10.65%)
        "inference": 8.46,
    }
    for group, value in expected.items():
        assert float(summary[group]["mean_abs_error_pct"]) == pytest.approx(value, abs=0.05)


def test_check_exits_0_on_the_dev_data(dev_run):
    assert dev_run[0] == 0


def test_check_exits_1_when_a_bound_is_exceeded(tmp_path):
    """K14 with its measured copy bandwidth halved: 100% error on memory_copy > 5%."""
    dev = {c.id: c.cells for c in read_cases(DEV)}
    k14 = {**dev["K14"], "value": str(float(dev["K14"]["value"]) / 2)}
    cases = _write(tmp_path / "cases.csv", [k14, dev["K12"]])
    out = tmp_path / "out"
    assert main(["validate", str(cases), "--out", str(out), "--check"]) == 1
    assert main(["validate", str(cases), "--out", str(tmp_path / "o2")]) == 0  # report only


def test_outputs_are_deterministic_and_atomic(dev_run, tmp_path):
    _, out, _, _ = dev_run
    rc = main(["validate", str(DEV), "--out", str(tmp_path)])
    assert rc == 0  # no --check: report only
    for name in ("validation.csv", "validation_summary.csv", "validation.svg"):
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes()
    svg = (tmp_path / "validation.svg").read_text()
    assert svg.startswith("<svg") and "<metadata>" not in svg
    # one folder MapShard owns, written whole: no temporary file left, only its marker
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [MARKER]


def test_validate_never_writes_over_a_users_folder(tmp_path):
    (tmp_path / "validation.csv").write_text("mine")
    rc = main(["validate", str(DEV), "--out", str(tmp_path)])
    assert rc == 2 and (tmp_path / "validation.csv").read_text() == "mine"


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    header = next(csv.reader(open(DEV, newline="")))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in header})
    return path


def test_any_csv_in_the_format_and_unmodellable_rows_keep_a_reason(tmp_path):
    dev = {c.id: c.cells for c in read_cases(DEV)}
    rows = [
        dev["K14"],
        dev["C03"],
        {**dev["K04"], "id": "X1", "chip": "NoSuchChip"},
        {**dev["T11"], "id": "X2", "ep": "2", "num_chips": "16"},  # CP is modelled (#16)
        {**dev["K04"], "id": "X3", "m": ""},
        {**dev["K15"], "id": "X4", "usable": "1", "extra_params": "attn_pass=fwd"},
        {**dev["K04"], "id": "X5", "flop_convention": "mystery"},
        # a chip without scale-up links: a collective has nothing to time (it divided by
        # a bandwidth of 0 and stopped the whole run: found by fuzzing)
        {**dev["C03"], "id": "X6", "chip": "JGS"},
    ]
    cases = _write(tmp_path / "cases.csv", rows)
    out = tmp_path / "out"
    assert main(["validate", str(cases), "--out", str(out), "--check"]) == 0
    got = {r["id"]: r for r in csv.DictReader(open(out / "validation.csv", newline=""))}
    assert list(got) == ["K14", "C03", "X1", "X2", "X3", "X4", "X5", "X6"]
    assert got["K14"]["predicted"] and got["C03"]["predicted"]
    assert "not in the hardware library" in got["X1"]["reason"]
    assert "EP=2" in got["X2"]["reason"]
    assert "without m, k and n" in got["X3"]["reason"]
    assert "not modelled" in got["X4"]["reason"]
    assert "unknown flop_convention" in got["X5"]["reason"]
    assert "'JGS' has no scale_up_bw_GBps" in got["X6"]["reason"]
    for r in ("X1", "X2", "X3", "X4", "X5", "X6"):
        assert got[r]["predicted"] == ""
    # a GEMM size that is no whole number (it was read as 4096: found by fuzzing) is the
    # file's defect, named with its line, as a malformed value is
    bad = _write(tmp_path / "bad.csv", [{**dev["K04"], "id": "X7", "m": "4096.5"}])
    assert main(["validate", str(bad), "--out", str(tmp_path / "bad_out")]) == 2


def test_a_file_not_in_the_format_is_bad_input(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    assert main(["validate", str(bad), "--out", str(tmp_path / "o")]) == 2


# ---------------------------------------------------------------------------------------
# FLOP conventions by hand
# ---------------------------------------------------------------------------------------


def case(**cells) -> Case:
    extra = parse_extra(cells.pop("extra_params", ""))
    return Case({k: str(v) for k, v in cells.items()}, extra)


def test_megatron_eq3_matches_the_curators_derived_flops():
    t01 = next(c for c in read_cases(DEV) if c.id == "T01")
    assert flops.convention_flop(t01) == pytest.approx(
        t01.extra_float("derived_flops_per_iteration"), rel=1e-5
    )


def test_nemo_gpt3_and_llama_formulas():
    B, s, l, h, V = 8, 2048, 2, 1024, 51200
    gpt = case(
        flop_convention="nemo_model_flops_2024",
        global_batch=B,
        seq_len=s,
        layers=l,
        hidden=h,
        ffn_kind="gelu",
    )
    assert (
        flops.convention_flop(gpt)
        == (24 * B * s * h * h + 4 * B * s * s * h) * 3 * l + 6 * B * s * h * V
    )
    llama = case(
        flop_convention="nemo_model_flops_2024",
        global_batch=B,
        seq_len=s,
        layers=l,
        hidden=h,
        ffn_kind="swiglu",
        heads=16,
        kv_heads=4,
        ffn_hidden=2816,
        vocab=32000,
    )
    assert flops.convention_flop(llama) == pytest.approx(
        B * s * l * h * h * (12 + 12 * 4 / 16 + 18 * 2816 / h + 12 * s / h + 6 * 32000 / (l * h))
    )


def test_llmfoundry_palm_flash_and_hpl():
    lf = case(
        flop_convention="llmfoundry_mfu",
        global_batch=2,
        seq_len=100,
        layers=3,
        hidden=10,
        recompute="full",
        extra_params="num_params_in_mfu=1000",
    )
    assert flops.convention_flop(lf) == 2 * (6 * 1000 * 100 + 12 * 3 * 10 * 100**2)
    assert flops.convention_flop(lf, hardware=True) == 2 * (8 * 1000 * 100 + 16 * 3 * 10 * 100**2)
    palm = case(
        flop_convention="palm_6N_plus_12LHQT",
        global_batch=2,
        seq_len=8,
        layers=2,
        heads=4,
        head_dim=16,
    )
    assert flops.convention_flop(palm) == 2 * 8 * (6 * 540.35e9 + 12 * 2 * 4 * 16 * 8)
    fa = case(
        flop_convention="flash_attn_benchmark",
        batch=2,
        seq_len=8192,
        heads=16,
        head_dim=128,
        extra_params="causal=1;attn_pass=fwd_bwd",
    )
    assert flops.convention_flop(fa) == pytest.approx(3.5 * 4 * 2 * 8192**2 * 16 * 128 / 2)
    # benchmarks/gpu_measure.py's rows spell the pass `pass`: a backward is 2.5x the forward
    measured_bwd = replace(fa, extra={"causal": "1", "pass": "bwd"})
    assert flops.convention_flop(measured_bwd) == pytest.approx(
        2.5 * 4 * 2 * 8192**2 * 16 * 128 / 2
    )
    hpl = case(flop_convention="hpl_standard", extra_params="hpl_n=1000")
    assert flops.convention_flop(hpl) == pytest.approx(2 / 3 * 1e9 + 2e6)
    with pytest.raises(flops.ConventionError):
        flops.convention_flop(
            case(
                flop_convention="flash_attn_benchmark",
                batch=2,
                seq_len=8,
                heads=1,
                head_dim=8,
                extra_params="attn_pass=unknown_fwd_or_fwd_bwd",
            )
        )


# ---------------------------------------------------------------------------------------
# Scenario construction
# ---------------------------------------------------------------------------------------


def test_megatron_placement_tp_inside_then_dp_then_pp():
    # T01: DP 32 over 4 nodes of 8 -> DP 8 on the NVSwitch, DP 4 across nodes
    assert place_degrees({"TP": 1, "DP": 32, "PP": 1}, 32, 8) == [
        LevelSpec("node_dp", 8, "DP", True),
        LevelSpec("net_dp", 4, "DP", False),
    ]
    # T04: TP 8 fills the node, DP 32 across
    assert place_degrees({"TP": 8, "DP": 32, "PP": 1}, 256, 8) == [
        LevelSpec("node_tp", 8, "TP", True),
        LevelSpec("net_dp", 32, "DP", False),
    ]
    assert place_degrees({"TP": 2, "DP": 2, "PP": 4}, 16, 8) == [
        LevelSpec("node_tp", 2, "TP", True),
        LevelSpec("node_dp", 2, "DP", True),
        LevelSpec("node_pp", 2, "PP", True),
        LevelSpec("net_pp", 2, "PP", False),
    ]


def test_t01_scenario_is_tagged_and_carries_scale_efficiencies():
    t01 = next(c for c in read_cases(DEV) if c.id == "T01")
    sc = load_case_scenario(t01, DEV)
    node, net = sc.system.network
    assert (node.degree, node.parallelism, node.link_bandwidth_Bps) == (8, ("DP",), 300e9)
    assert (net.degree, net.parallelism, net.link_bandwidth_Bps) == (4, ("DP",), 25e9)
    assert node.efficiency.bus_bw_util == 0.775 and net.efficiency.bus_bw_util == 1.0
    assert sc.workload.recompute == "full" and sc.workload.global_batch == 512
    assert sc.setup.workload.llm_training.attention == setup_pb2.UNFUSED_ATTENTION
    assert sc.setup.workload.llm_training.dropout == 0.1


@pytest.mark.parametrize(
    "row,impl,dropout",
    [
        ("T01", "UNFUSED_ATTENTION", 0.1),  # megatron_sc21_eq3: Megatron-LM 2021
        ("T12", "UNFUSED_ATTENTION", 0.1),  # calculon_* flags: Korthikanti et al. 2022
        ("I12", "UNFUSED_ATTENTION", 0.0),  # op_qk_s / op_softmax_s / op_av_s timed apart
        ("I13", "UNFUSED_ATTENTION", 0.0),
        ("I06", "FUSED_ATTENTION", 0.0),  # TensorRT-LLM
        ("I10", "FUSED_ATTENTION", 0.0),
    ],
)
def test_attention_implementation_follows_the_rows_fields(row, impl, dropout):
    case_ = next(c for c in read_cases(DEV) if c.id == row)
    got, p = attention_impl(case_)
    assert setup_pb2.AttentionImpl.Name(got) == impl and p == dropout


def test_an_explicit_attention_impl_wins():
    t01 = next(c for c in read_cases(DEV) if c.id == "T01")
    fused = Case(t01.cells, {**t01.extra, "attention_impl": "fused", "dropout": "0.2"})
    assert attention_impl(fused) == (setup_pb2.FUSED_ATTENTION, 0.2)
    odd = Case(t01.cells, {**t01.extra, "attention_impl": "flash3"})
    with pytest.raises(Unmodelable, match="attention_impl=flash3"):
        attention_impl(odd)


def test_i12_attention_core_kernels_by_hand():
    """I12 on one A100 (TP 4: 24 heads, batch 8, s = 2048, E = 8 x 24 x 2048^2 scores):
    softmax = 0.5 us + 5 E / (19.5 TF x 0.076) (vector-bound: its 4E bytes take 2.0 ms at
    0.79 x 2.039 TB/s); QK^T = 0.5 us + 2 E 128 / (312 TF x 0.832 x 128/(128+176) x
    occupancy 1: 2048^2/(128 x 256) x 192 = 24576 tiles = 227.6 waves -> 228)."""
    i12 = next(c for c in read_cases(DEV) if c.id == "I12")
    p = pipeline.plan(load_case_scenario(i12, DEV))
    ks = {k.name: k for ph in p.phases if ph.role == "layer" for k in ph.kernels}
    E = 8 * 24 * 2048**2
    assert ks["attention_softmax"].compute_s == pytest.approx(0.5e-6 + 5 * E / (19.5e12 * 0.076))
    assert ks["attention_softmax"].memory_s == pytest.approx(4 * E / (2039e9 * 0.79))
    occupancy = 24576 / (228 * 108)
    util = 0.832 * 128 / (128 + 176) * occupancy
    assert ks["attention_scores"].compute_s == pytest.approx(
        0.5e-6 + 2 * E * 128 / (312e12 * util), rel=1e-9
    )


def test_collective_prediction_by_hand():
    """Alpha-beta on one NVSwitch level: t = 2 steps x 6.26 us + 2(p-1)/p x S / (300 GB/s x
    the calibrated fraction at S); busbw = 2(p-1)/p x S / t."""
    rows = {c.id: c for c in read_cases(DEV)}
    s = 2**33  # C03: 8 GiB on 8 A100s, fraction 0.772
    t = 2 * 6.26e-6 + 1.75 * s / (300e9 * 0.772)
    assert predict(rows["C03"], DEV).value == pytest.approx(1.75 * s / t)
    # C10: 8 B on 4 A100s is the latency floor, 2 x 6.26 us (+ 1.5 x 8 B at the 64 KiB rate)
    assert predict(rows["C10"], DEV).value == pytest.approx(2 * 6.26e-6 + 12 / (300e9 * 0.031))
    # C07: 1 MiB on 8 H100s: 2 x 12.8 us + 1.75 MiB / (450 GB/s x 0.249)
    t = 2 * 12.8e-6 + 1.75 * 2**20 / (450e9 * 0.249)
    assert predict(rows["C07"], DEV).value == pytest.approx(1.75 * 2**20 / t)


def test_memory_copy_is_dram_bandwidth_times_dram_util():
    k14 = next(c for c in read_cases(DEV) if c.id == "K14")
    assert predict(k14, DEV).value == pytest.approx(2039e9 * 0.79)


def test_flop_metric_uses_the_rows_convention_not_mapshards_count():
    t01 = next(c for c in read_cases(DEV) if c.id == "T01")
    t = 3.528
    assert metric_from_time(t01, t, 312e12) == pytest.approx(
        t01.extra_float("derived_flops_per_iteration") / (t * 32), rel=1e-5
    )
    assert math.isclose(metric_from_time(t01, 1.0, 1.0) * 1.0 * 32, flops.convention_flop(t01))


def test_a_defect_on_one_row_is_recorded_not_raised(tmp_path, monkeypatch):
    """As a sweep records a point that raised: the other rows are still predicted."""
    dev = {c.id: c.cells for c in read_cases(DEV)}
    cases = _write(tmp_path / "cases.csv", [dev["K14"], {**dev["C03"], "id": "X1"}])
    real = vc.predict

    def predict(case, where):
        if case.id == "X1":
            raise ZeroDivisionError("float division by zero")
        return real(case, where)

    monkeypatch.setattr(vc, "predict", predict)
    out = tmp_path / "out"
    assert main(["validate", str(cases), "--out", str(out)]) == 0
    got = {r["id"]: r for r in csv.DictReader(open(out / "validation.csv", newline=""))}
    assert got["K14"]["predicted"]
    assert got["X1"]["reason"].startswith("failed: ZeroDivisionError: float division by zero")


def test_a_csv_saved_with_a_byte_order_mark_reads_its_first_column(tmp_path):
    """A spreadsheet's UTF-8 export starts with a BOM, which made the header's first
    column "\ufeffid" and the file "missing column(s) id" (found by fuzzing)."""
    dev = {c.id: c.cells for c in read_cases(DEV)}
    plain = _write(tmp_path / "plain.csv", [dev["K14"]])
    marked = tmp_path / "marked.csv"
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert [c.id for c in read_cases(marked)] == ["K14"]
    assert main(["validate", str(marked), "--out", str(tmp_path / "out")]) == 0


def test_a_grad_accum_row_with_micro_batch_0_is_malformed(tmp_path):
    """global_batch / (micro_batch x dp) divided by zero (found by fuzzing)."""
    dev = {c.id: c.cells for c in read_cases(DEV)}
    row = {**dev["T11"], "id": "X1", "micro_batch": "0", "extra_params": "grad_accum=4"}
    cases = _write(tmp_path / "cases.csv", [row])
    assert main(["validate", str(cases), "--out", str(tmp_path / "out")]) == 0
    got = next(csv.DictReader(open(tmp_path / "out" / "validation.csv", newline="")))
    assert got["reason"] == "malformed row: micro_batch 0: give at least 1"


@pytest.mark.parametrize("value", ["-5", "abc", "1e5"])
def test_an_hpl_size_that_is_no_whole_number_is_said_so(value, tmp_path):
    """hpl_n=-5 or abc was reported as a row without hpl_n (found by fuzzing)."""
    fit = {c.id: c.cells for c in read_cases(ROOT_VALIDATION / "validation_public_fit.csv")}
    row = {**fit["M-H200-H001"], "id": "X1"}
    row["extra_params"] = row["extra_params"].replace("hpl_n=32768", f"hpl_n={value}")
    assert f"hpl_n={value}" in row["extra_params"]
    cases = _write(tmp_path / "cases.csv", [row])
    assert main(["validate", str(cases), "--out", str(tmp_path / "out")]) == 0
    got = next(csv.DictReader(open(tmp_path / "out" / "validation.csv", newline="")))
    assert got["reason"] == f"not modelled: hpl_n={value} is not a whole number >= 0"
