"""The sweep's latency plots draw one Pareto front per batch size (#17: batch 1 and batch
128 on one front compared a single request with a full batch)."""

from __future__ import annotations

from mapshard.sweeps.outputs import _cell
from mapshard.sweeps.pareto import PLOTS, front_figure, pareto_mask

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
