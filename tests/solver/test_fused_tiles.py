"""Tile menus per fusion status and the fused-operand SRAM rule (solver/check.py), against
numbers derived by hand and an exhaustive enumeration over every integer tile written
here, independently of solver/ code (project issue #14)."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
from solver_fixtures import gemm, small_system

from generator.graph import Edge, KernelGraph, Pass
from solver.check import config_cost, kernel_memory_bytes, kernel_sram_bytes
from solver.cost import frontier
from solver.cost.menus import build_problem
from solver.fusion.solve import solve_graph
from solver.options import SolverOptions


def test_per_operand_menu_keeps_a_tile_the_total_traffic_frontier_drops() -> None:
    """M=K=N=8, buffer 17 elements. Output-stationary Tm=1, Tn=8 has buffer
    1*8 + 1 + 8 = 17, reads A once (a = MK = 64) and B eight times (b = 64*8 = 512):
    total 64 + 512 + 64 = 640. Tm=2, Tn=4 has buffer 8 + 6 = 14 and total
    64*2 + 64*4 + 64 = 448 < 640, so the total-traffic frontier drops Tm=1, Tn=8; and
    every tile there re-reads A (a > 64). With A fused, a re-read A is held whole
    (64 more elements: 14 + 64 > 17), so Tm=1, Tn=8 is the only tile that fits."""
    total = [p for p in frontier.gemm_frontier(8, 8, 8) if p.buffer <= 17]
    assert all(p.a_traffic > 64 for p in total)
    assert (14, 448) in {(p.buffer, p.traffic) for p in total}
    fused = frontier.fusion_menu(8, 8, 8, 17, size=10, a_states=(frontier.DRAM, frontier.FUSED))
    once = [p for p in fused if p.a_traffic == 64]
    assert [(p.buffer, p.b_traffic, p.tile_m, p.tile_n) for p in once] == [(17, 512, 1, 8)]
    # the all-DRAM part of the menu is still the total-traffic frontier
    assert {(p.buffer, p.traffic) for p in total} <= {(p.buffer, p.traffic) for p in fused}


def _tiles(m: int, k: int, n: int) -> list[tuple[int, int, int, int, int]]:
    """(buffer, A traffic, B traffic, Tm, Tn) in elements of every integer tile of the
    three tiling families of DESIGN.md (no smallest-tile-per-pass shortcut)."""
    out = []
    for tm in range(1, m + 1):
        for tn in range(1, n + 1):
            out.append((tm * tn + tm + tn, m * k * -(-n // tn), k * n * -(-m // tm), tm, tn))
        out.append((tm * k + k + tm, m * k, k * n * -(-m // tm), tm, n))
    for tn in range(1, n + 1):
        out.append((tn * k + k + tn, m * k * -(-n // tn), k * n, m, tn))
    return out


def _enumerate_chain(m: int, k1: int, n1: int, n2: int, sram: float, e: int = 2) -> float:
    """Least DRAM bytes of C1 = A W1, C2 = C1 W2 (bf16) over both segmentations and
    every integer tile, by the fused-operand rule: fused, C1 is not written or read, g1
    takes its stream buffer 2*Tm*Tn, and g2 holds all of C1 when it re-reads it."""
    t1, t2 = _tiles(m, k1, n1), _tiles(m, n1, n2)
    alone1 = min(e * (a + b + m * n1) for buf, a, b, _, _ in t1 if buf * e <= sram)
    alone2 = min(e * (a + b + m * n2) for buf, a, b, _, _ in t2 if buf * e <= sram)
    best = alone1 + alone2
    for buf1, a1, b1, tm1, tn1 in t1:
        s1 = buf1 * e + min(2 * tm1 * tn1 * e, sram)
        for buf2, a2, b2, _, _ in t2:
            hold = m * n1 * e if a2 > m * n1 else 0
            if s1 + buf2 * e + hold <= sram:
                best = min(best, e * (a1 + b1) + e * (b2 + m * n2))
    return best


def _chain_problem(m: int, k1: int, n1: int, n2: int, sram: float, points: int):
    g1 = gemm("g1", m, k1, n1, a_dims=("t", "h"))
    g2 = gemm("g2", m, n1, n2, a_dims=("t", "g1_o"))
    graph = KernelGraph("chain", (g1, g2), (Edge("g1", "g2", "a", tensor_bytes=m * n1 * 2),))
    system = small_system(num_chips=1, sram_bytes=sram)
    chip = replace(system.chip, peak_flops={"bf16": 1e18}, vector_flops=1e17)  # memory-bound
    return build_problem(
        graph,
        chip,
        system.dram.bandwidth_Bps,
        1,
        [],
        {},
        "bf16",
        dataflow=True,
        overlap=True,
        max_configs=2,
        tiling_points=points,
    )


CHAINS = [
    (16, 4, 8, 4, 200),
    (16, 4, 8, 4, 300),
    (32, 4, 4, 8, 300),
    (32, 4, 4, 8, 600),
    (16, 8, 4, 8, 400),
    (12, 4, 6, 4, 400),
    (8, 8, 8, 8, 400),
]


@pytest.mark.parametrize("m,k1,n1,n2,sram", CHAINS)
def test_fused_chain_matches_enumeration_over_every_integer_tile(m, k1, n1, n2, sram) -> None:
    """With menus sampled no further than their frontiers (enough points), MapShard's
    optimum equals the enumeration; the plan is fused in most of these cases."""
    problem = _chain_problem(m, k1, n1, n2, sram, points=64)
    sol = solve_graph(problem, SolverOptions(gap=0.0))
    want = _enumerate_chain(m, k1, n1, n2, sram)
    assert sol.status == "optimal"
    assert math.isclose(sol.objective_s * problem.dram_bandwidth_Bps, want, rel_tol=1e-6)


def test_total_traffic_menus_miss_the_fused_optimum() -> None:
    """(16, 4, 8, 4) with 300 B: the enumeration's fused plan moves 576 B; menus from the
    total-traffic frontier alone (the old menus) reach only 768 B."""
    want = _enumerate_chain(16, 4, 8, 4, 300)
    assert want == 576
    problem = _chain_problem(16, 4, 8, 4, 300, points=64)
    dram_only = [
        [o for o in menu.options if o.tile in _total_tiles(menu.name)] for menu in problem.kernels
    ]
    old = replace(
        problem,
        kernels=tuple(
            replace(mn, options=tuple(opts)) for mn, opts in zip(problem.kernels, dram_only)
        ),
    )
    got_old = solve_graph(old, SolverOptions(gap=0.0)).objective_s * problem.dram_bandwidth_Bps
    assert math.isclose(got_old, 768, rel_tol=1e-6)


def _total_tiles(name: str) -> set[str]:
    m, k, n = {"g1": (16, 4, 8), "g2": (16, 8, 4)}[name]
    return {p.describe() for p in frontier.menu(m, k, n, 150, size=64)}


def test_fused_consumer_that_rereads_its_input_holds_it_whole() -> None:
    """g2 = C1[16x8] x W2[8x4], bf16, C1 fed by g1 inside the configuration. Tile
    output-stationary Tm=2, Tn=2: buffer 2*2 + 2 + 2 = 8 elements = 16 B; it reads C1
    ceil(4/2) = 2 times (size 16*8*2 = 256 B, traffic 512 B > 256 B), so C1 is held
    whole: SRAM 16 + 256 = 272 B and no DRAM for C1; g2 then moves W2 (8*4*2 = 64 B
    times ceil(16/2) = 8 passes = 512 B) and C2 (16*4*2 = 128 B): 640 B."""
    problem = _chain_problem(16, 4, 8, 4, 1e6, points=64)
    g2 = problem.kernels[1]
    o = next(i for i, op in enumerate(g2.options) if op.tile == "output_stationary:Tm=2,Tn=2")
    opt = g2.options[o]
    assert opt.buffer_bytes == 16
    assert opt.traffic_of("a") == 512 and opt.size_of("a") == 256
    assert kernel_sram_bytes(problem, 1, o, {0, 1}) == 16 + 256
    assert kernel_memory_bytes(problem, 1, o, {0, 1}) == 512 + 128
    # alone it reads C1 from DRAM, both passes, and holds nothing
    assert kernel_sram_bytes(problem, 1, o, {1}) == 16
    assert kernel_memory_bytes(problem, 1, o, {1}) == 512 + 512 + 128
    # Tm=1, Tn=4 reads C1 once (Tn = N): fused, only its buffer 4 + 1 + 4 = 9 elements
    once = next(i for i, op in enumerate(g2.options) if op.tile == "output_stationary:Tm=1,Tn=4")
    assert g2.options[once].traffic_of("a") == 256
    assert kernel_sram_bytes(problem, 1, once, {0, 1}) == 18
    assert kernel_memory_bytes(problem, 1, once, {0, 1}) == 64 * 16 + 128


def test_saved_activation_fused_with_its_backward_consumer_is_held_whole() -> None:
    """A forward GEMM's output read by a backward GEMM: in one configuration it costs no
    DRAM and its whole size (16*8*2 = 256 B) in SRAM, whatever the consumer's tiling."""
    fwd = gemm("f", 16, 4, 8, a_dims=("t", "h"))
    bwd = replace(gemm("b", 16, 8, 4, a_dims=("t", "f_o")), pass_=Pass.BWD)
    graph = KernelGraph("fb", (fwd, bwd), (Edge("f", "b", "a", tensor_bytes=256),))
    system = small_system(num_chips=1, sram_bytes=1e6)
    problem = build_problem(
        graph,
        system.chip,
        system.dram.bandwidth_Bps,
        1,
        [],
        {},
        "bf16",
        dataflow=True,
        overlap=True,
        max_configs=2,
        tiling_points=10,
    )
    assert problem.edges[0].saved
    menu = problem.kernels[1]
    for o, opt in enumerate(menu.options):
        assert kernel_sram_bytes(problem, 1, o, {0, 1}) == opt.buffer_bytes + 256
        assert kernel_sram_bytes(problem, 1, o, {1}) == opt.buffer_bytes
        assert kernel_memory_bytes(problem, 1, o, {0, 1}) == sum(
            t for name, t in opt.traffic if name != "a"
        )
    choice = [0, 0]
    assert config_cost(problem, [0, 1], choice).sram_bytes == (
        kernel_sram_bytes(problem, 0, 0, {0, 1}) + menu.options[0].buffer_bytes + 256
    )


def test_default_menu_keeps_a_middle_tile_of_a_fused_output_frontier() -> None:
    """Found by the independent brute force (tests/independent/, diamond of 4 kernels on 4
    chips): a GEMM M=16, K=4, N=12 whose output feeds a consumer in its configuration,
    A and B from DRAM, buffer 625 elements. B-panel resident Tn=6: buffer 6*4 + 4 + 6 = 34,
    stream 2*16*6 = 192, SRAM 226; A read ceil(12/6) = 2 times (2*64 = 128), B once (48):
    traffic 176. The menu at the default size used to keep only the two extremes of this
    status's frontier and dropped it."""
    states = (frontier.DRAM,)
    menu = frontier.fusion_menu(16, 4, 12, 625, 10, states, states, (frontier.DRAM, frontier.FUSED))
    assert (34, 128, 48, "b_resident", 16, 6) in {
        (p.buffer, p.a_traffic, p.b_traffic, p.family, p.tile_m, p.tile_n) for p in menu
    }


SHAPES = [(16, 4, 12, 625), (8, 8, 8, 40), (12, 16, 6, 120), (6, 24, 16, 300), (16, 16, 16, 90)]


def _status_cost(
    status: tuple[str, str, str], shape: tuple[int, int, int], tile: tuple[int, ...]
) -> tuple[int, int]:
    """(SRAM, DRAM traffic) in elements of one tile (buffer, a, b, Tm, Tn) when A, B and C
    have `status`: a fused input is free in DRAM and held whole when re-read (traffic above
    its size), a held one always; a fused output takes two output tiles of stream buffer."""
    m, k, n = shape
    buf, a, b, tm, tn = tile
    sram, traffic = buf + (2 * tm * tn if status[2] == frontier.FUSED else 0), 0
    for state, q, full in ((status[0], a, m * k), (status[1], b, k * n)):
        traffic += q if state == frontier.DRAM else 0
        held = state == frontier.HELD or (state == frontier.FUSED and q > full)
        sram += full if held else 0
    return sram, traffic


@pytest.mark.parametrize("m,k,n,cap", SHAPES)
def test_default_menu_holds_every_status_frontier_of_a_small_gemm(m, k, n, cap) -> None:
    """For every status of A, B (dram, fused, held) and C (dram, fused), every point of the
    (SRAM, traffic) Pareto frontier over every integer tile (enumerated here by _tiles,
    with the fused-operand rule written out in _status_cost) has a tile of equal cost in
    the default menu."""
    d, f, h = frontier.DRAM, frontier.FUSED, frontier.HELD
    menu = frontier.fusion_menu(m, k, n, cap, 10, (d, f, h), (d, f, h), (d, f))
    for status in itertools.product((d, f, h), (d, f, h), (d, f)):
        pts = sorted({_status_cost(status, (m, k, n), t) for t in _tiles(m, k, n)})
        pts = [p for p in pts if p[0] <= cap]
        front = [p for i, p in enumerate(pts) if all(q[1] > p[1] for q in pts[:i])]
        got = {
            _status_cost(
                status, (m, k, n), (p.buffer, p.a_traffic, p.b_traffic, p.tile_m, p.tile_n)
            )
            for p in menu
        }
        assert set(front) <= got, (status, sorted(set(front) - got))


def test_sampled_menus_are_drawn_from_the_whole_status_frontiers() -> None:
    """A random family of shapes, buffers and operand statuses: every tile a sampled menu
    (size 2, 4, 10) keeps is on the whole status frontiers (the tile groups' menu, size
    WHOLE), both extremes of the all-DRAM frontier are in every menu, and each menu is a
    set of distinct (buffer, a, b, Tm x Tn) tiles that fit the buffer."""
    import random

    rng = random.Random(11)
    statuses = [(frontier.DRAM,), (frontier.DRAM, frontier.FUSED),
                (frontier.DRAM, frontier.FUSED, frontier.HELD)]  # fmt: skip
    for _ in range(40):
        m, k, n = (rng.choice([1, 24, 300, 1024, 4096, 28672]) for _ in range(3))
        cap = rng.choice([2e3, 1e5, 3e6, 4e8])
        st = (rng.choice(statuses), rng.choice(statuses), rng.choice(statuses[:2]))
        whole, _ = frontier.fusion_points(m, k, n, cap, frontier.WHOLE, *st)
        dram_only, _ = frontier.fusion_points(
            m, k, n, cap, frontier.WHOLE, *((frontier.DRAM,),) * 3
        )
        for size in (2, 4, 10):
            menu, _ = frontier.fusion_points(m, k, n, cap, size, *st)
            assert set(menu) <= set(whole)
            assert all(p.buffer <= cap for p in menu)
            keys = [(p.buffer, p.a_traffic, p.b_traffic, p.tile_m * p.tile_n) for p in menu]
            assert len(keys) == len(set(keys))
            if dram_only:
                ends = {
                    min(dram_only, key=lambda p: p.buffer),
                    min(dram_only, key=lambda p: p.traffic),
                }
                assert {(p.buffer, p.traffic) for p in ends} <= {
                    (p.buffer, p.traffic) for p in menu
                }
