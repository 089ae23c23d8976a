"""Which tensor-parallel degrees a model's attention splits evenly: TP must divide the
attention heads, and divide the KV heads or be a multiple of them (Megatron-LM and vLLM
replicate each KV head over TP / KV heads chips). Any other TP would split something else
instead (TP 3 on 32 heads splits tokens), so a pinned one is refused (mapshard.compat) and
the search offers no other (solver.search.degrees applies the same rule)."""

from __future__ import annotations

from generator.graph import ModelInfo


def tp_fits(model: ModelInfo, tp: int) -> bool:
    """TP splits the heads evenly, and the KV heads too (or, fewer KV heads than TP, each
    replicated on the same number of chips); True for a model without heads."""
    if tp <= 1 or model.num_heads <= 0:
        return True
    kv = model.num_kv_heads or model.num_heads
    return model.num_heads % tp == 0 and (kv % tp == 0 or tp % kv == 0)
