"""The what-if table re-solves each scaled resource; on a one-GEMM chip with no efficiency
losses the new latencies follow from the roofline by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

from mapshard import pipeline
from mapshard.analyses.sensitivity import scaled_systems, skip_reason
from mapshard.analyses.sensitivity import sensitivity as what_if_table
from mapshard.cli import main
from mapshard.views import Row, Sensitivity

BYTES = 2  # BF16
PEAK = 100e12  # bf16_tflops: 100
BW = 1000e9  # dram_bw: 1000 GB/s
SRAM = 64 * 2**20  # bytes


def _setup(tmp_path: Path, m: int, k: int, n: int, dram_cap: float = 80e9) -> Path:
    text = (
        f"workload {{ gemm {{ M: {m} K: {k} N: {n} }} }}\n"
        "system { num_chip: 1 accelerator { core: 1 systolic_width: 1 systolic_height: 1 "
        f"sram_cap: {SRAM} freq: 1 bf16_tflops: 100 vector_tflops: 10 }} "
        f"memory {{ dram_bw: 1000 dram_cap: {dram_cap:g} }} }}\n"
    )
    folder = tmp_path / f"gemm_{m}_{k}_{n}_{dram_cap:g}"
    folder.mkdir()
    (folder / "setup.txt").write_text(text)
    return folder


def _rows(summary: dict) -> dict[tuple[str, float], dict]:
    return {(r["resource"], r["factor"]): r for r in summary["sensitivity"]["rows"]}


def test_memory_bound_gemv_halves_with_twice_the_bandwidth(tmp_path: Path) -> None:
    # M=8, K=N=4096: SRAM holds an A panel (8*4096 + 4096 + 8 elements), so the traffic is
    # compulsory: MK + KN + MN = 32,768 + 16,777,216 + 32,768 = 16,842,752 elements
    # = 33,685,504 B -> 33.69 us at 1 TB/s; compute 2*8*4096*4096 / 100e12 = 2.68 us.
    m, k, n = 8, 4096, 4096
    traffic_B = (m * k + k * n + m * n) * BYTES
    assert traffic_B == 33_685_504
    base = traffic_B / BW
    out = tmp_path / "r"
    assert main(["run", str(_setup(tmp_path, m, k, n)), "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    rows = _rows(summary)
    assert math.isclose(summary["latency_s"], base, rel_tol=1e-9)
    assert math.isclose(rows[("DRAM bandwidth", 2.0)]["latency_s"], base / 2, rel_tol=1e-9)
    assert math.isclose(rows[("DRAM bandwidth", 0.5)]["latency_s"], base * 2, rel_tol=1e-9)
    # compute x0.5 is 5.37 us, still under the memory time: no change
    for resource in ("compute", "SRAM", "DRAM capacity"):
        for factor in (0.5, 2.0):
            assert math.isclose(rows[(resource, factor)]["latency_s"], base, rel_tol=1e-9)
    assert all(r["status"] == "optimal" for r in rows.values())
    binding = summary["sensitivity"]["binding"]
    assert binding.startswith("DRAM bandwidth binds: 100% faster with 2x DRAM bandwidth")
    html = (out / "report.html").read_text()
    assert "<h2>What if</h2>" in html and "100% faster" in html


def test_compute_bound_gemm_follows_peak(tmp_path: Path) -> None:
    # M=K=N=4096: compute 2*4096^3 / 100e12 = 1.374 ms; compulsory traffic
    # 3*4096^2*2 B = 100.7 MB -> 101 us (SRAM 64 MiB holds a 4096-wide panel): compute binds.
    m = k = n = 4096
    base = 2 * m * k * n / PEAK
    assert math.isclose(base, 1.374389534e-3, rel_tol=1e-9)
    scenario = pipeline.load_scenario(_setup(tmp_path, m, k, n))
    plan = pipeline.plan(scenario)
    table = what_if_table(scenario, plan, force=True)
    rows = {(r.resource, r.factor): r for r in table.rows}
    assert math.isclose(plan.latency_s, base, rel_tol=1e-9)
    assert math.isclose(rows[("compute", 2.0)].latency_s, base / 2, rel_tol=1e-9)
    assert math.isclose(rows[("compute", 0.5)].latency_s, base * 2, rel_tol=1e-9)
    assert math.isclose(rows[("DRAM bandwidth", 2.0)].latency_s, base, rel_tol=1e-9)
    assert table.binding().startswith("compute binds: 100% faster with 2x compute")


def test_half_the_memory_capacity_is_reported_infeasible(tmp_path: Path) -> None:
    # weights K*N*2 B = 33.6 MB; 50 MB of DRAM holds them, 25 MB (x0.5) does not
    folder = _setup(tmp_path, 8, 4096, 4096, dram_cap=50e6)
    scenario = pipeline.load_scenario(folder)
    table = what_if_table(scenario, pipeline.plan(scenario), force=True)
    rows = {(r.resource, r.factor): r for r in table.rows}
    half = rows[("DRAM capacity", 0.5)]
    assert half.status == "infeasible" and half.latency_s is None
    assert rows[("DRAM capacity", 2.0)].status == "optimal"
    assert any("infeasible" in cells[4] for cells in table.table_rows())


def test_link_levels_get_rows_and_the_flag_switches_it_off(tmp_path: Path) -> None:
    scenario = pipeline.load_scenario(
        Path(__file__).resolve().parents[2] / "scenarios/llama31_70b_decode_8xh100"
    )
    names = [name for name, _, _ in scaled_systems(scenario.system)]
    levels = [lv.name for lv in scenario.system.network]
    assert levels and all(f"link bandwidth ({lv})" in names for lv in levels)
    out = tmp_path / "r"
    folder = _setup(tmp_path, 8, 4096, 4096)
    assert main(["run", str(folder), "--out", str(out), "--quiet", "--no-sensitivity"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert "sensitivity" not in summary


def test_default_scenario_report_has_the_what_if_table_and_the_frontier(tmp_path: Path) -> None:
    """#17's "done when": `./run.sh` (the default scenario) reports the what-if table and,
    for this LLM scenario, the data-movement frontier plot."""
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "r"
    assert main(["run", str(root / "scenarios/llama31_8b_decode_h100"), "--out", str(out),
                 "--quiet"]) == 0  # fmt: skip
    html = (out / "report.html").read_text()
    assert "<h2>What if</h2>" in html and "DRAM bandwidth binds" in html
    frontier = html[html.index("<h2>Data-movement frontier") :]
    assert "<svg" in frontier[: frontier.index("<h2>", 10)]
    summary = json.loads((out / "summary.json").read_text())
    rows = summary["sensitivity"]["rows"]
    assert len(rows) == 8 and all(r["status"] == "optimal" for r in rows)  # 1 chip: no links


def test_a_time_limited_base_plan_is_said_in_the_binding_sentence() -> None:
    rows = (Row("compute", 2.0, "optimal", 0.5, 0.0), Row("SRAM", 2.0, "time_limit", 0.9, 0.02))
    table = Sensitivity(1.0, 5.0, rows, "time_limit")
    # 1.0 s -> 0.5 s is 1/0.5 - 1 = 100% faster; 1.0 -> 0.9 is 1/0.9 - 1 = 11% faster
    assert table.binding().startswith(
        "compute binds: 100% faster with 2x compute; 2x SRAM gives 11% faster (the plan "
        "itself stopped at time limit"
    )
    assert "time limit: best found, within 2.0% of optimal" in table.table_rows()[1][4]


def test_large_dataflow_graphs_skip_the_table_unless_asked() -> None:
    """DFModel's 41-kernel DATAFLOW layer: whether the table is computed depends on the
    graph's size only (same on every machine), and the empty table says why."""
    root = Path(__file__).resolve().parents[2]
    scenario = pipeline.load_scenario(root / "scenarios" / "dfmodel_gpt3_1t_sn30")
    reason = skip_reason(scenario)
    assert "DATAFLOW graph of 41 kernels" in reason and "--what-if" in reason
    small = pipeline.load_scenario(root / "scenarios" / "llama31_8b_decode_h100")
    assert skip_reason(small) == ""
