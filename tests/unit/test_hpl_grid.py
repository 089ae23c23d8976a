"""HPL on a P x Q process grid (generator/hpl.py, solver/search/process_grid.py): FLOP,
per-process shares, the grid's groups on the topology, the look-ahead composition and a
small run's step time, each worked out by hand from HPL's algorithm (Petitet et al., HPL
2.x: right-looking LU, panel broadcast along the process row, row swap and pivoting down the
process column, look-ahead depth 1)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.graph import KernelGraph, Phase, Workload
from generator.hpl import _pivot_graph, default_grid, process_share
from generator.proto_graph import graph_from_proto
from generator.proto_write import graph_to_proto
from hardware.system import NetworkLevel, Topology
from mapshard.fidelity.fit import library_system
from schema import setup_pb2
from schema.errors import SetupError
from solver.cost.efficiency import for_precision, plateau_warning
from solver.cost.menus import build_problem
from solver.search.assemble import graph_times
from solver.search.process_grid import dfmodel_grid, grid_spans


def build(text: str, chips: int):
    setup = text_format.Parse(text, setup_pb2.Setup())
    return build_workload(setup, Path("setup.txt"), chips)


def panel_flop(m: int, nb: int) -> float:
    """LU of an m x nb panel: sum_t (a - t)(b - 2t), a = m - 1, b = 2 nb - 1 (a division,
    a multiply-add per element right of the pivot), in closed form."""
    a, b, n = m - 1, 2 * nb - 1, nb
    s1, s2 = n * (n - 1) / 2, (n - 1) * n * (2 * n - 1) / 6
    return n * a * b - (2 * a + b) * s1 + 2 * s2


@pytest.mark.parametrize("n,b", [(4096, 256), (10000, 384), (240000, 1024)])
def test_whole_run_flop_is_unblocked_lu_plus_two_solves(n, b):
    """Blocked LU does exactly unblocked LU's 2/3 N^3 - N^2/2 - N/6; with the two N^2
    solves within 0.75/N of the customary 2/3 N^3 + 2 N^2."""
    w = build(f"workload {{ hpl {{ N: {n} B: {b} X: 2 Y: 4 }} }}", 8)
    exact = 2 / 3 * n**3 - n**2 / 2 - n / 6 + 2 * n**2
    assert w.flop_per_step == pytest.approx(exact, rel=1e-12)
    assert w.useful_flop == pytest.approx(2 / 3 * n**3 + 2 * n**2, rel=0.75 / n)


def test_default_grid_is_flat_with_p_at_most_q():
    """HPL's tuning advice: P <= Q, as square as the process count allows."""
    assert [default_grid(c) for c in (1, 7, 8, 12, 16, 8100)] == [
        (1, 1), (1, 7), (2, 4), (3, 4), (4, 4), (90, 90),
    ]  # fmt: skip
    assert build("workload { hpl { N: 4096 B: 256 } }", 8).process_grid == (2, 4)
    assert build("workload { hpl { N: 4096 B: 256 Y: 8 } }", 8).process_grid == (1, 8)


def test_a_grid_that_is_not_the_chip_count_is_one_line():
    with pytest.raises(SetupError) as err:
        build("workload { hpl { N: 4096 B: 256 X: 3 } }", 8)
    (line,) = err.value.problems
    assert "process grid X x Y = 3 x ?" in line and "8 chips" in line


def test_one_process_share_of_the_first_iteration():
    """N = 4096, NB = 512, 2 x 4 grid, iteration 0: m = 4096, n2 = 3584. A process holds
    ceil(3584/2) = 1792 trailing rows and ceil(3584/4) = 896 trailing columns:
      update DGEMM 2 x 1792 x 512 x 896 = 1,644,167,168 FLOP
      trsm (repeated down the column) 512 x 511 x 896 = 234,422,272 FLOP
      swap: all 512 pivot rows of its 896 columns, 458,752 elements = 3,670,016 bytes
      broadcast: its ceil(4096/2) = 2048 rows of the panel, 1,048,576 elements = 8 MiB
      panel: the 4096 x 512 panel's LU over the 2 processes of its column"""
    share = process_share(4096, 512, (2, 4))
    assert share["update"] == 2 * 1792 * 512 * 896 == 1_644_167_168
    assert share["trsm"] == 512 * 511 * 896 == 234_422_272
    assert share["swap"] * 8 == 3_670_016
    assert share["broadcast"] * 8 == 8 * 2**20
    assert share["panel"] == pytest.approx(panel_flop(4096, 512) / 2, rel=1e-15)
    # the update phase of iteration 0 holds exactly these per-process kernels
    w = build("workload { hpl { N: 4096 B: 512 X: 2 Y: 4 } }", 8)
    phases = {p.name: p for p in w.phases}
    update = phases["lu_00000"].graph.kernel("update")
    assert update.dim_sizes == {"rows": 1792, "panel": 512, "cols": 896}
    assert update.pinned_sharding == "none" and update.flop == 1_644_167_168
    swap = phases["lu_00000"].graph.kernel("row_swap")
    assert (swap.communication_group, swap.communication_bytes) == ("hpl_col", 3_670_016)
    bcast = phases["lu_00000_panel"].graph.kernel("panel_broadcast")  # iteration 1's panel
    assert (bcast.communication_group, bcast.communication_bytes) == ("hpl_row", 1792 * 512 * 8)
    pivot = phases["lu_00000_pivot"]
    assert pivot.count == 512 and pivot.overlaps == "lu_00000"  # one per panel column
    assert pivot.graph.kernel("pivot").communication_bytes == (4 + 2 * 512) * 8


def _levels(*degrees: int) -> tuple[NetworkLevel, ...]:
    return tuple(NetworkLevel(f"L{i}", Topology.SWITCH, d, 1e11) for i, d in enumerate(degrees))


def test_grid_groups_per_level_of_the_hierarchy():
    """Two 8-chip nodes. Row-major ranks: a process row is Q consecutive ranks.
    4 x 4: a row inside a node (4 of level 0); a column (ranks 0, 4, 8, 12) takes 2
    positions in a node and 2 nodes. 2 x 8: a row is a whole node, a column 2 nodes.
    1 x 16: the row spans both levels, the column is one process."""
    lv = _levels(8, 2)
    degrees = {
        (p, q): {g: tuple(d for _, d in s) for g, s in grid_spans(lv, p, q).items()}
        for p, q in ((4, 4), (2, 8), (1, 16))
    }
    assert degrees[(4, 4)] == {"hpl_row": (4,), "hpl_col": (2, 2)}
    assert degrees[(2, 8)] == {"hpl_row": (8,), "hpl_col": (2,)}
    assert degrees[(1, 16)] == {"hpl_row": (8, 2), "hpl_col": ()}
    # DFModel's reading of its topology: r_r x 16 y 16 -> X 16, Y 16, a column the inner
    # level (its point-to-point swap on link_bw_x), a row the outer (its broadcast on y)
    assert dfmodel_grid(_levels(16, 16)) == (16, 16)
    assert dfmodel_grid(_levels(4, 2, 3)) == (8, 3) and dfmodel_grid(_levels(5)) == (1, 5)
    cm = grid_spans(_levels(16, 16), 16, 16, row_major=False)
    assert [lvl.name for lvl, _ in cm["hpl_col"]] == ["L0"]
    assert [lvl.name for lvl, _ in cm["hpl_row"]] == ["L1"]


def test_look_ahead_takes_the_longer_stream_and_reports_what_is_exposed():
    """graph_times: an update phase of 3 x 2 s beside a panel phase of 3 x 1 s and a pivot
    phase of 30 x 0.1 s: max(6, 3 + 3) = 6 s, nothing exposed; with 5 s of updates the
    critical path 6 s exposes 1 s, split 1/2 : 1/2 between panel and pivots."""
    g = KernelGraph("g", ())

    def times(update_s: float):
        w = Workload(
            kind="hpl",
            phases=(
                Phase("u", g, 3),
                Phase("u_panel", g, 3, overlaps="u"),
                Phase("u_pivot", g, 30, overlaps="u"),
                Phase("solve", g),
            ),
        )
        return graph_times(w, {"u": update_s / 3, "u_panel": 1.0, "u_pivot": 0.1, "solve": 0.5})

    t = times(6.0)
    assert t.latency_s == pytest.approx(6.5)
    assert dict(t.breakdown) == pytest.approx({"u": 6, "u_panel": 0, "u_pivot": 0, "solve": 0.5})
    t = times(5.0)
    assert t.latency_s == pytest.approx(6.5)
    assert dict(t.breakdown) == pytest.approx(
        {"u": 5, "u_panel": 0.5, "u_pivot": 0.5, "solve": 0.5}
    )


def test_depth_zero_runs_each_panel_after_its_update():
    """HPL.dat DEPTH 0: the next panel's factorisation and pivots no longer name the update
    they would hide under, so graph_times adds them: with the times of the test above,
    6 + 3 + 3 + 0.5 = 12.5 s instead of 6.5 s. Unset is depth 1; a negative depth is one
    line naming the field."""
    text = "system { num_chip: 1 } workload { hpl { N: 4096 B: 256 X: 1 Y: 1 %s } }"
    ahead = build(text % "", 1).phases
    serial = build(text % "depth: 0", 1).phases
    assert build(text % "depth: 1", 1).phases == ahead
    critical = [
        p for p in ahead if p.name.startswith("lu_") and p.name.endswith(("_panel", "_pivot"))
    ]
    assert critical and all(p.overlaps == p.name.rsplit("_", 1)[0] for p in critical)
    assert [p.name for p in serial] == [p.name for p in ahead]
    assert all(p.overlaps == "" for p in serial)
    g = KernelGraph("g", ())
    w = Workload(
        kind="hpl",
        phases=(
            Phase("u", g, 3),
            Phase("u_panel", g, 3),
            Phase("u_pivot", g, 30),
            Phase("solve", g),
        ),
    )
    times = {"u": 2.0, "u_panel": 1.0, "u_pivot": 0.1, "solve": 0.5}
    assert graph_times(w, times).latency_s == pytest.approx(12.5)
    with pytest.raises(SetupError, match=r"workload.hpl.depth must be >= 0"):
        build(text % "depth: -1", 1)


def test_fp64_plateaus_are_the_cited_sustained_clocks():
    """H100/H200: Top500 Rpeak 55.0-59.0 TF per GPU (NVIDIA's HPL-sustained clock),
    midpoint 57 of 66.9 TF; A100: 1305 of 1410 MHz. The A100's 16-bit K roll-off (176 at
    312 TF) is a fixed time per tile: 176 x 19.5 / 312 = 11 K steps at FP64 (the H200's
    448 at 989.4 TF: 30.3). B200 has no cited FP64 rate: its FP64 GEMMs stay at the peak,
    flagged."""
    for name, half in (("H100-SXM5-80GB", 0.0), ("H200-SXM-141GB", 448 * 66.9 / 989.4)):
        eff = for_precision(library_system(name).chip, "fp64").efficiency
        assert eff.gemm_util == round(57.0 / 66.9, 3) == 0.852
        assert eff.gemm_half_dim == pytest.approx(half)
    a100 = library_system("A100-SXM4-80GB").chip
    eff = for_precision(a100, "fp64").efficiency
    assert eff.gemm_util == round(1305 / 1410, 3) == 0.926
    assert eff.gemm_half_dim == pytest.approx(176 * 19.5 / 312) == pytest.approx(11.0)
    assert for_precision(for_precision(a100, "fp64"), "bf16").efficiency.gemm_half_dim == 176
    assert plateau_warning(a100, "fp64") == ""
    b200 = library_system("B200").chip
    assert "uncalibrated: fp64" in plateau_warning(b200, "fp64")


def test_grid_kernels_round_trip_through_the_graph_file():
    """`mapshard generate` writes each phase as einsum kernels; the grid groups ride along
    (EinsumKernel.communication_group), so the file reads back the same graph."""
    w = build("workload { hpl { N: 4096 B: 512 X: 2 Y: 4 } }", 8)
    for phase in w.phases:
        again = graph_from_proto(graph_to_proto(phase.graph), path="x", name=phase.graph.name)
        assert again == phase.graph, phase.name


def test_a_pivot_step_streams_its_column_at_one_cores_share_of_dram():
    """One panel column of a 1 x 1 grid on H200, 32,768 rows of FP64: the column read and
    written once (2 x 8 x 32,768 = 524,288 B) by one of the 132 SMs, at 1/132 of the
    achieved DRAM bandwidth (4.8 TB/s x the chip's copy fraction 0.8595 = 4.1256 TB/s):
    524,288 / (4.1256e12 / 132) = 16.775 us, against 0.127 us at the whole chip's rate.
    A 2 x 4 grid's process holds ceil(32,768 / 2) rows: half the time."""
    system = library_system("H200-SXM-141GB")
    step_s = 2 * 8 * 32768 / (4.8e12 * 0.8595 / 132)
    assert step_s == pytest.approx(16.775e-6, rel=1e-4)
    for grid, expected_s in (((1, 1), step_s), ((2, 4), step_s / 2)):
        graph = _pivot_graph("pivot", 32768, 1024, grid, 8.0)
        problem = build_problem(
            graph, system.chip, system.dram.bandwidth_Bps, 1, [], {}, "fp64", False, True, 0
        )
        (option,) = problem.kernels[0].options
        assert option.compute_s == pytest.approx(expected_s, rel=1e-9)
        assert option.time_source == "1 of 132 cores: their share of DRAM bandwidth"


def _random_pivots(count: int):
    """Seeded (library chip, rows left, panel width, grid) cases."""
    rng = random.Random(4)
    chips = ("H100-SXM5-80GB", "H200-SXM-141GB", "A100-SXM4-80GB", "B200")
    for _ in range(count):
        p = rng.choice((1, 2, 4, 8))
        yield rng.choice(chips), rng.randrange(1024, 400_000), rng.choice((256, 512, 1024)), p


@pytest.mark.parametrize("chip,m,nb,p", list(_random_pivots(12)))
def test_any_pivot_step_is_one_cores_share_of_its_column(chip, m, nb, p):
    """For any chip and grid: the step reads and writes its ceil(m/P) doubles of the column
    at DRAM bandwidth x copy fraction / cores, never faster than the whole chip would."""
    system = library_system(chip)
    eff_Bps = system.dram.bandwidth_Bps * system.chip.efficiency.dram_util
    expected_s = 2 * 8 * math.ceil(m / p) / (eff_Bps / system.chip.cores)
    graph = _pivot_graph("pivot", m, nb, (p, 4), 8.0)
    problem = build_problem(
        graph, system.chip, system.dram.bandwidth_Bps, 1, [], {}, "fp64", False, True, 0
    )
    (option,) = problem.kernels[0].options
    assert option.compute_s == pytest.approx(expected_s, rel=1e-9)
    assert option.compute_s >= 2 * 8 * math.ceil(m / p) / eff_Bps
