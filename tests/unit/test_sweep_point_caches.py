"""The per-process caches a sweep worker's points share (issue #39 item 5: no per-point
Python set-up): resolved machines, generated replicas and heads, canonical orders, phase
problems, tilings,
option terms, unbudgeted kernel-by-kernel solutions, planned activations, a kernel's hash,
and the Setup sent in binary. Each is keyed by everything its value depends on: points
that differ in one field get their own results, and every row is the row a worker with
every cache off computes."""

from __future__ import annotations

import math
import pickle
from dataclasses import fields, replace
from pathlib import Path

import pytest

from generator import llm_inference
from generator.graph import Kernel, Workload
from generator.models import load_model
from generator.order import canonical_order
from generator.precision import resolve_precision
from hardware.system import NetworkLevel, Topology
from mapshard import pipeline
from mapshard.scenario import Loaded
from mapshard.sweeps import load_sweep, points, worker
from mapshard.sweeps.metrics import TIMING_COLUMNS
from mapshard.sweeps.points import expand_points
from mapshard.sweeps.runner import make_batches
from mapshard.sweeps.worker import Job, solve_point
from schema import setup_pb2
from solver.cost import memo
from solver.cost.layouts import conversion_table, layout_conversion
from solver.cost.menus import build_problem
from solver.cost.problem import KernelMenu
from solver.cost.weights import WeightRule
from solver.milp.exact_kbk import UNBUDGETED, solve_kbk
from tests.solver_fixtures import small_system

HERE = Path(__file__)

SWEEP = """
inline {
  name: "caches"
  workload {
    llm_inference {
      model { hf_model: "Llama-3.2-1B" }
      phase: REQUEST
      batch: 8
      input_len: 256
      output_len: 64
    }
  }
  system {
    chip: "H100-SXM5-80GB"
    topology { kind: SWITCH degree: 2 link_bw_GBps: 450 parallelism: "TP" }
  }
  execution { execution_style: KERNEL_BY_KERNEL perfect_overlap: true }
  solver { time_limit_s: 60 }
}
axis { field: "system.chip" name: "chip" values: ["H100-SXM5-80GB", "H200-SXM-141GB"] }
axis { field: "system.topology.degree" name: "tp_degree" values: ["1", "2"] }
axis { field: "workload.llm_inference.batch" name: "batch" values: ["1", "4"] }
axis { field: "workload.llm_inference" name: "lengths"
       values: ["input_len: 128 output_len: 32", "input_len: 512 output_len: 32"] }
"""


def _jobs(tmp_path: Path) -> tuple[list[Job], Path]:
    path = tmp_path / "sweep.txt"
    path.write_text(SWEEP, encoding="utf-8")
    spec = load_sweep(path)
    points, _ = expand_points(spec)
    jobs = [j for b in make_batches(points, spec, 1) for j in b.jobs]
    return jobs, spec.base_path


def _rows(jobs: list[Job], base: Path) -> dict[str, dict[str, str]]:
    rows = {}
    for job in jobs:
        row = solve_point(job, base, ())
        rows[job.point_id] = {k: v for k, v in row.items() if k not in TIMING_COLUMNS}
    return rows


def _clear_generator_caches() -> None:
    llm_inference._REPLICAS.clear()
    llm_inference._HEADS.clear()
    points._SYSTEMS.clear()


@pytest.fixture
def plain_memos():
    memo.restore()
    _clear_generator_caches()
    yield
    memo.restore()
    _clear_generator_caches()


def test_rows_with_caches_equal_rows_without(
    tmp_path: Path, plain_memos: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs, base = _jobs(tmp_path)
    cached = _rows(jobs, base)
    again = _rows(jobs, base)  # every cache warm now
    memo.set_enabled(False)
    _clear_generator_caches()

    monkeypatch.setattr(worker, "resolved", pipeline.resolve)  # a machine resolved per point
    plain = _rows(jobs, base)
    assert cached == again == plain
    # every point its own result: no two points of the sweep share a row
    assert all(r["status"] == "optimal" for r in plain.values())
    assert len({r["latency_s"] for r in plain.values()}) == len(plain)


def test_batches_are_runs_of_whole_systems_in_workload_order(tmp_path: Path) -> None:
    """2 chips x 2 TP degrees (4 systems) x 2 batches x 2 length pairs (4 workloads, each
    system's 4 points): about two batches per worker, whole systems, workload by workload
    inside a batch; a system larger than `chunk` is cut."""
    path = tmp_path / "sweep.txt"
    path.write_text(SWEEP, encoding="utf-8")
    spec = load_sweep(path)
    points, _ = expand_points(spec)
    labels = {p.point_id: p.labels for p in points}
    workloads = [p.labels[2:] for p in points if p.labels[:2] == points[0].labels[:2]]

    def cut(capacity: int, chunk: int) -> list[list[tuple[str, ...]]]:
        batches = make_batches(points, spec, capacity, chunk)
        ids = [j.point_id for b in batches for j in b.jobs]
        assert sorted(ids) == sorted(p.point_id for p in points)  # every point once
        return [[labels[j.point_id] for j in b.jobs] for b in batches]

    systems = [("H100-SXM5-80GB", "1"), ("H100-SXM5-80GB", "2")]
    systems += [("H200-SXM-141GB", "1"), ("H200-SXM-141GB", "2")]
    one_worker = cut(1, 256)  # 16 points / 2 batches: two systems each
    assert [sorted({c[:2] for c in b}) for b in one_worker] == [systems[:2], systems[2:]]
    for batch in one_worker:  # workload by workload, systems in order inside each
        assert [c[2:] for c in batch] == [w for w in workloads for _ in range(2)]
    two_workers = cut(2, 256)  # 4 points a batch: one system each
    assert [sorted({c[:2] for c in b}) for b in two_workers] == [[s] for s in systems]
    assert [len(b) for b in cut(1, 3)] == [3, 1] * 4  # a system over the chunk is cut


def test_binary_setup_is_the_text_setup(tmp_path: Path, plain_memos: None) -> None:
    jobs, base = _jobs(tmp_path)
    job = jobs[0]
    assert job.data
    by_text = replace(job, data=b"")
    assert _rows([job], base) == _rows([by_text], base)


def _request(**fields: int) -> setup_pb2.LlmInference:
    req = setup_pb2.LlmInference(phase=setup_pb2.DECODE, batch=8, input_len=256, output_len=8)
    for name, value in fields.items():
        setattr(req, name, value)
    return req


def _workload(req: setup_pb2.LlmInference, num_chips: int = 1) -> Workload:
    model = setup_pb2.Model(hf_model="Llama-3.2-1B")
    cfg = load_model(model, HERE, "workload.llm_inference.model")
    prec = resolve_precision(setup_pb2.Precision())
    return llm_inference.inference_workload(req, cfg, prec, HERE, num_chips)


def test_replicas_and_heads_are_shared_by_value_only(plain_memos: None) -> None:
    first = _workload(_request())
    assert _workload(_request()) is first  # an equal request: the same (frozen) workload
    longer = _workload(_request(input_len=512))  # one field differs: its own workload
    assert longer is not first and longer.kv_cache_bytes != first.kv_cache_bytes
    # the decode head depends on the batch alone: shared across lengths, not batches
    head = {p.role: p.graph for p in first.phases}["head"]
    assert {p.role: p.graph for p in longer.phases}["head"] is head
    other = {p.role: p.graph for p in _workload(_request(batch=4)).phases}["head"]
    assert other is not head and other != head
    # batch 8 over two replicas serves batch 4 per replica: the batch-4 replica's graphs
    two = _workload(_request(), num_chips=2)
    halves = [v for v in two.variants if v.replicas == 2]
    assert halves and halves[0].phases[0].graph is _workload(_request(batch=4)).phases[0].graph
    for _ in range(llm_inference._REPLICAS_SIZE + 5):  # bounded
        _workload(_request(input_len=1 + len(llm_inference._REPLICAS) + 1000))
    assert len(llm_inference._REPLICAS) <= llm_inference._REPLICAS_SIZE


def test_canonical_order_is_kept_per_graph(plain_memos: None) -> None:
    graph = _workload(_request()).phases[0].graph
    order = graph.canonical_order()
    assert order == canonical_order(graph.kernels, graph.edges, graph.boundary)
    assert graph.canonical_order() is order


def test_conversion_table_is_the_table_of_layout_conversions(plain_memos: None) -> None:
    graph = _workload(_request()).phases[0].graph
    shardings = ("none", "heads", "kv_heads", "ffn")
    for e in graph.edges:
        src, dst = graph.kernel(e.src), graph.kernel(e.dst)
        span = ((NetworkLevel("l0", Topology.SWITCH, 4, 450e9, 1e-6), 4),)
        for tp in (1, 4):
            args = (src, dst, e.dst_operand, dict(e.dim_map), 1e6)
            table = conversion_table(*args, (shardings, shardings), tp, span)
            plain = tuple(
                tuple(layout_conversion(*args, a, b, tp, span) for b in shardings)
                for a in shardings
            )
            assert table == plain


def test_unbudgeted_solution_still_checks_the_budget(plain_memos: None) -> None:
    system = small_system()
    span = [(system.network[0], 2)]
    graph = _workload(_request()).phases[0].graph
    args = (graph, system.chip, system.dram.bandwidth_Bps, 2, span, {"tp": span}, "bf16")
    problem = build_problem(*args, False, True, 0, 4, weights=WeightRule(2.0))
    roomy = replace(problem, resident_bytes_per_param=2.0, resident_budget_bytes=math.inf)
    found = solve_kbk(roomy)
    assert found is not None and UNBUDGETED.misses == 1
    # the same graph under a budget no plan fits: the kept solution is refused
    tight = replace(roomy, resident_budget_bytes=1.0)
    assert solve_kbk(tight) is None and UNBUDGETED.hits == 1
    assert solve_kbk(replace(tight, resident_budget_bytes=math.inf)) is found
    # another field differs: solved again
    assert solve_kbk(replace(roomy, dram_bandwidth_Bps=roomy.dram_bandwidth_Bps / 2))
    assert UNBUDGETED.misses == 2


def test_kernel_hash_is_the_dataclass_hash_and_is_not_pickled() -> None:
    kernel = _some_kernel()
    hashed = [f.name for f in fields(Kernel) if (f.compare if f.hash is None else f.hash)]
    assert hash(kernel) == hash(tuple(getattr(kernel, f) for f in hashed))
    assert kernel.outputs and kernel.inputs  # kept on the kernel now
    state = pickle.loads(pickle.dumps(kernel)).__dict__
    assert not {"_hash", "_sizes", "inputs", "outputs"} & set(state)
    other = replace(kernel, flop=kernel.flop * 2)
    assert hash(other) != hash(kernel) and other != kernel


def test_menu_hash_is_the_dataclass_hash() -> None:
    menu = KernelMenu("k", (), (), ("a",), "c", 1e-6)
    assert hash(menu) == hash(tuple(getattr(menu, f.name) for f in fields(KernelMenu)))
    assert "_hash" not in pickle.loads(pickle.dumps(menu)).__dict__


def _some_kernel() -> Kernel:
    return _workload(_request()).phases[0].graph.kernels[0]


def test_points_of_one_system_share_its_resolved_machine(tmp_path: Path, plain_memos: None):
    """The 16 points are 4 systems (chip x TP) of 4 workloads each: 4 machines resolved,
    each the one pipeline.resolve gives; the same setup under another base path (its
    relative paths mean other files) is resolved again."""
    jobs, base = _jobs(tmp_path)
    machines = {}
    for job in jobs:
        loaded = Loaded(worker._setup(job), base)
        system = points.resolved(loaded)
        labels = (job.cells["chip"], job.cells["tp_degree"])
        assert machines.setdefault(labels, system) is system
        assert system == pipeline.resolve(loaded)
    assert len(machines) == 4 and len(points._SYSTEMS) == 4
    setup = worker._setup(jobs[0])
    elsewhere = Loaded(setup, tmp_path / "other" / "sweep.txt")
    assert points.resolved(elsewhere) is not points.resolved(Loaded(setup, base))
