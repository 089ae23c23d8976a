"""Reading measured GPU profiles: Nsight Compute CSV and Chrome/Perfetto trace JSON.

Nsight Compute (`ncu --csv`), both layouts:
- raw/wide (`--page raw`): one row per kernel, one column per metric, and a units row right
  after the header ("nsecond", "byte", "Kbyte", "sector", "%");
- details/long (default page): one row per (kernel, metric) with "Metric Name",
  "Metric Unit" and "Metric Value".
Numbers may be quoted with thousands separators ("1,234.5"). Used metrics:
`gpu__time_duration.sum` (time), `dram__bytes_read.sum` + `dram__bytes_write.sum` (or
32-byte `dram__sectors_read.sum` + `dram__sectors_write.sum`), and tensor-pipe utilisation
(`sm__pipe_tensor_cycles_active...pct...` or `sm__inst_executed_pipe_tensor...pct...`).

Chrome/Perfetto trace JSON as the PyTorch profiler writes it: `traceEvents` with ph "X"
and cat "kernel" (or "gpu_op"), `dur` in microseconds; no byte counts.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from schema.errors import SetupError

TIME_METRIC = "gpu__time_duration.sum"
READ_BYTES = ("dram__bytes_read.sum",)
WRITE_BYTES = ("dram__bytes_write.sum",)
READ_SECTORS = ("dram__sectors_read.sum",)
WRITE_SECTORS = ("dram__sectors_write.sum",)
TENSOR_PREFIXES = ("sm__pipe_tensor_cycles_active", "sm__inst_executed_pipe_tensor")
SECTOR_BYTES = 32
_TIME_UNITS = {
    "ns": 1e-9,
    "nsecond": 1e-9,
    "us": 1e-6,
    "usecond": 1e-6,
    "msecond": 1e-3,
    "ms": 1e-3,
    "second": 1.0,
    "s": 1.0,
    "cycle": 0.0,
}
_BYTE_UNITS = {
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "tbyte": 1e12,
    "kibyte": 2.0**10,
    "mibyte": 2.0**20,
    "gibyte": 2.0**30,
    "b": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "sector": SECTOR_BYTES,
}
NAME_COLUMNS = ("Kernel Name", "Demangled Name", "Function Name", "Name")


@dataclass(frozen=True)
class MeasuredKernel:
    """One kernel launch as measured, in launch order."""

    index: int
    name: str
    time_s: float
    dram_bytes: float | None = None  # read + write; None when the profile has no counters
    tensor_pct: float | None = None  # tensor-pipe utilisation, percent


def parse_number(text: str) -> float | None:
    """ncu cells: '1,234.5', '"12"', 'n/a' (None)."""
    t = text.strip().strip('"').replace(",", "").replace("\u202f", "")
    if not t or t.lower() in ("n/a", "nan", "-"):
        return None
    try:
        return float(t)
    except ValueError:
        return None


def _time_scale(unit: str) -> float:
    u = unit.strip().lower()
    if u not in _TIME_UNITS or _TIME_UNITS[u] == 0:
        raise SetupError(
            f"{TIME_METRIC} has unit {unit!r}; expected ns/us/ms/s "
            "(nsecond, usecond, msecond, second)"
        )
    return _TIME_UNITS[u]


def _byte_scale(unit: str, metric: str) -> float:
    u = unit.strip().lower()
    if "sectors" in metric and u in ("", "sector"):
        return SECTOR_BYTES
    if u == "" and "bytes" in metric:
        return 1.0
    if u not in _BYTE_UNITS:
        raise SetupError(f"{metric} has unit {unit!r}; expected byte/Kbyte/Mbyte/Gbyte/sector")
    return _BYTE_UNITS[u]


def _name_column(header: list[str], where: str) -> str:
    for col in NAME_COLUMNS:
        if col in header:
            return col
    raise SetupError(f"{where}: no kernel name column (one of {', '.join(NAME_COLUMNS)})")


def _kernel_from_metrics(
    index: int, name: str, values: dict[str, tuple[float | None, str]], where: str
) -> MeasuredKernel:
    if TIME_METRIC not in values or values[TIME_METRIC][0] is None:
        raise SetupError(f"{where}: kernel {index} ({name[:60]}) has no {TIME_METRIC}")
    t, unit = values[TIME_METRIC]
    time_s = t * _time_scale(unit)
    if not (math.isfinite(time_s) and 0 <= time_s <= MAX_DUR_US * 1e-6):
        raise SetupError(
            f"{where}: kernel {index} ({name[:60]}): {TIME_METRIC} {t:g} {unit} is not a kernel "
            f"time; give a duration from 0 to {MAX_DUR_US * 1e-6:g} s"
        )
    dram = None
    for reads, writes in ((READ_BYTES, WRITE_BYTES), (READ_SECTORS, WRITE_SECTORS)):
        parts = []
        for group in (reads, writes):
            for metric in group:
                if metric in values and values[metric][0] is not None:
                    v, u = values[metric]
                    parts.append(v * _byte_scale(u, metric))
                    break
        if len(parts) == 2:
            dram = sum(parts)
            break
    tensor = None
    for metric, (v, _) in sorted(values.items()):
        if metric.startswith(TENSOR_PREFIXES) and "pct" in metric and v is not None:
            tensor = v
            break
    return MeasuredKernel(index, name, time_s, dram, tensor)


def read_ncu_csv(text: str, where: str = "profile") -> list[MeasuredKernel]:
    """Kernels of an `ncu --csv` export (raw/wide or details/long layout)."""
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]  # ncu log lines
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        raise SetupError(f"{where}: empty Nsight Compute CSV")
    header = rows[0]
    name_col = _name_column(header, where)
    col = {h: i for i, h in enumerate(header)}
    if "Metric Name" in col and "Metric Value" in col:
        return _read_long(rows[1:], col, name_col, where)
    body = rows[1:]
    units: list[str] = [""] * len(header)
    if body and body[0] and not body[0][col.get("ID", 0)].strip():
        units = body[0] + [""] * (len(header) - len(body[0]))
        body = body[1:]
    if TIME_METRIC not in col:
        raise SetupError(
            f"{where}: no {TIME_METRIC} column; profile with "
            f"`ncu --csv --metrics {TIME_METRIC},dram__bytes_read.sum,"
            "dram__bytes_write.sum`"
        )
    metric_cols = [h for h in header if "__" in h]
    out = []
    for row in body:
        if len(row) < len(header):
            continue
        values = {m: (parse_number(row[col[m]]), units[col[m]]) for m in metric_cols}
        out.append(_kernel_from_metrics(len(out), row[col[name_col]], values, where))
    return out


def _read_long(
    rows: list[list[str]], col: dict[str, int], name_col: str, where: str
) -> list[MeasuredKernel]:
    """Details layout: group the metric rows by kernel ID, in first-seen order."""
    order: list[str] = []
    names: dict[str, str] = {}
    values: dict[str, dict[str, tuple[float | None, str]]] = {}
    id_col = col.get("ID")
    unit_col = col.get("Metric Unit")
    for row in rows:
        if len(row) <= max(col["Metric Name"], col["Metric Value"]):
            continue
        key = row[id_col] if id_col is not None else str(len(order))
        if key not in values:
            order.append(key)
            names[key] = row[col[name_col]]
            values[key] = {}
        unit = row[unit_col] if unit_col is not None else ""
        values[key][row[col["Metric Name"]]] = (parse_number(row[col["Metric Value"]]), unit)
    return [_kernel_from_metrics(i, names[k], values[k], where) for i, k in enumerate(order)]


GPU_CATEGORIES = ("kernel", "gpu_op")
MAX_DUR_US = 3.6e9  # an hour: no one kernel runs longer (NaN, negative and 1e300 were read)


def read_trace_json(text: str, where: str = "profile") -> list[MeasuredKernel]:
    """GPU kernels of a Chrome/Perfetto trace (PyTorch profiler export), by start time."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SetupError(f"{where}: not valid trace JSON ({exc})") from exc
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise SetupError(f"{where}: traceEvents is not a list")
    kernels = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        if str(ev.get("cat", "")).lower() not in GPU_CATEGORIES:
            continue
        dur = ev.get("dur")
        if not isinstance(dur, (int, float)):
            continue
        if not (math.isfinite(dur) and 0 <= dur <= MAX_DUR_US):  # a time, in microseconds
            raise SetupError(
                f"{where}: traceEvents[{i}] ({str(ev.get('name', ''))[:60]!r}): dur {dur!r} "
                f"is not a kernel time; give microseconds from 0 to {MAX_DUR_US:g}"
            )
        ts = ev.get("ts", 0.0)
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise SetupError(
                f"{where}: traceEvents[{i}] ({str(ev.get('name', ''))[:60]!r}): ts {ts!r} is "
                "not a start time; give a finite number of microseconds"
            )
        kernels.append((float(ts), str(ev.get("name", "")), float(dur) * 1e-6))
    kernels.sort(key=lambda k: k[0])
    return [MeasuredKernel(i, name, dur) for i, (_, name, dur) in enumerate(kernels)]


def read_profile(path: str | Path) -> list[MeasuredKernel]:
    """A profile file by its content: JSON (trace) or CSV (Nsight Compute)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise SetupError(f"{path}: cannot read the profile ({exc.strerror})") from exc
    stripped = text.lstrip()
    kernels = (
        read_trace_json(text, str(path))
        if stripped.startswith(("{", "["))
        else read_ncu_csv(text, str(path))
    )
    if not kernels:
        raise SetupError(
            f"{path}: no GPU kernels found (ncu rows, or trace events with ph 'X' and cat 'kernel')"
        )
    return kernels


# ---------------------------------------------------------------------------------------
# Kernel classes by name
# ---------------------------------------------------------------------------------------

# Checked in order; the first match wins. Attention comes before GEMM because FlashAttention
# kernels carry "cutlass" in their template arguments; collectives before embedding because
# "allgather" contains "gather"; KV-cache writes before attention ("..._cache_flash_kernel").
NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    ("collective", r"nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv"),
    ("elementwise", r"reshape_and_cache|concat_and_cache|cache_kernel|kv_?cache"),  # KV write
    ("attention", r"flash|fmha|attention|attn|sdpa|mha_|xformers"),
    ("gemm", r"gemm|xmma|cutlass|wgmma|cublas|matmul|s16816|s1688|hmma|sm\d\d_|splitk"),
    ("norm", r"layer_?norm|rms_?norm|norm_kernel|welford|layernorm"),
    ("softmax", r"softmax|cross_?entropy|log_?softmax|nll_loss"),
    ("embedding", r"embedding|index_select|indexselect|gather"),
    ("memory", r"memcpy|memset"),
    (
        "elementwise",
        r"elementwise|vectorized|gelu|silu|swiglu|act_and_mul|activation|add|mul|"
        r"dropout|copy|cat_|fill|bias|rotary|rope|reduce_kernel|cast|cache",
    ),
)
PLAN_CLASSES = {
    "GEMM": "gemm",
    "BATCHED_GEMM": "gemm",
    "ROUTER": "gemm",
    "ATTENTION": "attention",
    "NORM": "norm",
    "SOFTMAX": "softmax",
    "EMBEDDING": "embedding",
    "ELEMENTWISE": "elementwise",
    "KV_READ": "elementwise",
    "KV_WRITE": "elementwise",
    "COLLECTIVE": "collective",
}


def kernel_class(name: str) -> str:
    """The class of a measured kernel from its (mangled or demangled) name."""
    low = name.lower()
    for cls, pattern in NAME_PATTERNS:
        if re.search(pattern, low):
            return cls
    return "other"
