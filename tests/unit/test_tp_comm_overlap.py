"""The framework's TP comm overlap (Execution.tp_comm_overlap, Transformer Engine
userbuffers): a validation row whose recipe overlaps its TP collectives with the GEMMs asks
for it (extra_params tp_comm_overlap=1), and the plan hides the chip's calibrated share of
each kernel's collective under a serialised network, nothing anywhere else (issue #16)."""

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
    """P-NEM03 (GPT-3 175B, TP 4, recipe with userbuffers) asks for it; P-NEM05 (Llama-2-7B,
    TP 1) does not; P-NEM07 (Llama-2-70B, recipe not found) stays serial."""
    cases = {c.id: c for c in read_cases(FIT)}
    nem03, _ = build_setup(cases["P-NEM03"])
    assert nem03.execution.tp_comm_overlap
    for other in ("P-NEM05", "P-NEM07"):
        setup, _ = build_setup(cases[other])
        assert not setup.execution.tp_comm_overlap


def _setup(tp_comm: bool, overlap: int = setup_pb2.OVERLAP_UNSET) -> setup_pb2.Setup:
    s = setup_pb2.Setup()
    s.execution.tp_comm_overlap = tp_comm
    s.execution.overlap = overlap
    return s


def test_the_hidden_share_is_the_chips_under_a_serialised_network_only():
    # H100 kernel by kernel (SERIAL_NETWORK, its default) with a calibrated share of 0.3
    assert pipeline.execution_options(_setup(True), "serial_network", 0.3).network_hidden_share == (
        0.3
    )
    # the framework does not overlap: serial
    assert pipeline.execution_options(
        _setup(False), "serial_network", 0.3
    ).network_hidden_share == (0.0)
    # a perfect overlap hides the network already; an uncalibrated chip keeps it serial
    perfect = _setup(True, setup_pb2.PERFECT)
    assert pipeline.execution_options(perfect, "serial_network", 0.3).network_hidden_share == 0.0
    assert pipeline.execution_options(_setup(True), "serial_network", 0.0).network_hidden_share == (
        0.0
    )
