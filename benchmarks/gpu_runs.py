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

from gpu_moe import MIXTRAL, QWEN3_MOE, ROUTING, TINY_MOE, balanced_routing_bias, moe_ffn
from gpu_workloads import LLAMA_8B, dense_cells, dev, rope, timed

# ---------------------------------------------------------------------------------------
# A training step
# ---------------------------------------------------------------------------------------


def make_llama(torch, shape: tuple, layers: int, smoke: bool, moe_grouped: bool | None = None):
    """A Llama decoder (BF16 parameters) as a list of parameter tensors and a loss closure;
    with `moe_grouped` set, the FFN is the MoE layer of ROUTING[name] (moe_ffn)."""
    from torch.nn.functional import cross_entropy, rms_norm, silu
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    name, hidden, heads, kv_heads, dim, ffn, vocab, _ = shape
    experts, k, qk_norm = ROUTING[name] if moe_grouped is not None else (1, 1, False)
    where, bf16 = dev(smoke), torch.bfloat16

    def param(*size: int, scale: float):
        return (torch.randn(*size, device=where, dtype=bf16) * scale).requires_grad_()

    def ones(size: int):
        return torch.ones(size, device=where, dtype=bf16).requires_grad_()

    def ffn_weights() -> list:
        if moe_grouped is None:
            return [param(2 * ffn, hidden, scale=hidden**-0.5), param(hidden, ffn, scale=ffn**-0.5)]
        if moe_grouped:  # stacked over the experts, as a grouped GEMM takes them
            return [
                param(experts, hidden, scale=hidden**-0.5),
                param(experts, 2 * ffn, hidden, scale=hidden**-0.5),
                param(experts, hidden, ffn, scale=ffn**-0.5),
            ]
        # a parameter per expert (SequentialMLP's): a slice of a stacked one would make its
        # backward write a zero-filled gradient of every expert's weights per expert
        return [
            param(experts, hidden, scale=hidden**-0.5),
            [param(2 * ffn, hidden, scale=hidden**-0.5) for _ in range(experts)],
            [param(hidden, ffn, scale=ffn**-0.5) for _ in range(experts)],
        ]

    embed = param(vocab, hidden, scale=0.02)
    head = param(vocab, hidden, scale=hidden**-0.5)
    blocks = [
        [
            param((heads + 2 * kv_heads) * dim, hidden, scale=hidden**-0.5),
            param(hidden, heads * dim, scale=(heads * dim) ** -0.5),
            ones(hidden),
            ones(hidden),
            *([ones(dim), ones(dim)] if qk_norm else []),
            *ffn_weights(),
        ]
        for _ in range(layers)
    ]
    final_norm = ones(hidden)
    params = [embed, head, final_norm]
    for p in (p for block in blocks for p in block):
        params += p if isinstance(p, list) else [p]

    def loss(tokens, labels):
        batch, seq = tokens.shape
        angle = torch.outer(
            torch.arange(seq, device=where, dtype=torch.float32),
            torch.rand(dim, device=where, dtype=torch.float32),
        )
        cos, sin = angle.cos().to(bf16), angle.sin().to(bf16)
        bias = balanced_routing_bias(torch, batch * seq, experts, k, where)
        x = embed[tokens]
        for w_qkv, w_o, n1, n2, *rest in blocks:
            q_norm, k_norm = rest[:2] if qk_norm else (None, None)
            ffn_w = rest[2:] if qk_norm else rest
            h = rms_norm(x, (hidden,), n1, 1e-5)
            q, kk, v = (h @ w_qkv.t()).split((heads * dim, kv_heads * dim, kv_heads * dim), -1)
            q, kk = q.view(batch, seq, heads, dim), kk.view(batch, seq, kv_heads, dim)
            if qk_norm:
                q, kk = rms_norm(q, (dim,), q_norm, 1e-6), rms_norm(kk, (dim,), k_norm, 1e-6)
            q = rope(torch, q.transpose(1, 2), cos, sin)
            kk = rope(torch, kk.transpose(1, 2), cos, sin)
            v = v.view(batch, seq, kv_heads, dim).transpose(1, 2)
            a = sdpa(q, kk, v, is_causal=True, enable_gqa=True)
            x = x + a.transpose(1, 2).reshape(batch, seq, heads * dim) @ w_o.t()
            h = rms_norm(x, (hidden,), n2, 1e-5)
            if moe_grouped is None:
                gate, up = (h @ ffn_w[0].t()).chunk(2, dim=-1)
                x = x + (silu(gate) * up) @ ffn_w[1].t()
            else:
                flat = h.view(batch * seq, hidden)
                moe = moe_ffn(torch, flat, *ffn_w, bias, k, moe_grouped)
                x = x + moe.view(batch, seq, hidden)
        logits = rms_norm(x, (hidden,), final_norm, 1e-5) @ head.t()
        return cross_entropy(logits.float().view(-1, vocab), labels.view(-1))

    return params, loss


def adam_step(torch, params, master, opt, loss, tokens, labels) -> None:
    """One step as Megatron runs BF16: the loss's backward, the BF16 gradients cast into the
    FP32 masters', fused AdamW on the masters, the masters copied back to BF16."""
    loss(tokens, labels).backward()
    for p, m in zip(params, master, strict=True):
        m.grad = p.grad.float()
        p.grad = None
    opt.step()
    with torch.no_grad():
        torch._foreach_copy_(params, master)


STEP_NOTES = (
    "One training step on one GPU, in plain eager PyTorch as Megatron runs a BF16 step: BF16 "
    "weights and activations, untied embedding and LM head, RMSNorm (torch rms_norm), fused "
    "QKV, RoPE as eager ops, causal SDPA (FlashAttention backend, GQA), eager SiLU x up, "
    "FP32 cross-entropy on the logits; the BF16 gradients cast into FP32 master weights, "
    "fused AdamW, the masters copied back to BF16. Random weights and tokens; the median "
    "step after warm-up."
)
MOE_NOTES = (
    " The FFN is the model's MoE layer as Megatron-core runs it on one rank (EP 1, no "
    "auxiliary loss): router GEMM, FP32 softmax, top-k, probabilities renormalised; token "
    "copies permuted into expert order (argsort, index_select); expert GEMMs {how}; the "
    "copies scaled by their probabilities and summed back (index_add). Routing balanced by a "
    "fixed bias on the router's logits: every expert gets tokens x k / experts tokens."
)
MOE_HOW = {
    True: "as grouped GEMMs over every expert (torch._grouped_mm: gate+up, down)",
    False: "one GEMM per expert after a host sync on the token counts (SequentialMLP)",
}


def training_configs(smoke: bool) -> list[tuple[tuple, int, int, int, bool | None]]:
    """(shape, layers, seq, micro-batch, moe_grouped) of every measured step."""
    if smoke:
        tiny = ("tiny", 64, 4, 2, 16, 128, 1000, "")
        return [(tiny, 2, 32, 2, None), (TINY_MOE, 2, 32, 2, False)]
    dense_steps = ((8, 4096, 2), (8, 8192, 1), (16, 4096, 1), (16, 2048, 2))
    dense = [(LLAMA_8B, *c, None) for c in dense_steps]
    moe = [
        (shape, layers, 4096, micro, grouped)
        for shape, layers in ((MIXTRAL, 2), (QWEN3_MOE, 4))
        for micro in (1, 4)
        for grouped in (True, False)
    ]
    return dense + moe


def training_step(torch, shape: tuple, layers: int, seq: int, micro: int, grouped, smoke: bool):
    """One configuration's step as a closure over its model, optimizer and random batch."""
    params, loss = make_llama(torch, shape, layers, smoke, grouped)
    master = [p.detach().float() for p in params]
    opt = torch.optim.AdamW(master, lr=1e-5, fused=not smoke)
    tokens = torch.randint(0, shape[6], (micro, seq), device=dev(smoke))
    labels = torch.randint(0, shape[6], (micro, seq), device=dev(smoke))
    return lambda: adam_step(torch, params, master, opt, loss, tokens, labels)


def time_step(torch, shape: tuple, layers: int, seq: int, micro: int, grouped, smoke: bool):
    """The median step time (s) of one configuration; its tensors are freed on return."""
    step = training_step(torch, shape, layers, seq, micro, grouped, smoke)
    return timed(torch, step, 1 if smoke else 2, smoke)


def measure_training_step(
    torch, new_row: Callable[..., dict], smoke: bool = False, moe: bool = False
) -> list:
    """The dense steps, or (moe) the MoE ones, of training_configs."""
    rows = []
    for shape, layers, seq, micro, grouped in training_configs(smoke):
        if moe != (grouped is not None):
            continue
        try:
            t = time_step(torch, shape, layers, seq, micro, grouped, smoke)
        except Exception as exc:  # noqa: BLE001 - one configuration's failure keeps the rest
            print(f"training step {shape[0]} x{layers} mbs {micro} failed: {exc}", flush=True)
            continue
        finally:
            if not smoke:
                torch.cuda.empty_cache()
        rows.append(training_row(new_row, shape, layers, seq, micro, grouped, t))
    return rows


def measure_moe_training_step(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    return measure_training_step(torch, new_row, smoke, moe=True)


def training_row(new_row, shape, layers, seq, micro, grouped, t: float) -> dict:
    name, _, _, _, _, _, vocab, hf = shape
    extra = (
        "optimizer=adamw;attention_impl=fused;eager_activation=1;eager_rope=1;"
        "master_grad_cast=1;loss_impl=torch_eager;compile=0;library=torch_eager;"
        "timing=cuda_event_stream"
    )
    cells = dense_cells(shape)
    notes = STEP_NOTES
    if grouped is not None:
        experts, k, _ = ROUTING[name]
        cells |= dict(experts=experts, experts_per_token=k)
        gemm = "torch_grouped" if grouped else "per_expert"
        extra += f";hf_config={hf};moe_gemm={gemm};moe_permute=scatter_add"
        notes += MOE_NOTES.format(how=MOE_HOW[grouped])
    return new_row(
        "training_step",
        precision="bf16",
        model=f"{name} ({layers} of its layers)",
        layers=layers,
        vocab=vocab,
        **cells,
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
        notes=notes,
        extra_params=extra,
    )


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
