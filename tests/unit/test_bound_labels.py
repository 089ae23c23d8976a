"""The bound label follows the latency rule in force (solver/cost/latency.py)."""

from __future__ import annotations

import itertools

import pytest

from solver.api import config_latency
from solver.plan import SPLIT_PARTS, latency_split
from solver.report_plan import bound_by

# Llama-3.1-8B decode kv_proj on H100 (us): work 1.43 + launch 4.5 = C 5.93; DRAM M 5.82.
C, M, OVH = 5.93, 5.82, 4.5


def test_serialised_network_gemv_is_memory_bound() -> None:
    # L = 4.5 + max(5.93 - 4.5, 5.82) + 0 = 10.32: the DRAM time is the term that grows it
    assert bound_by(C, M, 0.0, OVH, serialize_network=True) == "memory"


def test_overlap_rule_names_the_largest_part_of_the_latency() -> None:
    # L = max(5.93, 5.82, 0) = C = 4.5 overhead + 1.43 work (M hidden): the overhead binds
    assert bound_by(C, M, 0.0, OVH) == "overhead"
    assert bound_by(C, 1.0, 0.0, OVH) == "overhead"
    # work 6 + overhead 4.5 = 10.5 > M 8: compute; M 12 > 10.5: memory
    assert bound_by(10.5, 8.0, 0.0, OVH) == "compute"
    assert bound_by(10.5, 12.0, 0.0, OVH) == "memory"


def test_serialised_network_terms() -> None:
    assert bound_by(4.6, 0.05, 0.0, 4.5, serialize_network=True) == "overhead"  # norm at the floor
    assert bound_by(104.5, 20.0, 3.0, 4.5, serialize_network=True) == "compute"
    assert bound_by(10.0, 2.0, 30.0, 4.5, serialize_network=True) == "network"


def test_split_adds_up_to_the_latency_rule_and_names_the_bound() -> None:
    """latency_split's parts sum to solver/cost/latency.py's rule on a grid of cases (every
    order of overhead, work, memory and network, each rule), none negative; the label is
    the largest part."""
    values = (0.0, 0.5, 1.0, 2.0, 7.0)
    rules = [(True, False, 0.0), (False, False, 0.0), (True, True, 0.0), (True, True, 0.6)]
    for overlap, serial, hidden in rules:
        for o, w, m, n in itertools.product(values, repeat=4):
            split = latency_split(o + w, m, n, o, overlap, serial, hidden)
            want = config_latency(o + w, m, n, o, overlap, serial, hidden)
            assert sum(split) == pytest.approx(want, abs=1e-12), (o, w, m, n, overlap, serial)
            assert min(split) >= 0
            label = bound_by(o + w, m, n, o, serial, overlap, hidden)
            assert split[SPLIT_PARTS.index(label)] == max(split)


def test_hand_split_of_a_serialised_gemv() -> None:
    # L = 4.5 + max(1.43, 5.82) + 3 = 13.32 us: overhead 4.5, memory 5.82, network 3
    assert latency_split(C, M, 3.0, OVH, serialize_network=True) == pytest.approx(
        (4.5, 0.0, 5.82, 3.0)
    )
    # overlap: L = max(5.93, 5.82, 3) = 5.93, memory and network hidden under it
    assert latency_split(C, M, 3.0, OVH) == pytest.approx((4.5, 1.43, 0.0, 0.0))


def test_a_launch_floor_counts_as_overhead_unless_memory_hides_it() -> None:
    """H100 (us): launch 4.5, GEMM floor 8.0, so a GEMM of 0.5 us of work takes 8.0 of
    compute, 3.0 of it the floor's excess (floor_s). Beside 1.0 of DRAM the compute term
    is the latency: overhead 4.5 + 3.0, work 0.5, label overhead. Serialised with 6.0 of
    DRAM, max(3.5, 6.0) is the memory's: the floor is hidden and memory binds."""
    parts = latency_split(8.0, 1.0, 0.0, 4.5, floor_s=3.0)
    assert parts == pytest.approx((7.5, 0.5, 0.0, 0.0))
    assert bound_by(8.0, 1.0, 0.0, 4.5, floor=3.0) == "overhead"
    assert bound_by(8.0, 1.0, 0.0, 4.5) == "overhead"  # 4.5 > 3.5 even without the floor
    assert bound_by(16.0, 1.0, 0.0, 4.5, floor=3.0) == "compute"  # work 8.5 > 7.5
    serial = latency_split(8.0, 6.0, 0.0, 4.5, serialize_network=True, floor_s=3.0)
    assert serial == pytest.approx((4.5, 0.0, 6.0, 0.0))
    assert bound_by(8.0, 6.0, 0.0, 4.5, serialize_network=True, floor=3.0) == "memory"
    # the floor never exceeds the busy time it sits in
    assert latency_split(5.0, 0.0, 0.0, 4.5, floor_s=3.0) == pytest.approx((5.0, 0.0, 0.0, 0.0))
