"""What a finished sweep leaves beside results.csv, each file written atomically:
- `pareto_*.svg`: the fronts (dominated points grey), front points labelled "#index axis
  values" without overlaps (mapshard.sweeps.front_svg);
- `best_<objective>/setup.txt` + `README.md`: the best point per objective as a ready-to-run
  scenario folder (relative paths of the base rewritten to stay valid);
- `sweep_report.html`: self-contained (inline SVG): counts, best points, fronts with a
  table of their points, failures; it reads on a 1400 px page (tables scroll inside it).
A System Cost is a price only when its chips are priced (metrics.cost_basis): per-$ figures,
cost fronts and the cheapest point use those costs, and every cost says what it is made of.
"""

from __future__ import annotations

import hashlib
import html
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mapshard.fmt import fmt_si, fmt_time
from mapshard.sweeps import metrics
from mapshard.sweeps.front_svg import render_front
from mapshard.sweeps.pareto import PLOTS, axis_label, cost_rows, front_rows
from mapshard.sweeps.progress import fmt_counts
from mapshard.sweeps.store import RESULTS_NAME, write_atomic
from schema import setup_pb2
from schema.errors import SetupError

if TYPE_CHECKING:
    from mapshard.sweeps.runner import SweepOutcome

REPORT_NAME = "sweep_report.html"


def best_rows(rows: list[dict[str, str]], objectives: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """The best solved row per objective (ties: the lowest point index)."""
    out: dict[str, dict[str, str]] = {}
    bases = cost_rows(rows)
    for obj in objectives:
        best: tuple[float, dict[str, str]] | None = None
        for r in rows:
            value = metrics.known(obj, r.get(obj))
            if r["status"] not in metrics.SOLVED or value is None:
                continue
            if obj == "system_cost" and r.get("cost_basis", "") not in bases:
                continue  # a unit-price-only cost is not cheaper than a priced system
            if best is None or metrics.better(obj, value, best[0]):
                best = (value, r)
        if best is not None:
            out[obj] = best[1]
    return out


def sweep_owned(name: str, is_dir: bool) -> bool:
    """Whether a sweep writes an entry of this name in its output folder."""
    if is_dir:
        return name.startswith("best_")
    # .png: what sweeps before the SVG-only plots wrote, still a sweep's own on a resume
    plots = {f"{p.name}.{ext}" for p in PLOTS for ext in ("svg", "png")}
    return name in {RESULTS_NAME, f".{RESULTS_NAME}.lock", REPORT_NAME, *plots} or (
        name.startswith(".") and name.endswith(".tmp")  # an atomic write cut short
    )


def check_sweep_folder(out: Path) -> None:
    """Before anything is solved: the output folder is new, empty, or a sweep's own (its
    results.csv beside only what a sweep writes), so no user file is overwritten."""
    if not out.is_dir():
        return
    entries = list(out.iterdir())
    if not entries:
        return
    foreign = sorted(
        e.name for e in entries if e.is_symlink() or not sweep_owned(e.name, e.is_dir())
    )
    if foreign or not (out / RESULTS_NAME).is_file():
        shown = ", ".join(foreign[:5]) or "no results.csv"
        raise SetupError(
            f"{out}: the output folder is not a sweep's ({shown}); the sweep will not write "
            "over it: give another --out, or the folder of the sweep to resume"
        )


#: `mapper(fn, items)`: [fn(item) for item in items], computed wherever it likes (a sweep's
#: idle workers, side by side)
Mapper = Callable[[Callable[[Any], Any], list[Any]], list[Any]]


def write_outputs(outcome: SweepOutcome, mapper: Mapper | None = None) -> list[Path]:
    """Write plots, best-point folders and the HTML report; returns the paths written.
    `mapper` draws the plots (each one's SVG); by default one by one here."""
    out, spec, rows = outcome.out, outcome.spec, outcome.rows
    written: list[Path] = []
    svgs: list[tuple[str, str]] = []
    drawn = (mapper or _one_by_one)(render_front, [(rows, p, spec.axis_names) for p in PLOTS])
    for plot, svg in zip(PLOTS, drawn):
        if svg is None:
            continue
        svgs.append((plot.title, svg + _front_table(rows, plot, spec.axis_names)))
        path = out / f"{plot.name}.svg"
        write_atomic(path, svg.encode("utf-8"))
        written.append(path)
    best = best_rows(rows, spec.objectives)
    texts = {p.point_id: p.text for p in outcome.points}
    for obj, row in best.items():
        written += _best_folder(outcome, obj, row, texts[row["point_id"]])
    report = out / REPORT_NAME
    write_atomic(report, report_html(outcome, best, svgs).encode("utf-8"))
    written.append(report)
    return written


def _one_by_one(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    return [fn(item) for item in items]


def _describe(row: dict[str, str], axis_names: tuple[str, ...]) -> str:
    return ", ".join(f"{a}={row.get(a, '')}" for a in axis_names) or "the base setup"


BEST_MARKER = ".mapshard-best"


def _best_folder(outcome: SweepOutcome, obj: str, row: dict[str, str], text: str) -> list[Path]:
    """best_<obj>/setup.txt and README.md, each replaced only while it is what a sweep wrote
    (the folder's marker holds their hashes): a user's edit is kept and said in
    `outcome.kept`, and anything else in the folder (a `mapshard run` result) is left."""
    from google.protobuf import text_format

    spec = outcome.spec
    folder = outcome.out / f"best_{obj}"
    setup = setup_pb2.Setup()
    text_format.Parse(text, setup)
    _relocate(setup, spec.base_path.parent, folder)
    what = _describe(row, spec.axis_names)
    header = (
        f"# Best {obj} ({row[obj]}) of sweep {spec.path.name}: point {row['index']} "
        f"({what}), status {row['status']}.\n"
    )
    files = {
        "setup.txt": (header + text_format.MessageToString(setup)).encode("utf-8"),
        "README.md": (
            f"Best `{obj}` = {row[obj]} in sweep `{spec.path}`: point {row['index']} ({what}); "
            f"run it with `mapshard run {folder}`.\n"
        ).encode(),
    }
    edited = _edited_best_files(folder, files)
    if edited:
        outcome.kept.append(
            f"{folder}: {', '.join(edited)} changed since the sweep wrote it; kept (the best "
            f"{obj} is point {row['index']}: {what}); remove the folder to have it rewritten"
        )
        return []
    for name, data in files.items():
        write_atomic(folder / name, data)
    marker = "".join(f"{n} {hashlib.sha256(d).hexdigest()}\n" for n, d in sorted(files.items()))
    write_atomic(folder / BEST_MARKER, marker.encode("utf-8"))
    return [folder / name for name in files]


def _edited_best_files(folder: Path, files: dict[str, bytes]) -> list[str]:
    """The names of `files` present in `folder` that differ from what the marker says a
    sweep wrote there (all present ones when there is no readable marker)."""
    present = [n for n in sorted(files) if (folder / n).exists() or (folder / n).is_symlink()]
    if not present:
        return []
    marker = folder / BEST_MARKER
    written: dict[str, str] = {}
    if marker.is_file() and not marker.is_symlink():
        for line in marker.read_text(encoding="utf-8", errors="replace").splitlines():
            name, _, digest = line.partition(" ")
            written[name] = digest
    edited = []
    for name in present:
        path = folder / name
        if path.is_symlink() or not path.is_file():
            edited.append(name)
        elif hashlib.sha256(path.read_bytes()).hexdigest() != written.get(name):
            edited.append(name)
    return edited


def _relocate(setup: setup_pb2.Setup, base_dir: Path, folder: Path) -> None:
    """Relative paths in the setup point at files beside the base setup: make them relative
    to the new folder (absolute when no relative path exists)."""

    def moved(value: str) -> str:
        if not value or os.path.isabs(value) or not (base_dir / value).exists():
            return value
        target = (base_dir / value).resolve()
        try:
            return os.path.relpath(target, folder.resolve())
        except ValueError:
            return str(target)

    if setup.system.chip_table:
        setup.system.chip_table = moved(setup.system.chip_table)
    for kind in ("llm_training", "llm_inference"):
        if setup.workload.WhichOneof("kind") == kind:
            model = getattr(setup.workload, kind).model
            if model.WhichOneof("source") == "hf_model":
                model.hf_model = moved(model.hf_model)


_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;
padding:0 1em;color:#222}.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ddd;
padding:3px 8px;text-align:right;vertical-align:top}th{background:#f4f4f4}
.t{text-align:left;overflow-wrap:break-word}small{color:#666}figure{margin:1em 0}
svg{max-width:100%;height:auto}code{background:#f4f4f4;padding:0 3px;overflow-wrap:anywhere}
summary{cursor:pointer;color:#444}"""


def _e(x: object) -> str:
    return html.escape(str(x))


def _table(header: list[str], body: list[list[str]], text_cols: int = 1) -> str:
    """A table of escaped cells in a box that scrolls sideways rather than widen the page;
    the first `text_cols` columns are text (left-aligned, wrapped)."""
    return _raw_table(header, [[_e(c) for c in r] for r in body], tuple(range(text_cols)))


def _raw_table(header: list[str], body: list[list[str]], left: tuple[int, ...] = (0,)) -> str:
    """A table of cells already HTML (escaped by the caller); columns `left` are text."""
    head = "".join(
        f"<th{' class=t' if i in left else ''}>{_e(h)}</th>" for i, h in enumerate(header)
    )
    rows = "".join(
        "<tr>"
        + "".join(f"<td{' class=t' if i in left else ''}>{c}</td>" for i, c in enumerate(r))
        + "</tr>"
        for r in body
    )
    return f"<div class=scroll><table><tr>{head}</tr>{rows}</table></div>"


def _num(text: str) -> str:
    x = metrics.number(text)
    return "" if x is None else f"{x:.4g}"


def _priced(row: dict[str, str]) -> bool:
    """Whether the row's System Cost is a price (its chips priced); rows written before
    cost_basis existed count when their cost is positive."""
    basis = row.get("cost_basis", "")
    cost = metrics.number(row.get("system_cost", ""))
    return bool(cost) and (basis in metrics.PRICED or basis == "")


def _cell(row: dict[str, str], metric: str) -> str:
    """A best-point cell: a system without a price reads "not priced" (cost and tokens/s
    per $), one without power "not modelled", never 0."""
    solved = row.get("status") in metrics.SOLVED
    cost = metrics.number(row.get("system_cost", ""))
    if metric in ("system_cost", "tokens_per_s_per_usd") and not cost:
        return "not priced" if solved else ""
    if metric == "tokens_per_s_per_usd" and not _priced(row):
        return "not priced" if solved else ""
    value = metrics.number(row.get(metric, ""))
    if metric == "system_power_W" and not value:
        return "not modelled" if solved else ""
    if value is None:
        return ""
    units = {"latency_s": fmt_time(value), "system_cost": f"${fmt_si(value)}",
             "system_power_W": fmt_si(value, "W")}  # fmt: skip
    return units.get(metric, _num(row.get(metric, "")))


def _cost_cell(row: dict[str, str]) -> str:
    """System Cost and, beneath it, what it is made of (HTML)."""
    text = _e(_cell(row, "system_cost"))
    basis = row.get("cost_basis", "")
    if metrics.number(row.get("system_cost", "")) and basis:
        text += f"<br><small>{_e(basis)}</small>"
    return text


def _front_table(rows: list[dict[str, str]], plot, axis_names: tuple[str, ...]) -> str:  # noqa: ANN001
    """The plot's front points by label number: which point (axis values) each is."""
    front = front_rows(rows, plot, axis_names)
    body = [
        [f"#{r['index']}", _describe(r, axis_names), _cell(r, plot.x), _cell(r, plot.y)]
        for r in front
    ]
    header = ["point", "axis values", axis_label(rows, plot.x), axis_label(rows, plot.y)]
    return (
        f"<details open><summary>{len(front)} points on the front</summary>"
        + _table(header, body, text_cols=2)
        + "</details>"
    )


def report_html(
    outcome: SweepOutcome, best: dict[str, dict[str, str]], svgs: list[tuple[str, str]]
) -> str:
    spec, rows = outcome.spec, outcome.rows
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Sweep "
        f"{_e(spec.path.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Sweep <code>{_e(spec.path)}</code></h1>",
        f"<p>{len(outcome.points)} points ({_e(spec.combine)} of "
        f"{len(spec.axes)} axes: {_e(', '.join(spec.axis_names) or 'none')}); "
        f"{_e(fmt_counts(outcome.counts) or 'no results')}. This run: {outcome.ran} points "
        "(its wall time is in the terminal, not here: the report is the same at any load). "
        "Full table: <code>results.csv</code>.</p>",
    ]
    counts = [[s, str(outcome.counts.get(s, 0))] for s in metrics.STATUSES]
    parts.append("<h2>Points by status</h2>" + _table(["status", "points"], counts))
    parts.append("<h2>Best points</h2>" + _best_table(best, spec.axis_names))
    parts.append(f"<p><small>{_e(COST_NOTE)}</small></p>")
    if svgs:
        parts.append(
            "<h2>Pareto fronts</h2><p>Faded or grey: dominated points. Latency plots over a "
            "batch axis draw one front per batch size. Labels: <code>#point</code> and its "
            "axis values; the table under each plot lists every front point.</p>"
        )
        parts += [f"<figure aria-label='{_e(t)}'>{svg}</figure>" for t, svg in svgs]
    reasons = Counter(
        r["reason"][:200] for r in rows if r["status"] in ("infeasible", "failed") and r["reason"]
    )
    if reasons:
        body = [[reason, str(n)] for reason, n in reasons.most_common(15)]
        parts.append(
            "<h2>Most common reasons (infeasible / failed)</h2>"
            + _table(["reason", "points"], body)
        )
    parts.append("</body></html>\n")
    return "\n".join(parts)


COST_NOTE = (
    "System Cost: the chips' price (the hardware library's cited list price, or the setup's "
    "cost.accelerator_price) plus the setup's DRAM, link and switch unit prices ($ per GB/s). "
    "A cost of unit prices only leaves the chips out: it is no purchase price, so tokens/s "
    "per $ is not priced for it."
)


def _best_table(best: dict[str, dict[str, str]], axis_names: tuple[str, ...]) -> str:
    """One row per objective: its best point, the scenario folder written for it (linked),
    and the point's headline numbers."""
    if not best:
        return "<p>No point was solved.</p>"
    body = []
    for obj, r in best.items():
        point = f"#{r['index']}" + ("" if r["status"] == "optimal" else f" ({r['status']})")
        body.append(
            [
                f"<a href='best_{_e(obj)}/setup.txt'>{_e(obj)}</a>",
                _e(_cell(r, obj)),
                _e(point),
                _e(_describe(r, axis_names)),
                _e(_cell(r, "latency_s")),
                _cost_cell(r),
                _e(_cell(r, "tokens_per_s_per_usd")),
                _e(_cell(r, "system_power_W")),
                _e(f"{r.get('tp', '') or '-'} x {r.get('pp', '') or '-'}"),
            ]
        )
    header = ["objective (folder)", "best", "point", "axis values", "latency", "System Cost",
              "tokens/s per $", "System Power", "TP x PP"]  # fmt: skip
    return _raw_table(header, body, left=(0, 2, 3))
