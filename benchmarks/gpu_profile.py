"""Kernel-by-kernel profiles of measured workloads (benchmarks/gpu_workloads.py) on a
lent GPU, as PyTorch-profiler traces that `mapshard profile compare` reads: where a plan's
kernels and the measured step part ways (issue 35: the BF16 step's non-GEMM kernels, the MoE
layer's routing and permutation).

- training: one BF16 step of Llama-3.1-8B cut to 8 layers, seq 4096, micro-batch 2 (the
  M-H200-T001 row's configuration);
- MoE training (first; `--moe`: only these): one step of Mixtral-8x7B cut to 2 layers and of
  Qwen3-30B-A3B cut to 4, seq 4096, micro-batch 1, grouped expert GEMMs (M-H200-R rows),
  and MoE layers' decode steps and a prefill, eager (M-H200-Q and S rows);
- prefill: one Llama-3.1-8B layer, 1 x 2048 tokens (M-H200-F002), eager;
- decode: one Llama-3.1-8B layer, batch 64, KV 4096, per-query-head attention (M-H200-D006),
  eager;
- FIT steps (`--fit`: only these): the training configurations of FIT rows (M-H200-T002,
  R003, R007), whose profiles may set kernel rates (the ones above are CHECK rows'
  configurations); `benchmarks/optimizer_rates.py ROW_ID TRACE` reads the optimizer's.

Each trace keeps the GPU kernel events only (name, start, duration), which is all the
comparison reads.

On the device machine:  python3 benchmarks/gpu_profile.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gpu_moe
import gpu_runs
import gpu_workloads as gw


def kernel_events(trace_path: Path) -> list[dict]:
    with trace_path.open(encoding="utf-8") as f:
        events = json.load(f).get("traceEvents", [])
    keep = ("name", "ph", "cat", "ts", "dur")
    return [
        {k: ev[k] for k in keep if k in ev}
        for ev in events
        if ev.get("ph") == "X" and str(ev.get("cat", "")).lower() == "kernel"
    ]


def profiled(torch, fn, out: Path, name: str, warmup: int = 2) -> int:
    """Run fn `warmup` times, then once under the profiler; write the kernel events."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    raw = out / f"{name}.raw.json"
    prof.export_chrome_trace(str(raw))
    events = kernel_events(raw)
    raw.unlink()
    (out / f"{name}.json").write_text(json.dumps({"traceEvents": events}), encoding="utf-8")
    total_us = sum(ev["dur"] for ev in events)
    print(f"{name}: {len(events)} kernels, {total_us / 1e3:.3f} ms of kernel time", flush=True)
    return len(events)


def profile_step(
    torch, out: Path, shape: tuple, layers: int, micro: int, grouped, name: str, seq: int = 4096
):
    step = gpu_runs.training_step(torch, shape, layers, seq, micro, grouped, False)
    profiled(torch, step, out, name)


def profile_fit_training(torch, out: Path) -> None:
    """Steps of FIT rows' configurations (the validation split): T002, R003, R007."""
    for shape, layers, micro, grouped, seq, name in (
        (gw.LLAMA_8B, 8, 1, None, 8192, "train_llama31_8b_8layers_s8192_b1"),
        (gpu_moe.MIXTRAL, 2, 4, True, 4096, "train_mixtral_8x7b_2layers_s4096_b4_grouped"),
        (gpu_moe.QWEN3_MOE, 4, 4, True, 4096, "train_qwen3_30b_a3b_4layers_s4096_b4_grouped"),
    ):
        profile_step(torch, out, shape, layers, micro, grouped, name, seq)
        torch.cuda.empty_cache()


def profile_training(torch, out: Path) -> None:
    profile_step(torch, out, gw.LLAMA_8B, 8, 2, None, "train_llama31_8b_8layers_s4096_b2")


def profile_moe_training(torch, out: Path) -> None:
    for shape, layers, name in (
        (gpu_moe.MIXTRAL, 2, "train_mixtral_8x7b_2layers_s4096_b1_grouped"),
        (gpu_moe.QWEN3_MOE, 4, "train_qwen3_30b_a3b_4layers_s4096_b1_grouped"),
    ):
        profile_step(torch, out, shape, layers, 1, True, name)
        torch.cuda.empty_cache()


def profile_moe_layers(torch, out: Path) -> None:
    """MoE layers (gpu_moe.MOE_LAYERS): decode steps at batch 1 and 64, one prefill."""
    for shape, batch, tokens, name in (
        (gpu_moe.QWEN3_MOE, 1, 1, "decode_qwen3_30b_a3b_layer_b1_kv4096"),
        (gpu_moe.QWEN3_MOE, 64, 1, "decode_qwen3_30b_a3b_layer_b64_kv4096"),
        (gpu_moe.MIXTRAL, 64, 1, "decode_mixtral_8x7b_layer_b64_kv4096"),
        (gpu_moe.QWEN3_MOE, 1, 2048, "prefill_qwen3_30b_a3b_layer_b1_s2048"),
    ):
        mlp, qk_norm = gpu_moe.moe_layer_ffn(torch, shape, False)
        length = 4096 if tokens == 1 else tokens
        layer = gw.make_layer(torch, shape, batch, tokens, length, "kv_shared", False, mlp, qk_norm)
        x0 = torch.randn(batch * tokens, shape[1], device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            profiled(torch, lambda layer=layer, x0=x0: layer(x0), out, name)
        torch.cuda.empty_cache()


def profile_layers(torch, out: Path) -> None:
    for name, batch, tokens, length, family in (
        ("prefill_llama31_8b_layer_b1_s2048", 1, 2048, 2048, ""),
        ("decode_llama31_8b_layer_b64_kv4096", 64, 1, 4096, "kv_per_query_head"),
    ):
        layer = gw.make_layer(torch, gw.LLAMA_8B, batch, tokens, length, family, False)
        x0 = torch.randn(batch * tokens, gw.LLAMA_8B[1], device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            profiled(torch, lambda layer=layer, x0=x0: layer(x0), out, name)


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--moe", action="store_true", help="only the MoE training steps")
    ap.add_argument("--fit", action="store_true", help="only the FIT rows' training steps")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.fit:
        profile_fit_training(torch, out)
        return
    profile_moe_training(torch, out)
    torch.cuda.empty_cache()
    profile_moe_layers(torch, out)
    if args.moe:
        return
    profile_training(torch, out)
    torch.cuda.empty_cache()
    profile_layers(torch, out)


if __name__ == "__main__":
    main()
