"""The pipeline spine: every plan is re-checked before it is written (solver.verify), the
result folder gets the workload (frontier plot, real graph edges), and generators size
their graph by the resolved system, not the setup's raw chip count."""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard import pipeline
from mapshard.run import run
from mapshard.scenario import Scenario, scenario_options
from schema import setup_pb2
from solver.verify import verify_plan

ROOT = Path(__file__).resolve().parents[2]
GALLERY = sorted(p.parent.name for p in (ROOT / "scenarios").glob("*/setup.txt"))


@functools.cache
def _solved(name: str) -> tuple[Scenario, object]:
    """Solved once per test session (the plans are frozen; tests replace, never mutate), on
    the setup's work budgets: the same plan at any load (no wall-clock limit decides it)."""
    sc = pipeline.load_scenario(ROOT / "scenarios" / name)
    return sc, pipeline.solve(sc)


def _verify(sc: Scenario, plan) -> list[str]:
    return verify_plan(plan, sc.workload, sc.system, scenario_options(sc))


@pytest.mark.parametrize("name", GALLERY)
def test_every_gallery_plan_passes_the_recheck(name: str) -> None:
    sc, plan = _solved(name)
    assert _verify(sc, plan) == []
    assert pipeline.check(sc, plan) is plan


def _with_config(plan, phase_i: int, config_i: int, **changes):
    phase = plan.phases[phase_i]
    configs = list(phase.configs)
    configs[config_i] = replace(configs[config_i], **changes)
    phases = list(plan.phases)
    phases[phase_i] = replace(phase, configs=tuple(configs))
    return replace(plan, phases=tuple(phases))


def test_recheck_catches_hand_corrupted_plans() -> None:
    sc, plan = _solved("dfmodel_gpt3_1t_sn30")  # DATAFLOW: several kernels per config
    c = plan.phases[0].configs[0]

    bad = _with_config(plan, 0, 0, latency_s=c.latency_s * 0.5)
    assert any("latency" in v for v in _verify(sc, bad))
    with pytest.raises(pipeline.PlanCheckError, match="latency"):
        pipeline.check(sc, bad)

    bad = _with_config(plan, 0, 0, sram_bytes=sc.system.chip.sram_bytes * 2)
    assert any("SRAM" in v and "chip" in v for v in _verify(sc, bad))

    bad = _with_config(plan, 0, 0, compute_s=c.compute_s * 1.5 + 1e-6)
    assert any("compute" in v for v in _verify(sc, bad))

    bad = replace(plan, memory=replace(plan.memory, weights=plan.memory.capacity * 2))
    assert any("capacity" in v for v in _verify(sc, bad))

    few = replace(scenario_options(sc), num_config=1)
    if len(plan.phases[0].configs) > 1:
        assert any("num_config" in v for v in verify_plan(plan, sc.workload, sc.system, few))


def test_recheck_catches_a_backward_edge() -> None:
    sc, plan = _solved("dfmodel_gpt3_1t_sn30")
    phase = plan.phases[0]
    last = max(c.index for c in phase.configs)
    graph = next(p.graph for p in sc.workload.phases if p.name == phase.name)
    src = graph.edges[0].src
    kernels = tuple(replace(k, config=last + 1) if k.name == src else k for k in phase.kernels)
    bad = replace(plan, phases=(replace(phase, kernels=kernels), *plan.phases[1:]))
    assert any("runs backwards" in v for v in _verify(sc, bad))


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
