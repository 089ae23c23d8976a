"""Eager PyTorch's strided elementwise kernels (issue #35, BF16 training and plain-PyTorch
layers): the H200's rate re-derived from the FIT prefill profile, a kernel's time by hand,
and the setup fields that put the eager ops in an inference layer."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.graph import KernelGraph, Pass
from mapshard.fidelity.fit import library_system
from schema import setup_pb2
from solver.cost.kernel_times import STRIDED_SOURCE
from solver.cost.menus import busiest_experts
from tests.solver_fixtures import one_kernel_options

PROFILE = Path(__file__).parents[1] / "data/profiles/h200/prefill_llama31_8b_layer_b1_s2048.json"
# Llama-3.1-8B, one layer, 2,048 tokens: q is 2,048 x 32 x 128 elements, its half 64 wide,
# the SwiGLU halves 2,048 x 14,336. The profile's launches in order: 2 q x cos, 3 -x2,
# 4 cat(-x2, x1), 5 cat x sin, 19 silu(gate), 20 silu(gate) x up.
Q, FFN = 2048 * 32 * 128, 2048 * 14336
STRIDED_LAUNCHES = {2: Q, 3: Q // 2, 4: Q, 5: Q, 19: FFN, 20: FFN}
NON_VECTORIZED = ("void at::native::elementwise_kernel<128, 4", "CatArrayBatchedCopy<")


def test_the_h200_rate_is_the_median_of_the_fit_profiles_strided_kernels():
    events = [e for e in json.loads(PROFILE.read_text())["traceEvents"] if e.get("cat") == "kernel"]
    rates = []
    for index, elements in STRIDED_LAUNCHES.items():
        name = events[index]["name"]
        assert name.startswith(NON_VECTORIZED[0]) or NON_VECTORIZED[1] in name, name
        rates.append(elements / (events[index]["dur"] * 1e-6))
    assert sorted(r / 1e9 for r in rates) == pytest.approx(
        [227.0, 326.9, 352.3, 354.3, 355.2, 387.8], abs=0.05
    )
    chip = library_system("H200-SXM-141GB").chip
    assert chip.efficiency.strided_elementwise_elem_per_s == 353e9
    assert statistics.median(rates) == pytest.approx(353e9, rel=2e-3)


def _inference_setup(eager: bool) -> setup_pb2.Setup:
    s = setup_pb2.Setup()
    i = s.workload.llm_inference
    i.model.hf_model = "Llama-3.1-8B"
    i.phase, i.batch, i.input_len = setup_pb2.PREFILL, 1, 2048
    i.eager_activation = i.eager_rope = eager
    s.system.chip, s.system.num_chip = "H200-SXM-141GB", 1
    return s


def _layer(s: setup_pb2.Setup) -> KernelGraph:
    w = build_workload(s, Path("setup.txt"), 1)
    return next(p.graph for p in w.phases if any(k.name == "q_proj" for k in p.graph.kernels))


def test_a_strided_kernel_takes_its_elements_at_the_chips_rate():
    """q x cos of the profile's layer on H200: 8,388,608 elements at 353 G/s = 23.764 us,
    against 16.8 MB read and written at 4.8 TB/s x 0.8595 = 8.13 us of DRAM time."""
    layer = _layer(_inference_setup(eager=True))
    kernel = layer.kernel("q_rope_cos")
    assert kernel.strided
    system = library_system("H200-SXM-141GB")
    (option,) = one_kernel_options(kernel, system)
    assert option.compute_s == pytest.approx(Q / 353e9, rel=1e-9)
    assert option.compute_s == pytest.approx(23.764e-6, rel=1e-4)
    assert option.time_source == STRIDED_SOURCE
    assert 2 * 2 * Q / (4.8e12 * 0.8595) == pytest.approx(8.133e-6, rel=1e-3)


def test_engines_fuse_rope_and_the_activation_plain_pytorch_does_not():
    engine = {k.name for k in _layer(_inference_setup(eager=False)).kernels}
    eager = {k.name for k in _layer(_inference_setup(eager=True)).kernels}
    assert not any("rope" in n for n in engine) and "mlp_act" in engine
    rope = {"q_rope_neg", "q_rope_cat", "q_rope_cos", "q_rope_sin", "q_rope"}
    assert rope <= eager and {"mlp_act_act", "mlp_act_mul"} <= eager
    assert not any("bwd" in n for n in eager)  # inference: no backward


def _random_rope_cases(count: int):
    """Seeded Llama-like layers: query heads a multiple of the KV heads, even head widths."""
    rng = random.Random(35)
    for _ in range(count):
        kv_heads = rng.choice((1, 2, 4, 8))
        yield (
            rng.choice((16, 64, 128, 512)),  # tokens
            kv_heads * rng.choice((1, 2, 4)),  # heads
            kv_heads,
            rng.choice((32, 64, 80, 128, 256)),  # head width
        )


@pytest.mark.parametrize("tokens,heads,kv_heads,width", list(_random_rope_cases(12)))
def test_eager_rope_bytes_hold_for_any_layer(tokens, heads, kv_heads, width):
    """For any shape: q's eager RoPE moves 10a bytes per element forward and 12a backward
    (the builder's sum of q's three gradients included), and only the two sums run on the
    vectorized path (generator/ops_eager.py)."""
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    t.global_batch, t.micro_batch, t.seq_len, t.eager_rope = 1, 1, tokens, True
    spec = t.model.inline
    spec.name, spec.architecture, spec.hidden_size, spec.num_layers = "r", "llama", 64, 1
    spec.num_heads, spec.num_kv_heads, spec.head_dim = heads, kv_heads, width
    spec.intermediate_size, spec.vocab_size = 128, 256
    spec.ffn, spec.norm = setup_pb2.SWIGLU, setup_pb2.RMSNORM
    s.system.chip, s.system.num_chip = "H200-SXM-141GB", 1
    layer = next(p.graph for p in build_workload(s, Path("s.txt"), 1).phases if p.role == "layer")
    kernels = [k for k in layer.kernels if k.name.startswith(("q_rope", "q_proj_grad_sum"))]
    elements = tokens * heads * width

    def moved(pass_: Pass) -> float:
        return sum(
            k.operand_elements(o) * o.bytes_per_element
            for k in kernels
            if k.pass_ == pass_
            for o in k.operands
        )

    assert moved(Pass.FWD) == 10 * 2 * elements
    assert moved(Pass.BWD) == 12 * 2 * elements
    assert {k.name for k in kernels if not k.strided} == {"q_rope", "q_proj_grad_sum"}


MOE_PROFILE = PROFILE.with_name("prefill_qwen3_30b_a3b_layer_b1_s2048.json")
# Qwen3-30B-A3B, one layer, 2,048 tokens routed to 8 experts each: the experts' SwiGLU
# halves are 16,384 x 768 elements, on views of the grouped GEMM's output
EXPERT_FFN = 2048 * 8 * 768


def _moe_layer(eager: bool) -> KernelGraph:
    s = setup_pb2.Setup()
    i = s.workload.llm_inference
    i.model.hf_model = "Qwen3-30B-A3B"
    i.phase, i.batch, i.input_len = setup_pb2.PREFILL, 1, 2048
    i.moe_gemm, i.eager_activation = setup_pb2.MOE_GEMM_TORCH_GROUPED, eager
    w = build_workload(s, Path("setup.txt"), 1)
    return next(p.graph for p in w.phases if any(k.name == "combine" for k in p.graph.kernels))


def test_the_experts_eager_activation_runs_at_the_strided_rate():
    """With eager_activation the experts' act(gate) * up is the MLP's two strided eager
    ops (as the dense MLP's); the FIT MoE profile (M-H200-S003's configuration) ran them,
    the two launches after the first grouped GEMM, within 3% of the H200's strided rate
    fitted on the dense profile; each is priced at its elements at that rate."""
    eager = {k.name: k for k in _moe_layer(True).kernels}
    assert eager["expert_act_act"].strided and eager["expert_act_mul"].strided
    assert "expert_act" not in eager
    fused = {k.name: k for k in _moe_layer(False).kernels}
    assert not fused["expert_act"].strided and "expert_act_act" not in fused
    events = [
        e for e in json.loads(MOE_PROFILE.read_text())["traceEvents"] if e.get("cat") == "kernel"
    ]
    first = next(i for i, e in enumerate(events) if "GroupProblemShape" in e["name"])
    system = library_system("H200-SXM-141GB")
    rate = system.chip.efficiency.strided_elementwise_elem_per_s
    for event in events[first + 1 : first + 3]:
        assert event["name"].startswith(NON_VECTORIZED[0])
        assert EXPERT_FFN / (event["dur"] * 1e-6) == pytest.approx(rate, rel=0.03)
    (option,) = one_kernel_options(eager["expert_act_act"], system)
    assert option.time_source == STRIDED_SOURCE
    assert option.compute_s == pytest.approx(EXPERT_FFN / rate, rel=1e-9)


def test_a_random_family_of_eager_moe_layers_prices_the_experts_activation_strided():
    """Inline MoE layers of random shape (experts, top-k, hidden, expert FFN, prompt tokens,
    training or prefill) with eager_activation: the experts' silu(gate) and x up are
    strided kernels of the routed copies' FFN elements (tokens x k x ffn, at most experts x
    capacity x ffn), each priced at least at the elements of the experts the tokens reach
    (menus.busiest_experts of its expert share) at the H200's strided rate, exactly where
    that rate binds."""
    rng = random.Random(30)
    system = library_system("H200-SXM-141GB")
    rate = system.chip.efficiency.strided_elementwise_elem_per_s
    for _ in range(10):
        experts = rng.choice((8, 16, 64, 128))
        k, hidden = rng.choice((1, 2, 8)), 64 * rng.randint(4, 32)
        ffn, tokens = 64 * rng.randint(2, 24), 16 * rng.randint(1, 128)
        s = setup_pb2.Setup()
        text = (
            f'name: "moe" architecture: "mixtral" hidden_size: {hidden} num_layers: 1 '
            f"num_heads: 4 num_kv_heads: 4 head_dim: 64 intermediate_size: {ffn} "
            f"vocab_size: 1000 ffn: SWIGLU norm: RMSNORM num_experts: {experts} "
            f"experts_per_token: {k}"
        )
        if rng.random() < 0.5:
            t = s.workload.llm_training
            text_format.Parse(text, t.model.inline)
            t.global_batch, t.micro_batch, t.seq_len = 1, 1, tokens
            t.eager_activation = True
        else:
            i = s.workload.llm_inference
            text_format.Parse(text, i.model.inline)
            i.phase, i.batch, i.input_len, i.eager_activation = setup_pb2.PREFILL, 1, tokens, True
        w = build_workload(s, Path("setup.txt"), 1)
        layer = next(
            p.graph for p in w.phases if any(k_.name == "combine" for k_ in p.graph.kernels)
        )
        names = {kern.name for kern in layer.kernels}
        assert "expert_act" not in names
        capacity = -(-tokens * k // experts)
        elements = experts * capacity * ffn
        assert elements >= tokens * k * ffn
        for name in ("expert_act_act", "expert_act_mul"):
            kernel = layer.kernel(name)
            assert kernel.strided
            assert math.prod(size for _, size in kernel.dims) == elements
            reached = busiest_experts(experts, kernel.expert_share, 1)
            floor = reached * capacity * ffn / rate
            for option in one_kernel_options(kernel, system):
                assert option.compute_s >= floor * (1 - 1e-9)
                if option.time_source == STRIDED_SOURCE:
                    assert option.compute_s == pytest.approx(floor, rel=1e-9)
