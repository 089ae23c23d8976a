"""The resolved machine, in SI units: what the solver sees of the hardware.

Built once by `hardware.resolve` from the setup's `system` (and the library); frozen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from hardware.calibration import CORE_PARTS, UNCALIBRATED, Calibration


class Topology(str, Enum):
    RING = "ring"
    SWITCH = "switch"
    FULLY_CONNECTED = "fully_connected"
    TORUS = "torus"


PARALLELISMS = ("TP", "PP", "DP", "EP", "CP")


@dataclass(frozen=True)
class CollectiveEfficiency:
    bus_bw_util: float = 1.0  # achievable fraction of link bandwidth for large messages
    latency_s: float = 0.0  # alpha per algorithm step
    half_bw_bytes: float = 0.0  # legacy curve: chunk size reaching half the bandwidth
    # calibrated (message bytes, fraction of link bandwidth) points, ascending in size;
    # replaces bus_bw_util and half_bw_bytes when given (solver.cost.collectives)
    bus_bw_curve: tuple[tuple[float, float], ...] = ()
    # the same points for all-to-all alone (one chip's send buffer), all-gather alone (the
    # gathered output), reduce-scatter alone (the input); empty: bus_bw_curve
    all_to_all_curve: tuple[tuple[float, float], ...] = ()
    all_gather_curve: tuple[tuple[float, float], ...] = ()
    reduce_scatter_curve: tuple[tuple[float, float], ...] = ()

    def curve_for(self, kind: str) -> tuple[tuple[float, float], ...]:
        """The calibrated points a collective of `kind` runs at: its own where the chip
        gives them, else the all-reduce's (bus_bw_curve; may be empty)."""
        own = {
            "all_to_all": self.all_to_all_curve,
            "all_gather": self.all_gather_curve,
            "reduce_scatter": self.reduce_scatter_curve,
        }.get(kind, ())
        return own or self.bus_bw_curve


@dataclass(frozen=True)
class NetworkLevel:
    """One dimension of a hierarchical topology (innermost first)."""

    name: str
    kind: Topology
    degree: int  # chips along this level; 0 = searched
    link_bandwidth_Bps: float  # per chip, one direction
    latency_s: float = 0.0
    parallelism: tuple[str, ...] = ()  # assigned parallelisms; empty = searched
    torus_dims: tuple[int, ...] = ()
    efficiency: CollectiveEfficiency = field(default_factory=CollectiveEfficiency)


@dataclass(frozen=True)
class MemoryLevel:
    name: str
    capacity_bytes: float
    bandwidth_Bps: float


# the fused causal attention kernel families a chip may be calibrated for
# (Execution.attention_kernel, efficiency.causal_attention)
ATTENTION_KERNELS = ("cudnn", "fa2")


@dataclass(frozen=True)
class CausalAttentionEfficiency:
    """One fused causal attention kernel family: fraction of the 16-bit peak on the tiles
    it executes and seconds per wave of query tiles, forward and each backward kernel."""

    kernel: str
    fwd_util: float
    fwd_wave_s: float
    bwd_util: float
    bwd_wave_s: float


@dataclass(frozen=True)
class Efficiency:
    """Achievable fractions of peak; 1.0 everywhere is the pure roofline."""

    gemm_util: float = 1.0
    # plateau per math precision ("fp8", ...), replacing gemm_util at that precision
    gemm_util_by_precision: tuple[tuple[str, float], ...] = ()
    gemm_half_dim: float = 0.0
    # K roll-off per math precision, replacing gemm_half_dim at that precision
    gemm_half_dim_by_precision: tuple[tuple[str, float], ...] = ()
    gemm_tile_m: int = 0
    gemm_tile_n: int = 0
    dram_util: float = 1.0
    attention_util: float = 0.0  # 0 = gemm_util
    vector_util: float = 1.0
    kernel_overhead_s: float = 0.0
    # shortest time of one kernel, overhead included (0 = none): the launch-rate floor
    kernel_min_time_s: float = 0.0
    gpu_wave_model: bool = False
    fixed_compute_util: float = 0.0  # efficiency.compute_util: overrides the GEMM model
    # FP8 plateau of split-accumulation GEMMs (FP8 training's dgrad/wgrad; 0 = FP8 plateau)
    fp8_split_accumulate_util: float = 0.0
    # share of a TP collective that hides under its GEMM when the framework overlaps them
    # (Execution.tp_comm_overlap; 0 = not calibrated: serial)
    tp_comm_hidden_share: float = 0.0
    # elements/s of a framework's strided (non-vectorized) elementwise kernel (0 = not
    # calibrated: such kernels are DRAM-bound like any other)
    strided_elementwise_elem_per_s: float = 0.0
    # 16-bit atomic adds/s of a framework's scatter-add (0 = not calibrated: DRAM-bound)
    atomic_add_elem_per_s: float = 0.0
    # share of the DRAM peak torch._grouped_mm's small-tile kernel streams at (0 = not
    # calibrated: the achieved DRAM bandwidth like any kernel)
    grouped_mm_dram_share: float = 0.0
    # causal fused attention from its executed tiles (kernel_times.causal_attention_time),
    # one entry per kernel family, the one the kernels run first (hardware.resolve puts
    # execution.attention_kernel's there); () = not calibrated: the attention plateau
    causal_attention: tuple[CausalAttentionEfficiency, ...] = ()
    # decode attention without a KV split (kernel_times.unsplit_decode_time): one SM's
    # streaming read bandwidth (B/s; 0 = not calibrated) and the fixed time of a wave
    unsplit_decode_sm_Bps: float = 0.0
    unsplit_decode_wave_s: float = 0.0
    # the host's time to issue one op of a loop it runs right after a sync (s; 0 = the
    # host keeps ahead): Execution.host_op_us, a property of the framework and host CPU
    host_op_s: float = 0.0
    source: str = ""
    # the chip's own gemm_util when `solver.cost.efficiency.for_precision` has put another
    # precision's plateau in its place (0 = not replaced); kernels that run at another
    # precision than the workload's (a 16-bit LM head under FP8) take their plateau from it
    base_gemm_util: float = 0.0
    # ... and its own gemm_half_dim, which for_precision rescales for FP64/FP32 GEMMs or
    # replaces by a precision's own (-1 = not replaced)
    base_gemm_half_dim: float = -1.0


@dataclass(frozen=True)
class Chip:
    name: str
    cores: int
    peak_flops: dict[str, float]  # per precision ("fp32", "bf16", "fp8", ...), FLOP/s dense
    vector_flops: float  # FLOP/s for elementwise work
    sram_bytes: float  # on-chip buffer the tiling may use
    frequency_Hz: float
    l2_bytes: float = 0.0
    l2_bandwidth_Bps: float = 0.0
    efficiency: Efficiency = field(default_factory=Efficiency)
    tdp_W: float = 0.0
    price_usd: float = 0.0
    # what `efficiency` rests on (hardware.calibration); a chip built in code is uncalibrated
    calibration: Calibration = field(
        default_factory=lambda: Calibration(UNCALIBRATED, (), CORE_PARTS)
    )
    # calibrated overlap of compute, memory and network (setup.proto OverlapMode):
    # "perfect", "serial_network", "none", or "" when the chip does not say
    overlap: str = ""
    # measured kernel tables (hardware.kernel_db): the database's system folder and the
    # framework-version read from it ("trtllm-1.3.0rc20"); "" = none, the physical model
    kernel_system: str = ""
    kernel_source: str = ""
    # the kernel classes that read those tables (hardware.kernel_source.TABLE_KINDS)
    kernel_tables: tuple[str, ...] = ()

    def peak(self, precision: str) -> float:
        """Peak matrix FLOP/s at `precision`, falling back to the nearest wider type."""
        for p in _FALLBACK.get(precision, (precision,)):
            if self.peak_flops.get(p, 0.0) > 0:
                return self.peak_flops[p]
        return max(self.peak_flops.values())


_FALLBACK = {
    "fp8": ("fp8", "int8", "bf16", "fp16"),
    "int8": ("int8", "fp8", "bf16", "fp16"),
    "int4": ("int4", "int8", "fp8", "bf16"),
    "bf16": ("bf16", "fp16"),
    "fp16": ("fp16", "bf16"),
    "tf32": ("tf32", "fp32"),
    "fp32": ("fp32", "tf32"),
    "fp64": ("fp64", "fp32"),
}


@dataclass(frozen=True)
class CostModel:
    """DFModel's cost/power units plus an energy model (all per the setup's `cost`)."""

    accelerator_price: float = 0.0  # $
    accelerator_power_W: float = 0.0
    dram_unit_price: float = 0.0  # $ per GB/s
    dram_unit_power: float = 0.0  # W per GB/s
    link_unit_price: float = 0.0  # $ per GB/s
    link_unit_power: tuple[float, ...] = ()  # W per GB/s, per level (x, y, z)
    switch_unit_price: float = 0.0  # $ per GB/s per port
    switch_unit_power: float = 0.0  # W per GB/s per port
    energy_per_flop_J: float = 0.0
    energy_per_dram_byte_J: float = 0.0
    energy_per_link_byte_J: float = 0.0


@dataclass(frozen=True)
class System:
    num_chips: int
    chip: Chip
    memory: tuple[MemoryLevel, ...]  # main memory first (HBM/DRAM), then outer levels
    network: tuple[NetworkLevel, ...]  # innermost first
    cost: CostModel = field(default_factory=CostModel)
    scale_up_domain: int = 0
    name: str = ""

    @property
    def dram(self) -> MemoryLevel:
        return self.memory[0]

    @property
    def degrees_known(self) -> bool:
        return all(level.degree > 0 for level in self.network)
