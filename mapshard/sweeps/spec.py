"""A sweep file (text-format `Sweep`, see proto/setup.proto) parsed and checked.

Every problem is collected and raised once as a SetupError naming the sweep file and the
axis (or filter) index, before any point is built or solved.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hardware import library
from mapshard.sweeps import metrics
from mapshard.sweeps.fieldset import (
    FieldPath,
    convert_number,
    convert_value,
    label_of,
    parse_field_path,
)
from schema import setup_pb2
from schema.errors import SetupError
from schema.setup_io import SETUP_NAME, load_setup, parse_text, read_text

SWEEP_NAME = "sweep.txt"
EXAMPLE = "scenarios/sweep_llama70b/sweep.txt"
MAX_POINTS = 1_000_000
MAX_RANGE_VALUES = 100_000
_THREADS = "HiGHS fixes its thread count per process; set it once in the base setup"
# Results columns that describe a plan but are no goal to optimise.
NOT_OBJECTIVES = ("tp", "pp", "dp", "ep", "solve_time_s")
UNSWEEPABLE = {"solver.threads": _THREADS, "gurobi.thread": _THREADS}


@dataclass(frozen=True)
class AxisSpec:
    index: int
    field: FieldPath
    name: str  # results column
    values: tuple[Any, ...]  # converted to the field's type
    labels: tuple[str, ...]  # as written in the results table


@dataclass(frozen=True)
class FilterSpec:
    metric: str
    min: float  # 0 = unset
    max: float  # 0 = unset

    @property
    def pre_solve(self) -> bool:
        return self.metric in metrics.PRE_SOLVE


@dataclass(frozen=True)
class SweepSpec:
    path: Path  # the sweep file
    base: setup_pb2.Setup
    base_path: Path  # the setup file relative paths in the base are relative to
    axes: tuple[AxisSpec, ...]
    combine: str  # "product" | "zip"
    filters: tuple[FilterSpec, ...]
    objectives: tuple[str, ...]

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def columns(self) -> tuple[str, ...]:
        return metrics.columns(self.axis_names)

    @property
    def num_points(self) -> int:
        if not self.axes:
            return 1
        if self.combine == "zip":
            return len(self.axes[0].values)
        return math.prod(len(a.values) for a in self.axes)


def load_sweep(path: str | Path) -> SweepSpec:
    """Parse and check a sweep file. Raises SetupError listing every problem."""
    path = Path(path)
    if path.is_dir():
        folder, path = path, path / SWEEP_NAME
        if not path.is_file():
            held = (
                f" (it holds a {SETUP_NAME}: a scenario runs with `mapshard run`)"
                if (folder / SETUP_NAME).is_file()
                else ""
            )
            raise SetupError(
                f"{folder}: no {SWEEP_NAME} in this folder{held}; give a sweep file "
                f"(a text-format Sweep: base, axis, ...; see {EXAMPLE})"
            )
    if not path.is_file():
        raise SetupError(f"{path}: no such sweep file; give a text-format Sweep (see {EXAMPLE})")
    text = read_text(path)
    if not text.strip():
        raise SetupError(
            f'{path}: the file is empty; a sweep needs a base (base: "FOLDER" or '
            "inline { ... }) and at least one axis { field values }"
        )
    sweep = setup_pb2.Sweep()
    try:
        parse_text(text, sweep, path)
    except SetupError as exc:
        raise SetupError([_setup_hint(p) for p in exc.problems]) from None
    return check_sweep(sweep, path)


def _setup_hint(problem: str) -> str:
    """A setup given where a sweep goes: say so (its fields are unknown to Sweep)."""
    setup_fields = setup_pb2.Setup.DESCRIPTOR.fields_by_name
    for name in setup_fields:
        if f'unknown field "{name}" in Sweep' in problem:
            return (
                f"{problem}; this looks like a setup file: `mapshard run` solves it, and a "
                f'sweep names it with base: "FOLDER_OR_SETUP_TXT"'
            )
    return problem


def check_sweep(sweep: setup_pb2.Sweep, path: Path) -> SweepSpec:
    """A parsed Sweep message (read from `path`) checked and converted."""
    problems: list[str] = []
    base, base_path = _base(sweep, path, problems)
    axes = tuple(_axis(i, ax, path, base, problems) for i, ax in enumerate(sweep.axis))
    combine = "zip" if sweep.combine == setup_pb2.ZIP else "product"
    _check_names(axes, path, problems)
    if combine == "zip" and axes:
        lengths = {a.name: len(a.values) for a in axes}
        if len(set(lengths.values())) > 1:
            shown = ", ".join(f"{n}: {k}" for n, k in lengths.items())
            problems.append(
                f"{path}: combine: ZIP needs axes of equal length, got {shown}; give each "
                "axis the same number of values or use PRODUCT"
            )
    filters = tuple(_filter(i, f, path, problems) for i, f in enumerate(sweep.filter))
    objectives = tuple(sweep.objective) or metrics.DEFAULT_OBJECTIVES
    valid = tuple(m for m in metrics.METRICS if m not in NOT_OBJECTIVES)
    for i, obj in enumerate(sweep.objective):
        if obj not in valid:
            problems.append(
                f'{path}: objective[{i}] "{obj}" is not an objective'
                + _near(obj, valid)
                + f"; valid: {', '.join(valid)}"
            )
    spec = SweepSpec(path, base, base_path, axes, combine, filters, objectives)
    if not problems and spec.num_points > MAX_POINTS:
        problems.append(
            f"{path}: the axes give {spec.num_points:,} points, more than "
            f"{MAX_POINTS:,}; narrow the ranges or split the sweep"
        )
    if problems:
        raise SetupError(problems)
    return spec


def _base(sweep: setup_pb2.Sweep, path: Path, problems: list[str]) -> tuple[setup_pb2.Setup, Path]:
    which = sweep.WhichOneof("base_setup")
    if which == "inline":
        base = setup_pb2.Setup()
        base.CopyFrom(sweep.inline)
        return base, path
    if which == "base":
        target = (
            (path.parent / sweep.base) if not Path(sweep.base).is_absolute() else Path(sweep.base)
        )
        try:
            return load_setup(target)
        except SetupError as exc:
            problems.extend(f'{path}: base "{sweep.base}": {p}' for p in exc.problems)
            return setup_pb2.Setup(), path
    problems.append(
        f'{path}: no base scenario; give base: "FOLDER_OR_SETUP_TXT" (relative to '
        "the sweep file) or inline { ... a Setup ... }"
    )
    return setup_pb2.Setup(), path


def _axis(
    i: int, ax: setup_pb2.Axis, path: Path, base: setup_pb2.Setup, problems: list[str]
) -> AxisSpec:
    where = f"{path}: axis[{i}]"
    empty = AxisSpec(i, _dummy_path(), ax.name or ax.field or f"axis{i}", (), ())
    if not ax.field:
        problems.append(
            f'{where}: field is empty; give a field path such as "workload.llm_inference.batch"'
        )
        return empty
    try:
        fp = parse_field_path(ax.field)
    except KeyError as exc:
        problems.append(f"{where}: {exc.args[0]}")
        return empty
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return empty
    if fp.text in UNSWEEPABLE:
        problems.append(f"{where}: {fp.text} cannot be swept: {UNSWEEPABLE[fp.text]}")
        return empty
    name = ax.name or fp.text
    has_range = ax.HasField("range")
    if ax.values and has_range:
        problems.append(f"{where} ({fp.text}): give values or a range, not both")
        return empty
    if not ax.values and not has_range:
        problems.append(
            f'{where} ({fp.text}): no values; give values: ["a", "b"] or '
            "range { start stop step|factor }"
        )
        return empty
    values: list[Any] = []
    try:
        if has_range:
            values = [convert_number(fp, v) for v in _range_values(ax.range)]
        else:
            values = [convert_value(fp, v) for v in ax.values]
    except ValueError as exc:
        problems.append(f"{where} ({fp.text}): {exc}")
        return empty
    _check_library_names(fp, values, base, where, problems)
    return AxisSpec(i, fp, name, tuple(values), tuple(label_of(v, fp) for v in values))


def _range_values(r: setup_pb2.Range) -> list[float]:
    for name in ("start", "stop", "step", "factor"):
        if not math.isfinite(getattr(r, name)):
            raise ValueError(f"range {name} is {getattr(r, name):g}; give a finite number")
    start, stop = r.start, r.stop
    if r.step:
        if (stop - start) * r.step < 0:
            raise ValueError(
                f"range step {r.step:g} moves away from stop {stop:g} (start {start:g}); "
                "give a step with the sign of stop - start"
            )
        steps = (stop - start) / r.step + 1e-9
        if not math.isfinite(steps):
            raise ValueError(
                f"range step {r.step:g} is too small for {start:g}..{stop:g}; use a larger step"
            )
        n = math.floor(steps) + 1
        if n > MAX_RANGE_VALUES:
            raise ValueError(
                f"range gives {n:,} values (most {MAX_RANGE_VALUES:,}); use a larger step "
                "or split the sweep"
            )
        return [start + k * r.step for k in range(n)]
    if r.factor:
        if r.factor <= 0 or r.factor == 1 or start == 0:
            raise ValueError("range factor must be > 0 and != 1, with start != 0")
        if (abs(stop) - abs(start)) * (r.factor - 1) < 0 or start * stop < 0:
            raise ValueError(
                f"range factor {r.factor:g} moves away from stop {stop:g} (start "
                f"{start:g}); give a factor > 1 to grow, < 1 to shrink, and start and stop "
                "of one sign"
            )
        out = [start]
        lo, hi = sorted((abs(start), abs(stop)))
        while len(out) <= MAX_RANGE_VALUES:
            nxt = out[-1] * r.factor
            if not lo * (1 - 1e-9) <= abs(nxt) <= hi * (1 + 1e-9):
                return out
            out.append(nxt)
        raise ValueError(
            f"range gives more than {MAX_RANGE_VALUES:,} values; use a larger factor or "
            "split the sweep"
        )
    if start == stop:
        return [start]
    raise ValueError("range needs step (additive) or factor (multiplicative)")


def _check_library_names(
    fp: FieldPath, values: list[Any], base: setup_pb2.Setup, where: str, problems: list[str]
) -> None:
    """`system.chip` and `system.preset` take library names: check them now."""
    if fp.text == "system.chip" and not base.system.chip_table:
        find, names = library.find_chip, library.chip_names()
    elif fp.text == "system.preset":
        find, names = library.find_preset, library.preset_names()
    else:
        return
    for v in values:
        if find(v) is None:
            problems.append(
                f'{where} ({fp.text}): "{v}" is not in the hardware library'
                + _near(v, names)
                + " (`mapshard hardware list` shows it)"
            )


def _check_names(axes: tuple[AxisSpec, ...], path: Path, problems: list[str]) -> None:
    """Each axis its own results column and its own field (two axes on one field: the later
    would silently win, and its column would be wrong in every row)."""
    fixed = set(metrics.columns(()))
    seen: dict[str, AxisSpec] = {}
    fields: dict[tuple[tuple[str, int | None], ...], AxisSpec] = {}
    for a in axes:
        same_field = fields.setdefault(a.field.parts, a) if a.values else a
        if same_field is not a:
            problems.append(
                f"{path}: axis[{a.index}]: sets {a.field.text}, which axis[{same_field.index}] "
                "already sets (the later would silently win); give one axis all its values"
            )
        elif a.name in fixed:
            problems.append(
                f'{path}: axis[{a.index}]: column name "{a.name}" is taken by a '
                "results column; give the axis a name"
            )
        elif a.name in seen:
            problems.append(
                f'{path}: axis[{a.index}]: column name "{a.name}" repeats '
                f"axis[{seen[a.name].index}]; give the axis a name"
            )
        seen.setdefault(a.name, a)


def _filter(i: int, f: setup_pb2.Filter, path: Path, problems: list[str]) -> FilterSpec:
    where = f"{path}: filter[{i}]"
    usable = tuple(m for m in metrics.METRICS if m != "solve_time_s")
    bounds = (("max", f.max), ("min", f.min))
    if f.metric not in usable:
        problems.append(
            f'{where}: metric "{f.metric}" is not a results metric'
            + _near(f.metric, usable)
            + f"; valid: {', '.join(usable)}"
        )
    elif any(not 0 <= v < math.inf for _, v in bounds):
        problems.extend(
            f"{where} ({f.metric}): {name} is {v:g}; every metric is >= 0, give a finite "
            "bound > 0 (0 = unset)"
            for name, v in bounds
            if not 0 <= v < math.inf
        )
    elif not f.max and not f.min:
        problems.append(f"{where} ({f.metric}): give max and/or min (0 = unset)")
    elif f.max and f.min and f.min > f.max:
        problems.append(f"{where} ({f.metric}): min {f.min:g} is above max {f.max:g}")
    return FilterSpec(f.metric, f.min, f.max)


def _near(name: str, names: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.5)
    return f'; did you mean "{close[0]}"?' if close else ""


def _dummy_path() -> FieldPath:
    return parse_field_path("name")
