"""The configuration-latency rule (solver.cost.latency) in its three modes: the MILP's
epigraph rows meet exactly at `config_latency`, and the knapsack weights never exceed it."""

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

MODES = [(True, False), (False, False), (True, True), (False, True)]


@pytest.mark.parametrize("overlap,serialize", MODES)
def test_epigraph_rows_and_weights_agree_with_the_rule(overlap: bool, serialize: bool) -> None:
    rng = random.Random(5)
    weights, constant = bound_weights(overlap, serialize)
    for _ in range(200):
        ovh = rng.uniform(0.0, 1.0)
        parts = {
            COMPUTE: ovh + rng.uniform(0, 3),
            MEMORY: rng.uniform(0, 3),
            NETWORK: rng.uniform(0, 3),
        }
        latency = config_latency(
            parts[COMPUTE], parts[MEMORY], parts[NETWORK], ovh, overlap, serialize
        )
        rows = [
            sum(parts[n] for n in names) + (ovh if with_overhead else 0.0)
            for names, with_overhead in epigraph_rows(overlap, serialize)
        ]
        assert max(rows) == pytest.approx(latency, rel=1e-12)
        # the knapsack bounds: C without overheads under a serialised network
        c = parts[COMPUTE] - ovh if serialize else parts[COMPUTE]
        weighted = weights @ np.array([c, parts[MEMORY], parts[NETWORK]]) + constant * ovh
        assert weighted.max() <= latency * (1 + 1e-12)


def test_the_three_modes() -> None:
    assert config_latency(3.0, 2.0, 1.0, 0.5, overlap=True) == 3.0
    assert config_latency(3.0, 2.0, 1.0, 0.5, overlap=False) == 6.0
    assert config_latency(3.0, 2.0, 1.0, 0.5, overlap=True, serialize_network=True) == 4.0
