"""trace.json: Chrome trace-event schema, bounded size, and busy time adding up to the plan."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from report_fixtures import inference_plan, training_plan

from mapshard.report.totals import phase_total_s
from mapshard.report.trace import (
    TID_CONFIG,
    TID_SCHEDULE,
    one_f_one_b,
    trace_dict,
    trace_json,
)


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
    times = one_f_one_b(4, 6, [1.0] * 4, [2.0] * 4)
    assert max(end for _, end in times.values()) == pytest.approx((6 + 4 - 1) * 3.0)
    # Stage 0 of 4 runs 3 warm-up forwards before its first backward.
    order = sorted((start, kind, m) for (kind, s, m), (start, _) in times.items() if s == 0)
    assert [k for _, k, _ in order[:5]] == ["F", "F", "F", "F", "B"]
    assert len(times) == 2 * 4 * 6
