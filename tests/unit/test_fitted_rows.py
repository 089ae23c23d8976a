"""Each fitted constant lists the FIT rows it was fitted on (mapshard.fidelity.fitted), and
the lists hold (issue #35): every listed row is a usable FIT row, never a CHECK row; each
list is what its fit takes from the FIT files; every number a calibrated chip file sets is
listed (fitted, carried from another chip's fit, or cited)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from generator import hpl
from hardware import library
from hardware.calibration import calibration_of
from mapshard.fidelity import engines, fit, fit_attention, fit_host_op
from mapshard.fidelity.cases import read_cases
from mapshard.fidelity.fit_runs import single_chip_runs
from mapshard.fidelity.fit_training import fp8_training_rows
from mapshard.fidelity.fitted import FITTED, fitted_on

DATA = Path(__file__).parents[1] / "data" / "validation"
FIT_FILES = (DATA / "validation_dev_structured.csv", DATA / "validation_public_fit.csv")
CHECK = DATA / "validation_public_check.csv"


def ids(path: Path, usable_only: bool = False) -> set[str]:
    with path.open(encoding="utf-8", newline="") as f:
        return {r["id"] for r in csv.DictReader(f) if r["usable"] == "1" or not usable_only}


@pytest.fixture(scope="module")
def cases():
    return [c for path in FIT_FILES for c in read_cases(path)]


def test_every_listed_row_is_a_usable_fit_row():
    fit_rows = set().union(*(ids(p, usable_only=True) for p in FIT_FILES))
    check_rows = ids(CHECK)
    for entry in FITTED:
        assert not set(entry.rows) & check_rows, entry
        assert set(entry.rows) <= fit_rows, (entry.where, set(entry.rows) - fit_rows)
        assert entry.rows or entry.cited, entry  # every entry rests on rows or a citation


def _row(source: str) -> str:
    return source.split(":")[0]  # "K09:also_down_proj_s" -> "K09"


def selected(cases, entry) -> set[str] | None:
    """The rows the entry's fit takes from the FIT files (None: not re-derived here)."""
    chip = entry.carried_from or entry.where
    if entry.fit == "fit.fit_gemm" or entry.fit.startswith("fit.fit_gemm,"):
        return {_row(p.source) for p in fit.gemm_points(cases, chip)}
    if entry.fit == "fit.fit_vector_util":
        return {_row(p.source) for p in fit.vector_points(cases, chip)}
    if entry.fit == "fit.fit_dram_util":
        return set(fit.fit_dram_util(cases, chip, 1.0)[1])
    if entry.fit == "fit_attention unsplit":
        return {p.row for p in fit_attention.decode_points(cases)}
    if entry.fit.startswith("fit_attention "):
        kernel = entry.fit.split()[-1]
        passes = ("fwd", "bwd")
        return {p.row for s in passes for p in fit_attention.attention_points(cases, kernel, s)}
    if entry.fit == "fit_host_op":
        return {c.id for c in fit_host_op.host_loop_rows(cases)}
    if entry.fit == "fit.fit_collective":
        link_Bps = library.find_chip(chip).scale_up_bw_GBps * 1e9
        return {_row(s) for s in fit.fit_collective(cases, chip, link_Bps).sources}
    return None


def test_each_list_is_the_rows_its_fit_takes(cases):
    derived = 0
    for entry in FITTED:
        rows = selected(cases, entry)
        if rows is not None:
            assert set(entry.rows) == rows, entry.where
            derived += 1
    assert derived >= 15


def test_step_level_fits_take_their_rows_from_the_fit_selections(cases):
    """The training and whole-run fits drop rows with no plan, so their lists are subsets
    of what the fits select: FP8 dense training rows, single-chip runs."""
    for entry in FITTED:
        if entry.fit.startswith("fit_training") and not entry.carried_from:
            chips = ("B200", "GB200") if "--no-split" in entry.fit else (entry.where,)
            pool = {c.id for chip in chips for c in fp8_training_rows(cases, chip)}
            assert set(entry.rows) <= pool and entry.rows, entry.where
        if entry.fit == "fit_runs.fit_runs":
            assert set(entry.rows) <= {c.id for c in single_chip_runs(cases, entry.where)}


def test_module_constants_are_listed_by_name():
    modules = {"mapshard.fidelity.engines": engines, "generator.hpl": hpl}
    for entry in FITTED:
        if entry.where in modules:
            for name in entry.fields:
                assert hasattr(modules[entry.where], name), f"{name} is gone: update its entry"


def set_fields(chip: str) -> set[str]:
    e = library.get_chip(chip).accelerator.efficiency
    nested = {"source", "collective", "gemm_util_by_precision", "causal_attention"}
    names = {f.name for f, _ in e.ListFields()} - nested
    names |= {f"causal_attention {c.kernel}" for c in e.causal_attention}
    names |= {f"gemm_util_by_precision {p.precision}" for p in e.gemm_util_by_precision}
    return names | {f"collective L{c.level}" for c in e.collective}


@pytest.mark.parametrize(
    "chip",
    [
        c
        for c in library.chip_names()
        if calibration_of(library.get_chip(c).accelerator.efficiency).calibrated
    ],
)
def test_every_number_of_a_calibrated_chip_is_listed(chip):
    listed = {f for entry in fitted_on(chip) for f in entry.fields}
    assert set_fields(chip) <= listed, set_fields(chip) - listed
