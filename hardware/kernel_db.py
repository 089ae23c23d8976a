"""NVIDIA's measured kernel database, read as data from the installed `aiconfigurator-core`
package (Apache-2.0; a declared dependency): nothing of it is copied into this repository and
none of its modelling code runs, only its tables are read.

Layout inside the package: `systems/data/<system>/<op>/<framework>/<version>/` holding
Parquet tables and a `collection_meta.yaml`, or a `reuse.yaml` naming the version whose table
it reuses. What the tables used here hold (checked against the collectors,
github ai-dynamo/aiconfigurator `collector/trtllm/collect_gemm.py`, `collect_computescale.py`):

- `gemm/.../gemm_perf.parquet`: columns framework, version, device, op_name, kernel_source,
  gemm_dtype (bfloat16, fp8, fp8_block, nvfp4, ...), m, n, k, latency (milliseconds per
  call). TensorRT-LLM's rows time one `Linear(k, n)` forward on a 16-bit [m, k] input under a
  CUDA graph, weights out of L2 (several copies when they would fit); the `fp8` rows are the
  per-tensor FP8 linear layer: the activation's static quantize
  (`static_quantize_e4m3_per_tensor`) plus the cuBLAS FP8 GEMM.
- `quantize/.../scale_matrix_perf.parquet`: that static quantize alone over (m, k), same
  columns less n and gemm_dtype (`quant_dtype` instead): what an FP8 row spends beyond its
  GEMM.

Loaded lazily (first use) and cached per table; every function answers None / () when the
package is missing, so a chip then keeps the physical model and says so.
"""

from __future__ import annotations

import functools
import importlib.resources
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hardware import table_cache

PACKAGE = "aiconfigurator_core"
FRAMEWORKS = ("trtllm", "vllm", "sglang")
DEFAULT_FRAMEWORK = "trtllm"  # NVIDIA's own engine: its GEMM rows are cuBLAS / CUTLASS
OFF = ("none", "roofline")  # kernel_source values that turn the tables off

# Library chip -> the database's system folder (the tables' `device` column in the comment).
# A100-SXM4-40GB is left out: the A100 rows were measured on the 80 GB part, whose HBM2e is
# 30% faster, and memory-bound GEMMs would carry that over.
SYSTEMS = {
    "A100-SXM4-80GB": "a100_sxm",  # "NVIDIA A100-SXM4-80GB"
    "H100-SXM5-80GB": "h100_sxm",  # "NVIDIA H100 80GB HBM3"
    "H200-SXM-141GB": "h200_sxm",  # "NVIDIA H200"
    "B200": "b200_sxm",  # "NVIDIA B200"
    "GB200": "gb200",  # "NVIDIA GB200"
    "B300": "b300_sxm",  # "NVIDIA B300 SXM6 AC"
    "GB300": "gb300",  # "NVIDIA GB300"
    "L40S": "l40s",  # "NVIDIA L40S": bfloat16, fp8 and fp8_block GEMM rows, no nvfp4
    # "NVIDIA RTX PRO 6000 Blackwell Server Edition": bfloat16, fp8, fp8_block, nvfp4 rows
    "RTX-PRO-6000-Server": "rtx_pro_6000_server",
}


@dataclass(frozen=True)
class Curve:
    """Measured times of one (n, k) over m: ascending m, seconds."""

    m: tuple[int, ...]
    seconds: tuple[float, ...]


@dataclass(frozen=True)
class Grid:
    """One table family over (n, k) -> a curve over m (the GEMM table of one data type, or
    the quantize table with n = 0)."""

    n: tuple[int, ...]
    k: tuple[int, ...]
    curves: dict[tuple[int, int], Curve]


def _data_root():
    try:
        return importlib.resources.files(PACKAGE) / "systems" / "data"
    except ModuleNotFoundError:
        return None


def installed() -> bool:
    """Whether the database package is installed."""
    root = _data_root()
    return root is not None and root.is_dir()


def _version_key(v: str) -> tuple:
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(v), v)
    except InvalidVersion:
        return (0, v, v)


def _op_dir(system: str, op: str, framework: str):
    root = _data_root()
    return None if root is None else root / system / op / framework


@functools.cache
def versions(system: str, op: str, framework: str) -> tuple[str, ...]:
    """Versions of `framework` with an `op` folder on `system`, oldest first."""
    d = _op_dir(system, op, framework)
    if d is None or not d.is_dir():
        return ()
    return tuple(sorted((p.name for p in d.iterdir() if p.is_dir()), key=_version_key))


@functools.cache
def data_version(system: str, op: str, framework: str, version: str, table: str) -> str:
    """The version whose measurements `table` of (`op`, `framework`, `version`) holds: the
    version itself, or the one its `reuse.yaml` names; "" when there is none."""
    d = _op_dir(system, op, framework)
    if d is None or not (d / version).is_dir():
        return ""
    if (d / version / f"{table}.parquet").is_file():
        return version
    reuse = d / version / "reuse.yaml"
    if not reuse.is_file():
        return ""
    import yaml

    for entry in (yaml.safe_load(reuse.read_text()) or {}).get("reuse", []):
        if entry.get("table") == table and entry.get("from_version") != version:
            return data_version(system, op, framework, str(entry["from_version"]), table)
    return ""


def newest_collected(system: str, op: str, framework: str, table: str) -> str:
    """The newest version of `framework` whose own measurements fill `table` ("" if none)."""
    for v in reversed(versions(system, op, framework)):
        if data_version(system, op, framework, v, table) == v:
            return v
    return ""


def _parquet(system: str, op: str, framework: str, version: str, table: str):
    import pandas as pd

    root = _data_root()
    assert root is not None
    res = root / system / op / framework / version / f"{table}.parquet"
    with importlib.resources.as_file(res) as path:
        return pd.read_parquet(Path(path))


@functools.cache
def generation_attention_grid(
    system: str,
    framework: str,
    version: str,
    heads: int,
    kv_heads: int,
    head_dim: int,
    kv_dtype: str,
) -> Grid | None:
    """The decode-attention table of one head layout and KV-cache type ("bfloat16" or
    "fp8"), full attention (window 0, beam 1), as a Grid with k = KV tokens (step + 1) and
    curves over m = sequences in the batch; None when the version holds no such rows."""
    where = [
        ("num_heads", "==", heads),
        ("num_key_value_heads", "==", kv_heads),
        ("head_dim", "==", head_dim),
        ("kv_cache_dtype", "==", kv_dtype),
        ("window_size", "==", 0),
        ("beam_width", "==", 1),
    ]
    table = (system, "attention", framework, version, "generation_attention_perf")
    rows = _rows(*table, ("batch_size", "step", "latency"), where)
    if not rows or not rows["latency"]:
        return None
    return _grid(rows["batch_size"], [s + 1 for s in rows["step"]], None, rows["latency"])


def _rows(
    system: str,
    op: str,
    framework: str,
    version: str,
    table: str,
    columns: Sequence[str],
    where: list[tuple[str, str, object]],
) -> dict[str, list] | None:
    """`columns` of the table's rows matching every (column, "==", value) of `where`, as
    lists, None when the version holds no such table."""
    import numpy as np  # loaded by a run's stages, not by importing the run (test_cli_startup)

    names = tuple(dict.fromkeys([*columns, *(w[0] for w in where)]))
    data = _columns(system, op, framework, version, table, names)
    if data is None:
        return None
    keep = np.ones(len(data[names[0]]), dtype=bool)
    for col, _, value in where:
        keep &= data[col] == value
    return {col: data[col][keep].tolist() for col in columns}


@functools.cache
def _columns(
    system: str, op: str, framework: str, version: str, table: str, names: tuple[str, ...]
) -> dict[str, Any] | None:
    """The named columns of one whole table as numpy arrays, read once a process (a sweep's points
    ask for many head layouts and data types of the same file). Read with pyarrow's
    ParquetFile alone: a run that prices a few kernels from the tables need not import
    pandas (a quarter of a second and 100 MB a process; pyarrow's read_table and its
    arrays' to_numpy import it)."""
    root = _data_root()
    res = None if root is None else root / system / op / framework / version / f"{table}.parquet"
    if res is None or not res.is_file():
        return None
    # an installed file on disk keeps its columns in the per-user cache (hardware.table_cache:
    # a later process skips importing pyarrow); a zipped package's is read each time
    on_disk = isinstance(res, Path)
    if on_disk:
        cached = table_cache.load(res, names)
        if cached is not None:
            return cached
    import pyarrow.parquet as pq

    with importlib.resources.as_file(res) as path:
        read = pq.ParquetFile(Path(path)).read(columns=list(names))
    import numpy as np

    # to_pylist, not to_numpy: pyarrow's to_numpy imports pandas
    columns = {name: np.array(read.column(name).to_pylist()) for name in names}
    if on_disk:
        table_cache.store(res, names, columns)
    return columns


@functools.cache
def table_frame(system: str, op: str, framework: str, version: str, table: str):
    """One whole table as a pandas DataFrame (as collected: latency in milliseconds), None
    when the package is not installed or the version holds no such table."""
    root = _data_root()
    if (
        root is None
        or not (root / system / op / framework / version / f"{table}.parquet").is_file()
    ):
        return None
    return _parquet(system, op, framework, version, table)


def _grid(
    ms: Sequence[int], ks: Sequence[int], ns: Sequence[int] | None, latency_ms: Sequence[float]
) -> Grid:
    """Grid of (n, k) curves over m from parallel columns (latency in milliseconds); ns
    None: one n (0). A point measured more than once takes its mean (summed in row order).
    Grouped by one stable sort over (n, k, m): a table has tens of thousands of rows, read
    by every process that prices a GEMM from it."""
    import numpy as np  # loaded by a run's stages, not by importing the run (test_cli_startup)

    m = np.asarray(ms, dtype=np.int64)
    k = np.asarray(ks, dtype=np.int64)
    n = np.zeros_like(m) if ns is None else np.asarray(ns, dtype=np.int64)
    t = np.asarray(latency_ms, dtype=float)
    order = np.lexsort((m, k, n))  # by n, then k, then m; rows of one point in row order
    m, k, n, t = m[order], k[order], n[order], t[order]
    starts = np.flatnonzero(np.r_[True, (m[1:] != m[:-1]) | (k[1:] != k[:-1]) | (n[1:] != n[:-1])])
    counts = np.diff(np.r_[starts, len(m)])
    means = t[starts].tolist()
    for i in np.flatnonzero(counts > 1).tolist():  # repeats: Python's sum, as the rows came
        a = int(starts[i])
        means[i] = sum(t[a : a + int(counts[i])].tolist()) / int(counts[i])
    point_n, point_k, point_m = n[starts].tolist(), k[starts].tolist(), m[starts].tolist()
    curves: dict[tuple[int, int], Curve] = {}
    first = 0
    for j in range(1, len(point_m) + 1):
        if j == len(point_m) or (point_n[j], point_k[j]) != (point_n[first], point_k[first]):
            curves[(point_n[first], point_k[first])] = Curve(
                tuple(point_m[first:j]), _monotone([x * 1e-3 for x in means[first:j]])
            )
            first = j
    return Grid(
        tuple(sorted({n for n, _ in curves})), tuple(sorted({k for _, k in curves})), curves
    )


def _monotone(seconds: list[float]) -> tuple[float, ...]:
    """The curve's times made nondecreasing in m by pooling adjacent violators (isotonic
    least squares: each run of points where a larger m measured faster takes their mean).
    Why: a GEMM of m rows can always run padded as one of more rows (as engines pad a batch
    up to a captured CUDA-graph size), so no shape is slower than a larger one; as measured,
    the kernel a library picks per shape and noise make about half the points slower than
    some larger m, a few by 40-80% (B200 BF16 at n = k = 4096: 11.4 us at m = 16, 9.4 at
    m = 17), which made a larger decode batch faster. The mean, not the least of the run:
    over the flat, weight-bound decode sizes the least is the luckiest sample, 5-9% fast."""
    blocks: list[list[float]] = []  # [total, count] of each pooled run, in m order
    for t in seconds:
        blocks.append([t, 1.0])
        while len(blocks) > 1 and blocks[-2][0] * blocks[-1][1] > blocks[-1][0] * blocks[-2][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    out: list[float] = []
    for total, count in blocks:
        out += [total / count] * int(count)
    return tuple(out)


@functools.cache
def gemm_grid(system: str, framework: str, version: str, dtype: str) -> Grid | None:
    """The GEMM table of `dtype` ("bfloat16", "fp8", ...), None when the version holds none
    (a reused table is followed to its data)."""
    data = data_version(system, "gemm", framework, version, "gemm_perf")
    if not data:
        return None
    table = (system, "gemm", framework, data, "gemm_perf")
    rows = _rows(*table, ("m", "n", "k", "latency"), [("gemm_dtype", "==", dtype)])
    if not rows or not rows["latency"]:
        return None
    return _grid(rows["m"], rows["k"], rows["n"], rows["latency"])


@functools.cache
def quantize_grid(system: str, framework: str, version: str) -> Grid | None:
    """The FP8 static per-tensor quantize over (m, k) (n = 0), None when absent."""
    data = data_version(system, "quantize", framework, version, "scale_matrix_perf")
    if not data:
        return None
    table = (system, "quantize", framework, data, "scale_matrix_perf")
    rows = _rows(*table, ("m", "k", "latency"), [("quant_dtype", "==", "fp8")])
    if not rows or not rows["latency"]:
        return None
    return _grid(rows["m"], rows["k"], None, rows["latency"])


# ---------------------------------------------------------------------------------------
# Interpolation: exact on grid points, log-log between neighbours
# ---------------------------------------------------------------------------------------

EXACT, INTERPOLATED, EXTRAPOLATED = "exact", "interpolated", "extrapolated"


def _bracket(grid: Sequence[int], x: float) -> tuple[int, int, str]:
    """Indices of the grid neighbours around x (equal when x is on the grid or beyond an
    end) and how x relates to the grid."""
    if x <= grid[0]:
        return 0, 0, EXACT if x == grid[0] else EXTRAPOLATED  # below: the smallest (a floor)
    if x >= grid[-1]:
        return len(grid) - 1, len(grid) - 1, EXACT if x == grid[-1] else EXTRAPOLATED
    hi = next(i for i, g in enumerate(grid) if g >= x)
    if grid[hi] == x:
        return hi, hi, EXACT
    return hi - 1, hi, INTERPOLATED


def _weight(grid: Sequence[int], lo: int, hi: int, x: float) -> float:
    if lo == hi:
        return 0.0
    return (math.log(x) - math.log(grid[lo])) / (math.log(grid[hi]) - math.log(grid[lo]))


def _on_curve(c: Curve, m: float) -> tuple[float, str]:
    """Time at m on one curve: log-log between the two measured neighbours; beyond the
    largest m, linear at the last two points' cost per row; below the smallest, its time.
    The grid holds m and m + 1 at every 256-row step up to 4353, so a neighbour pair
    never straddles a tile step there: the steps are kept, not smoothed."""
    lo, hi, how = _bracket(c.m, m)
    if how == EXTRAPOLATED and m > c.m[-1]:
        # the marginal cost per row of the last two points (the steady state a long GEMM
        # runs at; the last point alone still carries the fixed start-up time), else the last
        # point's throughput when noise makes that slope useless
        per_row = c.seconds[-1] / c.m[-1]
        if len(c.m) > 1:
            slope = (c.seconds[-1] - c.seconds[-2]) / (c.m[-1] - c.m[-2])
            per_row = slope if 0 < slope <= per_row else per_row
        return c.seconds[-1] + (m - c.m[-1]) * per_row, how
    if lo == hi:
        return c.seconds[lo], how
    w = _weight(c.m, lo, hi, m)
    return math.exp((1 - w) * math.log(c.seconds[lo]) + w * math.log(c.seconds[hi])), how


def lookup(grid: Grid, m: float, n: float, k: float) -> tuple[float, str] | None:
    """Seconds at (m, n, k) and EXACT / INTERPOLATED / EXTRAPOLATED: each neighbouring
    (n, k) curve at m, then bilinear in (log n, log k) over log time; beyond the largest n
    or k, in proportion to it (that corner's throughput). None when a neighbour curve is
    missing from the table (the collector skips m*k, m*n >= 2^31). Below the smallest n or k,
    the smallest's time (a floor, as below the smallest m)."""
    ns, ks = grid.n, grid.k
    if ns == (0,):  # the quantize table: no n
        nlo = nhi = 0
        how_n, wn, n_scale = EXACT, 0.0, 1.0
    else:
        nlo, nhi, how_n = _bracket(ns, n)
        wn = _weight(ns, nlo, nhi, n)
        n_scale = n / ns[-1] if n > ns[-1] else 1.0
    klo, khi, how_k = _bracket(ks, k)
    wk = _weight(ks, klo, khi, k)
    k_scale = k / ks[-1] if k > ks[-1] else 1.0
    hows = {how_n, how_k}
    corners = []
    for ni, fn in ((nlo, 1 - wn), (nhi, wn)) if nlo != nhi else ((nlo, 1.0),):
        for ki, fk in ((klo, 1 - wk), (khi, wk)) if klo != khi else ((klo, 1.0),):
            curve = grid.curves.get((ns[ni], ks[ki]))
            if curve is None:
                return None
            t, how = _on_curve(curve, m)
            hows.add(how)
            corners.append((fn * fk, t))
    if len(corners) == 1:  # on the (n, k) grid: the curve's own value, untouched
        seconds = corners[0][1]
    else:
        seconds = math.exp(sum(f * math.log(t) for f, t in corners))
    how = EXTRAPOLATED if EXTRAPOLATED in hows else INTERPOLATED if INTERPOLATED in hows else EXACT
    return seconds * n_scale * k_scale, how
