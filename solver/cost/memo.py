"""Per-process memo of the cost model's pure tables (kernel menus, layout-conversion tables).

Why: the points of a sweep rebuild the same tables over and over (a decode GEMM's menu does
not depend on the context length; every length pair of a sweep on one chip and TP degree
rebuilds it). Each table is a pure function of its arguments, so it is kept under a key
made of every argument it reads, compared by value: a hit returns exactly what the
function would have computed, and two inputs that differ in any field never share an entry
(at worst equal inputs written differently miss, which only costs the rebuild).

Bounded (least recently used entries go first), so a long-lived sweep worker's memory stays
flat; `set_enabled(False)` recomputes everything (the plain path, for A/B tests) and
`restore()` returns every memo to its default.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class Memo:
    """A bounded least-recently-used map from a value key to a computed table. `size`
    bounds the total `weight` of the entries kept (1 per entry unless `weight` says, e.g.
    a menu's option count: memory follows options, about 2 kB each)."""

    def __init__(self, size: int, enabled: bool = True, weight: Callable[[Any], int] | None = None):
        self.size = size
        self.default = enabled  # what `restore()` switches it back to
        self.enabled = enabled
        self.weight = weight or (lambda value: 1)
        self.hits = 0
        self.misses = 0
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._total = 0
        ALL.append(self)  # for clear() and set_enabled()

    def get(self, key: Hashable, make: Callable[..., Any], *args: Any) -> Any:
        """The table under `key`, computed by `make(*args)` on a miss."""
        value = self.find(key)
        if value is None:
            value = make(*args)
            self.put(key, value)
        return value

    def find(self, key: Hashable) -> Any:
        """The value under `key`, or None (always None when switched off)."""
        if not self.enabled:
            return None
        entry = self._items.get(key)
        if entry is None:
            self.misses += 1
            return None
        self.hits += 1
        self._items.move_to_end(key)
        return entry[0]

    def put(self, key: Hashable, value: Any) -> None:
        """Keep `value` under `key`, dropping the least recently used entries over `size`."""
        if not self.enabled or value is None:
            return
        w = max(1, int(self.weight(value)))
        old = self._items.pop(key, None)
        self._total += w - (old[1] if old else 0)
        self._items[key] = (value, w)
        while self._total > self.size and len(self._items) > 1:
            _, (_, dropped) = self._items.popitem(last=False)
            self._total -= dropped

    def clear(self) -> None:
        self._items.clear()
        self._total = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)


ALL: list[Memo] = []  # every memo of the process (solver.search.solve_memo has one too)
# menus by option count: 50,000 options (about 100 MB; a kernel-by-kernel menu has a few
# options, a DATAFLOW one tens); a conversion table is a few hundred bytes
MENUS = Memo(50_000, weight=lambda menu: len(menu.options))
CONVERSIONS = Memo(16_384)
# whole phase problems (solver.search.phase_problem): a sweep's points on one chip ask for
# the same graph under the same layout again (batch 8 on two replicas is batch 4 on one)
PROBLEMS = Memo(256)
# one sharding's tiles of a kernel (solver.cost.tilings.tilings), by tile count: the same
# per-chip shape recurs under other TP degrees and on chips of equal SRAM
TILINGS = Memo(50_000, weight=len)


def value_key(*parts: object) -> str:
    """A key naming its arguments by value: the repr of frozen dataclasses, tuples and
    dicts of numbers and strings (floats repr exactly), e.g. a Chip with its dict of peaks.
    A frozen dataclass's repr is kept per object (`_value_repr`): a sweep's points on one
    system pass the same Chip and network levels again and again, and their reprs are most
    of the key's cost."""
    return _value_repr(parts)


_REPRS: dict[int, tuple[object, str]] = {}  # id -> (the object, kept alive; its repr)
_REPRS_SIZE = 256


def _value_repr(part: object) -> str:
    """repr(part), built the way repr builds tuples, lists and dicts, with each frozen
    dataclass instance's repr remembered (immutable: its repr cannot change; the entry
    holds the object, so its id is not reused while the entry lives)."""
    if type(part) is tuple:
        inner = ", ".join(_value_repr(x) for x in part)
        return f"({inner},)" if len(part) == 1 else f"({inner})"
    if type(part) is list:
        return "[" + ", ".join(_value_repr(x) for x in part) + "]"
    if type(part) is dict:
        return "{" + ", ".join(f"{_value_repr(k)}: {_value_repr(v)}" for k, v in part.items()) + "}"
    params = getattr(type(part), "__dataclass_params__", None)
    if params is None or not params.frozen:
        return repr(part)
    kept = _REPRS.get(id(part))
    if kept is not None and kept[0] is part:
        return kept[1]
    if len(_REPRS) >= _REPRS_SIZE:
        _REPRS.clear()
    text = repr(part)
    _REPRS[id(part)] = (part, text)
    return text


def clear() -> None:
    for memo in ALL:
        memo.clear()
    _REPRS.clear()


def set_enabled(enabled: bool) -> None:
    """Switch every memo on or off, emptied (off: each table is recomputed; A/B checks)."""
    for memo in ALL:
        memo.enabled = enabled
        memo.clear()


def restore() -> None:
    """Every memo emptied and back to its default (on, except opt-in ones)."""
    for memo in ALL:
        memo.enabled = memo.default
        memo.clear()


_PER_PHASES: dict[tuple[str, int], tuple[object, Any]] = {}
_PER_PHASES_SIZE = 512  # phase tuples held: a training search has a few hundred


def per_phases(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`fn(phases)` kept per phases tuple, by identity (the tuple is held, so its id cannot
    be reused while kept; phases and their graphs are frozen). Why: the outer search sums
    over a candidate's graphs (forward FLOP share, gradient bytes) once per candidate, tens
    of thousands of times per solve, over a few hundred distinct phase tuples."""

    def kept(phases: Any) -> Any:
        key = (fn.__qualname__, id(phases))
        hit = _PER_PHASES.get(key)
        if hit is not None and hit[0] is phases:
            return hit[1]
        if len(_PER_PHASES) >= _PER_PHASES_SIZE:
            _PER_PHASES.clear()
        value = fn(phases)
        _PER_PHASES[key] = (phases, value)
        return value

    kept.__doc__, kept.__name__, kept.__qualname__ = fn.__doc__, fn.__name__, fn.__qualname__
    return kept
