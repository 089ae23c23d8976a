"""Outer degrees searched when the setup leaves them free (issue 33): inference replicas (DP)
beside TP/PP, training EP for an MoE model with `expert_parallel` unset, and only TP degrees
that divide the attention heads. The searched answer equals the best of the runs with each
layout pinned by topology tags (an enumeration done here), and a replica's TTFT/TPOT are
those of one replica run alone on its share of the chips, its throughput counted once per
replica."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mapshard import pipeline
from mapshard.scenario import plan_workload
from solver.search.degrees import outer_choices, tp_fits

TINY = """model {{ inline {{ name: "tiny" architecture: "llama" hidden_size: {h} num_layers: 2
    num_heads: {heads} num_kv_heads: {kv} intermediate_size: 512 vocab_size: 1000 ffn: SWIGLU
    norm: RMSNORM {moe} }} }}"""


def _model(heads: int = 4, kv: int = 4, experts: int = 0) -> str:
    moe = f"num_experts: {experts} experts_per_token: 2" if experts else ""
    return TINY.format(h=64 * heads, heads=heads, kv=kv, moe=moe)


def _levels(tags: tuple[str, str] | None, latency_us: float) -> str:
    """Two switch levels of 2 chips each (4 chips), tagged or searched."""
    out = []
    for i in range(2):
        tag = f'parallelism: "{tags[i]}"' if tags else ""
        out.append(
            f'topology {{ name: "l{i}" kind: SWITCH degree: 2 link_bw_GBps: 100 '
            f"latency_us: {latency_us} {tag} }}"
        )
    return " ".join(out)


def _solve(folder: Path, text: str):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "setup.txt").write_text(text, encoding="utf-8")
    scenario = pipeline.load_scenario(folder)
    return scenario, pipeline.plan(scenario)


def _decode(levels: str, batch: int = 8, chips: int = 4) -> str:
    """A decode step with the serving engines' tensor parallelism (model dims only: heads
    and MLP width split, all-reduced; a TP that split tokens would be replicas in all but
    name, at the same time)."""
    return f"""
workload {{ llm_inference {{ {_model()} phase: DECODE batch: {batch} context_len: 128
  tensor_parallel_split: MODEL_DIMS_SPLIT }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: {chips} {levels} }}
execution {{ execution_style: KERNEL_BY_KERNEL }}
"""


def _one_level(tag: str, latency_us: float) -> str:
    """One switch of 4 chips, tagged or searched."""
    par = f'parallelism: "{tag}"' if tag else ""
    return f"topology {{ kind: SWITCH degree: 4 link_bw_GBps: 100 latency_us: {latency_us} {par} }}"


# every layout of 4 chips the search tries: TP or DP on the 4 chips (PP at most the 2
# layers), or two of 2 each (two switch levels of 2 with the same links: the collectives
# of a group of 2 within a switch of 4)
PINNED = [("TP",), ("DP",), ("TP", "DP"), ("TP", "PP"), ("DP", "PP")]


def test_inference_replicas_are_searched_and_win_on_slow_links(tmp_path: Path) -> None:
    """Decode of 8 sequences on 4 chips whose links take 50 us a hop: every TP collective
    and pipeline hop pays it, replicas pay nothing. The search over TP/PP/DP equals the
    best of the 5 pinned layouts, and that best is 4 replicas of 2 sequences each."""
    _, searched = _solve(tmp_path / "searched", _decode(_one_level("", 50)))
    pinned = {}
    for tags in PINNED:
        levels = _one_level(tags[0], 50) if len(tags) == 1 else _levels(tags, 50)
        _, plan = _solve(tmp_path / "_".join(tags), _decode(levels))
        pinned[tags] = plan.latency_s
    best = min(pinned, key=pinned.get)
    assert best == ("DP",)
    assert searched.latency_s == pytest.approx(pinned[best], rel=1e-9)
    assert searched.parallelism["dp"] == 4 and searched.parallelism["tp"] == 1
    # throughput counts all 8 sequences, one token each per step of the replicas
    assert searched.tokens_per_s == pytest.approx(8 / searched.latency_s, rel=1e-12)


def test_a_replica_runs_like_one_model_on_its_own_chips(tmp_path: Path) -> None:
    """A request (prefill 64 tokens, 8 generated) of 8 sequences on 4 chips as 2 replicas
    of TP 2 takes the time of 4 sequences on 2 chips at TP 2 (TTFT and TPOT per request);
    its throughput is twice that run's, and each replica's graphs hold 4 sequences."""

    def request(levels: str, batch: int, chips: int) -> str:
        return f"""
workload {{ llm_inference {{ {_model()} phase: REQUEST batch: {batch} input_len: 64
    output_len: 8 }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: {chips} {levels} }}
execution {{ execution_style: KERNEL_BY_KERNEL }}
"""

    scenario, two = _solve(tmp_path / "replicas", request(_levels(("TP", "DP"), 1), 8, 4))
    one_level = (
        'topology { name: "l0" kind: SWITCH degree: 2 link_bw_GBps: 100 latency_us: 1 '
        'parallelism: "TP" }'
    )
    _, one = _solve(tmp_path / "one", request(one_level, 4, 2))
    assert two.parallelism["dp"] == 2 and two.parallelism["tp"] == 2
    assert two.ttft_s == pytest.approx(one.ttft_s, rel=1e-12)
    assert two.tpot_s == pytest.approx(one.tpot_s, rel=1e-12)
    assert two.latency_s == pytest.approx(one.latency_s, rel=1e-12)
    assert two.tokens_per_s == pytest.approx(2 * one.tokens_per_s, rel=1e-12)
    graph = plan_workload(scenario, two).phases[0].graph
    assert {k.dim_sizes["tokens"] for k in graph.kernels if "tokens" in k.dim_sizes} == {4 * 64}


@pytest.mark.parametrize(
    ("heads", "kv", "want"),
    [
        (4, 4, [1, 2, 4]),  # MHA: the divisors of 4
        (6, 6, [1, 2, 3, 6]),
        (8, 2, [1, 2, 4, 8]),  # GQA: 4 and 8 replicate each of the 2 KV heads
        (12, 4, [1, 2, 4, 12]),  # 3 and 6 split 4 KV heads unevenly; 12 replicates each 3x
    ],
)
def test_a_free_tp_degree_divides_the_heads(heads: int, kv: int, want: list[int]) -> None:
    """By hand: TP divides the heads, and divides the KV heads or is a multiple of them."""
    model = SimpleNamespace(num_heads=heads, num_kv_heads=kv)
    fits = tp_fits(SimpleNamespace(model=model, kind="training"))  # type: ignore[arg-type]
    assert [t for t in range(1, 17) if fits(t)] == want


def test_six_heads_on_four_chips_never_take_tp_4(tmp_path: Path) -> None:
    """6 heads, 4 chips on one searched level: TP 4 splits no head count evenly, so no
    choice has it; TP 1 and 2 remain (with DP or PP making up the chips)."""
    text = f"""
workload {{ llm_inference {{ {_model(heads=6, kv=6)} phase: DECODE batch: 8 context_len: 64 }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 4
  topology {{ kind: SWITCH degree: 4 link_bw_GBps: 100 latency_us: 1 }} }}
execution {{ execution_style: KERNEL_BY_KERNEL }}
"""
    folder = tmp_path / "six"
    folder.mkdir()
    (folder / "setup.txt").write_text(text, encoding="utf-8")
    scenario = pipeline.load_scenario(folder)
    choices = outer_choices(scenario.workload, scenario.system, 64, 2, 4, True)
    assert {c.degree("TP") for c in choices} == {1, 2}
    assert {(c.degree("TP"), c.degree("PP"), c.degree("DP")) for c in choices} == {
        (1, 1, 4),
        (1, 2, 2),
        (2, 1, 2),
        (2, 2, 1),
    }


def _moe(ep: str, levels: str) -> str:
    return f"""
workload {{ llm_training {{ {_model(experts=8)} global_batch: 8 micro_batch: 1 seq_len: 128
  recompute: RECOMPUTE_NONE zero_stage: 1 virtual_pipeline: 1 {ep} }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 4 {levels} }}
execution {{ execution_style: KERNEL_BY_KERNEL }}
"""


def test_training_searches_ep_when_unset(tmp_path: Path) -> None:
    """8 experts on 4 chips: EP 1, 2 or 4 (the divisors of 8 that divide the 4 data ranks
    at most); the searched plan equals the best of the runs with EP given, each searching
    TP/PP/DP around it, and reports the EP it chose."""
    scenario, searched = _solve(tmp_path / "searched", _moe("", _levels(None, 1)))
    eps = sorted({v.expert_parallel for v in scenario.workload.variants})
    assert eps == [1, 2, 4] and "expert_parallel" in scenario.workload.searched
    given = {}
    for ep in eps:
        _, plan = _solve(tmp_path / f"ep{ep}", _moe(f"expert_parallel: {ep}", _levels(None, 1)))
        given[ep] = plan.latency_s
    best = min(given, key=given.get)
    assert searched.latency_s == pytest.approx(given[best], rel=1e-9)
    assert searched.training["expert_parallel"] == best
    assert searched.parallelism["ep"] >= best
    assert plan_workload(scenario, searched).expert_parallel == best
