"""`mapshard compare A B [C ...]`: scenarios or result folders side by side, the first as the
reference: latency, throughput, cost, power, energy, memory and where the time goes (time
per step by binding resource). A scenario folder is solved first; a result folder (one with
summary.json) is read as it is."""

from __future__ import annotations

import csv
import html
import io
import json
import math
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mapshard.api import solve
from mapshard.fmt import fmt_bytes, fmt_money, fmt_pct, fmt_ratio, fmt_si, fmt_time
from schema.errors import InfeasibleError, NoPlanError, SetupError

BOUNDS = ("compute", "memory", "network", "overhead")


@dataclass(frozen=True)
class Side:
    """One column of the comparison."""

    name: str
    summary: dict[str, Any]
    time_by_bound: dict[str, float]  # seconds per step, configurations grouped by bound


#: summary.json keys the comparison reads, with the types a valid one holds there
NUMBER_KEYS = (
    "latency_s", "ttft_s", "tpot_s", "tokens_per_s", "flops_utilization", "system_cost",
    "system_power_W", "energy_J", "memory_per_chip_bytes", "num_chips", "workload_flop",
)  # fmt: skip


def load_side(path: str | Path, time_limit_s: float | None = None) -> Side:
    """A result folder as written, or a scenario folder/setup file solved now."""
    path = Path(path)
    if (path / "summary.json").is_file() and (path / "configs.csv").is_file():
        summary = _read_summary(path / "summary.json")
        by_bound = _read_time_by_bound(path / "configs.csv")
        name = summary.get("scenario") or path.name
    else:
        result = solve(path, time_limit_s)
        summary, configs = result.summary, result.configs
        name = result.scenario.name
        by_bound = configs.groupby("bound")["per_step_s"].sum().to_dict() if len(configs) else {}
    return Side(str(name), summary, {b: float(by_bound.get(b, 0.0)) for b in BOUNDS})


def load_sides(paths: list[str], time_limit_s: float | None = None) -> list[Side]:
    """Every side, named apart: two setups of the same `name` (a copy with another chip)
    are told apart by the folder given for each."""
    sides = [_named_side(p, time_limit_s) for p in paths]
    names = Counter(s.name for s in sides)
    return [
        replace(s, name=f"{s.name} ({p})") if names[s.name] > 1 else s
        for s, p in zip(sides, paths, strict=True)
    ]


def _named_side(path: str, time_limit_s: float | None) -> Side:
    """load_side, its scenario named when it cannot be solved (which side failed)."""
    try:
        return load_side(path, time_limit_s)
    except InfeasibleError as exc:
        raise InfeasibleError(exc.resource, f"{path}: {exc.reason}", exc.suggestion) from None
    except NoPlanError as exc:
        raise NoPlanError(f"{path}: {exc}") from None


def _read_summary(path: Path) -> dict[str, Any]:
    """summary.json of a result folder, checked against what the comparison reads."""
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SetupError(f"{path}: not a readable summary.json ({exc}); give a result "
                         "folder `mapshard run` wrote, or a scenario folder") from None  # fmt: skip
    if not isinstance(summary, dict):
        raise SetupError(
            f"{path}: a summary.json holds a JSON object, not {type(summary).__name__}"
        )
    for key in NUMBER_KEYS:
        value = summary.get(key)
        if value is not None and not _finite_number(value):
            shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:40]}..."
            raise SetupError(f"{path}: {key} is {shown}; a finite number (or null) was expected")
    for key in ("status", "scenario"):
        if summary.get(key) is not None and not isinstance(summary[key], str):
            raise SetupError(f"{path}: {key} is {summary[key]!r}; a string was expected")
    degrees = summary.get("parallelism")
    if degrees is not None and not (
        isinstance(degrees, dict)
        and all(isinstance(v, int) and not isinstance(v, bool) for v in degrees.values())
    ):
        raise SetupError(f"{path}: parallelism is {degrees!r}; an object of whole degrees "
                         'such as {"tp": 8, "pp": 1} was expected')  # fmt: skip
    return summary


def _finite_number(value: object) -> bool:
    """A JSON number MapShard can have written: not a bool, not NaN/Infinity, and within
    a float (json reads 1e400 as inf and a 400-digit integer as an int)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _read_time_by_bound(path: Path) -> dict[str, float]:
    """configs.csv's wall time per step by binding resource (`per_step_s`; a folder from
    before that column has only the busy time summed over stages, `total_s`)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = reader.fieldnames or []
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise SetupError(f"{path}: not a readable configs.csv ({exc})") from None
    if "bound" not in header or not {"per_step_s", "total_s"} & set(header) or not rows:
        raise SetupError(f"{path}: not a configs.csv `mapshard run` wrote (it needs a bound and "
                         "a per_step_s column and a row per configuration); give a result "
                         "folder, or a scenario folder")  # fmt: skip
    out: dict[str, float] = {}
    for number, row in enumerate(rows, start=2):
        extra = row.get(None) or []  # csv.DictReader: cells past the header, or None cells
        if extra or None in row.values():
            got = len(header) + len(extra) if extra else "fewer"
            raise SetupError(f"{path}:{number}: {got} cells where the header has "
                             f"{len(header)}; a row has one cell per column")  # fmt: skip
        bound, total = row.get("bound"), row.get("per_step_s", row.get("total_s"))
        try:
            seconds = float(total) if total is not None else math.nan
        except ValueError:
            seconds = math.nan
        if bound is None or not math.isfinite(seconds) or seconds < 0:
            raise SetupError(f"{path}:{number}: a configs.csv row needs a bound and a per_step_s "
                             f"of seconds >= 0, got {bound!r} and {total!r}")  # fmt: skip
        out[bound] = out.get(bound, 0.0) + seconds
    return out


def _par(s: dict[str, Any]) -> str:
    p = s.get("parallelism") or {}
    return (
        " ".join(f"{k.upper()}{p[k]}" for k in ("tp", "pp", "dp", "ep") if p.get(k, 1) > 1) or "-"
    )


def _bound_time(bound: str):
    return lambda s, t: t[bound]


def _money(x: float | None) -> str:
    return fmt_money(x)


def _watts(x: float | None) -> str:
    return fmt_si(x, "W") if x else "not modelled"


def _joules(x: float | None) -> str:
    return fmt_si(x, "J") if x else "not modelled"


def measures(summary: dict[str, Any]) -> str:
    """What a side's latency is: a training step, a whole request, one decode step, a
    prefill, a request stream's median, or one run of the workload."""
    if summary.get("stream"):
        return "request stream (p50)"
    if summary.get("workload_kind") == "training" or summary.get("iteration_time_s"):
        return "training step"
    ttft, tpot = summary.get("ttft_s"), summary.get("tpot_s")
    if ttft is not None and tpot is not None:
        return "request"
    if tpot is not None:
        return "decode step"
    if ttft is not None:
        return "prefill"
    return str(summary.get("workload_kind") or "step")


def calibration(summary: dict[str, Any]) -> str:
    """A side's chip calibration: "calibrated", or "uncalibrated" (every kernel at 100% of
    peak: its times are a lower bound, not a forecast), or "-" when the summary has none."""
    cal = summary.get("chip_calibration")
    return str(cal.get("status", "-")) if isinstance(cal, dict) else "-"


#: rows whose ratio only means something between like quantities (the same `measures`)
LIKE_ONLY = {"latency", "TTFT", "TPOT", "tokens/s", "energy"}

# (label, value getter, formatter, lower is better)
ROWS: tuple[tuple[str, Any, Any, bool | None], ...] = (
    ("status", lambda s, t: s.get("status"), str, None),
    ("latency is", lambda s, t: measures(s), str, None),
    ("chip calibration", lambda s, t: calibration(s), str, None),
    ("chip", lambda s, t: s.get("chip"), str, None),
    ("chips", lambda s, t: s.get("num_chips"), str, None),
    ("parallelism", lambda s, t: _par(s), str, None),
    ("latency", lambda s, t: s.get("latency_s"), fmt_time, True),
    ("TTFT", lambda s, t: s.get("ttft_s"), fmt_time, True),
    ("TPOT", lambda s, t: s.get("tpot_s"), fmt_time, True),
    ("tokens/s", lambda s, t: s.get("tokens_per_s"), fmt_si, False),
    ("FLOPS utilization", lambda s, t: s.get("flops_utilization"), fmt_pct, False),
    ("system cost", lambda s, t: s.get("system_cost"), _money, True),
    ("system power", lambda s, t: s.get("system_power_W"), _watts, True),
    ("energy", lambda s, t: s.get("energy_J"), _joules, True),  # per what `latency is`
    ("memory per chip", lambda s, t: s.get("memory_per_chip_bytes"), fmt_bytes, True),
    *((f"{b}-bound time", _bound_time(b), fmt_time, True) for b in BOUNDS),
)


def _ratio(value: Any, ref: Any) -> str:
    ok = isinstance(value, (int, float)) and isinstance(ref, (int, float))
    if not ok or not ref or not value:  # "0 s (x0)" says nothing a bare "0 s" does not
        return ""
    return f" ({fmt_ratio(value / ref)})"


def _energy_label(kinds: list[str]) -> str:
    """ "energy per step", "energy per request" where every side's latency is one; otherwise
    per each side's own latency (the "latency is" row)."""
    said = {"request" if k == "request" else "step" for k in kinds}
    return f"energy per {said.pop()}" if len(said) == 1 else "energy (per each latency)"


def table(sides: list[Side]) -> list[list[str]]:
    """Rows of cells: label, then each side's value (with its ratio to the first; none
    between unlike quantities, a decode step beside a whole request say: caveats())."""
    rows = [["", *(s.name for s in sides)]]
    kinds = [measures(s.summary) for s in sides]
    for label, get, fmt, _ in ROWS:
        values = [get(s.summary, s.time_by_bound) for s in sides]
        says_why = fmt in (_money, _watts, _joules)  # "not priced", "not modelled"
        if all(v is None or v == 0 for v in values) and label != "status" and not says_why:
            continue
        cells = [_energy_label(kinds) if label == "energy" else label]
        for i, v in enumerate(values):
            text = "-" if v is None and not says_why else fmt(v)
            like = kinds[i] == kinds[0] or label not in LIKE_ONLY and "bound time" not in label
            cells.append(text + (_ratio(v, values[0]) if i and like else ""))
        rows.append(cells)
    return rows


def caveats(sides: list[Side]) -> list[str]:
    """What the table must not be read as: unlike quantities, uncalibrated chips."""
    ref = sides[0]
    out = []
    for s in sides[1:]:
        a, b = measures(s.summary), measures(ref.summary)
        if a != b:
            out.append(
                f"{s.name}'s latency is a {a}, {ref.name}'s a {b}: times and throughput are "
                "not comparable, no ratio is shown for them"
            )
    for s in sides:
        if calibration(s.summary) == "uncalibrated":
            out.append(
                f"{s.name} runs on an uncalibrated chip (every kernel at 100% of peak): its "
                "times are lower bounds, not forecasts, beside a calibrated chip's"
            )
    return out


def format_table(sides: list[Side]) -> str:
    rows = table(sides)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines += [f"note: {c}" for c in caveats(sides)]
    return "\n".join(lines)


def compare_csv(sides: list[Side]) -> str:
    import csv

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(table(sides))
    return buf.getvalue()


def compare_html(sides: list[Side]) -> str:
    """One self-contained page: the table and a stacked bar of where each side's time goes."""
    rows = table(sides)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:]
    )
    colors = {
        "compute": "#4c72b0",
        "memory": "#dd8452",
        "network": "#55a868",
        "overhead": "#8c8c8c",
    }
    longest = max((sum(s.time_by_bound.values()) for s in sides), default=0.0) or 1.0
    bars = []
    for s in sides:
        parts = "".join(
            f'<div title="{b} {fmt_time(t)}" style="width:{100 * t / longest:.3f}%;'
            f'background:{colors[b]}"></div>'
            for b, t in s.time_by_bound.items()
            if t > 0
        )
        total = fmt_time(sum(s.time_by_bound.values()))
        bars.append(
            f'<div class="row"><span class="name">{html.escape(s.name)}</span>'
            f'<div class="bar">{parts}</div><span>{total}</span></div>'
        )
    legend = " ".join(
        f'<span><i style="background:{c}"></i>{b}-bound</span>'
        for b, c in colors.items()
        if any(s.time_by_bound.get(b, 0) > 0 for s in sides)  # only what the bars show
    )
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>MapShard comparison</title><style>
body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse}}.tw{{max-width:100%;overflow-x:auto}}
td,th{{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left;overflow-wrap:break-word}}
.row{{display:flex;align-items:center;margin:6px 0}}
.name{{flex:0 0 18em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}}
.bar{{display:flex;flex:1 1 auto;max-width:48em;height:18px;margin:0 8px}}
.bar div{{height:100%}}.row>span:last-child{{flex:0 0 6em;white-space:nowrap}}
.legend i{{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}}
</style></head><body>
<h1>MapShard comparison</h1>
<p>Reference: {html.escape(sides[0].name)}; ratios are to it.</p>
{"".join(f'<p class="note"><b>Note:</b> {html.escape(c)}</p>' for c in caveats(sides))}
<div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>
<h2>Where the time goes (per step, configurations by binding resource)</h2>
{"".join(bars)}
<p class="legend">{legend}</p>
</body></html>
"""
