"""report.html's what-if and serving sections: tables of re-solved points, built from
mapshard/sensitivity.py and mapshard/serving.py (kept apart from html.py's plan sections)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mapshard.sensitivity import Sensitivity
    from mapshard.serving import Serving


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _table(header: list[str], rows: list[list[str]], text_cols: int) -> str:
    """The same table markup as html.py's (narrow, text columns left-aligned)."""

    def cell(tag: str, i: int, v: str) -> str:
        cls = ' class="t"' if i < text_cols else ""
        return f"<{tag}{cls}>{_e(v)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows
    )
    return f'<table class="narrow"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def sensitivity_section(sensitivity: Sensitivity | None) -> str:
    """What-if: each resource scaled and re-solved (mapshard/sensitivity.py)."""
    if sensitivity is None:
        return ""
    note = (
        "Each resource scaled on its own and the scenario re-solved through the same search "
        f"(at most {sensitivity.time_limit_s:.3g} s per re-solve); a row stopped at its time "
        "limit shows the best plan found, an upper bound on the new latency."
    )
    return (
        "<h2>What if</h2>"
        + f"<p><b>{_e(sensitivity.binding())}</b></p>"
        + _table(
            ["resource", "scale", "latency", "change", "re-solve"],
            sensitivity.table_rows(),
            2,
        )
        + f"<p class='note'>{_e(note)}</p>"
    )


def serving_section(serving: Serving | None) -> str:
    """TTFT / TPOT / tokens/s versus batch (mapshard/serving.py)."""
    if serving is None:
        return ""
    from mapshard.serving import HEADER

    note = (
        f"Each row re-solved at that batch and input length (parallelism searched); "
        f"objective {serving.objective}, {serving.limits_text()}."
    )
    return (
        "<h2>Serving: latency and throughput versus batch</h2>"
        + _table(HEADER, serving.table_rows(), 3)
        + f"<p class='note'>{_e(note)}</p>"
    )
