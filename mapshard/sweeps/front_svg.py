"""A sweep's Pareto fronts drawn as SVG text (mapshard.report.svgplot), labels placed
without overlaps.

Why not matplotlib: its import and three figures (label placement measured on a renderer,
SVG and PNG) took ~3 CPU-s per sweep, a quarter of a 1,000-point decode sweep's CPU and
nearly all of a small sweep's, and its files depend on the installed matplotlib and fonts.
Written directly, a front costs milliseconds and the same rows give the same bytes on any
machine. A label's box is estimated from its characters (FONT_EM_WIDTH), padded, so that
labels placed apart stay apart in any sans-serif font.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mapshard.report import svgplot
from mapshard.report.svgplot import INK, Canvas, Scale
from mapshard.sweeps import metrics
from mapshard.sweeps.pareto import (
    GROUP_COLORS,
    LABEL_OFFSETS,
    MAX_LABELS,
    SPLIT_BY_BATCH,
    FrontPlot,
    axis_label,
    batch_axis,
    groups_by,
    pareto_mask,
    plot_data,
    point_label,
)

WIDTH, HEIGHT = 700.0, 440.0  # pt (the viewBox's unit)
LABEL_SIZE = 7.0  # pt, a point label's font size
LEGEND_SIZE = 8.0
# average advance of a character of DejaVu Sans / Arial in em (digits 0.64, lower case
# ~0.55, capitals ~0.7), rounded up: a box estimated from it holds the drawn text
FONT_EM_WIDTH = 0.64
MARKER_PT = 3.0  # a front marker's radius; its box is the marker's square
DOMINATED = "#b0b0b0"
BEST_RING = "#c44e52"

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in SVG units (y down)


@dataclass(frozen=True)
class FrontFigure:
    """One drawn front: the SVG text and what it shows (for the report and the tests)."""

    svg: str
    title: str
    xlabel: str
    ylabel: str
    legend: tuple[str, ...]
    labels: tuple[str, ...]  # the point labels drawn, left to right
    label_boxes: tuple[Box, ...]  # their boxes, in the same order
    frame: Box  # the plot area the labels stay inside
    marker_boxes: tuple[Box, ...]  # every point's marker square


def text_width(text: str, size: float) -> float:
    """The estimated width (pt) of `text` at font `size` (pt): no renderer is asked."""
    return len(text) * size * FONT_EM_WIDTH


def front_figure(
    rows: list[dict[str, str]], plot: FrontPlot, axis_names: tuple[str, ...]
) -> FrontFigure | None:
    """One front (None when no solved point has both metrics). A latency plot over a batch
    axis draws one front per batch size. Front points carry labels ("#index" and their axis
    values) placed so that no two overlap."""
    keep, xs, ys, _ = plot_data(rows, plot)
    if not keep:
        return None
    by = batch_axis(axis_names) if plot.y in SPLIT_BY_BATCH else None
    groups = groups_by(keep, by)
    split = len(groups) > 1
    best = None
    if plot.y == "tokens_per_s":
        best = max(range(len(keep)), key=lambda i: (ys[i] / xs[i] if xs[i] > 0 else 0, -i))
    fronts = {v: _front(plot, xs, ys, idx) for v, idx in groups.items()}
    legend = _legend(fronts, by, split, best is not None)
    legend_w = max(text_width(text, LEGEND_SIZE) for text, _ in legend) + 28
    frame = (78.0, 34.0, WIDTH - legend_w - 12, HEIGHT - 52)
    sx = _scale(xs, frame[0], frame[2])
    sy = _scale(ys, frame[3], frame[1])
    c = Canvas(WIDTH, HEIGHT)
    title = plot.title + (f", one front per {by}" if by and split else "")
    xlabel, ylabel = axis_label(rows, plot.x), axis_label(rows, plot.y)
    svgplot.axes(c, sx, sy, xlabel, ylabel, title)
    for g, (dominated, front) in enumerate(fronts.values()):
        color = GROUP_COLORS[g % len(GROUP_COLORS)] if split else GROUP_COLORS[0]
        for i in dominated:
            fill, opacity = (color, 0.35) if split else (DOMINATED, 1.0)
            c.circle(sx(xs[i]), sy(ys[i]), 2.2, fill, point_label(keep[i], axis_names), opacity)
        c.polyline([(sx(xs[i]), sy(ys[i])) for i in front], color, 1.2)
        for i in front:
            c.circle(sx(xs[i]), sy(ys[i]), MARKER_PT, color, point_label(keep[i], axis_names), 1)
    if best is not None:
        c.ring(sx(xs[best]), sy(ys[best]), 6.5, BEST_RING)
    _draw_legend(c, legend, frame[2] + 14, frame[1] + 4)
    markers = tuple(_square(sx(x), sy(y), MARKER_PT) for x, y in zip(xs, ys))
    names = tuple(a for a in axis_names if a != by)
    labelled = [i for _, front in fronts.values() for i in front]
    labels, boxes = _label_points(c, keep, [sx(x) for x in xs], [sy(y) for y in ys],
                                  labelled, names, frame, markers)  # fmt: skip
    return FrontFigure(c.svg(), title, xlabel, ylabel, tuple(t for t, _ in legend),
                       labels, boxes, frame, markers)  # fmt: skip


def render_front(task: tuple[list[dict[str, str]], FrontPlot, tuple[str, ...]]) -> str | None:
    """A plot's SVG text from (rows, plot, axis names), None when nothing is drawn: one
    task, so that a sweep's workers can draw its plots side by side
    (outputs.write_outputs)."""
    fig = front_figure(*task)
    return None if fig is None else fig.svg


def _front(
    plot: FrontPlot, xs: Sequence[float], ys: Sequence[float], idx: list[int]
) -> tuple[list[int], list[int]]:
    """(dominated, front by x then y) of one group's row indices."""
    gx, gy = [xs[i] for i in idx], [ys[i] for i in idx]
    mask = pareto_mask(gx, gy, plot.x in metrics.MAXIMISE, plot.y in metrics.MAXIMISE)
    front = sorted((i for i, m in zip(idx, mask) if m), key=lambda i: (xs[i], ys[i]))
    return [i for i, m in zip(idx, mask) if not m], front


def _legend(
    fronts: dict[str, tuple[list[int], list[int]]], by: str | None, split: bool, best: bool
) -> list[tuple[str, str]]:
    """(text, colour) per legend entry, in drawing order."""
    items = []
    for g, (value, (dominated, front)) in enumerate(fronts.items()):
        if split:
            color = GROUP_COLORS[g % len(GROUP_COLORS)]
            items.append((f"{by} {value}: Pareto front ({len(front)})", color))
        else:
            items.append((f"dominated ({len(dominated)})", DOMINATED))
            items.append((f"Pareto front ({len(front)})", GROUP_COLORS[0]))
    if best:
        items.append(("best tokens/s per $", BEST_RING))
    return items


def _draw_legend(c: Canvas, items: list[tuple[str, str]], x: float, y: float) -> None:
    """One entry per line, outside the axes: it never covers a point or a label."""
    for n, (text, color) in enumerate(items):
        row = y + 14 * n
        c.circle(x + 4, row - 3, 3.5, color, "", 1)
        c.text(x + 12, row, text, LEGEND_SIZE, color=INK)


def _scale(values: Sequence[float], p0: float, p1: float) -> Scale:
    """Log when every value is positive and they span more than 20x; else linear, padded."""
    positive = [v for v in values if v > 0]
    if positive and len(positive) == len(values) and max(positive) > 20 * min(positive):
        lo, hi = svgplot.log_range(values, 1.3)
        return Scale(lo, hi, p0, p1, log=True)
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.06 or abs(hi) * 0.1 or 1.0
    return Scale(lo - pad, hi + pad, p0, p1)


def _square(x: float, y: float, r: float) -> Box:
    return (x - r, y - r, x + r, y + r)


def label_box(text: str, x: float, y: float, dx: float, dy: float) -> Box:
    """The box of label `text` for the marker at (x, y), offset (dx, dy) pt (dy up), aligned
    away from the marker, padded by 6% across and 15% up and down."""
    w = text_width(text, LABEL_SIZE) * 1.06
    h = LABEL_SIZE * 1.25 * 1.15
    cx, cy = x + dx, y - dy
    x0 = cx if dx > 0 else cx - w if dx < 0 else cx - w / 2
    y0 = cy - h if dy > 0 else cy if dy < 0 else cy - h / 2
    return (x0, y0, x0 + w, y0 + h)


def _label_points(
    c: Canvas,
    keep: list[dict[str, str]],
    px: list[float],
    py: list[float],
    idx: list[int],
    names: tuple[str, ...],
    frame: Box,
    markers: tuple[Box, ...],
) -> tuple[tuple[str, ...], tuple[Box, ...]]:
    """Label front points without overlaps: each label (left to right) takes the nearest
    offset whose box stays inside the frame and clear of every marker and label placed so
    far; failing that its '#index' alone is tried, else it stays unlabelled (the report's
    table beside the plot names it)."""
    order = sorted(idx, key=lambda i: (px[i], -py[i]))[:MAX_LABELS]
    taken = Boxes(np.asarray(markers, dtype=float).reshape(-1, 4))
    texts, boxes = [], []
    for i in order:
        full = point_label(keep[i], names)
        for text in dict.fromkeys((full, f"#{keep[i]['index']}")):
            placed = _place(taken, frame, text, px[i], py[i])
            if placed is not None:
                box, dx = placed
                taken.add(box)
                texts.append(text)
                boxes.append(box)
                _draw_label(c, text, box, dx)
                break
    return tuple(texts), tuple(boxes)


def _draw_label(c: Canvas, text: str, box: Box, dx: float) -> None:
    """The label in its box, anchored on the side away from its marker (dx > 0: right)."""
    x0, y0, x1, y1 = box
    x, anchor = (x0, "start") if dx > 0 else (x1, "end") if dx < 0 else ((x0 + x1) / 2, "middle")
    c.text(x, y1 - (y1 - y0) * 0.3, text, LABEL_SIZE, anchor, color="#333333")


def _place(taken: Boxes, frame: Box, text: str, x: float, y: float) -> tuple[Box, float] | None:
    """(box, dx) of the first offset at which `text` fits, else None."""
    for dx, dy in LABEL_OFFSETS:
        box = label_box(text, x, y, dx, dy)
        inside = frame[0] <= box[0] and box[2] <= frame[2]
        if inside and frame[1] <= box[1] and box[3] <= frame[3] and not taken.hit(box):
            return box, dx
    return None


class Boxes:
    """Boxes, one (x0, y0, x1, y1) row each, tested against a box all at once: a plot of a
    thousand points tests each label candidate against every marker. Two boxes overlap
    when they share a point, edges included; a NaN extent overlaps nothing."""

    def __init__(self, extents: np.ndarray):
        self.rows = _ordered(extents.reshape(-1, 4))

    def add(self, box: Sequence[float]) -> None:
        self.rows = np.vstack([self.rows, _ordered(np.asarray(box, dtype=float).reshape(1, 4))])

    def hit(self, box: Sequence[float]) -> bool:
        (a,) = _ordered(np.asarray(box, dtype=float).reshape(1, 4))
        r = self.rows
        hit = (a[0] <= r[:, 2]) & (r[:, 0] <= a[2]) & (a[1] <= r[:, 3]) & (r[:, 1] <= a[3])
        return bool(hit.any())


def _ordered(extents: np.ndarray) -> np.ndarray:
    """(x0, y0, x1, y1) rows with each pair swapped where the second is the smaller (a NaN
    pair stays as it is)."""
    out = extents.astype(float, copy=True)
    for lo, hi in ((0, 2), (1, 3)):
        swap = out[:, hi] < out[:, lo]
        out[swap, lo], out[swap, hi] = extents[swap, hi], extents[swap, lo]
    return out
