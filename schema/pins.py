"""The words of a pinned mapping (setup.proto Execution.placement, KernelPin), parsed here at
the bottom so validation, the generator that applies the pins, the solver that honours the
placement and plan.txt that writes both read and write one syntax.

A placement is "NAME=level:p[xlevel:p...]" per parallelism, comma separated, e.g.
"TP=scale_up:4, DP=scale_up:2xscale_out:8, PP=scale_out:16": the same words as
summary.json's `placement` and the report's choices (solver.search.parallel.Choice.describe).
A sharding is "none", a loop dim, or "<dim>+rs"."""

from __future__ import annotations

import math
import re

PARALLELISMS = ("TP", "PP", "DP", "EP", "CP")
NESTING = ("TP", "CP", "EP", "DP", "PP")  # innermost first (Megatron-LM's rank order)
SINGLE_CHIP = "single chip"  # Choice.describe() of a choice without any group
PLACEMENT_SYNTAX = (
    '"TP=scale_up:4, DP=scale_up:2xscale_out:8, PP=scale_out:16" (each parallelism with the '
    'topology levels it spans, "level:chips" joined by "x"; "single chip" on one chip; empty '
    "= searched)"
)
REDUCE_SCATTER = "+rs"  # a reduction dim split, the partial sums reduce-scattered
_PART = re.compile(r"([^:,]+?):([0-9]+)(?:x(?=.)|$)")
_ENTRY = re.compile(r"^\s*([A-Za-z]+)\s*=\s*(\S.*?)\s*$")
_SHARDING = re.compile(r"^[^\s+,]+(\+rs)?$")

# a placement: parallelism -> ((level name, chips of it), ...), innermost level first
Placement = dict[str, tuple[tuple[str, int], ...]]


def parse_placement(text: str) -> Placement | None:
    """The pinned placement (degree-1 groups left out; {} for "single chip"), or None when
    `text` is not one (the caller says what is valid)."""
    text = text.strip()
    if text.lower() == SINGLE_CHIP:
        return {}
    out: Placement = {}
    for entry in text.split(","):
        match = _ENTRY.match(entry)
        if match is None:
            return None
        name, span = match.group(1).upper(), match.group(2)
        parts = _PART.findall(span)
        rebuilt = "x".join(f"{level}:{p}" for level, p in parts)
        if name not in PARALLELISMS or name in out or rebuilt != span:
            return None
        levels = [level for level, _ in parts]
        if len(set(levels)) != len(levels) or any(int(p) < 1 for _, p in parts):
            return None
        kept = tuple((level.strip(), int(p)) for level, p in parts if int(p) > 1)
        if kept:
            out[name] = kept
    return out


def placement_text(placement: Placement) -> str:
    """The words of a placement, the groups innermost first (NESTING)."""
    entries = [
        f"{name}=" + "x".join(f"{level}:{p}" for level, p in placement[name])
        for name in NESTING
        if placement.get(name)
    ]
    return ", ".join(entries) or SINGLE_CHIP


def placement_key(placement: Placement) -> frozenset:
    """What identifies a placement: each group's set of (level, chips); two placements with
    the same key place every group on the same chips of the same levels (the order of the
    groups within a level changes no collective: solver.search.parallel.spans_key)."""
    return frozenset((name, frozenset(span)) for name, span in placement.items() if span)


def placement_degrees(placement: Placement) -> dict[str, int]:
    """The degree of each parallelism a placement pins (absent ones are 1)."""
    return {name: math.prod(p for _, p in span) for name, span in placement.items()}


def is_sharding(text: str) -> bool:
    """A sharding's syntax: "none", a loop dim or "<dim>+rs" (the dims are the kernel's)."""
    return bool(_SHARDING.match(text))


def split_dim(sharding: str) -> str:
    """The loop dim a sharding splits ("none" for a replicated kernel)."""
    return sharding.removesuffix(REDUCE_SCATTER)
