"""The hardware library: chip specs (`hardware/chips/*.txt`, `ChipSpec`) and system presets
(`hardware/systems/*.txt`, `SystemPreset`), plus a user's spreadsheet of chips.

Presets are files, not dicts built at import: every number carries its source in a `#`
comment, and `format_show` prints those comments next to the values. The files are found
through `importlib.resources`, so the library works from an installed package, and parsed
once per process.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from google.protobuf import message as _message

from hardware.calibration import calibration_of
from schema import dtypes, setup_pb2
from schema.errors import SetupError
from schema.setup_io import parse_text

# Precisions with an explicit `<p>_tflops` field in `Accelerator`, widest first.
PRECISIONS = dtypes.PRECISIONS  # the one precision vocabulary (schema.dtypes)


@dataclass(frozen=True)
class _Entry:
    """One parsed library file: the message, where it came from and its text (for comments)."""

    message: _message.Message
    path: str
    text: str


def normalize(name: str) -> str:
    """Lookup key of a name: case, spaces, '-' and '_' do not matter ("tpu v4" == "TPUv4")."""
    return re.sub(r"[\s_\-]+", "", name).lower()


# ---------------------------------------------------------------------------------------
# Loading (cached)
# ---------------------------------------------------------------------------------------


def _files(folder: str) -> list[tuple[str, str, str]]:
    """(stem, display path, text) of every .txt under hardware/<folder>, sorted by name."""
    root = resources.files(__package__ or "hardware").joinpath(folder)
    out = []
    for item in root.iterdir():
        if item.name.endswith(".txt") and item.is_file():
            out.append((item.name[: -len(".txt")], str(item), item.read_text(encoding="utf-8")))
    return sorted(out)


def _load(folder: str, factory: type) -> tuple[dict[str, _Entry], dict[str, str]]:
    """Parse every file of a folder; return entries by canonical name and a lookup index
    (normalized name or alias -> canonical name). Raises SetupError listing every problem."""
    entries: dict[str, _Entry] = {}
    index: dict[str, str] = {}
    problems: list[str] = []
    for stem, path, text in _files(folder):
        msg = factory()
        try:
            parse_text(text, msg, Path(path))
        except SetupError as exc:
            problems.extend(exc.problems)
            continue
        if not msg.name:
            problems.append(f'{path}: name is empty; set name: "{stem}"')
            continue
        if msg.name != stem:
            problems.append(f'{path}: name "{msg.name}" differs from the file name; rename one')
        aliases = list(getattr(msg, "aliases", []))
        for key_name in [msg.name, *aliases]:
            key = normalize(key_name)
            if key in index and index[key] != msg.name:
                problems.append(
                    f'{path}: "{key_name}" is already a name or alias of "{index[key]}"'
                )
                continue
            index[key] = msg.name
        entries[msg.name] = _Entry(msg, path, text)
    if problems:
        raise SetupError(problems)
    return entries, index


@functools.cache
def _chips() -> tuple[dict[str, _Entry], dict[str, str]]:
    return _load("chips", setup_pb2.ChipSpec)


@functools.cache
def _presets() -> tuple[dict[str, _Entry], dict[str, str]]:
    entries, index = _load("systems", setup_pb2.SystemPreset)
    _, chip_index = _chips()
    problems = [
        f'{e.path}: chip "{e.message.chip}" is not in hardware/chips'
        for e in entries.values()
        if normalize(e.message.chip) not in chip_index
    ]
    if problems:
        raise SetupError(problems)
    return entries, index


def chip_names() -> list[str]:
    """Canonical names of every library chip, sorted."""
    return sorted(_chips()[0])


def preset_names() -> list[str]:
    """Names of every system preset, sorted."""
    return sorted(_presets()[0])


def find_chip(name: str) -> setup_pb2.ChipSpec | None:
    """The library chip called `name` (any case, or an alias), as a copy; None if unknown."""
    entries, index = _chips()
    canonical = index.get(normalize(name))
    if canonical is None:
        return None
    spec = setup_pb2.ChipSpec()
    spec.CopyFrom(entries[canonical].message)
    return spec


def get_chip(name: str) -> setup_pb2.ChipSpec:
    """The library chip called `name`; SetupError naming the closest chips if unknown."""
    spec = find_chip(name)
    if spec is None:
        raise SetupError(f'unknown chip "{name}"{_did_you_mean(closest_names(name))}')
    return spec


def find_preset(name: str) -> setup_pb2.SystemPreset | None:
    """The system preset called `name` (any case), as a copy; None if unknown."""
    entries, index = _presets()
    canonical = index.get(normalize(name))
    if canonical is None:
        return None
    preset = setup_pb2.SystemPreset()
    preset.CopyFrom(entries[canonical].message)
    return preset


def get_preset(name: str) -> setup_pb2.SystemPreset:
    """The system preset called `name`; SetupError naming the closest presets if unknown."""
    preset = find_preset(name)
    if preset is None:
        near = closest_names(name, preset_names())
        raise SetupError(f'unknown system preset "{name}"{_did_you_mean(near)}')
    return preset


def closest_names(name: str, names: Iterable[str] | None = None) -> list[str]:
    """Up to 3 names nearest to `name`: library chips (and their aliases) by default.

    Names that contain the query (so "A100" finds both A100s), else difflib's close
    matches on the normalized spelling.
    """
    if names is None:
        _, index = _chips()
        keys = dict(index)
    else:
        keys = {normalize(n): n for n in names}
    query = normalize(name)
    contains = [k for k in keys if len(query) >= 2 and (query in k or (len(k) >= 3 and k in query))]
    if contains:
        contains.sort(key=lambda k: -difflib.SequenceMatcher(None, query, k).ratio())
        found = [keys[k] for k in contains]
    else:
        found = [keys[k] for k in difflib.get_close_matches(query, list(keys), n=5, cutoff=0.5)]
    return list(dict.fromkeys(found))[:3]


def _did_you_mean(names: list[str]) -> str:
    if not names:
        return "; `mapshard hardware list` shows the library"
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"; did you mean {quoted}? (`mapshard hardware list` shows the library)"


# ---------------------------------------------------------------------------------------
# Peak FLOP/s (shared with hardware.resolve)
# ---------------------------------------------------------------------------------------


def systolic_flops(acc: setup_pb2.Accelerator) -> float:
    """DFModel's peak: core * systolic_width * systolic_height * 2 * freq (FLOP/s); 0 if any
    of the four is missing."""
    if min(acc.core, acc.systolic_width, acc.systolic_height) <= 0 or acc.freq <= 0:
        return 0.0
    return acc.core * acc.systolic_width * acc.systolic_height * 2.0 * acc.freq * 1e9


def peak_flops(acc: setup_pb2.Accelerator) -> dict[str, float]:
    """Dense peak FLOP/s per precision. Explicit `*_tflops` fields win; a chip described only
    by its systolic array (DFModel style) gets that peak for bf16 and fp16."""
    peaks = {
        p: getattr(acc, f"{p}_tflops") * 1e12 for p in PRECISIONS if getattr(acc, f"{p}_tflops") > 0
    }
    if not peaks:
        systolic = systolic_flops(acc)
        if systolic > 0:
            peaks = {"bf16": systolic, "fp16": systolic}
    return peaks


# ---------------------------------------------------------------------------------------
# Listing and showing
# ---------------------------------------------------------------------------------------


def _fmt(value: float, digits: int = 1) -> str:
    if value <= 0:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:,.{digits}f}"


def format_list() -> str:
    """A table of every library chip (bf16 peak, memory, bandwidth, SRAM, TDP) and preset."""
    header = ("name", "bf16 TFLOP/s", "memory GiB", "mem TB/s", "SRAM MiB", "TDP W", "calibration")
    rows = [header]
    for name in chip_names():
        spec = _chips()[0][name].message
        peaks = peak_flops(spec.accelerator)
        bf16 = peaks.get("bf16", peaks.get("fp16", 0.0))
        rows.append(
            (
                name,
                _fmt(bf16 / 1e12),
                _fmt(spec.memory.dram_cap / 2**30),
                _fmt(spec.memory.dram_bw / 1e3, 2),
                _fmt(spec.accelerator.sram_cap / 2**20),
                _fmt(spec.tdp_W, 0),
                calibration_of(spec.accelerator.efficiency).status,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append("bf16 column: fp16 where no bf16 is published; '-' = not published.")
    lines.append(
        "calibration: 'calibrated' = efficiency fitted to cited public measurements "
        "(`mapshard hardware show NAME` lists which parts); 'uncalibrated' = every kernel at "
        "100% of peak with no overhead, an upper bound on speed rather than a prediction."
    )
    lines.append("")
    lines.append("system presets:")
    for name in preset_names():
        p = _presets()[0][name].message
        lines.append(f"  {name:<14} {p.num_chip:>5} x {p.chip:<16} {p.description}")
    return "\n".join(lines)


_FIELD = re.compile(r"^(\w+)\s*:\s*(.*)$")
_OPEN = re.compile(r"^(\w+)\s*:?\s*\{$")


def _split_comment(line: str) -> tuple[str, str]:
    """Split `code  # comment` at the first '#' outside a quoted string."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i].strip(), line[i + 1 :].strip()
    return line.strip(), ""


def _annotated_fields(text: str) -> list[tuple[str, str, str]]:
    """(field path, value, source comment) for every field line of a library file, and
    ("#", "", comment) for comment lines inside messages (notes such as derivations)."""
    out: list[tuple[str, str, str]] = []
    stack: list[str] = []
    for raw in text.splitlines():
        code, comment = _split_comment(raw)
        opened = _OPEN.match(code)
        if opened:
            stack.append(opened.group(1))
        elif code == "}":
            if stack:
                stack.pop()
        elif (field := _FIELD.match(code)) is not None:
            out.append((".".join([*stack, field.group(1)]), field.group(2), comment))
        elif not code and comment and stack:
            out.append(("#", "", comment))
    return out


def format_show(name: str) -> str:
    """Every field of one chip (or preset) with the source written beside it in its file."""
    chip = find_chip(name)
    if chip is None and find_preset(name) is not None:
        preset = find_preset(name)
        assert preset is not None
        entry = _presets()[0][preset.name]
        title = f"{preset.name}: {preset.num_chip} x {preset.chip} - {preset.description}"
    elif chip is not None:
        entry = _chips()[0][chip.name]
        title = f"{chip.name} ({chip.vendor})"
    else:
        near = closest_names(name) + closest_names(name, preset_names())
        raise SetupError(f'unknown chip or preset "{name}"{_did_you_mean(near)}')
    lines = [title, f"file: {entry.path}"]
    if chip is not None:
        peaks = peak_flops(chip.accelerator)
        derived = ", ".join(f"{p} {v / 1e12:,.1f}" for p, v in peaks.items())
        lines.append(f"peak dense TFLOP/s: {derived or 'none'}")
        lines.append(f"calibration: {calibration_of(chip.accelerator.efficiency).describe()}")
    lines.append("")
    fields = _annotated_fields(entry.text)
    widths = [len(f"{p} = {v}") for p, v, _ in fields if p != "#"]
    width = min(max(widths, default=0), 44)  # long strings (sources) do not widen the column
    for path, value, comment in fields:
        if path == "#":
            lines.append(f"  # {comment}")
        else:
            item = f"{path} = {value}"
            lines.append(f"  {item:<{width}}  [{comment}]" if comment else f"  {item}")
    return "\n".join(lines)
