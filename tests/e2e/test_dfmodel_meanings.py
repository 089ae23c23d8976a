"""DFModel's fields mean in MapShard what they mean in DFModel (issue #15, item 2): each
former silent misreading, pinned with a number derived by hand in the test."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.proto_graph import MAX_BYTES_PER_ELEMENT
from mapshard import pipeline
from mapshard.run import Result, run
from mapshard.scenario import execution_options
from schema.errors import SetupError
from solver.search.stages import boundary_bytes

DATA = Path(__file__).resolve().parents[1] / "data" / "dfmodel"
GPT = DATA / "damsim_llm_gpt3_1.7b.txt"

# One chip-kind for the small hand-checked setups: 1 core of 32 x 32 MACs at 1 GHz, so the
# matrix peak is 2 x 32 x 32 x 1e9 = 2.048e12 FLOP/s, and a vector unit of 0.128 TFLOP/s
# (given: a DFModel chip without one runs SIMD kernels at the systolic peak); DRAM
# 1000 GB/s; a fully-connected level of 4 chips, 100 GB/s per link, no latency.
SYSTEM = """
system {
  num_chip: 4
  accelerator { core: 1 systolic_width: 32 systolic_height: 32 sram_cap: 1073741824 freq: 1
                vector_tflops: 0.128 }
  fc { x: 4 link_bw_x: 100 }
  memory { dram_bw: 1000 dram_cap: 1e12 }
}
"""


def _run(tmp_path: Path, text: str) -> Result:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "setup.txt"
    path.write_text(text)
    return run(path, tmp_path / "out")  # the work budgets decide: the same plan at any load


def _kernel(result: Result, name: str):
    return next(k for p in result.plan.phases for k in p.kernels if k.name == name)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "setup.txt"
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------------------
# Spellings: miscellany, overlap, variant sharding
# ---------------------------------------------------------------------------------------


def test_miscellany_is_the_execution_block() -> None:
    loaded = pipeline.load(DATA / "fft_dgx1_hbm_nvlink.txt")
    ex = loaded.setup.execution
    assert not loaded.setup.HasField("miscellany")
    assert ex.HasField("fft") and ex.fft.length == 2**40
    assert ex.compute_util == pytest.approx(0.9) and ex.word == 2
    assert not execution_options(loaded.setup).dataflow  # KERNEL_BY_KERNEL


@pytest.mark.parametrize(
    "style, overlap, serialized",
    [
        ("NO_OVERLAP", False, False),
        ("PERFECT_OVERLAP", True, False),
        ("OVERLAP_COMPUTE_MEMORY", True, True),
    ],
)
def test_overlap_enum_is_the_native_overlap(
    tmp_path: Path, style: str, overlap: bool, serialized: bool
) -> None:
    text = (DATA / "damsim_dlrm_2x4.txt").read_text().replace("NO_OVERLAP", style)
    options = execution_options(pipeline.load(_write(tmp_path, text)).setup)
    assert (options.overlap, options.serialize_network) == (overlap, serialized)


def test_tiling_is_not_a_sharding_pin_but_variant_sharding_is(tmp_path: Path) -> None:
    text = (DATA / "damsim_llm_gpt3_1.7b.txt").read_text()
    sc = pipeline.load_scenario(_write(tmp_path, text))
    layer = sc.workload.phases[0].graph
    assert {k.pinned_sharding for k in layer.kernels} == {""}  # N_TILING everywhere
    pinned = text.replace(
        "    tiling: N_TILING\n", "    tiling: N_TILING\n    sharding: M_SHARDING\n", 1
    )
    sc = pipeline.load_scenario(_write(tmp_path, pinned))
    first = sc.workload.phases[0].graph.kernels[0]
    assert (first.name, first.pinned_sharding) == ("Add_Prev_Layer", "M")


# ---------------------------------------------------------------------------------------
# Kernel semantics: unit, collectives, bytes per element
# ---------------------------------------------------------------------------------------


def _one_kernel(body: str, extra: str = "") -> str:
    return f'dataflow_graph {{ kernels {{ name: "A" id: 1 {body} }} }}\n{SYSTEM}\n{extra}'


def test_a_simd_gemm_runs_on_the_vector_unit(tmp_path: Path) -> None:
    gemm = (
        "gemm_input1_input2 { outer: 1 M: 256 K: 256 N: 256 input_tensor_1_size: 131072 "
        "input_tensor_2_size: 131072 output_tensor_size: 131072 }"
    )
    flop = 2 * 256 * 256 * 256  # 33,554,432
    systolic = _kernel(_run(tmp_path / "s", _one_kernel("type: SYSTOLIC " + gemm)), "A")
    simd = _kernel(_run(tmp_path / "v", _one_kernel("type: SIMD " + gemm)), "A")
    tp = 4 if systolic.sharding != "none" else 1
    assert systolic.compute_s == pytest.approx(flop / tp / 2.048e12, rel=1e-6)
    tp = 4 if simd.sharding != "none" else 1
    assert simd.compute_s == pytest.approx(flop / tp / 1.28e11, rel=1e-6)


def test_dfmodel_all_to_all_over_every_chip_and_hpl_collectives_on_the_grid(
    tmp_path: Path,
) -> None:
    """DFModel's FFT transpose (ALL_TO_ALL) runs over all 4 chips of the fc level:
    all-to-all of S = 4e6 bytes: (p-1)/p x (S/p) / b = 3/4 x 1e6 / 1e11 = 7.5e-6 s.
    HPL's broadcast + row swap (communication_type_2 POINT_TO_POINT) run on DFModel's
    process grid, which one level makes 1 x 4 (X = 1, Y = 4): the broadcast of the
    process's 1/X share along its row of 4, 3/4 x S / b = 3e-5 s; a column of one process
    swaps nothing (tests/unit/test_hpl_grid.py prices a two-level grid)."""
    ew = (
        "elementwise_input1 { outer: 1 M: 1000 N: 1000 input_tensor_size: 2e6 "
        "output_tensor_size: 2e6"
    )
    a2a = _one_kernel(
        f"type: SIMD {ew} communication_type: ALL_TO_ALL communication_size: 4e6 }}",
        "execution { fft { length: 1000000 num_copy: 1 } word: 2 }",
    )
    assert _kernel(_run(tmp_path / "a", a2a), "A").network_s == pytest.approx(7.5e-6, rel=1e-9)
    hpl = _one_kernel(
        f"type: SIMD {ew} communication_type: BROADCAST communication_size: 4e6 "
        "communication_type_2: POINT_TO_POINT communication_size_2: 4e6 }",
        "execution { hpl { n: 1000 b: 10 num_copy: 1 } word: 2 }",
    )
    assert _kernel(_run(tmp_path / "h", hpl), "A").network_s == pytest.approx(3e-5, rel=1e-9)


def test_an_implausible_bytes_per_element_falls_back_to_word() -> None:
    """DFModel's 2^40-point FFT writes 2,199,023,300,000 bytes for a K x N = 512 x 2^20
    operand: 4096 bytes per element, above 16 (complex128), so word (2) is used; DAMSim's
    16x16 FFT writes 65,522 bytes for 191 x 181 = 34,571 elements: 1.895, kept."""
    assert MAX_BYTES_PER_ELEMENT == 16.0
    big = pipeline.load_scenario(DATA / "fft_dgx1_hbm_nvlink.txt").workload.phases[0].graph
    for k in big.kernels:
        assert k.operand("in").bytes_per_element == 2.0  # not 4096
        # the output, M x N = 2^40 elements, is a plausible 2199023300000 / 2^40 bytes each
        assert k.operand("out").bytes_per_element == pytest.approx(2199023300000 / 2**40)
    small = pipeline.load_scenario(DATA / "damsim_fft_16x16.txt").workload.phases[0].graph
    step = small.kernels[0]
    assert step.operand("in").bytes_per_element == pytest.approx(65522 / (191 * 181))


# ---------------------------------------------------------------------------------------
# DFModel LLM graphs: micro-batches, pipeline transfers, forward-only
# ---------------------------------------------------------------------------------------

# FLOP of one sequence through one layer of DFModel's GPT-3 1.7B forward graph
# (hidden 2304, 24 heads of 96, seq 2048, FFN 9216), kernel by kernel from the file:
GPT_LAYER_FLOP = (
    3 * 2 * 24 * 96 * 2304 * 2048  # Q, K, V
    + 2 * 24 * 2048 * 96 * 2048  # MHA_GEMM_1
    + 2 * 24 * 96 * 2048 * 2048  # MHA_GEMM_2
    + 2 * 2304 * 2304 * 2048  # PROJ_GEMM
    + 2 * (2 * 9216 * 2304 * 2048)  # FFN0, FFN1
    + 7 * 2304 * 2048  # Add_Prev_Layer, LayerNorm_1/2, DropOut_2/3, Add_1/2
    + 2 * 24 * 2048 * 2048  # SOFTMAX, DropOut_1
    + 9216 * 2048  # GeLU
)


def test_micro_batch_size_does_not_divide_the_work(tmp_path: Path) -> None:
    """24 layers x 128 sequences of GPT_LAYER_FLOP, whatever the micro-batch size."""
    text = GPT.read_text()
    one = _run(tmp_path / "m1", text).plan
    two = _run(tmp_path / "m2", text.replace("micro_batch_size: 1", "micro_batch_size: 2")).plan
    assert one.workload_flop == pytest.approx(GPT_LAYER_FLOP * 24 * 128, rel=1e-12)
    assert two.workload_flop == pytest.approx(one.workload_flop, rel=1e-12)
    assert two.latency_s >= one.latency_s * (1 - 1e-9)


def test_pipeline_transfer_carries_a_whole_sequence() -> None:
    """A stage boundary of the per-sequence graph carries seq_len x hidden x word =
    2048 x 2304 x 2 = 9,437,184 bytes (the file's own tensor size), not one token's."""
    sc = pipeline.load_scenario(GPT)
    assert boundary_bytes(sc.workload, sc.workload.phases[0]) == 2048 * 2304 * 2


def test_a_forward_only_graph_is_not_a_training_step(tmp_path: Path) -> None:
    plan = _run(tmp_path, GPT.read_text()).plan
    assert plan.optimizer_s == 0 and plan.dp_allreduce_s == 0
    assert plan.memory.gradients == 0 and plan.memory.optimizer == 0


def test_a_pp_tag_on_a_plain_graph_is_refused_with_its_reason(tmp_path: Path) -> None:
    text = (
        (DATA / "damsim_hpl_4k.txt")
        .read_text()
        .replace("    link_bw_y: 10\n", '    link_bw_y: 10\n    par_x: "PP"\n    par_y: "TP"\n')
    )
    with pytest.raises(SetupError) as info:
        pipeline.load_scenario(_write(tmp_path, text))
    (message,) = info.value.problems
    assert "carry PP" in message and "no layers to pipeline" in message
