"""solver.cost.memo.value_key: a key by value that equals the plain repr of its arguments
(tuples, lists, dicts, frozen dataclasses nested in them), with each frozen dataclass's repr
kept per object, so equal values give equal keys and different values different ones."""

from __future__ import annotations

from dataclasses import dataclass

from solver.cost import memo


@dataclass(frozen=True)
class _Level:
    name: str
    curve: tuple[tuple[float, float], ...]


@dataclass
class _Open:  # not frozen: its repr is never kept
    x: list[int]


def test_keys_are_the_reprs_of_nested_values():
    level = _Level("l0", ((1.0, 0.5), (2.0, 0.75)))
    for value in [(), (1,), ((1,),), [1, (2,)], {"tp": ((level, 2),)}, 0.1 + 0.2, None, "s",
                  (level, {"k": [level]}), _Open([1])]:  # fmt: skip
        assert memo.value_key(value) == repr((value,))
    assert memo.value_key(1, "a", level) == repr((1, "a", level))


def test_a_frozen_dataclass_repr_is_kept_and_a_changed_open_one_is_not():
    level = _Level("l0", ((1.0, 0.5),))
    first = memo.value_key(level)
    assert memo._REPRS[id(level)] == (level, repr(level))
    assert memo.value_key(_Level("l0", ((1.0, 0.5),))) == first  # equal value, other object
    assert memo.value_key(_Level("l1", ((1.0, 0.5),))) != first
    box = _Open([1])
    before = memo.value_key(box)
    box.x.append(2)
    assert memo.value_key(box) != before
    memo.clear()
    assert not memo._REPRS
