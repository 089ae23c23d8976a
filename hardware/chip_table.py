"""A user's spreadsheet of chips (.csv, or the first sheet of .xlsx/.xlsm): one ChipSpec per
row, every problem reported as `FILE:ROW: ...`; referenced by `system.chip_table`."""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path

from google.protobuf import message as _message

from hardware.library import normalize
from schema import setup_pb2
from schema.errors import SetupError

# column -> (field path in ChipSpec, multiplier to the field's unit, integer field?)
TABLE_COLUMNS: dict[str, tuple[str, float, bool]] = {
    "bf16_tflops": ("accelerator.bf16_tflops", 1.0, False),
    "fp8_tflops": ("accelerator.fp8_tflops", 1.0, False),
    "fp16_tflops": ("accelerator.fp16_tflops", 1.0, False),
    "fp32_tflops": ("accelerator.fp32_tflops", 1.0, False),
    "int8_tflops": ("accelerator.int8_tflops", 1.0, False),
    "tf32_tflops": ("accelerator.tf32_tflops", 1.0, False),
    "fp64_tflops": ("accelerator.fp64_tflops", 1.0, False),
    "vector_tflops": ("accelerator.vector_tflops", 1.0, False),
    "memory_gb": ("memory.dram_cap", 1e9, False),
    "memory_bw_GBps": ("memory.dram_bw", 1.0, False),
    "sram_mb": ("accelerator.sram_cap", 1e6, False),
    "cores": ("accelerator.core", 1.0, True),
    "clock_ghz": ("accelerator.freq", 1.0, False),
    "scale_up_bw_GBps": ("scale_up_bw_GBps", 1.0, False),
    "scale_out_bw_GBps": ("scale_out_bw_GBps", 1.0, False),
    "scale_up_domain": ("scale_up_domain", 1.0, True),
    "tdp_w": ("tdp_W", 1.0, False),
    "price_usd": ("price_usd", 1.0, False),
}
_TEXT_COLUMNS = ("name", "vendor")


_COLUMN_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9_ ]{0,39}$")
MAX_TABLE_NUMBER = (
    1e9  # in the column's unit (TFLOP/s, GB, GB/s, MB, GHz, W, $): far above any chip
)
MAX_TABLE_INTEGER = 1 << 31  # cores, scale-up domain


def load_chip_table(path: str | Path) -> dict[str, setup_pb2.ChipSpec]:
    """Chips from a user's spreadsheet (.csv, or the first sheet of .xlsx/.xlsm), one per row.

    The first non-empty row holds the column names (any case); an empty cell is "not given".
    Columns:
      name (required), vendor                text
      bf16_tflops fp8_tflops fp16_tflops fp32_tflops int8_tflops
      tf32_tflops fp64_tflops vector_tflops  dense peak, 1e12 FLOP/s
      memory_gb                              DRAM/HBM capacity, GB = 1e9 bytes
      memory_bw_GBps                         DRAM/HBM bandwidth, GB/s = 1e9 bytes/s
      sram_mb                                on-chip SRAM, MB = 1e6 bytes
      cores                                  cores / SMs (integer)
      clock_ghz                              GHz
      scale_up_bw_GBps scale_out_bw_GBps     per chip, one direction, GB/s
      scale_up_domain                        chips per scale-up domain (integer)
      tdp_w                                  W
      price_usd                              $
    Returns {name as written: ChipSpec}. Every problem (unknown column, a value that is not
    a number >= 0, a missing or repeated name) is reported as `FILE:ROW: ...` in one
    SetupError.
    """
    path = Path(path)
    rows = _read_rows(path)
    problems: list[str] = []
    header_at = next((i for i, (_, cells) in enumerate(rows) if any(cells)), None)
    if header_at is None:
        raise SetupError(f"{path}: the table is empty; the first row names the columns")
    header_row, header = rows[header_at]
    known = {c.lower(): c for c in (*_TEXT_COLUMNS, *TABLE_COLUMNS)}
    columns: list[str | None] = []
    for cell in header:
        key = cell.strip().lower()
        if not key:
            columns.append(None)
        elif key in known and known[key] in columns:
            first = columns.index(known[key]) + 1
            problems.append(
                f"{path}:{header_row}: column {known[key]} appears twice (columns {first} and "
                f"{len(columns) + 1}); a chip table names each column once"
            )
            columns.append(None)
        elif key in known:
            columns.append(known[key])
        else:
            close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
            hint = f'; did you mean "{known[close[0]]}"?' if close else ""
            # echo a cell only when it looks like a column name: a table path that points
            # at some other file must not print that file's contents
            name_like = _COLUMN_LIKE.match(cell.strip())
            shown = f'"{cell.strip()}"' if name_like else f"{len(columns) + 1} (not a name)"
            problems.append(
                f"{path}:{header_row}: unknown column {shown}{hint} "
                f"valid columns: {', '.join(known.values())}"
            )
            columns.append(None)
    if "name" not in columns:
        problems.append(f"{path}:{header_row}: no `name` column; every row needs a chip name")
        raise SetupError(problems)
    chips: dict[str, setup_pb2.ChipSpec] = {}
    first_row: dict[str, int] = {}
    for row_no, cells in rows[header_at + 1 :]:
        if not any(cells):
            continue
        stray = [i + 1 for i, cell in enumerate(cells) if cell and i >= len(columns)]
        if stray:
            problems.append(
                f"{path}:{row_no}: {len(stray)} cell(s) beyond the header's {len(columns)} "
                f"columns (column {stray[0]}); every value needs a named column"
            )
            continue
        values = {c: cells[i] for i, c in enumerate(columns) if c and i < len(cells)}
        name = values.get("name", "")
        if not name:
            problems.append(f"{path}:{row_no}: column name is empty; every row needs a chip name")
            continue
        key = normalize(name)
        if key in first_row:
            problems.append(
                f'{path}:{row_no}: chip "{name}" is already defined on row {first_row[key]}'
            )
            continue
        first_row[key] = row_no
        chips[name] = _row_to_spec(path, row_no, name, values, problems)
    if problems:
        raise SetupError(problems)
    return chips


_NUMBER_LIKE = re.compile(r"[-+0-9.,_eE ]{1,40}|nan|inf|-inf", re.IGNORECASE)


def _row_to_spec(
    path: Path, row_no: int, name: str, values: dict[str, str], problems: list[str]
) -> setup_pb2.ChipSpec:
    spec = setup_pb2.ChipSpec(name=name, vendor=values.get("vendor", ""))
    spec.sources.append(f"{path.name} row {row_no}")
    for column, (field_path, scale, integer) in TABLE_COLUMNS.items():
        raw = values.get(column, "")
        if not raw:
            continue
        try:
            number = float(raw.replace(",", "").replace("_", ""))
        except ValueError:
            number = math.nan
        limit = MAX_TABLE_INTEGER if integer else MAX_TABLE_NUMBER
        if not (0 <= number <= limit) or (integer and number != int(number)):
            kind = "a whole number" if integer else "a number"
            # echo the cell only when it looks like a number: a cell holding a name or a
            # secret by mistake is not printed
            got = (
                repr(raw[:40]) if _NUMBER_LIKE.fullmatch(raw) else f"text of {len(raw)} characters"
            )
            problems.append(
                f"{path}:{row_no}: column {column} must be {kind} in 0..{limit:g}, got {got}"
            )
            continue
        target: _message.Message = spec
        *parents, leaf = field_path.split(".")
        for part in parents:
            target = getattr(target, part)
        setattr(target, leaf, int(number) if integer else number * scale)
    return spec


def _read_rows(path: Path) -> list[tuple[int, list[str]]]:
    """(1-based row number, cells as stripped text) of a .csv or the first .xlsx sheet."""
    if not path.is_file():
        raise SetupError(f"{path}: no such file; give a .csv or .xlsx chip table")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        import csv

        try:
            with path.open(newline="", encoding="utf-8-sig") as f:
                return [(i, [c.strip() for c in r]) for i, r in enumerate(csv.reader(f), 1)]
        except (UnicodeDecodeError, csv.Error) as exc:
            raise SetupError(f"{path}: cannot read as UTF-8 CSV ({exc})") from None
    if suffix in (".xlsx", ".xlsm"):
        import pandas as pd

        try:
            frame = pd.read_excel(path, sheet_name=0, header=None, dtype=object, engine="openpyxl")
        except Exception as exc:  # openpyxl raises many types for a broken file
            raise SetupError(f"{path}: cannot read as an .xlsx workbook ({exc})") from None
        rows = []
        for i, record in enumerate(frame.itertuples(index=False), 1):
            cells = ["" if _blank(v) else _cell_text(v) for v in record]
            rows.append((i, cells))
        return rows
    raise SetupError(f"{path}: unsupported chip table type {suffix!r}; use .csv or .xlsx")


def _blank(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _cell_text(value: object) -> str:
    if isinstance(value, float) and value == int(value):
        return str(int(value)) if abs(value) < 1e15 else repr(value)
    return str(value).strip()
