"""A training row's optimizer sharding, data-parallel overlap and pipeline interleaving, read
from its columns and extra_params into the LlmTraining fields a user sets in a setup
(zero_stage, dp_overlap, virtual_pipeline). Every spelling a row may use maps explicitly;
a value outside them, or two fields that contradict each other, make the row "not
modelled" with the reason, never a silent default.
"""

from __future__ import annotations

from mapshard.fidelity.cases import Case, Unmodelable
from schema import setup_pb2

# extra_params keys that say the optimizer state is sharded over DP (ZeRO-1): Megatron-LM's
# --use-distributed-optimizer, Calculon's optimizer_sharding flag.
ZERO1_KEYS = ("distributed_optimizer", "optimizer_sharding")
# extra_params `optimizer` -> ZeRO stage: NeMo 1.x / apex DistributedFusedAdam
# (`distributed_fused_adam`) and NeMo 2 / Megatron-core's distributed optimizer
# (`mcore_distributed_optim`) shard the optimizer state over DP, reducing the gradients
# once per step (ZeRO-1); the plain Adam variants shard nothing.
OPTIMIZERS = {
    "distributed_fused_adam": 1,
    "mcore_distributed_optim": 1,
    "adam": 0,
    "adamw": 0,
    "fused_adam": 0,
}
# extra_params `ddp_impl` -> whether the DP gradient reduction overlaps the backward:
# PyTorch DDP's buckets do; Megatron-LM's local DDP (its default in 2021, the SC'21 runs'
# era) all-reduces the gradient buffer after the last backward.
DDP_IMPLS = {"torch": True, "local": False}


def _flag(case: Case, key: str) -> bool | None:
    """extra_params 0/1 `key`: None when absent."""
    value = case.extra.get(key)
    if value is None:
        return None
    if value not in ("0", "1", "true", "false"):
        raise Unmodelable(f"{key}={value} is not 0 or 1")
    return value in ("1", "true")


def zero_stage(case: Case) -> int:
    """The row's ZeRO stage: 3 for `fsdp`=1 (FULL_SHARD), else extra_params `zero_stage`,
    else `sharding` zero1/zero2/zero3, else 1 when a ZeRO-1 key (ZERO1_KEYS) is 1 or the
    `optimizer` shards its state (OPTIMIZERS), else 0. A ZeRO-1 key or optimizer that says
    "not sharded" beside a sharded stage is a contradiction."""
    optimizer = case.extra.get("optimizer")
    if optimizer is not None and optimizer not in OPTIMIZERS:
        raise Unmodelable(f"optimizer={optimizer} is not one of {', '.join(OPTIMIZERS)}")
    stated = [_flag(case, k) for k in ZERO1_KEYS]
    if optimizer is not None:
        stated.append(OPTIMIZERS[optimizer] == 1)
    stage = _stage(case, any(s is True for s in stated))
    if stage >= 1 and any(s is False for s in stated):
        said = [f"{k}={case.extra[k]}" for k in (*ZERO1_KEYS, "optimizer") if k in case.extra]
        raise Unmodelable(
            f"ZeRO stage {stage} but the row also says the optimizer is not sharded "
            f"({', '.join(said)})"
        )
    return stage


def _stage(case: Case, zero1: bool) -> int:
    if case.int("fsdp") == 1:
        return 3
    given = case.extra.get("zero_stage", "")
    if given:
        if given not in ("0", "1", "2", "3"):
            raise Unmodelable(f"zero_stage={given} is not 0, 1, 2 or 3")
        return int(given)
    sharding = case.extra.get("sharding", "").lower().replace("-", "").replace("_", "")
    if sharding:
        if sharding not in ("zero1", "zero2", "zero3"):
            raise Unmodelable(f"sharding={case.extra['sharding']} is not zero1, zero2 or zero3")
        return int(sharding[-1])
    return 1 if zero1 else 0


def dp_overlap(case: Case) -> int:
    """LlmTraining.dp_overlap of the row: `ddp_impl` (DDP_IMPLS) and Megatron-core's
    `overlap_grad_reduce` / `overlap_param_gather` (0/1). Unset: DP_OVERLAP_ALL (PyTorch DDP
    and FSDP, and the NeMo / Megatron-Bridge recipes, overlap both). `ddp_impl=local` does
    not overlap the gradient reduction unless `overlap_grad_reduce=1` says it does
    (Megatron-core's DDP, local's successor); PyTorch DDP cannot turn it off; Megatron-LM
    overlaps the parameter gather only together with the gradient reduction."""
    impl = case.extra.get("ddp_impl")
    if impl is not None and impl not in DDP_IMPLS:
        raise Unmodelable(f"ddp_impl={impl} is not one of {', '.join(DDP_IMPLS)}")
    grad = _flag(case, "overlap_grad_reduce")
    params = _flag(case, "overlap_param_gather")
    if impl == "torch" and grad is False:
        raise Unmodelable(
            "ddp_impl=torch always overlaps its gradient buckets, but overlap_grad_reduce=0"
        )
    grad_on = grad if grad is not None else impl != "local"
    if params and not grad_on:
        raise Unmodelable(
            "overlap_param_gather=1 needs the gradient reduction overlapped "
            "(Megatron-LM asserts overlap_grad_reduce with it)"
        )
    if not grad_on:
        return setup_pb2.DP_OVERLAP_NONE
    if params is False:
        return setup_pb2.DP_OVERLAP_GRAD_REDUCE
    return setup_pb2.DP_OVERLAP_ALL


# extra_params `pipeline_schedule` -> what it says of the columns pp and virtual_pipeline
SCHEDULES = ("none", "1F1B", "Interleaved1F1B")


def virtual_pipeline(case: Case) -> int:
    """LlmTraining.virtual_pipeline of the row. An empty cell is "not known" (the schema),
    never silently 1: it is 1 only where interleaving cannot apply (pp <= 1) or the row's
    `pipeline_schedule` is plain 1F1B; otherwise the row is not modelled. A schedule that
    contradicts pp or the column (none with pp > 1, 1F1B with chunks, interleaving without)
    is not modelled either."""
    pp = max(case.int("pp", 1), 1)
    schedule = case.extra.get("pipeline_schedule")
    if schedule is not None and schedule not in SCHEDULES:
        raise Unmodelable(f"pipeline_schedule={schedule} is not one of {', '.join(SCHEDULES)}")
    if case.has("virtual_pipeline"):
        v = case.int("virtual_pipeline")
        if v < 1:
            raise Unmodelable(f"virtual_pipeline {v} is not a number of chunks >= 1")
    elif pp <= 1 or schedule == "1F1B":
        v = 1
    else:
        raise Unmodelable(
            f"virtual_pipeline is empty with pp={pp}: give the model chunks per pipeline "
            "stage (1 = no interleaving) or pipeline_schedule=1F1B"
        )
    said = {"none": pp <= 1, "1F1B": pp > 1 and v == 1, "Interleaved1F1B": pp > 1 and v > 1}
    if schedule is not None and not said[schedule]:
        raise Unmodelable(f"pipeline_schedule={schedule} but pp={pp}, virtual_pipeline={v}")
    return v


def expert_layout(case: Case) -> tuple[int, int, int]:
    """(EP, ETP, the EP degree the topology tags carry) of an MoE training row.

    The row's `ep` counts every rank of one expert group, as Megatron-core's
    --expert-model-parallel-size does. `expert_tensor_parallel` is the row's
    --expert-tensor-parallel-size: 1 folds the EP group over the TP chips (EP / TP groups of
    TP chips, carved from the data-parallel ranks), TP (or absent, Megatron-core's default
    being TP) keeps each expert split over the TP chips and EP groups of data-parallel
    ranks. Absent, the setup leaves ETP searched (1 or TP), the field's own default."""
    ep = max(case.int("ep", 1), 1)
    tp = max(case.int("tp", 1), 1)
    raw = case.extra.get("expert_tensor_parallel")
    if raw is None:
        return ep, 0, ep
    try:
        etp = int(raw)
    except ValueError:
        raise Unmodelable(f"expert_tensor_parallel={raw} is not a whole number") from None
    if etp == 1 and tp > 1:
        if ep % tp:
            raise Unmodelable(f"expert_tensor_parallel=1 with ep={ep} not a multiple of tp={tp}")
        return ep, 1, ep // tp
    if etp not in (1, tp):
        raise Unmodelable(f"expert_tensor_parallel={etp}: the model runs 1 or tp ({tp})")
    return ep, etp, ep
