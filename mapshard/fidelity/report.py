"""Validation outputs: validation.csv, validation_summary.csv and validation.svg.

Each file is written atomically (a reader sees the old or the new file, never a mix), and
the plot is byte-identical across runs (fixed SVG hash salt, no date metadata).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass

from mapshard.fidelity.cases import BOUNDS_PCT
from mapshard.report.plots import figure, to_svg

COLUMNS = ("id", "kind", "metric", "measured", "predicted", "error_pct", "reason")
SUMMARY_COLUMNS = (
    "level",
    "group",
    "kinds",
    "predicted",
    "not_predicted",
    "mean_abs_error_pct",
    "max_abs_error_pct",
    "worst_id",
    "bound_pct",
    "within_bound",
)
GROUP_ORDER = ("gemm", "memory_copy", "collective", "training", "inference")


@dataclass(frozen=True)
class Outcome:
    """One case's line of validation.csv."""

    id: str
    kind: str
    group: str
    metric: str
    measured: float | None
    predicted: float | None
    reason: str = ""
    chip: str = ""  # the row's chip (kernel constants are per chip: errors are split by it)

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None or not self.measured:
            return None
        return (self.predicted - self.measured) / self.measured * 100.0


@dataclass(frozen=True)
class GroupSummary:
    group: str
    kinds: tuple[str, ...]
    predicted: int
    not_predicted: int
    mean_abs_pct: float | None
    max_abs_pct: float | None
    worst_id: str
    bound_pct: float | None

    @property
    def within_bound(self) -> bool | None:
        if self.bound_pct is None or self.mean_abs_pct is None:
            return None
        return self.mean_abs_pct <= self.bound_pct


def _num(x: float | None) -> str:
    return "" if x is None else repr(float(x))


def _summary(name: str, rows: Sequence[Outcome], bound: float | None) -> GroupSummary:
    errs = [(abs(o.error_pct), o.id) for o in rows if o.error_pct is not None]
    mean = sum(e for e, _ in errs) / len(errs) if errs else None
    worst = max(errs) if errs else (None, "")
    kinds = tuple(sorted({o.kind for o in rows}))
    return GroupSummary(
        name, kinds, len(errs), len(rows) - len(errs), mean, worst[0], worst[1], bound
    )


def summarize(outcomes: Sequence[Outcome]) -> list[GroupSummary]:
    """Mean and max |error| per group (gemm, memory_copy, collective, training, inference,
    then any other kind), over the cases that were predicted; a group of several kinds is
    followed by one line per kind ("  inference_prefill"), and a group of several chips by
    one line per chip ("  gemm on MI300X": a chip's constants are fitted on its own rows, so
    a chip the model does not carry over to shows apart); those lines carry no bound."""
    groups = list(GROUP_ORDER) + sorted({o.group for o in outcomes} - set(GROUP_ORDER))
    out = []
    for g in groups:
        rows = [o for o in outcomes if o.group == g]
        if not rows:
            continue
        out.append(_summary(g, rows, BOUNDS_PCT.get(g)))
        kinds = sorted({o.kind for o in rows})
        if len(kinds) > 1:
            out.extend(_summary(f"  {k}", [o for o in rows if o.kind == k], None) for k in kinds)
        chips = sorted({o.chip for o in rows if o.chip})
        if len(chips) > 1:
            out.extend(
                _summary(f"  {g} on {c}", [o for o in rows if o.chip == c], None) for c in chips
            )
    return out


def validation_csv(outcomes: Sequence[Outcome]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for o in outcomes:
        err = o.error_pct
        w.writerow(
            [
                o.id,
                o.kind,
                o.metric,
                _num(o.measured),
                _num(o.predicted),
                "" if err is None else f"{err:.3f}",
                o.reason,
            ]
        )
    return buf.getvalue()


def summary_csv(summary: Sequence[GroupSummary]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SUMMARY_COLUMNS)
    for s in summary:
        w.writerow(
            [
                "group" if not s.group.startswith(" ") else "chip" if " on " in s.group else "kind",
                s.group.strip(),
                " ".join(s.kinds),
                s.predicted,
                s.not_predicted,
                "" if s.mean_abs_pct is None else f"{s.mean_abs_pct:.3f}",
                "" if s.max_abs_pct is None else f"{s.max_abs_pct:.3f}",
                s.worst_id,
                "" if s.bound_pct is None else f"{s.bound_pct:g}",
                "" if s.within_bound is None else str(s.within_bound).lower(),
            ]
        )
    return buf.getvalue()


def format_summary(summary: Sequence[GroupSummary]) -> str:
    """The summary as a fixed-width table for the terminal (the first column as wide as its
    longest label)."""
    w = max([24, *(len(s.group) for s in summary)])
    head = (
        f"{'group':<{w}} {'n':>3} {'skip':>4} {'mean|err|%':>10} {'max|err|%':>9} "
        f"{'worst':<6} {'bound%':>6}  status"
    )
    lines = [head, "-" * len(head)]
    for s in summary:
        mean = "-" if s.mean_abs_pct is None else f"{s.mean_abs_pct:.2f}"
        mx = "-" if s.max_abs_pct is None else f"{s.max_abs_pct:.2f}"
        bound = "-" if s.bound_pct is None else f"{s.bound_pct:g}"
        status = {True: "ok", False: "EXCEEDED", None: "-"}[s.within_bound]
        lines.append(
            f"{s.group:<{w}} {s.predicted:>3} {s.not_predicted:>4} {mean:>10} "
            f"{mx:>9} {s.worst_id:<6} {bound:>6}  {status}"
        )
    return "\n".join(lines)


_MARKERS = {
    "gemm": "o",
    "memory_copy": "s",
    "collective": "^",
    "training": "D",
    "inference": "v",
}
_COLORS = {
    "gemm": "#4c72b0",
    "memory_copy": "#8172b3",
    "collective": "#55a868",
    "training": "#dd8452",
    "inference": "#c44e52",
}
# One panel per unit, so every axis has one meaning.
_UNITS = (
    (
        "time (s)",
        ("kernel_time_s", "collective_time_s", "iteration_time_s", "ttft_s", "layer_time_s"),
    ),
    ("FLOP/s per chip", ("throughput_flops", "rmax_flops")),
    ("bytes/s", ("bandwidth_Bps", "bus_bandwidth_Bps", "algorithm_bandwidth_Bps")),
    ("tokens/s", ("tokens_per_s", "tokens_per_s_per_chip")),
    ("fraction", ("mfu", "hfu")),
)


def _unit(metric: str) -> str:
    for label, metrics in _UNITS:
        if metric in metrics:
            return label
    return metric


def validation_svg(outcomes: Sequence[Outcome]) -> str:
    """Predicted vs measured, log-log, one panel per unit; marker and colour by group; the
    y = x line with dashed +-5 % and +-15 % lines."""
    pts = [
        o
        for o in outcomes
        if o.error_pct is not None
        and o.measured
        and o.predicted
        and o.measured > 0
        and o.predicted > 0
    ]
    order = [label for label, _ in _UNITS]
    units = sorted(
        {_unit(o.metric) for o in pts},
        key=lambda u: (order.index(u) if u in order else len(order), u),
    )
    units = units or ["(none predicted)"]
    with figure(3.4 * len(units), 3.6) as fig:
        axes = fig.subplots(1, len(units), squeeze=False)[0]
        for ax, unit in zip(axes, units):
            mine = [o for o in pts if _unit(o.metric) == unit]
            ax.set_title(unit)
            if not mine:
                continue
            vals = [o.measured for o in mine] + [o.predicted for o in mine]
            lo, hi = min(vals) / 1.6, max(vals) * 1.6
            ax.plot([lo, hi], [lo, hi], color="#444444", linewidth=0.8)
            for f in (0.05, 0.15):
                for sign in (1, -1):
                    ax.plot(
                        [lo, hi],
                        [lo * (1 + sign * f), hi * (1 + sign * f)],
                        color="#999999",
                        linewidth=0.5,
                        linestyle="--",
                    )
            for g in sorted({o.group for o in mine}):
                sel = [o for o in mine if o.group == g]
                ax.scatter(
                    [o.measured for o in sel],
                    [o.predicted for o in sel],
                    marker=_MARKERS.get(g, "o"),
                    s=20,
                    color=_COLORS.get(g, "#333333"),
                    label=g,
                    zorder=3,
                )
            for o in mine:
                ax.annotate(
                    o.id,
                    (o.measured, o.predicted),
                    fontsize=6,
                    xytext=(3, -7),
                    textcoords="offset points",
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(lo, hi)
            ax.set_ylim(lo, hi)
            ax.set_xlabel("measured", fontsize=8)
            ax.set_ylabel("predicted", fontsize=8)
            ax.legend(fontsize=6, loc="upper left")
        return to_svg(fig)


def output_files(outcomes: Sequence[Outcome], summary: Sequence[GroupSummary]) -> dict[str, str]:
    """validation.csv, validation_summary.csv and validation.svg: name -> content."""
    return {
        "validation.csv": validation_csv(outcomes),
        "validation_summary.csv": summary_csv(summary),
        "validation.svg": validation_svg(outcomes),
    }
