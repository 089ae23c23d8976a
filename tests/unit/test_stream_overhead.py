"""The engine's host cost per step in the request-stream view: a step table adds it to every
non-empty step, and its default (DEFAULT_KERNEL_LAUNCH_US) is re-derived here from the FIT
offline-throughput rows (TensorRT-LLM on GB200, tests/data/validation/validation_public_fit.csv).

FIT_ROWS holds, per row, the measured output tokens/s and what the stream view gave with
kernel_launch_us 0 (re-derived when the GEMM wave tiles were fitted, GB200 128x256 per SM):
output tokens, engine steps, the stream's duration from solved step times alone, and the
kernels of one forward pass (Llama-3.1-8B: 32 layers x 12 + 3 = 387; Llama-3-70B: 80 x 12 +
3 = 963). Every request
arrives at t = 0, so the schedule (which step runs what) does not depend on step times and
a per-step cost x adds exactly steps * x to the duration.
"""

from __future__ import annotations

import pytest

from mapshard.analyses.stream_sim import EngineLimits, Request, simulate
from mapshard.analyses.stream_steps import StepTable
from schema.validation_stream import DEFAULT_KERNEL_LAUNCH_US

# id: (measured tokens/s, output tokens, steps, duration s without overhead, kernels/step)
FIT_ROWS = {
    "P-AZL08": (10642.0, 2048000, 4275, 148.5516, 963),
    "P-AZS01": (41058.0, 128000, 278, 2.0037, 387),
    "P-AZS03": (39809.0, 2048000, 4118, 36.7097, 387),
    "P-AZS04": (33836.0, 2000000, 4086, 43.9057, 387),
    "P-AZS05": (27944.0, 1024000, 2225, 27.6326, 387),
    "P-AZS06": (20341.0, 2048000, 4650, 82.3678, 387),
    "P-AZS07": (21626.0, 1024000, 1109, 36.1662, 963),
    "P-AZS08": (21374.0, 2048000, 2133, 74.5367, 963),
    "P-AZS09": (18279.0, 2000000, 2334, 85.8869, 963),
    "P-AZS10": (12376.0, 1024000, 1709, 63.5603, 963),
}


def _mean_abs_error(per_step_s: dict[str, float]) -> float:
    """Mean |predicted / measured - 1| with each row's per-step cost added."""
    errs = []
    for rid, (measured, tokens, steps, dur, _) in FIT_ROWS.items():
        errs.append(abs(tokens / (dur + steps * per_step_s[rid]) / measured - 1))
    return sum(errs) / len(errs)


def test_gap_per_kernel_is_the_same_at_both_model_sizes():
    """The measured-minus-solved time per step, over the kernels of a step, is 9.2-11.7 us
    for the 8B (TP1, 387 kernels) and the 70B (TP4, 963 kernels) alike; by hand for P-AZS01:
    128000 / 41058 = 3.1175 s measured, (3.1175 - 2.0037) / 278 steps = 4.007 ms per step,
    / 387 kernels = 10.35 us. Per step alone it is ~3.6-4.1 ms (8B) against ~10-11 ms (70B)."""
    gaps = {}
    for rid, (measured, tokens, steps, dur, kernels) in FIT_ROWS.items():
        gaps[rid] = (tokens / measured - dur) / steps / kernels
    assert gaps["P-AZS01"] == pytest.approx(10.35e-6, abs=0.01e-6)
    assert all(9.2e-6 < g < 11.7e-6 for g in gaps.values())


def test_default_launch_cost_is_the_fit_minimum():
    """Scan 0.1 us steps: the mean |error| over the FIT rows is least at 10.4 us (0.97%)."""

    def err(us: float) -> float:
        return _mean_abs_error({r: v[4] * us * 1e-6 for r, v in FIT_ROWS.items()})

    best = min((round(0.1 * i, 1) for i in range(0, 200)), key=err)
    assert best == DEFAULT_KERNEL_LAUNCH_US == 10.4
    assert err(best) == pytest.approx(0.0097, abs=0.0005)


def test_a_per_step_constant_fits_worse():
    """One constant per step (the same for both models) can at best reach 8.6% mean |error|:
    the gap grows with the model's kernel count, not per step (the fit's other form)."""
    best = min(_mean_abs_error(dict.fromkeys(FIT_ROWS, ms * 1e-4)) for ms in range(0, 200))
    assert best > 0.07


def test_step_table_adds_the_overhead_to_non_empty_steps_only():
    """A 1 x 1 grid: t(D=1, P=0) = 2 ms, + 0.5 ms overhead = 2.5 ms; an empty step is 0."""
    times = {(0, 0): ((0.0, 0.0), (0.0, 0.0)), (1, 0): ((10.0, 2e-3), (10.0, 2e-3))}
    table = StepTable((0, 1), (0,), times, overhead_s=0.5e-3)
    assert table(1, 10.0, 0) == pytest.approx(2.5e-3)
    assert table(0, 0.0, 0) == 0.0


def test_stream_duration_counts_one_overhead_per_step():
    """2 requests of 4 + 3 tokens, both prompts in step 1, then 2 decode steps: 3 steps of
    1 ms solved + 0.25 ms overhead = 3.75 ms; TTFT = 1.25 ms, TPOT = 1.25 ms."""
    times = {(d, p): ((5.0, 1e-3), (5.0, 1e-3)) for d in (0, 2) for p in (0, 8)}
    times[(0, 0)] = ((0.0, 0.0), (0.0, 0.0))
    table = StepTable((0, 2), (0, 8), times, overhead_s=0.25e-3)
    reqs = [Request(0.0, 4, 3), Request(0.0, 4, 3)]
    st = simulate(reqs, EngineLimits(2, 8, False, 100), table)
    assert st.steps == 3 and st.duration_s == pytest.approx(3.75e-3)
    assert st.ttft_s[0] == pytest.approx(1.25e-3) and st.tpot_s[0] == pytest.approx(1.25e-3)
