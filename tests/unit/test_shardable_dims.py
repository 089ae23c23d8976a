"""A kernel's declared shardable dims stay its only splits at any size (generator.builder).

Batch 2 over DP 2 decodes one token per replica. A norm declares `tokens` alone (it
reduces over `hidden`); dropping that size-1 dim left no declared dim, which the menus
read as "every loop dim", so the solver split the norm over `hidden`, and the plan.txt it
wrote was rejected when run (the pins are checked on the whole batch's graph, where the
norm splits `tokens` only). Found by fuzzing `mapshard run`.
"""

from __future__ import annotations

from generator.builder import Arg, GraphBuilder
from generator.graph import KernelKind, OperandRole
from generator.pins import sharding_problem
from solver.cost.menus import sharding_choices


def _norm(tokens: int):
    b = GraphBuilder("g")
    x = b.input((("tokens", tokens), ("hidden", 64)), 2.0)
    args = (
        Arg("x", OperandRole.INPUT, (("tokens", tokens), ("hidden", 64)), 2.0, x),
        Arg("y", OperandRole.OUTPUT, (("tokens", tokens), ("hidden", 64)), 2.0),
    )
    b.add_vector("norm", KernelKind.NORM, args, 5.0 * tokens * 64, shardable=("tokens",))
    return b.kernels["norm"]


def test_a_one_token_norm_is_not_split_over_hidden() -> None:
    one = _norm(1)
    assert one.shardable_dims == ("tokens",)
    assert sharding_choices(one, 2) == ["none"]  # one token: no split at all
    assert sharding_choices(_norm(8), 2) == ["none", "tokens"]
    # whatever the replica's batch, a choice of its graph is a valid pin on the whole one
    for sharding in sharding_choices(one, 2):
        assert sharding_problem(_norm(2), sharding) == ""
    assert sharding_problem(_norm(2), "hidden") != ""


def test_undeclared_dims_still_mean_every_loop_dim() -> None:
    b = GraphBuilder("g")
    dims = (("tokens", 1), ("hidden", 64))
    x = b.input(dims, 2.0)
    args = (Arg("x", OperandRole.INPUT, dims, 2.0, x), Arg("y", OperandRole.OUTPUT, dims, 2.0))
    b.add_vector("act", KernelKind.ELEMENTWISE, args, 64.0)
    assert b.kernels["act"].shardable_dims == ()
    assert sharding_choices(b.kernels["act"], 2) == ["none", "hidden"]
