"""The embedding runs on the first pipeline stage and the LM head on the last (Megatron-LM,
untied embeddings): with PP no stage holds both, in time or in memory; a tied table is one
weight and stays with the head. Numbers by hand from made-up per-phase times and storage."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.build import build_workload
from schema import setup_pb2
from solver.search import footprint, stages


def _workload(tied: bool):
    s = setup_pb2.Setup()
    t = s.workload.llm_training
    t.global_batch, t.micro_batch, t.seq_len = 2, 1, 128
    spec = t.model.inline
    spec.name, spec.hidden_size, spec.num_layers, spec.num_heads = "m", 256, 4, 4
    spec.intermediate_size, spec.vocab_size, spec.ffn = 1024, 32000, setup_pb2.SWIGLU
    spec.tie_embeddings = tied
    s.system.chip, s.system.num_chip = "H100-SXM5-80GB", 1
    return build_workload(s, Path("setup.txt"), 1)


def test_untied_embedding_is_a_phase_of_its_own():
    w = _workload(tied=False)
    roles = {p.name: p.role for p in w.phases}
    assert roles == {"layer": "layer", "embed": "embed", "head": "head"}
    embed = next(p for p in w.phases if p.role == "embed").graph
    head = next(p for p in w.phases if p.role == "head").graph
    assert all(k.name.startswith("embedding") for k in embed.kernels)
    assert not any(k.name.startswith("embedding") for k in head.kernels)
    # the parameter count is the model's whatever the split: 4 layers + 2 tables of 32000 x 256
    layer = 256 * 256 * 4 + 3 * 256 * 1024 + 2 * 256  # q, k, v, o; gate, up, down; 2 norms
    assert w.model.num_params == 4 * layer + 2 * 32000 * 256 + 256  # + final norm


def test_tied_embedding_stays_with_the_head():
    w = _workload(tied=True)
    assert [p.role for p in w.phases] == ["layer", "head"]


def test_the_busiest_stage_runs_the_larger_edge():
    w = _workload(tied=False)
    latency = {"layer": 1.0, "embed": 0.2, "head": 0.5}
    assert stages.edge_stage_s(w, latency, pp=1) == pytest.approx(0.7)  # one stage: both
    assert stages.edge_stage_s(w, latency, pp=2) == pytest.approx(0.5)  # last stage's head
    latency["embed"] = 0.9
    assert stages.edge_stage_s(w, latency, pp=4) == pytest.approx(0.9)


def test_the_busiest_stage_stores_the_larger_table():
    w = _workload(tied=False)
    per_instance = {"layer": 10.0, "embed": 7.0, "head": 9.0}
    one = footprint.stored_params(w, 1, per_instance)
    two = footprint.stored_params(w, 2, per_instance)
    assert sum(one.values()) == pytest.approx(4 * 10 + 7 + 9)
    assert sum(two.values()) == pytest.approx(2 * 10 + 9)  # 2 layers and the LM head


def test_edges_in_the_split_take_a_layers_place():
    from dataclasses import replace

    w = replace(_workload(tied=False), edges_in_pipeline_split=True)
    latency = {"layer": 1.0, "embed": 0.2, "head": 1.5}
    # 4 layers + 2 edges over PP 2: 3 places a stage, embed + 2 layers | 2 layers + head
    assert stages.stage_work_s(w, latency, pp=2) == pytest.approx(2.0 + 1.5)
    # over PP 3: 2 places, embed + 1 | 2 layers | 1 + head
    assert stages.stage_work_s(w, latency, pp=3) == pytest.approx(max(2.0, 1.0 + 1.5))
    latency["head"] = 0.5  # the middle stage (2 layers) is now the busiest
    assert stages.stage_work_s(w, latency, pp=3) == pytest.approx(2.0)
    # without the option: ceil(4 / 2) = 2 layers beside the larger edge
    plain = replace(w, edges_in_pipeline_split=False)
    assert stages.stage_work_s(plain, latency, pp=2) == pytest.approx(2.5)
    # one stage: every layer and both edges, either way
    assert stages.stage_work_s(w, latency, pp=1) == pytest.approx(4 + 0.2 + 0.5)
