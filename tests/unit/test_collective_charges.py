"""Where collectives are charged: per produced tensor and layout, per step for weight
gradients, across the boundary of a repeated layer. Numbers by hand."""

from __future__ import annotations

import math

import pytest
from solver_fixtures import elementwise, gemm, small_system, tp2_problem

from generator.build import build_workload
from generator.graph import Edge, Kernel, KernelGraph, KernelKind, Operand, OperandRole, Pass
from schema import setup_pb2
from solver.check import brute_force, config_cost, mapping_cost
from solver.cost.menus import build_problem
from solver.cost.problem import config_rank
from solver.fusion.solve import solve_graph
from solver.options import SolverOptions

T, H = 4096, 1024  # tokens, hidden


def norm_wgrad() -> Kernel:
    """dgamma[h] = sum over tokens of dy[t, h] * xhat[t, h]: the LayerNorm weight gradient."""
    return Kernel(
        name="ln_weight_update",
        kind=KernelKind.NORM,
        dims=(("t", T), ("h", H)),
        operands=(
            Operand("dy", OperandRole.INPUT, ("t", "h"), 2),
            Operand("in", OperandRole.INPUT, ("t", "h"), 2),
            Operand("dweight", OperandRole.OUTPUT, ("h",), 2),
        ),
        flop=2.0 * T * H,
        pass_=Pass.WGRAD,
        shardable_dims=("t",),
    )


def _solve_equals_brute_force(problem):
    """The MILP's optimum equals exhaustive enumeration, and its plan re-prices to it."""
    solution = solve_graph(problem, SolverOptions(gap=0.0))
    best, _, _ = brute_force(problem)
    assert math.isclose(solution.objective_s, best, rel_tol=1e-6)
    recheck, _ = mapping_cost(problem, solution.configs, solution.choice)
    assert math.isclose(recheck, solution.objective_s, rel_tol=1e-6)
    return solution


def _problem(graph, system, micro_batches=1, tp=2):
    span = [(system.network[0], tp)]
    return build_problem(
        graph,
        system.chip,
        system.dram.bandwidth_Bps,
        tp,
        span,
        {"tp": span},
        "bf16",
        dataflow=False,
        overlap=True,
        max_configs=0,
        micro_batches=micro_batches,
    )


def test_sequence_parallel_norm_gradient_is_all_reduced_once_per_step():
    system = small_system(num_chips=2, link_Bps=5e9)  # ring of 2, 5 GB/s, 1 us per step
    graph = KernelGraph("g", (norm_wgrad(),))
    # the all-reduce of dgamma (1024 x 2 B) over 2 chips: 2 x 1/2 x 2048 B / 5 GB/s + 2 x 1 us
    full = 2048 / 5e9 + 2e-6
    per_mb = _problem(graph, system, micro_batches=1).kernels[0]
    per_step = _problem(graph, system, micro_batches=8).kernels[0]
    (ar,) = [o for o in per_mb.options if o.sharding == "t"]
    assert ar.network_s == pytest.approx(full)
    (ar8,) = [o for o in per_step.options if o.sharding == "t"]
    # 8 micro-batches share one all-reduce: each instance carries 1/8 of it
    assert ar8.network_s == pytest.approx(full / 8)
    assert ar8.network_bytes == pytest.approx(2048 / 8)
    # reduce-scattered gradient (1/2 x 2048 B / 5 GB/s + 1 us), likewise once per step
    (rs8,) = [o for o in per_step.options if o.sharding == "t+rs"]
    assert rs8.network_s == pytest.approx((1024 / 5e9 + 1e-6) / 8)
    # replicated options have no reduction to defer
    for a, b in zip(per_mb.options, per_step.options):
        if a.sharding.split("+")[0] != "t":
            assert a.network_s == b.network_s


def test_layer_graph_carries_its_output_into_the_next_instance():
    from pathlib import Path

    from google.protobuf import text_format

    text = (
        'workload { llm_training { model { hf_model: "GPT-3-175B-gpt2style" } '
        "global_batch: 4 seq_len: 128 recompute: RECOMPUTE_FULL } }"
    )
    w = build_workload(text_format.Parse(text, setup_pb2.Setup()), Path("setup.txt"), 1)
    layer = next(p for p in w.phases if p.role == "layer").graph
    pairs = {(e.src, e.dst, e.dst_operand) for e in layer.boundary}
    # forward: the last residual add feeds every reader of the next layer's input (its first
    # norm and its residual add); backward: the input gradient (sum of the norm's and the
    # residual's) feeds every reader of the previous layer's output gradient: the last
    # GEMM's input gradient and weight gradient and the residual's gradient sum
    assert pairs == {
        ("mlp_residual", "attn_norm", "in"),
        ("mlp_residual", "attn_residual", "in2"),
        ("input_grad_sum", "mlp_down_bwd", "dy"),
        ("input_grad_sum", "mlp_down_weight_update", "dy"),
        ("input_grad_sum", "attn_residual_grad_sum", "in1"),
    }
    for e in layer.boundary:
        forward = layer.kernel(e.src).pass_ == Pass.FWD
        assert forward == (layer.kernel(e.dst).pass_ == Pass.FWD)
        assert e.tensor_bytes == 128 * 12288 * 2  # tokens x hidden, 2-byte activations


def _chain_with_boundary() -> KernelGraph:
    up = gemm("up", 256, 128, 128, a_dims=("t", "h"))  # c[t, up_o]
    down = gemm("down", 256, 128, 128, a_dims=("t", "up_o"))  # c[t, down_o]
    edges = (Edge("up", "down", "a", "", (), 256 * 128 * 2),)
    # down's output is the next instance's `a` of up (dims t, down_o -> t, h)
    wrap = (Edge("down", "up", "a", "", (("t", "t"), ("down_o", "h")), 256 * 128 * 2),)
    return KernelGraph("layer", (up, down), edges, wrap)


def test_boundary_edge_is_charged_at_its_consumer_and_never_fuses():

    system = small_system(num_chips=2, link_Bps=5e9)
    problem = _problem(_chain_with_boundary(), system)
    (wrap,) = [e for e in problem.edges if e.wrap]
    assert (wrap.src, wrap.dst) == (1, 0)
    assert problem.in_edges(0) == [] and problem.out_edges(1) == []
    assert problem.conv_in_edges(0) == [wrap]
    up, down = problem.kernels
    # down split on t (its output [t, down_o] split on t) into up replicated: all-gather of
    # 64 KiB over 2 chips, 1/2 x 65536 B / 5 GB/s + 1 step of 1 us
    a = down.shardings.index("t")
    b = up.shardings.index("none")
    assert wrap.conv[a][b] == pytest.approx(0.5 * 65536 / 5e9 + 1e-6)
    # ... and into up split on t: nothing to convert
    assert wrap.conv[a][up.shardings.index("t")] == 0.0
    # the configuration of `up` pays it; `down`'s does not
    ca = [o for o, opt in enumerate(down.options) if opt.sharding == "t"][0]
    cb = [o for o, opt in enumerate(up.options) if opt.sharding == "none"][0]
    with_wrap = config_cost(problem, [0], [cb, ca]).network_s
    assert with_wrap == pytest.approx(up.options[cb].network_s + wrap.conv[a][b])


@pytest.mark.parametrize("dataflow", [False, True])
def test_milp_with_a_boundary_edge_equals_brute_force(dataflow):
    system = small_system(num_chips=2, sram_bytes=3e4, link_Bps=1e9)
    problem = tp2_problem(
        _chain_with_boundary(),
        system,
        dataflow=dataflow,
        overlap=True,
        max_configs=2,
        tiling_points=2,
    )
    _solve_equals_brute_force(problem)


def _qkv_graph(pinned: str = "") -> KernelGraph:
    """A norm's output [t, h] read whole by three projections (split q, k, v); pinned: the
    norm split on tokens (sequence parallel) and the projections column-parallel."""
    from dataclasses import replace

    ln = elementwise("ln", 256, 128, dims=("t", "h"))
    projs = [gemm(n, 256, 128, 64, a_dims=("t", "h")) for n in ("q", "k", "v")]
    if pinned:  # "all": every projection column-parallel; "kv": q split on tokens
        ln = replace(ln, pinned_sharding="t")
        projs = [replace(p, pinned_sharding=f"{p.name}_o") for p in projs]
        if pinned == "kv":
            projs[0] = replace(projs[0], pinned_sharding="t")
    edges = tuple(Edge("ln", n, "a", "", (), 256 * 128 * 2) for n in ("q", "k", "v"))
    return KernelGraph("attn_in", (ln, *projs), edges)


def test_split_qkv_projections_pay_one_gather_of_their_shared_input():
    system = small_system(num_chips=2, link_Bps=5e9)
    problem = _problem(_qkv_graph(), system)
    groups = {e.group for e in problem.edges}
    assert len(groups) == 1 and -1 not in groups
    at = {m.name: i for i, m in enumerate(problem.kernels)}
    into = {problem.kernels[e.dst].name: i for i, e in enumerate(problem.edges)}
    # ln split on tokens, every projection column-parallel (split on its output dim, so
    # it needs the whole [t, h] input): one all-gather of 64 KiB, 1/2 x 65536 / 5e9 + 1 us
    want = {"ln": "t", "q": "q_o", "k": "k_o", "v": "v_o"}
    choice = [0] * 4
    for name, s in want.items():
        menu = problem.kernels[at[name]]
        choice[at[name]] = next(o for o, x in enumerate(menu.options) if x.sharding == s)
    gather = 0.5 * 65536 / 5e9 + 1e-6
    sharding = [problem.kernels[k].sharding_index(choice[k]) for k in range(4)]
    charges = problem.edge_charges(sharding)
    first = min(("q", "k", "v"), key=at.__getitem__)  # the projection that runs first pays
    assert charges[into[first]] == pytest.approx(gather) and sum(charges) == pytest.approx(gather)
    net = config_cost(problem, [0, 1, 2, 3], choice).network_s
    own = sum(problem.kernels[k].options[choice[k]].network_s for k in range(4))
    assert net == pytest.approx(own + gather)  # not 3 x gather
    # q needs the whole input, k and v a token split (= ln's own layout): still one gather
    for name in ("k", "v"):
        menu = problem.kernels[at[name]]
        choice[at[name]] = next(o for o, x in enumerate(menu.options) if x.sharding == "t")
    sharding = [problem.kernels[k].sharding_index(choice[k]) for k in range(4)]
    assert sum(problem.edge_charges(sharding)) == pytest.approx(gather)


@pytest.mark.parametrize("pinned", ["", "all", "kv"])
@pytest.mark.parametrize("dataflow", [False, True])
@pytest.mark.parametrize("link", [1e8, 1e10])
@pytest.mark.parametrize("overlap", [False, True])
def test_milp_with_a_conversion_group_equals_brute_force(overlap, dataflow, link, pinned):
    system = small_system(num_chips=2, sram_bytes=3e4, link_Bps=link)
    problem = tp2_problem(
        _qkv_graph(pinned),
        system,
        dataflow=dataflow,
        overlap=overlap,
        max_configs=2,
        tiling_points=2,
    )
    solution = _solve_equals_brute_force(problem)
    if pinned:  # the conversion is forced: one all-gather in the plan, not three, paid
        # by the first consumer that needs it (q; k or v, whichever runs first, when only
        # they need it)
        sharding = [m.sharding_index(o) for m, o in zip(problem.kernels, solution.choice)]
        rank = config_rank(len(problem.kernels), solution.configs)
        charges = problem.edge_charges(sharding, rank)
        gather = 0.5 * 65536 / link + 1e-6
        assert sum(charges) == pytest.approx(gather)
        names = ("q", "k", "v") if pinned == "all" else ("k", "v")
        needing = [i for i, e in enumerate(problem.edges) if problem.kernels[e.dst].name in names]
        paid = [i for i in needing if charges[i] > 0]
        first = min(rank[problem.edges[i].dst] for i in needing)
        assert len(paid) == 1 and rank[problem.edges[paid[0]].dst] == first
        assert charges[paid[0]] == pytest.approx(gather)
