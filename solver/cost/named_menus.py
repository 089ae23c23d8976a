"""Kernel menus memoised by value with the kernel's name left out.

L copies of a layer in one graph (generator.chain) differ in kernel names only, and a menu
depends on a name through two things alone: the menu's own name and its weights'
identities (solver.cost.weights.weight_id: the forward kernel that owns the weight, then
the operand). So the menu of a stand-in kernel, named by the part of the name that is not
its owner (a reader's suffix such as `_recompute`, `_bwd`), is built once and memoised
(solver.cost.memo), and each copy gets its own name and weight identities back. A test
compares every menu of chained layers with the menu built fresh.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from generator.graph import Kernel
from solver.cost import memo
from solver.cost.problem import KernelMenu
from solver.cost.weights import weight_owner

STAND_IN = "\x00"  # the owner part of a stand-in kernel's name (no real name has it)


def menu_by_value(
    kernel: Kernel, make: Callable[..., KernelMenu], key: tuple, args: tuple
) -> KernelMenu:
    """`make(kernel, *args)` memoised under (the kernel with its owner's name replaced,
    *key): `key` holds, by value, every argument in `args` the menu depends on."""
    owner = weight_owner(kernel.name)
    if not owner or STAND_IN in kernel.name or not kernel.name.startswith(owner):
        return memo.MENUS.get((kernel, *key), make, kernel, *args)
    named = memo.MENUS.find((kernel, *key))  # the same object point after point
    if named is not None:
        return named
    stand_in = kernel.renamed(STAND_IN + kernel.name[len(owner) :])
    named = _named(memo.MENUS.get((stand_in, *key), make, stand_in, *args), kernel.name, owner)
    memo.MENUS.put((kernel, *key), named)
    return named


def _named(menu: KernelMenu, name: str, owner: str) -> KernelMenu:
    """The stand-in's `menu` as kernel `name`'s, whose weights `owner` owns."""

    real: dict[str, str] = {}  # the few weights the options name, each renamed once
    for o in menu.options:
        for w in (*(w for w, _ in o.weights), *o.replicated):
            if w not in real:
                real[w] = owner + w[len(STAND_IN) :] if w.startswith(STAND_IN) else w
    options = tuple(
        o.but(
            weights=tuple((real[w], size) for w, size in o.weights),
            replicated=tuple(real[w] for w in o.replicated),
        )
        if o.weights or o.replicated
        else o
        for o in menu.options
    )
    return replace(menu, name=name, options=options)
