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
    return sc, pipeline.solve(sc)


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


@pytest.mark.xfail(
    strict=True,
    reason=(
        "solver/report_plan.py energy_of: inference repeats each layer graph count x steps per "
        "chip and multiplies by num_chips, so with PP > 1 every stage is charged for every "
        "layer (PP x too much); training divides by PP, inference does not"
    ),
)
def test_inference_pp_energy_is_each_flop_once(tmp_path):
    _, plan = solve(tmp_path, LLM.format(par="PP"))
    assert plan.energy_J == pytest.approx(_model_flop(plan) * 1e-12, rel=1e-6)
