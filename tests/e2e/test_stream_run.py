"""Request-stream view end to end through the CLI on a tiny model: one wave of 4 requests
whose three engine steps are exact grid points, so the stream's times must equal the same
steps solved on their own by a plain run (mapshard.solve, no stream code); bad input exits
2 with one line naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from google.protobuf import text_format

import mapshard
from hardware.resolve import resolve_system
from mapshard.analyses.stream import pin_parallelism
from mapshard.cli import main
from schema import setup_pb2

MODEL = """model { inline { hidden_size: 64 num_layers: 2 num_heads: 4 num_kv_heads: 2
                 intermediate_size: 128 vocab_size: 100 } }"""
SYSTEM = 'system { chip: "H100-SXM5-80GB" num_chip: 1 }'
STREAM = f"""name: "tiny_stream"
workload {{ llm_inference {{ {MODEL} input_len: 16 output_len: 3
  stream {{ num_requests: 4 max_batch: 4 max_num_tokens: 64 {{extra}} }} }} }}
{SYSTEM}
"""


def _step(phase: str) -> float:
    """One engine step solved as a plain scenario (its latency is the step time)."""
    text = f"workload {{ llm_inference {{ {MODEL} {phase} }} }}\n{SYSTEM}\n"
    return mapshard.solve(text).summary["latency_s"]


def _write(tmp_path: Path, extra: str) -> Path:
    folder = tmp_path / "scenario"
    folder.mkdir()
    (folder / "setup.txt").write_text(STREAM.replace("{extra}", extra))
    return folder


def test_one_wave_equals_its_steps_solved_alone(tmp_path: Path, capsys) -> None:
    """4 requests of 16 + 3 tokens, max_batch 4, budget 64 tokens: step 1 prefills the 4
    prompts together (64 tokens = 4 whole prompts, a grid point), steps 2 and 3 decode the 4
    sequences at KV lengths 17 and 18 (the grid's two KV lengths). Every step also pays the
    engine's host launches: one forward pass is 2 layers x 12 kernels (attn_norm, kv_proj,
    kv_write, q_proj, attention, o_proj, attn_residual, mlp_norm, mlp_gate_up, mlp_act,
    mlp_down, mlp_residual) + 3 (embedding, final_norm, lm_head) = 27 kernels, x (10.4 us,
    the default kernel_launch_us, less the 4.5 us per kernel the H100 chip file already
    charges inside each solved kernel) = 27 x 5.9 us = O = 159.3 us. By hand:
    duration = T1 + T2 + T3 + 3 O, TTFT = T1 + O for every request,
    TPOT = (T2 + T3) / 2 + O, 12 output tokens."""
    o = 27 * (10.4 - 4.5) * 1e-6
    t1 = _step("phase: CHUNKED_PREFILL chunk_size: 64 prefill_sequences: 4 input_len: 16")
    t2 = _step("phase: DECODE batch: 4 context_len: 17")
    t3 = _step("phase: DECODE batch: 4 context_len: 18")
    out = tmp_path / "r"
    assert main(["run", str(_write(tmp_path, "")), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Request stream: in-flight batching" in printed and "TTFT p50/p90/p99" in printed
    view = json.loads((out / "summary.json").read_text())["stream"]
    assert view["steps"] == 3 and view["max_concurrency"] == 4 and view["output_tokens"] == 12
    assert view["kernels_per_step"] == 27 and view["step_overhead_s"] == pytest.approx(o)
    assert "engine overhead: 27 kernels per step x 10.4 us launch" in printed
    assert view["duration_s"] == pytest.approx(t1 + t2 + t3 + 3 * o, rel=1e-9)
    assert view["output_tokens_per_s"] == pytest.approx(12 / (t1 + t2 + t3 + 3 * o), rel=1e-9)
    assert view["ttft_s"]["p50"] == pytest.approx(t1 + o, rel=1e-9)
    assert view["ttft_s"]["p99"] == pytest.approx(t1 + o, rel=1e-9)
    assert view["tpot_s"]["p90"] == pytest.approx((t2 + t3) / 2 + o, rel=1e-9)
    assert view["latency_s"]["p50"] == pytest.approx(t1 + t2 + t3 + 3 * o, rel=1e-9)
    assert "Request stream" in (out / "report.html").read_text()


def test_bad_stream_field_exits_2_with_one_line(tmp_path: Path, capsys) -> None:
    folder = _write(tmp_path, "arrival: POISSON")
    assert main(["run", str(folder), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stream.rate_per_s must be > 0 for arrival POISSON" in err[0]
    assert "setup.txt" in err[0]


def test_a_request_longer_than_the_kv_cache_is_infeasible(tmp_path: Path, capsys) -> None:
    # a billionth of ~80 GB free is ~80 B: not one token of the tiny model (256 B per token)
    folder = _write(tmp_path, "kv_memory_fraction: 1e-9")
    assert main(["run", str(folder), "--out", str(tmp_path / "r")]) == 3
    assert "KV cache" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("system", "where"),
    [
        (
            'system { chip: "H100-SXM5-80GB" num_chip: 8 '
            'r_r { x: 2 y: 4 par_x: "TP" par_y: "DP" } }',
            "system topology parallelism: DP 4",
        ),
        (
            'system { chip: "H100-SXM5-80GB" num_chip: 2 }\n'
            'execution { placement: "DP=scale_up:2" }',
            "execution.placement: DP 2",
        ),
    ],
)
def test_a_stream_on_dp_replicas_is_one_line_naming_the_tag(
    system: str, where: str, tmp_path: Path, capsys
) -> None:
    """Every engine step of a stream is one chunked-prefill batch, which DP replicas cannot
    split: DP pinned on the system was reported as a chip count no layout could place
    (found by fuzzing), after a whole DATAFLOW grid of solves on a large model."""
    folder = _write(tmp_path, "")
    text = (folder / "setup.txt").read_text().replace(SYSTEM, system)
    (folder / "setup.txt").write_text(text)
    assert main(["run", str(folder), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and where in err[0] and "give those chips to TP or PP" in err[0]
    assert not (tmp_path / "r").exists()


def test_a_level_of_two_tags_takes_the_anchors_layout_for_every_step() -> None:
    """EP and PP tagged on one level leave the layout to each step's search: the prompt
    steps ran PP 4, the decode steps DP 4, and plan.txt pinned DP 4, which a stream refuses
    (found by fuzzing). Only one tag per level fixes the layout; otherwise the anchor's
    placement becomes the levels' tags, for every step."""
    setup = setup_pb2.Setup()
    text_format.Parse(
        'system { chip: "H200-SXM-141GB" num_chip: 8 '
        'topology { kind: SWITCH degree: 2 link_bw_GBps: 450 name: "nvl" parallelism: "TP" } '
        'topology { kind: SWITCH degree: 4 link_bw_GBps: 50 name: "ib" parallelism: "EP" '
        'parallelism: "PP" } }',
        setup,
    )
    system = resolve_system(setup, Path("setup.txt"))
    anchor = SimpleNamespace(placement={"pp": "ib:4", "tp": "nvl:2"})
    pinned = pin_parallelism(system, anchor)
    assert pinned is not None
    assert [(lv.name, lv.parallelism) for lv in pinned.network] == [
        ("nvl", ("TP",)),
        ("ib", ("PP",)),
    ]
    # one tag per level: the tags fix it, the system as it is
    one = setup_pb2.Setup()
    one.CopyFrom(setup)
    del one.system.topology[1].parallelism[0]
    single = resolve_system(one, Path("setup.txt"))
    assert pin_parallelism(single, anchor) is single
