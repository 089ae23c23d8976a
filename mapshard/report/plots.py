"""The report's plots as SVG text, byte-identical across runs.

Matplotlib's object API (no pyplot, so no global backend switch), fixed SVG hash salt and no
date/creator metadata; the XML prolog and metadata block are stripped so the SVG can be
inlined in HTML without any external reference.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from mapshard.fmt import fmt_bytes, fmt_si, kernel_class_label
from mapshard.report import svgplot
from mapshard.report.svgplot import INK, Canvas, Scale
from mapshard.report.totals import (
    config_step_s,
    phase_instances,
    phase_step_s,
    row_time_s,
    step_terms,
)
from solver.plan import KernelPlan, Plan

BOUND_COLORS = {"compute": "#4c72b0", "memory": "#dd8452", "network": "#55a868"}
CLASS_COLORS = {**BOUND_COLORS, "overhead": "#8c8c8c"}  # what binds a kernel or configuration
STEP_COLOR = "#c44e52"  # the step's own terms (bubble, exposed communication, optimizer)
MEMORY_COLORS = ("#4c72b0", "#8172b3", "#937860", "#dd8452", "#55a868")
_RC = {
    "svg.hashsalt": "mapshard",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
MAX_BARS = 30
WIDTH = 900.0  # px of the viewBox; the page scales it
LINE_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


@contextmanager
def figure(width: float, height: float) -> Iterator[Any]:
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        yield Figure(figsize=(width, height), layout="constrained")


def to_svg(fig: Any) -> str:
    """SVG text of a figure, ready to inline: no prolog, doctype, metadata or date."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)
    return text


def kernel_shards(plan: Plan, k: KernelPlan) -> int:
    """Chips one kernel instance is split over: the plan's `shards` field when the solver
    provides it, else the TP degree for a sharded kernel and 1 for a replicated one."""
    shards = int(getattr(k, "shards", 0) or 0)
    if shards > 0:
        return shards
    if k.sharding in ("", "none", "replicated"):
        return 1
    return max(1, int({a.lower(): b for a, b in plan.parallelism.items()}.get("tp", 1)))


def _config_label(phase: str, index: int, kernels: tuple[str, ...]) -> str:
    """`layer c3: mlp_up +2`: which kernels a bar stands for, at a glance."""
    first = kernels[0] if kernels else "-"
    more = f" +{len(kernels) - 1}" if len(kernels) > 1 else ""
    label = f"{phase} c{index}: {first}"
    return (label[:34] + "…" if len(label) > 35 else label) + more


def time_by_config_svg(plan: Plan) -> str:
    """Horizontal bars: each configuration's share of the step's wall time, and the step's
    own terms (bubble, exposed communication, optimizer): they add up to the step."""
    per_phase = phase_step_s(plan)
    rows = [
        (
            _config_label(p.name, c.index, c.kernels),
            config_step_s(plan, p, c, per_phase[p.name]),
            c.bound,
        )  # fmt: skip
        for p in plan.phases
        for c in sorted(p.configs, key=lambda c: c.index)
    ]
    rows += [(name.replace("_", " "), v, "step") for name, v in step_terms(plan)]
    total = sum(r[1] for r in rows) or 1.0
    if len(rows) > MAX_BARS:  # the longest ones in execution order, the rest as one bar
        keep = set(sorted(range(len(rows)), key=lambda i: (-rows[i][1], i))[: MAX_BARS - 1])
        rest = [r for i, r in enumerate(rows) if i not in keep]
        rows = [r for i, r in enumerate(rows) if i in keep]
        rows.append((f"{len(rest)} others", sum(r[1] for r in rest), "other"))
    scale, unit = _time_unit(max((r[1] for r in rows), default=0.0))
    left = 20 + 6.4 * max((len(r[0]) for r in rows), default=4)
    row_h, top = 22, 36
    c = Canvas(WIDTH, top + row_h * max(1, len(rows)) + 70)
    xs = Scale(0, max((r[1] / scale for r in rows), default=1.0) * 1.12 or 1.0, left, WIDTH - 20)
    ys = Scale(0, max(1, len(rows)), top, top + row_h * max(1, len(rows)))
    title = "Time per step by configuration; colour = binding resource, % of the step"
    xlabel = f"wall time per step ({unit})"
    svgplot.axes(c, xs, ys, xlabel, "", title, yticks=False)
    for i, (label, t, bound) in enumerate(rows):
        y = ys(i) + 3
        fill = STEP_COLOR if bound == "step" else CLASS_COLORS.get(bound, "#999999")
        c.rect(xs(0), y, xs(t / scale) - xs(0), row_h - 6, fill,
               f"{label}: {bound}")  # fmt: skip
        c.text(left - 6, y + row_h / 2 + 1, label, 10.5, "end")
        c.text(xs(t / scale) + 3, y + row_h / 2 + 1, f"{100 * t / total:.1f}%", 10)
    legend = list(CLASS_COLORS.items()) + [("step term", STEP_COLOR)]
    svgplot.legend(c, legend, c.height - 8)
    return c.svg()


def time_by_class_svg(plan: Plan) -> str:
    """Grouped bars per kernel class: launch overhead, compute work, DRAM and network time
    per step (each resource alone; within a configuration they overlap)."""
    sums: dict[str, list[float]] = {}
    for p in plan.phases:
        n = phase_instances(plan, p)
        for k in p.kernels:
            s = sums.setdefault(kernel_class_label(k.kernel_class, k.kind), [0.0] * 4)
            for j, x in enumerate(
                (k.overhead_s, k.compute_s - k.overhead_s, k.memory_s, k.network_s)
            ):
                s[j] += x * n
    classes = sorted(sums, key=lambda c: (-max(sums[c]), c))[:MAX_BARS]
    scale, unit = _time_unit(max((max(v) for v in sums.values()), default=0.0))
    parts = [("overhead", CLASS_COLORS["overhead"]), *BOUND_COLORS.items()]
    shown = [j for j in range(4) if any(sums[c][j] > 0 for c in classes)] or [1]
    left = 20 + 6.4 * max((len(x) for x in classes), default=4)
    row_h, top = 12 + 9.5 * len(shown), 36
    c = Canvas(WIDTH, top + row_h * max(1, len(classes)) + 70)
    largest = max((max(v) / scale for v in sums.values()), default=1.0) or 1.0
    xs = Scale(0, largest * 1.05, left, WIDTH - 20)
    ys = Scale(0, max(1, len(classes)), top, top + row_h * max(1, len(classes)))
    xlabel = f"resource time per step ({unit}); within a configuration they overlap"
    svgplot.axes(c, xs, ys, xlabel, "", "Time by kernel class", yticks=False)
    for i, label in enumerate(classes):
        for row, j in enumerate(shown):
            res, color = parts[j]
            y = ys(i) + 4 + row * 9.5
            c.rect(xs(0), y, xs(sums[label][j] / scale) - xs(0), 9, color, f"{label}: {res}")
        c.text(left - 6, ys(i) + row_h / 2 + 2, label, 10.5, "end")
    svgplot.legend(c, [parts[j] for j in shown], c.height - 8)
    return c.svg()


def roofline_points(plan: Plan) -> list[tuple[KernelPlan, float, float]]:
    """(kernel, FLOP per DRAM byte, achieved FLOP/s per chip) for kernels with both."""
    pts = []
    for k in plan.kernels():
        t = row_time_s(plan, k)
        if k.flop <= 0 or k.dram_bytes <= 0 or t <= 0:
            continue
        flop = k.flop / kernel_shards(plan, k)
        pts.append((k, flop / k.dram_bytes, flop / t))
    return pts


def derived_bandwidth(plan: Plan) -> float:
    """DRAM bandwidth the kernels achieve at best (used when no System is given)."""
    rates = [k.dram_bytes / k.memory_s for k in plan.kernels() if k.memory_s > 0]
    return max(rates, default=0.0)


def roofline_svg(
    plan: Plan, bandwidth_Bps: float, bw_source: str, vector_flops: float = 0.0
) -> str:
    pts = roofline_points(plan)
    peak = plan.peak_flops_per_chip
    totals = {
        (p.name, k.name): row_time_s(plan, k) * phase_instances(plan, p)
        for p in plan.phases
        for k in p.kernels
    }
    ridge = peak / bandwidth_Bps if peak > 0 and bandwidth_Bps > 0 else 0.0
    xr = svgplot.log_range([p[1] for p in pts] + [x for x in (ridge * 8, 1.0) if x > 0], 4)
    yr = svgplot.log_range([p[2] for p in pts] + [peak] + [bandwidth_Bps * xr[0]], 2)
    c = Canvas(WIDTH, 420)
    xs = Scale(*xr, 70, WIDTH - 20, log=True)
    ys = Scale(*yr, 360, 30, log=True)
    title = ("Roofline: each kernel's latency alone (launch overhead included); "
             "size = share of step time")  # fmt: skip
    xlabel = "operational intensity (FLOP per DRAM byte, per chip)"
    svgplot.axes(c, xs, ys, xlabel, "achieved FLOP/s per chip", title)
    items = []
    for ceiling, color, dash, label in (
        (peak, INK, "", f"roof: {fmt_si(peak, 'FLOP/s')}, {fmt_si(bandwidth_Bps, 'B/s')} "
         f"({bw_source})"),
        (vector_flops, "#888888", "5,3", f"vector roof {fmt_si(vector_flops, 'FLOP/s')}"),
    ):  # fmt: skip
        if ceiling > 0 and bandwidth_Bps > 0:
            knee = ceiling / bandwidth_Bps
            line = [(xr[0], bandwidth_Bps * xr[0]), (knee, ceiling), (xr[1], ceiling)]
            line = [(x, y) for x, y in line if xr[0] <= x <= xr[1]] or line[-1:]
            c.polyline([(xs(x), ys(min(y, yr[1]))) for x, y in line], color, 1.6, dash)
            items.append((label, color))
    if ridge:
        c.line(xs(ridge), ys(yr[0]), xs(ridge), ys(yr[1]), INK, 0.6, "2,2")
    weight = max(totals.values(), default=1.0) or 1.0
    for k, x, y in sorted(pts, key=lambda p: -totals[(p[0].phase, p[0].name)]):
        share = totals[(k.phase, k.name)] / weight
        c.circle(xs(x), ys(y), 2.5 + 7 * math.sqrt(share), CLASS_COLORS.get(k.bound, "#999"),
                 f"{k.phase}/{k.name}: {k.bound}-bound")  # fmt: skip
    top = sorted(pts, key=lambda p: -totals[(p[0].phase, p[0].name)])[:6]
    for i, (k, x, y) in enumerate(sorted(top, key=lambda p: (-p[2], p[1]))):
        lx, ly = xs(x) + 14, ys(y) + 4 + 13 * i
        c.line(xs(x), ys(y), lx - 2, ly - 4, "#888888", 0.5)
        c.text(lx, ly, f"{k.phase}/{k.name}", 9.5)
    bounds = sorted({k.bound for k, _, _ in pts})
    items += [(f"{b}-bound", CLASS_COLORS.get(b, "#999")) for b in bounds]
    svgplot.legend(c, items, c.height - 8)
    return c.svg()


def memory_svg(plan: Plan) -> str:
    m = plan.memory
    parts = [
        ("weights", m.weights),
        ("gradients", m.gradients),
        ("optimizer", m.optimizer),
        ("activations", m.activations),
        ("KV cache", m.kv_cache),
    ]
    gib = 2.0**30
    capacity = m.capacity if math.isfinite(m.capacity) else 0.0
    c = Canvas(WIDTH, 150)
    xs = Scale(0, max(capacity, m.total, 1.0) / gib * 1.05, 30, WIDTH - 20)
    ys = Scale(0, 1, 36, 86)
    title = f"Memory per chip: {fmt_bytes(m.total)}" + (
        f" of {fmt_bytes(capacity)}" if capacity > 0 else ""
    )
    svgplot.axes(c, xs, ys, "GiB per chip", "", title, yticks=False)
    left, items = 0.0, []
    for (name, value), color in zip(parts, MEMORY_COLORS):
        if value > 0:
            c.rect(xs(left / gib), 42, xs(value / gib) - xs(0), 38, color,
                   f"{name} {fmt_bytes(value)}")  # fmt: skip
            items.append((f"{name} {fmt_bytes(value)}", color))
            left += value
    if capacity > 0:
        c.line(xs(capacity / gib), 36, xs(capacity / gib), 86, "crimson", 2.5)
        items.insert(0, (f"capacity {fmt_bytes(capacity)}", "crimson"))
    svgplot.legend(c, items, c.height - 8)
    return c.svg()


def frontier_svg(curves: Sequence[dict[str, Any]], buffer_bytes_max: float) -> str:
    """DRAM traffic and attainable operational intensity vs on-chip buffer, one line per
    GEMM; `curves` items: name, points [(buffer_bytes, dram_bytes, intensity)], and
    optionally chosen (buffer_bytes, dram_bytes)."""
    series = []
    for c_ in curves:
        pts = list(c_["points"])
        if pts and buffer_bytes_max > pts[-1][0]:  # compulsory traffic from here on
            pts.append((buffer_bytes_max * 2, *pts[-1][1:]))
        series.append((c_, pts))
    allx = [p[0] for _, pts in series for p in pts] + [buffer_bytes_max]
    xr = svgplot.log_range(allx, 1.5)
    half = WIDTH / 2
    c = Canvas(WIDTH, 400)
    panels = []
    for k, (ylabel, title) in enumerate((
        ("least DRAM traffic (bytes)", "Data-movement frontier (\u2605 = plan's choice)"),
        ("attainable FLOP per DRAM byte",
         f"Operational intensity (dashed: buffer {fmt_bytes(buffer_bytes_max)})"),
    )):  # fmt: skip
        yr = svgplot.log_range([p[1 + k] for _, pts in series for p in pts], 1.3)
        xs = Scale(*xr, k * half + 70, (k + 1) * half - 15, log=True)
        ys = Scale(*yr, 320, 30, log=True)
        svgplot.axes(c, xs, ys, "on-chip buffer (bytes)", ylabel, title)
        if buffer_bytes_max > 0:
            c.line(xs(buffer_bytes_max), 30, xs(buffer_bytes_max), 320, "crimson", 1, "5,3")
        panels.append((xs, ys))
    items = []
    for i, (c_, pts) in enumerate(series):
        color = LINE_COLORS[i % len(LINE_COLORS)]
        for k, (xs, ys) in enumerate(panels):
            step = []
            for j, p in enumerate(pts):  # post-step: flat until the next point
                if j:
                    step.append((xs(p[0]), ys(pts[j - 1][1 + k])))
                step.append((xs(p[0]), ys(p[1 + k])))
            c.polyline(step, color, 1.8)
        if c_.get("chosen") and pts:
            bx, by = c_["chosen"]
            c.star(panels[0][0](max(bx, pts[0][0])), panels[0][1](by), 7, color)
        items.append((str(c_["name"]), color))
    svgplot.legend(c, items, c.height - 8)
    return c.svg()


def _time_unit(largest_s: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if largest_s >= scale:
            return scale, unit
    return 1e-9, "ns"
