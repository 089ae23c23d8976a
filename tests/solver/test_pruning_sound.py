"""The outer search's pruning, held to what "optimal" claims on layouts drawn at random:
every layout it lists, pinned (execution.placement) and run, is no faster than the plan,
and a pruned one no faster than the bound that pruned it. A roofline bound that read all of
an MoE layer's experts for a decode step reaching a few of them pruned the fastest layout
(Qwen3-30B-A3B, batch 8 on 8 H100s: DP 8 at 6.53 ms behind a 21 ms bound, a TP 4 x DP 2
plan at 7.94 ms called optimal)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard import pipeline
from schema import setup_pb2

MODELS = ("Qwen3-30B-A3B", "Mixtral-8x7B-v0.1", "DeepSeek-V2-Lite", "Llama-3.1-8B")
CHIPS = ("H100-SXM5-80GB", "H200-SXM-141GB", "B200")


def _draw(seed: int) -> str:
    rng = random.Random(seed)
    return (
        f'workload {{ llm_inference {{ model {{ hf_model: "{rng.choice(MODELS)}" }} '
        f"phase: DECODE batch: {rng.choice((1, 2, 8, 16))} "
        f"context_len: {rng.choice((1024, 4096))} }} }}\n"
        f'system {{ chip: "{rng.choice(CHIPS)}" num_chip: {rng.choice((4, 8))} }}\n'
    )


def _plan(text: str):
    setup = text_format.Parse(text, setup_pb2.Setup())
    loaded = pipeline.load_message(setup, Path("setup.txt"))
    return pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))


@pytest.mark.parametrize("seed", [3, 11, 17])
def test_no_listed_layout_beats_an_optimal_plan(seed: int) -> None:
    text = _draw(seed)
    plan = _plan(text)
    assert plan.stats.status == "optimal", text
    checked = 0
    for c in plan.choices:
        if c.status not in ("solved", "pruned"):
            continue
        pinned = _plan(text + f'execution {{ placement: "{c.placement}" }}\n')
        assert pinned.latency_s >= plan.latency_s * (1 - 1e-9), (text, c.placement)
        if c.status == "pruned":
            assert pinned.latency_s >= c.lower_bound_s * (1 - 1e-9), (text, c.placement)
        checked += 1
    assert checked >= 3
