"""The on-chip tile a kernel may pin (`Kernel.tile`, `KernelPin.tile`), in the words plan.txt
writes it.

A GEMM tile is `<family>:Tm=<rows>,Tn=<cols>` over the kernel's per-chip M x N (DESIGN.md's
three tiling families: the output tile is Tm x Tn; `a_resident` keeps a Tm-row panel of A
with the whole N, `b_resident` a Tn-column panel of B with the whole M); a fused attention
kernel's tile is `attn:Br=<rows>,Bc=<rows>` (Br resident rows of one problem, the streamed
side in chunks of Bc: solver/cost/attention_tiles.py); every other kernel streams row by row
(`stream`). Parsing lives here, at the bottom, so a typo is refused with the setup's field
name before anything is built, and the writer's every word is one the reader knows."""

from __future__ import annotations

import re
from dataclasses import dataclass

TILE_FAMILIES = ("output_stationary", "a_resident", "b_resident")
STREAM = "stream"
ATTENTION = "attn"  # a fused attention kernel's (Br, Bc) tile
TILE_SYNTAX = (
    "'output_stationary:Tm=64,Tn=128', 'a_resident:Tm=64,Tn=<N>', "
    "'b_resident:Tm=<M>,Tn=128', 'attn:Br=128,Bc=128' (fused attention), 'stream' (other "
    "kernels) or empty (searched)"
)
_PATTERN = re.compile(r"^([a-z_]+):Tm=([0-9]+),Tn=([0-9]+)$")
_ATTENTION = re.compile(r"^attn:Br=([0-9]+),Bc=([0-9]+)$")
_LARGEST = 1 << 40


@dataclass(frozen=True)
class TilePin:
    family: str  # one of TILE_FAMILIES, ATTENTION or STREAM
    tile_m: int = 0  # GEMM Tm, attention Br
    tile_n: int = 0  # GEMM Tn, attention Bc


def parse_tile(text: str) -> TilePin | None:
    """The pinned tile, or None when `text` is not a tile (the caller says what is valid)."""
    text = text.strip()
    if text == STREAM:
        return TilePin(STREAM)
    match = _PATTERN.match(text)
    if match is not None and match.group(1) in TILE_FAMILIES:
        family, tile_m, tile_n = match.group(1), int(match.group(2)), int(match.group(3))
    elif (match := _ATTENTION.match(text)) is not None:
        family, tile_m, tile_n = ATTENTION, int(match.group(1)), int(match.group(2))
    else:
        return None
    if tile_m < 1 or tile_n < 1 or max(tile_m, tile_n) > _LARGEST:
        return None
    return TilePin(family, tile_m, tile_n)


def tile_text(pin: TilePin) -> str:
    """The words of a tile, as the solver's menus and plan.txt write them."""
    if pin.family == STREAM:
        return STREAM
    if pin.family == ATTENTION:
        return f"{ATTENTION}:Br={pin.tile_m},Bc={pin.tile_n}"
    return f"{pin.family}:Tm={pin.tile_m},Tn={pin.tile_n}"
