"""FLOP conventions of the validation schema: how each source counted the FLOPs behind a
FLOP-based metric. A prediction of time becomes the row's metric only through the row's
own convention, never through MapShard's FLOP count (which differs, e.g. in attention).
"""

from __future__ import annotations

from mapshard.fidelity.cases import Case

CONVENTIONS = (
    "2mnk",
    "2bmnk",
    "megatron_sc21_eq3",
    "nemo_model_flops_2024",
    "llmfoundry_mfu",
    "palm_6N_plus_12LHQT",
    "flash_attn_benchmark",
    "hpl_standard",
)


class ConventionError(ValueError):
    """The row's convention is unknown or lacks a number it needs."""


def _need(case: Case, *cols: str) -> list[int]:
    vals = [case.int(c) for c in cols]
    missing = [c for c, v in zip(cols, vals) if v <= 0]
    if missing:
        raise ConventionError(f"{case.text('flop_convention')} needs {', '.join(missing)}")
    return vals


def gemm_2mnk(case: Case) -> float:
    m, k, n = _need(case, "m", "k", "n")
    return 2.0 * m * n * k


def gemm_2bmnk(case: Case) -> float:
    """A batched GEMM: `batch` independent m x k x n products (XLA's matmul table)."""
    b, m, k, n = _need(case, "batch", "m", "k", "n")
    return 2.0 * b * m * n * k


def megatron_sc21_eq3(case: Case) -> float:
    """Narayanan et al. 2021 eq. 3, per iteration (includes the recompute forward)."""
    B, s, l, h, V = _need(case, "global_batch", "seq_len", "layers", "hidden", "vocab")
    return 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def nemo_model_flops(case: Case) -> float:
    """NeMo 24.07 flops_formulas.py: GPT-3 for GELU models, Llama for SwiGLU models."""
    B, s, l, h = _need(case, "global_batch", "seq_len", "layers", "hidden")
    if case.text("ffn_kind") == "swiglu":
        A, f, V = _need(case, "heads", "ffn_hidden", "vocab")
        G = case.int("kv_heads") or A
        return B * s * l * h * h * (12 + 12 * G / A + 18 * f / h + 12 * s / h + 6 * V / (l * h))
    V = 51200
    return (24 * B * s * h * h + 4 * B * s * s * h) * 3 * l + 6 * B * s * h * V


def llmfoundry(case: Case, hardware: bool = False) -> float:
    """Per iteration: global_batch x (6 N s + 12 l h s^2); 8 N s + 16 l h s^2 for HFU with
    activation checkpointing."""
    B, s, l, h = _need(case, "global_batch", "seq_len", "layers", "hidden")
    n = case.extra_float("num_params_in_mfu")
    if n <= 0:
        raise ConventionError("llmfoundry_mfu needs extra_params num_params_in_mfu")
    passes = 4 if hardware and case.text("recompute") not in ("", "none") else 3
    return B * (passes * 2 * n * s + passes * 4 * l * h * s * s)


def palm(case: Case) -> float:
    """PaLM App. B: per token 6 N + 12 L H Q T, times global_batch x seq_len tokens."""
    B, s, l, heads, q = _need(case, "global_batch", "seq_len", "layers", "heads", "head_dim")
    n = case.extra_float("num_params") or 540.35e9
    return B * s * (6 * n + 12 * l * heads * q * s)


def attention_pass(case: Case) -> str:
    """The attention pass a row measured: `attn_pass`, or `pass` as benchmarks/gpu_measure.py
    spells it (fwd and bwd of one shape there are one timing pair, bwd = fwd+bwd less fwd:
    one measurement family, so the pass is not a shape key of the split)."""
    return case.extra.get("attn_pass") or case.extra.get("pass") or "fwd"


def flash_attention(case: Case) -> float:
    """benchmark_flash_attention.py: fwd 4 b s^2 H d (halved when causal), bwd 2.5x fwd."""
    b, s, heads, d = _need(case, "batch", "seq_len", "heads", "head_dim")
    fwd = 4.0 * b * s * s * heads * d / (2 if case.extra.get("causal") == "1" else 1)
    passes = attention_pass(case)
    factor = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}.get(passes)
    if factor is None:
        raise ConventionError(f"flash_attn_benchmark: attn_pass {passes!r} is not fwd/bwd/fwd_bwd")
    return fwd * factor


def hpl(case: Case) -> float:
    n = case.extra_float("hpl_n")
    if n <= 0:
        raise ConventionError("hpl_standard needs extra_params hpl_n")
    return 2.0 / 3.0 * n**3 + 2.0 * n**2


def convention_flop(case: Case, hardware: bool = False) -> float:
    """FLOPs of the measured unit of work (one kernel, one iteration, one solve) under the
    row's convention. `hardware`: count recomputation (HFU) where the convention says how."""
    name = case.text("flop_convention")
    fns = {
        "2mnk": gemm_2mnk,
        "2bmnk": gemm_2bmnk,
        "megatron_sc21_eq3": megatron_sc21_eq3,
        "nemo_model_flops_2024": nemo_model_flops,
        "palm_6N_plus_12LHQT": palm,
        "flash_attn_benchmark": flash_attention,
        "hpl_standard": hpl,
    }
    if name == "llmfoundry_mfu":
        return llmfoundry(case, hardware)
    if name not in fns:
        raise ConventionError(
            f"unknown flop_convention {name!r}"
            if name
            else "a FLOP-based metric without a flop_convention"
        )
    return fns[name](case)
