"""Sampled tile menus never claim more than they proved (project issue #33).

Realistic GEMM chains (2-3 GEMMs, dims 256-1024) on small SRAMs (32-256 KB), where a
GEMM's per-status tile frontier is long enough that the fused search samples it. The
independent brute force (tests/independent/, no product code) gives the optimum over every
integer tile; the product must never beat it, must equal it when it says `optimal`, and its
reported gap must cover its true gap (its bound is below the optimum over every tile).
Before the bound over every tile (solver/fusion/tile_refine.py), 25 of seeds 0-59 said
`optimal` 1%-1,190% above the true optimum.
"""

from __future__ import annotations

import functools
import random
from dataclasses import replace

import pytest
from independent.exhaustive import optimum as _optimum
from independent.instances import Instance, Link, Op, Tensor, random_machine, setup_text

import mapshard
from solver.cost.frontier import fusion_points
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.fusion.solve import _with_sampled_proof

REL = 1e-6
SEEDS = range(50)


def _chain(seed: int, menu: int = 0) -> Instance:
    """A chain of 2-3 GEMMs (T x K -> T x H -> ...) on one chip with a small SRAM."""
    rng = random.Random(seed)
    n = rng.choice([2, 3])
    t, h = rng.choice([256, 384, 512, 1024]), rng.choice([256, 384, 512])
    k0 = rng.choice([256, 512])
    ops = []
    for i in range(n):
        m, k, out = f"m{i}", f"k{i}", f"n{i}"
        a = Tensor("a", "in", (m, k), 2.0)
        w = Tensor("w", "weight", (k, out), 2.0)
        c = Tensor("c", "out", (m, out), 2.0)
        dims = ((m, t), (k, k0 if i == 0 else h), (out, h))
        ops.append(Op(f"mm{i}", "gemm", dims, (a, w, c)))
    machine = replace(
        random_machine(rng, 1),
        sram_bytes=float(rng.choice([32, 64, 128, 256]) * 1024),
        matrix_flops=rng.choice([20e12, 50e12, 100e12]),
        vector_flops=1e12,
        dram_Bps=rng.choice([0.5e12, 1e12, 2e12]),
    )
    links = tuple(Link(i, i + 1, "a") for i in range(n - 1))
    name = f"chain{n}-{t}x{h}-{machine.sram_bytes / 1024:g}KB"
    return Instance(name, tuple(ops), links, machine, True, rng.randint(1, 3), rng.random() < 0.7)


@functools.cache
def optimum(inst: Instance):
    """The independent brute force, once per instance for the module (seed 3's chain is
    enumerated by its seed's test and by the large-menu test below)."""
    return _optimum(inst)


def _solve(inst: Instance, menu: int = 0) -> mapshard.Result:
    text = setup_text(inst)
    if menu:
        text = text.replace(
            "solver { gap: 1e-9 }", f"solver {{ gap: 1e-9 tile_menu_size: {menu} }}"
        )
    return mapshard.solve(text)


@pytest.mark.parametrize("seed", SEEDS, ids=[_chain(s).name for s in SEEDS])
def test_sampled_menus_report_an_honest_gap(seed: int) -> None:
    inst = _chain(seed)
    best = optimum(inst).latency_s
    stats = _solve(inst).plan.stats
    latency = stats.objective
    assert latency >= best * (1 - REL), (latency, best)
    if stats.status == "optimal":
        assert latency <= best * (1 + REL), (latency, best, stats)
    true_gap = (latency - best) / latency
    assert stats.gap >= true_gap - REL, (stats.gap, true_gap, stats)


def test_most_instances_sample_their_menus() -> None:
    """The instances exercise what they test: in most, a GEMM's tile frontier (the fused
    statuses of its fed input and output) is longer than the menu keeps (2.4 x 10)."""
    sampled = 0
    for seed in SEEDS:
        inst = _chain(seed)
        elements = inst.machine.sram_bytes / 2.0
        states = (("dram", "fused"), ("dram",), ("dram", "fused"))
        shapes = [tuple(size for _, size in op.dims) for op in inst.ops]
        sampled += any(fusion_points(m, k, n, elements, 10, *states)[1] for m, k, n in shapes)
    assert sampled >= 40, sampled


def test_a_large_menu_size_searches_exact_menus() -> None:
    """solver { tile_menu_size } large enough: no sampling, and the brute force's optimum."""
    inst = _chain(3)
    plan = _solve(inst, menu=1000).plan
    assert plan.stats.search_space == "all"
    assert plan.stats.status == "optimal"
    assert abs(plan.latency_s - optimum(inst).latency_s) <= REL * plan.latency_s


def _sol(objective_s: float, bound_s: float, status: str, stop: str = "", milps: int = 0):
    stats = SearchStats(milps=milps, stop=stop)
    return GraphSolution(((0,),), (0,), objective_s, bound_s, status, stats)


def test_the_deferred_sampled_proof_keeps_the_bound_over_every_tile() -> None:
    """solve_graph's order on large sampled graphs: the bound over every tile (refined) first,
    then, when it falls short, the sampled-menu proof (proven). Its better plan is kept, at
    the refined bound (the proof's own bound holds over the sampled tiles only): 10.0 and
    10.5 against a bound of 9.95 close a 1% gap (0.5%); against 9.8 they do not (2%), and the
    budget that cut the proof short is the stop said."""
    refined = _sol(10.5, 9.95, "time_limit", "tile_bound", milps=3)
    proven = _sol(10.0, 10.0, "optimal", milps=4)
    out = _with_sampled_proof(refined, proven, 0.01)
    assert (out.objective_s, out.bound_s, out.status, out.stats.stop) == (10.0, 9.95, "optimal", "")
    assert out.stats.milps == 7
    low = _with_sampled_proof(
        replace(refined, bound_s=9.8), _sol(10.0, 10.0, "time_limit", "price_cap"), 0.01
    )
    assert (low.objective_s, low.bound_s, low.status, low.stats.stop) == (
        10.0,
        9.8,
        "time_limit",
        "price_cap",
    )
    worse = _with_sampled_proof(refined, _sol(10.6, 10.6, "optimal"), 0.01)
    assert (worse.objective_s, worse.bound_s, worse.status) == (10.5, 9.95, "time_limit")
