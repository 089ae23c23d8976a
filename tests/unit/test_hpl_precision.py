"""HPL in FP64 with its matrix counted once, workload-default precisions, and `validate`
on HPL rows (issue #16). Expected numbers are worked out by hand from the H100 datasheet
(FP64 Tensor Core 66.9 TFLOP/s, FP32 66.9, BF16 989.4), its HPL-sustained FP64 rate (57.0
TFLOP/s, the chip file's cited plateau) and HPL's storage: [A | b] is N x (N+1) doubles
over the P x Q processes, plus two panel shares and a U-row share per process."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard import pipeline
from mapshard.fidelity.cases import Case
from mapshard.fidelity.predict import predict
from mapshard.scenario import Scenario, scenario_options
from solver.search import footprint
from solver.search.parallel import Choice

H100_FP64 = 66.9e12


def scenario(tmp_path: Path, body: str, chips: int = 8) -> Scenario:
    text = body + f'\nsystem {{ chip: "H100-SXM5-80GB" num_chip: {chips} }}\n'
    (tmp_path / "setup.txt").write_text(text, encoding="utf-8")
    return pipeline.load_scenario(tmp_path)


def test_hpl_memory_counts_the_in_place_matrix_once(tmp_path):
    # N = 262144 (sqrt(0.8 x 8 x 80 GiB / 8)), B = 1024, 8 chips -> a 2 x 4 grid, FP64:
    # [A | b] once over the chips, 8 x 262144 x 262145 / 8 = 68,719,738,880 bytes, plus
    # per process the panel it applies and the look-ahead panel (ceil(N/2) x B each) and
    # its share of the U block row (B x ceil(N/4)): (2 x 131072 + 65536) x 1024 x 8 =
    # 2,684,354,560 bytes
    sc = scenario(tmp_path, "workload { hpl { N: 262144 B: 1024 } }")
    assert sc.workload.activation_bytes_per_element == 8
    choice = Choice((("TP", 8),), (), ())
    mem = footprint.memory_use(sc.workload, choice, 80 * 2**30)
    assert mem.activations == 68_719_738_880 + 2_684_354_560
    assert mem.activations < 80 * 2**30  # the customary size fits


def test_default_math_precision_per_workload(tmp_path):
    hpl = scenario(tmp_path, "workload { hpl { N: 4096 B: 256 } }")
    assert scenario_options(hpl).math_precision == "fp64"
    fft = scenario(tmp_path, "workload { fft { length: 1024 batch: 16 } }", chips=1)
    assert scenario_options(fft).math_precision == "fp32"
    assert fft.workload.activation_bytes_per_element == 2 * 4  # complex FP32: two floats
    gemm = scenario(tmp_path, "workload { gemm { M: 64 K: 64 N: 64 } }", chips=1)
    assert scenario_options(gemm).math_precision == "bf16"


def test_hpl_runs_at_the_cited_fp64_plateau(tmp_path):
    sc = scenario(tmp_path, "workload { hpl { N: 16384 B: 512 sample_iterations: 4 } }")
    plan = pipeline.plan(sc)
    assert plan.peak_flops_per_chip == pytest.approx(H100_FP64)
    # never faster than the DGEMMs alone: 2/3 N^3 FLOP over 8 chips at the HPL-sustained
    # 57.0 of 66.9 TFLOP/s (hardware/chips/H100-SXM5-80GB.txt, fp64 plateau)
    assert plan.latency_s >= 2 / 3 * 16384**3 / (8 * H100_FP64 * 0.852)
    assert not any("uncalibrated: fp64" in w for w in plan.warnings)


def test_validate_predicts_an_hpl_row():
    """One node of 8 H100s, N = 65536, NB = 1024, 2 x 4 grid: Rmax is the convention's FLOP
    ((2/3) N^3 + 2 N^2) over the predicted time, never above 8 x the FP64 DGEMM plateau;
    at this small N the 64 panels' 1024 pivot exchanges each (two NCCL latency floors of
    12.8 us) bound the run: at least 64 x 1024 x 25.6 us = 1.68 s."""
    row = Case(
        {
            "id": "H",
            "kind": "hpl",
            "chip": "H100-SXM5-80GB",
            "num_chips": "8",
            "chips_per_node": "8",
            "metric": "rmax_flops",
            "flop_convention": "hpl_standard",
        },
        {"hpl_n": "65536", "hpl_nb": "1024", "hpl_p": "2", "hpl_q": "4"},
    )
    got = predict(row, Path("."))
    assert got.value <= 8 * H100_FP64 * 0.852
    t = float(got.detail.removeprefix("t=").removesuffix("s"))
    assert t >= 64 * 1024 * 25.6e-6
    n = 65536
    assert got.value == pytest.approx((2 / 3 * n**3 + 2 * n**2) / t, rel=1e-3)
