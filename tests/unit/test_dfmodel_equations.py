"""DFModel's own equations (solver/dfmodel/model.py) against numbers derived by hand
from DFModel's src/intra_chip.py (fengqian-ayce/DFModel @ 04f93d5) and its committed logs."""

from __future__ import annotations

import math

import pytest

from hardware.system import Chip, CostModel, MemoryLevel, NetworkLevel, System, Topology
from mapshard import pipeline
from schema.errors import SetupError
from solver.dfmodel import fft
from solver.dfmodel import model as dm
from solver.dfmodel.model import cost_power_counts
from solver.dfmodel.problem import sharding_problem
from solver.dfmodel.search import stage_one
from solver.options import SolverOptions

GB = 1e9


def _system(kinds, shape, bws, n, dram_GBps, cost) -> System:
    chip = Chip("t", 1, {"bf16": 1e12}, 1e12, 1e6, 1e9)
    levels = tuple(
        NetworkLevel(name, kind, d, bw * GB) for name, kind, d, bw in zip("xyz", kinds, shape, bws)
    )
    return System(n, chip, (MemoryLevel("dram", 1e12, dram_GBps * GB),), levels, cost)


def test_readme_cost_and_power_r_r_1024_chips() -> None:
    """DFModel README (GPT-3 1T on 1024 SN30, r_r 8 x 128 at 50 GB/s, DRAM 300 GB/s).
    r_r: links n*B per level; switches 2*S1*B_x + 2*S0*B_y.
      cost  = 1024*16522.25023 + 1024*300*1 + (1024*50*2)*2 + (2*128*50 + 2*8*50)*24
            = 16,918,784.23552 + 307,200 + 204,800 + 326,400 = 17,757,184.23552
      power = 1024*444.7061955 + 1024*300*0.16248 + 1024*50*0.052*2 + 13,600*0.052
            = 455,379.144192 + 49,913.856 + 5,324.8 + 707.2 = 511,325.000192
    DFModel stores prices, powers and bandwidths as protobuf `float`: accelerator_price
    16522.25023 is stored as 16522.25 and 444.7061955 as 444.70620727539..., which gives
    exactly what DFModel printed: 17757184.0 and 511325.01135492325."""
    cost = CostModel(16522.25023, 444.7061955, 1.0, 0.16248, 2.0, (0.052, 0.052), 24.0, 0.052)
    sys_ = _system((Topology.RING, Topology.RING), (8, 128), (50, 50), 1024, 300, cost)
    c, p = dm.system_cost_power(sys_, (8, 128))
    assert c == pytest.approx(17_757_184.23552, rel=1e-7)  # in double precision
    assert p == pytest.approx(511_325.000192, rel=1e-7)
    assert (c, p) == (17757184.0, 511325.01135492325)  # DFModel's own output, bit for bit


def test_fft8_log_cost_and_power_sw_8_chips() -> None:
    """DFModel FFT/Compare_w_existing/FP32/8/log.txt: sw x=8 at 300 GB/s, DRAM 2039 GB/s.
    sw: link S0*B, switch S0*B.  LINK 8*300*2 = 4,800; SWITCH 8*300*24 = 57,600;
    DRAM 8*2039*1 = 16,312; accelerators 8*33,000 = 264,000 -> total_cost 342,712.
    Power: 8*300*0.0104 = 24.96; 8*300*0.052 = 124.8; 8*2039*0.16248 = 2,650.37376;
    8*750 = 6,000 -> total_power 8,800.13376; with DFModel's float-stored unit powers the
    log's 8800.133708506823 exactly."""
    cost = CostModel(33000.0, 750.0, 1.0, 0.16248, 2.0, (0.0104, 0.0104), 24.0, 0.052)
    sys_ = _system((Topology.SWITCH,), (8,), (300,), 8, 2039, cost)
    c, p = dm.system_cost_power(sys_, (8,))
    assert c == pytest.approx(342_712.0, rel=1e-12)
    assert p == pytest.approx(8_800.13376, rel=1e-7)
    assert p == 8800.133708506823


@pytest.mark.parametrize(
    ("n", "want_cost"),
    [
        # 1 chip: no link, no switch: 1*100 + 1*10*1 = 110
        (1, 110.0),
        # 4 chips: links 4*10*2 = 80, no switch at <= 4 chips: 400 + 40 + 80 = 520
        (4, 520.0),
        # 5 chips: links 5*10*2 = 100, switches 5*10*24 = 1,200: 500 + 50 + 100 + 1200
        (5, 1850.0),
    ],
)
def test_no_link_at_one_chip_no_switch_up_to_four(n: int, want_cost: float) -> None:
    cost = CostModel(100.0, 0.0, 1.0, 0.0, 2.0, (0.0,), 24.0, 0.0)
    sys_ = _system((Topology.SWITCH,), (n,), (10,), n, 10, cost)
    assert dm.system_cost_power(sys_, (n,))[0] == pytest.approx(want_cost)


@pytest.mark.parametrize(
    ("name", "shape", "links", "switches"),
    [
        ("fc", (6,), [30], [0]),  # S0(S0-1) links, no switch
        ("r", (6,), [6], [2]),  # S0 links, 2 switch ports
        ("fc_fc", (3, 4), [24, 12], [0, 16]),  # 3*2*4, 4*3; switch S1^2
        ("r_fc", (3, 4), [12, 12], [8, 16]),  # n, S1(S1-1); 2*S1, S1^2
        ("r_sw", (3, 4), [12, 4], [8, 4]),  # n, S1; 2*S1, S1
        ("sw_sw", (3, 4), [12, 4], [12, 4]),  # n, S1; n, S1
        ("r_r_r", (2, 3, 4), [24, 24, 24], [24, 16, 12]),  # 2*S1*S2, 2*S0*S2, 2*S0*S1
        ("r_sw_sw", (2, 3, 4), [24, 12, 4], [24, 12, 4]),  # n, S1*S2, S2; 2*S1*S2, ...
        ("sw_sw_sw", (2, 3, 4), [24, 12, 4], [24, 12, 4]),
    ],
)
def test_link_and_switch_counts_per_variant(name, shape, links, switches) -> None:
    n = math.prod(shape)
    assert dm.cost_power_counts(name, shape, n, n) == (links, switches)


def test_float_storage_of_dfmodel_inputs() -> None:
    """FFT-8 log: GFLOPS 19491.83953857422 = 2 x 6912 x 1.41 stored as a float
    (1.40999996662...), and Compute_Latency 281,336,141,292 FLOP / (0.9 as a float x that)
    = 16,037,261.142489936 ns."""
    ghz = dm.f32(1.41)
    assert 2 * 6912 * ghz == 19491.83953857422
    assert 281_336_141_292 / (dm.f32(0.9) * 2 * 6912 * ghz) == 16037261.142489936


def test_collective_ratios_per_topology() -> None:
    """intra_chip: ALL_REDUCE_ratio * TP * B = TP - 1 (ring, switch) or 1 (fc);
    ALL_TO_ALL_ratio * B * 8 = TP^2 (ring), * B * 4 = TP (switch), * B = 1 (fc)."""
    b = 50 * GB
    assert dm.tp_ratios("r", 8, b) == pytest.approx((7 / (8 * b), 64 / (8 * b), 7 / (8 * b)))
    assert dm.tp_ratios("sw", 8, b) == pytest.approx((7 / (8 * b), 8 / (4 * b), 7 / (8 * b)))
    assert dm.tp_ratios("fc", 8, b) == pytest.approx((1 / (8 * b), 1 / b, 1 / (8 * b)))
    assert dm.dp_ratio("r", 4, b) == pytest.approx(3 / (4 * b))
    assert dm.dp_ratio("fc", 4, b) == pytest.approx(1 / (4 * b))
    # README: TP on a 50 GB/s ring of 8: 7/400 ns per byte = 1.75e-11 s/B
    assert dm.tp_ratios("r", 8, b)[0] == pytest.approx(1.75e-11)


def test_separate_rs_ag_for_ar_doubles_the_all_reduce() -> None:
    """intra_chip.py @ f9cda5e, execution.separate_rs_ag_for_ar: ALL_REDUCE_ratio * TP * B
    = 2 (TP - 1) on ring and switch, 2 on fc; ALL_REDUCE_PERIODIC_ratio * DP * B = 2 (DP - 1)
    on ring and switch, still 1 on fc; all-to-all and all-gather unchanged. README: 8 chips
    at 50 GB/s, 104,857,600 B: 2 x 7 / 400 = 0.035 ns/B -> 3.670016 ms (1.835008 without)."""
    b = 50 * GB
    on = {k: dm.tp_ratios(k, 8, b, True) for k in ("r", "sw", "fc")}
    assert on["r"] == pytest.approx((14 / (8 * b), 64 / (8 * b), 7 / (8 * b)))
    assert on["sw"] == pytest.approx((14 / (8 * b), 8 / (4 * b), 7 / (8 * b)))
    assert on["fc"] == pytest.approx((2 / (8 * b), 1 / b, 1 / (8 * b)))
    assert dm.dp_ratio("r", 4, b, True) == pytest.approx(6 / (4 * b))
    assert dm.dp_ratio("sw", 4, b, True) == pytest.approx(6 / (4 * b))
    assert dm.dp_ratio("fc", 4, b, True) == pytest.approx(1 / (4 * b))
    assert 104_857_600 * on["r"][0] == pytest.approx(3.670016e-3, rel=1e-12)
    assert 104_857_600 * dm.tp_ratios("r", 8, b)[0] == pytest.approx(1.835008e-3, rel=1e-12)


def test_stage_one_least_communication_matches_enumeration() -> None:
    """inter_chip's objective on tests/data/dfmodel/mlp_tp2_pp2 (FFN0 -> GeLU -> FFN1), every
    combination written out by hand. Legal: FFN0 {M, K}, GeLU {M, none}, FFN1 {M, K}
    (N is the tiling dim, weights are never replicated). K-sharding all-reduces the output
    (FFN0 2,048 B, FFN1 1,024 B); an edge converts row-sharded -> replicated by all-gather
    of its tensor (2,048 B each); a replicated tensor feeds anything for free.
      M,M,M 2048   M,M,K 1024   M,none,M 2048   M,none,K 3072
      K,M,M 4096   K,M,K 3072   K,none,M 2048   K,none,K 3072
    The least is (M, M, K) with 1,024 B."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sc = pipeline.load_scenario(root / "tests" / "data" / "dfmodel" / "mlp_tp2_pp2")
    graph = sc.workload.phases[0].graph
    assert stage_one(graph, 2, SolverOptions()) == ("M", "M", "K")
    problem, unit = sharding_problem(graph, 2)
    assert unit == 2048.0  # the largest tensor
    assert [m.shardings for m in problem.kernels] == [("M", "K"), ("M", "none"), ("M", "K")]
    # FFN1 sharded K: its 1,024 B all-reduce (+ a tie-break below 1e-3 x 1,024 B)
    assert problem.kernels[2].options[1].network_s * unit == pytest.approx(1024, abs=1.0)
    # GeLU M -> FFN1 M needs an all-gather of the 2,048 B tensor; the other pairs are free
    assert problem.edges[1].conv == ((1.0, 0.0), (0.0, 0.0))


def test_one_chip_without_a_network_has_no_links_or_switches() -> None:
    """A single-chip DFModel graph (no topology block): nothing to count, no IndexError."""
    assert cost_power_counts("", [], 1, 1) == ([], [])


def test_fft_all_to_all_factors_per_topology() -> None:
    """DFModel's FFT branch (intra_chip.py): per level (bw factor, message factor), with
    T(a) = a(a-1)/2 and P chips per copy.
      sw x=8, P=8: (8, T(8) = 28)
      r_sw_sw 2x4x8, P=64: (2, T(2) = 1), (4, T(2*4) = 28), (8, T(64) = 2016)
      r_r_r 2x2x4, P=16: (2*2*2 = 8, 120), (2*2*4 = 16, 120), (2*2*4 = 16, 120)
      fc_fc 32x32, P=1024: (32^2/4 = 256, T(32) = 496), (256, T(1024) = 523,776)"""
    assert fft.a2a_factors("sw", (8,), 8) == [(8.0, 28.0)]
    assert fft.a2a_factors("r_sw_sw", (2, 4, 8), 64) == [(2.0, 1.0), (4.0, 28.0), (8.0, 2016.0)]
    assert fft.a2a_factors("r_r_r", (2, 2, 4), 16) == [(8.0, 120.0), (16.0, 120.0), (16.0, 120.0)]
    assert fft.a2a_factors("fc_fc", (32, 32), 1024) == [(256.0, 496.0), (256.0, 523776.0)]


def test_fft8_all_to_all_seconds_per_byte_and_copies() -> None:
    """sw x 8 at 300 GB/s: 28 / (300e9 x 8) s per byte. Two copies of that switch (16 chips,
    num_copy 2) keep 8 chips per copy and double the links and switches:
      links 8*300*2 x 2 = 9,600; switches 8*300*24 x 2 = 115,200; DRAM 16*2039 = 32,624;
      chips 16*33,000 = 528,000 -> 685,424. A copy count that the topology does not span
      is refused."""
    cost = CostModel(33000.0, 750.0, 1.0, 0.16248, 2.0, (0.0104, 0.0104), 24.0, 0.052)
    one = _system((Topology.SWITCH,), (8,), (300,), 8, 2039, cost)
    assert fft.chips_per_copy(one, 1) == 8
    assert fft.a2a_seconds_per_byte(one, 8) == pytest.approx(28 / (300 * GB * 8), rel=1e-15)
    two = _system((Topology.SWITCH,), (8,), (300,), 16, 2039, cost)
    assert fft.chips_per_copy(two, 2) == 8
    assert dm.system_cost_power(two, (8,), 2)[0] == pytest.approx(685_424.0, rel=1e-12)
    with pytest.raises(SetupError, match="num_copy"):
        fft.chips_per_copy(two, 1)
