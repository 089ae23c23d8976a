"""The scenario builder honours a row's optimizer/parameter sharding (issue #16)."""

from __future__ import annotations

import pytest

from mapshard.fidelity.cases import Case
from mapshard.fidelity.scenarios import Unmodelable, zero_stage


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
