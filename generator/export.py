"""A generated workload as files: editable graph files, a kernel table and a summary.

`generated_files(workload, setup=None)` returns name -> text (no disk access; the command
writes them as one folder MapShard owns):
- `graph_<phase>.txt` per phase (and `graph.txt` when there is one phase): a Setup text
  proto holding the phase's `dataflow_graph` (einsum kernels, `repeat` = the phase's count).
  Given the original `setup`, its system/cost/execution/solver blocks are copied in (without
  `execution.llm`, so `repeat` counts) and the file runs as a scenario of its own.
- `kernels.csv`: one row per kernel (phase, name, kind, class, pass, dims, FLOP, weight /
  activation / KV bytes, count = instances per step) and a TOTAL row (count-weighted sums).
- `summary.json`: num_params, num_active_params, flop_per_step, kv_cache_bytes, phases, ...
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict

from generator.graph import Phase, Workload
from generator.proto_write import graph_to_proto
from schema import setup_pb2
from schema.text_out import message_text

CSV_COLUMNS = (
    "phase",
    "name",
    "kind",
    "class",
    "pass",
    "dims",
    "flop",
    "weight_bytes",
    "activation_bytes",
    "kv_bytes",
    "count",
    "flop_total",
)


def phase_setup_text(phase: Phase, workload: Workload, setup: setup_pb2.Setup | None = None) -> str:
    out = setup_pb2.Setup()
    if setup is not None:
        for field in ("system", "cost", "execution", "gurobi", "solver"):
            if setup.HasField(field):
                getattr(out, field).CopyFrom(getattr(setup, field))
        out.execution.ClearField("llm")
        out.name = f"{setup.name}_{phase.name}" if setup.name else phase.name
    out.dataflow_graph.CopyFrom(graph_to_proto(phase.graph, repeat=phase.count))
    header = (
        f"# Phase {phase.name!r} of a generated {workload.kind} workload: "
        f"{len(phase.graph.kernels)} kernels, runs {phase.count} x per step"
        f"{f', {phase.steps} steps' if phase.steps != 1 else ''} (role {phase.role}).\n"
        "# Editable: kernels are einsum loops; read back with `dataflow_graph` input.\n"
    )
    return header + message_text(out)


def kernels_csv(workload: Workload) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    tot = dict(flop=0.0, weight=0.0, act=0.0, kv=0.0)
    for ph in workload.phases:
        count = ph.count * ph.steps
        for k in ph.graph.kernels:
            dims = ";".join(f"{d}={s}" for d, s in k.dims)
            w.writerow(
                [
                    ph.name,
                    k.name,
                    k.kind.value,
                    k.kernel_class,
                    k.pass_.value,
                    dims,
                    f"{k.flop:.6g}",
                    f"{k.weight_bytes:.6g}",
                    f"{k.activation_bytes:.6g}",
                    f"{k.kv_bytes:.6g}",
                    count,
                    f"{k.flop * count:.6g}",
                ]
            )
            tot["flop"] += k.flop * count
            tot["weight"] += k.weight_bytes * count
            tot["act"] += k.activation_bytes * count
            tot["kv"] += k.kv_bytes * count
    w.writerow(
        [
            "TOTAL",
            "",
            "",
            "",
            "",
            "",
            f"{tot['flop']:.6g}",
            f"{tot['weight']:.6g}",
            f"{tot['act']:.6g}",
            f"{tot['kv']:.6g}",
            "",
            f"{tot['flop']:.6g}",
        ]
    )
    return buf.getvalue()


def summary(workload: Workload) -> dict:
    m = workload.model
    return {
        "kind": workload.kind,
        "phase": workload.phase,
        "num_params": m.num_params if m else 0,
        "num_active_params": m.num_active_params if m else 0,
        "flop_per_step": workload.flop_per_step,
        "kv_cache_bytes": workload.kv_cache_bytes,
        "model": asdict(m) if m else None,
        "phases": [
            {
                "name": p.name,
                "role": p.role,
                "count": p.count,
                "steps": p.steps,
                "kernels": len(p.graph.kernels),
                "edges": len(p.graph.edges),
                "flop": p.graph.flop,
            }
            for p in workload.phases
        ],
        "global_batch": workload.global_batch,
        "micro_batch": workload.micro_batch,
        "seq_len": workload.seq_len,
        "batch": workload.batch,
        "input_len": workload.input_len,
        "output_len": workload.output_len,
        "recompute": workload.recompute,
        # training knobs the outer search chooses (the values above are then the first
        # candidate's): see `mapshard run`'s summary.json "training"
        "searched": list(workload.searched),
        "compute_dtype": workload.compute_dtype,
        "notes": list(workload.notes),
    }


def generated_files(workload: Workload, setup: setup_pb2.Setup | None = None) -> dict[str, str]:
    """The files described above, name -> text."""
    files = {
        f"graph_{ph.name}.txt": phase_setup_text(ph, workload, setup) for ph in workload.phases
    }
    if len(workload.phases) == 1:
        files["graph.txt"] = phase_setup_text(workload.phases[0], workload, setup)
    files["kernels.csv"] = kernels_csv(workload)
    files["summary.json"] = json.dumps(summary(workload), indent=2) + "\n"
    return files
