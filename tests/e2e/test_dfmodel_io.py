"""DFModel's inputs and outputs beyond its text setup (issue 37, items 5 and 6): zero_out
edges in both cost models, DFModel's binary .pb inputs, its intermediate dse.txt /
dse_sharded.txt, HBD and the second DRAM, and gurobi.thread. The inputs are DFModel's own
(tests/data/dfmodel, SOURCES.md); every number below is derived by hand in its docstring."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from google.protobuf import text_format

from mapshard.cli import main
from mapshard.scenario import solver_options
from schema import dfmodel_wire, setup_pb2
from schema.dfmodel import ignored_fields
from schema.setup_io import load_setup

DATA = Path(__file__).resolve().parents[1] / "data" / "dfmodel"
GENZ_DECODE = DATA / "genz_figure10_decode_1x.txt"
# DFModel's decode generator (generator/generate_LLM_fwd_decode.py @ 5ba2040) marks the two
# KV-cache -> attention connections zero_out: K_cache (6) -> MHA_GEMM_1 (8), id 8, and
# V_cache (7) -> MHA_GEMM_2 (11), id 12
CACHE_EDGES = (("  endIdx: 8\n  id: 8\n", 8), ("  endIdx: 11\n  id: 12\n", 12))
LAYERS, CHIPS, DRAM_Bps = 96, 12, 4000e9
CACHE_BYTES = 122_892_288  # K_cache's output_tensor_size 122,892,290 as DFModel's float32


def _run(src: Path, out: Path, model: str, code: int = 0) -> dict:
    args = ["run", str(src), "--out", str(out), "--cost-model", model, "--quiet"]
    assert main(args) == code
    return json.loads((out / "summary.json").read_text()) if code == 0 else {}


def _zero_out(text: str) -> str:
    """The GenZ decode input with DFModel's generator's zero_out on its two cache edges."""
    for end, _ in CACHE_EDGES:
        assert text.count(end) == 1
        text = text.replace(end, end + "  zero_out: true\n")
    return text


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_zero_out_in_one_configuration_keeps_dfmodels_log(tmp_path: Path) -> None:
    """With num_config 1 no edge crosses a configuration, so zero_out changes nothing DFModel
    charges: the step stays its log's 12,577,816.576 ns (test_dfmodel_parity), and the field
    is no longer reported as ignored."""
    src = _write(tmp_path, "z.txt", _zero_out(GENZ_DECODE.read_text()))
    s = _run(src, tmp_path / "o", "dfmodel")
    assert s["latency_s"] == pytest.approx(12_577_816.576e-9, rel=1e-9)
    assert not any("zero_out" in w for w in s["warnings"])


def test_zero_out_edges_cost_dfmodel_nothing_kernel_by_kernel(tmp_path: Path) -> None:
    """KERNEL_BY_KERNEL: every edge crosses, and DFModel charges a crossing edge its
    producer's output per chip at both ends (its D matrix). The two cache edges carry
    122,892,288 B / 12 chips = 10,241,024 B each; as zero_out edges they carry none:
    96 layers x 2 edges x 2 ends x 10,241,024 B / 4000 GB/s = 0.983138304 ms less (each
    end's configuration is memory-bound: II = max(compute, memory) + network)."""
    kbk = GENZ_DECODE.read_text().replace(
        "execution_style: DATAFLOW", "execution_style: KERNEL_BY_KERNEL"
    )
    plain = _run(_write(tmp_path, "k.txt", kbk), tmp_path / "k", "dfmodel")
    zeroed = _run(_write(tmp_path, "z.txt", _zero_out(kbk)), tmp_path / "z", "dfmodel")
    saved_s = LAYERS * 2 * 2 * (CACHE_BYTES / CHIPS) / DRAM_Bps
    assert plain["latency_s"] - zeroed["latency_s"] == pytest.approx(saved_s, rel=1e-9)


@pytest.mark.slow
def test_zero_out_reads_the_cache_from_dram_in_the_native_model(tmp_path: Path) -> None:
    """Natively a zero_out edge moves nothing either, so the attention GEMM reads the cache
    where it lives, in DRAM (it can no longer take it on chip from a fused cache kernel,
    which was free), and the cache kernel's output, consumed by no edge, is written back:
    2 caches x (read + write) x 10,241,024 B per chip / 4000 GB/s x 96 layers =
    0.983138304 ms more, all exposed (the layer's one configuration is memory-bound)."""
    text = GENZ_DECODE.read_text()
    plain = _run(_write(tmp_path, "p.txt", text), tmp_path / "p", "native")
    zeroed = _run(_write(tmp_path, "z.txt", _zero_out(text)), tmp_path / "z", "native")
    extra_s = LAYERS * 2 * 2 * (CACHE_BYTES / CHIPS) / DRAM_Bps
    assert zeroed["latency_s"] - plain["latency_s"] == pytest.approx(extra_s, rel=1e-6)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # a negative int64 is ten bytes of two's complement
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: int | float | bytes) -> bytes:
    """One field in protobuf's wire format: varint (0), 32-bit float (5) or bytes (2)."""
    if isinstance(value, bytes):
        return _varint(number << 3 | 2) + _varint(len(value)) + value
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    return _varint(number << 3) + _varint(value)


def test_pb_field_numbers_are_dfmodels(tmp_path: Path) -> None:
    """A DSE message encoded by hand with the field numbers of DFModel's src/setup.proto
    (5ba2040; Memory's second DRAM from 04f93d5): Kernel.config 4 (-1), fwd_bwd 5 (FWD = 1),
    type 6 (SIMD = 2), elementwise_input1 9 { M 2, N 4, output_tensor_size 9 (float),
    tiling 20 (N_TILING = 4) }, Connection zero_out 9999, System.memory 100 { dram_bw 1,
    second_dram_cap 4 }, HBD 110, Execution.overlap 16 (OVERLAP_COMPUTE_MEMORY = 3), word
    18, Gurobi.thread 1: each lands in MapShard's field of the same name."""
    kernel = (
        _field(1, b"A")
        + _field(2, 1)
        + _field(4, -1)
        + _field(5, 1)
        + _field(6, 2)
        + _field(9, _field(2, 8) + _field(4, 4) + _field(9, 64.0) + _field(20, 4))
    )
    edge = _field(1, 1) + _field(2, 1) + _field(9999, 1)
    data = (
        _field(1, _field(1, kernel) + _field(2, edge))
        + _field(2, _field(1, 1) + _field(100, _field(1, 100.0) + _field(4, 2.0)) + _field(110, 8))
        + _field(4, _field(16, 3) + _field(18, 2))
        + _field(5, _field(1, 8))
    )
    pb = tmp_path / "dse.pb"
    pb.write_bytes(data)
    setup, _ = load_setup(pb)
    k = setup.dataflow_graph.kernels[0]
    assert (k.name, k.id, k.config) == ("A", 1, -1)
    assert (k.fwd_bwd, k.type) == (setup_pb2.FWD, setup_pb2.SIMD)
    ew = k.elementwise_input1
    assert (ew.M, ew.N, ew.output_tensor_size, ew.tiling) == (8, 4, 64.0, setup_pb2.N_TILING)
    assert setup.dataflow_graph.connections[0].zero_out
    mem = setup.system.memory
    assert (setup.system.num_chip, mem.dram_bw, mem.second_dram_cap) == (1, 100.0, 2.0)
    assert setup.system.HBD == 8
    assert setup.execution.overlap == setup_pb2.OVERLAP_COMPUTE_MEMORY
    assert (setup.execution.word, setup.gurobi.thread) == (2.0, 8)


def test_pb_run_equals_the_text_run(tmp_path: Path) -> None:
    """GenZ decode serialised in DFModel's binary layout (its sizes become float32, as in
    DFModel) runs to the text input's answer: DFModel's log, 12,577,816.576 ns."""
    msg = dfmodel_wire.DSE()
    text_format.Parse(GENZ_DECODE.read_text(), msg)
    pb = tmp_path / "dse.pb"
    pb.write_bytes(msg.SerializeToString())
    from_pb = _run(pb, tmp_path / "pb", "dfmodel")
    from_text = _run(GENZ_DECODE, tmp_path / "txt", "dfmodel")
    assert from_pb["latency_s"] == pytest.approx(12_577_816.576e-9, rel=1e-9)
    for key in ("latency_s", "system_cost", "system_power_W", "workload_flop"):
        assert from_pb[key] == pytest.approx(from_text[key], rel=1e-12)
    # stage 1 as DFModel's log has it (test_dfmodel_parity): TP 12 splits K of PROJ_GEMM
    # and FFN1, each then all-reducing its 12,288 B output
    sharded, _ = load_setup(tmp_path / "txt" / "dse_sharded.txt")
    split = {
        k.name: (k.gemm_input1_weight.communication_type, k.gemm_input1_weight.communication_size)
        for k in sharded.dataflow_graph.kernels
        if k.WhichOneof("kernel_variant") == "gemm_input1_weight"
        and k.gemm_input1_weight.sharding == setup_pb2.K_SHARDING
    }
    assert split == {n: (setup_pb2.ALL_REDUCE, 12288.0) for n in ("PROJ_GEMM", "FFN1")}


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\xff\xff\xff", "not a protobuf message"),
        (_field(4, _field(16, 9)), "value 9 of execution.overlap"),
        (_field(2, _field(77, 1)), "field 77 of system"),
    ],
)
def test_a_pb_that_is_not_dfmodels_is_one_line(tmp_path: Path, capsys, data, why) -> None:
    """Bytes that do not decode, an enum number DFModel does not name, a field number its
    layout does not have: exit 2, one line naming the file and what is wrong."""
    pb = tmp_path / "setup.pb"
    pb.write_bytes(data)
    assert main(["run", str(pb), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(pb) in err[0] and why in err[0]


def test_gurobi_thread_is_accepted_said_and_ignored() -> None:
    """gurobi { thread: 64 } (a Gurobi setting for DFModel's server) parses, changes no
    solver setting (HiGHS keeps one thread, the first count fixing it for the process) while
    gurobi.time and gap still fill the solver's, and the result says it is ignored."""
    setup = setup_pb2.Setup()
    text_format.Parse("gurobi { thread: 64 gap: 0.01 time: 30 }", setup)
    opts = solver_options(setup)
    assert (opts.threads, opts.gap, opts.time_limit_s) == (1, 0.01, 30.0)
    said = [w for w in ignored_fields(setup) if "gurobi.thread" in w]
    assert said == [
        "gurobi.thread (64) is ignored: it is Gurobi's; HiGHS runs with solver.threads (1)"
    ]


def test_dse_and_dse_sharded_are_dfmodels_stage_files(tmp_path: Path) -> None:
    """damsim_dlrm_2x4.txt (DAMSim/DLRM/2x4/user_input/setup.txt @ d818f8b) under
    --cost-model dfmodel writes dse.txt and dse_sharded.txt beside dse_final.txt. DFModel's
    own dse_sharded.txt for this input (same folder and commit) holds, besides its input:
    kernels MLP_1..MLP_8 with topological_number 0..7, config still -1, sharding
    NO_SHARDING (its non-LLM branch shards nothing), MLP_4 keeping its ALL_TO_ALL of
    20,480 B and memory_size 20,480; connections i -> i+1 with buffer_depth 2, tensor_size
    256,000 (the producer's output), startName/endName and lane_stage_type LANE. Its dse.txt
    is the input with LANE on every connection and none of stage 1's fields. Both files
    parse back with MapShard's reader, and dse_sharded.txt runs to the same step."""
    s = _run(DATA / "damsim_dlrm_2x4.txt", tmp_path / "o", "dfmodel")
    dse, _ = load_setup(tmp_path / "o" / "dse.txt")
    sharded, _ = load_setup(tmp_path / "o" / "dse_sharded.txt")
    names = [f"MLP_{i}" for i in range(1, 9)]
    assert [k.name for k in sharded.dataflow_graph.kernels] == names
    assert [k.topological_number for k in sharded.dataflow_graph.kernels] == list(range(8))
    assert {k.config for k in sharded.dataflow_graph.kernels} == {-1}
    bodies = [k.gemm_input1_weight for k in sharded.dataflow_graph.kernels]
    assert {b.sharding for b in bodies} == {setup_pb2.NO_SHARDING}
    assert (bodies[3].communication_type, bodies[3].communication_size) == (
        setup_pb2.ALL_TO_ALL,
        20480.0,
    )
    assert bodies[3].memory_size == 20480.0
    assert not any(b.shard_outer_M or b.shard_K or b.shard_N for b in bodies)  # stage 2's
    edges = sharded.dataflow_graph.connections
    assert [(c.startName, c.endName) for c in edges] == list(zip(names, names[1:]))
    assert {(c.buffer_depth, c.tensor_size, c.lane_stage_type) for c in edges} == {
        (2, 256000.0, setup_pb2.LANE)
    }
    assert {c.lane_stage_type for c in dse.dataflow_graph.connections} == {setup_pb2.LANE}
    assert not any(c.buffer_depth or c.tensor_size for c in dse.dataflow_graph.connections)
    assert not any(k.topological_number for k in dse.dataflow_graph.kernels)
    again = _run(tmp_path / "o" / "dse_sharded.txt", tmp_path / "again", "dfmodel")
    assert again["latency_s"] == pytest.approx(s["latency_s"], rel=1e-12)


RING_12 = '  r {\n    x: 12\n    link_bw_x: 300.0\n    par_x: "TP"\n  }'
TORUS_3D = (
    "  r_r_r {\n    x: 12\n    y: 1\n    z: 1\n    link_bw_x: 300.0\n    link_bw_y: 100.0\n"
    '    link_bw_z: 100.0\n    par_x: "TP"\n    par_y: "PP"\n    par_z: "DP"\n  }'
)
# GenZ decode per layer (test_dfmodel_parity): memory 171,474,944 B of memory_size, the two
# K-sharded all-reduces of 12,288 B, link latency 2 x 2000 ns x 11 each
LAYER_BYTES, AR_BYTES, HOPS_NS = 171_474_944, 12_288, 2 * 2 * 2000 * 11


def _genz_step_ns(memory_Bpns: float, all_reduce_ns_per_B: float) -> float:
    """96 x (memory + network): DFModel's II under OVERLAP_COMPUTE_MEMORY (the layer's
    240 ns of compute hides under its memory)."""
    return LAYERS * (LAYER_BYTES / memory_Bpns + 2 * AR_BYTES * all_reduce_ns_per_B + HOPS_NS)


@pytest.mark.parametrize(
    ("hbd", "ns_per_B"),
    [
        (0, 2 * 11 / (12 * 300)),  # separate_rs_ag_for_ar: 2 (p - 1) / (p B)
        (12, 11 / (12 * 300)),  # HBD >= x: (x - 1) / (x B_x), no doubling in that branch
        (4, 3 / (4 * 300) + (12 / 4 - 1) / (12 * 100)),  # inside 4 at B_x, 3 across at B_y
    ],
)
def test_hbd_sets_the_tp_all_reduce_as_dfmodel(tmp_path: Path, hbd: int, ns_per_B: float) -> None:
    """GenZ decode on DFModel's 3-D variant r_r_r (x 12 TP at 300 GB/s, y 1 PP and z 1 DP
    at 100 GB/s) with system.HBD: DFModel (intra_chip.py @ 0e97740) prices the TP
    all-reduce with HBD >= x as (x - 1) / (x B_x), else as a two-level one, (HBD - 1) /
    (HBD B_x) inside the domain plus (x / HBD - 1) / (x B_y) across; without HBD its
    ordinary rate (here doubled by separate_rs_ag_for_ar). The step is then
    96 x (171,474,944 B / 4000 B/ns + 2 x 12,288 B x rate + 2 x 44,000 ns)."""
    text = GENZ_DECODE.read_text().replace(RING_12, TORUS_3D)
    if hbd:
        text = text.replace("num_chip: 12", f"num_chip: 12\n  HBD: {hbd}")
    s = _run(_write(tmp_path, "s.txt", text), tmp_path / "o", "dfmodel")
    assert s["latency_s"] == pytest.approx(_genz_step_ns(4000, ns_per_B) * 1e-9, rel=1e-9)
    assert not any("HBD" in w for w in s["warnings"])


def test_second_dram_takes_what_the_first_cannot_hold(tmp_path: Path) -> None:
    """GenZ decode stores 14,495,514,624 B per chip in DFModel's DRAM row (weights x 96
    layers / TP 12 + live edges). With dram_cap 8e9 and a second DRAM of 8e9 B at
    1000 GB/s it fits both, at DFModel's capacity-weighted bandwidth (8e9 x 4000 + 8e9 x
    1000) / 16e9 = 2500 GB/s: 96 x (171,474,944 / 2500 + 150.187 + 88,000) ns. A second
    DRAM it does not need (dram_cap 40 GiB) changes nothing; 4e9 + 4e9 B holds it not:
    exit 3, naming the 8e9 B both hold."""
    text = GENZ_DECODE.read_text()
    first = "    dram_cap: 42949672960\n"

    def tiers(cap1: str, cap2: str) -> str:
        extra = f"    dram_cap: {cap1}\n    second_dram_cap: {cap2}\n    second_dram_bw: 1000\n"
        return text.replace(first, extra)

    s = _run(
        _write(tmp_path, "a.txt", tiers("8000000000", "8000000000")), tmp_path / "a", "dfmodel"
    )
    assert s["latency_s"] == pytest.approx(_genz_step_ns(2500, 2 * 11 / 3600) * 1e-9, rel=1e-9)
    assert s["memory_per_chip_bytes"] == 14_495_514_624
    roomy = _run(
        _write(tmp_path, "b.txt", tiers("42949672960", "8000000000")), tmp_path / "b", "dfmodel"
    )
    assert roomy["latency_s"] == pytest.approx(12_577_816.576e-9, rel=1e-9)
    _run(_write(tmp_path, "c.txt", tiers("4000000000", "4000000000")), tmp_path / "c", "dfmodel", 3)


def test_native_says_hbd_and_second_dram_are_dfmodels() -> None:
    """The native model has no two-level all-reduce over an HBD nor a second DRAM tier: it
    says so (the dfmodel cost model prices both), and a second_dram_bw without its capacity,
    which DFModel does not read either, is said under both models."""
    setup = setup_pb2.Setup()
    text_format.Parse(
        "system { HBD: 8 memory { dram_bw: 100 second_dram_bw: 10 second_dram_cap: 1e9 } }",
        setup,
    )
    native = " | ".join(ignored_fields(setup))
    assert "system.HBD (8) is priced by --cost-model dfmodel only" in native
    assert "second_dram_cap are priced by --cost-model dfmodel only" in native
    setup.execution.cost_model = setup_pb2.DFMODEL
    setup.execution.llm.seq_len = 1
    said = " | ".join(ignored_fields(setup))
    assert "system.HBD (8) is not read" in said  # no 3-D TP/PP/DP topology here
    assert "second_dram" not in said
    setup.system.memory.second_dram_cap = 0
    assert "second_dram_bw is not read without second_dram_cap" in " | ".join(ignored_fields(setup))


def test_second_dram_holds_hpls_matrix(tmp_path: Path, capsys) -> None:
    """DAMSim/HPL/4K (damsim_hpl_4k.txt): DFModel's DRAM row holds n^2 x word / chips =
    4096^2 x 2 / 16 = 2,097,152 B per chip. A first DRAM of 2^20 B alone cannot (exit 3, one
    line naming both numbers); with a second DRAM of 2^21 B it can, and the step is the
    original's (its configurations do not wait on DRAM at either bandwidth)."""
    text = (DATA / "damsim_hpl_4k.txt").read_text()
    first = "    dram_bw: 1638.4\n    dram_cap: 824633720832.0\n"
    small = "    dram_bw: 1638.4\n    dram_cap: 1048576\n"
    both = small + "    second_dram_cap: 2097152\n    second_dram_bw: 409.6\n"
    _run(_write(tmp_path, "a.txt", text.replace(first, small)), tmp_path / "a", "dfmodel", 3)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2,097,152 B per chip exceeds 1,048,576 B" in err[0]
    two = _run(_write(tmp_path, "b.txt", text.replace(first, both)), tmp_path / "b", "dfmodel")
    plain = _run(DATA / "damsim_hpl_4k.txt", tmp_path / "c", "dfmodel")
    assert two["memory_per_chip_bytes"] == 4096**2 * 2 / 16
    assert two["latency_s"] == pytest.approx(plain["latency_s"], rel=1e-12)
