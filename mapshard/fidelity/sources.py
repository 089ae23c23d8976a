"""Each validation group twice: with the measured kernel tables (the default kernel source)
and with the physical model alone (`system.kernel_source: "none"`), so the two stay honest
against each other (DESIGN.md "Where kernel times come from").

Only rows whose chip the database covers and whose kind runs GEMMs are predicted again,
with the source(s) their default run did not take: the model alone where the default reads
every table (hardware.kernel_source.tables_by_default), the tables where it reads none, and
both where it reads some (16-bit GEMMs short of a wave, decode attention); every
other row has one outcome.
Written as `validation_sources.csv` (group, rows, mean |error| with tables, without) and
printed under the main summary.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from hardware import kernel_db, library
from hardware.kernel_source import TABLE_KINDS, library_default_kinds
from mapshard.fidelity.cases import Case
from mapshard.fidelity.report import Outcome, summarize

OFF = "none"
NO_GEMM_KINDS = ("collective", "memory_copy")  # no GEMM runs: one prediction serves both
SOURCES_COLUMNS = (
    "group",
    "predicted",
    "mean_abs_error_pct_tables",
    "mean_abs_error_pct_model",
    "tables_rows",
)


@dataclass(frozen=True)
class SourceLine:
    group: str
    predicted: int
    tables_pct: float | None
    model_pct: float | None
    tables_rows: int  # rows whose chip read a table


def covered(case: Case) -> bool:
    """Whether the database covers the row's chip and kind (and the row names no source)."""
    if case.kind in NO_GEMM_KINDS or case.extra.get("kernel_source", ""):
        return False
    spec = library.find_chip(case.text("chip"))
    return spec is not None and spec.name in kernel_db.SYSTEMS


def _default_kinds(case: Case) -> tuple[str, ...]:
    spec = library.find_chip(case.text("chip"))
    return library_default_kinds(spec) if spec is not None else ()


def with_source(case: Case, source: str) -> Case:
    """The row predicted with `source` (kernel_source: "none" or a framework)."""
    return replace(case, extra={**case.extra, "kernel_source": source})


def compare(
    cases: Sequence[Case],
    outcomes: Sequence[Outcome],
    validate: Callable[[Case], Outcome],
) -> list[SourceLine]:
    """Per group (and per kind / chip line of `summarize`): mean |error| with the tables and
    with the model alone; `outcomes` is the default run, the rows the database covers are
    run again with the other source."""
    tables, alone = [], []
    for c, o in zip(cases, outcomes):
        if not covered(c) or o.predicted is None:
            tables.append(o)
            alone.append(o)
            continue
        kinds = _default_kinds(c)
        tables.append(
            o if kinds == TABLE_KINDS else validate(with_source(c, kernel_db.DEFAULT_FRAMEWORK))
        )
        alone.append(o if not kinds else validate(with_source(c, OFF)))
    ids = {c.id for c in cases if covered(c)}
    with_tables = {s.group: s for s in summarize(tables)}
    out = []
    for s in summarize(alone):
        t = with_tables.get(s.group)
        rows = _rows(s.group, tables)
        n_tables = sum(1 for o in rows if o.id in ids and o.predicted is not None)
        tables_pct = t.mean_abs_pct if t else None
        out.append(SourceLine(s.group, s.predicted, tables_pct, s.mean_abs_pct, n_tables))
    return out


def _rows(label: str, outcomes: Sequence[Outcome]) -> list[Outcome]:
    """The outcomes behind one line of `summarize` (a group, "  kind" or "  group on chip")."""
    name = label.strip()
    if " on " in name:
        group, chip = name.split(" on ", 1)
        return [o for o in outcomes if o.group == group and o.chip == chip]
    if label.startswith(" "):
        return [o for o in outcomes if o.kind == name]
    return [o for o in outcomes if o.group == name]


def sources_csv(lines: Sequence[SourceLine]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(SOURCES_COLUMNS)
    for s in lines:
        w.writerow(
            [
                s.group.strip(),
                s.predicted,
                "" if s.tables_pct is None else f"{s.tables_pct:.3f}",
                "" if s.model_pct is None else f"{s.model_pct:.3f}",
                s.tables_rows,
            ]
        )
    return buf.getvalue()


def format_sources(lines: Sequence[SourceLine]) -> str:
    """Fixed-width table: mean |error| with the measured tables and with the model alone."""
    w = max([24, *(len(s.group) for s in lines)])
    head = f"{'group':<{w}} {'n':>3} {'tables%':>8} {'model%':>8} {'on tables':>9}"
    out = [head, "-" * len(head)]
    for s in lines:
        t = "-" if s.tables_pct is None else f"{s.tables_pct:.2f}"
        m = "-" if s.model_pct is None else f"{s.model_pct:.2f}"
        out.append(f"{s.group:<{w}} {s.predicted:>3} {t:>8} {m:>8} {s.tables_rows:>9}")
    return "\n".join(out)
