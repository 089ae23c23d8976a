"""The sweep's latency plots draw one Pareto front per batch size (#17: batch 1 and batch
128 on one front compared a single request with a full batch)."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

from mapshard.sweeps.front_svg import MARKER_PT, Boxes, FrontFigure, front_figure, label_box
from mapshard.sweeps.outputs import _cell
from mapshard.sweeps.pareto import LABEL_OFFSETS, PLOTS, pareto_mask

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
    assert fig is not None
    assert fig.legend == ("batch 1: Pareto front (2)", "batch 128: Pareto front (2)")
    assert "one front per batch" in fig.title and fig.title in fig.svg
    # one mixed front would keep only A and B (D costs what A costs and is slower; E costs
    # what B costs and is slower): the batch-128 points would vanish
    xs = [r[2] for r in ROWS]
    ys = [r[3] for r in ROWS]
    assert pareto_mask(xs, ys) == [True, True, False, False, False]
    # "#index" and the axis values without the batch (the colour says it)
    assert sorted(fig.labels) == ["#0 A", "#1 B", "#3 D", "#4 E"]
    assert all(f">{t}</text>" in fig.svg for t in fig.labels)


def test_without_a_batch_axis_the_front_is_single() -> None:
    plot = next(p for p in PLOTS if p.name == "pareto_latency_vs_cost")
    rows = [r | {"batch": ""} for r in _rows()]
    fig = front_figure(rows, plot, ("chip",))
    assert fig is not None and fig.legend == ("dominated (3)", "Pareto front (2)")


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


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Two boxes share a point (edges included), each given either way round; a NaN
    extent overlaps nothing (every comparison with it is false)."""
    ax0, ax1 = sorted((a[0], a[2])) if not math.isnan(a[0] + a[2]) else (a[0], a[2])
    ay0, ay1 = sorted((a[1], a[3]))
    bx0, bx1 = sorted((b[0], b[2])) if not math.isnan(b[0] + b[2]) else (b[0], b[2])
    by0, by1 = sorted((b[1], b[3]))
    return ax0 <= bx1 and bx0 <= ax1 and ay0 <= by1 and by0 <= ay1


def _same(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """Equal boxes, up to the rounding of a marker centre rebuilt from its square."""
    return all(math.isclose(u, v, rel_tol=0, abs_tol=1e-9) for u, v in zip(a, b))


def test_boxes_overlap_as_one_by_one_comparisons_do() -> None:
    """The labels' overlap test, all boxes at once, answers what comparing the box with
    each box in turn answers: boxes given either way round, touching edges, a NaN."""
    rng = random.Random(7)

    def box() -> tuple[float, ...]:
        x0, y0 = rng.choice([0.0, 1.0, 2.0, rng.uniform(0, 10)]), rng.uniform(0, 10)
        x1, y1 = rng.choice([x0 + 1.0, x0 - 1.0, rng.uniform(0, 10)]), rng.uniform(0, 10)
        if rng.random() < 0.05:
            x0 = math.nan
        return (x0, y0, x1, y1)

    for _ in range(300):
        taken = [box() for _ in range(rng.randint(1, 6))]
        boxes = Boxes(np.array(taken[:-1]).reshape(-1, 4))
        boxes.add(taken[-1])
        for _ in range(5):
            b = box()
            assert boxes.hit(b) == any(_overlap(b, t) for t in taken)


def _assert_labels_placed(fig: FrontFigure) -> None:
    """Every label box inside the frame, clear of every marker and of the other labels,
    at one of the offsets from its own point (its "#index")."""
    centres = [((b[0] + b[2]) / 2, (b[1] + b[3]) / 2) for b in fig.marker_boxes]
    f = fig.frame
    for n, (text, box) in enumerate(zip(fig.labels, fig.label_boxes)):
        assert f[0] <= box[0] and box[2] <= f[2] and f[1] <= box[1] and box[3] <= f[3]
        assert not any(_overlap(box, m) for m in fig.marker_boxes)
        assert not any(_overlap(box, o) for o in fig.label_boxes[n + 1 :])
        x, y = centres[int(text.split()[0][1:])]
        assert any(_same(label_box(text, x, y, dx, dy), box) for dx, dy in LABEL_OFFSETS)


def test_markers_labels_and_frame_by_hand() -> None:
    """Every marker's box is its square; every label box lies inside the frame, clear of
    every marker and of the other labels, at one of the offsets from its own point."""
    plot = next(p for p in PLOTS if p.name == "pareto_latency_vs_cost")
    fig = front_figure(_rows(), plot, ("chip", "batch"))
    assert fig is not None and len(fig.marker_boxes) == len(ROWS)
    for x0, y0, x1, y1 in fig.marker_boxes:
        assert x1 - x0 == y1 - y0 == 2 * MARKER_PT
    _assert_labels_placed(fig)


def test_a_label_box_by_hand() -> None:
    """7 pt text, 0.64 em a character: '#0 A' is 4 x 4.48 = 17.92 pt wide, 10.0625 pt high
    after the 6% / 15% padding (x 1.06, 7 x 1.25 x 1.15); right of and above its point."""
    x0, y0, x1, y1 = label_box("#0 A", 100.0, 200.0, 5.0, 3.0)
    assert (x0, y1) == (105.0, 197.0)
    assert math.isclose(x1 - x0, 17.92 * 1.06) and math.isclose(y1 - y0, 10.0625)
    # left of it: the box ends at the offset; straight above: centred on the point
    assert label_box("#0 A", 100.0, 200.0, -5.0, 3.0)[2] == 95.0
    cx0, _, cx1, _ = label_box("#0 A", 100.0, 200.0, 0.0, 7.0)
    assert math.isclose((cx0 + cx1) / 2, 100.0)


def test_a_front_is_drawn_without_matplotlib_and_the_same_each_time() -> None:
    """The plots are SVG text written directly (front_svg's docstring: matplotlib was a
    quarter of a sweep's CPU): drawing one imports no matplotlib, and the same rows give
    the same bytes."""
    code = (
        "import sys\n"
        "from tests.unit.test_sweep_fronts import _rows\n"
        "from mapshard.sweeps.front_svg import render_front\n"
        "from mapshard.sweeps.pareto import PLOTS\n"
        "a = render_front((_rows(), PLOTS[0], ('chip', 'batch')))\n"
        "b = render_front((_rows(), PLOTS[0], ('chip', 'batch')))\n"
        "assert a == b and a.startswith('<svg'), a[:80]\n"
        "assert 'matplotlib' not in sys.modules\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_labels_of_random_sweeps_stay_apart_and_inside() -> None:
    """A seeded family of random sweeps (3-300 points, costs and latencies over several
    decades, 1-4 batch sizes, long chip names): on every plot every label box lies inside
    the frame, clear of every marker and of every other label, at one of the offsets from
    its own point; every front point is drawn, labelled or not."""
    rng = random.Random(11)
    for _ in range(20):
        count = rng.randint(3, 300)
        batches = [str(b) for b in rng.sample([1, 8, 32, 128], rng.randint(1, 4))]
        rows = [
            {
                "index": str(i),
                "status": "optimal",
                "chip": rng.choice(["H100-SXM5-80GB", "MI300X", "B200", "Gaudi3"]),
                "batch": rng.choice(batches),
                "system_cost": repr(10 ** rng.uniform(3, 6)),
                "latency_s": repr(10 ** rng.uniform(-3, 1)),
                "cost_basis": "setup_price",
            }
            for i in range(count)
        ]
        plot = next(p for p in PLOTS if p.name == "pareto_latency_vs_cost")
        fig = front_figure(rows, plot, ("chip", "batch"))
        assert fig is not None and len(fig.marker_boxes) == count
        _assert_labels_placed(fig)
        assert fig.svg.count('r="3.0"') >= len(fig.labels)
