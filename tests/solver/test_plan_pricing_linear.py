"""Pricing every configuration of a mapping (the re-check, plan building) is linear in the
graph: the edge charges are computed once per mapping, not once per configuration (a
10,000-kernel kernel-by-kernel chain spent ~600 s in that quadratic loop). Numbers by hand."""

from __future__ import annotations

import pytest

from solver.check import config_cost, config_costs, mapping_cost
from solver.cost.problem import EdgeCost, KernelMenu, MappingProblem, Option

COMPUTE_S = 1e-3  # every kernel's compute time
CONVERT_S = 2e-3  # a layout conversion between the two shardings


def _option(sharding: str) -> Option:
    return Option(sharding, "t", COMPUTE_S, 0.0, 0.0, 1.0, 0.0, (("x", 0.0), ("y", 0.0)))


def chain(n: int) -> MappingProblem:
    """n kernels in a chain, each sharded "a" or "b"; an edge converts when they differ."""
    menu = [
        KernelMenu(f"k{i}", (_option("a"), _option("b")), ("a", "b"), ("x",), "y") for i in range(n)
    ]
    conv = ((0.0, CONVERT_S), (CONVERT_S, 0.0))
    edges = tuple(EdgeCost(i - 1, i, "x", conv) for i in range(1, n))
    return MappingProblem(tuple(menu), edges, 1e9, 1e12, overlap=True, dataflow=False,
                          max_configs=n)  # fmt: skip


def test_a_kernel_by_kernel_chain_is_priced_with_one_pass_over_its_edges(monkeypatch):
    n = 2000
    problem = chain(n)
    calls = []
    original = MappingProblem.edge_charges

    def counted(self, sharding, rank=None):
        calls.append(1)
        return original(self, sharding, rank)

    monkeypatch.setattr(MappingProblem, "edge_charges", counted)
    choice = [k % 2 for k in range(n)]  # alternating shardings: every edge converts
    configs = [(k,) for k in range(n)]
    total, costs = mapping_cost(problem, configs, choice)
    assert len(calls) == 1
    # overlap: a configuration takes max(compute, conversion): the first 1 ms, the others 2 ms
    assert costs[0].latency_s == pytest.approx(COMPUTE_S)
    assert all(c.latency_s == pytest.approx(CONVERT_S) for c in costs[1:])
    assert total == pytest.approx(COMPUTE_S + (n - 1) * CONVERT_S)


def test_pricing_all_configurations_equals_pricing_each_alone():
    problem = chain(6)
    choice = [0, 1, 1, 0, 0, 1]  # conversions into kernels 1, 3 and 5
    configs = [(0, 1), (2, 3, 4), (5,)]
    together = config_costs(problem, configs, choice)
    alone = [config_cost(problem, c, choice) for c in configs]
    assert together == alone
    # configuration (0, 1) pays the conversion into 1, (2, 3, 4) the one into 3, (5,) into 5
    assert [c.network_s for c in together] == pytest.approx([CONVERT_S] * 3)
    assert [c.compute_s for c in together] == pytest.approx([2e-3, 3e-3, 1e-3])
