"""The kernel profiles measured on a lent H200 (benchmarks/gpu_profile.py: a BF16 training
step of Llama-3.1-8B cut to 8 layers, and one layer's prefill and decode) read as
`mapshard profile compare` reads them: every kernel event, its duration in seconds. The
expected counts and sums are taken from the JSON directly, not from the reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mapshard.fidelity.profile_io import read_profile

PROFILES = Path(__file__).parents[1] / "data" / "profiles" / "h200"


@pytest.mark.parametrize(
    "name,kernels",
    [
        ("train_llama31_8b_8layers_s4096_b2", 860),
        ("prefill_llama31_8b_layer_b1_s2048", 23),
        ("decode_llama31_8b_layer_b64_kv4096", 24),
    ],
)
def test_every_kernel_event_is_read_with_its_duration(name, kernels):
    path = PROFILES / f"{name}.json"
    events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    measured = read_profile(path)
    assert len(events) == len(measured) == kernels
    total_s = sum(ev["dur"] for ev in events) * 1e-6
    assert sum(k.time_s for k in measured) == pytest.approx(total_s, rel=1e-9)


def test_the_step_runs_cudnn_attention_and_fused_rms_norms():
    """What the step ran, for the closing note's account of the BF16 gap: 8 layers' cuDNN
    flash attention forward and backward kernels, 17 fused RMSNorm forwards (2 per layer and
    the final norm)."""
    names = [k.name for k in read_profile(PROFILES / "train_llama31_8b_8layers_s4096_b2.json")]
    assert sum("sdpa_sm90_flash_fprop" in n for n in names) == 8
    assert sum("sdpa_sm90_flash_bprop" in n for n in names) == 8
    assert sum("vectorized_layer_norm_kernel" in n for n in names) == 17
