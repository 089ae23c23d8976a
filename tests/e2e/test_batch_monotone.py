"""A larger decode batch or a longer context is never faster (found by fuzzing: on a B200 a
Qwen2.5-7B decode step at batch 12 was 5% faster than at batch 8, its projections read
from measured GEMM rows that a larger m undercut). Drawn at random over chips whose GEMMs
and decode attention come from measured tables, shipped models and contexts."""

from __future__ import annotations

import random
from pathlib import Path

from google.protobuf import text_format

from mapshard import pipeline
from schema import setup_pb2

CHIPS = ("H100-SXM5-80GB", "H200-SXM-141GB", "B200", "GB200")
MODELS = ("Llama-3.2-1B", "Qwen2.5-7B", "Llama-3.1-8B")
BATCHES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)


def _step_s(model: str, chip: str, batch: int, context: int) -> float:
    text = (
        f'workload {{ llm_inference {{ model {{ hf_model: "{model}" }} phase: DECODE '
        f"batch: {batch} context_len: {context} }} }} "
        f'system {{ chip: "{chip}" num_chip: 1 }}'
    )
    loaded = pipeline.load_message(text_format.Parse(text, setup_pb2.Setup()), Path("s.txt"))
    return pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded))).latency_s


def test_decode_steps_never_get_faster_with_more_work() -> None:
    rng = random.Random(11)
    for _ in range(3):
        model, chip = rng.choice(MODELS), rng.choice(CHIPS)
        context = rng.randint(64, 4096)
        steps = [_step_s(model, chip, b, context) for b in BATCHES]
        for (b0, t0), (b1, t1) in zip(zip(BATCHES, steps), zip(BATCHES[1:], steps[1:])):
            assert t0 <= t1 * (1 + 1e-12), (model, chip, context, b0, t0, b1, t1)
        longer = _step_s(model, chip, 8, 2 * context)
        assert steps[BATCHES.index(8)] <= longer * (1 + 1e-12), (model, chip, context)
