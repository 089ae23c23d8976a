"""Collective and pipeline formulas against values computed by hand."""

from __future__ import annotations

import math

import pytest

from hardware import kernel_db, library
from hardware.resolve import resolve_system
from hardware.system import CollectiveEfficiency, NetworkLevel, Topology
from hardware.topology import collective_efficiency
from schema import setup_pb2
from solver.cost.collectives import curve_fraction, hierarchical_time, level_collective_time
from solver.search.assemble import pipeline_time

GB = 1e9


def ring(bw=100 * GB, lat=0.0, p=8) -> NetworkLevel:
    return NetworkLevel("ring", Topology.RING, p, bw, lat)


def switch(bw=100 * GB, lat=0.0, p=8) -> NetworkLevel:
    return NetworkLevel("sw", Topology.SWITCH, p, bw, lat)


def test_ring_all_reduce_moves_2_p_minus_1_over_p_bytes():
    # 1 GB over 8 chips at 100 GB/s: 2*7/8*1e9/1e11 = 17.5 ms
    assert level_collective_time("all_reduce", 1e9, 8, ring()) == pytest.approx(0.0175)


def test_ring_all_reduce_latency_term():
    # 2(p-1) steps of 5 us on a ring of 4: 30 us on top of 2*3/4*1e6/1e11 = 15 us
    t = level_collective_time("all_reduce", 1e6, 4, ring(lat=5e-6, p=4))
    assert t == pytest.approx(15e-6 + 30e-6)


def test_switch_latency_is_one_step_per_phase():
    t = level_collective_time("all_gather", 1e6, 4, switch(lat=5e-6, p=4))
    assert t == pytest.approx(0.75 * 1e6 / 1e11 + 5e-6)


def test_all_gather_and_reduce_scatter_are_half_an_all_reduce():
    ar = level_collective_time("all_reduce", 4e8, 8, switch())
    ag = level_collective_time("all_gather", 4e8, 8, switch())
    rs = level_collective_time("reduce_scatter", 4e8, 8, switch())
    assert ag == pytest.approx(ar / 2) and rs == pytest.approx(ar / 2)


def test_all_to_all_switch_and_ring():
    # each of 8 chips holds 1 GB/8 and sends 7/8 of it: 7/64 * 1e9 / 1e11
    assert level_collective_time("all_to_all", 1e9, 8, switch()) == pytest.approx(7 / 64 * 1e-2)
    # ring of 8, bidirectional: a chip's 7 chunks of 1.25e8/8 B go the short way round,
    # 1+2+3+4+3+2+1 = 16 hops, 16 x 1.5625e7 = 2.5e8 hop-bytes over its 2 outgoing links
    assert level_collective_time("all_to_all", 1e9, 8, ring()) == pytest.approx(2.5e8 / 2e11)


def test_torus_all_to_all_is_a_bidirectional_ring_per_dimension():
    """A 4 x 4 torus, 1.6 GB over 16 chips (1e8 B each): per dimension every chip exchanges
    all it holds with the 3 others of its ring, chunks of 2.5e7 B at 1, 2, 1 hops (4
    hop-chunks = 1e8 hop-bytes) over 2 outgoing links of 1e11 B/s: 5e-4 s; two dimensions
    1e-3 s. The bisection agrees: cut a ring of 4 in halves of 2; each chip sends 2 x 2.5e7
    B across, 1e8 B each way over the 2 cut links (2e11 B/s each way): 5e-4 s per dimension."""
    torus = NetworkLevel("torus", Topology.TORUS, 16, 100 * GB, 0.0, torus_dims=(4, 4))
    assert level_collective_time("all_to_all", 1.6e9, 16, torus) == pytest.approx(1e-3)


def test_hierarchical_all_reduce_composes_levels():
    inner, outer = switch(bw=400 * GB, p=8), switch(bw=50 * GB, p=4)
    s = 8e9
    expected = (7 / 8 * s / 400e9) * 2 + 2 * 3 / 4 * (s / 8) / 50e9
    assert hierarchical_time("all_reduce", s, [(inner, 8), (outer, 4)]) == pytest.approx(expected)


def test_torus_is_a_ring_per_dimension():
    torus = NetworkLevel("torus", Topology.TORUS, 16, 100 * GB, 0.0, torus_dims=(4, 4))
    s = 1.6e9
    # RS on dim 1 (4 chips), AR on dim 2 with S/4, AG on dim 1
    expected = 2 * (3 / 4 * s / 1e11) + 2 * 3 / 4 * (s / 4) / 1e11
    assert level_collective_time("all_reduce", s, 16, torus) == pytest.approx(expected)


def test_bus_bandwidth_efficiency_and_message_size_curve():
    level = NetworkLevel(
        "sw",
        Topology.SWITCH,
        8,
        100 * GB,
        0.0,
        efficiency=CollectiveEfficiency(bus_bw_util=0.8, half_bw_bytes=1e6),
    )
    s = 8e6  # 1e6 per chip -> half of 80 GB/s
    assert level_collective_time("all_reduce", s, 8, level) == pytest.approx(2 * 7 / 8 * s / 40e9)


def test_single_chip_group_costs_nothing():
    assert hierarchical_time("all_reduce", 1e9, [(ring(), 1)]) == 0.0


def test_pipeline_1f1b_bubble():
    # m = 8 micro-batches, p = 4 stages, 10 ms per stage: (8 + 3) * 10 ms
    assert pipeline_time(0.01, 8, 4) == pytest.approx(0.11)
    # interleaving with v = 3 divides the bubble: (8 + 1) * 10 ms
    assert pipeline_time(0.01, 8, 4, 3) == pytest.approx(0.09)
    assert math.isclose(pipeline_time(0.01, 8, 1), 0.08)


def _a2a_textbook(per_chip: float, levels) -> float:
    """Textbook multi-level all-to-all on switches: each chip sends (p_l-1)/p_l of its data
    at level l, at that level's bandwidth, plus one latency step per level."""
    return sum((p - 1) / p * per_chip / bw + lat for p, bw, lat in levels)


def test_hierarchical_all_to_all_two_levels_is_the_textbook_formula():
    # issue #14: 1024 chips as 32 x 32 at 25 GB/s each, 1 MB held per chip
    d = 1e6
    inner, outer = switch(bw=25 * GB, p=32), switch(bw=25 * GB, p=32)
    t = hierarchical_time("all_to_all", d * 1024, [(inner, 32), (outer, 32)])
    assert t == pytest.approx(2 * (31 / 32) * 1e6 / 25e9)  # 77.5 us
    flat = level_collective_time("all_to_all", d * 1024, 1024, switch(bw=25 * GB, p=1024))
    assert flat == pytest.approx(1023 / 1024 * 1e6 / 25e9)
    assert t < 2 * flat


def test_hierarchical_all_to_all_three_levels_is_the_textbook_formula():
    d = 3e6
    lv = [(4, 400 * GB, 1e-6), (8, 50 * GB, 5e-6), (2, 25 * GB, 10e-6)]
    span = [(switch(bw=b, lat=a, p=p), p) for p, b, a in lv]
    expected = (3 / 4) * d / 400e9 + 1e-6 + (7 / 8) * d / 50e9 + 5e-6 + (1 / 2) * d / 25e9 + 10e-6
    assert expected == pytest.approx(_a2a_textbook(d, lv))
    assert hierarchical_time("all_to_all", d * 64, span) == pytest.approx(expected)


def test_hierarchical_all_to_all_one_level_is_flat():
    level = switch(bw=50 * GB, lat=2e-6, p=16)
    assert hierarchical_time("all_to_all", 5e8, [(level, 16)]) == pytest.approx(
        level_collective_time("all_to_all", 5e8, 16, level)
    )
    assert level_collective_time("all_to_all", 5e8, 16, level) == pytest.approx(
        15 / 16 * 5e8 / 16 / 50e9 + 2e-6
    )


def _curved(lat=10e-6, p=8) -> NetworkLevel:
    curve = ((1e6, 0.2), (1e8, 0.8))
    eff = CollectiveEfficiency(latency_s=lat, bus_bw_curve=curve)
    return NetworkLevel("sw", Topology.SWITCH, p, 100 * GB, 0.0, efficiency=eff)


def test_alpha_beta_with_calibrated_bandwidth_by_message_size():
    level = _curved()
    # at a curve point: 2 steps x 10 us + 2 x 7/8 x 1e8 / (0.8 x 100 GB/s)
    t = level_collective_time("all_reduce", 1e8, 8, level)
    assert t == pytest.approx(20e-6 + 1.75e8 / 80e9)
    # between points, linear in log size: 1e7 is halfway -> 0.5
    t = level_collective_time("all_gather", 1e7, 8, level)
    assert t == pytest.approx(10e-6 + 7 / 8 * 1e7 / 50e9)
    # below the first point the first fraction holds: an 8 B all-reduce is the latency
    t = level_collective_time("all_reduce", 8, 8, level)
    assert t == pytest.approx(20e-6 + 14 / 20e9)
    # beyond the last, the last fraction: 1e10 at 80 GB/s
    assert level_collective_time("reduce_scatter", 1e10, 8, level) == pytest.approx(
        10e-6 + 7 / 8 * 1e10 / 80e9
    )


def test_curve_size_of_an_all_to_all_is_one_chips_send_buffer():
    level = _curved(lat=0.0)
    # 8 chips x 1e6 each: the curve sees 1e6 (fraction 0.2); each chip sends 7/8 of 1e6
    t = level_collective_time("all_to_all", 8e6, 8, level)
    assert t == pytest.approx(7 / 8 * 1e6 / 20e9)


def test_gb200_nvlink_all_reduce_by_hand():
    """The GB200 chip file's NVLink level (4 GPUs, a switch level: one latency step per
    phase): a 1 MiB all-reduce takes 2 x 8.08 us + 2 x 3/4 x 2^20 / (900 GB/s x f), where
    f = 0.317 + (2/3) x (0.284 - 0.317) = 0.295 interpolates the 256 KiB and 2 MiB points in
    log size (log(4)/log(8) = 2/3 of the way): 16.16 + 5.92 = 22.09 us. At 8 GiB the curve's
    last point, 0.756: 2 x 3/4 x 2^33 / (900e9 x 0.756) + 16.16 us = 18.953 ms."""
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = "GB200", 4
    level = resolve_system(s, "setup.txt").network[0]
    assert level.link_bandwidth_Bps == pytest.approx(900 * GB)
    f = 0.317 + 2 / 3 * (0.284 - 0.317)
    by_hand = 2 * 8.08e-6 + 2 * 0.75 * 2**20 / (900 * GB * f)
    assert by_hand == pytest.approx(22.09e-6, rel=1e-3)
    assert level_collective_time("all_reduce", 2**20, 4, level) == pytest.approx(by_hand, rel=1e-6)
    big = 2 * 0.75 * 2**33 / (900 * GB * 0.756) + 2 * 8.08e-6
    assert big == pytest.approx(18.953e-3, rel=1e-3)
    assert level_collective_time("all_reduce", 2**33, 4, level) == pytest.approx(big, rel=1e-6)


def _h100_nvlink() -> NetworkLevel:
    entry = next(
        e for e in library.find_chip("H100-SXM5-80GB").accelerator.efficiency.collective
        if e.level == 0
    )  # fmt: skip
    eff = collective_efficiency(entry)
    return NetworkLevel("nvl", Topology.SWITCH, 8, 450 * GB, 0.0, efficiency=eff)


def test_h100_gathers_and_scatters_run_at_their_measured_curves_not_nvls():
    """NCCL 2.29.2 on 8 H100s (aiconfigurator-core's nccl table): an all-gather of a 256 MiB
    output in 728.8 us, a reduce-scatter of a 256 MiB input in 721.7 us, both near 0.73 of
    the 450 GB/s link once the 12.8 us step is off; the all-reduce's NVLS curve (0.963 at
    256 MiB) would make them 1.3x faster than measured."""
    nvl, d = _h100_nvlink(), 268435456
    ag = level_collective_time("all_gather", d, 8, nvl)
    assert ag == pytest.approx(7 / 8 * d / (0.729 * 450e9) + 12.8e-6)
    assert ag == pytest.approx(728.8e-6, rel=2e-3)
    rs = level_collective_time("reduce_scatter", d, 8, nvl)
    assert rs == pytest.approx(7 / 8 * d / (0.736 * 450e9) + 12.8e-6)
    assert rs == pytest.approx(721.7e-6, rel=2e-3)
    # between two measured sizes: linear in log size, 128 MiB at 0.687, 256 MiB at 0.729
    w = math.log(1.5) / math.log(2)
    util = 0.687 + w * (0.729 - 0.687)
    at_192 = level_collective_time("all_gather", 1.5 * d / 2, 8, nvl)
    assert at_192 == pytest.approx(7 / 8 * 1.5 * d / 2 / (util * 450e9) + 12.8e-6)
    # the all-reduce keeps the NVLS curve
    ar = level_collective_time("all_reduce", d, 8, nvl)
    assert ar == pytest.approx(2 * 7 / 8 * d / (0.963 * 450e9) + 2 * 12.8e-6)


def test_a_level_without_a_gather_curve_takes_the_all_reduce_curve():
    eff = CollectiveEfficiency(bus_bw_curve=((1e6, 0.5), (1e9, 0.9)))
    level = NetworkLevel("sw", Topology.SWITCH, 4, 100 * GB, 0.0, efficiency=eff)
    assert level_collective_time("all_gather", 1e9, 4, level) == pytest.approx(
        0.75 * 1e9 / (0.9 * 100 * GB)
    )


def test_the_halves_never_run_above_the_all_reduces_bus_bandwidth():
    """At 1 MiB the H100 all-gather table (NCCL 2.29.2) reads 0.471 of the link but the
    chip's all-reduce points (NCCL 2.18.5, nccl-tests on Azure) only 0.249: the gather
    takes the all-reduce's 0.249, so a reduce-scatter plus an all-gather never undercuts
    the all-reduce it replaces through a newer release's small-message latency."""
    nvl, d = _h100_nvlink(), 1048576
    ag = level_collective_time("all_gather", d, 8, nvl)
    assert ag == pytest.approx(7 / 8 * d / (0.249 * 450e9) + 12.8e-6)
    rs_ag = level_collective_time("reduce_scatter", d, 8, nvl) + ag
    assert rs_ag >= level_collective_time("all_reduce", d, 8, nvl) * (1 - 1e-12)


def test_the_chip_files_gather_points_reproduce_the_installed_nccl_table():
    """Rows of the installed table read as they are (FP16 elements, milliseconds): every
    H100 all-gather and reduce-scatter point of the chip file below the all-reduce's curve
    (16 MiB up) gives the table's time."""
    pytest.importorskip("aiconfigurator_core")
    frame = kernel_db.table_frame("h100_sxm", "comm", "nccl", "2.29.2", "nccl_perf")
    nvl = _h100_nvlink()
    checked: list[float] = []
    for op in ("all_gather", "reduce_scatter"):
        curve = nvl.efficiency.curve_for(op)
        assert curve and curve is not nvl.efficiency.bus_bw_curve
        for size, util in curve:
            if util > curve_fraction(nvl.efficiency.bus_bw_curve, size):
                continue  # capped by the all-reduce's curve (the test above)
            checked.append(size)
            row = frame[
                (frame.op_name == op)
                & (frame.nccl_dtype == "half")
                & (frame.num_gpus == 8)
                & (frame.message_size * 2 == size)
            ]
            measured_s = float(row.latency.iloc[0]) * 1e-3
            assert level_collective_time(op, size, 8, nvl) == pytest.approx(measured_s, rel=3e-3)
    assert len(checked) >= 10  # 16 MiB .. 512 MiB of both


def test_a_remembered_time_is_never_another_levels():
    """The memo keys levels by identity: two levels of one name but other bandwidths, asked
    in turn with the same size, each get their own hand-derived time, again on a repeat."""
    fast, slow = switch(bw=100 * GB), switch(bw=50 * GB)
    for _ in range(2):
        # all-gather of 8e8 B over 8 chips: 7/8 * 8e8 / b
        assert hierarchical_time("all_gather", 8e8, [(fast, 8)]) == pytest.approx(7e-3)
        assert hierarchical_time("all_gather", 8e8, [(slow, 8)]) == pytest.approx(14e-3)
        # two levels: reduce-scatter inside (7/8 * 8e8 / 1e11), then 1e8 across 2 (1/2 * 1e8 / 5e10)
        two = hierarchical_time("reduce_scatter", 8e8, [(fast, 8), (slow, 2)])
        assert two == pytest.approx(7e-3 + 1e-3)
