"""The collector of validation problems: one message per field path, each saying what is
wrong, the value given and what is valid. Shared by every validation module of the schema
(schema.validation, validation_graph, validation_stream)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from google.protobuf.message import Message


class Problems:
    """Collects one message per field path (the first, most specific one wins)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []
        self.seen: set[str] = set()

    def add(self, field: str, wrong: str, got: object, valid: str) -> None:
        if field not in self.seen:
            self.seen.add(field)
            self.problems.append(f"{self.path}: {field} {wrong}, got {_fmt(got)}; {valid}")

    def positive(self, msg: Message, prefix: str, names: str, why: str = "") -> None:
        """Each of the space-separated fields `names` of `msg` must be > 0 (ints: >= 1)."""
        for name in names.split():
            value = getattr(msg, name)
            if not value > 0:
                low = "> 0" if isinstance(value, float) else ">= 1"
                self.add(f"{prefix}.{name}", f"must be {low}{why}", value, "give a positive size")

    def fraction(self, field: str, value: float, low_closed: bool, zero_unset: bool) -> None:
        """value in [0, 1) (low_closed) or (0, 1]; with zero_unset, 0 means the default."""
        if zero_unset and value == 0:
            return
        if not (0 <= value < 1 if low_closed else 0 < value <= 1):
            rng = "[0, 1)" if low_closed else "(0, 1]"
            unset = " (0 = default)" if zero_unset else ""
            self.add(field, f"is outside {rng}", value, f"give a fraction in {rng}{unset}")


class Said(str):
    """A description in place of a value ("nothing", "both"): printed without quotes."""


NOTHING, BOTH, NONE = Said("nothing"), Said("both"), Said("none")


def _fmt(value: object) -> str:
    if isinstance(value, Said):
        return str(value)
    if isinstance(value, str):  # quoted and escaped: a message stays one line
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value)) if abs(value) < 1e16 else repr(value)
    return str(value)
