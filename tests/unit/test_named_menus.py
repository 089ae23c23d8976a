"""solver.cost.named_menus: chained layers share one memoised menu per distinct kernel, and
each copy's menu equals the one built fresh for it (name and weight identities included)."""

from __future__ import annotations

from pathlib import Path

from solver_fixtures import small_system

from generator.chain import chain_instances
from mapshard import pipeline
from solver.cost import memo
from solver.cost.menus import build_menu
from solver.cost.named_menus import menu_by_value
from solver.cost.weights import WeightRule, weight_owner

ROOT = Path(__file__).resolve().parents[2]


def test_chained_layer_menus_equal_fresh_ones() -> None:
    scenario = pipeline.load_scenario(ROOT / "scenarios" / "gpt3_175b_train_a100")
    layer = next(p for p in scenario.workload.phases if p.name == "layer").graph
    chained = chain_instances(layer, 2)
    system = small_system(num_chips=2, sram_bytes=4e7)
    span = ((system.network[0], 2),)
    args = (system.chip, 2, span, {"tp": span}, 4e7, "bf16", True, 4, WeightRule(2.0), 1)
    key = ("test_named_menus", *args[1:3], "bf16", True, 4, args[8], 1)
    memo.MENUS.clear()
    made: list[str] = []

    def make(kernel, *rest):  # build_menu, counted
        made.append(kernel.name)
        return build_menu(kernel, *rest)

    built = [menu_by_value(k, make, key, args) for k in chained.kernels]
    # one menu built per distinct kernel of the layer, not per copy
    assert len(made) <= len(layer.kernels)
    # asked again: the very same objects (later problems share them)
    again = [menu_by_value(k, make, key, args) for k in chained.kernels]
    assert all(a is b for a, b in zip(built, again, strict=True))
    for kernel, menu in zip(chained.kernels, built, strict=True):
        assert menu == build_menu(kernel, *args), kernel.name
    # weight identities name the copy's own forward kernel: layers never share a weight
    stored = {w for m in built for o in m.options for w, _ in o.weights}
    assert stored and all(w.split("/")[0] == weight_owner(w.split("/")[0]) for w in stored)
    assert {w.split("_")[0] for w in stored} == {"L0", "L1"}
