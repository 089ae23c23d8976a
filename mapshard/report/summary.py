"""summary.json: the plan's totals under the stable names of DESIGN.md's machine contract,
and the plan's texts the terminal and the HTML share (parallelism, training knobs)."""

from __future__ import annotations

import json
from typing import Any

from mapshard.analyses.stream_sim import PERCENTILES
from mapshard.fmt import finite
from mapshard.report.energy import step_energy
from mapshard.report.totals import (
    PARALLELISMS,
    busy_total_s,
    parallel_degrees,
    phase_instances,
    phase_total_s,
)
from mapshard.views import StreamView, Views
from solver.plan import Plan

TIMING_KEYS = ("solve_time_s", "build_time_s", "solve_cpu_s", "first_plan_cpu_s")


def parallelism_text(plan: Plan, sep: str = " ", skip_ones: bool = False) -> str:
    """ "TP 8 PP 1 DP 1 EP 8 (experts over the TP chips) CP 1": expert parallelism that splits
    the experts over the same chips as TP says so, rather than reading as a separate factor
    of the chip count."""
    deg = parallel_degrees(plan)
    ep_on_tp = deg["ep"] > 1 and deg["ep"] == deg["tp"] and "ep" not in plan.placement
    parts = []
    for p in PARALLELISMS:
        if skip_ones and deg[p] <= 1:
            continue
        note = " (experts over the TP chips)" if p == "ep" and ep_on_tp else ""
        parts.append(f"{p.upper()}{sep}{deg[p]}{note}")
    return " ".join(parts)


def training_text(plan: Plan) -> str:
    """ "micro-batch 2 (searched), recompute selective (searched), ZeRO-1 (given),
    interleave 1 (searched)": the training knobs the plan runs and which the outer search
    chose; "" for a plan that is not LLM training."""
    t = plan.training
    if not t:
        return ""
    searched = set(t.get("searched", ()))  # type: ignore[arg-type]
    names = (
        ("micro_batch", "micro-batch {}"),
        ("recompute", "recompute {}"),
        ("zero_stage", "ZeRO-{}"),
        ("virtual_pipeline", "interleave {}"),
    )
    return ", ".join(
        form.format(t[key]) + (" (searched)" if key in searched else " (given)")
        for key, form in names
    )


def _clean(value: Any) -> Any:
    """JSON-safe and deterministic: non-finite floats become null, tuples lists."""
    if isinstance(value, float):
        return finite(value)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _phases(plan: Plan) -> list[dict[str, Any]]:
    busy = busy_total_s(plan)
    return [
        {
            "name": p.name,
            "role": p.role,
            "count": p.count,
            "steps": p.steps,
            "instances": phase_instances(plan, p),
            "latency_s": p.latency_s,
            "lower_bound_s": p.lower_bound_s,
            "total_s": phase_total_s(plan, p),
            "share_of_busy": phase_total_s(plan, p) / busy if busy > 0 else None,
            "num_configs": len(p.configs),
            "num_kernels": len(p.kernels),
        }
        for p in plan.phases
    ]


def _energy(plan: Plan) -> dict[str, Any]:
    """energy_J per step (null when not modelled) and the model that gave it."""
    e = step_energy(plan)
    return {"energy_J": e.joules, "energy_model": e.model, "energy_utilisation": e.utilisation}


def time_sources(plan: Plan) -> dict[str, dict[str, float]]:
    """Kernels and their compute time per step (launch overhead included, x instances) by
    the source of that time (kernels.csv `time_source`)."""
    out: dict[str, dict[str, float]] = {}
    for phase in plan.phases:
        instances = phase_instances(plan, phase)
        for k in phase.kernels:
            entry = out.setdefault(k.time_source or "unknown", {"kernels": 0, "compute_s": 0.0})
            entry["kernels"] += 1
            entry["compute_s"] += k.compute_s * instances
    return dict(sorted(out.items()))


def summary_dict(
    plan: Plan,
    views: Views | None = None,
) -> dict[str, Any]:
    """summary.json content: nothing in it depends on the machine or its load (the
    wall-clock times are timing.json's); each view the run computed (what-if, serving,
    stream) goes under its own key."""
    views = views or Views()
    st = plan.stats
    mem = plan.memory
    out: dict[str, Any] = {
        "status": st.status,
        "gap": st.gap,
        "latency_s": plan.latency_s,
        "objective": st.objective,
        "bound": st.bound,
        "solver": st.solver,
        "fusion_search": st.fusion_search,
        "stop_reason": st.stop_reason,
        "search_space": st.search_space,
        "num_vars": st.num_vars,
        "num_binaries": st.num_binaries,
        "num_rows": st.num_rows,
        "milps_solved": st.milps_solved,
        "choices_total": st.choices_total,
        "choices_solved": st.choices_solved,
        "choices_pruned": st.choices_pruned,
        "choices_infeasible": st.choices_infeasible,
        "choices_not_solved": st.choices_not_solved,
        "scenario": plan.scenario,
        "workload_kind": plan.workload_kind,
        "workload_label": plan.workload_label or plan.workload_kind,
        "chip": plan.chip or None,
        "num_chips": plan.num_chips,
        "parallelism": parallel_degrees(plan),
        "placement": dict(sorted(plan.placement.items())),
        "micro_batches": plan.micro_batches,
        # a system without prices or powers is not priced / not modelled: null, never $0
        "system_cost": plan.system_cost or None,
        "system_power_W": plan.system_power_W or None,
        "workload_flop": plan.workload_flop,
        "peak_flops_per_chip": plan.peak_flops_per_chip,
        "flops_utilization": plan.flops_utilization,
        "memory_per_chip_bytes": mem.total,
        "memory_capacity_bytes": mem.capacity,
        "memory_breakdown_bytes": {
            "weights": mem.weights,
            "gradients": mem.gradients,
            "optimizer": mem.optimizer,
            "activations": mem.activations,
            "kv_cache": mem.kv_cache,
        },
        "num_params": plan.num_params,
        "num_active_params": plan.num_active_params,
        "pipeline_bubble_s": plan.pipeline_bubble_s,
        "dp_allreduce_s": plan.dp_allreduce_s,
        "optimizer_s": plan.optimizer_s,
        "pp_transfer_s": plan.pp_transfer_s,
        "time_breakdown": dict(sorted(plan.time_breakdown.items())),
        "busy_time_s": busy_total_s(plan),
        "phases": _phases(plan),
        "num_kernels": sum(len(p.kernels) for p in plan.phases),
        "time_sources": time_sources(plan),
        "num_configs": sum(len(p.configs) for p in plan.phases),
        "warnings": list(plan.warnings),
        "overlap": plan.overlap,
        "cost_model": plan.cost_model,
    }
    if plan.network_hidden_share > 0:
        out["tp_comm_hidden_share"] = plan.network_hidden_share
    if plan.workload_kind == "training" and plan.comm_hidden_share < 1:
        out["step_comm_hidden_share"] = plan.comm_hidden_share
    if plan.training:
        out["training"] = dict(plan.training)
    if plan.chip_calibration is not None:
        out["chip_calibration"] = plan.chip_calibration.to_json()
    if plan.model_differences:
        out["native_vs_dfmodel_s"] = [
            {"term": name, "native_s": a, "dfmodel_s": b, "difference_s": a - b}
            for name, a, b in plan.model_differences
        ]
    if plan.cost_differences:
        out["native_vs_dfmodel_cost"] = {
            name: {"native": a, "dfmodel": b, "difference": a - b}
            for name, a, b in plan.cost_differences
        }
    for key in ("iteration_time_s", "ttft_s", "tpot_s", "tokens_per_s"):
        value = getattr(plan, key)
        if value is not None:
            out[key] = value
    out |= _energy(plan)
    if views.sensitivity is not None:
        out["sensitivity"] = views.sensitivity.as_dict()
    if views.serving is not None:
        out["serving"] = views.serving.as_dict()
    if views.stream is not None:
        out["stream"] = views.stream.as_dict()
        out |= stream_headline(views.stream, out)
    return _clean(dict(sorted(out.items())))


def stream_headline(stream: StreamView, summary: dict[str, Any]) -> dict[str, Any]:
    """A request stream answers "what does serving this stream give": its throughput and
    median latencies are the top-level figures; the solved engine step the plan shows keeps
    its own under `plan_step`."""
    st = stream.stats
    median = PERCENTILES.index(50)
    return {
        "latency_s": st.latency_s[median],
        "ttft_s": st.ttft_s[median],
        "tpot_s": st.tpot_s[median] if st.tpot_s else None,
        "tokens_per_s": st.output_tokens_per_s,
        "headline": "stream: output tokens/s and p50 latencies of the simulated stream",
        "plan_step": {k: summary.get(k) for k in ("latency_s", "ttft_s", "tpot_s", "tokens_per_s")},
    }


def summary_json(plan: Plan, views: Views | None = None) -> str:
    """summary.json text: sorted keys, two-space indent, trailing newline."""
    data = summary_dict(plan, views)
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


def timing_json(plan: Plan) -> str:
    """timing.json: the run's wall-clock figures, the one result file that differs between
    two runs of the same input (DESIGN.md's machine contract)."""
    st = plan.stats
    data = {key: finite(getattr(st, key)) for key in TIMING_KEYS}
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"
