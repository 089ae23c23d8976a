"""The outer search's roofline bound: the chip's peak at the workload's math precision times
its calibrated efficiencies (not the highest peak the chip lists), and never above a plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard import pipeline
from mapshard.scenario import scenario_options
from schema import setup_pb2
from solver.search.bounds import roofline_bound as _lower_bound
from solver.search.parallel import Choice


def _scenario(text: str):
    loaded = pipeline.load_message(text_format.Parse(text, setup_pb2.Setup()), Path("setup.txt"))
    return pipeline.assemble(loaded, pipeline.resolve(loaded))


A100_FP16_GEMM = """
workload { gemm { M: 8192 K: 8192 N: 8192 } precision { math: FP16 } }
system { chip: "A100-SXM4-80GB" num_chip: 1 }
execution { execution_style: KERNEL_BY_KERNEL perfect_overlap: true }
"""


def test_bound_uses_the_math_precision_peak_and_the_gemm_plateau():
    sc = _scenario(A100_FP16_GEMM)
    single = Choice(degrees=(), spans=(), levels=sc.system.network)
    lb = _lower_bound(sc.workload, sc.system, single, scenario_options(sc))
    # 2 x 8192^3 FLOP at 312 TF (FP16, not INT4's 1248) x 0.832 (A100 gemm_util)
    assert lb == pytest.approx(2 * 8192**3 / (312e12 * 0.832), rel=1e-9)


def test_bound_is_never_above_the_plan():
    sc = _scenario(A100_FP16_GEMM)
    plan = pipeline.plan(sc)
    for c in plan.choices:
        if c.latency_s is not None:
            assert c.lower_bound_s <= c.latency_s * (1 + 1e-9)
            # the bound is within the GEMM's k roll-off and wave losses of the plan
            assert c.lower_bound_s >= 0.9 * c.latency_s
