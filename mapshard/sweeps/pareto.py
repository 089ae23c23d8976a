"""Pareto fronts of a sweep's solved points and their plots (matplotlib, Agg, object API).

Plots are deterministic: fixed SVG hash salt, no date or software metadata, so two runs
over the same results write byte-identical files.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mapshard.sweeps import metrics

_RC = {
    "svg.hashsalt": "mapshard-sweep",
    "svg.fonttype": "none",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
LABELS = {
    "latency_s": "latency (s)",
    "system_cost": "System Cost ($)",
    "system_power_W": "System Power (W)",
    "tokens_per_s": "throughput (tokens/s)",
    "tokens_per_s_per_usd": "tokens/s per $",
}


@dataclass(frozen=True)
class FrontPlot:
    name: str  # file stem
    title: str
    x: str  # metric on x
    y: str  # metric on y


PLOTS = (
    FrontPlot("pareto_latency_vs_cost", "Latency vs System Cost", "system_cost", "latency_s"),
    FrontPlot("pareto_latency_vs_power", "Latency vs System Power", "system_power_W", "latency_s"),
    FrontPlot(
        "pareto_tokens_per_usd",
        "Throughput vs System Cost (tokens/s per $)",
        "system_cost",
        "tokens_per_s",
    ),
)


def pareto_mask(
    xs: Sequence[float], ys: Sequence[float], max_x: bool = False, max_y: bool = False
) -> list[bool]:
    """True for points no other point dominates (at least as good in both, better in one).
    Equal points are all on the front."""
    sx = -1.0 if max_x else 1.0
    sy = -1.0 if max_y else 1.0
    order = sorted(range(len(xs)), key=lambda i: (sx * xs[i], sy * ys[i]))
    mask = [False] * len(xs)
    best_y = float("inf")
    prev: tuple[float, float] | None = None
    for i in order:
        key = (sx * xs[i], sy * ys[i])
        if key == prev or key[1] < best_y:
            mask[i] = True
            best_y = min(best_y, key[1])
        prev = key if mask[i] else prev
    return mask


def plot_data(
    rows: list[dict[str, str]], plot: FrontPlot
) -> tuple[list[dict[str, str]], list[float], list[float], list[bool]]:
    """Solved rows with both metrics, their values and which are on the front."""
    keep, xs, ys = [], [], []
    for r in rows:
        if r["status"] not in metrics.SOLVED:
            continue
        x, y = metrics.known(plot.x, r.get(plot.x)), metrics.known(plot.y, r.get(plot.y))
        if x is None or y is None:
            continue
        keep.append(r)
        xs.append(x)
        ys.append(y)
    mask = pareto_mask(xs, ys, plot.x in metrics.MAXIMISE, plot.y in metrics.MAXIMISE)
    return keep, xs, ys, mask


#: Plots whose y is a per-request latency: points of different batch sizes answer different
#: questions, so each batch gets its own front and colour.
SPLIT_BY_BATCH = ("latency_s",)
GROUP_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")
MAX_LABELS = 12


def batch_axis(axis_names: tuple[str, ...]) -> str | None:
    """The sweep axis that sets the batch size, if any ("batch", "decode_batch", ...)."""
    return next((a for a in axis_names if "batch" in a.lower()), None)


def _groups(keep: list[dict[str, str]], by: str | None) -> dict[str, list[int]]:
    """Row indices per value of axis `by` (one group "" without it), numeric order."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(keep):
        groups.setdefault(r.get(by, "") if by else "", []).append(i)

    def order(v: str) -> tuple[float, str]:
        try:
            return (float(v), v)
        except ValueError:
            return (float("inf"), v)

    return {k: groups[k] for k in sorted(groups, key=order)}


def front_figure(
    rows: list[dict[str, str]], plot: FrontPlot, axis_names: tuple[str, ...]
) -> Any | None:
    """A matplotlib Figure of one front, or None when no solved point has both metrics.
    A latency plot over a batch axis draws one front per batch size."""
    keep, xs, ys, _ = plot_data(rows, plot)
    if not keep:
        return None
    import matplotlib
    from matplotlib.figure import Figure

    by = batch_axis(axis_names) if plot.y in SPLIT_BY_BATCH else None
    groups = _groups(keep, by)
    names = tuple(a for a in axis_names if a != by)
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(6.4, 4.2), layout="constrained")
        ax = fig.add_subplot()
        labelled: list[int] = []
        for g, (value, idx) in enumerate(groups.items()):
            labelled += _draw_group(ax, plot, xs, ys, idx, value, by, g, len(groups) > 1)
        _label_points(ax, keep, xs, ys, labelled, names)
        if plot.y == "tokens_per_s":
            best = max(range(len(keep)), key=lambda i: (ys[i] / xs[i] if xs[i] > 0 else 0, -i))
            ax.scatter([xs[best]], [ys[best]], s=60, facecolors="none", edgecolors="#c44e52",
                       linewidths=1.5, label="best tokens/s per $", zorder=4)  # fmt: skip
        for setter, values in ((ax.set_xscale, xs), (ax.set_yscale, ys)):
            positive = [v for v in values if v > 0]
            if positive and len(positive) == len(values) and max(positive) > 20 * min(positive):
                setter("log")
        ax.set_xlabel(LABELS.get(plot.x, plot.x))
        ax.set_ylabel(LABELS.get(plot.y, plot.y))
        ax.set_title(plot.title + (f", one front per {by}" if by and len(groups) > 1 else ""))
        ax.legend(loc="best", fontsize=7)
    return fig


def _draw_group(ax, plot, xs, ys, idx, value, by, g, split) -> list[int]:  # noqa: ANN001
    """One group's dominated points and Pareto front; returns the front's indices."""
    gx, gy = [xs[i] for i in idx], [ys[i] for i in idx]
    mask = pareto_mask(gx, gy, plot.x in metrics.MAXIMISE, plot.y in metrics.MAXIMISE)
    dom = [i for i, m in zip(idx, mask) if not m]
    front = sorted((i for i, m in zip(idx, mask) if m), key=lambda i: (xs[i], ys[i]))
    color = GROUP_COLORS[g % len(GROUP_COLORS)] if split else "#4c72b0"
    name = f"{by} {value}: " if split else ""
    ax.scatter([xs[i] for i in dom], [ys[i] for i in dom], s=12, zorder=2,
               color=color if split else "#b0b0b0", alpha=0.35 if split else 1.0,
               label=None if split else f"dominated ({len(dom)})")  # fmt: skip
    ax.plot([xs[i] for i in front], [ys[i] for i in front], "-o", color=color, markersize=4,
            linewidth=1.2, zorder=3, label=f"{name}Pareto front ({len(front)})")  # fmt: skip
    return front


def _label_points(ax, keep, xs, ys, idx, names) -> None:  # noqa: ANN001
    """Labels for up to MAX_LABELS front points, nudged apart: sorted by position, each
    label goes above or below its point in turn, further out when its neighbour is close."""
    if len(idx) > MAX_LABELS:
        return
    order = sorted(idx, key=lambda i: (xs[i], ys[i]))
    for n, i in enumerate(order):
        dy = (4 + 6 * (n % 3)) * (1 if n % 2 == 0 else -1)
        ax.annotate(_short(keep[i], names), (xs[i], ys[i]), fontsize=6, xytext=(4, dy),
                    textcoords="offset points", color="#333333",
                    va="bottom" if dy > 0 else "top")  # fmt: skip


def _short(row: dict[str, str], axis_names: tuple[str, ...]) -> str:
    return " ".join(row.get(a, "") for a in axis_names)[:40] or f"#{row['index']}"


def figure_svg(fig: Any) -> str:
    """SVG text, ready to inline in HTML: no XML prolog, doctype, metadata or date."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = re.sub(r"<\?xml[^>]*\?>\s*", "", buf.getvalue())
    text = re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)


def figure_png(fig: Any) -> bytes:
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context(_RC):
        fig.savefig(buf, format="png", dpi=120, metadata={"Software": None})
    return buf.getvalue()
