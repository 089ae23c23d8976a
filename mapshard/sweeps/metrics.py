"""The results table's columns and the metrics a sweep records, filters on and optimises.

Column order is fixed: point_id, index, one column per axis, status, reason, METRICS, then
INFO_COLUMNS.
Values are written as text: floats with repr() (exact round trip), empty where a metric does
not apply (no plan, or e.g. ttft_s for a training step).
"""

from __future__ import annotations

import math
from typing import Any

from mapshard.report.summary import summary_dict

STATUSES = ("optimal", "time_limit", "infeasible", "failed", "filtered")
SOLVED = ("optimal", "time_limit")  # statuses that carry a plan's metrics
LEAD_COLUMNS = ("point_id", "index")
STATUS_COLUMNS = ("status", "reason")
METRICS = (
    "latency_s",
    "ttft_s",
    "tpot_s",
    "tokens_per_s",
    "iteration_time_s",
    "tp",
    "pp",
    "dp",
    "ep",
    "system_cost",
    "system_power_W",
    "workload_flop",
    "flops_utilization",
    "memory_per_chip_bytes",
    "num_chips",
    "gap",
    "solve_time_s",
    "tokens_per_s_per_usd",
)
# Metrics known before solving (from the resolved System): filters on them skip the solve.
PRE_SOLVE = ("system_cost", "system_power_W", "num_chips")
# Objectives larger-is-better; every other metric is minimised.
MAXIMISE = ("tokens_per_s", "tokens_per_s_per_usd", "flops_utilization")
# A System Cost or Power of 0 means the library has no price / power for the chip: such
# values are left out of Pareto fronts and best points.
POSITIVE_ONLY = ("system_cost", "system_power_W")
DEFAULT_OBJECTIVES = ("latency_s", "system_cost", "system_power_W", "tokens_per_s_per_usd")
# Columns that differ between two runs of the same point (wall-clock time).
TIMING_COLUMNS = ("solve_time_s",)


# Text columns after the metrics: what a solved point's numbers rest on (never filtered or
# optimised). cost_basis: what system_cost is made of (COST_BASES); chip_calibration:
# "calibrated" or "uncalibrated" (hardware.calibration).
INFO_COLUMNS = ("cost_basis", "chip_calibration")
RECORDED = (*METRICS, *INFO_COLUMNS)


def columns(axis_names: tuple[str, ...]) -> tuple[str, ...]:
    return (*LEAD_COLUMNS, *axis_names, *STATUS_COLUMNS, *RECORDED)


# What a System Cost is made of. Only a cost that includes a price for every chip (the
# hardware library's, cited in the chip file, or the setup's cost.accelerator_price) is a
# purchase price that tokens/s per $ may divide by; DFModel's per-GB/s unit prices for DRAM,
# links and switch ports alone are a modelling figure ("unit prices only"), not a price.
LIBRARY_PRICE = "library chip price"
SETUP_PRICE = "setup chip price"
UNIT_PRICES_ONLY = "unit prices only"
NOT_PRICED = "not priced"
COST_BASES = (LIBRARY_PRICE, SETUP_PRICE, UNIT_PRICES_ONLY, NOT_PRICED)
PRICED = (LIBRARY_PRICE, SETUP_PRICE)


def cost_basis(system: Any, system_cost_usd: float | None) -> str:
    """What a System Cost of `system_cost_usd` on a resolved System
    (hardware.system.System) rests on."""
    chip_usd = float(system.cost.accelerator_price)
    if not system_cost_usd or system_cost_usd <= 0:
        return NOT_PRICED
    if chip_usd > 0:
        return LIBRARY_PRICE if chip_usd == float(system.chip.price_usd) else SETUP_PRICE
    return UNIT_PRICES_ONLY


def plan_metrics(plan: Any, basis: str = NOT_PRICED) -> dict[str, Any]:
    """The headline metrics of a solver Plan, by the names of the summary.json contract.
    `basis` (cost_basis): tokens/s per $ only for a system whose chips carry a price."""
    s = summary_dict(plan)
    par = s.get("parallelism") or {}
    out: dict[str, Any] = {name: s.get(name) for name in METRICS}
    for key in ("tp", "pp", "dp", "ep"):
        out[key] = par.get(key, 1)
    out["num_chips"] = s.get("num_chips", plan.num_chips)
    out["chip_calibration"] = (s.get("chip_calibration") or {}).get("status")
    tps, cost = out.get("tokens_per_s"), out.get("system_cost")
    priced = isinstance(cost, (int, float)) and cost > 0 and basis in PRICED
    out["cost_basis"] = basis
    out["tokens_per_s_per_usd"] = tps / cost if isinstance(tps, (int, float)) and priced else None
    return out


def format_value(value: Any) -> str:
    """Text of one cell: repr for floats (exact), '' for None or non-finite."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


def known(metric: str, text: str | None) -> float | None:
    """A cell as a float for fronts and best points: None when empty, or <= 0 for the
    POSITIVE_ONLY metrics (no price or power data)."""
    x = number(text)
    if x is not None and metric in POSITIVE_ONLY and x <= 0:
        return None
    return x


def number(text: str | None) -> float | None:
    """A cell as a float, None when empty or not a number."""
    if text is None or text == "":
        return None
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def violated(metric: str, value: float | None, low: float, high: float) -> str:
    """Why `value` fails a filter (max `high`, min `low`; 0 = unset), or ''."""
    if value is None:
        return ""
    if high and value > high:
        return f"{metric} {value:.6g} > max {high:.6g}"
    if low and value < low:
        return f"{metric} {value:.6g} < min {low:.6g}"
    return ""


def better(objective: str, a: float, b: float) -> bool:
    """Is a strictly better than b for this objective?"""
    return a > b if objective in MAXIMISE else a < b
