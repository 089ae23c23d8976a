"""Host-side and optimizer costs of eager PyTorch on a lent GPU, measured on synthetic
workloads that no validation row describes, so they may set constants without touching the
FIT/CHECK split (issue #35: the per-expert loop that paces M-H200-R006/R008, the optimizer
step of every M-H200 training row).

    python3 benchmarks/gpu_host.py --out $OUT      (on the device machine; writes host.json)

1. The stream's launch queue: after a GPU spin of about a second (torch.cuda._sleep),
   LAUNCHES tiny kernels are launched back to back; the host's time per launch stays a few
   us until the queue is full, then waits on the spin: the depth is the number of launches
   before the first one slower than SLOW_S (`queue_depth`). It bounds how far an eager
   host runs ahead of the GPU (a backward pass has no sync to drain it).
2. The host's time per launch of a per-expert loop, forward and autograd backward apart:
   Qwen3-30B-A3B's MoE MLP with one weight per expert (benchmarks/gpu_moe.moe_ffn, as
   Megatron-core's SequentialMLP) on TOKENS tokens, so that each expert's GEMMs take a few
   us and the host paces both passes: each pass's wall time (synchronised, median of
   gpu_workloads.ROUNDS) over its kernel launches (counted once under the profiler), with
   the GPU's busy share beside it (near 1: the pass was not host-bound, the figure is not
   the host's).
3. The optimizer step's kernels as benchmarks/gpu_runs.adam_step runs them, on the tensors
   of Llama-3.1-8B cut to 8 layers: the BF16 gradients cast to FP32, fused AdamW on the
   FP32 masters, the masters copied back to BF16; each timed by CUDA events
   (gpu_workloads.timed) and given as bytes moved per second (`OPTIMIZER_BYTES_PER_PARAM`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or loaded by path
import gpu_moe  # noqa: E402
import gpu_profile  # noqa: E402
import gpu_runs  # noqa: E402
import gpu_workloads as gw  # noqa: E402

LAUNCHES = 8192  # beyond any stream queue reported (about 1,000)
SLOW_S = 1e-3  # a launch this slow waited on the GPU (unblocked launches take ~5 us)
SPIN_CYCLES = 2_000_000_000  # ~1 s at the H200's ~2 GHz: longer than LAUNCHES launches
TOKENS = 1024  # x 8 of 128 experts: 64 tokens per expert, a few us of GPU per GEMM
# bytes each kernel of the optimizer step moves per parameter (as benchmarks/
# optimizer_rates.py counts them from a profile): the cast reads the BF16
# gradient and writes its FP32 copy; AdamW reads master, gradient, m, v and writes master,
# m, v (FP32); the copy reads the FP32 master and writes the BF16 weight
OPTIMIZER_BYTES_PER_PARAM = {"grad_cast": 2 + 4, "fused_adamw": 4 * 4 + 3 * 4, "master_copy": 4 + 2}


def queue_depth(stamps: list[float], slow_s: float = SLOW_S) -> int | None:
    """The launches that went through before the first slower than `slow_s` (`stamps`: the
    host clock before the first launch and after each), None when none was that slow."""
    for i in range(1, len(stamps)):
        if stamps[i] - stamps[i - 1] > slow_s:
            return i - 1
    return None


def launch_queue(torch) -> int | None:
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    torch.cuda._sleep(SPIN_CYCLES)
    stamps = [time.perf_counter()]
    for _ in range(LAUNCHES):
        x.add_(1.0)
        stamps.append(time.perf_counter())
    torch.cuda.synchronize()
    return queue_depth(stamps)


def _wall_s(torch, fn) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def _kernels(torch, fn) -> tuple[int, float]:
    """(kernel launches, their summed GPU time in s) of one call of fn, by the profiler's
    trace (read as benchmarks/gpu_profile.py reads it)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace))
        kernels = gpu_profile.kernel_events(trace)
    return len(kernels), sum(e["dur"] for e in kernels) * 1e-6


def loop_host(torch) -> dict:
    """Section 2: per pass, wall time, launches, host time per launch, GPU busy share."""
    name, hidden, _, _, _, ffn, _, _ = gpu_moe.QWEN3_MOE
    experts, k, _ = gpu_moe.ROUTING[name]
    bf16 = torch.bfloat16

    def param(*size: int):
        return (torch.randn(*size, device="cuda", dtype=bf16) * size[-1] ** -0.5).requires_grad_()

    router = param(experts, hidden)
    gate_up = [param(2 * ffn, hidden) for _ in range(experts)]
    down = [param(hidden, ffn) for _ in range(experts)]
    x = torch.randn(TOKENS, hidden, device="cuda", dtype=bf16, requires_grad=True)

    def forward():
        return gpu_moe.moe_ffn(torch, x, router, gate_up, down, None, k, grouped=False)

    grad = torch.randn(TOKENS, hidden, device="cuda", dtype=bf16)
    held: list = []

    def backward():
        held.pop().backward(grad)

    result = {}
    for pass_, run, prepare in (
        ("forward", forward, lambda: None),
        ("backward", backward, lambda: held.append(forward())),
    ):
        for _ in range(3):  # warm-up
            prepare()
            run()
        walls = []
        for _ in range(gw.ROUNDS):
            prepare()
            walls.append(_wall_s(torch, run))
        prepare()
        launches, busy_s = _kernels(torch, run)
        wall = statistics.median(walls)
        result[pass_] = {
            "wall_s": wall,
            "launches": launches,
            "host_s_per_launch": wall / max(launches, 1),
            "gpu_busy_share": busy_s / wall,
        }
    return result


def optimizer_rates(torch) -> dict:
    """Section 3: per kernel group, seconds and bytes per second over the parameters."""
    params, _ = gpu_runs.make_llama(torch, gw.LLAMA_8B, 8, False)
    count = sum(p.numel() for p in params)
    grads = [torch.randn_like(p) for p in params]
    master = [p.detach().float() for p in params]
    opt = torch.optim.AdamW(master, lr=1e-5, fused=True)

    def grad_cast():
        for m, g in zip(master, grads, strict=True):
            m.grad = g.float()

    def fused_adamw():
        opt.step()

    def master_copy():
        with torch.no_grad():
            torch._foreach_copy_(params, master)

    grad_cast()
    fused_adamw()  # the first step creates the moments
    result = {"params": count}
    for name, fn in (("grad_cast", grad_cast), ("fused_adamw", fused_adamw),
                     ("master_copy", master_copy)):  # fmt: skip
        t = gw.timed(torch, fn, 1, False)
        result[name] = {"s": t, "bytes_per_s": OPTIMIZER_BYTES_PER_PARAM[name] * count / t}
    return result


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    out = ap.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    found = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "launch_queue_depth": launch_queue(torch),
    }
    print(f"launch queue depth {found['launch_queue_depth']}", flush=True)
    found["per_expert_loop"] = loop_host(torch)
    print(json.dumps(found["per_expert_loop"]), flush=True)
    torch.cuda.empty_cache()
    found["optimizer"] = optimizer_rates(torch)
    print(json.dumps(found["optimizer"]), flush=True)
    (out / "host.json").write_text(json.dumps(found, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
