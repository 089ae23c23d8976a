"""The result folder of `mapshard run`: its files (no disk access) and writing them as one
folder MapShard owns (mapshard/outdir.py: atomic, never over the user's files)."""

from __future__ import annotations

from pathlib import Path

from generator.graph import Workload
from hardware.system import System
from mapshard.outdir import MARKER, check_replaceable, check_writable, replace_folder
from mapshard.report.dfmodel_final import dfmodel_files
from mapshard.report.dot import mapping_dot, render_svg
from mapshard.report.html import report_html
from mapshard.report.plan_text import plan_setup_texts
from mapshard.report.summary import summary_json, timing_json
from mapshard.report.tables import configs_csv, kernels_csv
from mapshard.report.trace import trace_json
from mapshard.scenario import Scenario, plan_workload
from mapshard.views import Views
from solver.plan import Plan

__all__ = [
    "MARKER",
    "check_replaceable",
    "check_writable",
    "result_files",
    "write_result_folder",
    "write_results",
]


def result_files(
    plan: Plan,
    setup_text_with_plan: str | None = None,
    system: System | None = None,
    workload: Workload | None = None,
    extra: dict[str, str] | None = None,
    views: Views | None = None,
) -> dict[str, str]:
    """File name -> content of everything in a result folder (no disk access); `extra`:
    further text files (DFModel's dse.txt, dse_sharded.txt, dse_final.txt)."""
    dot = mapping_dot(plan, workload)
    svg = render_svg(dot, sum(len(p.kernels) for p in plan.phases))
    files = {
        "summary.json": summary_json(plan, views),
        "timing.json": timing_json(plan),
        "kernels.csv": kernels_csv(plan),
        "configs.csv": configs_csv(plan),
        "trace.json": trace_json(plan),
        "mapping.dot": dot,
        "report.html": report_html(plan, system, workload, svg, views),
    }
    if svg is not None:
        files["mapping.svg"] = svg
    if setup_text_with_plan is not None:
        files["plan.txt"] = setup_text_with_plan.rstrip("\n") + "\n"
    for name, text in (extra or {}).items():
        files[name] = text.rstrip("\n") + "\n"
    return files


def write_results(
    plan: Plan,
    out_dir: Path | str,
    setup_text_with_plan: str | None = None,
    system: System | None = None,
    workload: Workload | None = None,
    extra: dict[str, str] | None = None,
    views: Views | None = None,
) -> list[Path]:
    """Write the result folder atomically; returns the paths written, sorted.

    `system` gives the roofline its DRAM bandwidth and the frontier the chip's SRAM;
    `workload` gives mapping.dot the graph's edges and the frontier exact GEMM shapes;
    `views` adds the what-if table, the serving view and the request-stream view to
    summary.json and report.html.
    Raises SetupError when out_dir holds anything MapShard did not write.
    """
    return replace_folder(
        out_dir, result_files(plan, setup_text_with_plan, system, workload, extra, views)
    )


def write_result_folder(
    scenario: Scenario, plan: Plan, out: str | Path, views: Views | None = None
) -> list[Path]:
    """A scenario's result folder, atomically: plan.txt (the setup with the plan pinned),
    DFModel's dse.txt, dse_sharded.txt and dse_final.txt for DFModel graphs, and the
    workload the plan was made for, which gives mapping.dot the graph's real edges and the
    report its frontier."""
    extra = dfmodel_files(scenario, plan) or None
    return write_results(
        plan,
        out,
        plan_setup_texts(scenario, plan, views),
        scenario.system,
        plan_workload(scenario, plan),
        extra,
        views,
    )
