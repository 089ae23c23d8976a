"""The pipeline spine: every plan is re-checked before it is written (solver.verify), the
result folder gets the workload (frontier plot, real graph edges), and generators size
their graph by the resolved system, not the setup's raw chip count.

The re-check of every gallery plan (and of hand-corrupted ones) is in
tests/e2e/test_gallery.py, on that file's runs of the gallery (each solved once)."""

from __future__ import annotations

import re
from pathlib import Path

from google.protobuf import text_format

from mapshard import pipeline
from mapshard.run import run
from schema import setup_pb2

ROOT = Path(__file__).resolve().parents[2]


def test_run_report_has_the_frontier_and_the_graph_edges(tmp_path: Path) -> None:
    """`mapshard run` used to write without the workload: no frontier plot for LLMs and a
    made-up chain of edges in mapping.dot."""
    out = tmp_path / "r"
    result = run(ROOT / "scenarios" / "llama31_8b_decode_h100", out, 10.0)
    html = (out / "report.html").read_text()
    section = html.split("<h2>Data-movement frontier of the heaviest GEMMs</h2>", 1)[1]
    section = section.split("<h2>", 1)[0]
    assert "<svg" in section and "No GEMM" not in section
    dot = (out / "mapping.dot").read_text()
    assert "style=dashed" not in dot
    drawn = set(re.findall(r'^  "([^"]+)" -> "([^"]+)";$', dot, re.M))
    real = {
        (f"{p.name}/{e.src}", f"{p.name}/{e.dst}")
        for p in result.scenario.workload.phases
        for e in p.graph.edges
    }
    assert drawn and drawn == real


def test_dlrm_on_a_preset_gets_the_presets_chip_count(tmp_path: Path) -> None:
    """The generator used to read the setup's system.num_chip (0 here, so 1 chip's batch)
    instead of the resolved system's 64 chips."""
    setup = text_format.Parse(
        (ROOT / "scenarios" / "dlrm_tpuv4" / "setup.txt").read_text(), setup_pb2.Setup()
    )
    setup.system.Clear()
    setup.system.preset = "TPUv4-cube"
    (tmp_path / "setup.txt").write_text(text_format.MessageToString(setup))
    sc = pipeline.load_scenario(tmp_path)
    assert sc.system.num_chips == 64
    batch = dict(sc.workload.phases[0].graph.kernel("embedding").dims)["batch"]
    assert batch == setup.workload.dlrm.micro_batch_size * 64
