"""MoE measurements of benchmarks/gpu_measure.py (issue 35, item 1): the MoE layer as
Megatron-core runs it on one rank, shared by the training steps of gpu_runs.py and the decode
layers measured here.

- `layer_decode` and `layer_prefill` rows of one MoE layer (Mixtral-8x7B, Qwen3-30B-A3B):
  the dense layer of gpu_workloads.make_layer with its MLP replaced by `moe_ffn` (grouped
  expert GEMMs, the inference default), routed by the router's own choices on random data.

Each function takes torch and `new_row` and returns rows; `smoke=True` runs tiny shapes on
the CPU.
"""

from __future__ import annotations

from collections.abc import Callable

from gpu_workloads import (
    GROUPED,
    GROUPED_NOTE,
    MlpVariant,
    dev,
    expert_gemm_row,
    grouped_mm,
    measure_layers,
    timed,
)

# MoE models: the dense tuple of gpu_workloads (the expert FFN width in the ffn slot) and
# (experts, experts per token, per-head q/k RMSNorm)
MIXTRAL = ("Mixtral-8x7B", 4096, 32, 8, 128, 14336, 32000, "mistralai/Mixtral-8x7B-v0.1")
QWEN3_MOE = ("Qwen3-30B-A3B", 2048, 32, 4, 128, 768, 151936, "Qwen/Qwen3-30B-A3B")
ROUTING = {MIXTRAL[0]: (8, 2, False), QWEN3_MOE[0]: (128, 8, True)}
TINY_MOE = (MIXTRAL[0], 64, 4, 2, 16, 32, 1000, "")  # Mixtral's routing, for smoke runs


def balanced_routing_bias(torch, tokens: int, experts: int, k: int, where: str):
    """(tokens, experts) FP32, 10 on token t's experts (t k + j) mod E, j < k: added to the
    router's logits it makes top-k pick them, so every expert gets tokens k / E tokens (the
    balanced count the model prices) while the router's GEMM, softmax and top-k still run."""
    bias = torch.zeros(tokens, experts, device=where, dtype=torch.float32)
    t = torch.arange(tokens, device=where).unsqueeze(1)
    bias.scatter_(1, (t * k + torch.arange(k, device=where)) % experts, 10.0)
    return bias


def moe_ffn(torch, h, w_router, w_gu, w_down, bias, k: int, grouped: bool):
    """Megatron-core's MoE layer on one rank (EP 1): router GEMM, softmax and top-k with
    renormalised probabilities, the token copies permuted into expert order, the experts'
    gate+up, SiLU x up and down as grouped GEMMs (torch._grouped_mm, one call over every
    expert, TEGroupedMLP's role; w_gu, w_down stacked) or one GEMM per expert after a host
    sync on the token counts (SequentialMLP; w_gu, w_down lists of each expert's), then
    the copies scaled by their probabilities and summed back into token order."""
    from torch.nn.functional import silu

    experts = len(w_gu)  # a stacked tensor's first dim or a list's length
    logits = (h @ w_router.t()).float()
    probs = torch.softmax(logits if bias is None else logits + bias, dim=-1)
    top, chosen = torch.topk(probs, k, dim=-1)
    top = top / top.sum(dim=-1, keepdim=True)
    order = chosen.view(-1).argsort(stable=True)  # token copies in expert order
    token_of = order // k
    x = h.index_select(0, token_of)
    # tokens per expert by a scatter, not bincount (whose output size syncs the host)
    ones = torch.ones_like(chosen.view(-1))
    counts = torch.zeros(experts, device=h.device, dtype=ones.dtype).scatter_add_(
        0, chosen.view(-1), ones
    )
    if grouped:
        ends = counts.cumsum(0).to(torch.int32)
        gate, up = torch._grouped_mm(x, w_gu.transpose(-2, -1), offs=ends).chunk(2, dim=-1)
        y = torch._grouped_mm(silu(gate) * up, w_down.transpose(-2, -1), offs=ends)
    else:
        parts = []
        for e, xe in enumerate(x.split(counts.tolist())):
            gate, up = (xe @ w_gu[e].t()).chunk(2, dim=-1)
            parts.append((silu(gate) * up) @ w_down[e].t())
        y = torch.cat(parts)
    y = y * top.view(-1)[order].unsqueeze(1).to(h.dtype)
    return torch.zeros_like(h).index_add_(0, token_of, y)


def moe_weights(torch, shape: tuple, smoke: bool) -> tuple:
    """(router, gate+up, down) of one MoE layer: (E, h), (E, 2f, h), (E, h, f), BF16."""
    name, hidden, _, _, _, ffn, _, _ = shape
    experts = ROUTING[name][0]
    where, bf16 = dev(smoke), torch.bfloat16
    return (
        torch.randn(experts, hidden, device=where, dtype=bf16) * hidden**-0.5,
        torch.randn(experts, 2 * ffn, hidden, device=where, dtype=bf16) * hidden**-0.5,
        torch.randn(experts, hidden, ffn, device=where, dtype=bf16) * ffn**-0.5,
    )


def moe_layer_ffn(torch, shape: tuple, smoke: bool) -> tuple[Callable, bool]:
    """(the MoE MLP over its own weights, qk_norm) of one layer of `shape`."""
    _, k, qk_norm = ROUTING[shape[0]]
    weights = moe_weights(torch, shape, smoke)
    return lambda h: moe_ffn(torch, h, *weights, None, k, grouped=not smoke), qk_norm


MOE_LAYERS = MlpVariant(
    shapes=(MIXTRAL, QWEN3_MOE),
    smoke_shape=TINY_MOE,
    make_ffn=moe_layer_ffn,
    cells=lambda shape: dict(experts=ROUTING[shape[0]][0], experts_per_token=ROUTING[shape[0]][1]),
    text=" Its MLP is the model's MoE layer as Megatron-core runs it on one rank: router GEMM, "
    "FP32 softmax, top-k, probabilities renormalised, token copies permuted into expert "
    "order (argsort, index_select), grouped GEMMs over every expert (torch._grouped_mm: "
    "gate+up, then down) with SiLU x up between, the copies scaled and summed back "
    "(index_add); routed by the router's own choices on random data (near-uniform).",
    extra=";moe_gemm=torch_grouped;moe_permute=scatter_add",
)


def measure_moe_layer_decode(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    return measure_layers(torch, new_row, "decode", "kv_shared", smoke, MOE_LAYERS)


def measure_moe_layer_prefill(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    return measure_layers(torch, new_row, "prefill", "", smoke, MOE_LAYERS)


# torch._grouped_mm over a sweep of tokens per expert: (k, n, experts) of expert GEMMs
# (Mixtral-8x7B's gate+up and down, Qwen3-30B-A3B's, a DeepSeek-sized 7168 -> 4096 over 32
# local experts, one 4096^2 expert); PyTorch picks its 64x128x128 tile at an average of 128
# tokens per expert or fewer and its 128x256x64 tile above (ATen GroupMM.cu)
GROUPED_RATE_SHAPES = (
    (4096, 28672, 8),
    (14336, 4096, 8),
    (2048, 1536, 128),
    (768, 2048, 128),
    (7168, 4096, 32),
    (4096, 4096, 1),
)
GROUPED_RATE_TOKENS = (1, 4, 16, 64, 128, 256, 1024)


def measure_grouped_mm_rates(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    """`gemm` reference rows (batch = experts, m = tokens per expert, every expert the same
    count) of one torch._grouped_mm call each, CUDA-graph replayed: the weight-streaming
    rate of its small-tile kernel and the FLOP rate of its large-tile one."""
    rows = []
    shapes = GROUPED_RATE_SHAPES if not smoke else ((64, 32, 4),)
    for k, n, experts in shapes:
        w = torch.randn(experts, n, k, device=dev(smoke), dtype=torch.bfloat16)
        for m in GROUPED_RATE_TOKENS if not smoke else (16,):
            a = torch.randn(experts * m, k, device=dev(smoke), dtype=torch.bfloat16)
            ends = torch.arange(1, experts + 1, device=dev(smoke), dtype=torch.int32) * m
            if smoke:  # no grouped kernel on the CPU: the same products one expert at a time
                fn = lambda a=a, w=w, m=m: [x @ we.t() for x, we in zip(a.split(m), w)]  # noqa: E731
            else:
                fn = lambda a=a, w=w, e=ends: grouped_mm(torch, a, w, e)  # noqa: E731
            t = timed(torch, fn, 20, smoke, graph=True)
            moved = 2.0 * experts * (k * n + m * (k + n))
            rows.append(
                expert_gemm_row(
                    new_row,
                    (experts, m, k, n),
                    t,
                    f"{GROUPED}, {experts} experts x {m} tokens, "
                    f"{moved / t / 1e12:.2f} TB/s of operands",
                    GROUPED_NOTE + f"One torch._grouped_mm call: {experts} experts of "
                    f"{k} -> {n}, {m} tokens each; BF16 in and out, random normal data.",
                    f"library={GROUPED};timing=cuda_graph_replay;"
                    f"derived_kernel_time_s={t!r};derived_operand_bytes={moved!r}",
                    usable=False,
                )
            )
            del a
        del w
    return rows
