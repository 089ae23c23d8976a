"""Setup.system (+ the library) -> System, in SI units. The one place where setup-file units
(GB/s, GHz, TFLOP/s, us, pJ) become bytes/s, Hz, FLOP/s, s and J.

Merge order, later wins: the preset (chip, num_chip, topology) <- the library chip (or the
`chip_table` row) <- fields given in the setup (only fields that are set, i.e. nonzero).
Every semantic problem is collected and raised once as a SetupError whose messages name the
setup file and the field path.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from hardware import library
from hardware.calibration import calibration_of
from hardware.checks import Problems, fraction, non_negative, positive
from hardware.chip_table import load_chip_table
from hardware.kernel_source import resolve_kernel_source
from hardware.system import (
    ATTENTION_KERNELS,
    CausalAttentionEfficiency,
    Chip,
    CostModel,
    Efficiency,
    MemoryLevel,
    System,
)
from hardware.topology import resolve_levels, resolve_num_chip
from schema import setup_pb2
from schema.dfmodel import COMPUTE_UTIL, NormalisedSetup, normalise
from schema.errors import SetupError


def resolve_system(setup: setup_pb2.Setup | NormalisedSetup, setup_path: Path) -> System:
    """The machine a setup describes, in SI units. Raises SetupError listing every problem.
    Reads only native fields: a setup not yet through the DFModel seam goes through it here
    (schema.dfmodel.normalise), and messages name the fields the user wrote."""
    native = normalise(setup)
    setup = native.setup
    problems = Problems(str(setup_path))
    sysmsg = setup.system
    preset = _find_preset(sysmsg, problems)
    spec, found = _merged_spec(sysmsg, preset, Path(setup_path), problems)
    found = found and (preset is not None or not sysmsg.preset)
    # An unknown chip leaves an empty spec: checking its numbers would only add noise.
    spec_problems = problems if found else Problems(problems.where)
    chip = _chip(spec, native.origin(COMPUTE_UTIL), spec_problems)
    kernel_system, kernel_source, tables = resolve_kernel_source(sysmsg, spec, spec_problems)
    chip = replace(
        chip, kernel_system=kernel_system, kernel_source=kernel_source, kernel_tables=tables
    )
    num_chip = resolve_num_chip(sysmsg, preset, problems, native)
    levels = resolve_levels(sysmsg, preset, spec, num_chip, problems, spec_problems, native)
    memory = _memory(spec, spec_problems)
    cost = _cost(setup, spec, len(levels), problems)
    if problems:
        raise SetupError(list(problems))
    return System(
        num_chips=num_chip,
        chip=chip,
        memory=memory,
        network=levels,
        cost=cost,
        scale_up_domain=spec.scale_up_domain,
        name=(preset.name if preset else "") or spec.name,
    )


# ---------------------------------------------------------------------------------------
# Chip: preset -> library / chip table -> setup overrides
# ---------------------------------------------------------------------------------------


def _find_preset(sysmsg: setup_pb2.System, problems: Problems) -> setup_pb2.SystemPreset | None:
    if not sysmsg.preset:
        return None
    preset = library.find_preset(sysmsg.preset)
    if preset is None:
        near = library.closest_names(sysmsg.preset, library.preset_names())
        problems.add(
            f'system.preset "{sysmsg.preset}" is not a known preset (known: '
            f"{', '.join(library.preset_names())}){_suggest(near)}"
        )
    return preset


def _merged_spec(
    sysmsg: setup_pb2.System,
    preset: setup_pb2.SystemPreset | None,
    setup_path: Path,
    problems: Problems,
) -> tuple[setup_pb2.ChipSpec, bool]:
    """The library (or chip-table) entry with the setup's accelerator/memory fields on top,
    and whether the named chip was found (True when none is named)."""
    name = sysmsg.chip or (preset.chip if preset else "")
    spec = setup_pb2.ChipSpec()
    found = True
    if name:
        base = _lookup_chip(name, sysmsg.chip_table, setup_path, problems)
        found = base is not None
        if base is not None:
            spec.CopyFrom(base)
    elif sysmsg.chip_table:
        problems.add("system.chip_table is set but system.chip is empty; name the chip to use")
    override = sysmsg.accelerator
    if override.efficiency.collective:
        spec.accelerator.efficiency.ClearField("collective")
    # proto3 MergeFrom copies only set (nonzero) scalars: exactly "fields given override".
    spec.accelerator.MergeFrom(override)
    spec.memory.MergeFrom(sysmsg.memory)
    if sysmsg.memory_levels:
        spec.ClearField("memory_levels")
        spec.memory_levels.extend(sysmsg.memory_levels)
    return spec, found


def _lookup_chip(
    name: str, chip_table: str, setup_path: Path, problems: Problems
) -> setup_pb2.ChipSpec | None:
    table: dict[str, setup_pb2.ChipSpec] = {}
    if chip_table:
        table_path = setup_path.parent / chip_table
        try:
            table = load_chip_table(table_path)
        except SetupError as exc:
            problems.extend(f"{problems.where}: system.chip_table: {p}" for p in exc.problems)
            return None
        by_key = {library.normalize(k): v for k, v in table.items()}
        if library.normalize(name) in by_key:
            return by_key[library.normalize(name)]
    spec = library.find_chip(name)
    if spec is None:
        near = library.closest_names(name, table) if table else []
        near += library.closest_names(name)
        where = f" or {chip_table}" if chip_table else ""
        problems.add(f'system.chip "{name}" is not in the hardware library{where}{_suggest(near)}')
    return spec


def _suggest(names: list[str]) -> str:
    names = list(dict.fromkeys(names))[:3]
    if not names:
        return " (`mapshard hardware list` shows the library)"
    return "; did you mean " + ", ".join(f'"{n}"' for n in names) + "?"


def _chip(spec: setup_pb2.ChipSpec, util_field: str, problems: Problems) -> Chip:
    """`util_field`: where the user gave efficiency.compute_util (for messages)."""
    acc = spec.accelerator
    for fname in (
        "core",
        "systolic_width",
        "systolic_height",
        "sram_cap",
        "freq",
        "vector_tflops",
        "l2_cap",
        "l2_bw_GBps",
        *(f"{p}_tflops" for p in library.PRECISIONS),
    ):
        non_negative(getattr(acc, fname), f"system.accelerator.{fname}", problems)
    peaks = library.peak_flops(acc)
    systolic = ("core", "systolic_width", "systolic_height", "freq")
    if not peaks and any(getattr(acc, f) > 0 for f in systolic):
        for f in systolic:  # a partial systolic description: name what is missing
            if getattr(acc, f) == 0:
                problems.add(
                    f"system.accelerator.{f} must be > 0 to derive the peak from core x "
                    "systolic_width x systolic_height x 2 x freq (or give bf16_tflops), got 0"
                )
    elif not peaks:
        problems.add(
            "system.accelerator has no peak FLOP/s; give a *_tflops field (e.g. bf16_tflops), "
            "or core, systolic_width, systolic_height and freq (GHz), or a library chip in "
            "system.chip"
        )
    if acc.sram_cap == 0:
        problems.add("system.accelerator.sram_cap must be > 0 (bytes of on-chip SRAM), got 0")
    if acc.vector_tflops > 0:
        vector = acc.vector_tflops * 1e12
    elif peaks and not any(getattr(acc, f"{p}_tflops") > 0 for p in library.PRECISIONS):
        vector = max(peaks.values())  # systolic-only (DFModel): SIMD kernels run at full rate
    else:
        vector = _peak(peaks, "bf16") / 16
    return Chip(
        name=spec.name or "custom",
        cores=acc.core,
        peak_flops=peaks,
        vector_flops=vector,
        sram_bytes=acc.sram_cap,
        frequency_Hz=acc.freq * 1e9,
        l2_bytes=acc.l2_cap,
        l2_bandwidth_Bps=acc.l2_bw_GBps * 1e9,
        efficiency=_efficiency(acc.efficiency, util_field, problems),
        tdp_W=spec.tdp_W,
        price_usd=spec.price_usd,
        calibration=calibration_of(acc.efficiency),
        overlap=OVERLAP_NAMES.get(spec.overlap, ""),
    )


# setup.proto OverlapMode -> Chip.overlap
OVERLAP_NAMES = {
    setup_pb2.PERFECT: "perfect",
    setup_pb2.SERIAL_NETWORK: "serial_network",
    setup_pb2.NO_OVERLAP: "none",
}


def _peak(peaks: dict[str, float], precision: str) -> float:
    for p in (precision, "fp16", "bf16"):
        if peaks.get(p, 0.0) > 0:
            return peaks[p]
    return max(peaks.values(), default=0.0)


def _efficiency(e: setup_pb2.Efficiency, util_field: str, problems: Problems) -> Efficiency:
    base = "system.accelerator.efficiency"
    for fname in (
        "gemm_util",
        "dram_util",
        "attention_util",
        "vector_util",
        "fp8_split_accumulate_util",
        "tp_comm_hidden_share",
        "grouped_mm_dram_share",
    ):
        fraction(getattr(e, fname), f"{base}.{fname}", problems)
    for fname in (
        "gemm_half_dim",
        "gemm_tile_m",
        "gemm_tile_n",
        "kernel_overhead_us",
        "kernel_min_time_us",
        "strided_elementwise_gelem_per_s",
        "atomic_add_gelem_per_s",
    ):
        non_negative(getattr(e, fname), f"{base}.{fname}", problems)
    for fname in ("sm_stream_GBps", "wave_us"):
        value = getattr(e.unsplit_decode_attention, fname)
        non_negative(value, f"{base}.unsplit_decode_attention.{fname}", problems)
    fraction(e.compute_util, util_field, problems)
    by_precision: dict[str, float] = {}
    half_by_precision: dict[str, float] = {}
    for entry in e.gemm_util_by_precision:  # the library's entries, then the setup's
        path = f'{base}.gemm_util_by_precision["{entry.precision}"]'
        if entry.precision not in library.PRECISIONS:
            known = ", ".join(library.PRECISIONS)
            problems.add(f"{path} names no precision; give one of {known}")
        fraction(entry.util, f"{path}.util", problems)
        # a later entry replaces an earlier one whole
        by_precision[entry.precision] = entry.util
        half_by_precision.pop(entry.precision, None)
        if entry.HasField("half_dim"):
            non_negative(entry.half_dim, f"{path}.half_dim", problems)
            half_by_precision[entry.precision] = entry.half_dim
    return Efficiency(
        gemm_util=e.gemm_util or 1.0,
        gemm_util_by_precision=tuple(sorted(by_precision.items())),
        gemm_half_dim=e.gemm_half_dim,
        gemm_half_dim_by_precision=tuple(sorted(half_by_precision.items())),
        gemm_tile_m=e.gemm_tile_m,
        gemm_tile_n=e.gemm_tile_n,
        dram_util=e.dram_util or 1.0,
        attention_util=e.attention_util,
        fp8_split_accumulate_util=e.fp8_split_accumulate_util,
        tp_comm_hidden_share=e.tp_comm_hidden_share,
        strided_elementwise_elem_per_s=e.strided_elementwise_gelem_per_s * 1e9,
        atomic_add_elem_per_s=e.atomic_add_gelem_per_s * 1e9,
        grouped_mm_dram_share=e.grouped_mm_dram_share,
        causal_attention=_causal_attention(e, base, problems),
        unsplit_decode_sm_Bps=e.unsplit_decode_attention.sm_stream_GBps * 1e9,
        unsplit_decode_wave_s=e.unsplit_decode_attention.wave_us * 1e-6,
        vector_util=e.vector_util or 1.0,
        kernel_overhead_s=e.kernel_overhead_us * 1e-6,
        kernel_min_time_s=e.kernel_min_time_us * 1e-6,
        gpu_wave_model=e.gpu_wave_model,
        fixed_compute_util=max(e.compute_util, 0.0),
        source=e.source,
    )


def _causal_attention(
    e: setup_pb2.Efficiency, base: str, problems: Problems
) -> tuple[CausalAttentionEfficiency, ...]:
    """The chip's calibrated causal attention families, in file order (a later entry of
    the same family, a setup's, replaces the earlier one whole, in place: give all four
    numbers)."""
    out: dict[str, CausalAttentionEfficiency] = {}
    for entry in e.causal_attention:
        path = f'{base}.causal_attention["{entry.kernel}"]'
        if entry.kernel not in ATTENTION_KERNELS:
            problems.add(
                f"{path} names no kernel family; give one of {', '.join(ATTENTION_KERNELS)}"
            )
        for fname in ("fwd_util", "bwd_util"):  # an entry prices both passes
            positive(getattr(entry, fname), f"{path}.{fname}", problems)
            fraction(getattr(entry, fname), f"{path}.{fname}", problems)
        for fname in ("fwd_wave_us", "bwd_wave_us"):
            non_negative(getattr(entry, fname), f"{path}.{fname}", problems)
        out[entry.kernel] = CausalAttentionEfficiency(
            entry.kernel,
            entry.fwd_util,
            entry.fwd_wave_us * 1e-6,
            entry.bwd_util,
            entry.bwd_wave_us * 1e-6,
        )
    return tuple(out.values())


def with_attention_kernel(system: System, kernel: str, setup_path: Path) -> System:
    """The machine with the named causal attention family first (the setup's
    execution.attention_kernel; "" = the chip's own order). A family the chip is not
    calibrated for leaves none: the attention plateau prices the kernel (its kernels.csv
    time_source says so)."""
    if not kernel:
        return system
    if kernel not in ATTENTION_KERNELS:
        problems = Problems(str(setup_path))
        problems.add(
            f'execution.attention_kernel "{kernel}" names no kernel family; give one of '
            f"{', '.join(ATTENTION_KERNELS)} (or leave it unset: the chip's default)"
        )
        raise SetupError(list(problems))
    chip = system.chip
    chosen = tuple(c for c in chip.efficiency.causal_attention if c.kernel == kernel)
    chip = replace(chip, efficiency=replace(chip.efficiency, causal_attention=chosen))
    return replace(system, chip=chip)


def with_host_op(system: System, host_op_us: float) -> System:
    """The machine with the setup's execution.host_op_us (the host's time per op of a
    loop it runs right after a sync, and of a backward pass it issues ahead of the GPU;
    checked >= 0 and finite with the setup) on its chip."""
    if host_op_us <= 0:
        return system
    chip = system.chip
    efficiency = replace(chip.efficiency, host_op_s=host_op_us * 1e-6)
    return replace(system, chip=replace(chip, efficiency=efficiency))


# ---------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------


def _memory(spec: setup_pb2.ChipSpec, problems: Problems) -> tuple[MemoryLevel, ...]:
    mem = spec.memory
    positive(mem.dram_bw, "system.memory.dram_bw", problems, unit=" (GB/s)")
    non_negative(mem.dram_cap, "system.memory.dram_cap", problems, note=" (0 = unbounded)")
    levels = [
        MemoryLevel(
            name="dram",
            capacity_bytes=mem.dram_cap if mem.dram_cap > 0 else math.inf,
            bandwidth_Bps=mem.dram_bw * 1e9,
        )
    ]
    for i, lv in enumerate(spec.memory_levels):
        path = f"system.memory_levels[{i}]"
        positive(lv.bandwidth_GBps, f"{path}.bandwidth_GBps", problems)
        positive(lv.capacity_bytes, f"{path}.capacity_bytes", problems)
        levels.append(
            MemoryLevel(
                name=lv.name or f"level{i + 1}",
                capacity_bytes=lv.capacity_bytes,
                bandwidth_Bps=lv.bandwidth_GBps * 1e9,
            )
        )
    return tuple(levels)


# ---------------------------------------------------------------------------------------
# Cost
# ---------------------------------------------------------------------------------------


def _cost(
    setup: setup_pb2.Setup, spec: setup_pb2.ChipSpec, num_levels: int, problems: Problems
) -> CostModel:
    """DFModel's units kept ($ and W per GB/s); energy pJ -> J. A chip's price and TDP fill
    accelerator_price / accelerator_power when the setup leaves them 0."""
    c = setup.cost
    for f in setup_pb2.Cost.DESCRIPTOR.fields:
        non_negative(getattr(c, f.name), f"cost.{f.name}", problems)
    per_axis = (c.link_unit_power_x, c.link_unit_power_y, c.link_unit_power_z)
    return CostModel(
        accelerator_price=c.accelerator_price or spec.price_usd,
        accelerator_power_W=c.accelerator_power or spec.tdp_W,
        dram_unit_price=c.dram_unit_price,
        dram_unit_power=c.dram_unit_power,
        link_unit_price=c.link_unit_price,
        link_unit_power=tuple(per_axis[i] if i < 3 else 0.0 for i in range(num_levels)),
        switch_unit_price=c.switch_unit_price,
        switch_unit_power=c.switch_unit_power,
        energy_per_flop_J=c.energy_per_flop_pJ * 1e-12,
        energy_per_dram_byte_J=c.energy_per_dram_byte_pJ * 1e-12,
        energy_per_link_byte_J=c.energy_per_link_byte_pJ * 1e-12,
    )
