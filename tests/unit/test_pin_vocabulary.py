"""Every sharding and tile the writer can emit, the reader accepts (issue #33 item 6).

plan.txt writes each kernel's chosen option in the words of the solver's menus
(solver.cost.menus: Option.sharding, Option.tile); this enumerates those words over the
gallery's workloads (every kind, training and inference, GQA and MoE, DFModel graphs, kernel
by kernel and fused), at the smallest and the largest TP the search offers, and checks each
word three ways:
the schema's syntax accepts it (what validation reads), the generator accepts it for that
kernel (what a pin is checked against), and a menu built with it pinned offers exactly it
(what the solver honours)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from generator.graph import Kernel
from generator.pins import sharding_problem, tile_problem
from mapshard import pipeline
from mapshard.scenario import scenario_options
from schema.pins import is_sharding
from schema.tiles import parse_tile, tile_text
from solver.cost import efficiency
from solver.cost.menus import build_menu
from solver.search import infeasible
from solver.search.parallel import Choice, enumerate_choices

ROOT = Path(__file__).resolve().parents[2]
GALLERY = sorted(p.parent.name for p in (ROOT / "scenarios").glob("*/setup.txt"))


def _choices(scenario: pipeline.Scenario) -> list[Choice]:
    """A choice for the smallest and the largest TP degree the search offers."""
    w, s = scenario.workload, scenario.system
    lim = infeasible.limits_of(w, s)
    found = enumerate_choices(
        s, lim.max_tp, lim.max_pp, lim.max_dp, lim.allow_dp, w.context_parallel, w.expert_parallel
    )
    by_tp: dict[int, Choice] = {}
    for c in found:
        by_tp.setdefault(c.degree("TP"), c)
    tps = sorted(by_tp)
    return [by_tp[t] for t in sorted({tps[0], tps[-1]})] if tps else []


def _menu_args(scenario: pipeline.Scenario, choice: Choice, dataflow: bool) -> tuple:
    """build_menu's arguments after the kernel, as solver.search.phase_problem builds them."""
    ex = scenario_options(scenario)
    spans = {name.lower(): span for name, span in choice.spans}
    spans["all"] = tuple(level for _, span in choice.spans for level in span)
    chip = efficiency.for_precision(scenario.system.chip, ex.math_precision)
    tp = choice.degree("TP")
    return (chip, tp, choice.span("TP"), spans, chip.sram_bytes, ex.math_precision, dataflow)


def _words(name: str) -> list[tuple[Kernel, tuple, str, str]]:
    scenario = pipeline.load_scenario(ROOT / "scenarios" / name)
    dataflow = scenario_options(scenario).dataflow  # fused menus write more tiles
    out = []
    for choice in _choices(scenario):
        args = _menu_args(scenario, choice, dataflow)
        for phase in scenario.workload.phases:
            for kernel in phase.graph.kernels:
                menu = build_menu(kernel, *args)
                words = dict.fromkeys((o.sharding, o.tile) for o in menu.options)
                out += [(kernel, args, s, t) for s, t in words]
    return out


@pytest.mark.parametrize("name", GALLERY)
def test_every_word_the_menus_write_is_read_back(name: str) -> None:
    words = _words(name)
    assert words
    for kernel, args, sharding, tile in words:
        where = (name, kernel.name, sharding, tile)
        assert is_sharding(sharding), where
        assert sharding_problem(kernel, sharding) == "", where
        if tile:
            pin = parse_tile(tile)
            assert pin is not None and tile_text(pin) == tile, where
            assert tile_problem(kernel, tile) == "", where
        pinned = replace(kernel, pinned_sharding=sharding, pinned_tile=tile)
        offered = {(o.sharding, o.tile) for o in build_menu(pinned, *args).options}
        assert offered == {(sharding, tile)}, (where, offered)
