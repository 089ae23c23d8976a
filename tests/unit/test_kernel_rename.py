"""Kernel.renamed (a copy without re-running __init__) equals dataclasses.replace's copy."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path

from mapshard import pipeline

ROOT = Path(__file__).resolve().parents[2]


def test_renamed_kernels_equal_replaced_ones_in_value_hash_repr_and_pickle() -> None:
    loaded = pipeline.load(ROOT / "scenarios" / "mixtral_8x7b_train_64xb200_ep8")
    workload = pipeline.assemble(loaded, pipeline.resolve(loaded)).workload
    kernels = [k for p in workload.phases for k in p.graph.kernels]
    assert len(kernels) > 50
    for k in kernels:
        hash(k)  # the original's hash is kept on it: the copy must not carry it over
        fast, slow = k.renamed("other\x00name"), replace(k, name="other\x00name")
        assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
        assert fast.inputs == slow.inputs and fast.outputs == slow.outputs
        assert pickle.loads(pickle.dumps(fast)) == slow
        assert k.name != "other\x00name" and fast != k
