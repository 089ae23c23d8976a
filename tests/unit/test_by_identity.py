"""solver.by_identity: one value per live object, computed once, dropped with the object."""

from __future__ import annotations

import gc

from solver.by_identity import ByIdentity


class Thing:
    """A stand-in for a problem: hashable by identity only, weakly referenceable."""


def test_a_value_is_computed_once_per_object_and_dropped_with_it():
    memo: ByIdentity[int] = ByIdentity()
    calls: list[int] = []
    a, b = Thing(), Thing()
    assert memo.get(a, lambda: calls.append(1) or 1) == 1
    assert memo.get(a, lambda: calls.append(2) or 2) == 1  # a's, not recomputed
    assert memo.get(b, lambda: calls.append(3) or 3) == 3
    assert calls == [1, 3]
    del a
    gc.collect()
    assert len(memo._entries) == 1  # a's entry went with a


def test_a_sized_memo_keeps_only_the_latest():
    memo: ByIdentity[str] = ByIdentity(size=1)
    a, b = Thing(), Thing()
    memo.get(a, lambda: "a")
    memo.get(b, lambda: "b")
    assert memo.get(a, lambda: "a again") == "a again"  # evicted by b, computed anew
    assert memo.get(a, lambda: "third") == "a again"
