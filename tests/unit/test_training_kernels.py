"""The framework's kernels a training recipe fixes: the fused cross-entropy (Transformer
Engine's online-softmax kernel pair, LossImpl LOSS_FUSED), the squared-ReLU MLP
activation as NeMo 1.x runs it eagerly (torch.pow(relu(x), 2): two forward kernels, four
backward), SwiGLU as plain PyTorch runs it (silu(gate) * up: two forward, four backward)
and Megatron's fused rotary embedding (one kernel per tensor each way). Bytes per element
derived by hand from the kernels the frameworks launch, 16-bit activations (2 bytes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.build import build_workload
from generator.graph import Pass
from mapshard import pipeline
from mapshard.fidelity.cases import Case, Unmodelable, parse_extra
from mapshard.fidelity.engines import training_kernels
from mapshard.fidelity.fit import library_system
from mapshard.fidelity.row_model import row_model
from schema import setup_pb2

TOKENS, VOCAB = 128, 128256  # micro-batch 1 x 128 tokens; Llama-3.1-8B's vocabulary
HIDDEN, FFN = 256, 1024


def _setup(**training) -> setup_pb2.Setup:
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    t.global_batch, t.micro_batch, t.seq_len = 2, 1, TOKENS
    for key, value in training.items():
        setattr(t, key, value)
    s.workload.precision.math = setup_pb2.BF16
    s.system.chip, s.system.num_chip = "H100-SXM5-80GB", 1
    return s


def _phase(s: setup_pb2.Setup, role: str):
    return next(p for p in build_workload(s, Path("setup.txt"), 1).phases if p.role == role)


def _bytes_per_element(kernel, elements: int) -> float:
    total = sum(kernel.operand_elements(o) * o.bytes_per_element for o in kernel.operands)
    return total / elements


def _loss_bytes(loss: int) -> tuple[object, dict, dict[str, float]]:
    """Llama-3.1-8B's head graph under a LossImpl, its loss kernels, and their bytes moved
    per logit."""
    s = _setup(loss=loss)
    s.workload.llm_training.model.hf_model = "Llama-3.1-8B"
    head = _phase(s, "head").graph
    kernels = {k.name: k for k in head.kernels if k.name.startswith("loss")}
    return head, kernels, {n: _bytes_per_element(k, TOKENS * VOCAB) for n, k in kernels.items()}


def test_fused_loss_moves_ten_bytes_per_logit():
    head, kernels, per = _loss_bytes(setup_pb2.LOSS_FUSED)
    stats = 8 / VOCAB  # FP32 row max and sum per row
    expected = {
        "loss_rowstats": 2 + stats,  # one read of the bf16 logits; write the row stats
        "loss": 2 + 2 + stats + 4 / VOCAB,  # read logits, write the bf16 gradient; stats, targets
        "loss_bwd": 2 + 2,  # scale the gradient in place
    }
    assert per == pytest.approx(expected, rel=1e-12)
    fwd = sum(per[n] for n, k in kernels.items() if k.pass_ == Pass.FWD)
    assert fwd - 2 * stats - 4 / VOCAB == pytest.approx(6)  # against Megatron's 26
    assert any(e.src == "loss_bwd" and e.dst == "lm_head_bwd" for e in head.edges)


def test_torch_eager_loss_moves_forty_eight_bytes_per_logit():
    """F.cross_entropy(logits.float(), y): 22 bytes per logit forward, 26 backward."""
    head, kernels, per = _loss_bytes(setup_pb2.LOSS_TORCH_EAGER)
    row = 4 / VOCAB  # one FP32 value (or int32 target) per row against the vocabulary
    expected = {
        "loss_upcast": 2 + 4,
        "loss_max": 4 + row,
        "loss_sumexp": 4 + 2 * row,
        "loss": 4 + 4 + 3 * row,  # read the FP32 logits, write the log-probabilities
        "loss_bwd_zeros": 4 + row,  # the targets say where NLL scatters into the zeros
        "loss_bwd_sum": 4 + row,
        "loss_bwd": 4 + 4 + 4 + row,  # the gradient, the log-probabilities, the result
        "loss_bwd_cast": 4 + 2,
    }
    assert per == pytest.approx(expected, rel=1e-12)
    fwd = sum(per[n] for n, k in kernels.items() if k.pass_ == Pass.FWD)
    bwd = sum(per[n] for n, k in kernels.items() if k.pass_ == Pass.BWD)
    assert fwd == pytest.approx(22, abs=8 * row)
    assert bwd == pytest.approx(26, abs=4 * row)
    assert any(e.src == "loss_bwd_cast" and e.dst == "lm_head_bwd" for e in head.edges)


def _mlp_act_kernels(
    eager: bool, ffn: int = setup_pb2.SQUARED_RELU, norm: int = setup_pb2.LAYERNORM
) -> dict:
    """The activation's kernels of a small model's layer (and the gradient join a gated
    activation's halves need)."""
    s = _setup(eager_activation=eager)
    spec = s.workload.llm_training.model.inline
    spec.name, spec.hidden_size, spec.num_layers = "mlp", HIDDEN, 2
    spec.num_heads, spec.intermediate_size, spec.vocab_size = 4, FFN, 1024
    spec.ffn, spec.norm = ffn, norm
    layer = _phase(s, "layer").graph
    names = ("mlp_act", "mlp_gate_up_grad_sum")
    return {k.name: k for k in layer.kernels if k.name.startswith(names)}


def _per_pass(kernels: dict, expected: dict[str, float]) -> tuple[float, float]:
    """Each kernel's bytes per activation element checked against `expected`; the forward
    and backward totals."""
    per = {n: _bytes_per_element(k, TOKENS * FFN) for n, k in kernels.items()}
    assert per == pytest.approx(expected, rel=1e-12)
    fwd = sum(per[n] for n, k in kernels.items() if k.pass_ == Pass.FWD)
    return fwd, sum(per[n] for n, k in kernels.items() if k.pass_ == Pass.BWD)


def test_eager_squared_relu_launches_pytorchs_kernels():
    kernels = _mlp_act_kernels(eager=True)
    expected = {
        "mlp_act_relu": 2 + 2,  # relu: read, write
        "mlp_act_pow": 2 + 2,  # pow(r, 2): read, write
        "mlp_act_pow_bwd_copy": 2 + 2,  # r.pow(1) is a copy
        "mlp_act_pow_bwd_scale": 2 + 2,  # 2 * r^1
        "mlp_act_pow_bwd": 2 + 2 + 2,  # grad * (2 r): two reads, one write
        "mlp_act_relu_bwd": 2 + 2 + 2,  # threshold_backward(grad, r)
    }
    assert _per_pass(kernels, expected) == (pytest.approx(8), pytest.approx(20))


def test_fused_squared_relu_is_one_kernel_each_way():
    kernels = _mlp_act_kernels(eager=False)
    per = {n: _bytes_per_element(k, TOKENS * FFN) for n, k in kernels.items()}
    assert per == pytest.approx({"mlp_act": 4, "mlp_act_bwd": 6})


def _gated_kernels(eager: bool) -> dict:
    return _mlp_act_kernels(eager, setup_pb2.SWIGLU, setup_pb2.RMSNORM)


def test_eager_swiglu_launches_pytorchs_kernels():
    """silu(gate) * up in plain PyTorch, per element of the activation (the gate_up GEMM's
    output holds two): 5a forward, 13a backward with a = 2 bytes, where the fused kernel
    moves 3a and 5a."""
    kernels = _gated_kernels(eager=True)
    expected = {
        "mlp_act_act": 2 + 2,  # silu(gate): read the gate half, write
        "mlp_act_mul": 2 + 2 + 2,  # s * up: two reads, one write
        "mlp_act_mul_bwd_up": 2 + 2 + 2,  # dy * s: the up half's gradient
        "mlp_act_mul_bwd_act": 2 + 2 + 2,  # dy * up: the activation's gradient
        "mlp_act_act_bwd": 2 + 2 + 2,  # silu_backward(that, gate)
        "mlp_gate_up_grad_sum": 2 + 2 + 4,  # chunk's backward: both halves into one tensor
    }
    assert _per_pass(kernels, expected) == (pytest.approx(10), pytest.approx(26))
    # the ops reading a half of the gate/up output (a sliced view) run strided
    strided = {n for n, k in kernels.items() if k.strided}
    assert strided == {"mlp_act_act", "mlp_act_mul", "mlp_act_mul_bwd_act", "mlp_act_act_bwd"}


def test_fused_swiglu_is_one_kernel_each_way():
    kernels = _gated_kernels(eager=False)
    per = {n: _bytes_per_element(k, TOKENS * FFN) for n, k in kernels.items()}
    assert per == pytest.approx({"mlp_act": 6, "mlp_act_bwd": 10})


def _case(extra: str) -> Case:
    cells = {"id": "X", "kind": "training_step", "extra_params": extra}
    return Case(cells, parse_extra(extra))


def test_rows_name_the_recipes_kernels():
    assert training_kernels(_case("")) == (False, setup_pb2.LOSS_FP32_PASSES)
    assert training_kernels(_case("eager_activation=1;loss_impl=fused")) == (
        True,
        setup_pb2.LOSS_FUSED,
    )
    with pytest.raises(Unmodelable, match="loss_impl=te"):
        training_kernels(_case("loss_impl=te"))


def test_a_squared_relu_row_builds_a_squared_relu_model():
    cells = {"id": "X", "kind": "training_step", "hidden": "4096", "layers": "32"}
    cells |= {"heads": "32", "ffn_hidden": "16384", "vocab": "256000"}
    msg = setup_pb2.Model()
    row_model(Case(cells | {"ffn_kind": "squared_relu"}), msg)
    assert msg.inline.ffn == setup_pb2.SQUARED_RELU
    assert msg.inline.norm == setup_pb2.LAYERNORM
    # Nemotron: no biases, rotary positions (not GPT-2's learned table)
    assert msg.inline.architecture == "" and msg.inline.max_position_embeddings == 0
    gelu = setup_pb2.Model()
    row_model(Case(cells | {"ffn_kind": "gelu", "seq_len": "2048"}), gelu)
    assert (gelu.inline.architecture, gelu.inline.max_position_embeddings) == ("gpt2", 2048)
    with pytest.raises(Unmodelable, match="ffn_kind 'relu'"):
        row_model(Case(cells | {"ffn_kind": "relu"}), setup_pb2.Model())


def _rope_kernels(eager: bool = False, **spec_fields) -> dict:
    s = _setup(eager_rope=eager)
    spec = s.workload.llm_training.model.inline
    spec.name, spec.hidden_size, spec.num_layers = "rope", HIDDEN, 2
    spec.num_heads, spec.intermediate_size, spec.vocab_size = 4, FFN, 1024
    for key, value in spec_fields.items():
        setattr(spec, key, value)
    layer = _phase(s, "layer").graph
    names = ("q_rope", "kv_rope", "q_proj_grad_sum", "kv_proj_grad_sum")
    return {k.name: k for k in layer.kernels if k.name.startswith(names)}


def test_rotary_embedding_reads_and_writes_q_and_kv_each_way():
    """GQA, 4 query heads of 64 over 2 KV heads: q is 256 elements per token, the stacked
    K and V 2 x 2 x 64 = 256. Forward: read x, write the rotation; backward: read the
    gradient, write the input's (the inverse rotation needs no saved input). 2 bytes each."""
    kernels = _rope_kernels(num_kv_heads=2)
    moved = {
        n: sum(k.operand_elements(o) * o.bytes_per_element for o in k.operands)
        for n, k in kernels.items()
    }
    q, kv = TOKENS * 4 * 64, TOKENS * 2 * 2 * 64
    assert moved == {"q_rope": 4 * q, "q_rope_bwd": 4 * q, "kv_rope": 4 * kv, "kv_rope_bwd": 4 * kv}
    assert kernels["q_rope"].flop == 3 * q  # x cos + rotate_half(x) sin
    assert {n: k.pass_ for n, k in kernels.items()} == {
        "q_rope": Pass.FWD,
        "q_rope_bwd": Pass.BWD,
        "kv_rope": Pass.FWD,
        "kv_rope_bwd": Pass.BWD,
    }


def test_learned_positions_have_no_rotary_kernels():
    assert _rope_kernels(architecture="gpt2", max_position_embeddings=TOKENS) == {}


def test_eager_rope_launches_pytorchs_kernels():
    """x cos + cat(-x2, x1) sin in plain PyTorch, per element of q (a = 2 bytes): forward
    neg a/2 + a/2, cat a + a, the two products a + a each, the sum 2a + a = 10a; backward
    dy sin and dy cos a + a each, the negation's gradient a/2 + a/2, the two slice
    gradients a/2 read into a zero-filled whole of a each, and the builder's sum of x's
    three gradients 3a + a = 12a. Strided: every op reading a view of the heads (all but
    the two sums)."""
    kernels = _rope_kernels(eager=True, num_kv_heads=2)
    q = TOKENS * 4 * 64
    per = {n: _bytes_per_element(k, q) for n, k in kernels.items() if n.startswith("q_")}
    expected = {
        "q_rope_neg": 1 + 1,
        "q_rope_cat": 2 + 2,
        "q_rope_cos": 2 + 2,
        "q_rope_sin": 2 + 2,
        "q_rope": 4 + 2,
        "q_rope_bwd_sin": 2 + 2,
        "q_rope_bwd_cos": 2 + 2,
        "q_rope_bwd_neg": 1 + 1,
        "q_rope_bwd_slice1": 1 + 2,
        "q_rope_bwd_slice2": 1 + 2,
        "q_proj_grad_sum": 6 + 2,
    }
    assert per == pytest.approx(expected, rel=1e-12)
    fwd = sum(per[n] for n in expected if kernels[n].pass_ == Pass.FWD)
    bwd = sum(per[n] for n in expected if kernels[n].pass_ == Pass.BWD)
    assert (fwd, bwd) == (pytest.approx(20), pytest.approx(24))  # 10a, 12a
    unstrided = {n for n in expected if not kernels[n].strided}
    assert unstrided == {"q_rope", "q_proj_grad_sum"}
    # the stacked K and V ride together, as the fused kernel's do
    assert {n for n in kernels if n.startswith("kv_rope")} == {
        n.replace("q_", "kv_", 1) for n in expected if n.startswith("q_rope")
    }


def _optimizer_s(tmp_path: Path, cast: bool) -> tuple[float, float]:
    """(the step end's seconds, the parameters) of a small Llama on one H100."""
    model = (
        'inline { name: "cast" architecture: "llama" hidden_size: 256 num_layers: 2 '
        "num_heads: 4 num_kv_heads: 4 intermediate_size: 1024 vocab_size: 1024 "
        "ffn: SWIGLU norm: RMSNORM }"
    )
    text = (
        f"workload {{ llm_training {{ model {{ {model} }} global_batch: 2 micro_batch: 1 "
        f"seq_len: 128 master_grad_cast: {str(cast).lower()} }} }}\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 1 }\n'
    )
    (tmp_path / "setup.txt").write_text(text, encoding="utf-8")
    plan = pipeline.plan(pipeline.load_scenario(tmp_path))
    return plan.optimizer_s, plan.num_params


def test_master_grad_cast_is_an_element_bound_copy_and_a_wider_read(tmp_path):
    """A plain PyTorch loop casts each BF16 gradient to FP32 (read 2, write 4) and the
    update reads the 4-byte copy instead of 2. The cast is PyTorch's unrolled dtype-
    converting copy: one parameter per 1 / 353e9 s (the chip file's strided-elementwise
    rate), above its 6 bytes at H100's achieved copy rate (3.35 TB/s x the fitted dram_util:
    2.1 ns); the wider read adds 2 bytes at that rate. Parameters by hand: per layer q, k,
    v, o 4 x 256^2, gate/up 2 x 256 x 1024, down 1024 x 256, two norms 256 each; embedding
    and untied LM head 1024 x 256 each, the final norm 256."""
    layer = 4 * 256**2 + 2 * 256 * 1024 + 1024 * 256 + 2 * 256
    params = 2 * layer + 2 * 1024 * 256 + 256
    base_s, counted = _optimizer_s(tmp_path, cast=False)
    cast_s, _ = _optimizer_s(tmp_path, cast=True)
    assert counted == params == 2_622_720
    chip = library_system("H100-SXM5-80GB").chip
    achieved_Bps = 3.35e12 * chip.efficiency.dram_util
    assert 6 / achieved_Bps < 1 / 353e9
    assert cast_s - base_s == pytest.approx(params / 353e9 + 2 * params / achieved_Bps, rel=1e-9)
    # the fused update alone: 2 x (2 + 14) bytes per parameter
    assert base_s == pytest.approx(32 * params / achieved_Bps, rel=1e-9)
