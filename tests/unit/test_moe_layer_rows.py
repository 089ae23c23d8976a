"""moe_layer rows: one training layer's MoE block, forward or backward, timed alone
(Megatron-LM's MoE-layer performance baselines, P-MMP rows). The prediction is the plan's
time of exactly the block's kernels in that pass."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from generator.moe_layout import in_moe_block
from mapshard import pipeline
from mapshard.fidelity.cases import read_cases
from mapshard.fidelity.predict import moe_block_s
from mapshard.fidelity.scenarios import Unmodelable, build_setup, load_case_scenario
from schema import setup_pb2

CHECK = Path(__file__).parents[1] / "data" / "validation" / "validation_public_check.csv"
# the Mixtral proxy's MoE block, kernel by kernel, named by hand (one expert per GPU: no
# local-expert sort; BF16: no quantisation)
FORWARD = {"router", "topk", "dispatch", "expert_gate_up", "expert_act", "expert_down", "combine"}
BACKWARD = {
    "combine_bwd",
    "expert_down_bwd",
    "expert_down_weight_update",
    "expert_act_bwd",
    "expert_gate_up_bwd",
    "expert_gate_up_weight_update",
    "dispatch_bwd",
}


def _rows() -> dict[str, object]:
    return {c.id: c for c in read_cases(CHECK) if c.kind == "moe_layer"}


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    case = _rows()["P-MMP01"]
    return pipeline.plan(load_case_scenario(case, tmp_path_factory.mktemp("moe")))


def test_the_block_is_its_kernels_in_that_pass(plan):
    layer = next(ph for ph in plan.phases if ph.role == "layer")
    latency = {}
    for c in layer.configs:
        assert len(c.kernels) == 1  # kernel by kernel
        latency[c.kernels[0]] = c.latency_s
    assert FORWARD | BACKWARD <= set(latency)
    fwd, bwd = (sum(latency[n] for n in names) for names in (FORWARD, BACKWARD))
    assert moe_block_s(plan, "fwd") == pytest.approx(fwd, rel=1e-12)
    assert moe_block_s(plan, "bwd") == pytest.approx(bwd, rel=1e-12)
    # the attention, norms and residuals are outside the block
    assert fwd + bwd < layer.latency_s * (1 - 1e-3)
    with pytest.raises(Unmodelable):
        moe_block_s(plan, "both")


def test_a_rows_dispatcher_is_its_setups():
    rows = _rows()
    assert set(rows) == {"P-MMP01", "P-MMP02", "P-MMP03", "P-MMP04"}
    for rid, want in (("P-MMP01", "MOE_DISPATCHER_ALLTOALL"), ("P-MMP03", "MOE_DISPATCHER_DEEPEP")):
        setup, _ = build_setup(rows[rid])
        got = setup.workload.llm_training.moe_dispatcher
        assert setup_pb2.MoeDispatcher.Name(got) == want


def test_an_inline_models_shared_experts_are_its_setups():
    """The DeepSeek-shaped rows (FIT) carry one shared expert as wide as a routed one: the
    setup says so, and its MLP's kernels are part of the block."""
    fit = CHECK.with_name("validation_public_fit.csv")
    rows = {c.id: c for c in read_cases(fit) if c.kind == "moe_layer"}
    assert set(rows) == {"P-MMP05", "P-MMP06", "P-MMP07", "P-MMP08"}
    setup, _ = build_setup(rows["P-MMP05"])
    spec = setup.workload.llm_training.model.inline
    assert (spec.num_experts, spec.experts_per_token, spec.num_shared_experts) == (32, 8, 1)
    scenario = load_case_scenario(rows["P-MMP05"], Path("moe_layer_rows"))
    layer = next(p for p in scenario.workload.phases if p.name == "layer")
    names = {k.name for k in layer.graph.kernels}
    shared = {"shared_gate_up", "shared_act", "shared_down", "moe_sum"}
    assert shared <= names and all(in_moe_block(n) for n in shared)
    assert not in_moe_block("mlp_norm") and not in_moe_block("attention")


def _with(case, **extra: str):
    return replace(case, extra={**case.extra, **extra})


def test_shared_experts_is_strict():
    """A count on a dense model, a malformed count, and a count a shipped config contradicts
    are errors; a shipped config's own count (DeepSeek-V3: one shared expert) is accepted."""
    fit = CHECK.with_name("validation_public_fit.csv")
    row = next(c for c in read_cases(fit) if c.id == "P-MMP05")
    dense = replace(row, cells={**row.cells, "experts": "", "experts_per_token": ""})
    for bad in (_with(dense, shared_experts="1"), _with(row, shared_experts="one")):
        with pytest.raises(Unmodelable):
            build_setup(bad)
    with pytest.raises(Unmodelable):
        build_setup(_with(row, shared_experts=""))  # a bare key
    for count, ok in (("1", True), ("2", False)):
        case = _with(row, hf_config="deepseek-ai/DeepSeek-V3", shared_experts=count)
        if ok:
            build_setup(case)
        else:
            with pytest.raises(Unmodelable):
                build_setup(case)
