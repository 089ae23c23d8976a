"""report.html's what-if, serving and stream sections, built from the views' records
(mapshard/views.py), kept apart from html.py's plan sections."""

from __future__ import annotations

from mapshard.report.markup import escape as _e
from mapshard.report.markup import table
from mapshard.views import HEADER, Sensitivity, Serving, StreamView


def sensitivity_section(sensitivity: Sensitivity | None) -> str:
    """What-if: each resource scaled and re-solved (mapshard/analyses/sensitivity.py)."""
    if sensitivity is None:
        return ""
    note = (
        "Each resource scaled on its own and the scenario re-solved through the same search, "
        "on the setup's work budgets (the same table on every run); a row a budget or the "
        "time limit stopped shows the best plan found, an upper bound on the new latency."
    )
    return (
        "<h2>What if</h2>"
        + f"<p><b>{_e(sensitivity.binding())}</b></p>"
        + table(
            ["resource", "scale", "latency", "change", "re-solve"],
            sensitivity.table_rows(),
            2,
            narrow=True,
        )
        + f"<p class='note'>{_e(note)}</p>"
    )


def serving_section(serving: Serving | None) -> str:
    """TTFT / TPOT / tokens/s versus batch (mapshard/analyses/serving.py)."""
    if serving is None:
        return ""
    note = (
        f"Each row re-solved at that batch and input length (parallelism searched); "
        f"objective {serving.objective}, {serving.limits_text()}."
    )
    return (
        "<h2>Serving: latency and throughput versus batch</h2>"
        + table(HEADER, serving.table_rows(), 3, narrow=True)
        + f"<p class='note'>{_e(note)}</p>"
    )


def stream_section(stream: StreamView | None) -> str:
    """Request-stream throughput and latency percentiles (mapshard/analyses/stream.py)."""
    if stream is None:
        return ""
    items = "".join(f"<li>{_e(line)}</li>" for line in stream.lines())
    return f"<h2>Request stream: in-flight batching</h2><ul>{items}</ul>"
