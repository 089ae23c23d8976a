"""A MILP under a cutoff (solver.milp.linear.solve): the optimum whenever it lies below the
cutoff; otherwise no solution below it, and "infeasible" at once when the LP relaxation
alone proves that (no branch-and-bound). Checked against every assignment of small random
multiple-choice knapsacks (a segment price's shape: one option per kernel, a capacity row)."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

import pytest

from solver.milp.linear import LinearModel, solve


def _knapsack(seed: int) -> tuple[LinearModel, float]:
    """A random multiple-choice knapsack and its optimum by enumeration."""
    rng = random.Random(seed)
    m = LinearModel()
    groups = []
    for _ in range(rng.randint(3, 5)):
        cols = [(m.add_col(cost=rng.uniform(1, 10), upper=1, integer=True),
                 rng.uniform(1, 10)) for _ in range(rng.randint(2, 4))]  # fmt: skip
        m.add_row({c: 1.0 for c, _ in cols}, 1.0, 1.0)  # one option per group
        groups.append(cols)
    cap = sum(min(w for _, w in g) for g in groups) * rng.uniform(1.1, 1.6)
    m.add_row({c: w for g in groups for c, w in g}, upper=cap)
    best = min(
        (sum(m.cost[c] for c, _ in pick) for pick in itertools.product(*groups)
         if sum(w for _, w in pick) <= cap),
        default=float("inf"),
    )  # fmt: skip
    return m, best


@pytest.mark.parametrize("seed", range(30))
def test_cutoff_answers_match_enumeration(seed: int) -> None:
    model, best = _knapsack(seed)
    relaxed = replace(model, integer=[False] * len(model.integer))
    lp_bound = solve(relaxed, gap=0.0).objective
    assert lp_bound <= best * (1 + 1e-9)
    # below the LP bound (the relaxation alone rules it out), between the LP bound and the
    # optimum (branch-and-bound needed), just above the optimum
    for cutoff in (lp_bound * 0.999, (lp_bound + best) / 2, best * 1.001):
        r = solve(model, gap=0.0, cutoff=cutoff)
        if best < cutoff:  # the optimum, found
            assert r.status == "optimal" and r.objective == pytest.approx(best, rel=1e-9)
        elif cutoff <= lp_bound:  # the relaxation rules it out: no solution, no search
            assert (r.status, r.objective) == ("infeasible", float("inf"))
        else:  # HiGHS's own answer under a cutoff: none, or one no better than it
            assert r.status == "infeasible" or r.objective >= cutoff, (cutoff, best, r)
