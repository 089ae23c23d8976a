"""report.html's tables of configurations and kernels (the longest section, kept apart
from html.py's plots and cards)."""

from __future__ import annotations

from mapshard.fmt import fmt_bytes, fmt_time
from mapshard.report.markup import table as _table
from mapshard.report.tables import dims_text
from mapshard.report.totals import config_total_s, kernel_time_s, phase_instances
from solver.plan import Plan

MAX_KERNEL_ROWS = 40


def tables_section(plan: Plan) -> str:
    crow = []
    for p in plan.phases:
        for c in sorted(p.configs, key=lambda c: c.index):
            crow.append(
                [
                    p.name,
                    str(c.index),
                    ", ".join(c.kernels),
                    c.bound,
                    fmt_time(c.compute_s),
                    fmt_time(c.memory_s),
                    fmt_time(c.network_s),
                    fmt_time(c.latency_s),
                    fmt_bytes(c.sram_bytes),
                    fmt_time(config_total_s(plan, p, c)),
                ]
            )
    ranked = sorted(
        (
            (kernel_time_s(k) * phase_instances(plan, p), i, k)
            for p in plan.phases
            for i, k in enumerate(p.kernels)
        ),
        key=lambda x: (-x[0], x[1]),
    )
    krow = [
        [
            f"{k.phase}/{k.name}",
            k.kind,
            k.kernel_class,
            k.pass_,
            dims_text(k.dims),
            k.sharding,
            k.tile,
            str(k.config),
            k.bound,
            fmt_time(k.compute_s),
            fmt_time(k.memory_s),
            fmt_time(k.network_s),
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
    return (
        "<h2>Configurations</h2>"
        + _table(
            [
                "phase",
                "config",
                "kernels",
                "bound",
                "compute",
                "memory",
                "network",
                "latency",
                "SRAM",
                "busy / step",
            ],
            crow,
            3,
        )
        + "<h2>Kernels (by busy time per step)</h2>"
        + _table(
            [
                "kernel",
                "kind",
                "class",
                "pass",
                "dims",
                "sharding",
                "tile",
                "config",
                "bound",
                "compute",
                "memory",
                "network",
                "DRAM / chip",
                "busy / step",
            ],
            krow,
            7,
        )
        + more
    )
