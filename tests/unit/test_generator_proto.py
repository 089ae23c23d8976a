"""DataflowGraph <-> KernelGraph: DFModel's GPT-3 1T example, round trips, validation."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.dfmodel_gpt import dfmodel_gpt_graph
from generator.graph import KernelKind, OperandRole, Pass
from generator.proto_graph import graph_from_proto
from generator.proto_write import graph_to_proto
from schema import setup_pb2
from schema.errors import SetupError
from schema.setup_io import load_setup

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "scenarios" / "dfmodel_gpt3_1t_sn30"


def test_generated_gpt_graph_equals_dfmodel_example():
    setup, _ = load_setup(EXAMPLE)
    ref = setup.dataflow_graph
    gen = dfmodel_gpt_graph(hidden=25600, head_dim=160, num_head=160, seq=2048, word=2)
    assert len(gen.kernels) == len(ref.kernels) == 41
    assert len(gen.connections) == len(ref.connections) == 53
    for a, b in zip(gen.kernels, ref.kernels):
        assert a == b, a.name
    for a, b in zip(gen.connections, ref.connections):
        assert a == b, (a, b)
    assert gen == ref
    assert ref.kernels[5].gemm_input1_input2.output_tensor_size == 1342177300.0
    fwd = dfmodel_gpt_graph(25600, 160, 160, 2048, 2, forward_only=True)
    assert list(fwd.kernels) == list(ref.kernels[:18])
    assert list(fwd.connections) == list(ref.connections[:21])


def test_dfmodel_example_workload():
    setup, path = load_setup(EXAMPLE)
    w = build_workload(setup, path, 1)
    assert w.kind == "training" and len(w.phases) == 1
    layer = w.phases[0]
    assert (layer.name, layer.count) == ("layer", 128)
    assert (w.global_batch, w.micro_batch, w.seq_len) == (3072, 1, 2048)
    # DFModel's README reports "Workload FLOP 3.85072240461978e+19" for this setup.
    assert w.flop_per_step * w.global_batch == pytest.approx(3.85072240461978e19, rel=1e-12)
    g = layer.graph
    q = g.kernel("Q")
    assert q.kind == KernelKind.BATCHED_GEMM
    assert q.dims == (("outer", 160), ("M", 160), ("K", 25600), ("N", 2048))
    assert q.operand("in").bytes_per_element == 104857600.0 / (160 * 25600 * 2048)
    assert q.operand("weight").role == OperandRole.WEIGHT
    assert q.flop == 2 * 160 * 160 * 25600 * 2048
    assert g.kernel("SOFTMAX").kind == KernelKind.SOFTMAX
    assert g.kernel("LayerNorm_1").kind == KernelKind.NORM
    assert g.kernel("PROJ_GEMM").kind == KernelKind.GEMM
    wu = g.kernel("FFN1_bwd_weight_update")
    assert wu.pass_ == Pass.WGRAD and g.kernel("FFN1_bwd").pass_ == Pass.BWD
    assert wu.communication.value == "ALL_REDUCE_PERIODIC" and wu.communication_group == "dp"
    assert wu.communication_bytes == 5242880000.0
    edge = next(e for e in g.edges if (e.src, e.dst) == ("Q", "MHA_GEMM_1"))
    assert edge.dst_operand == "in1"
    assert edge.dim_map == (("outer", "outer"), ("M", "K"), ("N", "M"))
    assert next(e for e in g.edges if (e.src, e.dst) == ("K", "MHA_GEMM_1")).dst_operand == "in2"
    add = [e for e in g.edges if e.dst == "Add_1"]
    assert [(e.src, e.dst_operand) for e in add] == [
        ("DropOut_2", "in1"),
        ("Add_Prev_Layer", "in2"),
    ]
    assert w.model.num_params == 12 * 25600**2 * 128


def test_llm_block_alone_generates_the_same_graph():
    setup, path = load_setup(EXAMPLE)
    setup.ClearField("dataflow_graph")
    assert (
        build_workload(setup, path, 1).phases[0].graph
        == build_workload(*load_setup(EXAMPLE), 1).phases[0].graph
    )


def _round_trip(graph):
    text = text_format.MessageToString(graph_to_proto(graph))
    dg = setup_pb2.DataflowGraph()
    text_format.Parse(text, dg)
    return graph_from_proto(dg, path="x.txt", name=graph.name)


def _setup(**kinds) -> setup_pb2.Setup:
    s = setup_pb2.Setup()
    text_format.Parse(kinds["text"], s)
    return s


CASES = {
    "dfmodel": None,
    "mla_train": 'workload { llm_training { model { hf_model: "%s" } global_batch: 2 '
    "seq_len: 64 recompute: RECOMPUTE_SELECTIVE } }"
    % (ROOT / "tests/data/models/DeepSeek-V2-Lite"),
    "mixtral_chunked": 'workload { llm_inference { model { hf_model: "Mixtral-8x7B-v0.1" } '
    "phase: CHUNKED_PREFILL chunk_size: 64 input_len: 200 decode_batch: 4 "
    "context_len: 300 } }",
    "gpt3_train_full": 'workload { llm_training { model { hf_model: "GPT-3-175B-gpt2style" } '
    "global_batch: 4 seq_len: 128 recompute: RECOMPUTE_FULL } }",
    "gemma_request": 'workload { llm_inference { model { hf_model: "%s" } phase: REQUEST '
    "batch: 2 input_len: 32 output_len: 4 } }" % (ROOT / "tests/data/models/gemma-2-9b"),
    "dlrm": "system { num_chip: 4 } workload { dlrm { mlp_dim: 64 bottom_num_mlp: 2 "
    "top_num_mlp: 2 pooled_row: 4 row: 1000 num_table: 3 emb_dim: 16 "
    "micro_batch_size: 8 } }",
    "hpl": "workload { hpl { N: 4096 B: 256 sample_iterations: 4 } }",
    "fft": "workload { fft { length: 65536 batch: 4 } }",
    "gemm": "workload { gemm { M: 64 K: 32 N: 16 batch: 3 weight_operand: true } }",
    # FP8 math: the LM head keeps 16-bit math (Kernel.math_precision), which must survive.
    "gemma_fp8_head": 'workload { llm_inference { model { hf_model: "%s" } phase: PREFILL '
    "batch: 1 input_len: 16 } precision { weight: FP8 activation: BF16 math: FP8 } }"
    % (ROOT / "tests/data/models/gemma-2-9b"),
    # a decode kernel with no KV split and sliding-window layers (Kernel.unsplit_kv,
    # Kernel.attention_window): both must survive
    "llama_unsplit_decode": 'workload { llm_inference { model { hf_model: "Llama-3.1-8B" } '
    "phase: DECODE batch: 2 context_len: 256 decode_attention: KV_SHARED_UNSPLIT } }",
    "gemma_windowed_prefill": 'workload { llm_inference { model { hf_model: "%s" } '
    "phase: PREFILL batch: 1 input_len: 8192 } }" % (ROOT / "tests/data/models/gemma-2-9b"),
    # one sequence's decode step reaches 8 of Qwen3-30B-A3B's 128 experts (Kernel.expert_share)
    "qwen3_moe_decode": 'workload { llm_inference { model { hf_model: "Qwen3-30B-A3B" } '
    "phase: DECODE batch: 1 context_len: 64 } }",
    # training's default unfused permutation: scatter-adds by atomics (Kernel.atomic_adds)
    "qwen3_moe_train": 'workload { llm_training { model { hf_model: "Qwen3-30B-A3B" } '
    "global_batch: 1 seq_len: 64 } }",
    # the experts as torch._grouped_mm runs them (Kernel.torch_grouped)
    "qwen3_moe_torch": 'workload { llm_inference { model { hf_model: "Qwen3-30B-A3B" } '
    "phase: DECODE batch: 4 context_len: 64 moe_gemm: MOE_GEMM_TORCH_GROUPED } }",
}


@pytest.mark.parametrize("case", list(CASES))
def test_round_trip_is_identical(case):
    if CASES[case] is None:
        setup, path = load_setup(EXAMPLE)
    else:
        setup, path = _setup(text=CASES[case]), Path("setup.txt")
    w = build_workload(setup, path, 1)
    for phase in w.phases:
        assert _round_trip(phase.graph) == phase.graph, phase.name
    kernels = [k for p in w.phases for k in p.graph.kernels]
    if case == "llama_unsplit_decode":
        assert [k.name for k in kernels if k.unsplit_kv] == ["attention"]
    if case == "qwen3_moe_decode":
        shares = {k.name: k.expert_share for k in kernels if k.expert_share < 1}
        moe = {"dispatch", "expert_gate_up", "expert_act", "expert_down", "combine"}
        assert set(shares) == moe
        assert set(shares.values()) == {8 / 128}
        # an engine's experts run as one grouped kernel (MoeGemm MOE_GEMM_GROUPED)
        assert {k.name for k in kernels if k.fused_experts} == {"expert_gate_up", "expert_down"}
    if case == "qwen3_moe_train":  # 64 tokens x top-8 x hidden 2,048 each
        adds = {k.name: k.atomic_adds for k in kernels if k.atomic_adds}
        assert adds == {"combine": 64 * 8 * 2048, "dispatch_bwd": 64 * 8 * 2048}
        # and PyTorch's launches (Kernel.launches; ops_moe.EAGER_LAUNCHES) read back
        launches = {k.name: k.launches for k in kernels if k.launches != 1}
        assert launches == {"topk": 6, "dispatch": 9, "routed_scale": 3, "combine": 2}
    if case == "qwen3_moe_torch":
        assert {k.name for k in kernels if k.torch_grouped} == {"expert_gate_up", "expert_down"}
    if case == "gemma_windowed_prefill":
        assert {k.attention_window for k in kernels} == {0, 4096}
    if case == "gemma_fp8_head":
        heads = [k for p in w.phases for k in p.graph.kernels if k.name.startswith("lm_head")]
        assert heads and {k.math_precision for k in heads} == {"bf16"}


def test_graph_file_with_repeat():
    g = build_workload(_setup(text=CASES["gemm"]), Path("x"), 1).phases[0].graph
    s = setup_pb2.Setup()
    s.dataflow_graph.CopyFrom(graph_to_proto(g, repeat=7))
    w = build_workload(s, Path("x"), 1)
    assert w.kind == "graph" and w.phases[0].count == 7 and w.phases[0].graph.kernels == g.kernels


def _two_kernels() -> setup_pb2.DataflowGraph:
    return text_format.Parse(
        """
        kernels { name: "a" id: 1 elementwise_input1 { outer: 1 M: 4 N: 4 } }
        kernels { name: "b" id: 2 elementwise_input1 { outer: 1 M: 4 N: 4 } }
        connections { startIdx: 1 endIdx: 2 id: 1 }
        """,
        setup_pb2.DataflowGraph(),
    )


def _errors(dg) -> list[str]:
    with pytest.raises(SetupError) as err:
        graph_from_proto(dg, path="s.txt")
    return err.value.problems


def test_validation_messages():
    dg = _two_kernels()
    dg.connections.add(startIdx=1, endIdx=9, id=2)
    (msg,) = _errors(dg)
    assert msg.startswith("s.txt: dataflow_graph.connections[1].endIdx 9 names no kernel")
    dg = _two_kernels()
    dg.kernels[1].id = 1
    dg.kernels[1].name = "a"
    problems = _errors(dg)
    assert any("kernels[1].name 'a' is used" in p for p in problems)
    assert any("kernels[1].id 1 (a) is used" in p for p in problems)
    dg = _two_kernels()
    dg.connections.add(startIdx=2, endIdx=1, id=2)
    (msg,) = _errors(dg)
    assert "cycle" in msg and "a -> b -> a" in msg
    dg = _two_kernels()
    dg.connections.add(startIdx=1, endIdx=2, id=2)
    (msg,) = _errors(dg)
    assert "connections[1]" in msg and "more incoming connections than it has inputs" in msg
    dg = _two_kernels()
    dg.kernels[0].ClearField("elementwise_input1")
    dg.kernels[0].einsum.kind = "ELEMENTWISE"
    dg.kernels[0].einsum.dims.add(name="m", size=4)
    dg.kernels[0].einsum.operands.add(name="y", role=setup_pb2.OUTPUT, dims=["m"])
    dg.kernels[0].einsum.math_precision = "fp9"
    (msg,) = _errors(dg)
    assert "einsum.math_precision 'fp9' is not a precision; valid: fp64," in msg
    dg = _two_kernels()
    dg.kernels[0].elementwise_input1.M = 0
    (msg,) = _errors(dg)
    assert "kernels[0].elementwise_input1: dims must be > 0, got M=0" in msg
    dg = _two_kernels()
    dg.connections[0].end_operand = "weight"
    assert "is not an input of 'b'" in _errors(dg)[0]


def test_einsum_defaults_and_pins():
    dg = text_format.Parse(
        """
        kernels { name: "mm" id: 1 config: 2 sharding: "n"
          einsum { kind: "GEMM" dims { name: "m" size: 8 } dims { name: "n" size: 4 }
                   dims { name: "k" size: 2 }
                   operands { name: "a" dims: "m" dims: "k" }
                   operands { name: "w" role: WEIGHT dims: "k" dims: "n" bytes_per_element: 1 }
                   operands { name: "c" role: OUTPUT dims: "m" dims: "n" } } }
        """,
        setup_pb2.DataflowGraph(),
    )
    k = graph_from_proto(dg, path="x", word=4).kernel("mm")
    assert k.flop == 2 * 8 * 4 * 2
    assert k.operand("a").bytes_per_element == 4 and k.operand("w").bytes_per_element == 1
    assert (k.pinned_config, k.pinned_sharding) == (2, "n")
    dg.kernels[0].einsum.kind = "CONV"
    assert "not a kernel kind" in _errors(dg)[0]
