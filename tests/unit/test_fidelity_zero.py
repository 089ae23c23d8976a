"""The scenario builder honours a row's optimizer/parameter sharding (issue #16), DP overlap
and pipeline interleaving and expert layouts (issue #35)."""

from __future__ import annotations

import math
import random

import pytest

from mapshard.fidelity.cases import Case
from mapshard.fidelity.scenarios import Unmodelable, case_levels, chip_spec, zero_stage
from mapshard.fidelity.training_row import dp_overlap, expert_layout, virtual_pipeline
from schema import setup_pb2
from solver.search.expert_group import expert_parallel_groups


def row(fsdp: str = "0", **extra: str) -> Case:
    return Case({"id": "Z", "kind": "training_step", "fsdp": fsdp}, dict(extra))


@pytest.mark.parametrize(
    "case,stage",
    [
        (row(), 0),
        (row(optimizer_sharding="0"), 0),  # Calculon's flag off (Korthikanti rows)
        (row(optimizer_sharding="1"), 1),  # Calculon's flag on
        (row(distributed_optimizer="1"), 1),  # Megatron-LM --use-distributed-optimizer
        (row(sharding="ZeRO-1"), 1),
        (row(sharding="zero2"), 2),
        (row(zero_stage="2"), 2),
        (row(fsdp="1"), 3),  # FULL_SHARD wins over anything else
        (row(fsdp="1", optimizer_sharding="1"), 3),
    ],
)
def test_zero_stage_from_the_rows_fields(case, stage):
    assert zero_stage(case) == stage


def test_a_bad_zero_stage_is_a_reason_not_a_crash():
    with pytest.raises(Unmodelable, match="zero_stage=5"):
        zero_stage(row(zero_stage="5"))


# ---------------------------------------------------------------------------------------
# Every spelling maps explicitly (issue #35): optimizers, DDP overlap, pipeline interleaving
# ---------------------------------------------------------------------------------------


def train(cells: dict[str, str] | None = None, **extra: str) -> Case:
    base = {"id": "R", "kind": "training_step", "fsdp": "0", "pp": "1", "virtual_pipeline": "1"}
    return Case({**base, **(cells or {})}, dict(extra))


@pytest.mark.parametrize(
    "extra,stage",
    [
        # NeMo 1.x / apex DistributedFusedAdam: optimizer state sharded over DP (ZeRO-1)
        ({"optimizer": "distributed_fused_adam"}, 1),
        ({"optimizer": "mcore_distributed_optim"}, 1),  # NeMo 2 / Megatron-core
        ({"optimizer": "fused_adam"}, 0),
        ({"optimizer": "adam", "sharding": "zero2"}, None),  # contradiction
        ({"optimizer": "distributed_fused_adam", "optimizer_sharding": "0"}, None),
        ({"optimizer": "lamb"}, None),
    ],
)
def test_optimizer_spellings(extra, stage):
    if stage is None:
        with pytest.raises(Unmodelable):
            zero_stage(train(**extra))
    else:
        assert zero_stage(train(**extra)) == stage


@pytest.mark.parametrize(
    "extra,mode",
    [
        ({}, setup_pb2.DP_OVERLAP_ALL),  # PyTorch DDP / FSDP, NeMo recipes: both overlapped
        ({"ddp_impl": "torch"}, setup_pb2.DP_OVERLAP_ALL),
        ({"ddp_impl": "local"}, setup_pb2.DP_OVERLAP_NONE),  # Megatron-LM 2021: after backward
        ({"ddp_impl": "local", "overlap_grad_reduce": "1"}, setup_pb2.DP_OVERLAP_ALL),
        ({"overlap_grad_reduce": "0"}, setup_pb2.DP_OVERLAP_NONE),
        ({"overlap_param_gather": "0"}, setup_pb2.DP_OVERLAP_GRAD_REDUCE),
        ({"ddp_impl": "torch", "overlap_grad_reduce": "0"}, None),  # DDP always overlaps
        ({"overlap_grad_reduce": "0", "overlap_param_gather": "1"}, None),  # Megatron asserts
        ({"ddp_impl": "apex"}, None),
        ({"overlap_grad_reduce": "yes"}, None),
    ],
)
def test_dp_overlap_spellings(extra, mode):
    if mode is None:
        with pytest.raises(Unmodelable):
            dp_overlap(train(**extra))
    else:
        assert dp_overlap(train(**extra)) == mode


@pytest.mark.parametrize(
    "cells,extra,chunks",
    [
        ({"pp": "1", "virtual_pipeline": ""}, {}, 1),  # no pipeline: interleaving cannot apply
        ({"pp": "4", "virtual_pipeline": ""}, {}, None),  # not known: never silently 1
        ({"pp": "4", "virtual_pipeline": ""}, {"pipeline_schedule": "1F1B"}, 1),
        ({"pp": "4", "virtual_pipeline": "5"}, {"pipeline_schedule": "Interleaved1F1B"}, 5),
        ({"pp": "4", "virtual_pipeline": "5"}, {"pipeline_schedule": "1F1B"}, None),
        ({"pp": "4", "virtual_pipeline": "1"}, {"pipeline_schedule": "none"}, None),
        ({"pp": "4", "virtual_pipeline": "0"}, {}, None),
    ],
)
def test_virtual_pipeline_is_never_a_silent_default(cells, extra, chunks):
    if chunks is None:
        with pytest.raises(Unmodelable):
            virtual_pipeline(train(cells, **extra))
    else:
        assert virtual_pipeline(train(cells, **extra)) == chunks


# ---------------------------------------------------------------------------------------
# Expert layouts (issue #35 item 1): a row's expert_tensor_parallel is the setup's
# ---------------------------------------------------------------------------------------


def moe(etp: str | None = None, tp: str = "2", ep: str = "32", dp: str = "16") -> Case:
    extra = {} if etp is None else {"expert_tensor_parallel": etp}
    cells = {"tp": tp, "ep": ep, "dp": dp, "pp": "8", "num_chips": "256"}
    cells |= {"chips_per_node": "8", "chip": "H100-SXM5-80GB"}
    return train(cells, **extra)


@pytest.mark.parametrize(
    "case,layout",
    [
        # Megatron-core's --expert-tensor-parallel-size 1: EP 32 = 16 TP pairs, so the
        # topology carries EP 32 / TP 2 = 16 groups carved from the data ranks
        (moe("1"), (32, 1, 16)),
        (moe("2", ep="8"), (8, 2, 8)),  # ETP = TP: EP groups of data ranks alone
        (moe(None, ep="8"), (8, 0, 8)),  # absent: the setup searches ETP (1 or TP)
        (moe("1", tp="1", ep="8"), (8, 1, 8)),  # TP 1: folding changes nothing
    ],
)
def test_expert_layout_of_a_row(case, layout):
    assert expert_layout(case) == layout


@pytest.mark.parametrize(
    "case,reason",
    [
        (moe("4"), "expert_tensor_parallel=4: the model runs 1 or tp"),
        (moe("1", ep="9"), "ep=9 not a multiple of tp=2"),
        (moe("x"), "not a whole number"),
    ],
)
def test_an_expert_layout_the_model_cannot_run_is_a_reason(case, reason):
    with pytest.raises(Unmodelable, match=reason):
        expert_layout(case)


def test_a_folded_ep_row_is_placed_as_megatron_core_ranks_it():
    """Qwen3-235B-A22B on 256 H100s (8 a node), TP 2, PP 8, DP 16, EP 32, ETP 1: an EP group
    is 32 consecutive ranks of one stage (16 TP pairs), i.e. 4 whole nodes. Innermost first:
    TP 2 and 4 of the 16 TP-pair groups fill a node; the other 4 EP groups and the 8
    pipeline stages cross nodes (2 x 4 x 4 x 8 = 256, DP left 1)."""
    case = moe("1")
    levels = case_levels(case, chip_spec(case))
    got = [(lv.name, lv.degree) for lv in levels]
    assert got == [("node_tp", 2), ("node_ep", 4), ("net_ep", 4), ("net_pp", 8)]


def test_random_expert_layouts_span_the_nodes_megatron_core_puts_an_ep_group_in():
    """A family of random MoE layouts (TP, PP, DP, EP, ETP 1 or TP; 8 chips a node): the
    topology the scenario builder places spans, with its EP tags, as many nodes as
    Megatron-core's own first EP group (solver.search.expert_group.expert_parallel_groups,
    the rank formula), and the EP group it implies has EP chips."""
    rng = random.Random(35)
    checked = 0
    while checked < 60:
        tp, pp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4])
        dp = rng.choice([1, 2, 4, 8, 16, 32])
        etp = rng.choice([1, tp])
        groups = tp * dp // etp  # EP must divide the expert view's TP x DP / ETP
        ep = rng.choice([d for d in range(2, groups + 1) if groups % d == 0] or [1])
        if ep < 2 or (etp == 1 and ep % tp) or dp % (ep // tp if etp == 1 else ep):
            continue
        cells = {"tp": str(tp), "ep": str(ep), "dp": str(dp), "pp": str(pp)}
        cells |= {"num_chips": str(tp * dp * pp), "chips_per_node": "8"}
        case = train(cells | {"chip": "H100-SXM5-80GB"}, expert_tensor_parallel=str(etp))
        levels = case_levels(case, chip_spec(case))
        ep_tags = math.prod(lv.degree for lv in levels if lv.tag == "EP")
        folded_tp = tp if etp == 1 else 1
        assert folded_tp * ep_tags == ep
        nodes = math.prod(lv.degree for lv in levels if lv.tag == "EP" and not lv.scale_up)
        group = expert_parallel_groups(tp, 1, dp, pp, ep, etp)[0]
        assert len({r // 8 for r in group}) == nodes, (tp, pp, dp, ep, etp)
        checked += 1
