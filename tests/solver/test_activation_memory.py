"""Memory counts what the time model moves and keeps (issue 33): each activation at the share
its producer's sharding leaves on a chip (not divided by TP when a tensor stays whole), with
and without sequence parallelism, and the LM head's FP32 loss at its peak, sized by the
vocabulary split. Every number is derived here by hand from the model config.

Tiny Llama: h = 256, L = 4 layers, 4 heads of 64 (MHA), SwiGLU f = 512, vocab V = 1000,
seq 128 x micro-batch 1 = T = 128 tokens, 2-byte activations (a = 2), no recompute.
Per layer the backward reads (the generator's autograd): the layer input x (T h a), the
attention norm's output (q/kv weight gradients), q and k/v after rope (T h a + 2 T h a, the
attention backward), the attention output (o_proj weight gradient), the attention
residual's output (the MLP norm's backward), the MLP norm's output (gate/up weight
gradient), gate/up (2 T f a, the SwiGLU backward) and the SwiGLU output (T f a, the down
weight gradient): 8 T h a + 3 T f a = 917504 bytes; the output projections' results feed
only the residual adds.
Megatron TP 2 (q/k/v, attention, gate/up and SwiGLU split on heads / ffn), no sequence
parallelism: x and the three norm / residual outputs run whole on each chip (4 T h a), the
rest is halved: 4 T h a + (4 T h a + 3 T f a) / 2 = 589824 bytes, not 917504 / 2 = 458752
(the old count, 22% short). With sequence parallelism the norms split on tokens too: 458752.
The head, vocabulary split: its input and final-norm output run whole (2 T h a); the loss
upcasts the 16-bit logits (T V a / 2) to FP32 (T V 4 / 2), overwrites that copy in place
(exp, softmax, gradient), and downcasts the gradient beside it (T V a / 2): the peak is
2 T h a + T V (a + 4) / 2 = 515072 bytes, held on top of the 4 layers' 4 x 589824.
"""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from google.protobuf import text_format

from generator.build import build_workload
from generator.graph import Workload
from mapshard import pipeline
from schema import setup_pb2
from solver.cost.menus import sharding_choices
from solver.search import dram_split, footprint
from solver.search.parallel import Choice

T, H, F, V, A, L = 128, 256, 512, 1000, 2, 4
PER_LAYER = 8 * T * H * A + 3 * T * F * A
TP2_NO_SP = 4 * T * H * A + (4 * T * H * A + 3 * T * F * A) // 2
TP2_SP = PER_LAYER // 2
HEAD_TP2 = 2 * T * H * A + T * V * (A + 4) // 2
HEAD_TP1 = 2 * T * H * A + T * V * (A + 4)
# Parameters per chip of the Megatron layout: the GEMM weights halved (q h^2, k/v 2 h^2,
# o h^2, gate/up 2 h f, down f h), the two norms whole (2 h) per layer; embedding and LM
# head halved on the vocabulary (V h / 2 each), the final norm whole (h)
STORED = L * ((4 * H * H + 3 * H * F) // 2 + 2 * H) + 2 * (V * H // 2) + H

MODEL = """model { inline { name: "tiny" architecture: "llama" hidden_size: 256 num_layers: 4
    num_heads: 4 num_kv_heads: 4 intermediate_size: 512 vocab_size: 1000 ffn: SWIGLU
    norm: RMSNORM } }"""


def _text(sp: bool = False) -> str:
    knobs = "micro_batch: 1 recompute: RECOMPUTE_NONE zero_stage: 0 virtual_pipeline: 1"
    knobs += " sequence_parallel: true" if sp else ""
    return f"""
workload {{ llm_training {{ {MODEL} global_batch: 4 seq_len: 128 {knobs} }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 2
  topology {{ kind: SWITCH degree: 2 link_bw_GBps: 450 latency_us: 1 parallelism: "TP" }} }}
execution {{ execution_style: KERNEL_BY_KERNEL }}
"""


def _workload(sp: bool = False) -> Workload:
    setup = text_format.Parse(_text(sp), setup_pb2.Setup())
    return build_workload(setup, Path("setup.txt"), 2)


TP2 = Choice((("DP", 1), ("PP", 1), ("TP", 2)), (), ())
# Megatron-LM's tensor-parallel layout, by hand: column-parallel q/k/v and gate/up,
# head-split attention, row-parallel o_proj and down (split on their reduction dim, then
# all-reduced), norms and residual adds whole; LM head and loss on the vocabulary
LAYER = {
    "attn_norm": "none",
    "q_proj": "heads",
    "kv_proj": "heads",
    "q_rope": "heads",
    "kv_rope": "heads",
    "attention": "heads",
    "o_proj": "heads",
    "attn_residual": "none",
    "mlp_norm": "none",
    "mlp_gate_up": "ffn",
    "mlp_act": "ffn",
    "mlp_down": "ffn",
    "mlp_residual": "none",
}
LOSS = ("loss_upcast", "loss_exp", "loss_sum", "loss", "loss_bwd", "loss_bwd_cast")
HEAD = {
    "final_norm": "none",
    "final_norm_bwd": "none",
    "final_norm_weight_update": "none",
    "lm_head": "vocab",
    "lm_head_bwd": "vocab",
    "lm_head_weight_update": "vocab",
} | dict.fromkeys(LOSS, "vocab")


def test_hand_numbers() -> None:
    assert (PER_LAYER, TP2_NO_SP, TP2_SP) == (917_504, 589_824, 458_752)
    assert (HEAD_TP1, HEAD_TP2) == (899_072, 515_072)
    assert STORED == 1_569_024


def test_megatron_layout_without_sequence_parallelism() -> None:
    """ZeRO-0, 16 bytes per stored parameter (2 weight, 2 gradient, 12 optimizer), one
    micro-batch in flight: 16 STORED + 4 x TP2_NO_SP + HEAD_TP2."""
    workload = _workload()
    shardings = {"layer": LAYER, "head": HEAD, "embed": {"embedding": "vocab"}}
    use = footprint.memory_use(workload, TP2, 80e9, STORED, shardings)
    assert use.activations == L * TP2_NO_SP + HEAD_TP2 == 2_874_368
    assert use.total == 16 * STORED + 2_874_368
    # the old count, every activation / TP and no head: 36% short of the activations
    assert L * PER_LAYER / 2 < 0.64 * use.activations


def test_sequence_parallelism_splits_the_norms_too() -> None:
    workload = _workload(sp=True)
    tokens = {n: "tokens" for n, s in LAYER.items() if s == "none"}
    shardings = {"layer": LAYER | tokens, "head": HEAD}
    use = footprint.memory_use(workload, TP2, 80e9, STORED, shardings)
    assert use.activations == L * TP2_SP + HEAD_TP2


def test_a_replicated_plan_keeps_everything_whole() -> None:
    """Every kernel replicated over the TP group: the TP 1 activations on each chip."""
    workload = _workload()
    whole = {p.name: {k.name: "none" for k in p.graph.kernels} for p in workload.phases}
    use = footprint.memory_use(workload, TP2, 80e9, STORED, whole)
    assert use.activations == L * PER_LAYER + HEAD_TP1 == 4_569_088


def test_the_floor_is_below_every_plan() -> None:
    """No shardings given: each tensor at the least share any sharding leaves. Without
    sequence parallelism the norms cannot split, so the layers' floor is the Megatron
    layout's; the head's norm may split on tokens: T h a + T V (a + 4) / 2."""
    floor = footprint.memory_use(_workload(), TP2, 80e9, STORED)
    assert floor.activations == L * TP2_NO_SP + T * H * A + T * V * (A + 4) // 2


def _share(sharding: str, dims: tuple[str, ...]) -> float:
    """Share of an output with `dims` a 2-way sharding leaves on a chip (a reduce-scatter
    splits the first dim, tokens)."""
    split = sharding.split("+")[0]
    if sharding.endswith("+rs"):
        return 0.5 if dims[0] == "tokens" else 1.0
    return 0.5 if split in dims else 1.0


# each kept tensor of a layer: its producer and output dims (the module docstring's list)
KEPT = {
    "mlp_residual": ("tokens", "hidden"),  # the next instance's input x
    "attn_norm": ("tokens", "hidden"),
    "q_rope": ("tokens", "heads", "head_dim"),
    "kv_rope": ("tokens", "kv", "heads", "head_dim"),
    "attention": ("batch", "q_seq", "heads", "head_dim"),
    "attn_residual": ("tokens", "hidden"),
    "mlp_norm": ("tokens", "hidden"),
    "mlp_gate_up": ("tokens", "gate_up", "ffn"),
    "mlp_act": ("tokens", "ffn"),
}
SIZES = {
    "mlp_residual": T * H,
    "attn_norm": T * H,
    "q_rope": T * H,
    "kv_rope": 2 * T * H,
    "attention": T * H,
    "attn_residual": T * H,
    "mlp_norm": T * H,
    "mlp_gate_up": 2 * T * F,
    "mlp_act": T * F,
}


def test_solved_plan_reports_its_own_layout(tmp_path: Path) -> None:
    """Solved on 2 chips with TP tagged: the reported activations are the layers' kept
    tensors at the shares the plan's own shardings leave (by hand, from its kernel
    records), and the head's peak on top; the reported total is what the check used."""
    folder = tmp_path / "tp2"
    folder.mkdir()
    (folder / "setup.txt").write_text(_text(), encoding="utf-8")
    plan = pipeline.plan(pipeline.load_scenario(folder))
    by_phase = {p.name: {k.name: k.sharding for k in p.kernels} for p in plan.phases}
    layer = by_phase["layer"]
    kept = sum(SIZES[n] * A * _share(layer[n], KEPT[n]) for n in KEPT)
    head = by_phase["head"]
    assert len({head[n] for n in LOSS}) == 1, "one layout through the loss: in place"
    y = max(_share(head[n], ("tokens", "hidden")) for n in HEAD if n.startswith("final_norm"))
    yn = _share(head["final_norm"], ("tokens", "hidden"))
    logits = _share(head["lm_head"], ("tokens", "vocab"))
    loss = _share(head["loss"], ("tokens", "vocab"))
    # the upcast (16-bit logits beside the FP32 copy) or the downcast (FP32 gradient beside
    # the 16-bit one), the input and the norm output live through both
    peak = (y + yn) * T * H * A + T * V * max(A * logits + 4 * loss, (4 + A) * loss)
    assert plan.memory.activations == pytest.approx(L * kept + peak, rel=1e-12)
    assert plan.memory.total <= plan.memory.capacity


@pytest.mark.parametrize("sp", [False, True])
def test_no_layout_keeps_less_than_the_floor(sp: bool) -> None:
    """200 random layouts (each kernel a sharding its menu allows, drawn at random): none
    keeps fewer activation bytes than the floor the pre-solve check and the DRAM split's
    slack assume."""
    workload = _workload(sp)
    floor = footprint.memory_use(workload, TP2, 80e9, STORED)
    rng = random.Random(7)
    for _ in range(200):
        layout = {
            p.name: {k.name: rng.choice(sharding_choices(k, 2)) for k in p.graph.kernels}
            for p in workload.phases
        }
        use = footprint.memory_use(workload, TP2, 80e9, STORED, layout)
        assert use.activations >= floor.activations


def test_the_split_counts_the_plans_activations_above_their_floor() -> None:
    """The DRAM split's fit (solver.search.dram_split.Layout): weights 1,000 parameters
    above their least at 2 bytes = 2,000 B against a slack of 3,000 B fit with the
    activations at their floor, and not when the plans' own layouts keep 1,500 B more."""
    phase = _workload().phases[0]
    kept = []

    def layouts(plans: dict) -> float:
        kept.append(sorted(plans))
        return 1_500.0

    layout = dram_split.Layout(
        (phase,), {phase.name: 1}, {phase.name: 0.0}, 2.0, 3_000.0, 0.0, 1, layouts
    )
    point = SimpleNamespace(problem=None, sol=SimpleNamespace(choice=(0,)))
    assert layout.fits({phase.name: 1_000.0})
    assert not layout.fits({phase.name: 1_000.0}, {phase.name: point})  # type: ignore[dict-item]
    assert layout.fits({phase.name: 500.0}, {phase.name: point})  # type: ignore[dict-item]
    assert kept == [[phase.name], [phase.name]]
