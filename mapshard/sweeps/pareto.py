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

import numpy as np

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
# the cost axis says what the cost is made of (metrics.cost_basis)
COST_LABELS = {
    "priced": "System Cost ($: chips at their price + unit prices)",
    "unit": "System Cost ($: DRAM, link, switch unit prices only; chips not priced)",
}


@dataclass(frozen=True)
class FrontPlot:
    name: str  # file stem
    title: str  # "<y> vs <x>": the axes' names
    x: str  # metric on x
    y: str  # metric on y
    needs: str = ""  # a metric a point must have to be drawn ("" = none)


PLOTS = (
    FrontPlot("pareto_latency_vs_cost", "Latency vs System Cost", "system_cost", "latency_s"),
    FrontPlot("pareto_latency_vs_power", "Latency vs System Power", "system_power_W", "latency_s"),
    FrontPlot(
        "pareto_tokens_per_usd",
        "Throughput vs priced System Cost",
        "system_cost",
        "tokens_per_s",
        needs="tokens_per_s_per_usd",
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


def cost_rows(rows: list[dict[str, str]]) -> tuple[str, ...]:
    """The cost bases whose System Costs are compared: chips at a price when any solved
    point has one (a unit-price-only cost beside them would look cheap for want of the chip),
    else the unit-price-only costs (DFModel's model), said on the axis."""
    solved = [r.get("cost_basis", "") for r in rows if r["status"] in metrics.SOLVED]
    if any(b in metrics.PRICED for b in solved):
        return metrics.PRICED
    return tuple(sorted({b for b in solved if b != metrics.NOT_PRICED})) or ("",)


def plot_data(
    rows: list[dict[str, str]], plot: FrontPlot
) -> tuple[list[dict[str, str]], list[float], list[float], list[bool]]:
    """Solved rows with both metrics, their values and which are on the front."""
    bases = cost_rows(rows) if "system_cost" in (plot.x, plot.y) else None
    keep, xs, ys = [], [], []
    for r in rows:
        if r["status"] not in metrics.SOLVED:
            continue
        if bases is not None and r.get("cost_basis", "") not in bases:
            continue
        if plot.needs and metrics.known(plot.needs, r.get(plot.needs)) is None:
            continue
        x, y = metrics.known(plot.x, r.get(plot.x)), metrics.known(plot.y, r.get(plot.y))
        if x is None or y is None:
            continue
        keep.append(r)
        xs.append(x)
        ys.append(y)
    mask = pareto_mask(xs, ys, plot.x in metrics.MAXIMISE, plot.y in metrics.MAXIMISE)
    return keep, xs, ys, mask


def axis_label(rows: list[dict[str, str]], metric: str) -> str:
    """An axis's name; a cost axis says what its costs are made of."""
    if metric != "system_cost":
        return LABELS.get(metric, metric)
    bases = cost_rows(rows)
    if bases == metrics.PRICED:
        return COST_LABELS["priced"]
    return COST_LABELS["unit"] if bases == (metrics.UNIT_PRICES_ONLY,) else LABELS[metric]


#: Plots whose y is a per-request latency: points of different batch sizes answer different
#: questions, so each batch gets its own front and colour.
SPLIT_BY_BATCH = ("latency_s",)
GROUP_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")
# Front points labelled on a plot (the rest of a long front is in the report's table).
MAX_LABELS = 24
LABEL_CHARS = 28
# Where a label may go, in points from its marker, nearest first: right, left, above,
# below and the diagonals, then the same directions further out.
_OFFSETS = tuple(
    (dx * r, dy * r)
    for r in (1, 2, 3.5)
    for dx, dy in ((5, 3), (5, -3), (-5, 3), (-5, -3), (0, 7), (0, -7), (7, 0), (-7, 0))
)


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


def front_rows(
    rows: list[dict[str, str]], plot: FrontPlot, axis_names: tuple[str, ...]
) -> list[dict[str, str]]:
    """The rows on the plot's front(s) (one per batch on a latency plot), by x then y: the
    points its labels name, for the report's table beside the plot."""
    keep, xs, ys, _ = plot_data(rows, plot)
    by = batch_axis(axis_names) if plot.y in SPLIT_BY_BATCH else None
    front: list[int] = []
    for idx in _groups(keep, by).values():
        mask = pareto_mask(
            [xs[i] for i in idx],
            [ys[i] for i in idx],
            plot.x in metrics.MAXIMISE,
            plot.y in metrics.MAXIMISE,
        )
        front += [i for i, m in zip(idx, mask) if m]
    return [keep[i] for i in sorted(front, key=lambda i: (xs[i], ys[i], int(keep[i]["index"])))]


def front_figure(
    rows: list[dict[str, str]], plot: FrontPlot, axis_names: tuple[str, ...]
) -> Any | None:
    """A matplotlib Figure of one front, or None when no solved point has both metrics.
    A latency plot over a batch axis draws one front per batch size. Front points carry
    labels ("#index" and their axis values) placed so that no two overlap."""
    keep, xs, ys, _ = plot_data(rows, plot)
    if not keep:
        return None
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    by = batch_axis(axis_names) if plot.y in SPLIT_BY_BATCH else None
    groups = _groups(keep, by)
    names = tuple(a for a in axis_names if a != by)
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(7.0, 4.4), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        labelled: list[int] = []
        for g, (value, idx) in enumerate(groups.items()):
            labelled += _draw_group(ax, plot, xs, ys, idx, value, by, g, len(groups) > 1)
        if plot.y == "tokens_per_s":
            best = max(range(len(keep)), key=lambda i: (ys[i] / xs[i] if xs[i] > 0 else 0, -i))
            ax.scatter([xs[best]], [ys[best]], s=60, facecolors="none", edgecolors="#c44e52",
                       linewidths=1.5, label="best tokens/s per $", zorder=4)  # fmt: skip
        for setter, values in ((ax.set_xscale, xs), (ax.set_yscale, ys)):
            positive = [v for v in values if v > 0]
            if positive and len(positive) == len(values) and max(positive) > 20 * min(positive):
                setter("log")
        ax.set_xlabel(axis_label(rows, plot.x))
        ax.set_ylabel(axis_label(rows, plot.y))
        ax.set_title(plot.title + (f", one front per {by}" if by and len(groups) > 1 else ""))
        # outside the axes: the legend never covers a point or a label
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
        _label_points(fig, ax, keep, xs, ys, labelled, names)
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


def point_label(row: dict[str, str], axis_names: tuple[str, ...]) -> str:
    """'#index' and the point's axis values, short enough for a plot."""
    values = " ".join(row.get(a, "") for a in axis_names).strip()
    text = f"#{row['index']} {values}".strip()
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _label_points(fig, ax, keep, xs, ys, idx, names) -> None:  # noqa: ANN001
    """Label front points without overlaps: with the layout fixed by a first draw, each
    label (left to right) takes the nearest offset whose box stays inside the axes and
    clear of every marker and label placed so far; failing that its '#index' alone is
    tried, else it stays unlabelled (the report's table beside the plot names it)."""
    order = sorted(idx, key=lambda i: (xs[i], ys[i]))[:MAX_LABELS]
    fig.draw_without_rendering()  # the layout only: the renderer draws nothing
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    taken = _Boxes(_marker_boxes(ax, xs, ys))
    for i in order:
        full = point_label(keep[i], names)
        for text in dict.fromkeys((full, f"#{keep[i]['index']}")):
            box = _place(ax, renderer, frame, taken, text, xs[i], ys[i])
            if box is not None:
                taken.add(box)
                break
    # the layout the labels were placed in is final: every label lies inside the axes, so a
    # new layout would find the same one; freezing it spares each saved format its own run
    fig.set_layout_engine("none")


def _place(ax, renderer, frame, taken: _Boxes, text, x, y):  # noqa: ANN001, ANN202
    """The first offset at which `text` fits (its annotation is kept), else None.

    Only an offset where the label may fit is measured (an annotation drawn, the costly
    part): further out along a direction (same alignment), the label's box is the box
    measured nearer in, moved by the difference of the offsets; an offset where that moved
    box misses by more than _SURE_PX is passed over. The rounding between a moved and a
    measured box is about 1e-12 px, so the offset chosen is the one measuring every
    offset would choose."""
    nearer: dict[tuple[bool, bool, bool, bool], tuple[Any, float, float]] = {}
    scale = ax.figure.dpi / 72  # offset points -> display pixels
    for dx, dy in _OFFSETS:
        way = (dx > 0, dx < 0, dy > 0, dy < 0)
        seen = nearer.get(way)
        if seen is not None:
            box0, dx0, dy0 = seen
            moved = box0.translated((dx - dx0) * scale, (dy - dy0) * scale)
            if _surely_misses(moved, frame, taken):
                continue
        ann = _annotate(ax, text, x, y, dx, dy)
        box = ann.get_window_extent(renderer).expanded(1.06, 1.15)
        nearer.setdefault(way, (box, dx, dy))
        inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0
        if inside and box.y1 <= frame.y1 and not taken.overlaps(box):
            return box
        ann.remove()
    return None


def _annotate(ax, text: str, x: float, y: float, dx: float, dy: float):  # noqa: ANN001, ANN202
    """The label `text` of the point (x, y), (dx, dy) points from it, aligned away from it."""
    return ax.annotate(
        text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7,
        color="#333333", ha="left" if dx > 0 else "right" if dx < 0 else "center",
        va="bottom" if dy > 0 else "top" if dy < 0 else "center",
    )  # fmt: skip


# how far (display pixels) a moved label box must miss for its offset to be passed over
# unmeasured: far above the rounding between a moved and a measured box
_SURE_PX = 1e-6


def _surely_misses(box: Any, frame: Any, taken: _Boxes) -> bool:
    """Whether every box within _SURE_PX of `box` leaves the frame or overlaps a box
    taken (`_place`'s test fails for it)."""
    x0, y0, x1, y1 = box.extents
    e = _SURE_PX
    if not (x1 - x0 > 2 * e and y1 - y0 > 2 * e):  # a box that small (or NaN): measure it
        return False
    if x0 < frame.x0 - e or x1 > frame.x1 + e or y0 < frame.y0 - e or y1 > frame.y1 + e:
        return True
    return taken.hit(np.array([x0 + e, y0 + e, x1 - e, y1 - e]))


class _Boxes:
    """Boxes in display pixels, one (x0, y0, x1, y1) row each with x0 <= x1 and y0 <= y1,
    tested against a box all at once. Why: a plot of a thousand points tests each label
    candidate against every marker; `Bbox.overlaps` one by one was most of a sweep's
    plotting time. `overlaps` is `any(box.overlaps(t) for t in boxes)`, comparisons and
    all (a NaN extent overlaps nothing)."""

    def __init__(self, extents: np.ndarray):
        self.rows = _ordered(extents.reshape(-1, 4))

    def add(self, box: Any) -> None:
        self.rows = np.vstack([self.rows, _ordered(np.asarray(box.extents).reshape(1, 4))])

    def overlaps(self, box: Any) -> bool:
        return self.hit(np.asarray(box.extents))

    def hit(self, extents: np.ndarray) -> bool:
        """`overlaps` of the box with these extents (x0, y0, x1, y1)."""
        (a,) = _ordered(extents.reshape(1, 4))
        r = self.rows
        hit = (a[0] <= r[:, 2]) & (r[:, 0] <= a[2]) & (a[1] <= r[:, 3]) & (r[:, 1] <= a[3])
        return bool(hit.any())


def _ordered(extents: np.ndarray) -> np.ndarray:
    """(x0, y0, x1, y1) rows with each pair swapped where the second is the smaller (as
    `Bbox.overlaps` does; a NaN pair stays as it is)."""
    out = extents.astype(float, copy=True)
    for lo, hi in ((0, 2), (1, 3)):
        swap = out[:, hi] < out[:, lo]
        out[swap, lo], out[swap, hi] = extents[swap, hi], extents[swap, lo]
    return out


def _marker_boxes(ax, xs: Sequence[float], ys: Sequence[float]) -> np.ndarray:  # noqa: ANN001
    """Every marker's box in display pixels (3 pt around its centre), one row each."""
    if not xs:
        return np.empty((0, 4))
    px, py = ax.transData.transform(np.column_stack([xs, ys])).T
    r = 3 * ax.figure.dpi / 72
    return np.column_stack([px - r, py - r, px + r, py + r])


def render_front(
    task: tuple[list[dict[str, str]], FrontPlot, tuple[str, ...]],
) -> tuple[str, bytes] | None:
    """A plot's SVG text (`figure_svg`) and PNG bytes from (rows, plot, axis names), None
    when nothing is drawn: one task, so that a sweep's workers can draw its plots side
    by side (outputs.write_outputs)."""
    rows, plot, axis_names = task
    fig = front_figure(rows, plot, axis_names)
    if fig is None:
        return None
    return figure_svg(fig), figure_png(fig)


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
