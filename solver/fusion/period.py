"""Repetition in a problem's kernel order: L copies of one layer in one graph.

A whole model in one DATAFLOW graph repeats its layer, so in a periodic kernel order kernel
k + p looks exactly like kernel k: the same menu (names and weight identities aside, which
differ per layer by construction) and the same edges, shifted by p. Work that depends only
on what a range of kernels looks like (a segment's exact price, solver/fusion/segment_price)
is then done once per distinct range and copied: a reuse, never an approximation, since it
is only made where the two ranges are equal field by field.

Two notions, both exact comparisons of every field the solver reads:
- `find_period`: the smallest p with kernel k + p equal to kernel k for every k in
  [p, n - p) (the first layer may differ; edges leaving the graph's end are cut off);
- `Periodicity.same_as_next[k]`: kernel k and kernel k + p are equal with nothing cut off
  (their whole neighbourhoods, in and out, shifted): what a copied price needs.
`likely_period` is the fallback hint when a few layers differ (each layer took its own
shardings): copies are then made between the layers that are equal.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, fields

import numpy as np

from solver.cost.problem import EdgeCost, KernelMenu, MappingProblem, Option

_FIELDS: dict[type, tuple[str, ...]] = {}  # dataclass -> its field names, read once


def _field_names(obj: object) -> tuple[str, ...]:
    cls = type(obj)
    if cls not in _FIELDS:
        _FIELDS[cls] = tuple(f.name for f in fields(obj))
    return _FIELDS[cls]


def option_key(opt: Option, shardings: tuple[str, ...]) -> tuple:
    """Every field of an option (a field added later included) but its weight identities
    (kept: their sizes; the names of the weights it replicates, kept: their count) and its
    sharding's label (kept: its index in the kernel's menu; a
    label may name a dimension after its kernel, and the solver only compares labels
    within one kernel)."""
    out = []
    for name in _field_names(opt):
        value = getattr(opt, name)
        if name == "sharding":
            value = shardings.index(value)
        elif name == "weights":
            value = tuple(size for _, size in value)
        elif name == "replicated":
            value = len(value)
        out.append(value)
    return tuple(out)


def menu_key(menu: KernelMenu, seen: dict[tuple[int, int], tuple] | None = None) -> tuple:
    """A kernel's menu, every field but its name (a layer's copies differ in names only).
    `seen`: option keys by (id(option), id(shardings)), shared by the calls of one pass
    over live menus (a layer's copies often share their Option objects)."""
    out = []
    for name in _field_names(menu):
        value = getattr(menu, name)
        if name == "name":
            continue
        if name == "options":
            if seen is None:
                value = tuple(option_key(o, menu.shardings) for o in value)
            else:
                value = tuple(_seen_key(o, menu.shardings, seen) for o in value)
        elif name == "shardings":
            value = len(value)
        elif name == "tile_groups":
            # the sampled tiles (options) fix the shapes the groups are cut from; the
            # group sizes tell the operand statuses apart, without hashing every tile
            on = {s: i for i, s in enumerate(menu.shardings)}  # a restricted menu: its own
            value = tuple((on[g.sharding], len(g.tiles)) for g in value if g.sharding in on)
        out.append(value)
    return tuple(out)


def _seen_key(opt: Option, shardings: tuple[str, ...], seen: dict) -> tuple:
    key = (id(opt), id(shardings))
    if key not in seen:
        seen[key] = option_key(opt, shardings)
    return seen[key]


_MENU_IDS: list[tuple[weakref.ref, np.ndarray]] = []  # the last few problems'


def menu_ids(problem: MappingProblem) -> np.ndarray:
    """ids[k]: equal for kernels with equal menu_key, computed once per problem object
    (the period search, the copy checks and the bridge DP all read them)."""
    for ref, ids in _MENU_IDS:
        if ref() is problem:
            return ids
    index: dict[tuple, int] = {}
    seen: dict[tuple[int, int], tuple] = {}
    ids = np.array([index.setdefault(menu_key(m, seen), len(index)) for m in problem.kernels])
    _MENU_IDS[:] = [(weakref.ref(problem), ids)] + _MENU_IDS[:3]
    return ids


class _Edges:
    """Each kernel's edges, in and out (wrap edges included), in the problem's edge order,
    with each conversion group's members."""

    def __init__(self, problem: MappingProblem):
        n = len(problem.kernels)
        self.ins: list[list[EdgeCost]] = [[] for _ in range(n)]
        self.outs: list[list[EdgeCost]] = [[] for _ in range(n)]
        self.groups: dict[int, list[EdgeCost]] = {}
        for e in problem.edges:
            self.ins[e.dst].append(e)
            self.outs[e.src].append(e)
            if e.group >= 0:
                self.groups.setdefault(e.group, []).append(e)

    def edge_key(self, e: EdgeCost, k: int, limit: int) -> tuple:
        """Edge e seen from kernel k: ends relative to k, every cost field, and its group's
        members (relative to k, in edge order; those at or beyond `limit` left out)."""
        members = ()
        if e.group >= 0:
            members = tuple(
                (f.dst - k, f.dst_operand, f.layouts, f.conv, f.lead, f.saved, f.wrap)
                for f in self.groups[e.group]
                if f.dst < limit
            )
        return (e.src - k, e.dst - k, e.dst_operand, e.conv, e.saved, e.wrap, e.layouts, members)

    def view(self, k: int, limit: int) -> tuple:
        """Kernel k's edges, out-edges to kernels at or beyond `limit` left out."""
        ins = tuple(self.edge_key(e, k, limit) for e in self.ins[k])
        outs = tuple(self.edge_key(e, k, limit) for e in self.outs[k] if e.dst < limit)
        return ins, outs


def find_period(problem: MappingProblem) -> int | None:
    """The smallest p (2p < n, so that something is compared) such that kernel k + p is
    kernel k shifted for every k in [p, n - p): equal menus and equal edges, edges past
    the end cut off. None when there is none."""
    n = len(problem.kernels)
    if n < 4:
        return None
    menu_id = menu_ids(problem)
    edges = _Edges(problem)
    for p in range(1, (n - 1) // 2 + 1):
        if not np.array_equal(menu_id[2 * p :], menu_id[p : n - p]):
            continue
        cut = n - p  # kernel k's edges as far as k + p's can reach
        # views are relative to their kernel: k's and k + p's compare as they are
        if all(edges.view(k + p, n) == edges.view(k, cut) for k in range(p, n - p)):
            return p
    return None


@dataclass(frozen=True)
class Periodicity:
    """A period p and, per kernel k < n - p, whether k and k + p are equal with nothing
    cut off (same menu, same edges both ways, same groups)."""

    period: int
    same_as_next: tuple[bool, ...]

    def copyable(self, start: int, stop: int) -> bool:
        """Every kernel in [start, stop) equals its copy p later."""
        return all(self.same_as_next[start:stop])


def likely_period(problem: MappingProblem) -> int | None:
    """The smallest p under which at least half of the kernels k in [0, n - p) have the
    same menu as kernel k + p: the layer length of a model whose layers took different
    shardings here and there (a restricted problem of the alternation), where
    `find_period` finds none. A hint only: copies still check every kernel."""
    n = len(problem.kernels)
    menu_id = menu_ids(problem)
    for p in range(1, (n - 1) // 2 + 1):
        if 2 * int(np.count_nonzero(menu_id[p:] == menu_id[:-p])) >= n - p:
            return p
    return None


def periodicity(problem: MappingProblem) -> Periodicity | None:
    """The problem's period (strict, else likely) with the exact kernel-by-kernel equality
    a copy needs; None when there is none or no kernel equals its copy."""
    p = find_period(problem) or likely_period(problem)
    if p is None:
        return None
    n = len(problem.kernels)
    menus = menu_ids(problem)
    edges = _Edges(problem)
    big = 2 * n  # no cut: every edge and group member counts
    same = tuple(
        bool(menus[k] == menus[k + p]) and edges.view(k, big) == edges.view(k + p, big)
        for k in range(n - p)
    )
    return Periodicity(p, same) if any(same) else None
