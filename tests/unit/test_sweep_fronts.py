"""The sweep's latency plots draw one Pareto front per batch size (#17: batch 1 and batch
128 on one front compared a single request with a full batch)."""

from __future__ import annotations

import math
import random

import numpy as np
from matplotlib.transforms import Bbox

from mapshard.sweeps.outputs import _cell
from mapshard.sweeps.pareto import (
    _OFFSETS,
    _SURE_PX,
    PLOTS,
    _annotate,
    _Boxes,
    _marker_boxes,
    front_figure,
    pareto_mask,
)

# (chip, batch, system cost $, latency s): by hand, within batch 1 the front is A (cheapest)
# and B (fastest); C is dominated by B (dearer and slower). Within batch 128: D and E.
# On one mixed front, batch 1's fast points would hide every batch-128 point but D.
ROWS = [
    ("A", "1", 100.0, 0.010),
    ("B", "1", 200.0, 0.005),
    ("C", "1", 300.0, 0.006),
    ("D", "128", 100.0, 0.050),
    ("E", "128", 200.0, 0.030),
]


def _rows() -> list[dict[str, str]]:
    return [
        {
            "index": str(i),
            "status": "optimal",
            "chip": c,
            "batch": b,
            "system_cost": repr(cost),
            "latency_s": repr(lat),
        }  # fmt: skip
        for i, (c, b, cost, lat) in enumerate(ROWS)
    ]


def test_latency_vs_cost_has_one_front_per_batch() -> None:
    plot = next(p for p in PLOTS if p.name == "pareto_latency_vs_cost")
    fig = front_figure(_rows(), plot, ("chip", "batch"))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["batch 1: Pareto front (2)", "batch 128: Pareto front (2)"]
    assert "one front per batch" in ax.get_title()
    # one mixed front would keep only A and B (D costs what A costs and is slower; E costs
    # what B costs and is slower): the batch-128 points would vanish
    xs = [r[2] for r in ROWS]
    ys = [r[3] for r in ROWS]
    assert pareto_mask(xs, ys) == [True, True, False, False, False]
    texts = sorted(t.get_text() for t in ax.texts)
    # "#index" and the axis values without the batch (the colour says it)
    assert texts == ["#0 A", "#1 B", "#3 D", "#4 E"]


def test_without_a_batch_axis_the_front_is_single() -> None:
    plot = next(p for p in PLOTS if p.name == "pareto_latency_vs_cost")
    rows = [r | {"batch": ""} for r in _rows()]
    fig = front_figure(rows, plot, ("chip",))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["dominated (3)", "Pareto front (2)"]


def test_best_point_cells_say_not_priced_instead_of_zero() -> None:
    unpriced = {"status": "optimal", "system_cost": "0", "tokens_per_s_per_usd": "",
                "system_power_W": "700", "latency_s": "0.00678"}  # fmt: skip
    assert _cell(unpriced, "system_cost") == "not priced"
    assert _cell(unpriced, "tokens_per_s_per_usd") == "not priced"
    assert _cell(unpriced, "system_power_W") == "700 W"
    # priced: tokens/s per $ = 1180 tokens/s / $35,000 = 0.03371
    priced = unpriced | {"system_cost": "35000", "tokens_per_s_per_usd": repr(1180 / 35000)}
    assert _cell(priced, "tokens_per_s_per_usd") == "0.03371"
    assert _cell(priced, "system_cost") == "$35 k" and _cell(priced, "system_power_W") == "700 W"
    assert _cell(priced, "latency_s") == "6.78 ms"


def test_boxes_overlap_as_bbox_overlaps_does() -> None:
    """The labels' overlap test, all boxes at once, answers what `Bbox.overlaps` box by box
    answers: boxes given either way round, touching edges, a NaN extent."""
    rng = random.Random(7)

    def box() -> Bbox:
        x0, y0 = rng.choice([0.0, 1.0, 2.0, rng.uniform(0, 10)]), rng.uniform(0, 10)
        x1, y1 = rng.choice([x0 + 1.0, x0 - 1.0, rng.uniform(0, 10)]), rng.uniform(0, 10)
        if rng.random() < 0.05:
            x0 = math.nan
        return Bbox.from_extents(x0, y0, x1, y1)

    for _ in range(300):
        taken = [box() for _ in range(rng.randint(1, 6))]
        boxes = _Boxes(np.array([t.extents for t in taken[:-1]]).reshape(-1, 4))
        boxes.add(taken[-1])
        for _ in range(5):
            b = box()
            assert boxes.overlaps(b) == any(b.overlaps(t) for t in taken)


def test_marker_boxes_are_the_boxes_of_each_marker() -> None:
    plot = next(p for p in PLOTS if p.name == "pareto_latency_vs_cost")
    fig = front_figure(_rows(), plot, ("chip", "batch"))
    ax = fig.axes[0]
    xs, ys = [r[2] for r in ROWS], [r[3] for r in ROWS]
    r = 3 * fig.dpi / 72
    one_by_one = []
    for x, y in zip(xs, ys):
        px, py = ax.transData.transform((x, y))
        one_by_one.append([px - r, py - r, px + r, py + r])
    assert _marker_boxes(ax, xs, ys).tolist() == one_by_one


def test_a_label_moved_out_is_the_label_measured_there() -> None:
    """A label's box at a further offset of one direction is the box measured nearer in,
    moved by the difference of the offsets, to far below _SURE_PX: `_place` passes over
    offsets by the moved box and still picks the offset measuring all would pick."""
    plot = next(p for p in PLOTS if p.name == "pareto_latency_vs_cost")
    fig = front_figure(_rows(), plot, ("chip", "batch"))
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    scale = fig.dpi / 72
    for text, (x, y) in (("#0 A", (100.0, 0.01)), ("#123 H100-SXM5-80GB 8 12…", (250.0, 0.03))):
        boxes = {}
        for dx, dy in _OFFSETS:
            ann = _annotate(ax, text, x, y, dx, dy)
            boxes[dx, dy] = ann.get_window_extent(renderer).expanded(1.06, 1.15)
            ann.remove()
        for (dx, dy), box in boxes.items():
            way = (dx > 0, dx < 0, dy > 0, dy < 0)
            dx0, dy0 = next(o for o in _OFFSETS if (o[0] > 0, o[0] < 0, o[1] > 0, o[1] < 0) == way)
            moved = boxes[dx0, dy0].translated((dx - dx0) * scale, (dy - dy0) * scale)
            assert np.abs(moved.extents - box.extents).max() < _SURE_PX / 1000
