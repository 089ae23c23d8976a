"""The on-chip tile a kernel may pin (`Kernel.tile`), in the words plan.txt writes it.

A GEMM tile is `<family>:Tm=<rows>,Tn=<cols>` over the kernel's per-chip M x N (DESIGN.md's
three tiling families: the output tile is Tm x Tn; `a_resident` keeps a Tm-row panel of A
with the whole N, `b_resident` a Tn-column panel of B with the whole M); every other kernel
streams row by row (`stream`). Parsing lives here, at the bottom, so a typo is refused with
the setup's field name before anything is built."""

from __future__ import annotations

import re
from dataclasses import dataclass

TILE_FAMILIES = ("output_stationary", "a_resident", "b_resident")
STREAM = "stream"
TILE_SYNTAX = (
    "'output_stationary:Tm=64,Tn=128', 'a_resident:Tm=64,Tn=<N>', "
    "'b_resident:Tm=<M>,Tn=128', 'stream' (non-GEMM kernels) or empty (searched)"
)
_PATTERN = re.compile(r"^([a-z_]+):Tm=([0-9]+),Tn=([0-9]+)$")


@dataclass(frozen=True)
class TilePin:
    family: str  # one of TILE_FAMILIES, or STREAM
    tile_m: int = 0
    tile_n: int = 0


def parse_tile(text: str) -> TilePin | None:
    """The pinned tile, or None when `text` is not a tile (the caller says what is valid)."""
    text = text.strip()
    if text == STREAM:
        return TilePin(STREAM)
    match = _PATTERN.match(text)
    if match is None or match.group(1) not in TILE_FAMILIES:
        return None
    tile_m, tile_n = int(match.group(2)), int(match.group(3))
    if tile_m < 1 or tile_n < 1 or max(tile_m, tile_n) > 1 << 40:
        return None
    return TilePin(match.group(1), tile_m, tile_n)
