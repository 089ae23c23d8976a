"""Request-stream view: the in-flight batching simulation on hand-made step costs (waves,
chunks and KV admission worked out by hand), the step table's interpolation, the seeded
request draw, and the setup checks of llm_inference.stream."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from generator.build import build_workload
from mapshard import pipeline
from mapshard.analyses.stream import engine_layout, requests_of
from mapshard.analyses.stream_server import serve
from mapshard.analyses.stream_sim import EngineLimits, Request, simulate
from mapshard.analyses.stream_steps import (
    StepShape,
    StepTable,
    build_table,
    decode_points,
    prefill_points,
)
from schema import setup_pb2
from schema.errors import InfeasibleError, SetupError
from schema.setup_io import parse_text


def cost(d: int, c: float, p: int) -> float:
    """A hand-made step cost: 1 s per step, + 0.1 s per decode sequence, + 0.01 s per prompt
    token (the KV length does not matter here)."""
    return 1.0 + 0.1 * d + 0.01 * p


def test_offline_waves_without_chunking_by_hand():
    """6 requests of 4 prompt + 3 output tokens, at most 2 in flight, budget 100 tokens.
    A wave: step 1 prefills 2 x 4 = 8 tokens (1 + 0.08 = 1.08 s; first tokens at its end),
    steps 2 and 3 decode 2 sequences (1.2 s each): 3.48 s, then the next 2 are admitted.
    Three waves: 10.44 s, 9 steps; 18 output tokens / 10.44 s. TTFT: 1.08, 4.56, 8.04 s
    (twice each): p50 = 4.56, p90 = p99 = 8.04. TPOT: (3.48 - 1.08) / 2 = 1.2 s for all."""
    reqs = [Request(0.0, 4, 3)] * 6
    st = simulate(reqs, EngineLimits(2, 100, False, 10**6), cost)
    assert st.steps == 9 and st.max_concurrency == 2 and st.output_tokens == 18
    assert st.duration_s == pytest.approx(3 * 3.48)
    assert st.output_tokens_per_s == pytest.approx(18 / 10.44)
    assert st.requests_per_s == pytest.approx(6 / 10.44)
    assert st.ttft_s == pytest.approx((4.56, 8.04, 8.04))
    assert st.tpot_s == pytest.approx((1.2, 1.2, 1.2))
    # end to end: 3.48, 6.96, 10.44 (twice each): p50 = 6.96
    assert st.latency_s[0] == pytest.approx(6.96)


def test_kv_capacity_admits_whole_requests_only():
    """Same requests (7 tokens each reserved), max_batch 10 but a KV cache of 14 tokens:
    2 run (3.48 s as above), the 3rd waits for them to finish, then runs alone: a 4-token
    prefill (1.04 s) and two 1-sequence decode steps (1.1 s each): 3.48 + 3.24 = 6.72 s."""
    st = simulate([Request(0.0, 4, 3)] * 3, EngineLimits(10, 100, False, 14), cost)
    assert st.max_concurrency == 2
    assert st.duration_s == pytest.approx(3.48 + 1.04 + 2 * 1.1)


def test_chunked_prefill_by_hand():
    """One request, 10 prompt tokens, 2 output tokens, budget 4 tokens per step, chunked:
    chunks 4, 4, 2 (1.04 + 1.04 + 1.02 = 3.10 s: TTFT), then one decode step (1.1 s):
    latency 4.2 s, TPOT 1.1 s. Without chunking the prompt never fits: refused by the
    setup check (prompts longer than max_num_tokens need chunked_prefill)."""
    st = simulate([Request(0.0, 10, 2)], EngineLimits(4, 4, True, 100), cost)
    assert st.steps == 4
    assert st.ttft_s[0] == pytest.approx(3.10)
    assert st.tpot_s[0] == pytest.approx(1.1)
    assert st.latency_s[0] == pytest.approx(4.2)


def test_decode_tokens_take_budget_from_prompts():
    """Request A (2 + 3) and B (3 + 1) both at t=0, budget 3, no chunking. Step 1: A's
    prompt (2 tokens; B's 3 do not fit the 1 left): 1.02 s. Step 2: A decodes (1 token),
    2 left < 3: A alone, 1.1 s. Step 3: A decodes its last token, 1.1 s: A done at 3.22.
    Step 4: B's prompt, 1.03 s: B's first (and only) token at 4.25 s."""
    st = simulate([Request(0.0, 2, 3), Request(0.0, 3, 1)], EngineLimits(8, 3, False, 100), cost)
    assert st.steps == 4
    assert st.duration_s == pytest.approx(4.25)
    # TTFT 1.02 and 4.25 s: p50 = 2.635; latency 3.22 and 4.25 s; TPOT of A: 2.2 / 2 = 1.1
    assert st.ttft_s[0] == pytest.approx(2.635)
    assert st.latency_s[0] == pytest.approx((3.22 + 4.25) / 2)
    assert st.tpot_s == pytest.approx((1.1, 1.1, 1.1))


def test_poisson_arrivals_idle_between_requests():
    """Two requests 10 s apart, each 1 + 1 tokens: each is one 1.01 s prefill step, the
    engine idles in between: duration 11.01 s, TTFT 1.01 s for both."""
    reqs = [Request(0.0, 1, 1), Request(10.0, 1, 1)]
    st = simulate(reqs, EngineLimits(4, 10, False, 100), cost)
    assert st.duration_s == pytest.approx(11.01)
    assert st.ttft_s == pytest.approx((1.01, 1.01, 1.01))
    assert st.tpot_s == ()


def _fake_plan(shape: StepShape):
    """A step time that is linear in C at fixed D, linear in D at fixed C and linear in P:
    the table's interpolation must reproduce it exactly between grid points."""
    d, c, p = shape.decode, shape.context, shape.prefill
    return SimpleNamespace(latency_s=1e-3 * (1 + 0.5 * d + 0.001 * d * c + 0.01 * p))


def test_step_table_interpolation_is_exact_on_a_multilinear_cost():
    table, solved = build_table(_fake_plan, 100, 2048, 512, (100, 900), 10**7)
    assert table.decode == tuple(decode_points(100)) == (0, 1, 2, 4, 8, 16, 32, 64, 100)
    assert (
        table.prefill == tuple(prefill_points(2048, 512)) == (0, 32, 64, 128, 256, 512, 1024, 2048)
    )
    # (D, P) points with D > 0 at two KV lengths, D = 0 at one (P > 0): 8 x 8 x 2 + 7
    assert solved == 8 * 8 * 2 + 7
    for d, c, p in ((3, 250.0, 700), (50, 899.0, 31), (77, 123.5, 1500), (1, 100.0, 0)):
        want = _fake_plan(StepShape(d, c, p, 512)).latency_s  # type: ignore[arg-type]
        assert table(d, c, p) == pytest.approx(want, rel=1e-12)
    assert table(0, 0, 0) == 0.0


def test_prefill_points_whole_prompts_above_the_prompt_length():
    # budget 8192, prompts of 128: 64, 32, ..., 1 whole prompts, then 64- and 32-token chunks
    assert prefill_points(8192, 128) == [0, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    # prompts of 3000: 8192 -> 2 prompts (6000), 4096 -> 1 (3000), 2048 ... 32 are chunks
    assert prefill_points(8192, 3000) == [0, 32, 64, 128, 256, 512, 1024, 2048, 3000, 6000]


STREAM = """
workload {{ llm_inference {{
  model {{ inline {{ hidden_size: 64 num_layers: 2 num_heads: 4 num_kv_heads: 2
                    intermediate_size: 128 vocab_size: 100 }} }}
  input_len: 16 output_len: 8
  stream {{ {stream} }}
}} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 1 }}
"""


def _setup(stream: str) -> setup_pb2.Setup:
    setup = setup_pb2.Setup()
    parse_text(STREAM.format(stream=stream), setup, Path("s.txt"))
    return setup


def test_same_seed_same_requests_and_poisson_mean_gap():
    text = "num_requests: 2000 arrival: POISSON rate_per_s: 50 seed: 7 input_len { min: 4 max: 9 }"
    a = requests_of(_setup(text).workload.llm_inference)
    b = requests_of(_setup(text).workload.llm_inference)
    c = requests_of(_setup(text.replace("seed: 7", "seed: 8")).workload.llm_inference)
    assert a == b and a != c
    assert a[0].arrival_s == 0.0
    gaps = [y.arrival_s - x.arrival_s for x, y in zip(a, a[1:])]
    assert min(gaps) >= 0 and sum(gaps) / len(gaps) == pytest.approx(1 / 50, rel=0.1)
    assert {r.input_len for r in a} == set(range(4, 10)) and {r.output_len for r in a} == {8}


BAD = [
    ("num_requests: 0", "stream.num_requests must be in [1, 1000000]"),
    ("num_requests: 5 arrival: POISSON", "stream.rate_per_s must be > 0 for arrival POISSON"),
    ("num_requests: 5 rate_per_s: 3", "stream.rate_per_s is only read with arrival POISSON"),
    ("num_requests: 5 input_len { tokens: 4 min: 2 max: 3 }", "exactly one of tokens"),
    ("num_requests: 5 output_len { min: 9 max: 3 }", "must have 1 <= min <= max"),
    ("num_requests: 5 input_len { values: [4, 0] }", "stream.input_len.values must all be >= 1"),
    ("num_requests: 5 max_num_tokens: 8", "longer than max_num_tokens (8) without chunked"),
    ("num_requests: 5 kv_memory_fraction: 1.5", "stream.kv_memory_fraction is outside [0, 1]"),
    ("num_requests: 5 seed: -1", "stream.seed must be >= 0"),
    ("num_requests: 5 max_ttft_p99_ms: 50", "stream.max_ttft_p99_ms is only read with arrival"),
    ("num_requests: 5 arrival: POISSON max_tpot_p99_ms: -1", "max_tpot_p99_ms must be >= 0"),
    ("num_requests: 5 max_batch: -2", "stream.max_batch must be >= 0"),
    ("num_requests: 5 kernel_launch_us: -1", "stream.kernel_launch_us must be >= 0"),
]


@pytest.mark.parametrize("stream,message", BAD, ids=[m for _, m in BAD])
def test_bad_stream_fields_are_named(stream: str, message: str):
    with pytest.raises(SetupError) as err:
        pipeline.load_message(_setup(stream), Path("s.txt"))
    assert len(err.value.problems) == 1 and message in err.value.problems[0]


def test_prefill_sequences_must_divide_the_chunk():
    s = _setup("num_requests: 1")
    inf = s.workload.llm_inference
    inf.ClearField("stream")
    inf.phase, inf.chunk_size, inf.prefill_sequences = setup_pb2.CHUNKED_PREFILL, 10, 3
    with pytest.raises(SetupError, match=r"prefill_sequences must divide chunk_size \(10\)"):
        pipeline.load_message(s, Path("s.txt"))


def test_chunk_of_whole_prompts_attends_per_prompt():
    """chunk 8 as prefill_sequences 2: two prompts of 4 tokens, each attending to itself
    (batch 2, q 4, kv 4: 4 x 2 x 4 x 4 x heads 4 x dim 16 FLOP), + 3 decode tokens at
    context 10; the LM head runs on 3 decode tokens + 2 prompts' last tokens."""
    s = setup_pb2.Setup()
    r = s.workload.llm_inference
    m = r.model.inline
    m.hidden_size, m.num_layers, m.num_heads, m.num_kv_heads = 64, 2, 4, 2
    m.intermediate_size, m.vocab_size = 128, 100
    r.phase, r.chunk_size, r.prefill_sequences = setup_pb2.CHUNKED_PREFILL, 8, 2
    r.input_len, r.decode_batch, r.context_len = 4, 3, 10
    w = build_workload(s, Path("x"), 1)
    layer, head = w.phases
    pre = layer.graph.kernel("attention_prefill")
    assert (pre.dim_sizes["batch"], pre.dim_sizes["q_seq"], pre.dim_sizes["kv_seq"]) == (2, 4, 4)
    assert pre.flop == 4 * 2 * 4 * 4 * 4 * 16
    assert layer.graph.kernel("q_proj").dim_sizes["tokens"] == 11
    assert head.graph.kernel("lm_head").dim_sizes["tokens"] == 5
    # KV bytes: 2 (K, V) x 2 layers x 2 KV heads x 16 dims x (8 + 3 x 10) tokens x 2 bytes
    assert w.kv_cache_bytes == 2 * 2 * 2 * 16 * (8 + 3 * 10) * 2


# Two 1 + 1-token requests whose unit-rate arrivals are t = 0 and 1 s, at most 2 in flight:
# one prefill step each (1.01 s), both in one 1.02 s step when they arrive together.
UNIT = [Request(0.0, 1, 1), Request(1.0, 1, 1)]
LIMITS = EngineLimits(2, 100, False, 100)


def test_server_rate_search_by_hand():
    """At rate r the 2nd request arrives at 1/r. If 1/r < 1.01 it waits for the 1st step:
    TTFT2 = 1.01 + 1.01 - 1/r; p99 of (1.01, TTFT2) = 1.01 + 0.99 (TTFT2 - 1.01). A p99
    limit of 1.5 s holds while 1.01 - 1/r <= 0.49 / 0.99, i.e. r <= 1 / (1.01 - 0.49/0.99)
    = 1.941564 req/s. The bracket's top, the offline throughput (both in one 1.02 s step:
    2 / 1.02 = 1.9608 req/s), misses it (p99 1.505 s), so the bisection ends within
    1.9608 / 2^14 = 1.2e-4 below 1.941564."""
    best = 1 / (1.01 - 0.49 / 0.99)
    sv = serve(UNIT, LIMITS, cost, 0.0, 1.5, None)
    assert sv.searched and sv.within_limits
    assert best - 1.3e-4 <= sv.rate_per_s <= best
    assert sv.stats.ttft_s[-1] <= 1.5


def test_server_given_rate_and_unreachable_limits():
    """At 1 req/s the 2nd request waits 0.01 s: p99 TTFT = 1.01 + 0.99 x 0.01 = 1.0199 s,
    within 1.5 s. A 0.5 s limit is missed even at the slowest rate (one step is 1.01 s)."""
    sv = serve(UNIT, LIMITS, cost, 1.0, 1.5, None)
    assert not sv.searched and sv.within_limits
    assert sv.stats.ttft_s[-1] == pytest.approx(1.0199)
    with pytest.raises(InfeasibleError, match="p99 TTFT is 1010 ms"):
        serve(UNIT, LIMITS, cost, 0.0, 0.5, None)


def test_engine_keeps_one_weight_layout_on_several_chips():
    s = _setup("num_requests: 1")
    same, notes = engine_layout(s, SimpleNamespace(num_chips=1))
    assert same is s and notes == ()
    forced, notes = engine_layout(s, SimpleNamespace(num_chips=8))
    assert forced.workload.llm_inference.tensor_parallel_split == setup_pb2.MODEL_DIMS_SPLIT
    assert s.workload.llm_inference.tensor_parallel_split == setup_pb2.SEARCHED_SPLIT
    assert len(notes) == 1 and "one weight layout" in notes[0]


def test_a_short_prompt_only_step_is_priced_at_the_smallest_solved_prompt():
    """Grid P in {0, 32}: t(D=0, P=32) = 4 ms. A 16-token prompt alone is not half of it
    (interpolating toward the empty step's 0 s): it reads the same weights, so 4 ms; with
    one decoding sequence (t(1, 0) = 2 ms, t(1, 32) = 5 ms) it stays bilinear: 3.5 ms."""
    times = {
        (0, 0): ((0.0, 0.0), (0.0, 0.0)),
        (0, 32): ((0.0, 4e-3), (0.0, 4e-3)),
        (1, 0): ((10.0, 2e-3), (10.0, 2e-3)),
        (1, 32): ((10.0, 5e-3), (10.0, 5e-3)),
    }
    table = StepTable((0, 1), (0, 32), times)
    assert table(0, 0.0, 16) == pytest.approx(4e-3)
    assert table(1, 10.0, 16) == pytest.approx(3.5e-3)


def test_server_rate_at_capacity_when_the_limits_do_not_bind():
    """A 3 s p99 TTFT limit holds even with both requests at t = 0 (TTFT 1.02 s): the rate
    is the offline throughput, 2 / 1.02 req/s, and the result says the limits do not bind."""
    sv = serve(UNIT, LIMITS, cost, 0.0, 3.0, None)
    assert sv.searched and sv.at_capacity and sv.within_limits
    assert sv.rate_per_s == pytest.approx(2 / 1.02)
    assert not serve(UNIT, LIMITS, cost, 0.0, 1.5, None).at_capacity
