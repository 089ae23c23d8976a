"""Fitting PyTorch eager's host time per op (Execution.host_op_us) to the FIT training
rows whose step a per-expert Python loop paces.

A per-expert loop (MOE_GEMM_PER_EXPERT as benchmarks/gpu_moe.moe_ffn runs it) starts right
after a sync (`tokens_per_expert.tolist()`), so its kernels wait on the host issuing them
(solver.cost.kernel_times.host_paced). The time per op has no kernel measurement of its
own here: the GPU traces of tests/data/profiles/h200 are GPU-bound (their gaps between
kernels are 1-2 us), so it is fitted to the FIT rows that run such a loop in eager PyTorch
(extra_params library=torch_eager, moe_gemm=per_expert), everything else held: the
time per op with the least mean |relative error| of their predicted step times. Run:
`python -m mapshard.fidelity.fit_host_op` (a minute on one core).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from mapshard import pipeline
from mapshard.fidelity.cases import Case, read_cases
from mapshard.fidelity.fit_training import measured_step_s
from mapshard.fidelity.scenarios import build_setup, load_setup_scenario

FIT_FILES = ("validation_dev_structured.csv", "validation_public_fit.csv")
DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "validation"
HIGH_US = 100.0  # beyond any published eager dispatch time (5-25 us per op)
TOLERANCE_US = 0.05


def host_loop_rows(cases: list[Case]) -> list[Case]:
    """The usable training rows run in eager PyTorch with a per-expert loop."""
    return [
        c
        for c in cases
        if c.usable
        and c.kind == "training_step"
        and c.extra.get("library") == "torch_eager"
        and c.extra.get("moe_gemm") == "per_expert"
    ]


def step_time(case: Case, where: Path, host_op_us: float) -> float:
    """The row's predicted step time (s) with the host's time per op at `host_op_us`."""
    setup, _ = build_setup(case)
    setup.execution.host_op_us = host_op_us
    plan = pipeline.plan(load_setup_scenario(setup, where))
    return plan.iteration_time_s or plan.latency_s


def fit_host_op_us(rows: list[Case], where: Path) -> float:
    """The time per op (us, to TOLERANCE_US) with the least mean |relative error| over the
    rows, by ternary search on [0, HIGH_US]: each row's step time is a sum of max(GPU, ops
    x h) terms, convex and growing in h, so its |error| falls, then rises."""

    def mean_abs_error(h: float) -> float:
        return sum(abs(step_time(c, where, h) / measured_step_s(c) - 1) for c in rows) / len(rows)

    low, high = 0.0, HIGH_US
    while high - low > TOLERANCE_US:
        a, b = low + (high - low) / 3, high - (high - low) / 3
        if mean_abs_error(a) <= mean_abs_error(b):
            high = b
        else:
            low = a
    return (low + high) / 2


def main() -> int:
    cases = [c for name in FIT_FILES for c in read_cases(DATA / name)]
    rows = host_loop_rows(cases)
    with tempfile.TemporaryDirectory() as where:
        h = fit_host_op_us(rows, Path(where))
    print(f"host_op_us {h:.2f} over {', '.join(c.id for c in rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
