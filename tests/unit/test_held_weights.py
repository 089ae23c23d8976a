"""A weight kept on chip for the graph instances that run its configuration back to back
(issue #37 item 4: weights that fit in SRAM were re-read from DRAM for every instance):
the menus' held tile, by hand."""

from __future__ import annotations

from solver.cost.menus import build_menu
from tests.solver_fixtures import gemm, small_chip

# C[64 x 128] = A[64 x 256] x W[256 x 128], 2 B a word: W is 65,536 B
KERNEL = gemm("g", 64, 256, 128)
HELD_TILE = "b_resident:Tm=64,Tn=128"  # the whole of B = W resident


def _options(sram_bytes: float, dataflow: bool, instances: int) -> list:
    chip = small_chip(sram_bytes)
    menu = build_menu(KERNEL, chip, 1, (), {}, sram_bytes, "bf16", dataflow, 10, None, instances)
    return list(menu.options), menu


def test_held_tile_reads_the_weight_once_for_all_instances() -> None:
    """8 instances: the b_resident tile spanning all of W holds (Tn K + K + Tn) = 128 x 256
    + 256 + 128 = 33,152 elements (66,304 B); per instance it reads A once (64 x 256 x 2 =
    32,768 B), writes C once (16,384 B) and 1/8 of W (8,192 B)."""
    options, menu = _options(2e5, True, 8)
    held = [o for o in options if o.traffic_of("w") < 65536]
    assert len(held) == 1
    o = held[0]
    assert o.tile == HELD_TILE and o.buffer_bytes == 66304
    assert dict(o.traffic) == {"a": 32768, "w": 8192, "c": 16384}
    # the exact-menu groups hold it too (tile refinement replaces options by groups)
    tiles = [t for g in menu.tile_groups for t in g.tiles if t.tile == HELD_TILE]
    assert any(dict(t.traffic)["w"] == 8192 for t in tiles)


def test_no_held_tile_without_repeats_fusion_or_room() -> None:
    """One instance, kernel by kernel, or SRAM below the 66,304 B the whole W needs: every
    option reads W at least once per instance."""
    for sram, dataflow, instances in ((2e5, True, 1), (2e5, False, 8), (6e4, True, 8)):
        options, _ = _options(sram, dataflow, instances)
        assert options
        assert min(o.traffic_of("w") for o in options) == 65536, (sram, dataflow, instances)
