"""A row whose recipe overlaps its TP collectives with the GEMMs (extra_params
tp_comm_overlap=1, NeMo's userbuffers) runs with Execution.overlap PERFECT; every other GPU row
keeps the chip's SERIAL_NETWORK (issue #16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard import pipeline
from mapshard.fidelity.cases import Case, read_cases
from mapshard.fidelity.scenarios import Unmodelable, build_setup, tp_comm_overlap
from schema import setup_pb2

FIT = Path(__file__).parents[1] / "data" / "validation" / "validation_public_fit.csv"


def row(tp: str, **extra: str) -> Case:
    return Case({"id": "O", "kind": "training_step", "tp": tp}, dict(extra))


@pytest.mark.parametrize(
    "case,on",
    [
        (row("4", tp_comm_overlap="1"), True),
        (row("4", tp_comm_overlap="0"), False),
        (row("4"), False),
        (row("1", tp_comm_overlap="1"), False),  # TP 1: no TP collective to overlap
    ],
)
def test_tp_comm_overlap_from_the_rows_fields(case, on):
    assert tp_comm_overlap(case) is on


def test_a_bad_value_is_a_reason_not_a_crash():
    with pytest.raises(Unmodelable, match="tp_comm_overlap=yes"):
        tp_comm_overlap(row("4", tp_comm_overlap="yes"))


def test_the_nemo_rows_resolve_their_overlap():
    """P-NEM03 (GPT-3 175B, TP 4, recipe with userbuffers) -> perfect; P-NEM05 (Llama-2-7B,
    TP 1) -> the H100's own serial_network."""
    cases = {c.id: c for c in read_cases(FIT)}
    nem03, _ = build_setup(cases["P-NEM03"])
    nem05, _ = build_setup(cases["P-NEM05"])
    assert nem03.execution.overlap == setup_pb2.PERFECT
    assert pipeline.overlap_mode(nem03, "serial_network") == "perfect"
    assert not nem05.HasField("execution")
    assert pipeline.overlap_mode(nem05, "serial_network") == "serial_network"
