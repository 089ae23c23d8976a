"""The configuration-latency rule (solver.cost.latency) in its modes: the MILP's epigraph
rows meet exactly at `config_latency`, and the knapsack weights never exceed it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from solver.cost.latency import (
    COMPUTE,
    MEMORY,
    NETWORK,
    bound_weights,
    config_latency,
    epigraph_rows,
)

# (overlap, serialise the network, hidden share of a serialised network)
MODES = [
    (True, False, 0.0),
    (False, False, 0.0),
    (True, True, 0.0),
    (False, True, 0.0),
    (True, True, 0.3),
    (True, True, 1.0),
]


@pytest.mark.parametrize("overlap,serialize,hidden", MODES)
def test_epigraph_rows_and_weights_agree_with_the_rule(
    overlap: bool, serialize: bool, hidden: float
) -> None:
    rng = random.Random(5)
    weights, constant = bound_weights(overlap, serialize, hidden)
    for _ in range(200):
        ovh = rng.uniform(0.0, 1.0)
        parts = {
            COMPUTE: ovh + rng.uniform(0, 3),
            MEMORY: rng.uniform(0, 3),
            NETWORK: rng.uniform(0, 3),
        }
        latency = config_latency(
            parts[COMPUTE], parts[MEMORY], parts[NETWORK], ovh, overlap, serialize, hidden
        )
        rows = [
            sum(w * parts[n] for n, w in coefs.items()) + ovh * overhead_weight
            for coefs, overhead_weight in epigraph_rows(overlap, serialize, hidden)
        ]
        assert max(rows) == pytest.approx(latency, rel=1e-12)
        # the knapsack bounds: C without overheads under a serialised network
        c = parts[COMPUTE] - ovh if serialize else parts[COMPUTE]
        weighted = weights @ np.array([c, parts[MEMORY], parts[NETWORK]]) + constant * ovh
        assert weighted.max() <= latency * (1 + 1e-12)


def test_the_modes() -> None:
    assert config_latency(3.0, 2.0, 1.0, 0.5, overlap=True) == 3.0
    assert config_latency(3.0, 2.0, 1.0, 0.5, overlap=False) == 6.0
    assert config_latency(3.0, 2.0, 1.0, 0.5, overlap=True, serialize_network=True) == 4.0
    # hidden share 0.3: overhead 0.5 + max(X = 2.5, N = 1) + 0.7 x 1 = 3.7
    assert config_latency(3.0, 2.0, 1.0, 0.5, True, True, 0.3) == pytest.approx(3.7)
    # the network the longer part: 0.5 + max(2.5, 4) + 0.7 x 2.5 = 6.25
    assert config_latency(3.0, 2.0, 4.0, 0.5, True, True, 0.3) == pytest.approx(6.25)
    # elementwise over arrays, the same numbers
    got = config_latency(np.array([3.0, 3.0]), 2.0, np.array([1.0, 4.0]), 0.5, True, True, 0.3)
    assert got == pytest.approx([3.7, 6.25])
