"""The shipped model zoo (generator/models/): every config loads, and the generator's own
parameter counter (ModelInfo num_params / num_active_params) agrees with the figure each
model's publisher gives: model card, hub page (the safetensors parameter widget) or paper.

The published figures below are written by hand with their source, never read back from
the code. A published figure is a rounded or truncated value (Meta's "1.23B" for
1,235,814,400 truncates, Mistral's "141B" rounds), so a count matches when rounding or
truncating it to the figure's last digit gives the figure; "70B" has the precision of its
leading digit (Llama-2-70B is 68.98B). For DeepSeek the activated figure leaves out the
input embedding table (a lookup, no compute), as DeepSeek counts it.
"""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from generator.models import shipped_models
from mapshard import cli
from mapshard.models_list import model_row

# name: (published total, published active or None, source)
PUBLISHED = {
    "Llama-3.1-8B": ("8.03B", None, "hub page, meta-llama/Llama-3.1-8B"),
    "Llama-3.1-70B": ("70B", None, "model card, meta-llama/Llama-3.1-70B"),
    "Llama-3.1-405B": ("405B", None, "model card, meta-llama/Llama-3.1-405B"),
    "Llama-3.2-1B": ("1.23B", None, "model card table, meta-llama/Llama-3.2-1B"),
    "Llama-3.3-70B-Instruct": ("70B", None, "model card, meta-llama/Llama-3.3-70B-Instruct"),
    "Llama-2-7b-hf": ("7B", None, "Llama 2 paper, Table 1"),
    "Llama-2-70b-hf": ("70B", None, "Llama 2 paper, Table 1"),
    "GPT-3-175B-gpt2style": ("175B", None, "GPT-3 paper, Table 2.1"),
    "Mixtral-8x7B-v0.1": ("46.7B", "12.9B", "Mistral AI, Mixtral of experts (blog, paper)"),
    "Mixtral-8x22B-v0.1": ("141B", "39B", "Mistral AI, Cheaper, Better, Faster, Stronger"),
    "Mistral-Nemo-Base-2407": ("12B", None, "model card, mistralai/Mistral-Nemo-Base-2407"),
    "Phi-3-mini-4k-instruct": ("3.8B", None, "model card; Phi-3 technical report"),
    "phi-4": ("14.7B", None, "hub page, microsoft/phi-4 (model card: 14B)"),
    "Qwen2-7B": ("7.62B", None, "hub page, Qwen/Qwen2-7B"),
    "Qwen2.5-7B": ("7.61B", None, "model card, Qwen/Qwen2.5-7B"),
    "Qwen2.5-32B": ("32.8B", None, "hub page, Qwen/Qwen2.5-32B (card text: 32.5B)"),
    "Qwen2.5-72B": ("72.7B", None, "model card, Qwen/Qwen2.5-72B"),
    "Qwen3-8B": ("8.2B", None, "model card, Qwen/Qwen3-8B"),
    "Qwen3-32B": ("32.8B", None, "model card, Qwen/Qwen3-32B"),
    "Qwen3-30B-A3B": ("30.5B", "3.3B", "model card, Qwen/Qwen3-30B-A3B"),
    "Qwen3-235B-A22B": ("235B", "22B", "model card, Qwen/Qwen3-235B-A22B"),
    "DeepSeek-V2-Lite": ("15.7B", "2.4B", "model card, deepseek-ai/DeepSeek-V2-Lite"),
    "DeepSeek-V3": ("671B", "37B", "DeepSeek-V3 technical report, abstract"),
    "gemma-2-2b": ("2.6B", None, "Gemma 2 paper / model card"),
    "gemma-2-9b": ("9.24B", None, "hub page, google/gemma-2-9b"),
    "gemma-2-27b": ("27B", None, "Gemma 2 paper / model card"),
}


def matches(count: int, published: str) -> bool:
    """`count` rounds or truncates to `published` ("8.03B", "70B") at its last digit."""
    figure = Decimal(published.rstrip("B"))
    digits = figure.normalize().as_tuple()
    unit = Decimal(10) ** digits.exponent * Decimal(10) ** 9
    scaled = Decimal(count) / unit
    target = figure * Decimal(10) ** 9 / unit
    return int(scaled + Decimal("0.5")) == target or math.floor(scaled) == target


def test_matches_rounds_or_truncates_at_the_last_digit():
    assert matches(8_030_261_248, "8.03B") and matches(68_976_648_192, "70B")
    assert matches(1_235_814_400, "1.23B") and not matches(1_245_000_000, "1.23B")
    assert not matches(8_600_000_000, "7B") and not matches(64_000_000_000, "70B")


def test_every_shipped_model_has_a_published_figure():
    assert set(shipped_models()) == set(PUBLISHED)
    assert len(PUBLISHED) >= 25


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_the_published_figure(name):
    total, active, source = PUBLISHED[name]
    row = model_row(name)
    assert matches(row.params, total), (name, row.params, total, source)
    if active is None:
        assert row.active_params == row.params and not row.experts
        return
    assert row.experts and 0 < row.active_params < row.params
    counted = row.active_params
    if name.startswith("DeepSeek"):
        counted -= row.hidden * _vocab(name)  # the input embedding table
    assert matches(counted, active), (name, counted, active, source)


def _vocab(name: str) -> int:
    return {"DeepSeek-V2-Lite": 102400, "DeepSeek-V3": 129280}[name]


def test_mapshard_models_lists_the_zoo(capsys):
    assert cli.main(["models"]) == 0
    out = capsys.readouterr().out
    for name in PUBLISHED:
        assert f"\n{name} " in out
    assert f"{len(PUBLISHED)} models" in out and len(PUBLISHED) >= 25
