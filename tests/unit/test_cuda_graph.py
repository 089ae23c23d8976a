"""execution.cuda_graph: kernels replayed from a CUDA graph take no GEMM launch floor.

The H200 chip file sets kernel_overhead_us 2.0 and kernel_min_time_us 7.5 (the launch-paced
floor of a cuBLASLt stream loop). A 64 x 64 x 64 BF16 GEMM does 2 x 64^3 = 524,288 FLOP;
its efficiency, the 0.784 plateau x the K roll-off 64 / (64 + 448) x one 128 x 128 tile's
share of 132 SMs (64^2 / (132 x 128^2) = 0.0019), is 1.9e-4, held at the model's least
efficiency 1e-3: 524,288 / (989.4 TFLOP/s x 1e-3) = 0.53 us of work. Launched from the host
its time is the floor, 7.5 us; replayed from a graph the 2.0 us overhead plus that work,
2.53 us (benchmarks/gpu_measure.py measured 2.3-3.0 us for the smallest graph-replayed
GEMMs on an H200)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard.fidelity.cases import Case, parse_extra
from mapshard.fidelity.predict import predict
from mapshard.fidelity.scenarios import build_setup
from mapshard.pipeline import resolve
from mapshard.scenario import Loaded
from schema import setup_pb2


def h200_setup(cuda_graph: bool) -> setup_pb2.Setup:
    setup = setup_pb2.Setup()
    setup.system.chip = "H200-SXM-141GB"
    setup.system.num_chip = 1
    setup.execution.cuda_graph = cuda_graph
    return setup


def test_the_graph_drops_the_launch_floor_and_keeps_the_overhead():
    paced = resolve(Loaded(h200_setup(False), Path("setup.txt"))).chip.efficiency
    graph = resolve(Loaded(h200_setup(True), Path("setup.txt"))).chip.efficiency
    assert paced.kernel_min_time_s == pytest.approx(7.5e-6)
    assert graph.kernel_min_time_s == 0.0
    assert graph.kernel_overhead_s == paced.kernel_overhead_s == pytest.approx(2.0e-6)


def gemm_row(timing: str) -> Case:
    cells = {
        "id": "X-GRAPH",
        "kind": "gemm",
        "usable": "1",
        "chip": "H200-SXM-141GB",
        "num_chips": "1",
        "chips_per_node": "1",
        "precision": "bf16",
        "m": "64",
        "k": "64",
        "n": "64",
        "metric": "kernel_time_s",
        "value": "3e-06",
        # the roofline's floor is the subject (a table row would carry its own time)
        "extra_params": f"timing={timing};kernel_source=none",
    }
    return Case(cells, parse_extra(cells["extra_params"]))


def test_a_graph_timed_row_is_predicted_without_the_floor(tmp_path):
    graph_setup, _ = build_setup(gemm_row("cuda_graph_replay"))
    paced_setup, _ = build_setup(gemm_row("cuda_event_stream"))
    assert graph_setup.execution.cuda_graph and not paced_setup.execution.cuda_graph
    graph = predict(gemm_row("cuda_graph_replay"), tmp_path).value
    paced = predict(gemm_row("cuda_event_stream"), tmp_path).value
    assert paced == pytest.approx(7.5e-6, rel=1e-6)
    assert graph == pytest.approx(2.0e-6 + 524288 / (989.4e12 * 1e-3), rel=1e-6)
