"""Option.but is dataclasses.replace without __init__: the same option, field for field."""

from __future__ import annotations

import random
from dataclasses import fields, replace

import pytest

from solver.cost.problem import Option


def _option(rng: random.Random) -> Option:
    names = rng.sample(["input", "weight", "output", "bias"], rng.randint(1, 4))
    return Option(
        sharding=rng.choice(["none", "tokens", "hidden+rs"]),
        tile=f"{rng.randint(1, 9)}x{rng.randint(1, 9)}",
        compute_s=rng.random(),
        network_s=rng.random(),
        network_bytes=rng.random() * 1e6,
        buffer_bytes=rng.random() * 1e5,
        out_tile_bytes=rng.random() * 1e4,
        traffic=tuple((n, rng.random() * 1e6) for n in names),
        weights=(("L0_q_proj/weight", 1024.0),),
        sizes=tuple((n, rng.random() * 1e6) for n in names),
    )


def test_but_equals_replace_on_random_options_and_changes():
    rng = random.Random(7)
    names = [f.name for f in fields(Option)]
    for _ in range(200):
        o, other = _option(rng), _option(rng)
        changed = {n: getattr(other, n) for n in rng.sample(names, rng.randint(0, 5))}
        copy = o.but(**changed)
        assert copy == replace(o, **changed) and hash(copy) == hash(replace(o, **changed))
        assert o == replace(copy, **{n: getattr(o, n) for n in changed})  # o untouched
        for name, _ in copy.traffic:  # the scan reads what a dict would
            assert copy.traffic_of(name) == dict(copy.traffic)[name]
        assert copy.traffic_of("absent") == 0.0 == copy.size_of("absent")


def test_but_names_an_unknown_field():
    o = _option(random.Random(1))
    with pytest.raises(TypeError, match="no field 'tiles'"):
        o.but(tiles="1x1")
