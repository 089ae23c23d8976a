"""The framework's TP comm overlap (Execution.tp_comm_overlap, Transformer Engine
userbuffers): a validation row whose recipe overlaps its TP collectives with the GEMMs asks
for it (extra_params tp_comm_overlap=1), and the plan hides the chip's calibrated share of
each kernel's collective under a serialised network, nothing anywhere else (issue #16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard.fidelity.cases import Case, read_cases
from mapshard.fidelity.fit_training import NO_HIDING, fit_setup, fp8_training_rows
from mapshard.fidelity.scenarios import (
    Unmodelable,
    build_setup,
    load_case_scenario,
    tp_comm_overlap,
)
from mapshard.scenario import execution_options, scenario_options
from schema import setup_pb2
from solver.cost.problem import MappingProblem
from solver.search.bounds import plan_warnings

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
    assert execution_options(_setup(True), "serial_network", 0.3).network_hidden_share == (0.3)
    # the framework does not overlap: serial
    assert execution_options(_setup(False), "serial_network", 0.3).network_hidden_share == (0.0)
    # a perfect overlap hides the network already; an uncalibrated chip keeps it serial
    perfect = _setup(True, setup_pb2.PERFECT)
    assert execution_options(perfect, "serial_network", 0.3).network_hidden_share == 0.0
    assert execution_options(_setup(True), "serial_network", 0.0).network_hidden_share == (0.0)


def test_the_fits_grid_point_0_hides_nothing():
    """fit_training's grid point h = 0 is "nothing hides": a 0 share in the message would mean
    "uncalibrated" (the chip file's 0.6 on the H100, and perfect step-level overlap), so the
    setup carries NO_HIDING, which every overlap reads as (almost) serial."""
    nem03 = {c.id: c for c in read_cases(FIT)}["P-NEM03"]
    off, _ = fit_setup(nem03, 0.49, 0.0)
    on, _ = fit_setup(nem03, 0.49, 0.3)
    assert off.system.accelerator.efficiency.tp_comm_hidden_share == NO_HIDING
    options = execution_options(off, "serial_network", NO_HIDING)
    assert options.network_hidden_share == NO_HIDING
    assert options.comm_hidden_share == NO_HIDING
    assert on.execution.tp_comm_overlap
    assert on.system.accelerator.efficiency.tp_comm_hidden_share == 0.3


def test_step_level_overlaps_take_the_chips_share_on_a_serialised_network():
    """The DP buckets' and p2p transfers' hidden share (comm_hidden_share) is the chip's
    calibrated contention under SERIAL_NETWORK, with or without the recipe's TP overlap;
    perfect (1) under PERFECT overlap or when the chip has no share."""
    assert execution_options(_setup(False), "serial_network", 0.6).comm_hidden_share == 0.6
    assert execution_options(_setup(True), "serial_network", 0.6).comm_hidden_share == 0.6
    perfect = _setup(False, setup_pb2.PERFECT)
    assert execution_options(perfect, "serial_network", 0.6).comm_hidden_share == 1.0
    assert execution_options(_setup(False), "serial_network", 0.0).comm_hidden_share == 1.0


def test_network_overlapped_follows_the_rule_in_force():
    """The payer of a shared conversion matters where the latency is not additive in the
    network: overlap without serialisation, or a serialised network with a hidden share
    (whatever `overlap` says: the serialised rule ignores it)."""

    def problem(overlap: bool, serial: bool, hidden: float) -> MappingProblem:
        return MappingProblem((), (), 1.0, 1.0, overlap, False, 1, (), serial, hidden)

    assert problem(True, False, 0.0).network_overlapped
    assert not problem(False, False, 0.0).network_overlapped
    assert not problem(True, True, 0.0).network_overlapped
    assert problem(True, True, 0.4).network_overlapped
    assert problem(False, True, 0.4).network_overlapped


def test_a_perfect_overlap_makes_tp_comm_overlap_a_warning():
    """tp_comm_overlap refines a serialised network; under a perfect overlap the plan says
    it has no effect. On the H100 (calibrated share 0.7) the serial plan has no warning."""
    from dataclasses import replace

    nem03 = {c.id: c for c in read_cases(FIT)}["P-NEM03"]
    sc = load_case_scenario(nem03, FIT)
    perfect = replace(scenario_options(sc), serialize_network=False)
    assert any(
        "no effect under overlap perfect" in w
        for w in plan_warnings(sc.workload, sc.system, perfect)
    )
    serial = scenario_options(sc)
    assert serial.network_hidden_share == 0.7
    assert serial.comm_hidden_share == 0.7
    assert not [w for w in plan_warnings(sc.workload, sc.system, serial) if "tp_comm" in w]


def test_the_training_fit_takes_dense_fp8_rows_only():
    """fit_training's rows: the chip's usable FP8 training FIT rows of dense models. The MoE
    rows (Mixtral P-NEM13/17 on Blackwell, Qwen3-30B-A3B P-NEM33 on H100) carry expert costs
    the split plateau and the collective share must not absorb."""
    cases = read_cases(FIT)
    h100 = {c.id for c in fp8_training_rows(cases, "H100-SXM5-80GB")}
    # N-031..033: later Megatron-Bridge releases of P-NEM28's and P-NEM25's configurations
    # (added 2026-12-01), taken by a refit; the fitted constants keep the rows they list
    want = {f"P-NEM{i:02d}" for i in (2, 3, 4, 5, 6, 7, 9, 20, 23, 25, 29, 31)} | {"N-033"}
    assert h100 == want
    blackwell = {c.id for chip in ("B200", "GB200") for c in fp8_training_rows(cases, chip)}
    nemo = {f"P-NEM{i:02d}" for i in (10, 11, 12, 14, 15, 16, 21, 28)}
    assert blackwell == nemo | {"N-031", "N-032"}
