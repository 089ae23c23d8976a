"""Result folder: summary.json contract, CSV tables, terminal and explain text, atomic writes."""

from __future__ import annotations

import csv
import io
import json
import math
import re
import shutil
from dataclasses import replace

import pytest
from report_fixtures import inference_plan, system, training_plan

from mapshard.cli import main
from mapshard.fmt import fmt_time
from mapshard.report.dot import mapping_dot
from mapshard.report.explain import format_explain
from mapshard.report.html import report_html
from mapshard.report.summary import summary_dict, summary_json
from mapshard.report.tables import CONFIG_COLUMNS, KERNEL_COLUMNS, configs_csv, kernels_csv
from mapshard.report.terminal import format_summary
from mapshard.report.totals import phase_total_s
from mapshard.report.write import MARKER, result_files, write_results
from schema.errors import SetupError
from solver.plan import MemoryUse, SolveStats

CONTRACT = (
    "status", "gap", "latency_s", "parallelism", "system_cost",
    "system_power_W", "workload_flop", "flops_utilization", "memory_per_chip_bytes",
    "num_params", "num_active_params",
)  # fmt: skip


def test_summary_has_the_contract_keys_with_plan_values():
    plan = training_plan()
    s = summary_dict(plan)
    for key in CONTRACT:
        assert key in s, key
    assert s["status"] == "optimal"
    assert s["latency_s"] == plan.latency_s
    assert s["iteration_time_s"] == plan.iteration_time_s
    assert "ttft_s" not in s and "tpot_s" not in s
    assert s["parallelism"] == {"tp": 2, "pp": 2, "dp": 2, "ep": 1, "cp": 1}
    assert s["memory_per_chip_bytes"] == plan.memory.total
    assert sum(s["memory_breakdown_bytes"].values()) == pytest.approx(plan.memory.total)
    assert s["choices_solved"] == 3 and s["choices_pruned"] == 2
    assert list(s) == sorted(s)
    assert sum(p["total_s"] for p in s["phases"]) == pytest.approx(s["busy_time_s"])


def test_summary_inference_fields_and_timing_switch():
    plan = inference_plan()
    s = summary_dict(plan)
    assert {"ttft_s", "tpot_s", "tokens_per_s"} <= s.keys()
    assert "iteration_time_s" not in s
    # wall-clock figures are timing.json's alone: summary.json is the same on any machine
    assert "solve_time_s" not in s and "build_time_s" not in s


@pytest.mark.parametrize("make", [training_plan, inference_plan])
def test_time_per_step_adds_up_to_the_step(make) -> None:
    """configs.csv's per_step_s and the step's own terms add up to the step time, and so
    does the terminal table (the busy time summed over pipeline stages does not: 2 stages)."""
    plan = make()
    rows = list(csv.DictReader(io.StringIO(configs_csv(plan))))
    terms = [v for k, v in plan.time_breakdown.items() if k not in ("pipeline_compute",)]
    if plan.workload_kind == "training":  # prefill/decode entries are the graphs' own
        graphs = sum(float(r["per_step_s"]) for r in rows)
        assert graphs == pytest.approx(plan.time_breakdown["pipeline_compute"])
        assert graphs + sum(terms) == pytest.approx(plan.latency_s)
        assert sum(float(r["total_s"]) for r in rows) > 1.5 * graphs  # busy over 2 stages
    else:
        assert sum(float(r["per_step_s"]) for r in rows) == pytest.approx(plan.latency_s)
    assert sum(float(r["share_of_step"]) for r in rows) <= 1 + 1e-9
    table = format_summary(plan, color=False).split("Where the time goes")[1]
    last = [line for line in table.splitlines() if line.endswith("100.0%")]
    assert last and fmt_time(plan.latency_s) in last[0]


def test_summary_json_is_strict_json_even_with_infinite_gap():
    plan = training_plan()
    plan = replace(plan, stats=replace(plan.stats, status="time_limit", gap=math.inf))
    data = json.loads(summary_json(plan))
    assert data["gap"] is None and data["status"] == "time_limit"


def test_kernels_and_configs_csv_round_trip():
    plan = training_plan()
    rows = list(csv.DictReader(io.StringIO(kernels_csv(plan))))
    assert tuple(rows[0]) == KERNEL_COLUMNS
    assert len(rows) == len(plan.kernels())
    qkv = next(r for r in rows if r["phase"] == "layer" and r["name"] == "qkv")
    k = next(k for k in plan.kernels() if k.name == "qkv")
    assert float(qkv["flop"]) == k.flop and float(qkv["compute_s"]) == k.compute_s
    assert qkv["dims"] == "m=1024 k=2048 n=6144" and qkv["count"] == "8"
    crow = list(csv.DictReader(io.StringIO(configs_csv(plan))))
    assert tuple(crow[0]) == CONFIG_COLUMNS
    assert len(crow) == sum(len(p.configs) for p in plan.phases)
    for p in plan.phases:
        total = sum(float(r["total_s"]) for r in crow if r["phase"] == p.name)
        assert total == pytest.approx(phase_total_s(plan, p), rel=1e-12)
    assert sum(float(r["share_of_busy"]) for r in crow) == pytest.approx(1.0)


def test_csv_shows_launch_overhead_apart_from_compute():
    """A GEMV on the serialised rule (L = overhead + max(work, M) + N), by hand in us:
    work 1.43 + launch 4.5 = compute 5.93, DRAM 5.82, no network: L = 4.5 + 5.82 = 10.32,
    memory-bound; kernels.csv shows overhead 4.5 and compute 1.43, not 5.93."""
    plan = training_plan()
    layer = plan.phases[0]
    gemv = replace(layer.kernels[0], compute_s=5.93e-6, memory_s=5.82e-6, network_s=0.0,
                   overhead_s=4.5e-6, bound="memory")  # fmt: skip
    phases = (replace(layer, kernels=(gemv, *layer.kernels[1:])), *plan.phases[1:])
    plan = replace(plan, phases=phases, overlap="serial_network", network_hidden_share=0.0)
    rows = list(csv.DictReader(io.StringIO(kernels_csv(plan))))
    row = next(r for r in rows if r["phase"] == layer.name and r["name"] == gemv.name)
    assert float(row["overhead_s"]) == pytest.approx(4.5e-6)
    assert float(row["compute_s"]) == pytest.approx(1.43e-6)
    assert float(row["time_s"]) == pytest.approx(10.32e-6)
    assert row["bound"] == "memory"


def test_format_summary_prints_dfmodel_statistics_lines():
    """DFModel's `print(label, value)` lines, each value a plain number `float()` reads, at
    six significant digits (no exponent, no 17-digit tail)."""
    plan = training_plan()
    text = format_summary(plan, color=False)
    lines = text.splitlines()
    assert "System Cost 123456" in lines  # the fixture's 123456.0 $
    assert "System Power 5432.1" in lines
    assert "Optimizer Runtime (s) 1.25" in lines
    values = {
        "Workload FLOP ": plan.workload_flop,
        "System FLOPS Utilization ": plan.flops_utilization,
    }
    for label, exact in values.items():
        (line,) = [x for x in lines if x.startswith(label)]
        shown = line.removeprefix(label)
        assert re.fullmatch(r"\d+(\.\d+)?", shown), line
        assert len(shown.replace(".", "").strip("0")) <= 6, line
        assert float(shown) == pytest.approx(exact, rel=5e-6)
    assert {"TP 2", "PP 2", "DP 2"} <= set(lines)
    assert "\033[" not in text
    assert "Iteration time 5" in text or "Iteration time" in text
    assert "config 3" in text and "% step" in text
    assert "\033[1m" in format_summary(plan, color=True)


def test_format_summary_inference_headline():
    text = format_summary(inference_plan(), color=False)
    assert "TTFT" in text and "TPOT" in text and "tokens/s" in text


def test_explain_names_binding_bound_and_runner_up_choice():
    plan = training_plan()
    text = format_explain(plan)
    assert "qkv: compute-bound" in text
    assert "proj: network-bound" in text
    rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("     tp=")}
    assert rows["tp=8"].endswith("infeasible: weights exceed HBM")
    assert rows["tp=4"].endswith("slower by 10.0%")  # every outer candidate, each why it lost
    assert "runner-up: tile" not in text  # the solver ranks no per-kernel runner-up


def _files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_write_results_writes_every_file_deterministically(tmp_path):
    plan = training_plan()
    out = tmp_path / "res"
    paths = write_results(plan, out, setup_text_with_plan="name: 'x'", system=system())
    names = {p.name for p in paths}
    expected = {"summary.json", "kernels.csv", "configs.csv", "trace.json", "mapping.dot",
                "report.html", "plan.txt"}  # fmt: skip
    assert expected <= names
    assert ("mapping.svg" in names) == (shutil.which("dot") is not None)
    assert (out / MARKER).is_file()
    first = _files(out)
    write_results(plan, out, setup_text_with_plan="name: 'x'", system=system())
    assert _files(out) == first
    assert json.loads((out / "summary.json").read_text())["status"] == "optimal"
    assert (out / "plan.txt").read_text() == "name: 'x'\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".res.")]


@pytest.fixture
def no_plots(monkeypatch):
    """The folder logic does not need the (slow) plots: stub the page and the SVG."""
    monkeypatch.setattr("mapshard.report.write.report_html", lambda *a: "<html></html>\n")
    monkeypatch.setattr("mapshard.report.write.render_svg", lambda *a: None)


def test_write_results_replaces_only_its_own_folders(tmp_path, no_plots):
    plan = inference_plan()
    out = tmp_path / "res"
    write_results(plan, out, setup_text_with_plan="a")
    write_results(plan, out)  # replaces: plan.txt is gone
    assert not (out / "plan.txt").exists()
    (out / "notes.md").write_text("mine")
    with pytest.raises(SetupError, match="notes.md"):
        write_results(plan, out)
    assert (out / "notes.md").read_text() == "mine"
    user = tmp_path / "user"
    user.mkdir()
    (user / "data.csv").write_text("1")
    with pytest.raises(SetupError, match=str(user)):
        write_results(plan, user)
    assert [p.name for p in user.iterdir()] == ["data.csv"]
    empty = tmp_path / "empty"
    empty.mkdir()
    write_results(plan, empty)
    assert (empty / "summary.json").exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_write_results_failure_leaves_previous_result(tmp_path, monkeypatch, no_plots):
    plan = training_plan()
    out = tmp_path / "res"
    write_results(plan, out)
    before = _files(out)

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("mapshard.report.write.trace_json", boom)
    with pytest.raises(RuntimeError):
        write_results(plan, out)
    assert _files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]


def test_mapping_dot_clusters_by_configuration():
    plan = training_plan()
    dot = mapping_dot(plan)
    assert dot.startswith("digraph mapping {")
    assert dot.count("subgraph cluster_p0_c") == len(plan.phases[0].configs)
    assert '"layer/qkv"' in dot and "style=dashed" in dot


def test_an_infeasible_plan_without_phases_still_reports(no_plots):
    plan = replace(
        training_plan(),
        phases=(),
        latency_s=math.inf,
        iteration_time_s=None,
        memory=MemoryUse(),
        stats=SolveStats("infeasible", math.nan, math.nan, math.inf, 0.1),
    )
    files = result_files(plan)
    data = json.loads(files["summary.json"])
    assert data["status"] == "infeasible" and data["latency_s"] is None
    events = json.loads(files["trace.json"])["traceEvents"]
    assert not [e for e in events if e.get("cat") in ("schedule", "config", "kernel")]
    assert "Latency -" in format_summary(plan, color=False)
    assert "Outer choice" in format_explain(plan)


def test_report_html_handles_an_empty_plan():
    plan = replace(training_plan(), phases=(), latency_s=math.inf, choices=())
    page = report_html(plan)
    assert "No GEMM with a known M, K, N" in page and "No kernel has both FLOP" in page


def test_a_gemm_at_the_launch_floor_is_overhead_bound(tmp_path) -> None:
    """A 128^3 BF16 GEMM on one H100 does ~0.7 us of work, under the chip file's 8.0 us GEMM
    floor (kernel_min_time_us; launch kernel_overhead_us 4.5 inside it): kernels.csv puts the
    floor's excess in overhead_s, so overhead_s + compute_s = 8.0 us and the bound is
    overhead, not compute."""
    (tmp_path / "setup.txt").write_text(
        "workload { gemm { M: 128 K: 128 N: 128 } }\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 1 }\n'
        "execution { execution_style: KERNEL_BY_KERNEL }\n"
    )
    out = tmp_path / "r"
    assert main(["run", str(tmp_path), "--out", str(out), "--quiet", "--no-sensitivity"]) == 0
    rows = list(csv.DictReader((out / "kernels.csv").open()))
    assert len(rows) == 1
    row = rows[0]
    assert float(row["overhead_s"]) + float(row["compute_s"]) == pytest.approx(8.0e-6)
    assert float(row["overhead_s"]) > 4.5e-6 and float(row["compute_s"]) < 1e-6
    assert row["bound"] == "overhead"
