"""report.html's tables of configurations and kernels (the longest section, kept apart
from html.py's plots and cards)."""

from __future__ import annotations

from mapshard.fmt import fmt_bytes, fmt_time, kernel_class_label
from mapshard.report.markup import table as _table
from mapshard.report.tables import dims_text
from mapshard.report.totals import config_total_s, phase_instances, row_split, row_time_s
from solver.plan import Plan

MAX_KERNEL_ROWS = 40
MAX_CONFIG_ROWS = 200
#: the seconds each resource adds to a row's latency (they add up to it; the largest is the
#: row's bound): hidden time under a longer term is not counted
SPLIT_HEADS = ("overhead", "compute", "memory", "network")
SPLIT_NOTE = (
    "<p class='note'>overhead, compute, memory and network: the time each adds to the "
    "row's latency (they add up to it; time hidden under a longer term is not counted), "
    "the largest naming the bound. Each resource's own time is in kernels.csv.</p>"
)


def _listed_configs(plan: Plan) -> set[tuple[int, int]]:
    """(phase position, configuration index) of the table's rows: every configuration, or
    past MAX_CONFIG_ROWS the ones busiest per step (a kernel-by-kernel graph has one per
    kernel: 20,000 rows would make the page unreadable and its writing a second of a run;
    configs.csv has them all)."""
    every = [(at, p, c) for at, p in enumerate(plan.phases) for c in p.configs]
    if len(every) > MAX_CONFIG_ROWS:
        busiest = sorted(
            range(len(every)),
            key=lambda i: (-config_total_s(plan, every[i][1], every[i][2]), i),
        )
        every = [every[i] for i in busiest[:MAX_CONFIG_ROWS]]
    return {(at, c.index) for at, _, c in every}


def _breakable(text: str) -> str:
    """A tile as `output_stationary: Tm=8, Tn=4096`: spaces where a narrow column may wrap."""
    return text.replace(":", ": ").replace(",", ", ").replace("  ", " ")


def _t(seconds: float) -> str:
    return fmt_time(seconds) if seconds else "-"


def tables_section(plan: Plan) -> str:
    listed = _listed_configs(plan)
    crow = []
    for at, p in enumerate(plan.phases):
        for c in sorted(p.configs, key=lambda c: c.index):
            if (at, c.index) not in listed:
                continue
            crow.append(
                [
                    p.name,
                    str(c.index),
                    ", ".join(c.kernels),
                    c.bound,
                    *(_t(x) for x in row_split(plan, c)),
                    fmt_time(c.latency_s),
                    fmt_bytes(c.sram_bytes),
                    fmt_time(config_total_s(plan, p, c)),
                ]
            )
    ranked = sorted(
        (
            (row_time_s(plan, k) * phase_instances(plan, p), i, k)
            for p in plan.phases
            for i, k in enumerate(p.kernels)
        ),
        key=lambda x: (-x[0], x[1]),
    )
    krow = [
        [
            f"{k.phase}/{k.name}",
            kernel_class_label(k.kernel_class, k.kind),
            k.pass_,
            dims_text(k.dims),
            k.sharding,
            _breakable(k.tile),
            str(k.config),
            k.bound,
            *(_t(x) for x in row_split(plan, k)),
            fmt_time(row_time_s(plan, k)),
            fmt_bytes(k.dram_bytes),
            fmt_time(t),
        ]
        for t, _, k in ranked[:MAX_KERNEL_ROWS]
    ]
    more = (
        f"<p class='note'>{len(ranked) - MAX_KERNEL_ROWS} more kernels in kernels.csv.</p>"
        if len(ranked) > MAX_KERNEL_ROWS
        else ""
    )
    configs = sum(len(p.configs) for p in plan.phases)
    more_configs = (
        f"<p class='note'>{configs - len(listed)} more configurations (the shortest per "
        "step) in configs.csv.</p>"
        if configs > len(listed)
        else ""
    )
    return (
        "<h2>Configurations</h2>"
        + SPLIT_NOTE
        + _table(
            [
                "phase",
                "config",
                "kernels",
                "bound",
                *SPLIT_HEADS,
                "latency",
                "SRAM",
                "busy / step",
            ],
            crow,
            3,
        )
        + more_configs
        + "<h2>Kernels (by busy time per step)</h2>"
        + _table(
            [
                "kernel",
                "class",
                "pass",
                "dims",
                "sharding",
                "tile",
                "config",
                "bound",
                *SPLIT_HEADS,
                "latency",
                "DRAM / chip",
                "busy / step",
            ],
            krow,
            6,
        )
        + more
    )
