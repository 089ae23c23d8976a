"""The outer search over training knobs (issue #19 item 3): micro-batch, recompute mode,
ZeRO stage and interleaving depth are searched when the setup leaves them unset.

1. Its choice equals an exhaustive enumeration done here: one run of MapShard per pinned
   combination (parallelism pinned by a topology tag, every knob given), the best kept.
2. Memory decides: with the DRAM sized by hand between two footprints, only ZeRO (or only
   full recompute) fits, the search picks it, and pinning the other is infeasible.

Tiny Llama (tests/training_fixtures.py's shape): h = 256, L = 4 layers, 4 heads of 64 (MHA),
SwiGLU 512, vocab 1000, seq 128, BF16 weights, Adam (12 bytes of optimizer state beyond
the 2-byte weight per parameter)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from generator.build import build_workload
from mapshard import pipeline
from mapshard.cli import main
from schema import setup_pb2
from schema.errors import InfeasibleError, SetupError
from solver.search import infeasible
from solver.search.footprint import memory_use
from solver.search.parallel import Choice

MODEL = """model { inline { name: "tiny" architecture: "llama" hidden_size: 256 num_layers: 4
    num_heads: 4 num_kv_heads: 4 intermediate_size: 512 vocab_size: 1000 ffn: SWIGLU
    norm: RMSNORM } }"""


def setup_text(knobs: str, tag: str = "", chips: int = 2, dram_cap: float = 0.0) -> str:
    memory = f"memory {{ dram_bw: 3350 dram_cap: {dram_cap:.0f} }}" if dram_cap else ""
    par = f'parallelism: "{tag}"' if tag else ""
    level = f"topology {{ kind: SWITCH degree: {chips} link_bw_GBps: 450 latency_us: 1 {par} }}"
    return f"""
workload {{ llm_training {{ {MODEL}
  global_batch: 4 seq_len: 128 {knobs} }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: {chips} {memory} {level if chips > 1 else ""} }}
execution {{ execution_style: KERNEL_BY_KERNEL }}
"""


def solve(folder: Path, text: str):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "setup.txt").write_text(text, encoding="utf-8")
    return pipeline.plan(pipeline.load_scenario(folder))


RECOMPUTE = {"none": "RECOMPUTE_NONE", "selective": "RECOMPUTE_SELECTIVE", "full": "RECOMPUTE_FULL"}


def test_outer_search_equals_exhaustive_enumeration(tmp_path: Path) -> None:
    """2 chips on one switch: TP 2, PP 2 or DP 2. The grid, by hand:
    micro-batch divides global_batch / DP = 4 / DP: {1, 2, 4} (DP 1), {1, 2} (DP 2);
    recompute: 3 modes; ZeRO 0-3 only with DP 2 (nothing to shard over one rank);
    interleave divides the layers per stage, 4 / PP: {1, 2} with PP 2, else 1.
    Candidates: TP 2: 3 x 3 = 9; PP 2: 3 x 3 x 2 = 18; DP 2: 2 x 3 x 4 = 24; 51 in all."""
    plan = solve(tmp_path / "searched", setup_text(""))
    assert plan.stats.choices_total == 9 + 18 + 24
    assert (
        plan.stats.choices_solved + plan.stats.choices_pruned + plan.stats.choices_infeasible == 51
    )
    assert sorted(plan.training["searched"]) == [
        "micro_batch",
        "recompute",
        "virtual_pipeline",
        "zero_stage",
    ]
    found: dict[tuple, float] = {}
    for par in ("TP", "PP", "DP"):
        dp, pp = (2 if par == "DP" else 1), (2 if par == "PP" else 1)
        sizes = [mb for mb in (1, 2, 4) if (4 // dp) % mb == 0]
        zeros = (0, 1, 2, 3) if dp > 1 else (0,)
        inter = (1, 2) if pp > 1 else (1,)
        for mb, rec, z, v in itertools.product(sizes, RECOMPUTE, zeros, inter):
            knobs = (
                f"micro_batch: {mb} recompute: {RECOMPUTE[rec]} zero_stage: {z} "
                f"virtual_pipeline: {v}"
            )
            pinned = solve(tmp_path / f"{par}_{mb}_{rec}_{z}_{v}", setup_text(knobs, par))
            assert pinned.stats.choices_total == 1 and pinned.training["searched"] == []
            found[(par, mb, rec, z, v)] = pinned.latency_s
    assert len(found) == 51
    best = min(found.values())
    assert plan.latency_s == pytest.approx(best, rel=1e-9)
    t = plan.training
    par = next(p.upper() for p in ("tp", "pp", "dp") if plan.parallelism[p] == 2)
    chosen = (par, t["micro_batch"], t["recompute"], t["zero_stage"], t["virtual_pipeline"])
    assert found[chosen] == pytest.approx(best, rel=1e-9)


# Parameters by hand: per layer 4 h^2 (q, k, v, o; MHA) + 3 h f (SwiGLU) + 2 h (norms)
# = 262144 + 393216 + 512 = 655872; 4 layers 2623488; embedding and untied LM head
# V h = 256000 each; final norm 256.
PARAMS = 4 * (4 * 256**2 + 3 * 256 * 512 + 2 * 256) + 2 * 1000 * 256 + 256
# Full recompute keeps each layer's input only: tokens x h x 2 bytes = 128 x 256 x 2 per
# layer (micro-batch 1), x 4 layers, one micro-batch in flight without pipelining.
ACT_FULL = 4 * 128 * 256 * 2
# The LM head's peak on top (issue 33), T = 128 tokens, V = 1000, a = 2 bytes: the head's
# input and final-norm output (2 x T h a) live through it, and the loss upcasts the 16-bit
# logits (T V a) to an FP32 copy (T V 4), then overwrites it in place (exp, softmax,
# gradient) until the downcast writes the 16-bit gradient beside it: 2 T h a + T V (a + 4).
HEAD = 2 * 128 * 256 * 2 + 128 * 1000 * (2 + 4)


def test_hand_counts_match_the_model() -> None:
    assert PARAMS == 3_135_744
    scenario_text = setup_text("micro_batch: 1 recompute: RECOMPUTE_FULL", chips=1)
    from google.protobuf import text_format

    setup = text_format.Parse(scenario_text, setup_pb2.Setup())
    workload = build_workload(setup, Path("setup.txt"), 1)
    assert workload.model.num_params == PARAMS


def test_only_zero_makes_it_fit(tmp_path: Path) -> None:
    """DP 2, micro-batch 1, full recompute (activations ACT_FULL + HEAD per chip). Bytes
    per parameter per chip: ZeRO-0 keeps weights 2 + gradients 2 + optimizer 12 = 16;
    ZeRO-1 shards the optimizer over the 2 ranks: 2 + 2 + 6 = 10. A DRAM of
    13 x PARAMS + ACT_FULL + HEAD holds ZeRO-1 (and above) but not ZeRO-0."""
    acts = ACT_FULL + HEAD
    zero0 = 16 * PARAMS + acts
    zero1 = 10 * PARAMS + acts
    cap = 13 * PARAMS + acts
    assert zero1 < cap < zero0
    knobs = "micro_batch: 1 recompute: RECOMPUTE_FULL virtual_pipeline: 1"
    plan = solve(tmp_path / "searched", setup_text(knobs, "DP", dram_cap=cap))
    assert plan.training["zero_stage"] >= 1
    assert plan.memory.total <= cap
    by_stage = {z: 10 * PARAMS + acts for z in (1,)} | {
        2: 9 * PARAMS + acts,  # gradients sharded too: 2 + 1 + 6
        # weights sharded (1) plus FSDP's two gathered layer units of the 4: 2/4 x 2 x 1/2
        3: (1 + 0.5 + 1 + 6) * PARAMS + acts,
    }
    assert plan.memory.total == pytest.approx(by_stage[plan.training["zero_stage"]], rel=1e-9)
    zero0_rows = [c for c in plan.choices if "ZeRO-0" in c.knobs]
    assert zero0_rows and all(c.status == "infeasible" for c in zero0_rows)
    assert "GiB per chip" in zero0_rows[0].reason
    # pinned to ZeRO-0 the same machine has no plan: exit code 3
    folder = tmp_path / "pinned"
    folder.mkdir()
    text = setup_text(knobs + " zero_stage: 0", "DP", dram_cap=cap)
    (folder / "setup.txt").write_text(text, encoding="utf-8")
    assert main(["run", str(folder), "--out", str(tmp_path / "out"), "--quiet"]) == 3


def test_only_full_recompute_makes_it_fit(tmp_path: Path) -> None:
    """One chip, micro-batch 1: 16 bytes per parameter plus activations and the head's
    peak (HEAD, every mode). Selective recompute still keeps every projection output, at
    least q, k and v: 3 x tokens x h x 2 bytes per layer = 4 x 3 x 128 x 256 x 2 = 786432
    bytes; full recompute keeps ACT_FULL = 262144. A DRAM of 16 x PARAMS + ACT_FULL + HEAD
    + 393216 holds only full recompute."""
    cap = 16 * PARAMS + ACT_FULL + HEAD + 393_216
    assert 16 * PARAMS + HEAD + 4 * 3 * 128 * 256 * 2 > cap
    knobs = "micro_batch: 1 zero_stage: 0 virtual_pipeline: 1"
    plan = solve(tmp_path / "searched", setup_text(knobs, chips=1, dram_cap=cap))
    assert plan.training["recompute"] == "full"
    assert plan.memory.total == pytest.approx(16 * PARAMS + ACT_FULL + HEAD, rel=1e-9)
    assert [c.status for c in plan.choices if "recompute full" not in c.knobs] == [
        "infeasible",
        "infeasible",
    ]


def test_interleaving_charges_the_first_stage_extra_activations() -> None:
    """Korthikanti et al. 2022 (sec. 4.2.3): with v model chunks per stage the first stage
    holds 1 + (p - 1) / (v p) times the 1F1B activations. PP 2, v 2, full recompute,
    micro-batch 1, global batch 4 (m = 4 micro-batches, min(p, m) = 2 in flight):
    1F1B: 2 layers per stage x 65536 bytes x 2 in flight = 262144 bytes;
    interleaved: x (1 + 1 / 4) = 327680 bytes. The last stage holds one micro-batch (1F1B)
    or (v - 1) p + 1 = 3 chunks of one layer (Megatron-LM's warm-up of the last rank), and
    the LM head's peak on top: 131072 + HEAD and 196608 + HEAD, the larger of the two."""
    from google.protobuf import text_format

    choice = Choice((("DP", 1), ("PP", 2), ("TP", 1)), (), ())
    acts = []
    for v in (1, 2):
        knobs = f"micro_batch: 1 recompute: RECOMPUTE_FULL zero_stage: 0 virtual_pipeline: {v}"
        setup = text_format.Parse(setup_text(knobs, "PP"), setup_pb2.Setup())
        workload = build_workload(setup, Path("setup.txt"), 2)
        acts.append(memory_use(workload, choice, 80e9).activations)
    first = [2 * 65536 * 2, 2 * 65536 * 2 * 1.25]
    last = [2 * 65536 + HEAD, 3 * 65536 + HEAD]
    assert acts == [max(f, la) for f, la in zip(first, last)]


def test_nothing_fits_names_the_knobs_and_assumes_their_least_memory(tmp_path: Path) -> None:
    """A DRAM below the parameters alone (2 bytes x PARAMS ~ 6.3 MB for the weights): every
    candidate is infeasible; the message names the closest candidate's knobs, and the
    smallest-layout suggestion assumes full recompute and ZeRO-3 (the searched knobs at
    their least memory), so it needs fewer chips than the same message for a setup
    pinned to no recompute and ZeRO-0."""
    cap = 2 * PARAMS
    with pytest.raises(InfeasibleError) as searched:
        solve(tmp_path / "searched", setup_text("", dram_cap=cap))
    text = str(searched.value)
    assert "micro-batch" in text and "recompute" in text and "ZeRO-" in text
    pinned_knobs = "recompute: RECOMPUTE_NONE zero_stage: 0"
    with pytest.raises(InfeasibleError) as pinned:
        solve(tmp_path / "pinned", setup_text(pinned_knobs, dram_cap=cap))

    def chips(message: str) -> int:
        return int(message.split("num_chip ≥ ")[1].split(")")[0])

    assert chips(text) < chips(str(pinned.value))


def test_a_candidate_pruned_by_its_graph_bound_records_that_bound(tmp_path):
    """Llama-3.1-8B FP8 training on 2 H100s, every knob searched: candidates that share
    graphs (they differ in ZeRO stage or interleaving) are pruned by their graphs' proven
    bound. The ledger recorded their roofline bound instead (426 ms against a 648 ms plan),
    so `explain` read "cannot win: its graphs' proven bound 426 ms >= the chosen 648 ms".
    Every pruned candidate's recorded bound now reaches the plan it lost to."""
    (tmp_path / "setup.txt").write_text(
        'workload { llm_training { model { hf_model: "Llama-3.1-8B" } global_batch: 4 '
        "seq_len: 1024 } precision { math: FP8 } }\n"
        'system { chip: "H100-SXM5-80GB" num_chip: 2 }\n'
        "execution { execution_style: KERNEL_BY_KERNEL }\n",
        encoding="utf-8",
    )
    plan = pipeline.plan(pipeline.load_scenario(tmp_path))
    pruned = [c for c in plan.choices if c.status == "pruned"]
    assert any(c.reason == "graph bound" for c in pruned)
    for c in pruned:
        assert c.lower_bound_s >= plan.latency_s * (1 - 1e-9), c


def test_a_pinned_micro_batch_the_placement_cannot_take_is_named(tmp_path):
    """Global batch 4 over a placement of 2 data ranks is 2 sequences a rank: micro-batch 4
    cannot be. The message blamed the placement (the optimum's own, from plan.txt)."""
    text = setup_text("micro_batch: 4 recompute: RECOMPUTE_NONE zero_stage: 0 virtual_pipeline: 1")
    text = text.replace("SWITCH", 'SWITCH name: "nv"')
    text = text.replace("KERNEL_BY_KERNEL", 'KERNEL_BY_KERNEL placement: "DP=nv:2"')
    (tmp_path / "setup.txt").write_text(text)
    with pytest.raises(
        SetupError, match=r"micro_batch 4: .* 2 data ranks .* valid micro_batch: 1, 2"
    ):
        pipeline.plan(pipeline.load_scenario(tmp_path))


def test_a_global_batch_that_splits_into_no_whole_micro_batches_is_bad_input(tmp_path):
    """Global batch 3 over 2 data ranks of micro-batch 1 ran 2 micro-batches a rank (4
    sequences) while the tokens/s counted 3; Megatron-LM asserts the split. Tagged DP 2:
    no layout is left, one line says why. Untagged: only layouts that split it (TP 2)."""
    knobs = "micro_batch: 1 recompute: RECOMPUTE_NONE zero_stage: 0 virtual_pipeline: 1"
    text = setup_text(knobs, tag="DP").replace("global_batch: 4", "global_batch: 3")
    with pytest.raises(
        SetupError,
        match=r"global_batch 3 does not split into whole micro-batches of 1 .*DP x EP = 2",
    ):
        solve(tmp_path / "tagged", text)
    plan = solve(tmp_path / "searched", text.replace('parallelism: "DP"', ""))
    assert plan.parallelism.get("dp", 1) == 1 and plan.micro_batches == 3


def test_the_smallest_layout_hint_takes_only_layouts_that_split_the_batch(tmp_path):
    """ZeRO-3 with DP only (TP and PP held at 1): each DP rank stores 1/DP of the model
    state, so some DP fits; the hint named DP 2 for a global batch of 3, a layout the
    search refuses (found by fuzzing: "TP 2 x PP 126 x DP 3" for a batch of 64). DP 3 is
    the smallest that both fits and splits 3 sequences."""
    knobs = "micro_batch: 1 recompute: RECOMPUTE_FULL zero_stage: 3 virtual_pipeline: 1"
    text = setup_text(knobs).replace("global_batch: 4", "global_batch: 3")
    (tmp_path / "setup.txt").write_text(text)
    workload = pipeline.load_scenario(tmp_path).workload
    only_dp = infeasible.Limits(max_tp=1, max_pp=1, max_dp=8, allow_dp=True)
    state = [memory_use(workload, Choice((("DP", d), ("PP", 1), ("TP", 1)), (), ()), 0.0).total
             for d in (1, 2, 3)]  # fmt: skip
    assert state[0] > state[1] > state[2]
    capacity = (state[1] + state[2]) / 2  # DP 2 would fit the memory, not the batch
    assert infeasible.smallest_layout(workload, state[1] * 1.01, only_dp) == (1, 1, 3)
    assert infeasible.smallest_layout(workload, capacity, only_dp) == (1, 1, 3)
