"""trace.json: the predicted timeline in Chrome trace-event format (open in ui.perfetto.dev).

One process per pipeline stage; in each, one thread per resource: the schedule (micro-batches
or steps), the configurations, compute, DRAM, and one per network group a collective runs
over. Training draws the 1F1B schedule; inference draws the steps of a request. Kernel detail
is drawn for one graph instance per phase and stage (the others are identical).

What is drawn one by one is capped, so the file and the time to write it follow what is
drawn, not the length of the step: a stage draws at most MAX_DRAWN micro-batches or steps,
and the whole trace at most MAX_UNITS passes or steps (DFModel's GPT-3 1T, 128 stages x
3,072 micro-batches, drew 262,144 passes: 45 MB, most of its run). Beyond the cap the
repeated middle is collapsed: a stage draws the first and the last passes of its 1F1B order
one by one (the pipeline filling and draining) and the passes between as one slice; the
steps of a request beyond the cap are one slice per stage. A collapsed slice spans its
passes or steps and carries their busy time, so the timeline has no hole and the busy time
in the file always adds up to the plan's totals; otherData.collapsed says what was
collapsed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mapshard.fmt import finite
from mapshard.report.schedule import Schedule, one_f_one_b
from mapshard.report.totals import parallel_degrees
from solver.plan import ConfigPlan, PhasePlan, Plan

MAX_DRAWN = 1024  # micro-batches (training) or steps (inference) drawn one by one per stage
MAX_UNITS = 8192  # passes (training) or steps (inference) drawn one by one per trace
MAX_DETAIL_STAGES = 16  # stages that get per-configuration and per-kernel detail
MAX_DETAIL_KERNELS = 4096  # kernels drawn with their compute/DRAM/network slices per trace
TID_SCHEDULE, TID_CONFIG, TID_COMPUTE, TID_DRAM, TID_NETWORK0 = 0, 1, 2, 3, 4
_OVER = re.compile(r"\bover\s+([A-Za-z0-9_+\-]+)")


def network_group(collective: str) -> str:
    """The group a kernel's collective runs over ("tp" in "all_reduce 12 MB over tp")."""
    m = _OVER.search(collective or "")
    return m.group(1).lower() if m else ""


# id(phase) -> (phase, ids of its forward configurations, their latency): asked per slice
# and per configuration drawn, found in one pass over the phase's kernels (per configuration
# it was n^2: 170 s on a 3,000-kernel kernel-by-kernel chain); trace_dict empties it per plan
_FORWARD: dict[int, tuple[PhasePlan, frozenset[int], float]] = {}


def _forward(phase: PhasePlan) -> tuple[frozenset[int], float]:
    """ids of the configurations of the forward pass (all their kernels are), and their
    latency."""
    known = _FORWARD.get(id(phase))
    if known is None or known[0] is not phase:
        passes = {k.name: k.pass_.upper() for k in phase.kernels}
        fwd = [c for c in phase.configs if all(passes.get(n, "FWD") == "FWD" for n in c.kernels)]
        known = (phase, frozenset(map(id, fwd)), sum(c.latency_s for c in fwd))
        _FORWARD[id(phase)] = known
    return known[1], known[2]


def part_latency(phase: PhasePlan, part: str) -> float:
    """One instance's time of the forward part ("F"), the rest ("B") or all of it."""
    if part == "all":
        return phase.latency_s
    fwd_s = _forward(phase)[1]
    return fwd_s if part == "F" else phase.latency_s - fwd_s


def _configs_of(phase: PhasePlan, part: str) -> list[ConfigPlan]:
    configs = sorted(phase.configs, key=lambda c: c.index)
    if part == "all":
        return configs
    forward = _forward(phase)[0]
    return [c for c in configs if (id(c) in forward) == (part == "F")]


@dataclass(frozen=True)
class Segment:
    phase: PhasePlan
    part: str  # "F", "B" or "all"
    instances: float

    @property
    def duration_s(self) -> float:
        return part_latency(self.phase, self.part) * self.instances


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 6)


class _Trace:
    """Collects events; keeps one cursor per (pid, tid) so slices on a track never overlap."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.events: list[dict[str, Any]] = []
        self.cursor: dict[tuple[int, int], float] = {}
        self.collapsed: list[dict[str, Any]] = []  # what collapsed slices stand for
        groups = {network_group(k.collective) for k in plan.kernels() if k.network_s}
        if plan.dp_allreduce_s > 0:
            groups.add("dp")
        self.net_tid = {g: TID_NETWORK0 + i for i, g in enumerate(sorted(groups))}

    def slice(
        self,
        pid: int,
        tid: int,
        name: str,
        cat: str,
        start_s: float,
        dur_s: float,
        args: dict[str, Any] | None = None,
    ) -> float:
        """Add a complete event no earlier than the track is free; returns its end."""
        start = max(start_s, self.cursor.get((pid, tid), 0.0))
        if _us(start + dur_s) - _us(start) <= 0:  # below the file's resolution (1 ps)
            return start_s
        event = {
            "name": name,
            "cat": cat,
            "ph": "X",
            "pid": pid,
            "tid": tid,
            "ts": _us(start),
            "dur": round(_us(start + dur_s) - _us(start), 6),  # ends line up after rounding
        }
        if args:
            event["args"] = args
        self.events.append(event)
        self.cursor[(pid, tid)] = start + dur_s
        return start + dur_s

    def unit(
        self,
        pid: int,
        name: str,
        start_s: float,
        segments: list[Segment],
        detail: bool,
        args: dict[str, Any],
        dur: float,
        busy: dict[str, float],
    ) -> float:
        """One micro-batch pass or step on one stage (`dur`: its time, `busy`: _busy of
        its segments), with kernel detail when asked."""
        end = self.slice(
            pid, TID_SCHEDULE, name, "schedule", start_s, dur, {**args, "busy_us": busy}
        )
        if detail:
            t = end - dur
            for seg in segments:
                t = self._detail(pid, seg, t)
        return end

    def _detail(self, pid: int, seg: Segment, start_s: float) -> float:
        """Configurations and kernels of one instance, then the other instances as one slice."""
        t = start_s
        if seg.instances < 1:
            name = f"{seg.phase.name} x{seg.instances:g}"
            args = {"phase": seg.phase.name, "instances": seg.instances}
            return self.slice(pid, TID_CONFIG, name, "config", t, seg.duration_s, args)
        kernels = {k.name: k for k in seg.phase.kernels}
        for c in _configs_of(seg.phase, seg.part):
            args = {"phase": seg.phase.name, "bound": c.bound, "kernels": len(c.kernels)}
            self.slice(
                pid,
                TID_CONFIG,
                f"{seg.phase.name} config {c.index}",
                "config",
                t,
                c.latency_s,
                args,
            )
            for name in c.kernels:
                k = kernels.get(name)
                if k is None:
                    continue
                kargs = {
                    "phase": k.phase,
                    "config": k.config,
                    "bound": k.bound,
                    "sharding": k.sharding,
                    "tile": k.tile,
                }
                self.slice(pid, TID_COMPUTE, k.name, "kernel", t, k.compute_s, kargs)
                self.slice(pid, TID_DRAM, k.name, "kernel", t, k.memory_s, kargs)
                tid = self.net_tid.get(network_group(k.collective), TID_NETWORK0)
                self.slice(
                    pid, tid, k.name, "kernel", t, k.network_s, kargs | {"collective": k.collective}
                )
            t += c.latency_s
        rest = seg.instances - 1
        if rest > 0:
            name = f"{seg.phase.name} x{rest:g} more instances"
            dur = part_latency(seg.phase, seg.part) * rest
            args = {"phase": seg.phase.name, "instances": rest}
            t = self.slice(pid, TID_CONFIG, name, "config", t, dur, args)
        return t

    def metadata(self, stages: int) -> list[dict[str, Any]]:
        placement = {k.lower(): v for k, v in self.plan.placement.items()}
        threads = {
            TID_SCHEDULE: "schedule",
            TID_CONFIG: "configurations",
            TID_COMPUTE: "compute",
            TID_DRAM: "DRAM",
        }
        for group, tid in self.net_tid.items():
            where = f" ({placement[group]})" if group in placement else ""
            threads[tid] = f"network {group}".strip() + where
        used = {(e["pid"], e["tid"]) for e in self.events}
        meta: list[dict[str, Any]] = []
        for pid in range(stages):
            meta.append(
                {
                    "name": "process_name",
                    "ph": "M",
                    "pid": pid,
                    "tid": 0,
                    "args": {"name": f"stage {pid}"},
                }
            )
            meta.append(
                {
                    "name": "process_sort_index",
                    "ph": "M",
                    "pid": pid,
                    "tid": 0,
                    "args": {"sort_index": pid},
                }
            )
            for tid, name in sorted(threads.items()):
                if tid == TID_SCHEDULE or (pid, tid) in used:
                    meta.append(
                        {
                            "name": "thread_name",
                            "ph": "M",
                            "pid": pid,
                            "tid": tid,
                            "args": {"name": name},
                        }
                    )
                    meta.append(
                        {
                            "name": "thread_sort_index",
                            "ph": "M",
                            "pid": pid,
                            "tid": tid,
                            "args": {"sort_index": tid},
                        }
                    )
        return meta


def _busy(*parts: tuple[list[Segment], float]) -> dict[str, float]:
    """Busy microseconds per phase of (segments, repetitions) parts."""
    busy: dict[str, float] = {}
    for segments, times in parts:
        for s in segments:
            busy[s.phase.name] = busy.get(s.phase.name, 0.0) + s.duration_s * times
    return {p: _us(v) for p, v in busy.items()}


def drawn_per_stage(stages: int, passes: int) -> int:
    """Micro-batches or steps a stage draws one by one (`passes` slices each): MAX_DRAWN,
    fewer when the stages together would draw more than MAX_UNITS slices."""
    return min(MAX_DRAWN, max(1, MAX_UNITS // (stages * passes)))


def _instances_on(phase: PhasePlan, stage: int, stages: int) -> float:
    """Layer graphs are split evenly over the stages; head graphs run on the last stage,
    the embedding (role "embed") on the first."""
    if phase.role == "head":
        return float(phase.count) if stage == stages - 1 else 0.0
    if phase.role == "embed":
        return float(phase.count) if stage == 0 else 0.0
    return phase.count / stages


def _segments(
    phases: list[PhasePlan], stage: int, stages: int, part: str, scale: float = 1.0
) -> list[Segment]:
    """What one stage runs of each phase for one micro-batch pass or step."""
    segs = [Segment(p, part, _instances_on(p, stage, stages) * scale) for p in phases]
    return [s for s in segs if s.instances > 0 and part_latency(s.phase, s.part) > 0]


def _training(tr: _Trace, plan: Plan, stages: int, detail: set[int]) -> float:
    micro = max(1, plan.micro_batches)
    phases = list(plan.phases)
    segs = {
        (s, part): _segments(phases, s, stages, part) for s in range(stages) for part in ("F", "B")
    }
    fwd = [sum(x.duration_s for x in segs[(s, "F")]) for s in range(stages)]
    bwd = [sum(x.duration_s for x in segs[(s, "B")]) for s in range(stages)]
    sched = one_f_one_b(stages, micro, fwd, bwd)
    keep = drawn_per_stage(stages, 2)  # passes drawn at each end of a stage's order
    n = 2 * micro
    drawn = list(range(n)) if n <= 2 * keep else [*range(keep), *range(n - keep, n)]
    if len(drawn) < n:
        tr.collapsed.append(
            {
                "what": "1F1B passes between the first and the last drawn ones, per stage",
                "passes_per_stage": n,
                "drawn_per_stage": len(drawn),
                "collapsed_per_stage": n - len(drawn),
                "max_drawn_per_trace": MAX_UNITS,
            }
        )
    for s in range(stages):
        time = {"F": fwd[s], "B": bwd[s]}
        busy = {kind: _busy((segs[(s, kind)], 1.0)) for kind in ("F", "B")}
        forward = sched.forward[s, drawn].tolist()
        micro_batch = sched.micro[s, drawn].tolist()
        start = sched.start_s[s, drawn].tolist()
        detailed: set[str] = set()  # kernel detail for a stage's first drawn F and B
        for i, p in enumerate(drawn):
            if p == n - keep and len(drawn) < n:
                _collapsed_passes(tr, s, sched, segs, keep)
            kind = "F" if forward[i] else "B"
            m = micro_batch[i]
            show = s in detail and kind not in detailed
            detailed.add(kind)
            args = {"micro_batch": m, "pass": kind}
            tr.unit(
                s, f"{kind} mb{m}", start[i], segs[(s, kind)], show, args, time[kind], busy[kind]
            )
    ends = [float(sched.end_s[s].max()) for s in range(stages)]
    for s in range(stages):
        t = tr.slice(
            s,
            tr.net_tid.get("dp", 0),
            "DP gradient all-reduce",
            "step",
            ends[s],
            plan.dp_allreduce_s,
        )
        tr.slice(s, TID_SCHEDULE, "optimizer", "step", t, plan.optimizer_s)
    return max(ends) + plan.dp_allreduce_s + plan.optimizer_s


def _collapsed_passes(
    tr: _Trace, s: int, sched: Schedule, segs: dict[tuple[int, str], list[Segment]], keep: int
) -> None:
    """One slice for stage s's passes between its first and last `keep` ones: from the
    first one's start to the last one's end, with their busy time."""
    last = sched.forward.shape[1] - keep  # the first pass drawn again
    forward = sched.forward[s, keep:last]
    micro = sched.micro[s, keep:last]
    nf = int(forward.sum())
    nb = len(forward) - nf
    f_mb, b_mb = micro[forward], micro[~forward]
    f_range = f"F mb{f_mb.min()}-{f_mb.max()}" if nf else ""
    b_range = f"B mb{b_mb.min()}-{b_mb.max()}" if nb else ""
    begin = float(sched.start_s[s, keep])
    span = float(sched.end_s[s, last - 1]) - begin
    args = {
        "passes": len(forward),
        "forward": nf,
        "backward": nb,
        "busy_us": _busy((segs[(s, "F")], nf), (segs[(s, "B")], nb)),
    }
    ranges = ", ".join(r for r in (f_range, b_range) if r)
    name = f"{len(forward)} passes collapsed ({ranges})"
    tr.slice(s, TID_SCHEDULE, name, "schedule", begin, span, args)


def _inference(tr: _Trace, plan: Plan, stages: int, detail: set[int]) -> float:
    """Phases with the same step count run interleaved, step by step, stage after stage."""
    groups: list[list[PhasePlan]] = []
    for p in plan.phases:
        if groups and groups[-1][0].steps == p.steps:
            groups[-1].append(p)
        else:
            groups.append([p])
    scale = float(max(1, plan.micro_batches))
    drawn = drawn_per_stage(stages, 1)
    t = 0.0
    for group in groups:
        segs = [_segments(group, s, stages, "all", scale) for s in range(stages)]
        per_step = [sum(x.duration_s for x in seg) for seg in segs]
        busy = [_busy((seg, 1.0)) for seg in segs]
        label = "+".join(p.name for p in group)
        steps = group[0].steps
        for step in range(min(steps, drawn)):
            for s in range(stages):
                name = label if steps == 1 else f"{label} step {step}"
                show = step == 0 and s in detail
                t = tr.unit(s, name, t, segs[s], show, {"step": step}, per_step[s], busy[s])
        rest = steps - drawn
        if rest > 0:  # one slice per stage spanning the rest (steps alternate over stages)
            tr.collapsed.append(
                {
                    "what": f"{label}: the steps after the first drawn ones, per stage",
                    "steps_per_stage": steps,
                    "drawn_per_stage": drawn,
                    "collapsed_per_stage": rest,
                    "max_drawn_per_trace": MAX_UNITS,
                }
            )
            total = sum(per_step)
            for s in range(stages):
                args = {"steps": rest, "busy_us": _busy((segs[s], rest))}
                name = f"{label} steps {drawn}-{steps - 1} ({rest} steps, one slice)"
                begin = t + sum(per_step[:s])
                span = (rest - 1) * total + per_step[s]
                tr.slice(s, TID_SCHEDULE, name, "schedule", begin, span, args)
            t += rest * sum(per_step)
    return t


def _detail_stages(tr: _Trace, plan: Plan, stages: int) -> set[int]:
    """Stages that get kernel detail: the first MAX_DETAIL_STAGES and the last (where a
    head phase runs); fewer when their kernels would pass MAX_DETAIL_KERNELS (a
    3,000-kernel graph on 17 stages drew 140,000 kernel slices): the first, the last, then
    the next ones in order while they fit."""
    order = dict.fromkeys([0, stages - 1, *range(1, min(stages, MAX_DETAIL_STAGES))])
    kept: list[int] = []
    total = 0
    for s in order:
        total += sum(len(p.kernels) for p in plan.phases if _instances_on(p, s, stages) > 0)
        if kept and total > MAX_DETAIL_KERNELS:
            tr.collapsed.append(
                {
                    "what": "kernel detail on these stages only (the others are alike)",
                    "detail_stages": sorted(kept),
                    "max_detail_kernels_per_trace": MAX_DETAIL_KERNELS,
                }
            )
            break
        kept.append(s)
    return set(kept)


def _drawn_note(plan: Plan, stages: int) -> str:
    """ "draws 96 of 96 micro-batches one by one" / "draws the first and last 32 of each
    stage's 6144 passes one by one, the 6080 between as one slice" / "draws 1024 of 4096
    steps one by one"."""
    if plan.workload_kind == "training":
        micro = max(1, plan.micro_batches)
        keep = drawn_per_stage(stages, 2)
        if micro <= keep:
            return f"draws {micro} of {micro} micro-batches one by one"
        return (
            f"draws the first and last {keep} of each stage's {2 * micro} passes one by one, "
            f"the {2 * micro - 2 * keep} between as one slice"
        )
    steps = max((p.steps for p in plan.phases), default=1)
    return f"draws {min(steps, drawn_per_stage(stages, 1))} of {steps} steps one by one"


def trace_dict(plan: Plan) -> dict[str, Any]:
    """The trace as a JSON-ready dict (events sorted: metadata, then by process/thread/time)."""
    _FORWARD.clear()
    stages = max(1, parallel_degrees(plan)["pp"])
    tr = _Trace(plan)
    detail = _detail_stages(tr, plan, stages)
    if plan.workload_kind == "training":
        makespan = _training(tr, plan, stages, detail)
        kind = "1F1B pipeline schedule over micro-batches"
    else:
        makespan = _inference(tr, plan, stages, detail)
        kind = "steps of one request, stage after stage"
    events = sorted(tr.events, key=lambda e: (e["pid"], e["tid"], e["ts"], e["name"]))
    notes = [
        f"timeline: {kind}; kernel detail for one graph instance per phase and stage",
        f"{_drawn_note(plan, stages)}; the timeline covers the whole step",
        "a head phase is drawn on the last stage",
    ]
    other: dict[str, Any] = {
        "scenario": plan.scenario,
        "plan_latency_s": finite(plan.latency_s),
        "timeline_end_s": finite(makespan),
        "notes": notes,
    }
    if tr.collapsed:
        other["collapsed"] = tr.collapsed
    return {
        "traceEvents": tr.metadata(stages) + events,
        "displayTimeUnit": "ms",
        "otherData": other,
    }


def trace_json(plan: Plan) -> str:
    return (
        json.dumps(trace_dict(plan), sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
    )
