"""A plan's phase latency is its configurations' re-priced sum, never the MILP objective
with an epigraph variable left above its rows (a sweep point, Llama-3.1-70B on two H200,
batch 64, 2048 in / 512 out, failed its re-check: 320.639 us != 320.623 us)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard import pipeline

SETUP = """
name: "bench_llama70b"
workload { llm_inference { model { hf_model: "Llama-3.1-70B" } phase: REQUEST
  batch: 64 input_len: 2048 output_len: 512 } }
system { chip: "H200-SXM-141GB"
  topology { kind: SWITCH degree: 2 link_bw_GBps: 450 parallelism: "TP" } }
execution { execution_style: KERNEL_BY_KERNEL perfect_overlap: true }
"""


def test_phase_latency_is_the_sum_of_its_configurations(tmp_path: Path) -> None:
    (tmp_path / "setup.txt").write_text(SETUP)
    plan = pipeline.plan(pipeline.load_scenario(tmp_path))  # check() raises on a mismatch
    for phase in plan.phases:
        assert phase.latency_s == pytest.approx(sum(c.latency_s for c in phase.configs), rel=1e-12)
