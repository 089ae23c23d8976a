"""The bound label follows the latency rule in force (solver/cost/latency.py)."""

from __future__ import annotations

from solver.report_plan import bound_by

# Llama-3.1-8B decode kv_proj on H100 (us): work 1.43 + launch 4.5 = C 5.93; DRAM M 5.82.
C, M, OVH = 5.93, 5.82, 4.5


def test_serialised_network_gemv_is_memory_bound() -> None:
    # L = 4.5 + max(5.93 - 4.5, 5.82) + 0 = 10.32: the DRAM time is the term that grows it
    assert bound_by(C, M, 0.0, OVH, serialize_network=True) == "memory"


def test_overlap_rule_names_the_largest_of_c_m_n() -> None:
    # L = max(5.93, 5.82, 0) = C, whose work (1.43) is below the overhead (4.5)
    assert bound_by(C, M, 0.0, OVH) == "compute"
    assert bound_by(C, 1.0, 0.0, OVH) == "overhead"


def test_serialised_network_terms() -> None:
    assert bound_by(4.6, 0.05, 0.0, 4.5, serialize_network=True) == "overhead"  # norm at the floor
    assert bound_by(104.5, 20.0, 3.0, 4.5, serialize_network=True) == "compute"
    assert bound_by(10.0, 2.0, 30.0, 4.5, serialize_network=True) == "network"
