"""Repetition (solver/fusion/period.py): L copies of one layer in one graph have the layer's
length as period, a graph without repetition has none, and the segment prices copied from
one layer to the next equal the prices computed row by row, bit for bit, as does the
whole search's answer."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import numpy as np
import pytest
from solver_fixtures import elementwise, gemm, residual_add, small_system, tp2_problem

from generator.graph import Edge, Kernel, KernelGraph
from solver.cost.problem import Option
from solver.fusion import segment_price
from solver.fusion.alternate import restrict
from solver.fusion.period import find_period, option_key, periodicity
from solver.fusion.segment_bound import KnapsackBounds
from solver.fusion.segment_search import knapsack_row
from solver.fusion.solve import solve_graph
from solver.options import SolverOptions

LAYER = 5  # kernels per layer below


def _layer(copy: int, width: int) -> tuple[list[Kernel], list[Edge]]:
    """x -> gemm -> gelu -> gemm -> add(x) -> scale: a skip edge, so a DAG, not a chain."""
    t = 16
    names = [f"L{copy}_{s}" for s in ("up", "act", "down", "add", "out")]
    up = gemm(names[0], t, width, 32, a_dims=("t", "h"))
    act = elementwise(names[1], t, 32, dims=("t", f"{names[0]}_o"))
    down = gemm(names[2], t, 32, width, a_dims=("t", f"{names[0]}_o"))
    # the down projection's output dim is named after it; the add reads it as ("t", "h")
    add = residual_add(names[3], t, width, ("t", "h"))
    out = elementwise(names[4], t, width, dims=("t", "h"))
    b = lambda k: k.operand_bytes(k.outputs[0])  # noqa: E731
    edges = [
        Edge(up.name, act.name, "x", tensor_bytes=b(up)),
        Edge(act.name, down.name, "a", tensor_bytes=b(act)),
        Edge(down.name, add.name, "x", tensor_bytes=b(down)),
        Edge(add.name, out.name, "x", tensor_bytes=b(add)),
    ]
    return [up, act, down, add, out], edges


def _model(layers: int, width: int = 32) -> KernelGraph:
    """`layers` copies; copy l's output feeds copy l + 1's first GEMM and its residual."""
    kernels: list[Kernel] = []
    edges: list[Edge] = []
    for copy in range(layers):
        ks, es = _layer(copy, width)
        if copy:
            prev = kernels[-1]
            size = prev.operand_bytes(prev.outputs[0])
            es = [
                Edge(prev.name, ks[0].name, "a", tensor_bytes=size),
                Edge(prev.name, ks[3].name, "r", tensor_bytes=size),
                *es,
            ]
        kernels += ks
        edges += es
    return KernelGraph("periodic", tuple(kernels), tuple(edges))


def _problem(layers: int, sram_bytes: float = 2e4, graph: KernelGraph | None = None):
    system = small_system(sram_bytes=sram_bytes, link_Bps=1e10)
    return tp2_problem(
        graph or _model(layers),
        system,
        dataflow=True,
        overlap=True,
        max_configs=2 * layers,
        tiling_points=4,
    )


def test_copies_of_a_layer_have_its_length_as_period() -> None:
    problem = _problem(6)
    names = [m.name.split("_", 1)[1] for m in problem.kernels]
    # the canonical order keeps the copies in layer order: name l*5+s is layer l's s
    assert names[LAYER:] == names[:-LAYER]
    assert find_period(problem) == LAYER
    period = periodicity(problem)
    assert period is not None and period.period == LAYER
    # copy 0 has no producer before it (no in-edges at its first GEMM and add), and the
    # second-to-last copy feeds the last one, which feeds nothing: exactly those differ
    # from their copy 5 later; every other kernel of copies 1..3 equals its copy
    n = 6 * LAYER
    assert len(period.same_as_next) == n - LAYER
    differ = [k for k, same in enumerate(period.same_as_next) if not same]
    assert [k for k in differ if k >= LAYER] == [4 * LAYER + 4]
    assert all(period.same_as_next[LAYER : 4 * LAYER + 4])


def test_option_keys_ignore_weight_names_of_each_copy() -> None:
    """Two copies of a layer name their weights after the copy (L0_q/weight, L1_q/weight):
    an option that stores or replicates them has the same key in both, else no layer graph
    with a weight rule (any TP > 1 run) would be found periodic."""
    a = Option("h", "t", 1e-6, 0.0, 0.0, 64.0, 0.0, (), weights=(("L0_q/weight", 64.0),))
    b = Option("h", "t", 1e-6, 0.0, 0.0, 64.0, 0.0, (), weights=(("L1_q/weight", 64.0),))
    a, b = replace(a, replicated=("L0_q/weight",)), replace(b, replicated=("L1_q/weight",))
    assert option_key(a, ("h",)) == option_key(b, ("h",))
    assert option_key(a, ("h",)) != option_key(replace(b, replicated=()), ("h",))


def test_no_period_without_repetition() -> None:
    # three layers, the middle one wider: no shift maps the graph onto itself
    layers = [_layer(copy, width) for copy, width in enumerate((32, 48, 32))]
    kernels = tuple(k for ks, _ in layers for k in ks)
    graph = KernelGraph("three", kernels, tuple(e for _, es in layers for e in es))
    assert find_period(_problem(3, graph=graph)) is None


def _fixed(layers: int, seed: int, sram_bytes: float, odd_layer: int = -1):
    """The problem with one sharding per kernel, the same one at the same place of every
    layer (what the alternation's restricted problems look like on a periodic graph), but
    for layer `odd_layer`, whose shardings are drawn on their own."""
    problem = _problem(layers, sram_bytes)
    rng = random.Random(seed)
    per_layer = [rng.choice(m.shardings) for m in problem.kernels[:LAYER]]
    shardings = [per_layer[k % LAYER] for k in range(len(problem.kernels))]
    if odd_layer >= 0:
        own = [s for s in problem.kernels[0].shardings if s != per_layer[0]]
        shardings[odd_layer * LAYER] = own[0]
    for k, s in enumerate(shardings):
        if s not in problem.kernels[k].shardings:
            shardings[k] = problem.kernels[k].shardings[0]
    fixed, _ = restrict(problem, shardings)
    return fixed


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("sram_bytes", [2e3, 4e3, 1e6])
def test_copied_prices_equal_the_row_by_row_prices(
    seed: int, sram_bytes: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2-4 kB: the longest segment that fits spans one to three layers (copies happen);
    # 1 MB: every segment fits, each row reaches the unlike last layer (no copy)
    fixed = _fixed(10, seed, sram_bytes)
    assert periodicity(fixed) is not None
    copied = segment_price.fixed_sharding_prices(fixed)
    monkeypatch.setattr(segment_price, "periodicity", lambda problem: None)
    direct = segment_price.fixed_sharding_prices(fixed)
    assert copied is not None and direct is not None
    assert np.isfinite(direct).sum() >= len(fixed.kernels)  # every kernel fits alone
    # bit for bit, inf where nothing fits included
    assert np.array_equal(copied, direct)


@pytest.mark.parametrize("seed", range(3))
def test_copies_around_a_layer_sharded_its_own_way(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # layer 5's first GEMM takes another sharding: no strict period, the likely one is
    # the layer's length and copies are made between the layers that are alike
    fixed = _fixed(10, seed, 2e3, odd_layer=5)
    assert find_period(fixed) is None
    period = periodicity(fixed)
    assert period is not None and period.period == LAYER
    assert not period.same_as_next[4 * LAYER] and not period.same_as_next[5 * LAYER]
    swept = _sweeps(monkeypatch)
    copied = segment_price.fixed_sharding_prices(fixed)
    # rows of layers 3-4 reach layer 5's odd kernel: their prefix is copied and the
    # sweep resumes there from the copied state (bit for bit the same, below)
    assert any(resumed for _, resumed in swept)
    assert len(swept) < len(fixed.kernels)
    monkeypatch.setattr(segment_price, "periodicity", lambda problem: None)
    direct = segment_price.fixed_sharding_prices(fixed)
    assert copied is not None and np.array_equal(copied, direct)


def test_copies_are_made(monkeypatch: pytest.MonkeyPatch) -> None:
    # rows computed by a sweep: those of the first two layers and of the last ones (whose
    # segments reach the unlike last layer), not those in between (2 kB: a row's segments
    # span at most 7 kernels)
    fixed = _fixed(10, 0, 2e3)
    swept = _sweeps(monkeypatch)
    segment_price.fixed_sharding_prices(fixed)
    n = len(fixed.kernels)
    whole = [i for i, resumed in swept if not resumed]
    assert all(i < 2 * LAYER or i >= n - 2 * LAYER for i in whole)
    assert len(whole) < n / 2


def test_heuristic_prices_survive_an_exact_front_past_its_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 1 MB: every segment fits, so a row's exact front grows with every kernel it adds;
    # past FRONT_LIMIT the exact copied rows give up. A heuristic sweep (`thin`) then
    # prices from thinned fronts, row by row, instead of returning nothing (a large
    # GEMM layer's alternation fell back to the proof search's knapsack bounds)
    fixed = _fixed(10, 0, 1e6)
    exact = segment_price.fixed_sharding_prices(fixed)
    assert exact is not None
    # 16 states: the exact fronts pass it, the fronts thinned to 4 SRAM slices do not
    monkeypatch.setattr(segment_price, "FRONT_LIMIT", 16)
    monkeypatch.setattr(segment_price, "THIN_SLICES", 4)
    assert segment_price.fixed_sharding_prices(fixed) is None
    thinned = segment_price.fixed_sharding_prices(fixed, thin=True)
    assert thinned is not None
    # each thinned price is a real configuration's: at or above the exact one, and
    # finite wherever the exact one is (every segment fits)
    assert np.array_equal(np.isfinite(thinned), np.isfinite(exact))
    finite = np.isfinite(exact)
    assert (thinned[finite] >= exact[finite] * (1 - 1e-12)).all()
    monkeypatch.setattr(segment_price, "periodicity", lambda problem: None)
    assert np.array_equal(thinned, segment_price.fixed_sharding_prices(fixed, thin=True))


def _sweeps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """(row, resumed from a copied state) of every sweep the pricer makes from now on."""
    swept: list[tuple[int, bool]] = []
    row = segment_price.KnapsackPricer.row

    def counting(self, i, stop, out, **kw):
        swept.append((i, kw.get("resume") is not None))
        return row(self, i, stop, out, **kw)

    monkeypatch.setattr(segment_price.KnapsackPricer, "row", counting)
    return swept


@pytest.mark.parametrize("seed", range(2))
def test_search_answer_unchanged(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    fixed = _fixed(10, seed, 3e3)
    options = SolverOptions(gap=0.0)
    with_copies = solve_graph(fixed, options)
    monkeypatch.setattr(segment_price, "periodicity", lambda problem: None)
    direct = solve_graph(fixed, options)
    assert math.isfinite(direct.objective_s)
    assert with_copies.objective_s == direct.objective_s
    assert with_copies.configs == direct.configs
    assert with_copies.choice == direct.choice
    assert with_copies.status == direct.status == "optimal"


ROLES = ("f0", "f1", "f2", "f3", "f4", "g0", "g1", "g2", "g3")


def _headed_model(layers: int, names: dict[tuple[int, str], str] | None = None) -> KernelGraph:
    """Layers like a training layer's: a forward chain f0..f4 with a residual f0 -> f4, and
    a chain g0 -> g1 -> g2 -> g3 that starts from nothing (as a layer's backward pass starts
    from its loss gradient) and joins f2 at g2. Copy l's f4 feeds copy l + 1's f0, the only
    edge between copies. `names` renames kernels (copy, role) -> name."""
    t, h = 16, 32
    name = (lambda c, r: names[(c, r)]) if names else (lambda c, r: f"L{c}_{r}")
    kernels: list[Kernel] = []
    edges: list[Edge] = []
    size = 2 * t * h
    for c in range(layers):
        for role in ROLES:
            two = role in ("f4", "g2")
            maker = residual_add if two else elementwise
            kernels.append(maker(name(c, role), t, h, ("t", "h")))
        pairs = [("f0", "f1", "x"), ("f1", "f2", "x"), ("f2", "f3", "x"), ("f3", "f4", "x")]
        pairs += [("f0", "f4", "r"), ("g0", "g1", "x"), ("g1", "g2", "x"), ("f2", "g2", "r")]
        pairs += [("g2", "g3", "x")]
        edges += [Edge(name(c, a), name(c, b), op, tensor_bytes=size) for a, b, op in pairs]
        if c:
            edges.append(Edge(name(c - 1, "f4"), name(c, "f0"), "x", tensor_bytes=size))
    return KernelGraph("headed", tuple(kernels), tuple(edges))


def test_canonical_order_of_repeated_layers_is_periodic_whatever_the_numbering() -> None:
    layers, p = 5, len(ROLES)
    graph = _headed_model(layers)
    order = graph.canonical_order()
    pos = {name: i for i, name in enumerate(order)}
    assert all(pos[e.src] < pos[e.dst] for e in graph.edges)
    roles = [name.split("_", 1)[1] for name in order]
    # layer by layer: each copy's 9 kernels together, in the same order in every copy
    # (a plain depth-first order started every copy's g0 chain first)
    assert [name.split("_")[0] for name in order] == [f"L{c}" for c in range(layers) for _ in ROLES]
    assert roles[p:] == roles[:-p]
    assert find_period(_problem(layers, graph=graph)) == p
    # any numbering and naming: the same order of (copy, role)
    rng = random.Random(3)
    keys = [(c, r) for c in range(layers) for r in ROLES]
    names = dict(zip(keys, (f"k{i}" for i in rng.sample(range(len(keys)), len(keys)))))
    shuffled = _headed_model(layers, names)
    shuffled = replace(shuffled, kernels=tuple(rng.sample(shuffled.kernels, len(keys))))
    back = {v: k for k, v in names.items()}
    assert [back[name] for name in shuffled.canonical_order()] == [
        (int(name.split("_")[0][1:]), name.split("_", 1)[1]) for name in order
    ]


@pytest.mark.parametrize("sram_bytes", [2e3, 4e3])
def test_copied_knapsack_bounds_equal_the_direct_rows(sram_bytes: float) -> None:
    # every sharding in play (the proof search's bounds): rows copied from p earlier
    problem = _problem(10, sram_bytes)
    period = periodicity(problem)
    assert period is not None and period.period == LAYER
    bounds, reference = KnapsackBounds(problem), KnapsackBounds(problem)
    swept: list[int] = []
    row = bounds.row
    bounds.row = lambda i: (swept.append(i), row(i))[1]  # type: ignore[method-assign]
    rows: dict[int, np.ndarray] = {}
    n = len(problem.kernels)
    for i in range(n):
        got = knapsack_row(bounds, rows, period, i)
        assert np.array_equal(got, reference.row(i)), i
    assert np.isfinite(rows[3 * LAYER]).sum() >= 2
    # the rows of the first layers and of those reaching the last are swept; at least
    # two layers' rows are copies
    assert len(swept) <= n - 2 * LAYER
    assert all(i < 2 * LAYER or i >= n // 2 for i in swept)
