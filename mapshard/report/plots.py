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

from mapshard.report.fmt import fmt_bytes, fmt_si, kernel_class_label
from mapshard.report.summary import config_total_s, kernel_time_s, phase_instances
from solver.plan import KernelPlan, Plan

BOUND_COLORS = {"compute": "#4c72b0", "memory": "#dd8452", "network": "#55a868"}
CLASS_COLORS = {**BOUND_COLORS, "overhead": "#8c8c8c"}  # what binds a kernel or configuration
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
    """Horizontal bars: each configuration's time per step (latency x instances)."""
    rows = [
        (_config_label(p.name, c.index, c.kernels), config_total_s(plan, p, c), c.bound)
        for p in plan.phases
        for c in sorted(p.configs, key=lambda c: c.index)
    ]
    busy = sum(r[1] for r in rows) or 1.0
    if len(rows) > MAX_BARS:  # the longest ones in execution order, the rest as one bar
        keep = set(sorted(range(len(rows)), key=lambda i: (-rows[i][1], i))[: MAX_BARS - 1])
        rest = [r for i, r in enumerate(rows) if i not in keep]
        rows = [r for i, r in enumerate(rows) if i in keep]
        rows.append((f"{len(rest)} others", sum(r[1] for r in rest), "other"))
    total = busy
    scale, unit = _time_unit(max((r[1] for r in rows), default=0.0))
    with figure(9, 1.2 + 0.26 * max(1, len(rows))) as fig:
        ax = fig.add_subplot()
        y = range(len(rows))
        ax.barh(
            list(y),
            [r[1] / scale for r in rows],
            color=[CLASS_COLORS.get(r[2], "#999999") for r in rows],
        )
        for i, r in enumerate(rows):
            ax.text(r[1] / scale, i, f" {100 * r[1] / total:.1f}%", va="center", fontsize=8)
        ax.set_yticks(list(y), [r[0] for r in rows])
        ax.set_ylim(len(rows) - 0.5, -0.5)  # first row on top, no blank margin
        ax.set_xlabel(f"time per step, busy time summed over stages ({unit})")
        ax.set_title("Time by configuration; colour = binding resource, % of busy time")
        ax.margins(x=0.12)
        _bound_legend(fig)
        return to_svg(fig)


def time_by_class_svg(plan: Plan) -> str:
    """Grouped bars per kernel class: compute, DRAM and network time per step."""
    sums: dict[str, list[float]] = {}
    for p in plan.phases:
        n = phase_instances(plan, p)
        for k in p.kernels:
            s = sums.setdefault(k.kernel_class or k.kind, [0.0, 0.0, 0.0])
            s[0] += k.compute_s * n
            s[1] += k.memory_s * n
            s[2] += k.network_s * n
    classes = sorted(sums, key=lambda c: (-max(sums[c]), c))[:MAX_BARS]
    scale, unit = _time_unit(max((max(v) for v in sums.values()), default=0.0))
    with figure(9, 1.3 + 0.42 * max(1, len(classes))) as fig:
        ax = fig.add_subplot()
        h = 0.27
        for j, (res, color) in enumerate(BOUND_COLORS.items()):
            ax.barh(
                [i + (j - 1) * h for i in range(len(classes))],
                [sums[c][j] / scale for c in classes],
                height=h,
                color=color,
                label=res,
            )
        ax.set_yticks(list(range(len(classes))), [kernel_class_label(c) for c in classes])
        ax.set_ylim(len(classes) - 0.5, -0.5)
        ax.set_xlabel(f"resource time per step ({unit}); within a configuration they overlap")
        ax.set_title("Time by kernel class")
        fig.legend(loc="outside lower center", ncol=3, fontsize=8, frameon=False)
        return to_svg(fig)


def roofline_points(plan: Plan) -> list[tuple[KernelPlan, float, float]]:
    """(kernel, FLOP per DRAM byte, achieved FLOP/s per chip) for kernels with both."""
    pts = []
    for k in plan.kernels():
        t = kernel_time_s(k)
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
        (p.name, k.name): kernel_time_s(k) * phase_instances(plan, p)
        for p in plan.phases
        for k in p.kernels
    }
    with figure(9, 5.2) as fig:
        ax = fig.add_subplot()
        ax.set_xscale("log")
        ax.set_yscale("log")
        xs = [p[1] for p in pts] or [1.0]
        lo, hi = min(xs + [1.0]) / 4, max(xs + [peak / bandwidth_Bps if bandwidth_Bps else 1.0])
        grid = [lo * (hi * 8 / lo) ** (i / 200) for i in range(201)]
        if peak > 0 and bandwidth_Bps > 0:
            ax.plot(
                grid,
                [min(peak, bandwidth_Bps * x) for x in grid],
                color="black",
                lw=1.5,
                label=f"roof: {fmt_si(peak, 'FLOP/s')}, {fmt_si(bandwidth_Bps, 'B/s')} "
                f"({bw_source})",
            )
            ax.axvline(peak / bandwidth_Bps, color="black", lw=0.6, ls=":")
        if vector_flops > 0 and bandwidth_Bps > 0:
            ax.plot(
                grid,
                [min(vector_flops, bandwidth_Bps * x) for x in grid],
                color="gray",
                lw=1,
                ls="--",
                label=f"vector roof {fmt_si(vector_flops, 'FLOP/s')}",
            )
        weight = max(totals.values(), default=1.0) or 1.0
        for bound, color in CLASS_COLORS.items():
            sel = [p for p in pts if p[0].bound == bound]
            if sel:
                ax.scatter(
                    [p[1] for p in sel],
                    [p[2] for p in sel],
                    color=color,
                    alpha=0.75,
                    edgecolors="white",
                    linewidths=0.5,
                    label=f"{bound}-bound",
                    s=[12 + 120 * totals[(p[0].phase, p[0].name)] / weight for p in sel],
                )
        top = sorted(pts, key=lambda p: -totals[(p[0].phase, p[0].name)])[:6]
        for i, (k, x, y) in enumerate(top):
            ax.annotate(
                f"{k.phase}/{k.name}",
                (x, y),
                fontsize=7,
                xytext=(6, -14 * i - 4),
                textcoords="offset points",
                arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "#888888"},
            )
        _log_axes(ax)
        ax.set_xlabel("operational intensity (FLOP per DRAM byte, per chip)")
        ax.set_ylabel("achieved FLOP/s per chip")
        ax.set_title(
            "Roofline: each kernel's own time (max of compute, DRAM, network); "
            "size = share of step time",
            fontsize=9,
        )
        ax.legend(loc="lower right", fontsize=8)
        return to_svg(fig)


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
    with figure(9, 2.1) as fig:
        ax = fig.add_subplot()
        left = 0.0
        for (name, value), color in zip(parts, MEMORY_COLORS):
            if value <= 0:
                continue
            ax.barh(
                [0],
                [value / gib],
                left=[left / gib],
                color=color,
                label=f"{name} {fmt_bytes(value)}",
            )
            left += value
        capacity = m.capacity if math.isfinite(m.capacity) else 0.0
        if capacity > 0:
            ax.axvline(
                m.capacity / gib, color="crimson", lw=2, label=f"capacity {fmt_bytes(m.capacity)}"
            )
        ax.set_yticks([])
        ax.set_xlim(0, max(capacity, m.total, 1.0) / gib * 1.05)
        ax.set_xlabel("GiB per chip")
        ax.set_title(
            f"Memory per chip: {fmt_bytes(m.total)}"
            + (f" of {fmt_bytes(capacity)}" if capacity > 0 else "")
        )
        if ax.get_legend_handles_labels()[0]:
            fig.legend(loc="outside lower center", ncol=6, fontsize=8, frameon=False)
        return to_svg(fig)


def frontier_svg(curves: Sequence[dict[str, Any]], buffer_bytes_max: float) -> str:
    """DRAM traffic and attainable operational intensity vs on-chip buffer, one line per
    GEMM; `curves` items: name, points [(buffer_bytes, dram_bytes, intensity)], and
    optionally chosen (buffer_bytes, dram_bytes)."""
    with figure(9, 4.3) as fig:
        ax1, ax2 = fig.subplots(1, 2)
        for i, c in enumerate(curves):
            color = f"C{i % 10}"
            pts = list(c["points"])
            if pts and buffer_bytes_max > pts[-1][0]:  # compulsory traffic from here on
                pts.append((buffer_bytes_max * 2, *pts[-1][1:]))
            xs = [p[0] for p in pts]
            ax1.step(xs, [p[1] for p in pts], where="post", color=color, label=c["name"])
            ax2.step(xs, [p[2] for p in pts], where="post", color=color)
            if c.get("chosen"):
                bx, by = c["chosen"]
                ax1.scatter(
                    [max(bx, xs[0])],
                    [by],
                    color=color,
                    marker="*",
                    s=120,
                    edgecolors="black",
                    linewidths=0.5,
                    zorder=5,
                )
        for ax in (ax1, ax2):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("on-chip buffer (bytes)")
            if buffer_bytes_max > 0:
                ax.axvline(buffer_bytes_max, color="crimson", lw=1, ls="--")
        _log_axes(ax1)
        _log_axes(ax2)
        ax1.set_ylabel("least DRAM traffic (bytes)")
        ax2.set_ylabel("attainable FLOP per DRAM byte")
        ax1.set_title("Data-movement frontier (★ = plan's choice)", fontsize=9)
        ax2.set_title(
            f"Operational intensity (dashed: buffer {fmt_bytes(buffer_bytes_max)})", fontsize=9
        )
        fig.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)
        return to_svg(fig)


def _si_tick(value: float, _pos: object = None) -> str:
    """Compact decimal tick label (1k, 10M, 0.1): no mathtext, which is slow to lay out."""
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"),
                          (1e3, "k")):  # fmt: skip
        if abs(value) >= scale:
            return f"{value / scale:g}{prefix}"
    return f"{value:g}"


def _log_axes(ax: Any) -> None:
    """Log-log axes with SI tick labels and no minor ticks. Call once the data is plotted:
    an axis spanning under three decades gets 1-2-5 ticks, a wider one one per decade."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        narrow = lo > 0 and hi > 0 and abs(math.log10(hi / lo)) < 3
        subs = (1.0, 2.0, 5.0) if narrow else (1.0,)
        axis.set_major_locator(LogLocator(base=10, subs=subs))
        axis.set_major_formatter(FuncFormatter(_si_tick))
        axis.set_minor_locator(NullLocator())


def _time_unit(largest_s: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if largest_s >= scale:
            return scale, unit
    return 1e-9, "ns"


def _bound_legend(fig: Any) -> None:
    """Legend of the binding resources, below the axes so it never hides a bar."""
    from matplotlib.patches import Patch

    fig.legend(
        handles=[Patch(color=c, label=b) for b, c in CLASS_COLORS.items()],
        loc="outside lower center",
        ncol=3,
        fontsize=8,
        frameon=False,
    )
