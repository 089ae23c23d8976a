"""Whole runs measured on a lent GPU for benchmarks/gpu_measure.py (issue 35), beside the
kernels and layers of benchmarks/gpu_workloads.py:

- A BF16 training step of a Llama-3.1-8B-shaped model cut to fewer layers on one GPU, as
  Megatron runs it (BF16 weights and gradients, FP32 master weights in a fused Adam):
  `training_step` rows.
- HPL on one GPU: a right-looking blocked LU with partial pivoting in FP64 (panel through
  cuSOLVER, row swaps, triangular solve, trailing GEMM update; no look-ahead), checked by
  HPL's scaled residual: `hpl` rows with P = Q = 1, look-ahead depth 0.

Each function takes torch and `new_row` and returns rows; `smoke=True` runs tiny shapes on
the CPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gpu_workloads import LLAMA_8B, dense_cells, dev, rope, timed

# ---------------------------------------------------------------------------------------
# A training step
# ---------------------------------------------------------------------------------------


def make_llama(torch, shape: tuple, layers: int, smoke: bool):
    """A Llama decoder (BF16 parameters) as a list of parameter tensors and a loss closure."""
    from torch.nn.functional import cross_entropy, rms_norm, silu
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    _, hidden, heads, kv_heads, dim, ffn, vocab, _ = shape
    where, bf16 = dev(smoke), torch.bfloat16

    def param(*size: int, scale: float):
        return (torch.randn(*size, device=where, dtype=bf16) * scale).requires_grad_()

    embed = param(vocab, hidden, scale=0.02)
    head = param(vocab, hidden, scale=hidden**-0.5)
    blocks = [
        (
            param((heads + 2 * kv_heads) * dim, hidden, scale=hidden**-0.5),
            param(hidden, heads * dim, scale=(heads * dim) ** -0.5),
            param(2 * ffn, hidden, scale=hidden**-0.5),
            param(hidden, ffn, scale=ffn**-0.5),
            torch.ones(hidden, device=where, dtype=bf16).requires_grad_(),
            torch.ones(hidden, device=where, dtype=bf16).requires_grad_(),
        )
        for _ in range(layers)
    ]
    final_norm = torch.ones(hidden, device=where, dtype=bf16).requires_grad_()
    params = [embed, head, final_norm] + [p for block in blocks for p in block]

    def loss(tokens, labels):
        batch, seq = tokens.shape
        angle = torch.outer(
            torch.arange(seq, device=where, dtype=torch.float32),
            torch.rand(dim, device=where, dtype=torch.float32),
        )
        cos, sin = angle.cos().to(bf16), angle.sin().to(bf16)
        x = embed[tokens]
        for w_qkv, w_o, w_gu, w_down, n1, n2 in blocks:
            h = rms_norm(x, (hidden,), n1, 1e-5)
            q, k, v = (h @ w_qkv.t()).split((heads * dim, kv_heads * dim, kv_heads * dim), -1)
            q = rope(torch, q.view(batch, seq, heads, dim).transpose(1, 2), cos, sin)
            k = rope(torch, k.view(batch, seq, kv_heads, dim).transpose(1, 2), cos, sin)
            v = v.view(batch, seq, kv_heads, dim).transpose(1, 2)
            a = sdpa(q, k, v, is_causal=True, enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(batch, seq, heads * dim) @ w_o.t()
            h = rms_norm(x, (hidden,), n2, 1e-5)
            gate, up = (h @ w_gu.t()).chunk(2, dim=-1)
            x = x + (silu(gate) * up) @ w_down.t()
        logits = rms_norm(x, (hidden,), final_norm, 1e-5) @ head.t()
        return cross_entropy(logits.float().view(-1, vocab), labels.view(-1))

    return params, loss


def measure_training_step(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    rows = []
    configs = ((8, 4096, 2), (8, 8192, 1), (16, 4096, 1), (16, 2048, 2))  # layers, seq, mbs
    shape = LLAMA_8B
    if smoke:
        shape, configs = ("tiny", 64, 4, 2, 16, 128, 1000, ""), ((2, 32, 2),)
    for layers, seq, micro in configs:
        params, loss = make_llama(torch, shape, layers, smoke)
        master = [p.detach().float() for p in params]
        opt = torch.optim.AdamW(master, lr=1e-5, fused=not smoke)
        tokens = torch.randint(0, shape[6], (micro, seq), device=dev(smoke))
        labels = torch.randint(0, shape[6], (micro, seq), device=dev(smoke))

        def step(params=params, master=master, opt=opt, loss=loss, t=tokens, lab=labels):
            loss(t, lab).backward()
            for p, m in zip(params, master, strict=True):
                m.grad = p.grad.float()  # the BF16 gradient into the FP32 master's
                p.grad = None
            opt.step()
            with torch.no_grad():
                torch._foreach_copy_(params, master)  # FP32 master -> BF16 weights

        t = timed(torch, step, 1 if smoke else 2, smoke)
        name, hidden, heads, kv_heads, dim, ffn, vocab, hf = shape
        rows.append(
            new_row(
                "training_step",
                precision="bf16",
                model=f"{name} ({layers} of its layers)",
                layers=layers,
                vocab=vocab,
                **dense_cells(shape),
                cp=1,
                ep=1,
                virtual_pipeline=1,
                sequence_parallel=0,
                recompute="none",
                fsdp=0,
                global_batch=micro,
                micro_batch=micro,
                seq_len=seq,
                metric="iteration_time_s",
                value=repr(t),
                value_as_published=f"{t * 1e3:.2f} ms per step",
                notes="One training step on one GPU, in plain eager PyTorch as Megatron runs "
                "a BF16 step: BF16 weights and activations, untied embedding and LM head, "
                "RMSNorm (torch rms_norm), fused QKV, RoPE as eager ops, causal SDPA "
                "(FlashAttention backend, GQA), eager SiLU x up, FP32 cross-entropy on the "
                "logits; the BF16 gradients cast into FP32 master weights, fused AdamW, the "
                "masters copied back to BF16. Random weights and tokens; the median step "
                "after warm-up.",
                extra_params="optimizer=adamw;attention_impl=fused;eager_activation=1;"
                "eager_rope=1;master_grad_cast=1;loss_impl=torch_eager;compile=0;"
                "library=torch_eager;timing=cuda_event_stream",
            )
        )
        del params, master, opt, loss, step
        if not smoke:
            torch.cuda.empty_cache()
    return rows


# ---------------------------------------------------------------------------------------
# HPL on one GPU
# ---------------------------------------------------------------------------------------


def blocked_lu(torch, a, nb: int):
    """In-place right-looking LU of `a` with partial pivoting, panel by panel of nb columns;
    returns the row permutation (HPL's algorithm on a 1 x 1 grid, no look-ahead)."""
    n = a.shape[0]
    perm = torch.arange(n, device=a.device)
    for j in range(0, n, nb):
        w = min(nb, n - j)
        lu, piv = torch.linalg.lu_factor(a[j:, j : j + w])
        a[j:, j : j + w] = lu
        # the panel's row swaps (sequential, as getrf made them), on the other columns
        source: dict[int, int] = {}
        for i, p in enumerate((piv - 1).tolist()):
            if p != i:
                source[i], source[p] = source.get(p, p), source.get(i, i)
        moved = sorted(r for r, s in source.items() if r != s)
        if moved:
            dst = torch.tensor(moved, device=a.device) + j
            src = torch.tensor([source[r] for r in moved], device=a.device) + j
            a[dst, :j] = a[src, :j]
            a[dst, j + w :] = a[src, j + w :]
            perm[dst] = perm[src]
        if j + w < n:
            l11 = a[j : j + w, j : j + w]
            a[j : j + w, j + w :] = torch.linalg.solve_triangular(
                l11, a[j : j + w, j + w :], upper=False, unitriangular=True
            )
            a[j + w :, j + w :].addmm_(a[j + w :, j : j + w], a[j : j + w, j + w :], alpha=-1)
    return perm


def hpl_residual(torch, a0, lu, perm, b) -> float:
    """HPL's scaled residual ||Ax - b||_inf / (eps (||A||_inf ||x||_inf + ||b||_inf) n)."""
    y = torch.linalg.solve_triangular(lu, b[perm].unsqueeze(1), upper=False, unitriangular=True)
    x = torch.linalg.solve_triangular(lu, y, upper=True).squeeze(1)
    r = (a0 @ x - b).abs().max()
    eps = torch.finfo(torch.float64).eps
    norm_a = a0.abs().sum(dim=1).max()
    scale = eps * (norm_a * x.abs().max() + b.abs().max()) * a0.shape[0]
    return float(r / scale)


def measure_hpl(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    rows = []
    cases = ((32768, 1024), (65536, 1024)) if not smoke else ((96, 32), (200, 64))
    if not smoke:  # cuSOLVER's getrf for the tall panels (MAGMA's batched one is for small)
        torch.backends.cuda.preferred_linalg_library("cusolver")
    for n, nb in cases:
        gen = torch.Generator(device=dev(smoke)).manual_seed(n)
        a0 = torch.rand(n, n, device=dev(smoke), dtype=torch.float64, generator=gen) - 0.5
        b = torch.rand(n, device=dev(smoke), dtype=torch.float64, generator=gen) - 0.5
        lu = a0.clone()
        blocked_lu(torch, lu[: min(n, 4 * nb), : min(n, 4 * nb)].clone(), nb)  # warm-up
        if not smoke:
            torch.cuda.synchronize()
        start_s = time.perf_counter()
        perm = blocked_lu(torch, lu, nb)
        if not smoke:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start_s
        residual = hpl_residual(torch, a0, lu, perm, b)
        flop = 2.0 / 3.0 * n**3 + 2.0 * n**2
        rows.append(
            new_row(
                "hpl",
                precision="fp64",
                metric="rmax_flops",
                value=repr(flop / seconds),
                value_as_published=f"{flop / seconds / 1e12:.2f} TFLOP/s (N {n}, NB {nb}, "
                f"{seconds:.3f} s, scaled residual {residual:.3g})",
                flop_convention="hpl_standard",
                notes="HPL's factorisation on one GPU in PyTorch FP64: right-looking blocked "
                "LU with partial pivoting, each nb-column panel factored by cuSOLVER getrf "
                "(torch.linalg.lu_factor), its row swaps applied to the other columns, the "
                "U row block by a unit-lower triangular solve, the trailing matrix updated by "
                "one DGEMM; no look-ahead, panel and update serial. Timed by the wall clock "
                "around the factorisation (synchronised); the solve is not timed (2 N^2 "
                "counted as HPL does). Checked by HPL's scaled residual (passes below 16).",
                extra_params=f"hpl_n={n};hpl_nb={nb};hpl_p=1;hpl_q=1;hpl_depth=0;library=torch_cusolver;timing=wall_clock_synchronized"
                f";derived_iteration_time_s={seconds!r};derived_scaled_residual={residual!r}",
            )
        )
        del a0, b, lu
        if not smoke:
            torch.cuda.empty_cache()
    return rows
