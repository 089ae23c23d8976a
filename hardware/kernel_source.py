"""`system.kernel_source` -> the measured kernel tables a chip reads (hardware.kernel_db), or
none: the setup's choice checked against the installed database.

- "none" / "roofline": the calibrated roofline alone;
- "<framework>" or "<framework>-<version>": that database folder, or a SetupError saying why
  it cannot apply (chip not covered, version unknown, database not installed, the chip's
  compute numbers overridden in the setup);
- unset: `DEFAULT_FRAMEWORK`'s newest collected version on a chip `tables_by_default`
  names (a covered chip with no calibrated GEMM plateau, or one in `DEFAULT_ON`); on the
  chips in `GEMM_16BIT_ON`, for the BF16/FP16 GEMMs short of one wave of library tiles,
  unless the setup gives the chip a plateau of its own; on the chips in
  `DECODE_ATTENTION_ON`, for decode attention; the roofline elsewhere (and wherever the
  default cannot apply, silently: the kernels' time sources say which model priced them).

The kernel classes a chip reads from its tables (`Chip.kernel_tables`): GEMMs in every
precision (`GEMM_TABLE`), BF16/FP16 GEMMs short of one wave (`GEMM_16BIT_TABLE`), and
group-aware decode attention (`DECODE_ATTENTION_TABLE`).
"""

from __future__ import annotations

from hardware import kernel_db
from hardware.calibration import has_gemm_plateau
from hardware.checks import Problems
from schema import setup_pb2

# Chips whose GEMMs take the tables unless the setup says otherwise: those where the tables
# predict the check rows better than the fitted model (`mapshard validate` prints both).
# None yet: with trtllm-1.3.0rc20 (1.0.0 on A100), mean |error| % tables everywhere / model
# alone, on CHECK: GEMM 14.84 / 4.87 (the cuBLASLt rows are stream-timed library GEMMs;
# TensorRT-LLM's FP8 linear layers at small and narrow shapes run 25-70 % slower), training
# 7.84 / 8.07, inference 9.77 / 9.30, serving 16.78 / 2.66; on FIT: GEMM 20.66 / 2.71,
# training 6.41 / 6.16, inference 7.87 / 9.80, serving 14.35 / 0.96 (2026-11-29). The
# calibrated chips' GEMM tables are opt-in: `system { kernel_source: "trtllm" }`.
# Tried and not adopted (2026-11-29): the BF16/FP16 GEMMs alone from the tables on every
# calibrated covered chip (FP8 kept on the model: the FP8 rows hold ~10 us of ops beyond the
# GEMM and its quantize, 1024^3 at 14.5 us against 4.8 us measured on H200), never faster
# than the fitted plateau. The tables carry shape effects the roofline lacks: our own 57
# H200 BF16 GEMMs (M-H200-G) 24.9 -> 11.3 % mean |error|, H200 decode layers FIT 4.99 ->
# 3.13, CHECK 5.40 -> 4.22. But their large GEMMs run ~12 % faster than the H200 that
# measured the FIT rows (4096^3: 783 against 695 TFLOP/s) and the A100 table misses the
# cuBLASLt rows (2048^3 FP16: 158 against 222 TFLOP/s): FIT training 6.20 -> 6.32, GEMM
# 2.71 -> 2.73, serving 0.96 -> 1.00 (inference 6.84 -> 6.18), so not adopted; the CHECK
# rows agreed: GEMM 4.87 -> 7.13, training 5.01 -> 5.92, serving 2.66 -> 3.07.
# Then tried with the A100 too: the one-wave rule of GEMM_16BIT_ON below on every
# calibrated covered chip: FIT GEMM 3.43 -> 3.72 with the dev rows (A100 64 x 12288 x 12288
# BF16 -0.04 -> +9.3 %, the dev GEMM group over its 5 % bound), hence the A100 left out.
DEFAULT_ON: frozenset[str] = frozenset()

GEMM_TABLE = "gemm"
GEMM_16BIT_TABLE = "gemm_16bit"
DECODE_ATTENTION_TABLE = "decode_attention"
TABLE_KINDS = (GEMM_TABLE, DECODE_ATTENTION_TABLE)

# Chips whose BF16/FP16 GEMMs short of one wave of the library's output tiles (fewer tiles
# than cores: solver.cost.table_times `gemm_table_of`) take the measured table unless the
# setup names a source: there the library's choices (split-K, tile shape, GEMV paths,
# launch latency) set the time, which the roofline does not model; GEMMs of whole waves
# keep the fitted plateau, the sustained rate the FIT rows measured, and a table time is
# never faster than it (`floor_rate`); FP8 GEMMs keep the model. The chips whose tables
# are the default framework's current release (trtllm-1.3.0rc20): the A100's is 1.0.0, a
# release apart, and its BF16 rows miss the FIT cuBLASLt rows (64 x 12288 x 12288: +9.3 %
# against -0.04 % with the model). Chosen on the FIT rows, dev rows included (mean |error|
# %, model alone -> this): inference 6.91 -> 6.28 (H200 decode layers 4.99 -> 3.31, H200
# static batches 10.87 -> 9.48), GEMM 3.43 and training 6.31 unchanged, serving 0.960 ->
# 0.954; kernel-only GEMMs (unbounded) 28.8 -> 24.6 (`python benchmarks/gemm_rows.py`).
GEMM_16BIT_ON: frozenset[str] = frozenset({"H100-SXM5-80GB", "H200-SXM-141GB", "B200", "GB200"})

# Chips whose decode attention takes the measured generation-attention table (TensorRT-LLM's
# XQA kernels) unless the setup names a source, their GEMMs keeping the calibrated model:
# chosen on the FIT rows (trtllm-1.3.0rc20, 1.0.0 on A100; mean |error| model alone ->
# decode attention from the table): inference 9.80 -> 9.13 % (H200 11.68 -> 10.31, A100
# 6.01 -> 5.61, H100 6.35 -> 6.35), 18 of 28 changed rows closer; the CHECK rows then
# agreed: inference 9.30 -> 9.06 (H200 12.27 -> 11.73, A100 8.97 -> 8.63). Not on GB200 /
# B200: their FIT serving rows (FP8 KV cache, in-flight batching) went 0.97 -> 5.03 %, too
# slow. The model alone prices a decode step's attention at the KV bytes over the copy
# bandwidth plus one launch; the measured kernels take 1.5-2.5x that at 64 sequences of
# 2,048 tokens per GPU (their split-KV reduction and per-block set-up), the same at the
# largest batches and contexts, where the bytes dominate.
DECODE_ATTENTION_ON: frozenset[str] = frozenset(
    {"A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"}
)

# Accelerator fields that change what a GEMM takes: set beside a library chip, the chip is
# no longer the one the tables measured.
_COMPUTE_FIELDS = (
    "core",
    "systolic_width",
    "systolic_height",
    "freq",
    *(f"{p}_tflops" for p in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4")),
)


def _overridden(acc: setup_pb2.Accelerator) -> str:
    """The first compute field the setup sets on the accelerator ("" if none)."""
    for name in _COMPUTE_FIELDS:
        if getattr(acc, name) > 0:
            return f"system.accelerator.{name}"
    if acc.efficiency.compute_util > 0:
        return "system.accelerator.efficiency.compute_util"
    return ""


def tables_by_default(spec: setup_pb2.ChipSpec) -> bool:
    """Whether an unset kernel_source reads the tables on this (merged) chip: a chip in
    `DEFAULT_ON`, or one whose GEMMs have no calibrated plateau. Without one the roofline
    runs every GEMM at its datasheet peak, 1.4-1.8x faster than NVIDIA's measured rows on
    B300, GB300 and L40S (`python benchmarks/gemm_tables.py`): any measurement beats that."""
    if spec.name in DEFAULT_ON:
        return True
    e = spec.accelerator.efficiency
    return not has_gemm_plateau(e) and e.compute_util <= 0


def _plateau_given(sysmsg: setup_pb2.System) -> bool:
    """Whether the setup gives the chip a GEMM plateau of its own: its calibration, which
    the default leaves every GEMM to."""
    e = sysmsg.accelerator.efficiency
    return e.gemm_util > 0 or len(e.gemm_util_by_precision) > 0


def _memory_overridden(sysmsg: setup_pb2.System) -> bool:
    """Whether the setup changes the chip's memory (a decode attention table, measured at
    the library chip's bandwidth, would no longer be its time)."""
    return sysmsg.memory.dram_bw > 0 or len(sysmsg.memory_levels) > 0


def library_default_kinds(spec: setup_pb2.ChipSpec) -> tuple[str, ...]:
    """The kernel classes a library chip reads from the tables with kernel_source unset and
    nothing of it overridden."""
    return _default_kinds(setup_pb2.System(), spec)


def _default_kinds(sysmsg: setup_pb2.System, spec: setup_pb2.ChipSpec) -> tuple[str, ...]:
    """The kernel classes an unset kernel_source reads from the tables (module docstring)."""
    if _overridden(sysmsg.accelerator):
        return ()
    if tables_by_default(spec):
        return TABLE_KINDS
    kinds: tuple[str, ...] = ()
    if spec.name in GEMM_16BIT_ON and not _plateau_given(sysmsg):
        kinds += (GEMM_16BIT_TABLE,)
    if spec.name in DECODE_ATTENTION_ON and not _memory_overridden(sysmsg):
        kinds += (DECODE_ATTENTION_TABLE,)
    return kinds


def resolve_kernel_source(
    sysmsg: setup_pb2.System, spec: setup_pb2.ChipSpec, problems: Problems
) -> tuple[str, str, tuple[str, ...]]:
    """(database system, "framework-version", kernel classes) the chip reads from the
    tables, ("", "", ()) for the model alone."""
    none: tuple[str, str, tuple[str, ...]] = ("", "", ())
    want = sysmsg.kernel_source
    if want in kernel_db.OFF:
        return none
    # a row of the user's chip table is the user's chip, whatever its name
    system = "" if sysmsg.chip_table else kernel_db.SYSTEMS.get(spec.name, "")
    if not want:
        kinds = _default_kinds(sysmsg, spec) if system else ()
        if not kinds:
            return none
        version = kernel_db.newest_collected(
            system, "gemm", kernel_db.DEFAULT_FRAMEWORK, "gemm_perf"
        )
        return (system, f"{kernel_db.DEFAULT_FRAMEWORK}-{version}", kinds) if version else none
    field = f'system.kernel_source "{want}"'
    if not system:
        covered = ", ".join(sorted(kernel_db.SYSTEMS))
        problems.add(
            f"{field}: the measured kernel database does not cover chip "
            f'"{spec.name or "custom"}" (covered: {covered}); use "none" for the roofline'
        )
        return none
    override = _overridden(sysmsg.accelerator)
    if override:
        problems.add(
            f"{field}: {override} is set, so the chip is not the {spec.name} the tables "
            'measured; drop the override or use "none"'
        )
        return none
    if not kernel_db.installed():
        problems.add(
            f"{field}: the database package aiconfigurator-core is not installed "
            '(pip install aiconfigurator-core; Python >= 3.11), or use "none"'
        )
        return none
    framework, _, version = want.partition("-")
    known = kernel_db.versions(system, "gemm", framework)
    if not version:
        version = kernel_db.newest_collected(system, "gemm", framework, "gemm_perf")
    if version not in known or not kernel_db.data_version(
        system, "gemm", framework, version, "gemm_perf"
    ):
        have = ", ".join(f"{framework}-{v}" for v in known) or "none"
        problems.add(
            f"{field}: no {framework} GEMM table for {spec.name} in the installed database "
            f"(versions: {have})"
        )
        return none
    return system, f"{framework}-{version}", TABLE_KINDS
