"""An MoE layer's expert part against NVIDIA's measured MoE tables, which no constant of the
model was fitted to (aiconfigurator-core, installed: TensorRT-LLM's fused MoE op, CUTLASS
grouped GEMMs, one GPU, no expert or tensor parallelism).

    python benchmarks/moe_tables.py [H200-SXM-141GB] [--tokens 1 4 16 64 256 1024 4096]

For every BF16 expert shape of the chip's newest TensorRT-LLM MoE table (hidden, expert
FFN, top-k, experts), a one-layer model of that shape decodes `tokens` sequences on one
chip, and the expert part of its layer (dispatch, the expert GEMMs and activation,
combine: each a configuration of its own, launches included) is set against the table's
time for that many tokens, with both MoE GEMM families (setup.proto MoeGemm): one grouped
kernel (an engine's) and a GEMM per expert (Transformer Engine's). Prints model / table
per row and the median and mean |model / table - 1| per family, for all rows and for those
of at least 64 tokens. The table's "balanced" routing gives each token k experts round-robin
(min(E, tokens x k) experts reached); the model takes each token's k experts uniformly at
random (Kernel.expert_share), so below about E / k tokens the two reach different expert
counts: the table's power-law rows are printed beside it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from google.protobuf import text_format  # noqa: E402

from hardware import kernel_db  # noqa: E402
from mapshard import pipeline  # noqa: E402
from schema import setup_pb2  # noqa: E402

FRAMEWORK = "trtllm"
CUTLASS = "moe_torch_flow_cutlass"
EXPERT_PART = ("dispatch", "expert_sort", "expert_gate_up", "expert_act", "expert_down")
EXPERT_PART += ("expert_unsort", "combine")
FAMILIES = ("MOE_GEMM_GROUPED", "MOE_GEMM_PER_EXPERT")


def table(system: str) -> dict[tuple[int, int, int, int], dict[int, dict[str, float]]]:
    """{(hidden, ffn, k, experts): {tokens: {distribution: seconds}}} of the BF16 rows of
    CUTLASS grouped GEMMs without expert or tensor parallelism, from the newest version
    that collected any."""
    out: dict[tuple[int, int, int, int], dict[int, dict[str, float]]] = {}
    frames = (
        kernel_db.table_frame(system, "moe", FRAMEWORK, v, "moe_perf")
        for v in reversed(kernel_db.versions(system, "moe", FRAMEWORK))
    )
    frame = next((f for f in frames if f is not None and (f.kernel_source == CUTLASS).any()), None)
    if frame is None:
        return out
    for r in frame.to_dict("records"):
        if r["moe_dtype"] != "bfloat16" or r["moe_tp_size"] != 1 or r["moe_ep_size"] != 1:
            continue
        if r["kernel_source"] != CUTLASS:
            continue
        shape = (int(r["hidden_size"]), int(r["inter_size"]), int(r["topk"]))
        shape += (int(r["num_experts"]),)
        by_tokens = out.setdefault(shape, {})
        by_tokens.setdefault(int(r["num_tokens"]), {})[r["distribution"]] = r["latency"] * 1e-3
    return out


def model_seconds(chip: str, shape: tuple[int, int, int, int], tokens: int, family: str) -> float:
    """The expert part of a one-layer model of `shape` decoding `tokens` sequences."""
    hidden, ffn, k, experts = shape
    text = (
        f'workload {{ llm_inference {{ model {{ inline {{ name: "moe" architecture: "mixtral" '
        f"hidden_size: {hidden} num_layers: 1 num_heads: 8 num_kv_heads: 8 head_dim: 128 "
        f"intermediate_size: {ffn} vocab_size: 1024 ffn: SWIGLU norm: RMSNORM "
        f"num_experts: {experts} experts_per_token: {k} moe_intermediate_size: {ffn} }} }} "
        f"phase: DECODE batch: {tokens} context_len: 16 moe_gemm: {family} }} }} "
        f'system {{ chip: "{chip}" num_chip: 1 }} '
        "execution { execution_style: KERNEL_BY_KERNEL }"
    )
    loaded = pipeline.load_message(text_format.Parse(text, setup_pb2.Setup()), Path("x.txt"))
    plan = pipeline.plan(pipeline.assemble(loaded, pipeline.resolve(loaded)))
    phase = next(p for p in plan.phases if p.name == "decode")
    return sum(c.latency_s for c in phase.configs if c.kernels[0] in EXPERT_PART)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chips", nargs="*", default=["H200-SXM-141GB"])
    parser.add_argument("--tokens", type=int, nargs="*", default=[1, 4, 16, 64, 256, 1024, 4096])
    args = parser.parse_args(argv)
    for chip in args.chips:
        system = kernel_db.SYSTEMS.get(chip, "")
        rows = table(system) if system else {}
        if not rows:
            print(f"{chip}: no TensorRT-LLM MoE table")
            continue
        errors: dict[str, list[tuple[int, float]]] = {f: [] for f in FAMILIES}
        print(f"{chip}: model / table, per family (table ms: balanced, power_law_1.2)")
        for shape, by_tokens in sorted(rows.items()):
            for tokens in args.tokens:
                measured = by_tokens.get(tokens, {})
                if "balanced" not in measured:
                    continue
                ratios = []
                for family in FAMILIES:
                    ratio = model_seconds(chip, shape, tokens, family) / measured["balanced"]
                    errors[family].append((tokens, ratio - 1))
                    ratios.append(f"{ratio:5.2f}")
                power = measured.get("power_law_1.2", float("nan")) * 1e3
                print(
                    f"  h {shape[0]:5d} ffn {shape[1]:5d} top-{shape[2]:<2d} of {shape[3]:3d} "
                    f"tokens {tokens:5d}: grouped {ratios[0]}  per expert {ratios[1]}  "
                    f"(table {measured['balanced'] * 1e3:.3f}, {power:.3f} ms)"
                )
        for family, errs in errors.items():
            every = [abs(e) for _, e in errs]
            large = [abs(e) for t, e in errs if t >= 64]
            print(
                f"  {family}: |model / table - 1| median {100 * statistics.median(every):.1f}%"
                f", mean {100 * statistics.fmean(every):.1f}% over {len(every)} rows; over the "
                f"{len(large)} of >= 64 tokens median {100 * statistics.median(large):.1f}%, "
                f"mean {100 * statistics.fmean(large):.1f}%"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
