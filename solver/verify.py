"""Independent re-check of a finished Plan, from its own recorded numbers.

The MILP, the menus and the fusion search are not called: every figure is recomputed from
the Plan's per-kernel records, the workload's graph and the system, with the latency rule
of `solver.check.config_cost` written out again here. One rule is shared, not rewritten:
how many launches a kernel stands for (`solver.cost.menus.launch_count`, a function of the
kernel and the TP degree alone). A violation means the solver
assembled a plan its own numbers contradict (a bug), so the application refuses to write
it. Returns the violations as sentences; an empty list means the plan is consistent.
"""

from __future__ import annotations

from generator.graph import Workload
from hardware.system import System
from solver.cost.menus import launch_count
from solver.options import ExecutionOptions
from solver.plan import ConfigPlan, KernelPlan, PhasePlan, Plan

REL = 1e-6  # relative tolerance: sums may be reordered, never moved
FEASIBLE = ("optimal", "time_limit")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b)) + 1e-15


def config_latency(
    compute_s: float, memory_s: float, network_s: float, overhead_s: float, ex: ExecutionOptions
) -> float:
    """The latency rule: per-kernel overheads are inside `compute_s`. A serialised network
    runs after compute and the launch overheads never hide under memory:
    overhead + max(compute - overhead, memory) + network, less the hidden share h of the
    shorter of the two when the framework overlaps its collectives with the GEMMs;
    otherwise the three resources overlap (max) or run one after another (sum)."""
    if ex.serialize_network:
        work = max(compute_s - overhead_s, memory_s)
        hidden = ex.network_hidden_share * min(work, network_s)
        return overhead_s + work + network_s - hidden
    if ex.overlap:
        return max(compute_s, memory_s, network_s)
    return compute_s + memory_s + network_s


def _check_config(
    where: str,
    c: ConfigPlan,
    members: list[KernelPlan],
    system: System,
    ex: ExecutionOptions,
    launches: dict[str, int],
    sram_row: bool = True,
) -> list[str]:
    """`launches`: the kernel launches each graph kernel stands for (menus.launch_count,
    the one rule the menus price: Kernel.launches, per expert where issued so), one
    kernel overhead each. `sram_row`: whether the chip's SRAM bounds a configuration
    (not under DFModel's equations where they have no such row: dfmodel_sram_row)."""
    out = []
    names = tuple(sorted(k.name for k in members))
    if names != tuple(sorted(c.kernels)):
        out.append(f"{where}: lists kernels {sorted(c.kernels)} but {list(names)} point to it")
    comp = sum(k.compute_s for k in members)
    mem = sum(k.memory_s for k in members)
    net = sum(k.network_s for k in members)
    for what, got, want in (("compute", c.compute_s, comp), ("memory", c.memory_s, mem)):
        if not _close(got, want):
            out.append(f"{where}: {what} {got:.6g} s != its kernels' sum {want:.6g} s")
    if not _close(c.network_s, net):
        out.append(f"{where}: network {c.network_s:.6g} s != its kernels' sum {net:.6g} s")
    count = sum(launches.get(k.name, 1) for k in members)
    overhead = count * system.chip.efficiency.kernel_overhead_s
    latency = config_latency(comp, mem, net, overhead, ex)
    if not _close(c.latency_s, latency):
        out.append(f"{where}: latency {c.latency_s:.6g} s != the latency rule's {latency:.6g} s")
    buffers = sum(k.sram_bytes for k in members)
    if c.sram_bytes < buffers * (1 - REL) - 1e-6:
        out.append(f"{where}: SRAM {c.sram_bytes:,.0f} B < its kernels' buffers {buffers:,.0f} B")
    sram = system.chip.sram_bytes
    if c.sram_bytes > sram * (1 + 1e-9) + 1e-6 and sram_row:
        out.append(f"{where}: SRAM {c.sram_bytes:,.0f} B > the chip's {sram:,.0f} B")
    return out


def dfmodel_sram_row(ex: ExecutionOptions, workload: Workload) -> bool:
    """Whether DFModel's equations bound a configuration's SRAM: in its DLRM branch and
    its LLM graphs (with sram_cap > 0: DFModel reads 0 as no limit), not in its FFT and
    HPL branches nor in any other graph, and never on a chip with pmu > 0 (its PMU rows
    instead, not reproduced). The rule solver.dfmodel prices and this check holds it to."""
    d = ex.dfmodel
    if d.pmu > 0 or ex.fft_copies > 0 or d.branch == "hpl":
        return False
    if d.branch == "dlrm":
        return True
    llm = workload.kind in ("training", "inference") and workload.seq_len > 0
    return llm and d.sram_bounded


def _check_phase(
    ph: PhasePlan, workload: Workload, system: System, ex: ExecutionOptions, tp: int
) -> list[str]:
    """`tp`: the plan's tensor-parallel degree (the menus' `tp`)."""
    out = []
    by_config: dict[int, list[KernelPlan]] = {}
    for k in ph.kernels:
        by_config.setdefault(k.config, []).append(k)
    indices = sorted(c.index for c in ph.configs)
    if set(by_config) - set(indices):
        out.append(f"phase {ph.name}: kernels use unlisted configurations")
    graph = next((p.graph for p in workload.phases if p.name == ph.name), None)
    launches = {k.name: launch_count(k, tp) for k in graph.kernels} if graph is not None else {}
    sram_row = ex.cost_model != "dfmodel" or dfmodel_sram_row(ex, workload)
    for c in ph.configs:
        where = f"phase {ph.name} config {c.index}"
        members = by_config.get(c.index, [])
        out += _check_config(where, c, members, system, ex, launches, sram_row)
    budget = ex.config_budget(len(ph.kernels))
    if len(ph.configs) > budget:
        out.append(f"phase {ph.name}: {len(ph.configs)} configurations > num_config {budget}")
    total = sum(c.latency_s for c in ph.configs)
    if not _close(ph.latency_s, total):
        out.append(f"phase {ph.name}: latency {ph.latency_s:.6g} s != its configs' {total:.6g} s")
    config = {k.name: k.config for k in ph.kernels}
    if graph is None:
        return out + [f"phase {ph.name}: not a phase of the workload"]
    missing = sorted({k.name for k in graph.kernels} - set(config))
    if missing:
        out.append(f"phase {ph.name}: kernels without a plan: {', '.join(missing[:5])}")
    for e in graph.edges:
        if e.src in config and e.dst in config and config[e.src] > config[e.dst]:
            out.append(
                f"phase {ph.name}: edge {e.src} -> {e.dst} runs backwards "
                f"(config {config[e.src]} > {config[e.dst]})"
            )
    return out


def verify_plan(
    plan: Plan, workload: Workload, system: System, execution_options: ExecutionOptions
) -> list[str]:
    """Every violation of the plan's own arithmetic and of the hard limits (SRAM,
    configurations, graph order, memory capacity); empty when the plan is consistent."""
    out: list[str] = []
    tp = plan.parallelism.get("tp", 1)
    for ph in plan.phases:
        out += _check_phase(ph, workload, system, execution_options, tp)
    mem = plan.memory
    if plan.stats.status in FEASIBLE and mem.capacity > 0 and mem.total > mem.capacity * (1 + REL):
        out.append(f"memory per chip {mem.total:,.0f} B > capacity {mem.capacity:,.0f} B")
    return out
