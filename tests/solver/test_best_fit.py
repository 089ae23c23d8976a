"""frontier.best_fit: the kernel-by-kernel tile (least DRAM traffic in the buffer) found
without building the whole frontier must be exactly the point the frontier menu gives, and
its traffic the least over every integer tiling (enumerated here from DESIGN.md's formulas,
sharing no code with solver/cost/frontier.py)."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from solver.cost import frontier


def least_traffic(m: int, k: int, n: int, s: float) -> int | None:
    """min over every tiling family and every integer tile that fits S elements:
    output-stationary MN + MK*ceil(N/Tn) + KN*ceil(M/Tm) with Tm*Tn + Tm + Tn <= S,
    A-panel MK + MN + KN*ceil(M/Tm) with Tm*K + K + Tm <= S,
    B-panel KN + MN + MK*ceil(N/Tn) with Tn*K + K + Tn <= S."""
    best = None
    for tm, tn in itertools.product(range(1, m + 1), range(1, n + 1)):
        if tm * tn + tm + tn <= s:
            q = m * n + m * k * math.ceil(n / tn) + k * n * math.ceil(m / tm)
            best = q if best is None else min(best, q)
    for tm in range(1, m + 1):
        if tm * k + k + tm <= s:
            q = m * k + m * n + k * n * math.ceil(m / tm)
            best = q if best is None else min(best, q)
    for tn in range(1, n + 1):
        if tn * k + k + tn <= s:
            q = k * n + m * n + m * k * math.ceil(n / tn)
            best = q if best is None else min(best, q)
    return best


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 3, 7), (12, 2, 9), (16, 8, 16), (13, 5, 4)])
@pytest.mark.parametrize("s", [0, 2, 3, 8, 15, 40, 100, 1000])
def test_best_fit_is_least_traffic(m: int, k: int, n: int, s: float) -> None:
    got = frontier.best_fit(m, k, n, s)
    want = least_traffic(m, k, n, s)
    if want is None:
        assert got == ()
        return
    (point,) = got
    assert point.traffic == want
    assert point.buffer <= s
    assert point.traffic == point.a_traffic + point.b_traffic + point.c_traffic


def test_best_fit_equals_the_menu_point() -> None:
    """The identical TilePoint (family, tiles and buffer too) the menu's last point is,
    on small exhaustive shapes and random large ones (prefill-sized M included)."""
    rng = random.Random(7)
    cases = [
        (m, k, n, s)
        for m, k, n in itertools.product((1, 2, 3, 7, 12, 31), (1, 3, 8), (1, 2, 5, 11, 50))
        for s in (0, 1, 3, 7, 12.5, 20, 64, 500, 1e9)
    ]
    cases += [
        (rng.randint(1, 600_000), rng.randint(1, 8192), rng.randint(1, 30_000), s)
        for s in (2.0**20, 2.0**23, 1.3e7)
        for _ in range(10)
    ]
    for m, k, n, s in cases:
        assert frontier.best_fit(m, k, n, s) == tuple(frontier.menu(m, k, n, s, size=1)[-1:])
