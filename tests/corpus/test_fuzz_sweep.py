"""Fuzzing the sweep front door: a mutated sweep file is either expanded into points or
reported as SetupError, one line per problem naming the sweep file, never a crash (the
corpus in tests/malformed_sweep/ pins the messages; this looks for the cases nobody wrote).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fuzz_setup import mutation

from mapshard.sweeps import expand_points, load_sweep
from schema.errors import SetupError

SWEEP = """\
inline {
  workload { gemm { M: 256 K: 256 N: 256 } }
  system {
    num_chip: 2
    accelerator { core: 4 systolic_width: 16 systolic_height: 16 sram_cap: 1048576 freq: 1.0 }
    memory { dram_bw: 100 dram_cap: 1e9 }
    topology { kind: SWITCH degree: 2 link_bw_GBps: 50 parallelism: "TP" }
  }
  cost { accelerator_price: 1000 accelerator_power: 50 dram_unit_price: 1 }
}
axis { field: "workload.gemm.M" name: "M" values: ["128", "1e3"] }
axis { field: "system.memory.dram_bw" range { start: 50 stop: 400 factor: 2 } }
axis { field: "system.topology[0].link_bw_GBps" range { start: 25 stop: 75 step: 25 } }
combine: PRODUCT
filter { metric: "system_cost" max: 5000 }
objective: "latency_s"
objective: "system_cost"
"""
MOST_POINTS = 64  # expanding validates every point: keep the examples quick


@st.composite
def mutated_sweep(draw: st.DrawFn) -> str:
    text = SWEEP
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        text = draw(mutation(text))
    return text


def test_fuzz_base_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "sweep.txt"
    path.write_text(SWEEP, encoding="utf-8")
    points, _ = expand_points(load_sweep(path))
    assert len(points) == 2 * 4 * 3 and all(p.row is None for p in points)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated_sweep())
def test_mutated_sweep_is_expanded_or_reported(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sweep.txt"
        path.write_text(text, encoding="utf-8")
        try:
            spec = load_sweep(path)
            if spec.num_points <= MOST_POINTS:
                expand_points(spec)
        except SetupError as exc:
            assert exc.problems
            for problem in exc.problems:
                assert problem.startswith(str(path)), problem
                assert "\n" not in problem, problem
