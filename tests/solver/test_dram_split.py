"""The DRAM left to weights, split among a workload's graphs (solver.search.dram_split).

Two head graphs on 2 chips (TP 2; one ring of 1 MB/s links, so no plan pays a collective),
a chip of 1e14 FLOP/s whose DRAM streams 1e11 B/s: every GEMM is DRAM-bound, its time the
bytes it moves / 1e11 B/s. C[t, o] = A[t, h] x W[h, o], 2 B per element, h = o = 32, so W
is 1,024 parameters = 2,048 B whole or 1,024 B split over the 2 chips.
  split on t (W replicated): A/2 + W + C/2 read and written per chip;
  split on o (W split):      A + W/2 + C/2.
Graph `h_a`: one GEMM, t = 64 (A = C = 4,096 B):
  t: 2,048 + 2,048 + 2,048 = 6,144 B -> 6.144e-8 s;  o: 4,096 + 1,024 + 2,048 = 7,168 B
  -> 7.168e-8 s (replication saves 1.024e-8 s).
Graph `h_b`: one GEMM, t = 1,024 (A = C = 65,536 B):
  t: 32,768 + 2,048 + 32,768 = 67,584 B -> 6.7584e-7 s;  o: 65,536 + 1,024 + 32,768 =
  99,328 B -> 9.9328e-7 s (replication saves 3.1744e-7 s).
Memory per chip: the largest activation, h_b's A + C over 2 chips = 65,536 B, plus the
weights: 2,048 B at least (both split). A DRAM of 68,708 B leaves 1,124 B: room for one
replicated weight (+1,024 B), not two. Handing the room to the graphs in order gives it to
whichever comes first; replicating h_a's weight leaves h_b split, 6.144e-8 + 9.9328e-7 =
1.05472e-6 s, while the best split replicates h_b's: 7.168e-8 + 6.7584e-7 = 7.4752e-7 s.
(TP 1 would hold 131,072 B of activations: it does not fit.)
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import replace

import pytest

import solver.search.planner as planner
from generator.graph import KernelGraph, Phase, Workload
from hardware.system import MemoryLevel, NetworkLevel, System, Topology
from mapshard.report.terminal import headline_lines
from solver.check import mapping_cost
from solver.cost.weights import StepWeights, WeightRule
from solver.fusion.segment_search import GraphSolution, SearchStats
from solver.options import ExecutionOptions, SolverOptions
from solver.search import dram_split
from solver.search.parallel import enumerate_choices
from solver.search.phase_problem import phase_problem
from tests.solver_fixtures import gemm, small_chip

ACT_B = 65_536  # h_b's A + C over 2 chips
BYTES_PER_PARAM = 2.0
RULE = WeightRule(BYTES_PER_PARAM)  # inference: weights only (storage_rule.weight_rule)


def _system(dram_bytes: float) -> System:
    return System(
        num_chips=2,
        chip=small_chip(1e6, peak=1e14),
        memory=(MemoryLevel("dram", dram_bytes, 1e11),),
        network=(NetworkLevel("ring", Topology.RING, 2, 1e6, 1e-6, ("TP",)),),
    )


def _workload(a_gemms: int = 1, b_first: bool = False) -> Workload:
    a = KernelGraph("a", tuple(gemm(f"ga{i}", 64, 32, 32) for i in range(a_gemms)), ())
    b = KernelGraph("b", (gemm("gb", 1024, 32, 32),), ())
    phases = (Phase("h_a", a, role="head"), Phase("h_b", b, role="head"))
    return Workload(kind="graph", phases=phases[::-1] if b_first else phases)


def _solve(workload: Workload, dram_bytes: float):
    options = SolverOptions()
    return planner.search_workload(
        workload, _system(dram_bytes), ExecutionOptions(dataflow=False), options
    )


def _enumerate(workload: Workload, dram_bytes: float) -> float:
    """Every sharding of every kernel of both graphs at TP 2 (the kernels share no edges),
    priced by solver.check (no MILP, no split): the least latency whose stored weights fit
    the DRAM beside the activations."""
    system = _system(dram_bytes)
    tp2 = next(c for c in enumerate_choices(system, 2, 1, 1) if c.degree("TP") == 2)
    problems = [
        phase_problem(p.graph, system, tp2, ExecutionOptions(dataflow=False), 1, RULE)
        for p in workload.phases
    ]
    best = math.inf
    menus = [range(len(m.options)) for pr in problems for m in pr.kernels]
    for choice in itertools.product(*menus):
        latency, stored, i = 0.0, 0.0, 0
        for pr in problems:
            own = choice[i : i + len(pr.kernels)]
            i += len(pr.kernels)
            latency += mapping_cost(pr, [[k] for k in range(len(own))], own)[0]
            stored += sum(e for m, o in zip(pr.kernels, own) for _, e in m.options[o].weights)
        if ACT_B + stored * BYTES_PER_PARAM <= dram_bytes:
            best = min(best, latency)
    return best


@pytest.mark.parametrize("b_first", [False, True])
def test_the_split_replicates_the_weight_that_saves_more_in_either_phase_order(b_first):
    workload = _workload(b_first=b_first)
    plan = _solve(workload, 68_708)
    best = (4_096 + 1_024 + 2_048) / 1e11 + (32_768 + 2_048 + 32_768) / 1e11
    assert best == pytest.approx(7.4752e-7, rel=1e-12)
    assert _enumerate(workload, 68_708) == pytest.approx(best, rel=1e-9)
    assert plan.latency_s == pytest.approx(best, rel=1e-9)
    greedy = (2_048 * 3) / 1e11 + (65_536 + 1_024 + 32_768) / 1e11  # h_a first, replicated
    assert plan.latency_s < greedy * 0.8
    assert plan.stats.status == "optimal" and plan.stats.gap == pytest.approx(0, abs=1e-9)
    shard = {p.name: p.kernels[0].sharding for p in plan.phases}
    assert shard == {"h_a": "ga0_o", "h_b": "t"}
    assert plan.memory.weights == (512 + 1_024) * BYTES_PER_PARAM


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    inner = planner.solve_graph

    def counted(problem, options):
        calls.append(1)
        return inner(problem, options)

    monkeypatch.setattr(planner, "solve_graph", counted)
    return calls


def test_room_for_every_graph_costs_one_solve_per_graph(monkeypatch):
    """1 TB of DRAM: both weights replicated (6.144e-8 + 6.7584e-7 s), each graph solved
    once per parallel choice solved; the same with 68,708 B traces frontiers (more)."""
    calls = _counting(monkeypatch)
    plan = _solve(_workload(), 1e12)
    assert plan.latency_s == pytest.approx(6.144e-8 + 6.7584e-7, rel=1e-9)
    assert len(calls) == 2 * plan.stats.choices_solved
    calls.clear()
    plan = _solve(_workload(), 68_708)
    assert len(calls) > 2 * plan.stats.choices_solved


def test_a_split_with_no_room_to_share_never_solves_again():
    """split_dram's first step: graphs whose optima fit together are not solved again."""

    def never(phase, cap):
        raise AssertionError("solved again")

    layout = dram_split.Layout((), {}, {}, 2.0, 0.0, 0.0)
    split = dram_split.split_dram(layout, {}, never, lambda lat, stored, weights: 0.0)
    assert split.proven and split.solves == 0


def test_a_split_not_proven_says_so_and_bounds_the_optimum(monkeypatch):
    """h_a with two independent 64-token GEMMs (its frontier: both weights replicated
    2 x 6.144e-8 s at 2,048 parameters, one 6.144e-8 + 7.168e-8 s at 1,536, none 2 x 7.168e-8
    s at 1,024), h_b as above. DRAM 70,756 B leaves 70,756 - 65,536 - (1,024 + 512) x 2 =
    2,148 B: h_b replicated (+1,024 B) with one of h_a's (+1,024 B), not all three (+3,072).
    Best: 6.144e-8 + 7.168e-8 + 6.7584e-7 = 8.0896e-7 s. With no solve between each graph's
    largest and least storage the middle point of h_a is never seen: the plan (h_a split,
    h_b replicated: 2 x 7.168e-8 + 6.7584e-7 = 8.192e-7 s) is feasible, not called optimal,
    and its bound (each graph's fastest at its least storage: 2 x 6.144e-8 + 6.7584e-7 =
    7.9872e-7 s) is below the optimum."""
    workload, dram = _workload(a_gemms=2), 70_756
    best = 6.144e-8 + 7.168e-8 + 6.7584e-7
    assert _enumerate(workload, dram) == pytest.approx(best, rel=1e-9)
    assert _solve(workload, dram).stats.status == "optimal"
    assert _solve(workload, dram).latency_s == pytest.approx(best, rel=1e-9)
    monkeypatch.setattr(dram_split, "MAX_FRONTIER_SOLVES", 0)
    monkeypatch.setattr(dram_split, "REFIT_SHARES", ())  # no refit plans either
    plan = _solve(workload, dram)
    assert plan.latency_s == pytest.approx(2 * 7.168e-8 + 6.7584e-7, rel=1e-9)
    assert plan.stats.status == "time_limit" and plan.stats.stop_reason == "memory_split"
    assert plan.stats.bound == pytest.approx(2 * 6.144e-8 + 6.7584e-7, rel=1e-9)
    assert plan.stats.bound <= best
    assert plan.stats.gap == pytest.approx(1 - plan.stats.bound / plan.latency_s, rel=1e-9)
    stopped = [line for line in headline_lines(plan) if line.startswith("Search stopped")]
    assert stopped == [
        "Search stopped: on the cap of solves tracing each graph's latency-vs-DRAM frontier "
        "(the DRAM split among the graphs is not proven optimal)"
    ]


def _random_frontier(rng, least: int) -> list[tuple[int, float]]:
    """(storage, latency) points, storage falling from the top and latency rising."""
    stored, lat, points = least + rng.randint(3, 8) * 10, rng.uniform(1.0, 2.0), []
    while True:
        points.append((stored, lat))
        if stored <= least:
            return points
        stored = max(least, stored - rng.randint(1, 4) * 10)
        lat += rng.uniform(0.0, 1.0)


def test_the_split_matches_every_combination_of_frontier_points(monkeypatch):
    """Four graphs, two weight groups (prefill and decode of a 3-instance layer stack share
    one: it stores the larger of the two; the heads share the other), made-up frontiers and
    a made-up step (each graph's count x latency), 40 random draws. Every combination of one
    point per graph whose storage fits is tried here; the split must find the least step
    and call it proven, whatever the slack."""
    monkeypatch.setattr(dram_split, "stored_params", lambda problem, choice: float(choice[0]))
    # inference-like: the step charges nothing for the storage (no update, no replica sync)
    monkeypatch.setattr(dram_split, "step_weights", lambda problem, choice: StepWeights())
    monkeypatch.setattr(dram_split, "floor_weights", lambda problem, stored: StepWeights())
    binding = 0
    for seed in range(40):
        split, best = _random_split(seed)
        assert split.latency_s == pytest.approx(best, rel=1e-12), seed
        assert split.proven, seed
        binding += split.solves > 0
    assert binding >= 15  # draws whose graphs' optima with all the slack do not fit together


def _random_split(seed: int) -> tuple[dram_split.Split, float]:
    """The split of one random draw, and the least step over every combination."""
    rng = random.Random(seed)
    graph = KernelGraph("g", (gemm("g", 8, 8, 8),), ())
    names = {"prefill": "layer", "decode": "layer", "prefill_head": "head", "decode_head": "head"}
    phases = tuple(Phase(n, graph, role=r) for n, r in names.items())
    instances = {"prefill": 3, "decode": 3, "prefill_head": 1, "decode_head": 1}
    count = {"prefill": 1.0, "decode": 20.0, "prefill_head": 1.0, "decode_head": 20.0}
    least = {"prefill": 10, "decode": 10, "prefill_head": 20, "decode_head": 20}
    fronts = {n: _random_frontier(rng, least[n]) for n in names}
    slack_params = rng.randint(0, 120)

    def solve(phase, cap):  # the fastest point under the cap
        under = [(lat, s) for s, lat in fronts[phase.name] if s <= cap * (1 + 1e-9)]
        lat, s = min(under) if under else (math.inf, 0)
        status = "optimal" if under else "infeasible"
        return None, GraphSolution((), (s,), lat, lat if under else math.inf, status, SearchStats())

    layout = dram_split.Layout(phases, instances, least, 2.0, 2.0 * slack_params, 0.0)

    def evaluate(lat, stored, weights):
        return sum(count[n] * v for n, v in lat.items())

    tops = {}
    for p in phases:
        tops[p.name] = dram_split.point(layout.top_cap(p), *solve(p, layout.top_cap(p)))
    split = dram_split.split_dram(layout, tops, solve, evaluate)
    best = math.inf
    for combo in itertools.product(*(fronts[n] for n in names)):
        pick = dict(zip(names, combo))
        layer = max(pick[n][0] * 3 for n in ("prefill", "decode")) - 30
        head = max(pick[n][0] for n in ("prefill_head", "decode_head")) - 20
        if layer + head <= slack_params:
            best = min(best, sum(count[n] * pick[n][1] for n in names))
    return split, best


def _one_graph_split(
    monkeypatch, tol: float, least_extra: float, valve=lambda: False, refit: bool = False
):
    """One graph whose MILP proves its plans within 0.6 tol of their bounds (tol: the gap
    asked): the top plan stores 30 parameters at latency 1, the least-storage plan 10 at
    1 + least_extra * tol; the step charges the storage above the least, 0.6 tol of the
    latency at the top. Returns the split and the caps solved after the top."""
    monkeypatch.setattr(dram_split, "stored_params", lambda problem, choice: float(choice[0]))
    monkeypatch.setattr(dram_split, "step_weights", lambda problem, choice: StepWeights())
    monkeypatch.setattr(dram_split, "floor_weights", lambda problem, stored: StepWeights())
    phase = Phase("g", KernelGraph("g", (gemm("g", 8, 8, 8),), ()), role="layer")
    solved: list[float] = []

    def solve(p, cap):  # the fastest point under the cap, its bound 0.6 tol below it
        solved.append(cap)
        s, lat = (30, 1.0) if cap >= 30 else (10, 1.0 + least_extra * tol)
        return None, GraphSolution((), (s,), lat, lat * (1 - 0.6 * tol), "optimal", SearchStats())

    layout = dram_split.Layout((phase,), {"g": 1}, {"g": 10}, 2.0, 2.0 * 100, 0.0)
    least = layout.stored_per_chip({"g": 10})
    charge = 0.6 * tol / (layout.stored_per_chip({"g": 30}) - least)

    def evaluate(lat, stored, weights):
        return lat["g"] + (0.0 if stored is None else charge * (stored - least))

    top = dram_split.point(layout.top_cap(phase), *solve(phase, layout.top_cap(phase)))
    assert top.stored == 30
    solved.clear()
    refits: list[float] = []

    def refitted(name, point, cap):  # the top's configurations under the cap: the 10-param plan
        refits.append(cap)
        problem, sol = solve(phase, cap)
        solved.pop()  # a refit is not a graph search
        return dram_split.point(cap, problem, replace(sol, bound_s=point.sol.bound_s))

    split = dram_split.split_dram(
        layout, {"g": top}, solve, evaluate, tol, valve, refitted if refit else None
    )
    return split, solved + [("refit", c) for c in refits]


@pytest.mark.parametrize("least_extra", [0.1, 0.9])
def test_storage_cost_never_adds_to_the_graph_gap_unseen(monkeypatch, least_extra):
    """The top plan costs 1 + 0.6 tol; the bound at the least storage from its own solve is
    1 - 0.6 tol: a gap of 1.2 tol, above the one asked, though the storage looks nearly free
    (0.6 tol < tol). So the split must look below the top: the least-storage plan (bound
    (1 + e tol)(1 - 0.6 tol)) and the top's bound over its own storage, 1 - 0.6 tol +
    0.6 tol = 1. Best: the least of 1 + 0.6 tol and 1 + e tol; bound: the least of 1 and
    (1 + e tol)(1 - 0.6 tol); both e = 0.1 and e = 0.9 then close within tol."""
    tol = 1e-3
    split, solved = _one_graph_split(monkeypatch, tol, least_extra)
    assert split.solves >= 1 and solved  # it looked below the top
    assert split.latency_s == pytest.approx(min(1 + 0.6 * tol, 1 + least_extra * tol), rel=1e-12)
    bound = min(1.0, (1 + least_extra * tol) * (1 - 0.6 * tol))
    assert split.bound_s == pytest.approx(bound, rel=1e-9)
    assert split.proven and (split.latency_s - split.bound_s) / split.latency_s <= tol


def test_past_the_valve_the_split_solves_nothing_more(monkeypatch):
    """The split above that needs a solve below the top: once the wall-clock valve has
    tripped no graph is solved again, and the split is not proven."""
    tol = 1e-3
    split, solved = _one_graph_split(monkeypatch, tol, 0.1, valve=lambda: True)
    assert solved == [] and split.solves == 0
    assert not split.proven and split.latency_s == pytest.approx(1 + 0.6 * tol, rel=1e-12)


def test_a_refit_of_the_top_plan_spares_the_graph_search(monkeypatch):
    """The split above with a refit: the top's configurations re-solved at caps falling
    from 3/4 of the way from the least storage (10) to the top's (30) down to the least:
    25, 20, 15, 10, each the 10-parameter plan at 1 + 0.1 tol (within tol of the top's
    latency, so the next cap is tried), its bound the top's, 1 - 0.6 tol. The bound is
    then evaluate at the least storage, 1 - 0.6 tol, the best 1 + 0.1 tol: within tol
    (0.7 tol / (1 + 0.1 tol)) with no graph solved below the top."""
    tol = 1e-3
    split, calls = _one_graph_split(monkeypatch, tol, 0.1, refit=True)
    assert calls == [("refit", c) for c in (25.0, 20.0, 15.0, 10.0)]
    assert split.solves == 0 and split.proven
    assert split.latency_s == pytest.approx(1 + 0.1 * tol, rel=1e-12)
    assert split.bound_s == pytest.approx(1 - 0.6 * tol, rel=1e-12)
