"""mapping.dot: the kernels clustered per phase and per configuration, coloured by
configuration (as DFModel draws its dataflow graph), and its SVG rendering when Graphviz's
`dot` is installed.

Edges come from the workload's graphs when given; otherwise dashed arrows show the execution
order inside each phase (the Plan itself carries no edges).
"""

from __future__ import annotations

import shutil
import subprocess

from generator.graph import Workload
from mapshard.fmt import fmt_time
from mapshard.report.tables import ordered_kernels
from solver.plan import KernelPlan, Plan

PALETTE = (
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#dbdb8d",
    "#9edae5",
    "#d9d9d9",
    "#fdd0a2",
    "#c7e9c0",
)
MAX_SVG_NODES = 3000  # beyond this `dot` takes minutes; the .dot file is still written


def _q(text: str) -> str:
    """A DOT string literal; newlines become DOT's centred line breaks."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def mapping_dot(plan: Plan, workload: Workload | None = None) -> str:
    edges = {p.name: p.graph.edges for p in workload.phases} if workload else {}
    lines = [
        "digraph mapping {",
        "  rankdir=LR;",
        "  compound=true;",
        '  graph [fontname="Helvetica", fontsize=11];',
        '  node [shape=box, style="filled,rounded", fontname="Helvetica", fontsize=10];',
        '  edge [color="#555555"];',
        f"  label={_q(f'{plan.scenario}: mapping by configuration')};",
        "  labelloc=t;",
    ]
    for pi, phase in enumerate(plan.phases):
        lines.append(f"  subgraph cluster_p{pi} {{")
        title = (
            f"{phase.name} ({phase.role}) x{phase.count} x{phase.steps} steps, "
            f"one instance {fmt_time(phase.latency_s)}"
        )
        lines.append(f"    label={_q(title)};")
        lines.append('    style=rounded; color="#888888";')
        kernels = ordered_kernels(phase)
        # one pass: a kernel-by-kernel phase has as many configurations as kernels
        by_config: dict[int, list[KernelPlan]] = {}
        for k in kernels:
            by_config.setdefault(k.config, []).append(k)
        for c in sorted(phase.configs, key=lambda c: c.index):
            color = PALETTE[c.index % len(PALETTE)]
            lines.append(f"    subgraph cluster_p{pi}_c{c.index} {{")
            title = f"config {c.index}: {fmt_time(c.latency_s)}, {c.bound}-bound"
            lines.append(f"      label={_q(title)};")
            lines.append(f'      style="filled,rounded"; fillcolor="{color}40"; color="{color}";')
            for k in by_config.get(c.index, ()):
                label = (
                    f"{k.name}\n{k.kind} {k.sharding}\n"
                    f"{fmt_time(max(k.compute_s, k.memory_s, k.network_s))} {k.bound}"
                )
                node = _q(f"{phase.name}/{k.name}")
                lines.append(f'      {node} [label={_q(label)}, fillcolor="{color}"];')
            lines.append("    }")
        indices = {c.index for c in phase.configs}
        orphans = [k for k in kernels if k.config not in indices]
        for k in orphans:
            lines.append(f"    {_q(f'{phase.name}/{k.name}')} [label={_q(k.name)}];")
        lines.append("  }")
        names = {k.name for k in phase.kernels}
        if phase.name in edges:
            pairs = sorted(
                {(e.src, e.dst) for e in edges[phase.name] if e.src in names and e.dst in names}
            )
            for src, dst in pairs:
                lines.append(f"  {_q(f'{phase.name}/{src}')} -> {_q(f'{phase.name}/{dst}')};")
        else:
            for a, b in zip(kernels, kernels[1:]):
                lines.append(
                    f"  {_q(f'{phase.name}/{a.name}')} -> "
                    f"{_q(f'{phase.name}/{b.name}')} [style=dashed];"
                )
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_svg(dot_text: str, num_nodes: int, timeout_s: float = 60.0) -> str | None:
    """SVG from Graphviz, or None when `dot` is missing, fails or the graph is too big."""
    exe = shutil.which("dot")
    if exe is None or num_nodes > MAX_SVG_NODES:
        return None
    try:
        res = subprocess.run(
            [exe, "-Tsvg"],
            input=dot_text,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout if res.returncode == 0 and "<svg" in res.stdout else None
