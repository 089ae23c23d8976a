"""trace.json: Chrome trace-event schema, bounded size, and busy time adding up to the plan;
the 1F1B schedule against hand-timed passes."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from report_fixtures import inference_plan, training_plan

from mapshard.report.schedule import one_f_one_b
from mapshard.report.totals import phase_total_s
from mapshard.report.trace import TID_CONFIG, TID_SCHEDULE, trace_dict, trace_json


def _check_schema(trace: dict) -> None:
    assert set(trace) >= {"traceEvents", "displayTimeUnit"}
    named = set()
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M", "i"), e
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "process_sort_index",
                                 "thread_sort_index")  # fmt: skip
            if e["name"] == "thread_name":
                named.add((e["pid"], e["tid"]))
            continue
        assert isinstance(e["name"], str) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] > 0
    used = {(e["pid"], e["tid"]) for e in trace["traceEvents"] if e["ph"] != "M"}
    assert used <= named, used - named


def _no_overlap(trace: dict) -> None:
    tracks = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert start >= end - 1e-6


def _busy_by_phase(trace: dict) -> dict[str, float]:
    busy: dict[str, float] = defaultdict(float)
    for e in trace["traceEvents"]:
        if e["ph"] != "M" and e["tid"] == TID_SCHEDULE and "busy_us" in e.get("args", {}):
            for phase, us in e["args"]["busy_us"].items():
                busy[phase] += us
    return busy


@pytest.mark.parametrize(
    "plan",
    [training_plan(), training_plan(micro_batches=20, pp=4), training_plan(pp=1),
     inference_plan(), inference_plan(decode_steps=3, pp=1)],
    ids=["train-pp2-mb4", "train-pp4-mb20", "train-pp1", "infer-pp2", "infer-pp1"],
)  # fmt: skip
def test_trace_schema_and_phase_totals(plan):
    trace = json.loads(trace_json(plan))
    _check_schema(trace)
    _no_overlap(trace)
    busy = _busy_by_phase(trace)
    for p in plan.phases:
        assert busy[p.name] == pytest.approx(phase_total_s(plan, p) * 1e6, rel=1e-6), p.name
    # Each drawn schedule slice is exactly the busy time it carries.
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and e["tid"] == TID_SCHEDULE and "busy_us" in e.get("args", {}):
            assert sum(e["args"]["busy_us"].values()) == pytest.approx(e["dur"], rel=1e-6)


def test_trace_detail_of_one_instance_adds_up_per_stage():
    plan = inference_plan(pp=2)
    trace = trace_dict(plan)
    for p in plan.phases:
        stage = 1 if p.role == "head" else 0  # head graphs run on the last stage
        per_stage = p.latency_s * (p.count if p.role == "head" else p.count / 2)
        dur = sum(e["dur"] for e in trace["traceEvents"]
                  if e["ph"] == "X" and e["pid"] == stage and e["tid"] == TID_CONFIG
                  and e["args"]["phase"] == p.name)  # fmt: skip
        assert dur == pytest.approx(per_stage * 1e6, rel=1e-6), p.name


def test_trace_draws_every_micro_batch_and_says_so():
    # #17: 8 of 96 micro-batches drawn left a 16 s hole; now all 50 are drawn, per stage
    plan = training_plan(micro_batches=50, pp=2)
    trace = trace_dict(plan)
    schedule = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == TID_SCHEDULE]
    for stage in (0, 1):
        drawn = {e["args"]["micro_batch"] for e in schedule
                 if e["pid"] == stage and "micro_batch" in e.get("args", {})}  # fmt: skip
        assert drawn == set(range(50))
    assert not [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert "draws 50 of 50 micro-batches one by one" in " ".join(trace["otherData"]["notes"])
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"schedule", "configurations", "compute", "DRAM"} <= names
    assert any(n.startswith("network tp") for n in names)


def test_steps_beyond_the_cap_are_one_slice_with_no_hole(monkeypatch):
    monkeypatch.setattr("mapshard.report.trace.MAX_DRAWN", 4)
    plan = inference_plan(decode_steps=12, pp=2)
    trace = trace_dict(plan)
    schedule = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == TID_SCHEDULE]
    rest = [e for e in schedule if "one slice" in e["name"]]
    assert len(rest) == 2 and all(e["args"]["steps"] == 8 for e in rest)  # 12 - 4, per stage
    end_us = max(e["ts"] + e["dur"] for e in schedule)
    assert end_us == pytest.approx(trace["otherData"]["timeline_end_s"] * 1e6, rel=1e-9)
    # stage 1's covering slice ends with the last step: 7 full steps (both stages) after its
    # start, plus its own share of the last one
    s0, s1 = sorted(rest, key=lambda e: e["pid"])
    assert s1["ts"] + s1["dur"] == pytest.approx(end_us, rel=1e-9)
    assert "draws 4 of 12 steps one by one" in " ".join(trace["otherData"]["notes"])


def test_one_f_one_b_matches_the_textbook_makespan():
    # Equal stages: (M + S - 1) * (F + B).
    sched = one_f_one_b(4, 6, [1.0] * 4, [2.0] * 4)
    assert sched.makespan_s == pytest.approx((6 + 4 - 1) * 3.0)
    # Stage 0 of 4 runs 3 warm-up forwards before its first backward; every stage runs
    # each micro-batch's forward and backward once, in start order.
    assert sched.forward[0, :5].tolist() == [True, True, True, True, False]
    assert sched.forward.shape == (4, 12)
    for s in range(4):
        assert sorted(sched.micro[s, sched.forward[s]].tolist()) == list(range(6))
        assert sorted(sched.micro[s, ~sched.forward[s]].tolist()) == list(range(6))
        assert (sched.start_s[s, 1:] >= sched.end_s[s, :-1]).all()


def test_one_f_one_b_times_unequal_stages_like_a_hand_schedule():
    # 2 stages, 2 micro-batches; forward 1 s and 2 s, backward 3 s and 1 s. By hand:
    # stage 0 runs F0 0-1, F1 1-2, then B0 waits for stage 1's B0 (ends 4): 4-7, B1 7-10;
    # stage 1 runs F0 1-3, B0 3-4, F1 4-6, B1 6-7.
    sched = one_f_one_b(2, 2, [1.0, 2.0], [3.0, 1.0])
    got = [
        [("F" if f else "B", m, a, b) for f, m, a, b in zip(*(x[s].tolist() for x in (
            sched.forward, sched.micro, sched.start_s, sched.end_s)))]
        for s in range(2)
    ]  # fmt: skip
    assert got[0] == [("F", 0, 0, 1), ("F", 1, 1, 2), ("B", 0, 4, 7), ("B", 1, 7, 10)]
    assert got[1] == [("F", 0, 1, 3), ("B", 0, 3, 4), ("F", 1, 4, 6), ("B", 1, 6, 7)]
    assert sched.makespan_s == 10.0


def test_one_f_one_b_with_fewer_micro_batches_than_stages():
    # M < S - 1: every stage runs all its forwards, then all its backwards; equal stages
    # still end at (M + S - 1) * (F + B).
    sched = one_f_one_b(6, 2, [1.0] * 6, [2.0] * 6)
    assert sched.makespan_s == pytest.approx((2 + 6 - 1) * 3.0)
    assert sched.forward[0].tolist() == [True, True, False, False]


def test_a_long_pipeline_collapses_its_middle_passes(monkeypatch):
    # 4 stages x 20 micro-batches = 160 passes; a cap of 32 per trace leaves 32 // (4 x 2)
    # = 4 passes drawn at each end of a stage's 40, and the 32 between as one slice.
    plan = training_plan(micro_batches=20, pp=4)
    whole = trace_dict(plan)
    monkeypatch.setattr("mapshard.report.trace.MAX_UNITS", 32)
    trace = trace_dict(plan)
    _check_schema(trace)
    _no_overlap(trace)
    assert trace["otherData"]["timeline_end_s"] == whole["otherData"]["timeline_end_s"]
    busy = _busy_by_phase(trace)
    for p in plan.phases:
        assert busy[p.name] == pytest.approx(phase_total_s(plan, p) * 1e6, rel=1e-6), p.name
    schedule = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == TID_SCHEDULE]
    for stage in range(4):
        passes = [e for e in schedule if e["pid"] == stage and "pass" in e.get("args", {})]
        collapsed = [e for e in schedule if e["pid"] == stage and "collapsed" in e["name"]]
        assert len(passes) == 8 and len(collapsed) == 1
        assert collapsed[0]["args"]["passes"] == 32
        assert collapsed[0]["args"]["forward"] + collapsed[0]["args"]["backward"] == 32
        # the drawn passes are the same slices as in the whole trace
        full = [e for e in whole["traceEvents"] if e["ph"] == "X" and e["pid"] == stage
                and e["tid"] == TID_SCHEDULE and "pass" in e.get("args", {})]  # fmt: skip
        assert passes == full[:4] + full[-4:]
        # the collapsed slice fills the gap between them exactly
        assert collapsed[0]["ts"] == pytest.approx(full[4]["ts"])
        assert collapsed[0]["ts"] + collapsed[0]["dur"] == pytest.approx(
            full[-5]["ts"] + full[-5]["dur"]
        )
    (what,) = trace["otherData"]["collapsed"]
    assert (what["passes_per_stage"], what["drawn_per_stage"]) == (40, 8)
    assert what["collapsed_per_stage"] == 32 and what["max_drawn_per_trace"] == 32
    assert "first and last 4 of each stage's 40 passes" in " ".join(trace["otherData"]["notes"])
    assert "collapsed" not in whole["otherData"]


def test_kernel_detail_is_capped_by_stage(monkeypatch):
    # pp 4: the layer graph runs on every stage, the head on the last. A cap that holds the
    # kernels of the first and the last stage only: detail there, none on stages 1 and 2.
    plan = training_plan(micro_batches=8, pp=4)
    layer = [p for p in plan.phases if p.role != "head"]
    head = [p for p in plan.phases if p.role == "head"]
    per_layer_stage = sum(len(p.kernels) for p in layer)
    cap = 2 * per_layer_stage + sum(len(p.kernels) for p in head)
    monkeypatch.setattr("mapshard.report.trace.MAX_DETAIL_KERNELS", cap)
    trace = trace_dict(plan)
    _check_schema(trace)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert {e["pid"] for e in kernels} == {0, 3}
    (what,) = trace["otherData"]["collapsed"]
    assert what["detail_stages"] == [0, 3] and what["max_detail_kernels_per_trace"] == cap
    # the busy time still adds up (detail is drawn beside the schedule, not instead of it)
    busy = _busy_by_phase(trace)
    for p in plan.phases:
        assert busy[p.name] == pytest.approx(phase_total_s(plan, p) * 1e6, rel=1e-6), p.name
    # without the cap: every stage gets detail, and nothing is said collapsed
    monkeypatch.setattr("mapshard.report.trace.MAX_DETAIL_KERNELS", 10**6)
    whole = trace_dict(plan)
    assert {e["pid"] for e in whole["traceEvents"] if e.get("cat") == "kernel"} == {0, 1, 2, 3}
    assert "collapsed" not in whole["otherData"]
