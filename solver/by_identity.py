"""Results computed once per problem object, by its identity, and dropped with it.

A search asks the same question of the same problem from several places (the first plan
and the search its least-SRAM cut, the valve's bound and the refinement's first round
their relaxed problem, the fusion search's many MILPs a kernel's terms in one operand
status); a problem is a large frozen value, so hashing it would cost more than the
answer: the key is the object itself, held weakly.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class ByIdentity(Generic[T]):
    """One value per live object (keyed by `id`, checked against a weak reference);
    `size` > 0 keeps only the latest that many (a large value needed briefly)."""

    def __init__(self, size: int = 0) -> None:
        self._entries: dict[int, tuple[weakref.ref, T]] = {}
        self._size = size

    def get(self, obj: object, compute: Callable[[], T]) -> T:
        key = id(obj)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is obj:
            return entry[1]
        value = compute()
        self._entries.pop(key, None)  # a dead object's id, reused: the new entry goes last
        self._entries[key] = (weakref.ref(obj, lambda _: self._entries.pop(key, None)), value)
        while 0 < self._size < len(self._entries):
            self._entries.pop(next(iter(self._entries)))
        return value
