"""DP gradient synchronisation and ZeRO stages against times derived by hand.

One switch level of 8 chips at 100 GB/s per chip, no latency: an all-gather or a
reduce-scatter of S bytes takes 7/8 * S / 1e11 s, an all-reduce twice that
(DESIGN.md, Collectives). 1e9 parameters in BF16: P = G = 2e9 bytes.
"""

from __future__ import annotations

import pytest
from training_fixtures import tiny_training

from generator.build import build_workload
from generator.graph import Workload
from hardware.system import NetworkLevel, Topology
from schema import setup_pb2
from solver.cost.latency import exposed_under
from solver.search import assemble, footprint
from solver.search.context_parallel import ring_exposed_s
from solver.search.data_parallel import BUCKET_BYTES, dp_sync
from solver.search.parallel import Choice

SW = NetworkLevel("sw", Topology.SWITCH, 8, 100e9, parallelism=("DP",))
SPAN = ((SW, 8),)
P = G = 2e9
AG = 7 / 8 * 2e9 / 1e11  # 17.5 ms: one all-gather (or reduce-scatter) of 2 GB
AR = 2 * AG  # 35 ms


def test_ddp_all_reduce_hides_under_backward_except_its_excess():
    # backward 20 ms: 35 - 20 = 15 ms exposed
    assert dp_sync(0, SPAN, G, P, 0.01, 0.02, 4).exposed_s == pytest.approx(0.015)
    # backward 50 ms: only the last 25 MiB bucket: 2 * 7/8 * 26214400 / 1e11
    last = 2 * 7 / 8 * 26214400 / 1e11
    assert dp_sync(0, SPAN, G, P, 0.01, 0.05, 4).exposed_s == pytest.approx(last)
    assert dp_sync(0, SPAN, G, P, 0.01, 0.05, 4).total_s == pytest.approx(AR)


def test_zero1_reduce_scatter_and_parameter_all_gather_once_per_step():
    # reduce-scatter 17.5 ms under a 20 ms backward: one 25 MiB bucket, 7/8*26214400/1e11
    bucket = 7 / 8 * BUCKET_BYTES / 1e11
    # all-gather 17.5 ms under a 10 ms forward: 7.5 ms exposed
    s = dp_sync(1, SPAN, G, P, 0.01, 0.02, 4)
    assert s.exposed_s == pytest.approx(bucket + 0.0075)
    assert s.total_s == pytest.approx(2 * AG)  # RS + AG = one all-reduce's traffic


def test_zero2_reduces_every_micro_batch():
    bucket = 7 / 8 * BUCKET_BYTES / 1e11
    s = dp_sync(2, SPAN, G, P, 0.01, 0.02, 4)
    assert s.exposed_s == pytest.approx(4 * bucket + 0.0075)
    assert s.total_s == pytest.approx(4 * AG + AG)


def test_zero3_gathers_parameters_twice_per_micro_batch():
    # per micro-batch: forward AG 17.5 ms under 10 ms -> 7.5 ms; backward AG + RS = 35 ms
    # under 20 ms -> 15 ms; 4 micro-batches: 4 * 22.5 = 90 ms exposed, 4 * 52.5 ms moved
    s = dp_sync(3, SPAN, G, P, 0.01, 0.02, 4, unit_bytes=2e8)
    assert s.exposed_s == pytest.approx(0.09)
    assert s.total_s == pytest.approx(4 * (2 * AG + AG))
    # no compute to hide under: every byte is exposed; the all-gather of one pass moves
    # params x bytes x (p-1)/p = 1e9 * 2 * 7/8 bytes per chip
    bare = dp_sync(3, SPAN, G, P, 0.0, 0.0, 1, unit_bytes=2e8)
    assert bare.exposed_s == pytest.approx(2 * (1e9 * 2 * 7 / 8) / 1e11 + 7 / 8 * G / 1e11)
    # long compute: only the first layer's gather (2e8 bytes) in each pass stays exposed
    hidden = dp_sync(3, SPAN, G, P, 1.0, 1.0, 1, unit_bytes=2e8)
    assert hidden.exposed_s == pytest.approx(2 * 7 / 8 * 2e8 / 1e11)


def test_no_dp_group_no_sync():
    assert dp_sync(3, (), G, P, 0.0, 0.0, 4).exposed_s == 0.0


def _workload(zero: int, v: int = 1) -> Workload:
    return tiny_training(zero=zero, v=v)


def test_plain_1f1b_waits_on_its_p2p_and_interleaving_hides_it():
    """PP 2 on its own 100 GB/s switch; one boundary activation S = 2 x 128 x 256 x 2 bytes
    = 131072 B takes hop = S / 100 GB/s = 1.31 us. Plain 1F1B (v = 1) waits on both
    transfers of every micro-batch: 2 x hop each. Interleaved (v = 2): each transfer hides
    under one chunk's compute (a chunk of 1 layer at 1 ms >> 1.31 us), so none is exposed per
    micro-batch; the fill and drain, 2 (p - 1) x hop once per step, go to the bubble."""
    pp = NetworkLevel("pp", Topology.SWITCH, 2, 100e9, parallelism=("PP",))
    choice = Choice((("TP", 1), ("PP", 2), ("DP", 1)), (("PP", ((pp, 2),)),), (pp,))
    hop = 2 * 128 * 256 * 2 / 100e9
    stage = 2 * 1e-3  # 4 layers over 2 stages at 1 ms each, no head time
    plain = assemble.training_times(
        _workload(0, 1), choice, {"layer": 1e-3, "embed": 0.0, "head": 0.0}, 1e15
    )
    assert plain.micro_batches == 8  # global batch 16 / micro-batch 2
    assert plain.pp_transfer_s == pytest.approx(8 * 2 * hop)
    assert plain.bubble_s == pytest.approx(1 * (stage + 2 * hop))  # (p - 1) / v slots
    inter = assemble.training_times(
        _workload(0, 2), choice, {"layer": 1e-3, "embed": 0.0, "head": 0.0}, 1e15
    )
    assert inter.pp_transfer_s == 0.0
    assert inter.bubble_s == pytest.approx(stage / 2 + 2 * hop)


def test_interleaved_p2p_exposed_beyond_one_chunk():
    """hop 1 s, v = 2, pp = 4, stage forward 1 s and backward 2 s per micro-batch: a chunk's
    forward is 0.5 s (0.5 s of each forward transfer exposed), its backward 1 s (none):
    2 x (0.5 + 0) = 1 s per micro-batch; fill and drain 2 x 3 x 1 s = 6 s."""
    assert assemble.pipeline_p2p(1.0, 2, 4, 1.0, 2.0) == pytest.approx((1.0, 6.0))
    assert assemble.pipeline_p2p(1.0, 1, 4, 1.0, 2.0) == (2.0, 0.0)
    assert assemble.pipeline_p2p(1.0, 2, 1, 1.0, 2.0) == (0.0, 0.0)


@pytest.mark.parametrize(
    "zero,weights,grads,optimizer",
    [
        # 1e9 stored parameters per chip, BF16 weights and gradients (2 bytes), Adam's
        # 12 bytes beyond them (fp32 master + two moments), DP 4
        (0, 2e9, 2e9, 12e9),
        (1, 2e9, 2e9, 12e9 / 4),  # optimizer state sharded (Megatron distributed optimizer)
        (2, 2e9, 2e9 / 4, 12e9 / 4),
        # everything sharded, plus two gathered FSDP units of one layer each (4 layers):
        # 2e9 / 4 + 2/4 x 2e9 x 3/4
        (3, 2e9 / 4 + 0.5 * 2e9 * 3 / 4, 2e9 / 4, 12e9 / 4),
    ],
)
def test_zero_memory_per_chip_by_stage(zero, weights, grads, optimizer):
    sw = NetworkLevel("dp", Topology.SWITCH, 4, 100e9, parallelism=("DP",))
    choice = Choice((("DP", 4), ("PP", 1), ("TP", 1)), (("DP", ((sw, 4),)),), (sw,))
    mem = footprint.memory_use(_workload(zero), choice, 80e9, stored=1e9)
    assert (mem.weights, mem.gradients, mem.optimizer) == pytest.approx((weights, grads, optimizer))


def test_zero3_step_charges_the_per_micro_batch_gathers():
    """The step of the tiny model at ZeRO-3 on DP 4 carries exactly the dp_sync rule with the
    step's own numbers: 16 sequences / (2 x 4) = 2 micro-batches, P = stored x 2 bytes,
    G = every parameter's BF16 gradient, forward share of the layer time by FLOP.
    Parameters: 4 layers x (4 x 256^2 attention + 3 x 256 x 512 MLP + 2 x 256 norms)
    + 1000 x 256 embedding + 256 x 1000 LM head + 256 final norm = 3,135,744."""
    sw = NetworkLevel("dp", Topology.SWITCH, 4, 1e9, parallelism=("DP",))  # slow: exposed
    choice = Choice((("DP", 4), ("PP", 1), ("TP", 1)), (("DP", ((sw, 4),)),), (sw,))
    w = _workload(3)
    lat = {"layer": 1e-3, "embed": 0.0, "head": 1e-3}
    t = assemble.training_times(w, choice, lat, 1e15, stored=1e6)
    assert t.micro_batches == 2
    stage = 4 * 1e-3 + 1e-3
    fwd = stage * assemble.forward_fraction(w)
    params = 4 * (4 * 256**2 + 3 * 256 * 512 + 2 * 256) + 1000 * 256 + 256 * 1000 + 256
    assert w.model.num_params == params == 3_135_744
    # P = 2e6 bytes: all-gather 3/4 x 2e6 / 1e9 = 1.5 ms, one layer unit = 1/4 of it;
    # reduce-scatter of G = 2 x params bytes: 3/4 x G / 1e9
    ag = 0.75 * 2e6 / 1e9
    rs = 0.75 * 2 * params / 1e9
    per_micro = max(ag / 4, ag - fwd) + max(ag / 4, ag + rs - (stage - fwd))
    assert t.dp_allreduce_s == pytest.approx(2 * per_micro)


def test_fp32_gradient_reduction_moves_four_bytes_per_gradient():
    """grad_reduce_fp32 (Megatron's grad_reduce_in_fp32, apex's FP32 grad_sync_dtype): the
    ZeRO-1 reduce-scatter of the tiny model moves 4 x 3,135,744 bytes instead of 2 x, the
    parameter all-gather (P = stored x 2 bytes) stays at 2 bytes per weight. DP 4 on a
    1 GB/s switch: reduce-scatter 3/4 x G / 1e9, all-gather 3/4 x 2e6 / 1e9. Both fit in
    one 25 MiB bucket, the one that cannot overlap, so both are exposed whole."""
    from dataclasses import replace

    sw = NetworkLevel("dp", Topology.SWITCH, 4, 1e9, parallelism=("DP",))
    choice = Choice((("DP", 4), ("PP", 1), ("TP", 1)), (("DP", ((sw, 4),)),), (sw,))
    params = 3_135_744
    lat = {"layer": 1e-3, "embed": 0.0, "head": 1e-3}
    for fp32, grad_bytes in ((False, 2), (True, 4)):
        w = replace(_workload(1), grad_reduce_fp32=fp32)
        assert assemble.gradient_bytes(w) == pytest.approx(grad_bytes * params)
        t = assemble.training_times(w, choice, lat, 1e15, stored=1e6)
        rs = 0.75 * grad_bytes * params / 1e9
        ag = 0.75 * 2e6 / 1e9
        assert t.dp_allreduce_s == pytest.approx(rs + ag)


def test_contention_share_charges_the_unhidden_part_of_the_overlap():
    """The one latency rule at step level (solver.cost.latency.exposed_under): a collective
    of N s beside W s of compute adds max(0, N - W) + (1 - h) min(N, W)."""
    assert exposed_under(3.0, 5.0, 0.6) == pytest.approx(0.4 * 3.0)
    assert exposed_under(5.0, 3.0, 0.6) == pytest.approx(2.0 + 0.4 * 3.0)
    assert exposed_under(5.0, 3.0, 1.0) == pytest.approx(2.0)
    assert exposed_under(3.0, 5.0, 1.0) == 0.0
    assert exposed_under(3.0, 5.0, 0.0) == pytest.approx(3.0)


def test_zero1_with_a_contention_share():
    """h = 0.6. Reduce-scatter 17.5 ms beside a 20 ms backward: 0.4 x 17.5 = 7 ms (above the
    one 25 MiB bucket, 0.23 ms). All-gather 17.5 ms beside a 10 ms forward: 7.5 ms excess
    + 0.4 x 10 ms = 11.5 ms. Moved bytes do not change."""
    s = dp_sync(1, SPAN, G, P, 0.01, 0.02, 4, hidden=0.6)
    assert s.exposed_s == pytest.approx(0.007 + 0.0115)
    assert s.total_s == pytest.approx(2 * AG)


def test_zero3_backward_with_a_contention_share():
    """h = 0.5, one micro-batch, forward 10 ms, backward 20 ms. Forward: AG 17.5 ms beside
    10 ms -> 7.5 + 0.5 x 10 = 12.5 ms. Backward: AG + RS = 35 ms beside 20 ms -> 15 +
    0.5 x 20 = 25 ms."""
    s = dp_sync(3, SPAN, G, P, 0.01, 0.02, 1, unit_bytes=2e8, hidden=0.5)
    assert s.exposed_s == pytest.approx(0.0125 + 0.025)


def test_interleaved_p2p_with_a_contention_share():
    """hop 1 s, v = 2, pp = 4, forward 1 s and backward 2 s per micro-batch, h = 0.5: a
    forward transfer beside a 0.5 s chunk adds 0.5 + 0.5 x 0.5 = 0.75 s, a backward one
    beside a 1 s chunk 0.5 x 1 = 0.5 s: 2 x 1.25 = 2.5 s per micro-batch; the fill and
    drain (no compute beside them) stay 6 s."""
    assert assemble.pipeline_p2p(1.0, 2, 4, 1.0, 2.0, 0.5) == pytest.approx((2.5, 6.0))


def test_ring_hops_with_a_contention_share():
    """CP 2 on the 100 GB/s switch, K/V block 1e9 B: forward hop 10 ms beside a 40 ms / 2 =
    20 ms attention step, backward hop (2e9 B) 20 ms beside 60 ms / 2 = 30 ms. At h = 1
    nothing is exposed; at h = 0.25 each hop pays 0.75 of itself: 0.75 x 30 = 22.5 ms."""
    sw = NetworkLevel("cp", Topology.SWITCH, 2, 100e9, parallelism=("CP",))
    span = ((sw, 2),)
    assert ring_exposed_s(1e9, span, 2, 0.04, 0.06)[0] == pytest.approx(0.0)
    exposed, moved = ring_exposed_s(1e9, span, 2, 0.04, 0.06, 0.25)
    assert exposed == pytest.approx(0.0225)
    assert moved == pytest.approx(0.03)


def test_a_collective_not_overlapped_is_exposed_whole():
    """LlmTraining.dp_overlap: Megatron-LM's local DDP all-reduces after the last backward
    (h = 0): with a 50 ms backward that would hide all but the last bucket, all 35 ms of the
    all-reduce add to the step. ZeRO-1 with the gradient reduction overlapped but the
    parameter all-gather after the step: one bucket of the reduce-scatter plus all 17.5 ms
    of the all-gather, however long the forward (1 s)."""
    assert dp_sync(0, SPAN, G, P, 0.01, 0.05, 4, hidden=0.0).exposed_s == pytest.approx(AR)
    bucket = 7 / 8 * BUCKET_BYTES / 1e11
    s = dp_sync(1, SPAN, G, P, 1.0, 1.0, 4, param_hidden=0.0)
    assert s.exposed_s == pytest.approx(bucket + AG)
    assert dp_sync(1, SPAN, G, P, 1.0, 1.0, 4).exposed_s == pytest.approx(2 * bucket)


def test_the_step_prices_the_workloads_dp_overlap():
    """The tiny model at ZeRO-3 on DP 4 over a 1 GB/s switch, layers at 10 ms (stage 50 ms,
    2 micro-batches), as in the ZeRO-3 test above: all-gather ag = 3/4 x 2e6 / 1e9, reduce-
    scatter rs = 3/4 x 2 x 3,135,744 / 1e9. Overlapped, per micro-batch only the first
    layer's gather (ag / 4) and the backward's excess stay exposed; with dp_overlap "none"
    every gather and reduction adds whole: 2 x (2 ag + rs)."""
    from dataclasses import replace

    sw = NetworkLevel("dp", Topology.SWITCH, 4, 1e9, parallelism=("DP",))
    choice = Choice((("DP", 4), ("PP", 1), ("TP", 1)), (("DP", ((sw, 4),)),), (sw,))
    lat = {"layer": 10e-3, "embed": 0.0, "head": 10e-3}
    w = _workload(3)
    ag, rs = 0.75 * 2e6 / 1e9, 0.75 * 2 * 3_135_744 / 1e9
    stage = 4 * 10e-3 + 10e-3
    fwd = stage * assemble.forward_fraction(w)
    overlapped = assemble.training_times(w, choice, lat, 1e15, stored=1e6)
    per_micro = max(ag / 4, ag - fwd) + max(ag / 4, ag + rs - (stage - fwd))
    assert overlapped.dp_allreduce_s == pytest.approx(2 * per_micro)
    serial = assemble.training_times(replace(w, dp_overlap="none"), choice, lat, 1e15, stored=1e6)
    assert serial.dp_allreduce_s == pytest.approx(2 * (2 * ag + rs))
    assert serial.iteration_time_s - overlapped.iteration_time_s == pytest.approx(
        2 * (2 * ag + rs) - 2 * per_micro
    )


def test_the_setup_field_reaches_the_workload():
    """LlmTraining.dp_overlap -> Workload.dp_overlap, with a note in the plan."""
    from pathlib import Path

    s = setup_pb2.Setup()
    t = s.workload.llm_training
    t.model.hf_model = "Llama-3.1-8B"
    t.global_batch, t.micro_batch, t.seq_len = 16, 2, 128
    for mode, name in (
        (setup_pb2.DP_OVERLAP_ALL, "all"),
        (setup_pb2.DP_OVERLAP_GRAD_REDUCE, "grad_reduce"),
        (setup_pb2.DP_OVERLAP_NONE, "none"),
    ):
        t.dp_overlap = mode
        w = build_workload(s, Path("setup.txt"), 8)
        assert w.dp_overlap == name
        assert any("not overlapped" in n for n in w.notes) == (name != "all")
