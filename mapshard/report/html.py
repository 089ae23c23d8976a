"""report.html: one self-contained page (inline CSS and SVG, no scripts, no external URLs)
that a person opens to see what the plan is, where the time goes and how far it is from the
hardware's limits."""

from __future__ import annotations

from typing import Any

from generator.graph import Kernel, Workload
from hardware.system import System
from mapshard.analyses.stream_sim import PERCENTILES
from mapshard.fmt import fmt_bytes, fmt_pct, fmt_si, fmt_time, sig
from mapshard.report import plots
from mapshard.report.bounds import frontier_curves, gemm_shape
from mapshard.report.energy import money_text, step_energy, step_word
from mapshard.report.explain import choice_rows, memory_text, throughput_text, throughput_unit
from mapshard.report.html_tables import tables_section
from mapshard.report.html_views import sensitivity_section, serving_section, stream_section
from mapshard.report.markup import escape as _e
from mapshard.report.markup import table as _table
from mapshard.report.summary import parallelism_text, training_text
from mapshard.report.terminal import difference_lines
from mapshard.report.totals import (
    phase_instances,
    phase_step_s,
    phase_total_s,
    row_time_s,
    step_terms,
)
from mapshard.views import StreamView, Views
from solver.plan import Plan

MAX_FRONTIER_GEMMS = 4
MAX_CHOICE_ROWS = 200
CHOICE_HEADER = ("parallelism", "placement", "status", "roofline bound", "latency")
MAX_INLINE_MAPPING = 2_000_000  # bytes of Graphviz SVG worth inlining

CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:0;color:#222;
background:#f6f7f9}
main{max-width:1200px;margin:0 auto;padding:24px}
h1{margin:0 0 4px;font-size:26px}h2{margin:32px 0 8px;font-size:19px;border-bottom:1px solid
#ddd;padding-bottom:4px}.sub{color:#666;margin-bottom:16px}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(175px,1fr));gap:10px}
.card{background:#fff;border:1px solid #e2e4e8;border-radius:8px;padding:10px 12px}
.card .v{font-size:20px;font-weight:600}.card .l{font-size:12px;color:#666}
.card .d{font-size:11px;color:#888}
.fig{background:#fff;border:1px solid #e2e4e8;border-radius:8px;padding:8px;margin:10px 0;
overflow-x:auto}.fig svg{max-width:100%;height:auto}.plot svg{width:100%}
.graph{max-height:900px;overflow:auto}.graph svg{max-width:none}
table{border-collapse:collapse;background:#fff;font-size:12.5px;margin:8px 0;width:100%}
th,td{border:1px solid #e2e4e8;padding:3px 7px;text-align:right}
th{background:#eef0f3}td.t,th.t{text-align:left}table.narrow{width:auto;min-width:45%}
td.t{overflow-wrap:break-word}.tw{max-width:100%;overflow-x:auto}
.note{color:#666;font-size:12.5px}.status{display:inline-block;padding:2px 8px;
border-radius:10px;color:#fff;font-size:13px}.optimal{background:#2e7d32}
.time_limit{background:#ef6c00}.infeasible{background:#c62828}
.warn{background:#fff8e1;border:1px solid #ffe082;border-radius:6px;padding:6px 10px;
margin-bottom:12px}
"""


def _per_s(tokens: float | None) -> str:
    return f"{fmt_si(tokens)} tokens/s" if tokens is not None else "-"


def _card(label: str, value: str, detail: str = "") -> str:
    d = f'<div class="d">{_e(detail)}</div>' if detail else ""
    body = f'<div class="l">{_e(label)}</div><div class="v">{_e(value)}</div>{d}'
    return f'<div class="card">{body}</div>'


def _fig(svg: str, caption: str = "", plot: bool = True) -> str:
    """A figure box; matplotlib plots stretch to the page width, other SVGs keep theirs."""
    cap = f'<div class="note">{_e(caption)}</div>' if caption else ""
    cls = "fig plot" if plot else "fig graph"
    return f'<div class="{cls}">{svg}{cap}</div>'


def headline_cards(plan: Plan, stream: StreamView | None = None) -> str:
    st, m = plan.stats, plan.memory
    cards = []
    if stream is not None:
        s, median = stream.stats, PERCENTILES.index(50)
        cards += [
            _card("stream throughput", _per_s(s.output_tokens_per_s), "output tokens"),
            _card("TTFT p50", fmt_time(s.ttft_s[median]), "time to first token"),
            _card("TPOT p50", fmt_time(s.tpot_s[median]) if s.tpot_s else "-"),
            _card("latency p50", fmt_time(s.latency_s[median]), "per request"),
            _card("plan shown", fmt_time(plan.latency_s), "one engine step"),
        ]
    elif plan.ttft_s is not None or plan.tpot_s is not None:
        cards += [
            _card("request latency", fmt_time(plan.latency_s)),
            _card("TTFT", fmt_time(plan.ttft_s), "time to first token"),
            _card("TPOT", fmt_time(plan.tpot_s), "time per output token"),
        ]
    else:
        cards.append(
            _card(
                "iteration time" if plan.iteration_time_s is not None else "latency",
                fmt_time(plan.iteration_time_s or plan.latency_s),
            )
        )
    if plan.tokens_per_s is not None and stream is None:
        cards.append(_card("throughput", _per_s(plan.tokens_per_s)))
    cards += [
        _card(
            "parallelism",
            parallelism_text(plan, "", skip_ones=True) or "none",
            f"{plan.num_chips} chip"
            + ("s" if plan.num_chips != 1 else "")
            + (f", {plan.micro_batches} micro-batches" if plan.micro_batches > 1 else ""),
        ),
        _card(
            "FLOPS utilization",
            fmt_pct(plan.flops_utilization),
            f"of {fmt_si(plan.peak_flops_per_chip, 'FLOP/s')} per chip",
        ),
        _card(
            "memory per chip",
            fmt_bytes(m.total),
            f"{fmt_pct(m.total / m.capacity)} of {fmt_bytes(m.capacity)}" if m.capacity else "",
        ),
        _card("workload", fmt_si(plan.workload_flop, "FLOP"), "per step"),
        *_calibration_card(plan),
        _card("system cost", money_text(plan.system_cost)),
        _card(
            "system power",
            fmt_si(plan.system_power_W, "W") if plan.system_power_W > 0 else "not modelled",
            f"energy per {step_word(plan)} {step_energy(plan).text()}",
        ),
        # no wall-clock figure here: the report is byte-identical for identical input, the
        # times are in timing.json (and the terminal)
        _card("solver", f"{st.status}", f"gap {fmt_pct(st.gap)}"),
        _card(
            "outer choices",
            f"{st.choices_solved} solved",
            f"{st.choices_pruned} pruned, {st.choices_infeasible} infeasible"
            + (f", {st.choices_not_solved} not solved" if st.choices_not_solved else "")
            + f" of {st.choices_total}",
        ),
    ]
    return '<div class="cards">' + "".join(cards) + "</div>"


def _calibration_card(plan: Plan) -> list[str]:
    """The chip's calibration status: an uncalibrated chip's times are an upper bound on
    speed (every kernel at 100% of peak), which a reader must see beside the numbers."""
    cal = plan.chip_calibration
    if cal is None:
        return []
    detail = (
        ", ".join(cal.measured) + (f"; at peak: {', '.join(cal.at_peak)}" if cal.at_peak else "")
        if cal.calibrated
        else "every kernel at 100% of peak, no overhead: an upper bound on speed"
    )
    return [_card("chip efficiency", cal.status, detail)]


def time_section(plan: Plan) -> str:
    """Where the time goes, per step: the phases' and the step's own terms' wall time,
    adding up to the step (the busy time summed over stages is the table's last column)."""
    per_phase = phase_step_s(plan)
    step = plan.latency_s or 1.0
    rows = [
        [
            p.name,
            p.role,
            sig(phase_instances(plan, p), 12),
            fmt_time(p.latency_s),
            fmt_time(p.lower_bound_s),
            fmt_time(per_phase[p.name]),
            fmt_pct(per_phase[p.name] / step),
            str(len(p.configs)),
            str(len(p.kernels)),
            fmt_time(phase_total_s(plan, p)),
        ]
        for p in plan.phases
    ]
    rows += [
        [
            name.replace("_", " "),
            "step term",
            "",
            "",
            "",
            fmt_time(v),
            fmt_pct(v / step),
            "",
            "",
            "",
        ]
        for name, v in step_terms(plan)
    ]
    rows.append(["total", "", "", "", "", fmt_time(plan.latency_s), "100%", "", "", ""])
    header = ["phase / term", "role", "instances", "one instance", "roofline bound", "per step",
              "share", "configs", "kernels", "busy, all stages"]  # fmt: skip
    out = ["<h2>Where the time goes</h2>", _table(header, rows, 2)]
    if plan.phases:
        out.append(
            _fig(
                plots.time_by_config_svg(plan),
                "Each configuration's share of the step's wall time (its phase's time per step "
                "split by busy time); the step's own terms (pipeline bubble, exposed "
                "communication, optimizer) are bars of their own. The bars add up to the step.",
            )
        )
        out.append(_fig(plots.time_by_class_svg(plan)))
    return "".join(out)


def roofline_section(plan: Plan, system: System | None) -> str:
    if system is not None:
        bw, src, vec = (
            system.dram.bandwidth_Bps,
            system.dram.name or "DRAM",
            system.chip.vector_flops,
        )
    else:
        bw, src, vec = plots.derived_bandwidth(plan), "best any kernel achieves", 0.0
    pts = plots.roofline_points(plan)
    if not pts:
        return "<h2>Roofline</h2><p class='note'>No kernel has both FLOP and DRAM traffic.</p>"
    skipped = len(plan.kernels()) - len(pts)
    note = (
        "Per-chip FLOP = kernel FLOP / chips it is split over; achieved FLOP/s uses the "
        "kernel's latency alone under the plan's overlap rule, launch overhead included "
        "(inside a configuration kernels overlap)."
    )
    if skipped:
        note += f" {skipped} kernels without FLOP or DRAM traffic are not shown."
    return "<h2>Roofline</h2>" + _fig(plots.roofline_svg(plan, bw, src, vec), note)


def memory_section(plan: Plan) -> str:
    return "<h2>Memory per chip</h2>" + _fig(plots.memory_svg(plan))


def _kernels_by_name(workload: Workload | None) -> dict[tuple[str, str], Kernel]:
    """(phase, kernel name) -> kernel, built once (a lookup per kernel: not n^2)."""
    if workload is None:
        return {}
    by_name: dict[tuple[str, str], Kernel] = {}
    for p in workload.phases:
        for kernel in p.graph.kernels:
            by_name.setdefault((p.name, kernel.name), kernel)
    return by_name


def frontier_section(plan: Plan, system: System | None, workload: Workload | None) -> str:
    head = "<h2>Data-movement frontier of the heaviest GEMMs</h2>"
    totals = sorted(
        (
            (row_time_s(plan, k) * phase_instances(plan, p), i, k)
            for p in plan.phases
            for i, k in enumerate(p.kernels)
        ),
        key=lambda x: (-x[0], x[1]),
    )
    gemms: list[tuple[str, int, int, int, float]] = []
    chosen: dict[str, tuple[float, float]] = {}
    kernels = _kernels_by_name(workload)
    for _, _, k in totals:
        shape = gemm_shape(k, plots.kernel_shards(plan, k), kernels.get((k.phase, k.name)))
        if shape is None:
            continue
        name = f"{k.phase}/{k.name}"
        gemms.append((name, *shape))
        chosen[name] = (k.sram_bytes, k.dram_bytes)
        if len(gemms) == MAX_FRONTIER_GEMMS:
            break
    if not gemms:
        return head + "<p class='note'>No GEMM with a known M, K, N in this plan.</p>"
    curves = frontier_curves(gemms, chosen)
    sram = system.chip.sram_bytes if system else max(k.sram_bytes for k in plan.kernels())
    caption = (
        "Least DRAM traffic of each GEMM (per chip, after sharding) for a given on-chip "
        "buffer, over all tilings and loop orders; the star is the plan's tiling."
    )
    return head + _fig(plots.frontier_svg(curves, sram), caption)


def inference_section(plan: Plan) -> str:
    if plan.ttft_s is None and plan.tpot_s is None:
        return ""
    rows = [
        [
            p.name,
            f"{p.steps}",
            fmt_time(p.latency_s * p.count * max(1, plan.micro_batches)),
            fmt_time(phase_total_s(plan, p)),
        ]
        for p in plan.phases
    ]
    return (
        "<h2>Request timing</h2>"
        + f"<p>TTFT {_e(fmt_time(plan.ttft_s))}, TPOT {_e(fmt_time(plan.tpot_s))}, "
        + f"throughput {_e(_per_s(plan.tokens_per_s))}, request latency "
        + f"{_e(fmt_time(plan.latency_s))}.</p>"
        + _table(["phase", "steps", "one step", "all steps"], rows, narrow=True)
    )


def solver_section(plan: Plan) -> str:
    st = plan.stats
    stats = [
        ["status", st.status],
        ["objective", fmt_time(st.objective)],
        ["bound", fmt_time(st.bound)],
        ["gap", fmt_pct(st.gap)],
        ["solve and build time", "timing.json (wall clock, differs run to run)"],
        ["solver", st.solver],
        ["fusion search", st.fusion_search or "-"],
        ["variables / binaries / rows", f"{st.num_vars} / {st.num_binaries} / {st.num_rows}"],
        ["MILPs solved", str(st.milps_solved)],
        [
            "outer choices",
            f"{st.choices_total} total, {st.choices_solved} solved, "
            f"{st.choices_pruned} pruned, {st.choices_infeasible} infeasible"
            + (f", {st.choices_not_solved} not solved" if st.choices_not_solved else ""),
        ],
        *([["training knobs", training_text(plan)]] if plan.training else []),
    ]
    rows = [
        [
            " ".join(f"{k}={v}" for k, v in sorted(c.parallelism.items()))
            + (f"; {c.knobs}" if c.knobs else ""),
            c.placement,
            r.status,
            fmt_time(c.lower_bound_s),
            fmt_time(c.latency_s),
            memory_text(r),  # explain.choice_rows: >= a floor when not solved
            throughput_text(r),
            r.why or c.reason,
        ]
        for c, r in zip(plan.choices[:MAX_CHOICE_ROWS], choice_rows(plan))
    ]
    more = (
        f"<p class='note'>{len(plan.choices) - MAX_CHOICE_ROWS} more choices not shown.</p>"
        if len(plan.choices) > MAX_CHOICE_ROWS
        else ""
    )
    out = "<h2>Solver</h2>" + _table(["statistic", "value"], stats, 2, narrow=True)
    if rows:
        out += (
            "<h3>Outer choices</h3>"
            + _table(
                [*CHOICE_HEADER, "memory per chip", f"{throughput_unit(plan)} per chip", "reason"],
                rows,
                3,
            )
            + more
        )
    return out


def report_html(
    plan: Plan,
    system: System | None = None,
    workload: Workload | None = None,
    mapping_svg: str | None = None,
    views: Views | None = None,
) -> str:
    """The whole page as text (deterministic for a given plan and views)."""
    views = views or Views()
    badge = f'<span class="status {_e(plan.stats.status)}">{_e(plan.stats.status)}</span>'
    parts: list[Any] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>MapShard: {_e(plan.scenario)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f"<h1>MapShard plan: {_e(plan.scenario)}</h1>",
        f'<div class="sub">{_e(plan.workload_label or plan.workload_kind)} on {plan.num_chips} '
        f"chip{'s' if plan.num_chips != 1 else ''} {badge}</div>",
    ]
    if plan.warnings:
        parts.append(
            '<div class="warn"><b>Warnings</b><ul>'
            + "".join(f"<li>{_e(w)}</li>" for w in plan.warnings)
            + "</ul></div>"
        )
    if plan.model_differences or plan.cost_differences:
        parts.append(
            '<div class="warn"><b>Native model vs DFModel\'s equations (per step, this plan)'
            "</b><ul>"
            + "".join(f"<li>{_e(d)}</li>" for d in difference_lines(plan))
            + "</ul></div>"
        )
    parts += [
        headline_cards(plan, views.stream),
        inference_section(plan),
        serving_section(views.serving),
        stream_section(views.stream),
        time_section(plan),
        sensitivity_section(views.sensitivity),
        roofline_section(plan, system),
        memory_section(plan),
        frontier_section(plan, system, workload),
    ]
    if mapping_svg and len(mapping_svg) <= MAX_INLINE_MAPPING:
        svg = mapping_svg[mapping_svg.find("<svg") :]
        caption = (
            "Kernels clustered by configuration, at full size (scroll); the same "
            "graph is in mapping.svg and mapping.dot."
        )
        parts.append("<h2>Mapping</h2>" + _fig(svg, caption, plot=False))
    parts += [
        tables_section(plan),
        solver_section(plan),
        "<p class='note'>Written by MapShard. All numbers are the model's predictions; "
        "summary.json, kernels.csv and configs.csv hold them at full precision.</p>",
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"
