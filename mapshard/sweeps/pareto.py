"""Pareto fronts of a sweep's solved points: which rows each plot draws, its fronts and
its point labels (the drawing: mapshard.sweeps.front_svg)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mapshard.sweeps import metrics

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
LABEL_OFFSETS = tuple(
    (dx * r, dy * r)
    for r in (1, 2, 3.5)
    for dx, dy in ((5, 3), (5, -3), (-5, 3), (-5, -3), (0, 7), (0, -7), (7, 0), (-7, 0))
)


def batch_axis(axis_names: tuple[str, ...]) -> str | None:
    """The sweep axis that sets the batch size, if any ("batch", "decode_batch", ...)."""
    return next((a for a in axis_names if "batch" in a.lower()), None)


def groups_by(keep: list[dict[str, str]], by: str | None) -> dict[str, list[int]]:
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
    for idx in groups_by(keep, by).values():
        mask = pareto_mask(
            [xs[i] for i in idx],
            [ys[i] for i in idx],
            plot.x in metrics.MAXIMISE,
            plot.y in metrics.MAXIMISE,
        )
        front += [i for i, m in zip(idx, mask) if m]
    return [keep[i] for i in sorted(front, key=lambda i: (xs[i], ys[i], int(keep[i]["index"])))]


def point_label(row: dict[str, str], axis_names: tuple[str, ...]) -> str:
    """'#index' and the point's axis values, short enough for a plot."""
    values = " ".join(row.get(a, "") for a in axis_names).strip()
    text = f"#{row['index']} {values}".strip()
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
