"""Hand-built Plans and a System for the report, trace and time-limit tests: small,
internally consistent (configuration times are the sums/maxima of their kernels), no solver."""

from __future__ import annotations

import math

from hardware.system import Chip, MemoryLevel, NetworkLevel, System, Topology
from solver.plan import ChoiceResult, ConfigPlan, KernelPlan, MemoryUse, PhasePlan, Plan, SolveStats

PEAK = 400e12  # FLOP/s per chip
BW = 2e12  # DRAM bytes/s per chip
LINK = 200e9  # network bytes/s per chip
BPE = 2.0  # bytes per element


def kernel(
    phase: str,
    name: str,
    kind: str,
    cls: str,
    pass_: str,
    dims: dict[str, int],
    config: int,
    shards: int = 2,
    group: str = "",
    comm_bytes: float = 0.0,
) -> KernelPlan:
    """A kernel whose times follow the roofline of the test chip."""
    sizes = list(dims.values())
    if kind in ("GEMM", "BATCHED_GEMM", "ATTENTION"):
        flop = 2.0 * math.prod(sizes)
        m, k, n = (dims.get("m", 1), dims.get("k", 1), dims.get("n", 1))
        weight = k * n * BPE if kind == "GEMM" else 0.0
        act = (m * k + m * n) * BPE
    else:
        flop = float(math.prod(sizes))
        weight, act = 0.0, 2 * math.prod(sizes) * BPE
    kv = act / 2 if kind == "ATTENTION" else 0.0
    dram = (weight + act + kv) / shards
    compute = flop / shards / PEAK
    memory = dram / BW
    network = comm_bytes / LINK
    times = {"compute": compute, "memory": memory, "network": network}
    return KernelPlan(
        phase=phase,
        name=name,
        kind=kind,
        kernel_class=cls,
        pass_=pass_,
        dims=tuple(dims.items()),
        flop=flop,
        weight_bytes=weight,
        activation_bytes=act,
        kv_bytes=kv,
        sharding="n" if shards > 1 else "none",
        tile="output_stationary:Tm=128,Tn=128" if kind == "GEMM" else "stream",
        config=config,
        compute_s=compute,
        memory_s=memory,
        network_s=network,
        dram_bytes=dram,
        network_bytes=comm_bytes,
        sram_bytes=min(dram, 8e6),
        bound=max(times, key=times.__getitem__),
        collective=f"all_reduce {comm_bytes / 1e6:.1f} MB over {group}" if group else "",
        energy_J=flop * 1e-12,
    )


def phase(name: str, role: str, count: int, steps: int, kernels: list[KernelPlan]) -> PhasePlan:
    """Configurations from the kernels' config indices; latency = max (overlap)."""
    configs = []
    for idx in sorted({k.config for k in kernels}):
        ks = [k for k in kernels if k.config == idx]
        c, m, n = (
            sum(k.compute_s for k in ks),
            sum(k.memory_s for k in ks),
            sum(k.network_s for k in ks),
        )
        times = {"compute": c, "memory": m, "network": n}
        configs.append(
            ConfigPlan(
                phase=name,
                index=idx,
                kernels=tuple(k.name for k in ks),
                compute_s=c,
                memory_s=m,
                network_s=n,
                latency_s=max(c, m, n),
                sram_bytes=sum(k.sram_bytes for k in ks),
                bound=max(times, key=times.__getitem__),
            )
        )
    latency = sum(c.latency_s for c in configs)
    lower = sum(max(k.compute_s, k.memory_s, k.network_s) for k in kernels)
    return PhasePlan(
        name=name,
        role=role,
        count=count,
        steps=steps,
        latency_s=latency,
        lower_bound_s=min(lower, latency),
        configs=tuple(configs),
        kernels=tuple(kernels),
    )


def training_plan(micro_batches: int = 4, pp: int = 2) -> Plan:
    s, h, f = 1024, 2048, 8192
    layer = phase(
        "layer",
        "layer",
        8,
        1,
        [
            kernel("layer", "qkv", "GEMM", "Ma_Mw", "FWD", {"m": s, "k": h, "n": 3 * h}, 0),
            kernel(
                "layer",
                "attn",
                "ATTENTION",
                "Ma_Mqa",
                "FWD",
                {"b": 16, "m": s, "k": 128, "n": s},
                0,
            ),
            kernel(
                "layer",
                "proj",
                "GEMM",
                "Ma_Mw",
                "FWD",
                {"m": s, "k": h, "n": h},
                1,
                group="tp",
                comm_bytes=s * h * BPE,
            ),
            kernel("layer", "ffn_up", "GEMM", "Ma_Mw", "FWD", {"m": s, "k": h, "n": f}, 1),
            kernel("layer", "act", "ELEMENTWISE", "Va", "FWD", {"m": s, "n": f}, 1),
            kernel(
                "layer",
                "ffn_down",
                "GEMM",
                "Ma_Mw",
                "FWD",
                {"m": s, "k": f, "n": h},
                2,
                group="tp",
                comm_bytes=s * h * BPE,
            ),
            kernel("layer", "ffn_down_bwd", "GEMM", "Ma_Mw", "BWD", {"m": s, "k": h, "n": f}, 3),
            kernel(
                "layer", "ffn_down_wgrad", "GEMM", "Ma_Mw", "WGRAD", {"m": h, "k": s, "n": f}, 3
            ),
            kernel(
                "layer",
                "qkv_bwd",
                "GEMM",
                "Ma_Mw",
                "BWD",
                {"m": s, "k": 3 * h, "n": h},
                4,
                group="tp",
                comm_bytes=s * h * BPE,
            ),
        ],
    )
    head = phase(
        "head",
        "head",
        1,
        1,
        [
            kernel("head", "lm_head", "GEMM", "Ma_Mw", "FWD", {"m": s, "k": h, "n": 32000}, 0),
            kernel("head", "loss", "SOFTMAX", "Va", "FWD", {"m": s, "n": 32000}, 0),
            kernel("head", "lm_head_bwd", "GEMM", "Ma_Mw", "BWD", {"m": s, "k": 32000, "n": h}, 1),
        ],
    )
    return assembled_plan(
        "train-test",
        "training",
        (layer, head),
        {"tp": 2, "pp": pp, "dp": 2},
        micro_batches,
        iteration=True,
    )


def inference_plan(decode_steps: int = 12, pp: int = 2) -> Plan:
    s, h, f, ctx = 512, 2048, 8192, 1024
    phases = []
    for name, m, steps in (("prefill", s, 1), ("decode", 4, decode_steps)):
        phases.append(
            phase(
                name,
                "layer",
                8,
                steps,
                [
                    kernel(name, "qkv", "GEMM", "Ma_Mw", "FWD", {"m": m, "k": h, "n": 3 * h}, 0),
                    kernel(
                        name,
                        "attn",
                        "ATTENTION",
                        "KVCache",
                        "FWD",
                        {"b": 16, "m": m, "k": 128, "n": ctx},
                        0,
                    ),
                    kernel(
                        name,
                        "proj",
                        "GEMM",
                        "Ma_Mw",
                        "FWD",
                        {"m": m, "k": h, "n": h},
                        1,
                        group="tp",
                        comm_bytes=m * h * BPE,
                    ),
                    kernel(name, "ffn", "GEMM", "Ma_Mw", "FWD", {"m": m, "k": h, "n": f}, 1),
                    kernel(name, "ffn_down", "GEMM", "Ma_Mw", "FWD", {"m": m, "k": f, "n": h}, 2),
                ],
            )
        )
        phases.append(
            phase(
                f"{name}_head",
                "head",
                1,
                steps,
                [
                    kernel(
                        f"{name}_head",
                        "lm_head",
                        "GEMM",
                        "Ma_Mw",
                        "FWD",
                        {"m": m, "k": h, "n": 32000},
                        0,
                    ),
                ],
            )
        )
    par = {"tp": 2, "pp": pp}
    return assembled_plan("infer-test", "inference", tuple(phases), par, 1, iteration=False)


def assembled_plan(
    name: str,
    kind: str,
    phases: tuple[PhasePlan, ...],
    par: dict[str, int],
    micro: int,
    iteration: bool,
) -> Plan:
    busy = sum(p.latency_s * p.count * p.steps * micro for p in phases)
    pp = par.get("pp", 1)
    latency = busy / pp * 1.2 if iteration else busy
    flop = sum(k.flop * p.count * p.steps * micro for p in phases for k in p.kernels)
    chips = math.prod(par.values())
    extra: dict = {}
    if iteration:
        extra = {
            "iteration_time_s": latency,
            "dp_allreduce_s": latency * 0.05,
            "optimizer_s": latency * 0.01,
            "pipeline_bubble_s": latency * 0.1,
        }
        # the step as the solver splits it: the entries add up to the step time
        breakdown = {"pipeline_compute": latency * 0.84, "dp_sync_exposed": latency * 0.05,
                     "optimizer": latency * 0.01, "pipeline_bubble": latency * 0.1}  # fmt: skip
    else:
        prefill = sum(p.latency_s * p.count for p in phases if p.name.startswith("prefill"))
        steps = max(p.steps for p in phases)
        extra = {
            "ttft_s": prefill,
            "tpot_s": (latency - prefill) / steps,
            "tokens_per_s": 4 * steps / latency,
        }
        breakdown = {"prefill": prefill, "decode": latency - prefill}
    return Plan(
        scenario=name,
        workload_kind=kind,
        num_chips=chips,
        parallelism=dict(par),
        placement={"tp": "nvlink:2", "pp": "ib:2"} | ({"dp": "ib:2"} if "dp" in par else {}),
        phases=phases,
        latency_s=latency,
        stats=SolveStats(
            status="optimal",
            objective=latency,
            bound=latency * 0.999,
            gap=0.001,
            solve_time_s=1.25,
            build_time_s=0.5,
            num_vars=1200,
            num_binaries=900,
            num_rows=800,
            milps_solved=7,
            choices_total=6,
            choices_solved=3,
            choices_pruned=2,
            choices_infeasible=1,
        ),
        memory=MemoryUse(
            weights=20e9,
            gradients=10e9 if iteration else 0.0,
            optimizer=15e9 if iteration else 0.0,
            activations=8e9,
            kv_cache=0.0 if iteration else 12e9,
            capacity=80e9,
        ),
        workload_flop=flop,
        peak_flops_per_chip=PEAK,
        flops_utilization=flop / (latency * chips * PEAK),
        system_cost=123456.0,
        system_power_W=5432.1,
        energy_J=flop * 1e-12,
        num_params=7_000_000_000,
        num_active_params=7_000_000_000,
        micro_batches=micro,
        time_breakdown=breakdown,
        choices=(
            ChoiceResult(dict(par), "tp:nvlink pp:ib", latency * 0.9, latency, "solved"),
            ChoiceResult(
                {"tp": 4, "pp": 1}, "tp:nvlink+ib", latency * 0.95, latency * 1.1, "solved"
            ),
            ChoiceResult(
                {"tp": 1, "pp": 4},
                "pp:nvlink+ib",
                latency * 1.3,
                None,
                "pruned",
                "bound above best",
            ),
            ChoiceResult(
                {"tp": 8}, "tp:all", latency * 2, None, "infeasible", "weights exceed HBM"
            ),
        ),
        warnings=("example warning",),
        **extra,
    )


def system() -> System:
    chip = Chip(
        name="TestChip",
        cores=100,
        peak_flops={"bf16": PEAK},
        vector_flops=PEAK / 8,
        sram_bytes=32e6,
        frequency_Hz=1.5e9,
    )
    return System(
        num_chips=8,
        chip=chip,
        memory=(MemoryLevel("HBM", 80e9, BW),),
        network=(
            NetworkLevel("nvlink", Topology.SWITCH, 2, LINK),
            NetworkLevel("ib", Topology.SWITCH, 4, LINK / 4),
        ),
    )
