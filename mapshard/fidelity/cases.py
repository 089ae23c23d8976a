"""Reading validation cases in the structured format (tests/data/validation/
VALIDATION_SCHEMA.md): 47 columns (and the optional provenance ones), one measured point
per row; every extra_params key is one the schema knows (row_keys), else the file is
refused with one line per unknown key naming the valid ones.

Any CSV with the schema's header works, not only the dev file. Cells are kept as text and
read through typed accessors, because an empty cell means "does not apply or not known"
and must stay distinguishable from zero.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mapshard.fidelity.row_keys import key_kind, unknown_key_problem
from schema.errors import SetupError

# The columns a tool needs; the schema has more (notes, source, verification, ...).
REQUIRED = (
    "id",
    "kind",
    "usable",
    "chip",
    "num_chips",
    "chips_per_node",
    "precision",
    "metric",
    "value",
    "flop_convention",
    "extra_params",
)
# The schema's whole-number columns and its 0/1 ones (an empty cell: not known, or does not
# apply; `usable` is always given): checked when the file is read, as `value` is, so a
# typo is one line naming its cell rather than a row predicted from a misread number.
WHOLE_COLUMNS = (
    "num_chips",
    "chips_per_node",
    "hidden",
    "layers",
    "heads",
    "kv_heads",
    "head_dim",
    "ffn_hidden",
    "vocab",
    "experts",
    "experts_per_token",
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "virtual_pipeline",
    "global_batch",
    "micro_batch",
    "seq_len",
    "batch",
    "input_len",
    "output_len",
    "kv_len",
    "m",
    "k",
    "n",
    "message_bytes",
)
FLAG_COLUMNS = ("usable", "sequence_parallel", "fsdp")
LARGEST_WHOLE = 2**53  # the largest whole number a float cell holds exactly
KINDS = (
    "gemm",
    "memory_copy",
    "collective",
    "attention_fwd",
    "training_step",
    "inference_prefill",
    "inference_static_batch",
    "inference_offline_throughput",
    "inference_server",
    "layer_prefill",
    "layer_decode",
    "moe_layer",
    "hpl",
)
# Summary groups and their --check bounds (mean |error| in percent).
GROUP_OF_KIND = {
    "gemm": "gemm",
    "memory_copy": "memory_copy",
    "collective": "collective",
    "training_step": "training",
    "inference_prefill": "inference",
    "inference_static_batch": "inference",
    "layer_prefill": "inference",
    "layer_decode": "inference",
    # one training layer's MoE block, forward or backward pass: its own group, no bound
    "moe_layer": "moe_layer",
    # in-flight batching over a request set: its own group (no bound yet), reported apart
    # from the static-batch inference rows
    "inference_offline_throughput": "serving",
}
# GEMM rows timed without the host's launch pacing: GPU kernel duration alone (CUPTI), of a
# compiler's own kernels (OpenXLA's matmul table: Triton or cuBLAS by its autotuner, small
# operands resident in L2), or library GEMMs back to back in a replayed CUDA graph
# (benchmarks/gpu_measure.py, predicted with execution.cuda_graph: no launch floor). Reported
# as their own group, no bound, and not fitted: the GEMM model (solver.cost.efficiency) is
# fitted to library GEMMs timed in a stream (cuBLASLt loops: launch-paced floor, DRAM
# operands). Fitting the graph-timed H200 rows as well was tried (issue 34): one plateau
# then serves their decode-sized and odd shapes against the 8192^3 cubes (0.856 of peak
# against the cubes' 0.705), and a stream-K schedule that fits the partial-wave shapes
# (720 x 2528 x 3280: 68% of peak) predicts shapes cuBLAS runs without it 23-33% too fast
# (1024 x 1024 x 2145, 802816 x 768 x 192); measured tables, not one more plateau, are what
# those shapes need.
KERNEL_ONLY_TIMINGS = ("cupti_median_kernel_ns", "cuda_graph_replay")
GRAPH_TIMING = "cuda_graph_replay"
BOUNDS_PCT = {
    "gemm": 5.0,
    "memory_copy": 5.0,
    "collective": 5.0,
    "training": 8.0,
    "inference": 15.0,
}


class Unmodelable(Exception):
    """The case cannot be modelled; the message is the reason written to validation.csv."""


@dataclass(frozen=True)
class Case:
    """One row: its cells as text, plus parsed `extra_params`."""

    cells: dict[str, str]
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.cells.get("id", "")

    @property
    def kind(self) -> str:
        return self.cells.get("kind", "")

    @property
    def metric(self) -> str:
        return self.cells.get("metric", "")

    @property
    def usable(self) -> bool:
        return self.text("usable") == "1"

    @property
    def group(self) -> str:
        if self.kernel_only:
            return "gemm_kernel_only"
        return GROUP_OF_KIND.get(self.kind, self.kind)

    @property
    def kernel_only(self) -> bool:
        """A GEMM timed as kernel duration alone (KERNEL_ONLY_TIMINGS)."""
        return self.kind == "gemm" and self.extra.get("timing", "") in KERNEL_ONLY_TIMINGS

    def text(self, name: str) -> str:
        return (self.cells.get(name) or "").strip()

    def has(self, name: str) -> bool:
        return self.text(name) != ""

    def int(self, name: str, default: int = 0) -> int:
        """Integer cell; `default` when empty. Raises ValueError on a malformed cell, a
        fraction included (4096.5 is no GEMM size: it was read as 4096)."""
        raw = self.text(name)
        if not raw:
            return default
        value = float(raw)
        if not value.is_integer():
            raise ValueError(f"{name} {raw} is not a whole number")
        return int(value)

    def float(self, name: str, default: float = 0.0) -> float:
        raw = self.text(name)
        return float(raw) if raw else default

    def extra_float(self, key: str, default: float = 0.0) -> float:
        """A number >= 0 of extra_params; `default` when absent or empty, Unmodelable
        naming the key when it is not a finite number >= 0 (never a silent default)."""
        raw = self.extra.get(key, "")
        if not raw:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value >= 0):
            raise Unmodelable(f"{key}={raw} is not a finite number >= 0")
        return value

    def int_extra(self, key: str, default: int = 0) -> int:
        """A whole-number extra_params value; `default` when absent, Unmodelable when not a
        whole number >= 0 (a bare key included)."""
        if key not in self.extra:
            return default
        raw = self.extra[key]
        if not (raw.isascii() and raw.isdigit()):
            raise Unmodelable(f"{key}={raw} is not a whole number >= 0")
        return int(raw)

    @property
    def measured(self) -> float | None:
        try:
            return float(self.text("value"))
        except ValueError:
            return None


def parse_extra(text: str) -> dict[str, str]:
    """`key=value;key=value` -> dict (a bare key maps to "")."""
    out: dict[str, str] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip()
    return out


def read_cases(path: str | Path) -> list[Case]:
    """Every row of a cases CSV; SetupError naming the file when it is not in the format."""
    path = Path(path)
    try:
        # utf-8-sig: a CSV saved by a spreadsheet may start with a byte-order mark
        with open(path, newline="", encoding="utf-8-sig") as f:
            header, rows = _records(f)
    except OSError as exc:
        raise SetupError(f"{path}: cannot read the cases file ({exc.strerror})") from exc
    except (csv.Error, UnicodeDecodeError) as exc:
        raise SetupError(f"{path}: not a CSV file ({exc})") from exc
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise SetupError(
            f"{path}: missing column(s) {', '.join(missing)}; the file must use the "
            "structured validation format (tests/data/validation/VALIDATION_SCHEMA.md)"
        )
    cases = []
    seen: set[str] = set()
    problems = []
    for line, row in rows:
        cells = {k: (v or "") for k, v in row.items() if k is not None}
        case = Case(cells, parse_extra(cells.get("extra_params", "")))
        problems.extend(
            f"{path}: line {line}: {case.id or 'the row'}: {p}" for p in _cell_problems(case)
        )
        if not case.id:
            problems.append(f"{path}: line {line}: id is empty")
        elif case.id in seen:
            problems.append(f"{path}: line {line}: id {case.id} appears twice")
        seen.add(case.id)
        problems.extend(
            f"{path}: line {line}: {case.id or 'the row'}: {unknown_key_problem(key)}"
            for key in case.extra
            if not key_kind(key)
        )
        value = cells.get("value", "").strip()
        if value and not _positive_number(value):
            problems.append(
                f"{path}: line {line}: value {value[:20]!r} of {case.id or 'the row'} is not a "
                "measurement; give a finite number > 0 in the metric's unit (or leave it empty)"
            )
        cases.append(case)
    if problems:
        raise SetupError(problems)
    return cases


def _records(lines: Iterable[str]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and each record with the file line it starts on (a quoted cell may span
    lines, and blank lines are skipped: a record's count is not its line)."""
    reader = csv.reader(lines)
    header = next(reader, [])
    records = []
    end = reader.line_num
    for cells in reader:
        start, end = end + 1, reader.line_num
        if any(c.strip() for c in cells):
            records.append((start, dict(zip(header, cells))))
    return header, records


def _cell_problems(case: Case) -> list[str]:
    """The typed columns whose cell is not of their type (WHOLE_COLUMNS, FLAG_COLUMNS)."""
    out = []
    for name in WHOLE_COLUMNS:
        raw = case.text(name)
        if raw and not _whole(raw):
            out.append(
                f"{name} {raw[:20]!r} is not a whole number from 0 to {LARGEST_WHOLE} "
                "(or leave it empty)"
            )
    for name in FLAG_COLUMNS:
        raw = case.text(name)
        if raw not in ("0", "1") and (raw or name == "usable"):
            empty = "" if name == "usable" else " (or leave it empty)"
            out.append(f"{name} {raw[:20]!r} is not 0 or 1{empty}")
    return out


def _whole(text: str) -> bool:
    try:
        number = float(text)
    except ValueError:
        return False
    return math.isfinite(number) and number.is_integer() and 0 <= number <= LARGEST_WHOLE


def _positive_number(text: str) -> bool:
    try:
        number = float(text)
    except ValueError:
        return False
    return math.isfinite(number) and number > 0
