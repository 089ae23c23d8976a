"""Expanding a sweep into points: one Setup per combination of axis values, checked, keyed,
and (for pre-solve filters) priced before anything is solved.

A point's id is the first 16 hex digits of the SHA-256 of its Setup's canonical text
(`text_format.MessageToString`, fields in schema order: deterministic), so the same setup
gets the same id in every run and on every machine. Its workload key hashes the parts of the
setup the workload generator reads (workload, dataflow_graph, execution, name) and the base
folder (relative model paths), so points that differ only in hardware, cost or solver options
share one generated workload.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from hardware.cost import system_cost, system_power
from hardware.system import System
from mapshard import pipeline
from mapshard.scenario import Loaded
from mapshard.sweeps import metrics
from mapshard.sweeps.fieldset import set_field
from mapshard.sweeps.spec import SweepSpec
from schema import setup_pb2
from schema.errors import SetupError
from schema.text_out import message_text

# Setup fields the workload generator never reads (hardware, prices, solver options).
NOT_WORKLOAD = ("system", "cost", "solver", "gurobi")


@dataclass(frozen=True)
class Point:
    index: int
    labels: tuple[str, ...]  # one per axis, as written in the results table
    text: str  # canonical text of the point's Setup
    point_id: str
    workload_key: str
    # A result known without solving (invalid setup -> failed, pre-solve filter ->
    # filtered), or None when the point must be solved.
    row: dict[str, str] | None = None
    # the same Setup in protobuf's binary form: a worker parses it in microseconds where
    # the text takes a fraction of a millisecond (b"" = parse `text`)
    data: bytes = field(default=b"", repr=False)

    def cells(self, axis_names: tuple[str, ...]) -> dict[str, str]:
        """The row's leading cells: point_id, index and the axis values."""
        return {
            "point_id": self.point_id,
            "index": str(self.index),
            **dict(zip(axis_names, self.labels)),
        }


def canonical_text(setup: setup_pb2.Setup) -> str:
    return message_text(setup)


def point_id_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class _WorkloadKeys:
    """Workload keys of one sweep's points: the base folder resolved once, and the key
    of each distinct workload part computed once, found by the part's deterministic binary
    form (equal bytes: an equal part, so an equal text). Why: a sweep's points share a few
    workloads; the text of each point's part and a resolve() per point were a fifth of
    the driver's time expanding 1,000 points."""

    def __init__(self, base_path: Path):
        self.folder = str(Path(base_path).resolve().parent).encode("utf-8") + b"\0"
        self.keys: dict[bytes, str] = {}  # per distinct workload; lives for one expansion

    def key(self, setup: setup_pb2.Setup) -> str:
        part = _without(setup, NOT_WORKLOAD)
        data = part.SerializeToString(deterministic=True)
        key = self.keys.get(data)
        if key is None:
            digest = hashlib.sha256(self.folder)
            digest.update(canonical_text(part).encode("utf-8"))
            key = self.keys[data] = digest.hexdigest()[:16]
        return key


def _without(setup: setup_pb2.Setup, names: tuple[str, ...]) -> setup_pb2.Setup:
    """A copy of `setup` with the top-level fields `names` cleared."""
    part = setup_pb2.Setup()
    part.CopyFrom(setup)
    for name in names:
        part.ClearField(name)
    return part


_SYSTEMS_KEPT = 64  # resolved machines kept per process (`resolved`)
_SYSTEMS: OrderedDict[bytes, System] = OrderedDict()
_SYSTEMS_LOCK = threading.Lock()


def resolved(loaded: Loaded) -> System:
    """pipeline.resolve of a point's loaded setup, once per process for each distinct setup
    without its workload (what resolve reads: system, cost, execution, solver, the base
    path): a sweep's points of one system share it, in the driver's expansion and in a
    worker. Errors are not kept (each point raises its own)."""
    key = _without(loaded.setup, ("workload",)).SerializeToString(deterministic=True)
    key += b"\0" + str(loaded.path).encode("utf-8")
    with _SYSTEMS_LOCK:
        found = _SYSTEMS.get(key)
        if found is not None:
            _SYSTEMS.move_to_end(key)
            return found
    found = pipeline.resolve(loaded)
    with _SYSTEMS_LOCK:
        _SYSTEMS[key] = found
        while len(_SYSTEMS) > _SYSTEMS_KEPT:
            _SYSTEMS.popitem(last=False)
    return found


def combinations(spec: SweepSpec) -> Iterator[tuple[int, ...]]:
    """Value indices per axis, in point order (PRODUCT: the first axis varies slowest)."""
    if not spec.axes:
        yield ()
        return
    if spec.combine == "zip":
        for k in range(len(spec.axes[0].values)):
            yield tuple(k for _ in spec.axes)
        return
    yield from itertools.product(*(range(len(a.values)) for a in spec.axes))


def expand_points(spec: SweepSpec) -> tuple[list[Point], int]:
    """Every distinct point of the sweep, in order, and how many combinations repeated an
    earlier point's setup (they are run once, under the first index).

    A point whose setup is invalid gets a `failed` row. When the failure is the sweep
    file's own (see `_Blame`), SetupError is raised instead, before anything is solved."""
    points: list[Point] = []
    seen: set[str] = set()
    repeats = 0
    blame = _Blame(spec)
    keys = _WorkloadKeys(spec.base_path)
    for index, choice in enumerate(combinations(spec)):
        setup = setup_pb2.Setup()
        setup.CopyFrom(spec.base)
        labels = tuple(a.labels[k] for a, k in zip(spec.axes, choice))
        error, why, bad_axis = "", "", -1
        for axis, k in zip(spec.axes, choice):
            try:
                set_field(setup, axis.field, axis.values[k])
            except ValueError as exc:
                why, bad_axis = str(exc), axis.index
                error = f"axis[{axis.index}] {axis.name}={axis.labels[k]}: {why}"
                break
        text = canonical_text(setup)
        pid = point_id_of(text if not error else text + "\0" + "\0".join(labels))
        if pid in seen:
            repeats += 1
            continue
        seen.add(pid)
        key = keys.key(setup)
        point = Point(index, labels, text, pid, key, data=setup.SerializeToString())
        cells = point.cells(spec.axis_names)
        if error:
            row = _row(cells, "failed", error)
            blame.add(choice, [why], {bad_axis: why})
        else:
            row, problems = check_point(setup, spec, cells)
            blame.add(choice, problems)
        points.append(point if row is None else _with_row(point, row))
    blame.raise_if_any()
    return points, repeats


def check_point(
    setup: setup_pb2.Setup, spec: SweepSpec, cells: dict[str, str]
) -> tuple[dict[str, str] | None, list[str]]:
    """Validate and resolve a point's setup; apply pre-solve filters. Returns the point's
    final row when it needs no solve (failed or filtered), else None, and the problems
    that failed it (each naming the base file and a field path)."""
    try:
        system = resolved(pipeline.load_message(setup, spec.base_path))
    except SetupError as exc:
        return _row(cells, "failed", "; ".join(exc.problems)), list(exc.problems)
    if setup.workload.llm_inference.HasField("stream"):
        why = (
            f"{spec.base_path}: workload.llm_inference.stream is simulated by `mapshard run` "
            "only; a sweep solves one step per point: remove the stream block"
        )
        return _row(cells, "failed", why), [why]
    pre = [f for f in spec.filters if f.pre_solve]
    known = pre_solve_metrics(system) if pre else {}
    for f in pre:
        why = metrics.violated(f.metric, known.get(f.metric), f.min, f.max)
        if why:
            basis = metrics.cost_basis(system, known.get("system_cost"))
            return _row(cells, "filtered", why, {**known, "cost_basis": basis}), []
    return None, []


class _Blame:
    """Which failed points are the sweep file's fault rather than an unlucky combination:
    - an axis value every point of which fails on that axis's own field (a negative size,
      a NaN, an index past the end of a list, a head count that divides nothing): the
      value can never give a point, so the file is wrong;
    - a problem that every point of the sweep shares (the base is invalid).
    A value that fails only with some values of other axes stays a `failed` row."""

    def __init__(self, spec: SweepSpec):
        self.spec = spec
        self.prefix = f"{spec.base_path}: "
        self.paths = [_plain(a.field.text) for a in spec.axes]
        self.points: dict[tuple[int, int], int] = {}  # (axis, value index) -> points
        self.failed: dict[tuple[int, int], int] = {}  # ... -> points failed on that axis
        self.first: dict[tuple[int, int], str] = {}  # ... -> the first such problem
        self.common: list[str] | None = None  # problems every point so far shares

    def add(
        self, choice: tuple[int, ...], problems: list[str], named: dict[int, str] | None = None
    ) -> None:
        """One point's problems ([] when valid). `named`: problems already known to be an
        axis's (by axis index); others are matched to an axis by the field path they name."""
        plain = [p.removeprefix(self.prefix) for p in problems]
        named = dict(named or {})
        for text in plain:
            field = _plain(text.split(" ", 1)[0].rstrip(":,;"))
            for i, path in enumerate(self.paths):
                if field == path or field.startswith(path + "."):
                    named.setdefault(i, text)
        for i, k in enumerate(choice):
            key = (i, k)
            self.points[key] = self.points.get(key, 0) + 1
            if i in named:
                self.failed[key] = self.failed.get(key, 0) + 1
                self.first.setdefault(key, named[i])
        self.common = plain if self.common is None else [p for p in self.common if p in plain]

    def _base_fails(self) -> bool:
        """Whether the base setup, no axis applied, has problems of its own."""
        base = setup_pb2.Setup()
        base.CopyFrom(self.spec.base)
        return bool(check_point(base, self.spec, {})[1])

    def raise_if_any(self) -> None:
        spec, lines, told = self.spec, [], set()
        for key, n in self.points.items():
            if self.failed.get(key) == n:
                axis = spec.axes[key[0]]
                text = self.first[key]
                told.add(text)
                lines.append(
                    f'{spec.path}: axis[{axis.index}] ({axis.name}) value "{axis.labels[key[1]]}"'
                    f" fails every point it is in: {text}"
                )
        where = "inline base" if spec.base_path == spec.path else f"base {spec.base_path}"
        common = [text for text in self.common or [] if text not in told]
        if common and not self._base_fails():
            # the base alone is valid: the axes together make every point fail (an axis on
            # a field inside a message the base lacks creates it, its other fields unset)
            names = ("axis " if len(spec.axes) == 1 else "axes ") + ", ".join(
                a.name for a in spec.axes
            )
            for text in common:
                lines.append(
                    f"{spec.path}: every point fails, though the {where} alone is valid: "
                    f"{text} (set by the {names}: an axis on a field of a message the "
                    "base lacks creates that message, its other fields unset; give them in "
                    "the base)"
                )
            common = []
        for text in common:
            lines.append(f"{spec.path}: every point fails on the {where}: {text}")
        if lines:
            raise SetupError(lines)


def _plain(path: str) -> str:
    """A field path without list indices: system.topology[0].degree -> system.topology.degree."""
    return re.sub(r"\[\d+\]", "", path)


def pre_solve_metrics(system: object) -> dict[str, float]:
    """Metrics of a resolved System (hardware.system.System). System Cost and Power need
    every topology degree; with a searched degree they are known only after solving. A
    cost or power of 0 (the library has no price or power for the chip) is unknown, not
    $0 or 0 W: left out, as a solved point's row leaves it (so a filter cannot judge it)."""
    out: dict[str, float] = {"num_chips": float(system.num_chips)}  # type: ignore[attr-defined]
    try:
        cost = system_cost(system)  # type: ignore[arg-type]
        power = system_power(system)  # type: ignore[arg-type]
    except ValueError:
        return out
    for name, value in (("system_cost", cost), ("system_power_W", power)):
        if value > 0 or name not in metrics.POSITIVE_ONLY:
            out[name] = value
    return out


def _row(
    cells: dict[str, str], status: str, reason: str, values: dict[str, float | str] | None = None
) -> dict[str, str]:
    row = dict(cells)
    row["status"] = status
    row["reason"] = " ".join(reason.split())
    for name in metrics.RECORDED:
        row[name] = metrics.format_value((values or {}).get(name))
    if values and "num_chips" in values:
        row["num_chips"] = str(int(values["num_chips"]))
    return row


def _with_row(point: Point, row: dict[str, str]) -> Point:
    return Point(
        point.index, point.labels, point.text, point.point_id, point.workload_key, row, point.data
    )
