"""Every constant fitted to measurements, with the FIT rows it was fitted on (issue #35).

A fitted constant may only rest on FIT rows (tests/data/validation: every dev row and
validation_public_fit.csv; VALIDATION_SCHEMA.md states the split); CHECK rows are
predicted, never fitted. Each entry names the constant (a chip file's efficiency field, or
a module constant), the fit that produced it, and the row ids, written out here so that the
list can be read next to the number and checked: tests/unit/test_fitted_rows.py asserts that
every listed row is a usable FIT row, that each list is the rows the named fit takes from
the FIT files, and that every number a calibrated chip file sets has an entry.

Entries whose `rows` are empty are not fitted here: `cited` says where the number comes
from (a published figure, or another chip's fit carried over by `carried_from`).
"""

from __future__ import annotations

from dataclasses import dataclass

# the efficiency fields one GEMM fit sets (mapshard.fidelity.fit.fit_gemm)
GEMM_FIELDS = (
    "gemm_util",
    "gemm_half_dim",
    "gemm_tile_m",
    "gemm_tile_n",
    "kernel_overhead_us",
    "kernel_min_time_us",
)
TRAINING_FIELDS = ("fp8_split_accumulate_util", "tp_comm_hidden_share")
CUDNN_ATTENTION = ("causal_attention cudnn",)
FA2_ATTENTION = ("causal_attention fa2",)
UNSPLIT_DECODE = ("unsplit_decode_attention",)
RUN_FIELDS = ("gemm_util", "dram_util")


@dataclass(frozen=True)
class Fitted:
    """One fit: `where` (a library chip, or a module), the fields or constants it sets, the
    fit that made them, and the FIT rows it was fitted on."""

    where: str
    fields: tuple[str, ...]
    fit: str
    rows: tuple[str, ...] = ()
    carried_from: str = ""  # another chip whose fit these numbers are
    cited: str = ""  # not fitted: where the number comes from


def _ids(prefix: str, *numbers: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{n:02d}" for n in numbers)


A100_GEMM = ("I12", "K01", "K02", "K03", "K04", "K10", "P-GEM19")
A100_COLLECTIVE = ("C03", "C06", "C09", "C10")
H100_GEMM = ("K05", "K06", "K09", "K11", *_ids("P-GEM", 1, 2, 3, 4))
H100_COLLECTIVE = ("C01", "C02", "C07", "C08", *_ids("P-NCC", 1, 3, 4))
H100_TRAINING = _ids("P-NEM", 2, 3, 4, 5, 6, 7, 9, 20, 23, 25, 29, 31)
H200_GEMM = ("K07", *_ids("P-GEM", 5, 6, 9, 10))
# one causal-attention fit per kernel family for both GH100 chips (fit_attention)
HOPPER_CUDNN_ATTENTION = (
    *_ids("P-ATT", 1, 4, 5, 7, 10, 11),
    *(f"M-H200-P{n:03d}" for n in (3, 4, 5, 6)),
)
HOPPER_FA2_ATTENTION = tuple(f"M-H200-P{n:03d}" for n in (15, 16, 17, 18))
# the decode kernel without a KV split (fit_attention.fit_unsplit_decode): the GQA rows of
# PyTorch's group-aware SDPA call, every batch and KV length measured
HOPPER_UNSPLIT_DECODE = tuple(
    f"M-H200-A{n:03d}"
    for n in (1, 3, 5, 7, 9, 11, 13, 17, 19, 21, 23, 25, 27, 29, 31, 33, 37, 41, 45, 49, 51, 55)
)
H200_COLLECTIVE = ("C04", *_ids("P-NCC", 5, 6, 7, 8, 9))
GB200_GEMM = ("K08", *_ids("P-GEM", 12, 14, 15, 16, 18))
GB200_COLLECTIVE = (
    "C05",
    *_ids("P-NCC", 12, 13, 14, 15, 16, 18, 19, 21, 22, 24, 25, 26, 27, 28, 29, 30),
)
BLACKWELL_TRAINING = _ids("P-NEM", 10, 11, 12, 21, 14, 15, 16, 28)
MI300X_GEMM = _ids("P-MIG", 1, 3, 4, 5, 6, 7, 9, 11)
MI300X_COLLECTIVE = _ids("P-MIR", 1, 3, 4, 7, 8, 9, 12, 13, 14, 15, 16, 17, 18, 21, 24, 25)
# the FIT rows whose configuration tests/data/profiles/h200/prefill_llama31_8b_layer_b1_s2048
# profiles (one Llama-3.1-8B layer, prefill of 2,048 tokens, batch 1)
H200_PREFILL_PROFILE = ("M-H200-F002",)
H200_MOE_PREFILL_PROFILE = ("M-H200-S003",)  # its configuration's kernel profile
# measured kernel data, not validation rows: torch._grouped_mm alone (usable 0 reference
# rows) with several experts of <= 128 tokens each, the rows the split rule put in FIT
GROUPED_MM_MEASURED = (
    "median operand rate / DRAM peak of MapShard's torch._grouped_mm kernels on H200 "
    "(benchmarks/gpu_moe.py): the 21 FIT reference rows M-H200-U001-005, 008, 009, 015-019, "
    "022, 024-026, 029-033"
)
FP64_CITED = "Top500 HPL-sustained clock (glennklockwood.com/garden/peak-FLOPS), the chip file"
# derived from measured kernel data, not from validation rows
TABLE_DERIVED = (
    "NVIDIA's measured BF16 GEMM table of the chip (aiconfigurator-core, trtllm 1.3.0rc20), "
    "by benchmarks/gemm_plateaus.py"
)
BLACKWELL_16_BIT = ("gemm_util_by_precision bf16", "gemm_util_by_precision fp16")

FITTED: tuple[Fitted, ...] = (
    # A100 (dev rows: the chip files' first fit)
    Fitted("A100-SXM4-80GB", GEMM_FIELDS, "fit.fit_gemm", A100_GEMM),
    Fitted("A100-SXM4-80GB", ("vector_util",), "fit.fit_vector_util", ("I12",)),
    Fitted("A100-SXM4-80GB", ("dram_util",), "fit.fit_dram_util", ("K14",)),
    Fitted("A100-SXM4-80GB", ("collective L0",), "fit.fit_collective", A100_COLLECTIVE),
    Fitted("A100-SXM4-80GB", ("gemm_util_by_precision fp64",), "", cited=FP64_CITED),
    Fitted(
        "A100-SXM4-40GB",
        (*GEMM_FIELDS, "vector_util"),
        "fit.fit_gemm, fit.fit_vector_util",
        (*A100_GEMM,),
        carried_from="A100-SXM4-80GB",
    ),
    Fitted("A100-SXM4-40GB", ("gemm_util_by_precision fp64",), "", cited=FP64_CITED),
    # H100
    Fitted(
        "H100-SXM5-80GB",
        (*GEMM_FIELDS, "gemm_util_by_precision fp8"),
        "fit.fit_gemm",
        H100_GEMM,
    ),
    Fitted("H100-SXM5-80GB", ("dram_util",), "fit.fit_dram_util", ("K12",)),
    Fitted("H100-SXM5-80GB", ("collective L0",), "fit.fit_collective", H100_COLLECTIVE),
    Fitted("H100-SXM5-80GB", TRAINING_FIELDS, "fit_training.fit_split_accumulate", H100_TRAINING),
    Fitted("H100-SXM5-80GB", ("gemm_util_by_precision fp64",), "", cited=FP64_CITED),
    Fitted("H100-SXM5-80GB", CUDNN_ATTENTION, "fit_attention cudnn", HOPPER_CUDNN_ATTENTION),
    Fitted("H100-SXM5-80GB", FA2_ATTENTION, "fit_attention fa2", HOPPER_FA2_ATTENTION),
    Fitted(
        "H100-SXM5-80GB",
        UNSPLIT_DECODE,
        "fit_attention unsplit",
        HOPPER_UNSPLIT_DECODE,
        carried_from="H200-SXM-141GB",
    ),
    Fitted(
        "H100-SXM5-80GB",
        ("strided_elementwise_gelem_per_s",),
        "median elements/s of the strided kernels of the FIT prefill profile",
        H200_PREFILL_PROFILE,
        carried_from="H200-SXM-141GB",
    ),
    Fitted(
        "H100-SXM5-80GB",
        ("atomic_add_gelem_per_s",),
        "elements/s of the index_add_ of the FIT MoE prefill profile",
        H200_MOE_PREFILL_PROFILE,
        carried_from="H200-SXM-141GB",
    ),
    Fitted(
        "H100-SXM5-80GB",
        ("grouped_mm_dram_share",),
        "",
        carried_from="H200-SXM-141GB",
        cited=GROUPED_MM_MEASURED,
    ),
    # H200: its own FP8 GEMM, copy and collective fits; the H100's 16-bit plateau and
    # training shares (same GH100 SMs)
    Fitted(
        "H200-SXM-141GB",
        ("gemm_util_by_precision fp8", *GEMM_FIELDS[1:]),
        "fit.fit_gemm",
        H200_GEMM,
    ),
    Fitted(
        "H200-SXM-141GB", ("gemm_util",), "fit.fit_gemm", H100_GEMM, carried_from="H100-SXM5-80GB"
    ),
    Fitted("H200-SXM-141GB", ("dram_util",), "fit.fit_dram_util", ("K13", "M-H200-C001")),
    Fitted("H200-SXM-141GB", ("collective L0",), "fit.fit_collective", H200_COLLECTIVE),
    Fitted(
        "H200-SXM-141GB",
        TRAINING_FIELDS,
        "fit_training.fit_split_accumulate (the H100's share of its FP8 plateau)",
        H100_TRAINING + H200_GEMM,
        carried_from="H100-SXM5-80GB",
    ),
    Fitted("H200-SXM-141GB", ("gemm_util_by_precision fp64",), "", cited=FP64_CITED),
    Fitted(
        "H200-SXM-141GB",
        CUDNN_ATTENTION,
        "fit_attention cudnn",
        HOPPER_CUDNN_ATTENTION,
        carried_from="H100-SXM5-80GB",
    ),
    Fitted(
        "H200-SXM-141GB",
        FA2_ATTENTION,
        "fit_attention fa2",
        HOPPER_FA2_ATTENTION,
        carried_from="H100-SXM5-80GB",
    ),
    Fitted("H200-SXM-141GB", UNSPLIT_DECODE, "fit_attention unsplit", HOPPER_UNSPLIT_DECODE),
    Fitted(
        "H200-SXM-141GB",
        ("strided_elementwise_gelem_per_s",),
        "median elements/s of the strided kernels of the FIT prefill profile",
        H200_PREFILL_PROFILE,
    ),
    Fitted(
        "H200-SXM-141GB",
        ("atomic_add_gelem_per_s",),
        "elements/s of the index_add_ of the FIT MoE prefill profile",
        H200_MOE_PREFILL_PROFILE,
    ),
    Fitted("H200-SXM-141GB", ("grouped_mm_dram_share",), "", cited=GROUPED_MM_MEASURED),
    # Blackwell: the GB200 GEMM and NVLink 5 fits serve the B200; one hidden share for both
    Fitted("GB200", GEMM_FIELDS, "fit.fit_gemm", GB200_GEMM),
    # fused attention keeps the FP8 fit's plateau; 16-bit GEMMs have the table's
    Fitted("GB200", ("attention_util",), "fit.fit_gemm", GB200_GEMM),
    Fitted("GB200", BLACKWELL_16_BIT, "", cited=TABLE_DERIVED),
    Fitted("GB200", ("collective L0",), "fit.fit_collective", GB200_COLLECTIVE),
    Fitted(
        "GB200",
        ("tp_comm_hidden_share",),
        "fit_training.fit_split_accumulate --no-split B200 GB200",
        BLACKWELL_TRAINING,
    ),
    Fitted("B200", GEMM_FIELDS, "fit.fit_gemm", GB200_GEMM, carried_from="GB200"),
    Fitted("B200", ("attention_util",), "fit.fit_gemm", GB200_GEMM, carried_from="GB200"),
    Fitted("B200", BLACKWELL_16_BIT, "", cited=TABLE_DERIVED),
    Fitted(
        "B200", ("collective L0",), "fit.fit_collective", GB200_COLLECTIVE, carried_from="GB200"
    ),
    Fitted(
        "B200",
        ("tp_comm_hidden_share",),
        "fit_training.fit_split_accumulate --no-split B200 GB200",
        BLACKWELL_TRAINING,
    ),
    # MI300X (no copy row is FIT: its DRAM stays at peak)
    Fitted("MI300X", (*GEMM_FIELDS, "gemm_util_by_precision fp8"), "fit.fit_gemm", MI300X_GEMM),
    Fitted("MI300X", ("collective L0",), "fit.fit_collective", MI300X_COLLECTIVE),
    # Gaudi: whole single-chip runs (Intel publishes no kernel measurement)
    Fitted("Gaudi2", RUN_FIELDS, "fit_runs.fit_runs", _ids("P-GD2", 1, 3, 12)),
    Fitted("Gaudi3", RUN_FIELDS, "fit_runs.fit_runs", _ids("P-GD3", 1, 2, 9)),
    Fitted(
        "Gaudi3",
        ("collective L0",),
        "HCCL latency_us on a 5 us grid over the tensor-parallel runs",
        _ids("P-GD3", 5, 6, 7, 8, 13, 14, 15, 16, 17, 18, 19, 20),
    ),
    # HPL's panel: a structure, not a number: each pivot column's step is one thread block's
    # (1 of the chip's SMs streaming the column, read once and written once); chosen against
    # the FIT row (the look-ahead-free torch/cuSOLVER factorisation, 45.7% too fast without
    # it), checked on M-H200-H002 (N 65536)
    Fitted(
        "generator.hpl",
        ("PIVOT_THREAD_BLOCKS",),
        "the pivot step's structure, compared with the FIT row",
        ("M-H200-H001",),
    ),
    # serving engines (mapshard.fidelity.engines)
    Fitted(
        "mapshard.fidelity.engines",
        ("TRTLLM_SESSION_REQUEST_OVERHEAD_US",),
        "least mean |error| on a 0.1 ms grid over the first-token rows of gptSessionBenchmark",
        (*_ids("P-TTF", 2, 3, 4, 5, 6, 9, 10, 11, 13, 15), "I10"),
    ),
    Fitted(
        "mapshard.fidelity.engines",
        ("TORCH_EAGER_HOST_OP_US",),
        "fit_host_op",
        ("M-H200-R004", "M-H200-R008"),
    ),
)


def fitted_on(where: str) -> list[Fitted]:
    """The entries of one chip (or module)."""
    return [f for f in FITTED if f.where == where]
