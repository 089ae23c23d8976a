"""FP8 training's quantisation kernels (generator/ops_fp8.py): every 16-bit input of an FP8
linear layer (once per tensor) and every output gradient is read twice (amax, then cast) and
written twice in FP8 (as is and transposed): 6 bytes per element, in two kernels each. The
numbers below are counted by hand from Llama-3.1-8B's shapes, not read back from the code."""

from __future__ import annotations

from pathlib import Path

import pytest
from training_fixtures import tiny_training

from generator.build import build_workload
from generator.builder import GraphBuilder
from generator.graph import Pass, Workload
from generator.ops import linear
from mapshard import pipeline
from mapshard.fidelity.cases import read_cases
from mapshard.fidelity.fit_training import fit_plateau
from mapshard.fidelity.scenarios import build_setup
from schema import setup_pb2
from solver.cost.efficiency import for_precision
from solver.cost.menus import _compute_time
from solver.search import assemble
from solver.search.activations import Layout, kept_bytes
from solver.search.parallel import Choice

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


def test_fp8_training_backward_gemms_split_accumulate():
    """Transformer Engine: forward GEMMs with fast accumulation, dgrad and wgrad split."""
    w = _training(setup_pb2.FP8)
    layer = w.phases[0].graph
    split = {k.name for k in layer.kernels if k.split_accumulate}
    linears = ("q_proj", "kv_proj", "o_proj", "mlp_gate_up", "mlp_down")
    assert split == {f"{n}_{s}" for n in linears for s in ("bwd", "weight_update")}
    head = w.phases[-1].graph  # the 16-bit LM head: no FP8 GEMM, no split accumulation
    assert not any(k.split_accumulate for k in head.kernels)
    assert not any(k.split_accumulate for k in _training(setup_pb2.BF16).phases[0].graph.kernels)


def _chip(name: str):
    s = setup_pb2.Setup()
    s.workload.gemm.M = s.workload.gemm.K = s.workload.gemm.N = 64
    s.system.chip, s.system.num_chip = name, 1
    return for_precision(pipeline.resolve(pipeline.load_message(s, Path("."))).chip, "fp8")


def test_split_accumulation_prices_at_its_own_fp8_plateau():
    """H100: FP8 plateau 0.694, split-accumulation plateau 0.50 (chip file). A 4096^3 FP8
    GEMM: 2 x 4096^3 = 1.374e11 FLOP; 128x256 tiles: 32 x 16 = 512 tiles on 132 SMs in
    4 waves, occupancy 512 / (4 x 132) = 0.9697; fast accumulation
    1.374e11 / (1978.9e12 x 0.694 x 0.9697) = 103.2 us, split 0.694 / 0.50 = 1.388x that.
    B200 has no fast-accumulation mode to lose: no split plateau, same time both ways."""
    from dataclasses import replace

    b = GraphBuilder("g")
    T, H, F = ("tokens", 4096), ("hidden", 4096), ("ffn", 4096)
    x = b.input((T, H), 1)
    linear(b, "p", x, (T, H), (H, F), (T, F), wbpe=1, abpe=2)
    fast = b.graph().kernel("p")
    split = replace(fast, split_accumulate=True)
    sizes = dict(fast.dims)
    h100 = _chip("H100-SXM5-80GB")
    flop = 2 * 4096**3
    t_fast = _compute_time(fast, h100, sizes, flop, "fp8")
    assert t_fast == pytest.approx(flop / (1978.9e12 * 0.694 * 512 / (4 * 132)))
    assert t_fast == pytest.approx(103.2e-6, rel=1e-3)
    assert _compute_time(split, h100, sizes, flop, "fp8") == pytest.approx(t_fast * 0.694 / 0.50)
    # a BF16 GEMM flagged split (not an FP8 kernel) keeps its time
    assert _compute_time(split, h100, sizes, flop, "bf16") == _compute_time(
        fast, h100, sizes, flop, "bf16"
    )
    # a GEMM with a bias (two outputs: GPT's wgrad writes dW and db) takes the matrix
    # kernels' branch, at the 16k-cube efficiency: the same 0.694 / 0.50 slowdown
    wide = replace(fast, operands=(*fast.operands, replace(fast.outputs[0], name="db")))
    assert _compute_time(replace(wide, split_accumulate=True), h100, sizes, flop, "fp8") == (
        pytest.approx(_compute_time(wide, h100, sizes, flop, "fp8") * 0.694 / 0.50)
    )
    b200 = _chip("B200")
    assert _compute_time(split, b200, sizes, flop, "fp8") == _compute_time(
        fast, b200, sizes, flop, "fp8"
    )


def test_fit_plateau_takes_the_least_mean_relative_error():
    """Rows at 0.5 / u and 0.6 / u seconds, both measured at 1 s: mean |err| 0.100 at u=0.5,
    (0.0909 + 0.0909) / 2 = 0.0909 at 0.55, (0.1667 + 0) / 2 = 0.0833 at 0.6: u = 0.6."""
    fit = fit_plateau(
        lambda u, h: [0.5 / u, 0.6 / u], [1.0, 1.0], ["a", "b"], (0.5, 0.55, 0.6), (0.0,)
    )
    assert fit.util == 0.6
    assert fit.mean_abs_err == pytest.approx((1 / 6) / 2)
    assert fit.max_abs_err == pytest.approx(1 / 6)
    assert fit.rows == ("a", "b")


def test_fit_plateau_and_hidden_share_together():
    """Row a (no TP overlap) takes 0.5 / u s, measured 1 s; row b (TP overlap) takes
    0.5 / u + 0.4 (1 - h) s, measured 1.2 s. Only u = 0.5 fits a (u = 0.6: |0.833 - 1| =
    0.167); then b = 1 + 0.4 (1 - h) = 1.2 at h = 0.5, exact: mean 0 at (0.5, 0.5), where h = 0
    leaves b 1.4 / 1.2 - 1 = 0.167 and h = 1 leaves 1 / 1.2 - 1 = -0.167."""
    fit = fit_plateau(
        lambda u, h: [0.5 / u, 0.5 / u + 0.4 * (1 - h)],
        [1.0, 1.2],
        ["a", "b"],
        (0.5, 0.6),
        (0.0, 0.5, 1.0),
    )
    assert (fit.util, fit.hidden) == (0.5, 0.5)
    assert fit.mean_abs_err == pytest.approx(0.0, abs=1e-12)


def _tiny(math: int) -> Workload:
    """tests/training_fixtures.tiny_training at a math precision: 4 layers, hidden 256, 4
    heads of 64 (MHA), SwiGLU 512, 2 x 128 = 256 tokens per micro-batch, no recompute."""
    return tiny_training(math=math, recompute=setup_pb2.RECOMPUTE_NONE)


def test_saved_activations_keep_what_the_backward_reads():
    """Per layer and micro-batch, T = 256 tokens, h = 256 (2 bytes each unless FP8):
    BF16: layer input 2Th, norm outputs 2 x 2Th (wgrad inputs), q 2Th and K/V 2 x 2Th
    (attention backward), attention output 2Th, residual 2Th (MLP norm backward), gate/up
    2 x 2 x 512 T, SwiGLU output 2 x 512 T; the output projections' results feed only the
    residual adds and are freed: 1,835,008 bytes. FP8: the norm and SwiGLU outputs are read
    only by their casts, so each is kept as its 1-byte FP8 copy (the wgrad input), as is
    the attention output's cast beside the 16-bit output the attention backward reads:
    1,835,008 - 2 x 2Th - 2 x 512 T + (3 x Th + 512 T) = 1,638,400 bytes."""
    Th = 256 * 256
    bf16 = _tiny(setup_pb2.BF16)
    want = 2 * Th + 2 * 2 * Th + 2 * Th + 2 * 2 * Th + 2 * Th + 2 * Th + 4 * 512 * 256
    want += 2 * 512 * 256
    assert want == 1_835_008
    assert kept_bytes(bf16, bf16.phases[0], Layout(1)) == want
    fp8 = _tiny(setup_pb2.FP8)
    want8 = want - 2 * 2 * Th - 2 * 512 * 256 + 3 * Th + 512 * 256
    assert want8 == 1_638_400
    assert kept_bytes(fp8, fp8.phases[0], Layout(1)) == want8


def test_fp8_training_rows_keep_16_bit_parameters():
    """Transformer Engine trains with BF16 parameters (and gradients) and casts FP8 weight
    copies for its GEMMs; FP8 inference engines store FP8 weights."""
    data = Path(__file__).parents[1] / "data" / "validation" / "validation_public_fit.csv"
    cases = {c.id: c for c in read_cases(data)}
    train = build_setup(cases["P-NEM05"])[0].workload.precision
    assert (train.math, train.weight, train.activation) == (
        setup_pb2.FP8,
        setup_pb2.BF16,
        setup_pb2.BF16,
    )
    infer = build_setup(cases["P-TRT01"])[0].workload.precision  # TensorRT-LLM FP8 engine
    assert (infer.math, infer.weight) == (setup_pb2.FP8, setup_pb2.FP8)


def test_fp8_weight_copies_are_cast_once_per_step():
    """The tiny model's FP8 GEMM weights per layer: q 256x256 + K/V 256x512 + o 256x256 +
    gate/up 256x1024 + down 512x256 = 655,360 elements, x 4 layers = 2,621,440 (norms, the
    embedding and the 16-bit LM head are not cast). BF16 weights: 2 x 2 + 2 x 1 = 6 bytes per
    element once per step (8 micro-batches share the copies): 15,728,640 bytes, at 1 TB/s
    15.73 us, part of the step-end time with the optimizer."""
    choice = Choice(degrees=(("TP", 1), ("PP", 1), ("DP", 1)), spans=(), levels=())
    latency = {"layer": 1e-3, "embed": 0.0, "head": 1e-3}
    fp8 = assemble.training_times(_tiny(setup_pb2.FP8), choice, latency, 1e12)
    assert 6 * 4 * (65536 + 131072 + 65536 + 262144 + 131072) == 15_728_640
    cast = dict(fp8.breakdown)["fp8_weight_cast"]
    assert cast == pytest.approx(15_728_640 / 1e12)
    assert fp8.optimizer_s == pytest.approx(dict(fp8.breakdown)["optimizer"] + cast)
    assert fp8.iteration_time_s == pytest.approx(sum(v for _, v in fp8.breakdown))
    bf16 = assemble.training_times(_tiny(setup_pb2.BF16), choice, latency, 1e12)
    assert "fp8_weight_cast" not in dict(bf16.breakdown)


def test_fp8_parameter_all_gather_moves_one_byte_per_fp8_weight():
    """With fp8_param_gather and ZeRO-1 over 4 DP ranks: the 2,621,440 FP8 GEMM weight
    elements (above) gather at 1 byte, the other 514,304 parameters (8 RMSNorms of 256, the
    final norm, the 1000 x 256 embedding and LM head) at 2: 3,650,048 bytes for 3,135,744
    parameters. The cast: each rank's quarter at 2 + 2 + 1 bytes (amax read, cast read, FP8
    write), and every element's transpose at 1 + 1: 3,276,800 + 5,242,880 bytes."""
    from dataclasses import replace

    workload = replace(_tiny(setup_pb2.FP8), fp8_param_gather=True, zero_stage=1)
    params = 4 * (655_360 + 2 * 256) + 2 * 1000 * 256 + 256
    assert workload.model.num_params == params == 3_135_744
    choice = Choice(degrees=(("TP", 1), ("PP", 1), ("DP", 4)), spans=(), levels=())
    per_param = assemble.gathered_bytes_per_param(workload, choice)
    assert per_param * params == pytest.approx(2_621_440 * 1 + (params - 2_621_440) * 2)
    cast = assemble.fp8_weight_cast_s(workload, 1, 8, 1e12, 4.0)
    assert cast == pytest.approx((2_621_440 / 4 * 5 + 2_621_440 * 2) / 1e12)
    # one data rank (nothing gathered) or no ZeRO: 16-bit gathers, the whole-copy cast
    single = Choice(degrees=(("TP", 1), ("PP", 1), ("DP", 1)), spans=(), levels=())
    assert assemble.gathered_bytes_per_param(workload, single) == 2.0
    assert assemble.fp8_gathered_shard(replace(workload, zero_stage=0), choice) == 0.0
