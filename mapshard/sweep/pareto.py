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

from mapshard.sweep import metrics

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


def front_figure(
    rows: list[dict[str, str]], plot: FrontPlot, axis_names: tuple[str, ...]
) -> Any | None:
    """A matplotlib Figure of one front, or None when no solved point has both metrics."""
    keep, xs, ys, mask = plot_data(rows, plot)
    if not keep:
        return None
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(6.4, 4.2), layout="constrained")
        ax = fig.add_subplot()
        dom = [i for i, m in enumerate(mask) if not m]
        front = sorted((i for i, m in enumerate(mask) if m), key=lambda i: (xs[i], ys[i]))
        ax.scatter(
            [xs[i] for i in dom],
            [ys[i] for i in dom],
            s=12,
            color="#b0b0b0",
            label=f"dominated ({len(dom)})",
            zorder=2,
        )
        ax.plot(
            [xs[i] for i in front],
            [ys[i] for i in front],
            "-o",
            color="#4c72b0",
            markersize=4,
            linewidth=1.2,
            label=f"Pareto front ({len(front)})",
            zorder=3,
        )
        if len(front) <= 12:
            for i in front:
                ax.annotate(
                    _short(keep[i], axis_names),
                    (xs[i], ys[i]),
                    fontsize=6,
                    xytext=(3, 3),
                    textcoords="offset points",
                    color="#333333",
                )
        if plot.y == "tokens_per_s":
            best = max(range(len(keep)), key=lambda i: (ys[i] / xs[i] if xs[i] > 0 else 0, -i))
            ax.scatter(
                [xs[best]],
                [ys[best]],
                s=60,
                facecolors="none",
                edgecolors="#c44e52",
                linewidths=1.5,
                label="best tokens/s per $",
                zorder=4,
            )
        for setter, values in ((ax.set_xscale, xs), (ax.set_yscale, ys)):
            positive = [v for v in values if v > 0]
            if positive and len(positive) == len(values) and max(positive) > 20 * min(positive):
                setter("log")
        ax.set_xlabel(LABELS.get(plot.x, plot.x))
        ax.set_ylabel(LABELS.get(plot.y, plot.y))
        ax.set_title(plot.title)
        ax.legend(loc="best", fontsize=7)
    return fig


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
