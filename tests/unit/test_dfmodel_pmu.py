"""DFModel's PMU place-and-route rows (solver/dfmodel/pmu.py) against exhaustive
enumeration: every (lane, stage) of every kernel on a tiny chip, each buffer's PMU count
recomputed here from DFModel's rows (fengqian-ayce/DFModel src/intra_chip.py @ 04f93d5,
its `pmu != 0` branch), the least slowest-kernel cycles among the choices that fit."""

from __future__ import annotations

import itertools
import math

import pytest
from google.protobuf import text_format

from generator.proto_graph import graph_from_proto
from schema import setup_pb2
from solver.dfmodel.pmu import PmuChip, pairs, solve_assignment

GRAPH = """
kernels { name: "G1" id: 1 type: SYSTOLIC
  gemm_input1_weight { M: 8 K: 4 N: 6 tiling: NO_TILING } }
kernels { name: "E" id: 2 type: SIMD
  elementwise_input1 { M: 8 N: 6 tiling: NO_TILING } }
kernels { name: "G2" id: 3 type: SYSTOLIC
  gemm_input1_weight { M: 5 K: 8 N: 6 tiling: NO_TILING } }
connections { startIdx: 1 endIdx: 2 }
connections { startIdx: 2 endIdx: 3 id: 1 }
"""
WORD = 2.0
W, H = 2, 3  # lane width (systolic_width), stage width (systolic_height)
CAP = 64.0  # bytes per PMU: small enough that lanes and stages bind the counts
SHARDS = [(8, 4, 6), (8, 1, 6), (5, 8, 6)]  # (M, K, N): one chip, no tiling


def _cycles(k: int, lane: int, stage: int) -> float:
    m, kk, n = SHARDS[k]
    if k == 1:  # SIMD: ceil(M / (lane W)) x N, stage 1
        return math.ceil(m / (lane * W)) * n if stage == 1 else math.inf
    return math.ceil(m / (lane * W)) * math.ceil(n / (stage * H)) * kk


def _pmus(pick: list[tuple[int, int]]) -> int:
    """PMUs of the one configuration, DFModel's rows taken one by one.
    Weights (G1, G2): >= shard M x K x word / cap and >= the kernel's lanes.
    Edge G1 -> E (fused, depth = level 1 - level 0 + 1 = 2): >= 2 x (8 x 6 x 2) / 64 = 3;
      E is element-wise: a "lane" input, >= lanes of E; G1 is a GEMM producer:
      x K (4) >= lane x stage x H.
    Edge E -> G2 (depth 2): >= 3; G2 is a weight GEMM: its first input is a "stage"
      input, x W >= stage x H; E is an element-wise producer: >= lanes of E."""
    (l1, s1), (le, _), (l2, s2) = pick
    w1 = max(math.ceil(8 * 4 * WORD / CAP), l1)
    w2 = max(math.ceil(5 * 8 * WORD / CAP), l2)
    e1 = max(math.ceil(2 * 8 * 6 * WORD / CAP), le, math.ceil(l1 * s1 * H / 4))
    e2 = max(math.ceil(2 * 8 * 6 * WORD / CAP), math.ceil(s2 * H / W), le)
    return w1 + w2 + e1 + e2


def _brute(cores: int, pmu: int) -> float:
    choices = [
        (lane, stage) for lane in range(1, cores + 1) for stage in range(1, cores // lane + 1)
    ]
    best = math.inf
    for pick in itertools.product(choices, repeat=3):
        if sum(a * b for a, b in pick) > cores or _pmus(list(pick)) > pmu:
            continue
        best = min(best, max(_cycles(k, *p) for k, p in enumerate(pick)))
    return best


@pytest.mark.parametrize(
    ("cores", "pmu", "cycles"),
    # 16 cores: 8 cycles with 13 PMUs, 12 with 11-12, 16 with 9-10, none with 8 (the
    # enumeration's values, pinned so that a test change cannot make the rows idle)
    [(16, 13, 8), (16, 12, 12), (16, 10, 16), (16, 8, math.inf), (12, 11, 12), (8, 40, 16)],
)
def test_pmu_rows_equal_exhaustive_enumeration(cores: int, pmu: int, cycles: float) -> None:
    dg = text_format.Parse(GRAPH, setup_pb2.DataflowGraph())
    graph = graph_from_proto(dg, path="pmu.txt", word=WORD)
    chip = PmuChip(pmu, CAP, cores, (W, H))
    menus = [pairs(s, k == 1, 0, (W, H), cores) for k, s in enumerate(SHARDS)]
    # one configuration, no memory or network time, overlap; 1 s per cycle
    got = solve_assignment(graph, [[0, 1, 2]], menus, [1, 1, 1], SHARDS, WORD, chip,
                           [(0.0, 0.0)], True, 1.0)  # fmt: skip
    want = _brute(cores, pmu)
    assert want == cycles
    if math.isinf(want):
        assert got is None
    else:
        assert got is not None and got[0] == pytest.approx(want, rel=1e-9)


ALONE = """
kernels { name: "G" id: 1 type: SYSTOLIC
  gemm_input1_weight { M: 8 K: 4 N: 6 tiling: NO_TILING } }
"""


@pytest.mark.parametrize(("cores", "pmu", "cycles"), [(7, 3, 16), (7, 4, 8), (6, 3, 8)])
def test_a_lone_weight_kernel_may_tile_its_weight_on_all_cores(
    cores: int, pmu: int, cycles: int
) -> None:
    """DFModel's tiling_factor: G (8 x 4 x 6, lanes of 2, stages of 3) alone; its weight
    8 x 4 x 2 = 64 B needs ceil(64 / 16) = 4 PMUs of 16 B, or, tiled, 1 PMU when G takes
    exactly all the cores (lane x stage = cores). Always PMU_w >= lanes.
    cycles = ceil(8 / (2 lane)) x ceil(6 / (3 stage)) x 4:
      7 cores, 3 PMUs: untiled needs 4 > 3; tiled: (1, 7) -> 4 x 1 x 4 = 16 ((7, 1) has
        7 lanes > 3 PMUs)
      7 cores, 4 PMUs: untiled, (2, 2) -> 2 x 1 x 4 = 8 (2 lanes <= 4 PMUs)
      6 cores, 3 PMUs: tiled, (2, 3) -> 2 x 1 x 4 = 8."""
    dg = text_format.Parse(ALONE, setup_pb2.DataflowGraph())
    graph = graph_from_proto(dg, path="alone.txt", word=WORD)
    chip = PmuChip(pmu, 16.0, cores, (W, H))
    menus = [pairs((8, 4, 6), False, 0, (W, H), cores, whole=True)]
    got = solve_assignment(graph, [[0]], menus, [1], [(8, 4, 6)], WORD, chip,
                           [(0.0, 0.0)], True, 1.0)  # fmt: skip
    assert got is not None and got[0] == pytest.approx(cycles, rel=1e-9)
