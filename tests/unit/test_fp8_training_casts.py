"""FP8 training's quantisation kernels (generator/ops_fp8.py): every 16-bit input of an FP8
linear layer (once per tensor) and every output gradient is read twice (amax, then cast) and
written twice in FP8 (as is and transposed): 6 bytes per element, in two kernels each. The
numbers below are counted by hand from Llama-3.1-8B's shapes, not read back from the code."""

from __future__ import annotations

from pathlib import Path

from generator.build import build_workload
from generator.graph import Pass, Workload
from schema import setup_pb2

T = 128  # tokens of one micro-batch (1 x 128)
H, KV, F = 4096, 2 * 8 * 128, 14336  # Llama-3.1-8B: hidden, K+V width (8 KV heads x 128), ffn


def _training(math: int, phase: int | None = None) -> Workload:
    s = setup_pb2.Setup()
    if phase is None:
        t = s.workload.llm_training
        t.model.hf_model = "Llama-3.1-8B"
        t.global_batch, t.micro_batch, t.seq_len = 1, 1, T
        t.recompute = setup_pb2.RECOMPUTE_NONE
    else:
        i = s.workload.llm_inference
        i.model.hf_model = "Llama-3.1-8B"
        i.phase, i.batch, i.input_len = phase, 1, T
    s.workload.precision.math = math
    return build_workload(s, Path("setup.txt"), 1)


def _casts(w: Workload) -> list:
    layer = w.phases[0].graph
    return [k for k in layer.kernels if k.name.endswith(("_amax", "_cast"))]


def test_fp8_training_casts_every_gemm_input_and_output_gradient_once():
    casts = _casts(_training(setup_pb2.FP8))
    fwd = {k.name for k in casts if k.pass_ == Pass.FWD}
    bwd = {k.name for k in casts if k.pass_ == Pass.BWD}
    # forward: the attention norm's output (read by q_proj and kv_proj: one cast), the
    # attention output, the MLP norm's output, the SwiGLU output
    inputs = ("q_proj_in", "o_proj_in", "mlp_gate_up_in", "mlp_down_in")
    assert fwd == {f"{n}_{s}" for n in inputs for s in ("amax", "cast")}
    grads = ("q_proj_grad", "kv_proj_grad", "o_proj_grad", "mlp_gate_up_grad", "mlp_down_grad")
    assert bwd == {f"{n}_{s}" for n in grads for s in ("amax", "cast")}
    # DRAM bytes: 6 per element of each cast tensor, + the 4-byte scale written by the amax
    # kernel and read by the cast kernel
    fwd_elements = T * (H + H + H + F)  # 128 x 26624
    bwd_elements = T * (H + KV + H + 2 * F + H)  # 128 x 43008
    scales = 9 * (4 + 4)
    expected = 6 * (fwd_elements + bwd_elements) + scales
    assert expected == 53_477_448
    got = sum(k.operand_bytes(op) for k in casts for op in k.operands)
    assert got == expected


def test_fp8_gemms_read_one_byte_operands_and_16_bit_training_has_no_casts():
    layer = _training(setup_pb2.FP8).phases[0].graph

    def bpe(kernel: str, operand: str) -> float:
        k = layer.kernel(kernel)
        return next(op.bytes_per_element for op in k.operands if op.name == operand)

    assert bpe("q_proj", "in") == 1 and bpe("q_proj", "out") == 2
    assert bpe("q_proj_bwd", "dy") == 1 and bpe("q_proj_bwd", "dx") == 2
    assert bpe("q_proj_weight_update", "in") == 1 and bpe("q_proj_weight_update", "dy") == 1
    assert _casts(_training(setup_pb2.BF16)) == []
    # inference engines fuse the activation quantisation into the producing kernel
    assert _casts(_training(setup_pb2.FP8, phase=setup_pb2.PREFILL)) == []
