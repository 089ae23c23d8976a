"""Outer choices: parallel degrees and their placement on the topology levels.

Each choice fixes every collective time, shard size and pipeline factor, so the inner MILP
stays linear (DESIGN.md 1). Groups are nested innermost-first in a placement order (e.g.
TP, DP, PP): a group of degree d takes whole levels or a divisor of the next level.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from hardware.system import NetworkLevel, System

Span = tuple[tuple[NetworkLevel, int], ...]
# innermost first; EP (carved from the data-parallel ranks) sits between CP and DP, as in
# Megatron-LM's default rank order tp-cp-ep-dp-pp
ORDERS = (("TP", "CP", "EP", "DP", "PP"), ("TP", "CP", "EP", "PP", "DP"))


@dataclass(frozen=True)
class Choice:
    degrees: tuple[tuple[str, int], ...]  # (("TP", 8), ("PP", 4), ("DP", 2))
    spans: tuple[tuple[str, Span], ...]
    levels: tuple[NetworkLevel, ...]  # the topology with every degree set

    def degree(self, name: str) -> int:
        return dict(self.degrees).get(name, 1)

    def span(self, name: str) -> Span:
        return dict(self.spans).get(name, ())

    def data_ranks(self) -> int:
        """Ranks that each run their own micro-batches: DP x EP (EP ranks are data-parallel
        for everything but the experts they split)."""
        return self.degree("DP") * self.degree("EP")

    def weight_replicas(self) -> int:
        """Ranks holding the same dense weights, over which gradients reduce and ZeRO
        shards: DP x EP x CP (CP ranks split sequences, not weights)."""
        return self.data_ranks() * self.degree("CP")

    def describe(self) -> str:
        parts = []
        for name, span in self.spans:
            if span:
                parts.append(name + "=" + "x".join(f"{lv.name}:{p}" for lv, p in span))
        return ", ".join(parts) or "single chip"


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def level_shapes(system: System) -> list[tuple[NetworkLevel, ...]]:
    """Every way to set the unset level degrees so their product is the chip count."""
    levels = system.network
    if not levels:
        return [()]
    known = math.prod(lv.degree for lv in levels if lv.degree > 0)
    free = [i for i, lv in enumerate(levels) if lv.degree <= 0]
    if system.num_chips % known:
        return []
    rest = system.num_chips // known
    shapes = []
    for combo in _factorizations(rest, len(free)):
        lv = list(levels)
        for i, d in zip(free, combo):
            lv[i] = _with_degree(levels[i], d)
        shapes.append(tuple(lv))
    return shapes


def _with_degree(level: NetworkLevel, degree: int) -> NetworkLevel:
    return replace(level, degree=degree)


def _factorizations(n: int, parts: int) -> list[tuple[int, ...]]:
    if parts == 0:
        return [()] if n == 1 else []
    if parts == 1:
        return [(n,)]
    out = []
    for d in divisors(n):
        for rest in _factorizations(n // d, parts - 1):
            out.append((d, *rest))
    return out


def place(
    levels: tuple[NetworkLevel, ...], order: tuple[str, ...], degrees: dict[str, int]
) -> tuple[tuple[str, Span], ...] | None:
    """Nest the groups innermost-first over the levels; None when a group would straddle a
    level boundary without dividing it."""
    remaining = [lv.degree for lv in levels]
    li = 0
    spans = []
    for name in order:
        d = degrees.get(name, 1)
        span: list[tuple[NetworkLevel, int]] = []
        while d > 1:
            while li < len(levels) and remaining[li] == 1:
                li += 1
            if li >= len(levels):
                return None
            take = math.gcd(d, remaining[li])
            if take == 1:
                return None
            if take < d and take < remaining[li]:
                return None  # would straddle: group not aligned to levels
            span.append((levels[li], take))
            remaining[li] //= take
            d //= take
        spans.append((name, tuple(span)))
    return tuple(spans)


def tagged_degrees(levels: tuple[NetworkLevel, ...]) -> dict[str, int] | None:
    """Degrees fixed by the levels' parallelism tags, or None when any level is untagged."""
    if not levels or any(not lv.parallelism for lv in levels):
        return None
    degrees: dict[str, int] = {}
    for lv in levels:
        if len(lv.parallelism) == 1:
            name = lv.parallelism[0]
            degrees[name] = degrees.get(name, 1) * lv.degree
        else:
            return None
    return degrees


def tagged_spans(levels: tuple[NetworkLevel, ...]) -> tuple[tuple[str, Span], ...]:
    spans: dict[str, list[tuple[NetworkLevel, int]]] = {}
    for lv in levels:
        spans.setdefault(lv.parallelism[0], []).append((lv, lv.degree))
    return tuple((name, tuple(s)) for name, s in sorted(spans.items()))


def enumerate_choices(
    system: System,
    max_tp: int,
    max_pp: int,
    max_dp: int,
    allow_dp: bool = True,
    cp: int = 1,
    ep: int = 1,
    tp_fits: Callable[[int], bool] | None = None,
) -> list[Choice]:
    """All (degrees, placement) choices; fixed ones when every level carries a tag. `cp`,
    `ep`: the workload's context- and expert-parallel degrees, placed next to TP (Megatron-
    LM's rank order TP, CP, EP, DP, PP) when the degrees are searched; `tp_fits`: which
    searched TP degrees the model can take (solver.search.degrees.tp_fits; None: all)."""
    choices: list[Choice] = []
    seen: set[tuple] = set()
    for levels in level_shapes(system):
        fixed = tagged_degrees(levels)
        if fixed is not None:
            deg = {k: fixed.get(k, 1) for k in ("TP", "PP", "DP", "EP", "CP")}
            key = (tuple(sorted(deg.items())), tuple(lv.degree for lv in levels))
            if key not in seen:
                seen.add(key)
                choices.append(Choice(tuple(sorted(deg.items())), tagged_spans(levels), levels))
            continue
        if system.num_chips % (cp * ep):
            continue
        n = system.num_chips // (cp * ep)
        for tp, pp in itertools.product(divisors(n), repeat=2):
            if n % (tp * pp):
                continue
            dp = n // (tp * pp)
            ranks = dp * ep
            if tp > max_tp or pp > max_pp or ranks > max_dp or (ranks > 1 and not allow_dp):
                continue
            if tp_fits is not None and not tp_fits(tp):
                continue
            deg = {"TP": tp, "PP": pp, "DP": dp, "CP": cp, "EP": ep}
            for order in ORDERS:
                spans = place(levels, order, deg)
                if spans is None:
                    continue
                key = (tuple(sorted(deg.items())), spans_key(spans))
                if key in seen:
                    continue
                seen.add(key)
                choices.append(Choice(tuple(sorted(deg.items())), spans, levels))
    return choices


def spans_key(spans) -> tuple:
    return tuple(
        sorted(
            (name, tuple((lv.name, lv.degree, p) for lv, p in span)) for name, span in spans if span
        )
    )
