"""A loop the host runs right after a sync (MOE_GEMM_PER_EXPERT's per-expert loop) waits on
the host issuing its ops (Execution.host_op_us, Kernel.host_loop_ops)."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.graph import KernelGraph, Pass
from mapshard.fidelity import engines, fit_host_op
from mapshard.fidelity.cases import read_cases
from mapshard.fidelity.fit import library_system
from mapshard.fidelity.fit_training import measured_step_s
from schema import setup_pb2
from solver.cost.kernel_times import HOST_SOURCE
from solver.search import assemble
from solver.search.parallel import Choice
from tests.solver_fixtures import one_kernel_menu

DATA = Path(__file__).parents[1] / "data" / "validation"
PER_EXPERT, GROUPED = setup_pb2.MOE_GEMM_PER_EXPERT, setup_pb2.MOE_GEMM_TORCH_GROUPED
# benchmarks/gpu_moe.moe_ffn's loop body per expert, counted by hand: forward
# `(xe @ w_gu[e].t()).chunk(2)` (1 GEMM), `silu(gate) * up` (2), `@ w_down[e].t()` (1);
# autograd's replay: each GEMM's input and weight gradients (1 + 1 each), the product's two
# gradients and silu's (3), the chunk's gradient, a cat (1, with gate/up's input gradient)
LOOP_OPS = {
    "expert_gate_up": 1,
    "expert_act": 2,
    "expert_down": 1,
    "expert_down_bwd": 1,
    "expert_down_weight_update": 1,
    "expert_act_bwd": 3,
    "expert_gate_up_bwd": 2,
    "expert_gate_up_weight_update": 1,
}
FORWARD = ("expert_gate_up", "expert_act", "expert_down")


def _layer(training: bool, moe_gemm: int, model: str = 'hf_model: "Qwen3-30B-A3B"') -> KernelGraph:
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = "H200-SXM-141GB", 1
    if training:
        t = s.workload.llm_training
        text_format.Parse(model, t.model)
        t.global_batch, t.micro_batch, t.seq_len, t.moe_gemm = 1, 1, 2048, moe_gemm
    else:
        i = s.workload.llm_inference
        text_format.Parse(model, i.model)
        i.phase, i.batch, i.input_len, i.moe_gemm = setup_pb2.PREFILL, 1, 2048, moe_gemm
    w = build_workload(s, Path("setup.txt"), 1)
    return next(p.graph for p in w.phases if any(k.name == "combine" for k in p.graph.kernels))


def _ops(graph: KernelGraph) -> dict[str, int]:
    return {k.name: k.host_loop_ops for k in graph.kernels if k.host_loop_ops}


def test_the_per_expert_loops_kernels_carry_their_ops():
    assert _ops(_layer(True, PER_EXPERT)) == LOOP_OPS
    assert _ops(_layer(False, PER_EXPERT)) == {n: LOOP_OPS[n] for n in FORWARD}
    assert _ops(_layer(True, GROUPED)) == {} == _ops(_layer(False, setup_pb2.MOE_GEMM_GROUPED))


def test_the_eager_activation_issues_the_same_ops_per_expert():
    """With eager_activation the loop's activation is its eager ops, one each (silu, the
    product; the product's two gradients, silu's): 12 ops per expert as without it."""
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    t.model.hf_model = "Qwen3-30B-A3B"
    t.global_batch, t.micro_batch, t.seq_len = 1, 1, 2048
    t.moe_gemm, t.eager_activation = PER_EXPERT, True
    w = build_workload(s, Path("setup.txt"), 1)
    graph = next(p.graph for p in w.phases if any(k.name == "combine" for k in p.graph.kernels))
    ops = _ops(graph)
    eager = ("expert_act_act", "expert_act_mul", "expert_act_mul_bwd_up", "expert_act_mul_bwd_act")
    assert {n: ops.pop(n) for n in (*eager, "expert_act_act_bwd")} == dict.fromkeys(
        (*eager, "expert_act_act_bwd"), 1
    )
    assert ops == {n: v for n, v in LOOP_OPS.items() if not n.startswith("expert_act")}
    assert sum(_ops(graph).values()) == sum(LOOP_OPS.values()) == 12


def _host_system(host_op_s: float):
    system = library_system("H200-SXM-141GB")
    chip = system.chip
    return replace(
        system, chip=replace(chip, efficiency=replace(chip.efficiency, host_op_s=host_op_s))
    )


def test_a_host_paced_kernel_takes_its_ops_at_the_hosts_time():
    """Qwen3-30B-A3B's activation in the loop: 128 experts x 2 ops x 17.2 us = 4,403.2 us,
    its 2.0 us kernel overhead included; the GPU's own time (16,384 copies x 1,536 x 2 B
    in, half that out, ~20 us) is far shorter. Without a host time: the GPU's."""
    act = _layer(True, PER_EXPERT).kernel("expert_act")
    menu = one_kernel_menu(act, _host_system(17.2e-6))
    assert menu.overhead_s == pytest.approx(2.0e-6)
    free = one_kernel_menu(act, _host_system(0.0))
    assert all(o.time_source != HOST_SOURCE and o.compute_s < 50e-6 for o in free.options)
    for o, own in zip(menu.options, free.options, strict=True):
        assert o.time_source == HOST_SOURCE
        assert o.compute_s + menu.overhead_s == pytest.approx(128 * 2 * 17.2e-6, rel=1e-12)
        # the wait beyond the GPU's own work is reported as overhead, as a launch floor is
        assert o.floor_s == pytest.approx(o.compute_s - own.compute_s + own.floor_s, rel=1e-12)


def test_a_random_family_of_per_expert_layers_waits_on_the_host():
    """Inline MoE training layers of random shape, host times of 2-40 us per op: every
    forward loop kernel's options take at least ops x experts x h (overhead included),
    exactly that where the host binds; every other kernel's options (the loop's backward
    among them: no sync before it, `test_the_backward_shows_only_its_host_excess`) are
    those of a host that keeps ahead."""
    rng = random.Random(35)
    bound = free = 0
    for _ in range(10):
        experts, k = rng.choice((8, 16, 32, 64, 128)), rng.choice((1, 2, 4, 8))
        hidden, ffn = 64 * rng.randint(4, 32), 64 * rng.randint(2, 24)
        model = (
            f'inline {{ name: "moe" architecture: "mixtral" hidden_size: {hidden} '
            f"num_layers: 1 num_heads: 4 num_kv_heads: 4 head_dim: 64 intermediate_size: "
            f"{ffn} vocab_size: 1000 ffn: SWIGLU norm: RMSNORM num_experts: {experts} "
            f"experts_per_token: {k} moe_intermediate_size: {ffn} }}"
        )
        layer = _layer(True, PER_EXPERT, model)
        assert _ops(layer) == LOOP_OPS
        h = rng.uniform(2e-6, 40e-6)
        paced, ahead = _host_system(h), _host_system(0.0)
        for kernel in layer.kernels:
            menu, base = one_kernel_menu(kernel, paced), one_kernel_menu(kernel, ahead)
            ops = LOOP_OPS.get(kernel.name, 0) if kernel.name in FORWARD else 0
            if not ops:
                assert menu.options == base.options, kernel.name
                continue
            floor = ops * experts * h
            for o, b in zip(menu.options, base.options, strict=True):
                total = o.compute_s + menu.overhead_s
                assert total >= floor * (1 - 1e-12)
                if o.time_source == HOST_SOURCE:
                    assert total == pytest.approx(floor, rel=1e-12)
                    bound += 1
                else:
                    assert o.compute_s == b.compute_s
                    free += 1
    assert bound and free


def test_the_eager_host_time_is_the_fit_rows_least_error():
    """TORCH_EAGER_HOST_OP_US predicts its FIT rows (M-H200-R004, R008) within 1% each, and
    0.5 us either side is worse on their mean |error|."""
    cases = [c for name in fit_host_op.FIT_FILES for c in read_cases(DATA / name)]
    rows = fit_host_op.host_loop_rows(cases)
    assert {c.id for c in rows} == {"M-H200-R004", "M-H200-R008"}
    where = Path("validate_host_loop")

    def errors(h: float) -> list[float]:
        return [fit_host_op.step_time(c, where, h) / measured_step_s(c) - 1 for c in rows]

    h = engines.TORCH_EAGER_HOST_OP_US
    at = errors(h)
    by_id = dict(zip((c.id for c in rows), at, strict=True))
    assert abs(by_id["M-H200-R008"]) < 0.01
    mean = sum(map(abs, at)) / len(at)
    for other in (h - 0.5, h + 0.5):
        assert sum(map(abs, errors(other))) / len(rows) > mean


def _step(moe_gemm: int):
    s = setup_pb2.Setup()
    s.system.chip, s.system.num_chip = "H200-SXM-141GB", 1
    t = s.workload.llm_training
    t.model.hf_model = "Qwen3-30B-A3B"
    t.global_batch, t.micro_batch, t.seq_len, t.moe_gemm = 2, 1, 4096, moe_gemm
    return build_workload(s, Path("setup.txt"), 1)


def test_the_backward_shows_only_its_host_excess():
    """Qwen3-30B-A3B (48 layers, 128 experts) with the per-expert loop, one chip, 2
    micro-batches of one sequence, h = 30 us per op. The host issues per layer the loop's
    backward, 8 ops per expert (LOOP_OPS less FORWARD) x 128 = 1,024, plus one op per
    launch of the graph's backward kernels; the forward loop's 4 x 128 = 512 ops per layer
    pace their own kernels.
    With the GPU's work at 0 s the backward's host time shows whole; with the layer at 1 s
    (backward 1 - f of it, far more than ~32 ms of ops) none does; in between the step
    never falls as the GPU's work grows (a bound on the latencies stays a bound)."""
    w = _step(PER_EXPERT)
    choice = Choice((("DP", 1), ("PP", 1), ("TP", 1)), (), ())
    h = 30e-6
    kernels = {p.name: p.graph.kernels for p in w.phases}
    launches = sum(
        p.count * sum(k.launches for k in p.graph.kernels if k.pass_ in (Pass.BWD, Pass.WGRAD))
        for p in w.phases
    )
    backward_ops = 48 * 1024 + launches
    assert sum(LOOP_OPS.values()) - sum(LOOP_OPS[n] for n in FORWARD) == 8
    zero = dict.fromkeys(kernels, 0.0)
    idle = assemble.training_times(w, choice, zero, 4.8e12, host_op_s=h)
    ahead = assemble.training_times(w, choice, zero, 4.8e12)
    exposed = dict(idle.breakdown)["host_exposed"]
    assert exposed == pytest.approx(2 * backward_ops * h, rel=1e-12)
    assert idle.iteration_time_s == pytest.approx(ahead.iteration_time_s + exposed, rel=1e-12)
    busy = {name: 1.0 for name in kernels}
    assert assemble.training_times(w, choice, busy, 4.8e12, host_op_s=h).iteration_time_s == (
        assemble.training_times(w, choice, busy, 4.8e12).iteration_time_s
    )
    # a layer of 0-100 ms: the backward's GPU time grows from nothing past the ~1.5 s of
    # ops the host issues (about 60 ms a layer), so the exposure goes from whole to none
    rng = random.Random(39)
    last, partial = 0.0, 0
    for scale in sorted(rng.uniform(0.0, 0.1) for _ in range(60)):
        lat = {name: scale * (1 + 0.1 * i) for i, name in enumerate(kernels)}
        step = assemble.training_times(w, choice, lat, 4.8e12, host_op_s=h)
        assert step.iteration_time_s >= last
        last = step.iteration_time_s
        partial += 0 < dict(step.breakdown).get("host_exposed", 0.0) < exposed
    assert partial >= 10
    grouped = _step(GROUPED)  # no loop: one op per backward kernel only
    g_launches = sum(
        p.count * sum(k.launches for k in p.graph.kernels if k.pass_ in (Pass.BWD, Pass.WGRAD))
        for p in grouped.phases
    )
    g_zero = {p.name: 0.0 for p in grouped.phases}
    g_idle = assemble.training_times(grouped, choice, g_zero, 4.8e12, host_op_s=h)
    assert dict(g_idle.breakdown)["host_exposed"] == pytest.approx(2 * g_launches * h, rel=1e-12)


def _backward_launches(workload, role: str) -> int:
    """Launches of the backward kernels of the phases of `role`, one instance each."""
    return sum(
        k.launches
        for p in workload.phases
        if p.role == role
        for k in p.graph.kernels
        if k.pass_ in (Pass.BWD, Pass.WGRAD)
    )


def test_a_random_family_of_steps_exposes_the_hand_counted_backward():
    """Inline MoE models of random shape (2-6 layers, 8-64 experts), TP 1-4, PP 1 or 2,
    1-3 micro-batches, h of 5-40 us, every graph's latency 0 (the GPU never busy): the
    step carries exactly its backward's ops on the busiest stage, counted by hand: per layer
    8 loop ops per expert on the chip (ceil(experts / TP)) plus one per launch of the
    layer's backward kernels; PP 2 halves the (even) layers and keeps the larger of the
    embedding's and the head's backward, PP 1 adds both."""
    rng = random.Random(3935)
    for _ in range(12):
        layers, experts = rng.choice((2, 4, 6)), rng.choice((8, 16, 32, 64))
        tp, pp, m = rng.choice((1, 2, 4)), rng.choice((1, 2)), rng.randint(1, 3)
        h = rng.uniform(5e-6, 40e-6)
        s = setup_pb2.Setup()
        s.system.chip, s.system.num_chip = "H200-SXM-141GB", 1
        t = s.workload.llm_training
        text_format.Parse(
            f'inline {{ name: "moe" architecture: "mixtral" hidden_size: 512 '
            f"num_layers: {layers} num_heads: 4 num_kv_heads: 4 head_dim: 64 "
            f"intermediate_size: 256 vocab_size: 1000 ffn: SWIGLU norm: RMSNORM num_experts: "
            f"{experts} experts_per_token: 2 moe_intermediate_size: 256 }}",
            t.model,
        )
        t.global_batch, t.micro_batch, t.seq_len, t.moe_gemm = m, 1, 256, PER_EXPERT
        w = build_workload(s, Path("setup.txt"), 1)

        layer_phases = [p for p in w.phases if p.role == "layer"]
        assert sum(p.count for p in layer_phases) == layers
        per_layer = _backward_launches(w, "layer") / len(layer_phases) + 8 * -(-experts // tp)
        embed, head = _backward_launches(w, "embed"), _backward_launches(w, "head")
        if pp == 1:
            ops = layers * per_layer + embed + head
        else:
            ops = layers // 2 * per_layer + max(embed, head)
        choice = Choice((("DP", 1), ("PP", pp), ("TP", tp)), (), ())
        zero = {p.name: 0.0 for p in w.phases}
        step = assemble.training_times(w, choice, zero, 4.8e12, host_op_s=h)
        assert dict(step.breakdown)["host_exposed"] == pytest.approx(m * ops * h, rel=1e-9)
