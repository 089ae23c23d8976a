"""Plan energy (solver/report_plan.py `_kernel_energy`, Plan.energy_J) against hand
computations: FLOPs x energy/FLOP + DRAM bytes x energy/byte + link bytes x energy/byte,
summed over every chip."""

from __future__ import annotations

from pathlib import Path

import pytest

from mapshard import pipeline

E_FLOP, E_DRAM, E_LINK = 0.5e-12, 7e-12, 20e-12
COST = "cost { energy_per_flop_pJ: 0.5 energy_per_dram_byte_pJ: 7 energy_per_link_byte_pJ: 20 }"


def solve(tmp_path: Path, text: str):
    (tmp_path / "setup.txt").write_text(text)
    sc = pipeline.load_scenario(tmp_path)
    return sc, pipeline.plan(sc)


def test_single_chip_gemm_energy_by_hand(tmp_path):
    # 1024^3 BF16 GEMM: 2*1024^3 FLOP; all three 2 MiB operands fit in SRAM: compulsory 6 MiB
    _, plan = solve(
        tmp_path,
        f"""workload {{ gemm {{ M: 1024 K: 1024 N: 1024 }} }}
        system {{ chip: "H100-SXM5-80GB" num_chip: 1 }}
        execution {{ execution_style: KERNEL_BY_KERNEL perfect_overlap: true }} {COST}""",
    )
    (k,) = plan.kernels()
    assert k.dram_bytes == 3 * 1024 * 1024 * 2
    expected = 2 * 1024**3 * E_FLOP + 3 * 1024 * 1024 * 2 * E_DRAM
    assert k.energy_J == pytest.approx(expected)
    assert plan.energy_J == pytest.approx(expected)


def test_two_chip_gemm_energy_counts_every_chip(tmp_path):
    _, plan = solve(
        tmp_path,
        f"""workload {{ gemm {{ M: 1024 K: 1024 N: 1024 }} }}
        system {{ chip: "H100-SXM5-80GB" num_chip: 2
                 topology {{ kind: SWITCH degree: 2 parallelism: "TP" }} }}
        execution {{ execution_style: KERNEL_BY_KERNEL perfect_overlap: true }} {COST}""",
    )
    (k,) = plan.kernels()
    flop = 2 * 1024**3
    split = k.sharding.split("+")[0]
    flop_chip = flop if split == "none" else flop / 2
    if split in ("M", "N"):  # one operand whole, the other and C halved: 4 MiB per chip
        assert k.dram_bytes == 2 * 1024 * 1024 * 2
    per_chip = flop_chip * E_FLOP + k.dram_bytes * E_DRAM + k.network_bytes * E_LINK
    assert k.energy_J == pytest.approx(per_chip)  # KernelPlan.energy_J is per chip
    assert plan.energy_J == pytest.approx(2 * per_chip)


def test_library_chips_carry_no_energy_defaults(tmp_path):
    _, plan = solve(
        tmp_path,
        """workload { gemm { M: 512 K: 512 N: 512 } }
        system { chip: "A100-SXM4-80GB" num_chip: 1 }""",
    )
    assert plan.energy_J == 0.0


LLM = """workload {{ llm_inference {{
  model {{ inline {{ name: "tiny" architecture: "llama" hidden_size: 512 num_layers: 4
                   num_heads: 8 num_kv_heads: 8 intermediate_size: 1024 vocab_size: 1000 }} }}
  phase: PREFILL batch: 1 input_len: 64 }} }}
system {{ chip: "H100-SXM5-80GB" num_chip: 2
         topology {{ kind: SWITCH degree: 2 parallelism: "{par}" }} }}
execution {{ execution_style: KERNEL_BY_KERNEL perfect_overlap: true }}
cost {{ energy_per_flop_pJ: 1 }}"""


def _model_flop(plan) -> float:
    return sum(k.flop * ph.count * ph.steps for ph in plan.phases for k in ph.kernels)


def test_inference_tp_energy_is_each_flop_once(tmp_path):
    _, plan = solve(tmp_path, LLM.format(par="TP"))
    replicated = sum(
        k.flop * ph.count * ph.steps
        for ph in plan.phases
        for k in ph.kernels
        if k.sharding == "none"
    )
    # sharded kernels split their FLOPs over the 2 chips; replicated ones run on both
    assert plan.energy_J == pytest.approx((_model_flop(plan) + replicated) * 1e-12, rel=1e-6)


def _tiny_prefill_flop() -> float:
    """Every FLOP of the tiny model's prefill by hand (ops.py conventions): T = 64 tokens,
    h = 512, f = 1024, 4 layers; RMSNorm 4/element, gated activation 5, residual add 1, KV
    write 1 per element, attention 4 T^2 h (non-causal), GEMMs 2 m k n; head: embedding 1
    per element of T x h, final norm and LM head on the last token (vocabulary 1000)."""
    T, h, f, layers, V = 64, 512, 1024, 4, 1000
    layer = (
        4 * T * h  # attn_norm
        + 2 * T * h * h  # q_proj
        + 2 * T * h * 2 * h  # kv_proj (K and V)
        + T * 2 * h  # kv_write
        + 4 * T * T * h  # attention
        + 2 * T * h * h  # o_proj
        + T * h  # attn_residual
        + 4 * T * h  # mlp_norm
        + 2 * T * h * 2 * f  # mlp_gate_up
        + 5 * T * f  # mlp_act (gated)
        + 2 * T * f * h  # mlp_down
        + T * h  # mlp_residual
    )
    head = T * h + 4 * h + 2 * h * V
    return layers * layer + head


def test_inference_pp_energy_is_each_flop_once(tmp_path):
    """Two pipeline stages split the layers: every FLOP is charged once (1 pJ each)."""
    _, plan = solve(tmp_path, LLM.format(par="PP"))
    assert plan.parallelism["pp"] == 2
    assert plan.energy_J == pytest.approx(_tiny_prefill_flop() * 1e-12, rel=1e-9)


def test_inference_single_chip_energy_is_the_hand_flop_count(tmp_path):
    text = (
        LLM.format(par="PP").replace("num_chip: 2", "num_chip: 1").replace("degree: 2", "degree: 1")
    )
    _, plan = solve(tmp_path, text)
    assert plan.energy_J == pytest.approx(_tiny_prefill_flop() * 1e-12, rel=1e-9)
