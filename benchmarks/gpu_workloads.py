"""The workload-level measurements of benchmarks/gpu_measure.py: what the validation set
lacks beyond single GEMMs (issues 34 and 35), measured on a lent GPU with plain PyTorch.

- Decode attention of one new token per sequence against a BF16 KV cache, in the two
  kernel families MapShard prices (setup.proto DecodeAttention): per query head (SDPA with
  enable_gqa: one program per query head, the L2 serving the group's repeated KV reads) and
  group-aware (the G query heads of a KV head as G query rows of one SDPA call, each KV head
  read once). Reference rows: validate does not predict single attention kernels.
- One Llama layer's decode step (RMSNorm, QKV, RoPE, KV-cache write, group-aware attention,
  O projection, SwiGLU MLP, residual adds), replayed from a CUDA graph over several layers
  with their own weights and caches: `layer_decode` rows that `mapshard validate` predicts.
- MoE expert GEMMs: every expert's tokens in one batched GEMM (torch.bmm, equal token counts)
  and in one grouped GEMM (torch._grouped_mm) at small tokens per expert: `gemm` rows with
  `batch` = experts.
Whole runs (a BF16 training step, single-GPU HPL) are in benchmarks/gpu_runs.py.

Each function takes torch and `new_row` (gpu_measure.measure's row maker) and returns rows;
`smoke=True` runs tiny shapes on the CPU to test the code paths here.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

ROUNDS = 5

# (name, hidden, heads, kv_heads, head_dim, ffn_hidden, vocab, hf_config) of the layers
LLAMA_8B = ("Llama-3.1-8B", 4096, 32, 8, 128, 14336, 128256, "meta-llama/Llama-3.1-8B")
LLAMA_70B = ("Llama-3.1-70B", 8192, 64, 8, 128, 28672, 128256, "meta-llama/Llama-3.1-70B")
DECODE_BATCH = (1, 16, 64, 128, 256)
DECODE_KV = (1024, 4096)
# MoE experts: (model, experts, hidden, expert ffn); per-expert GEMMs gate+up (h -> 2f) and down
MOE = (("Qwen3-30B-A3B", 128, 2048, 768), ("Mixtral-8x7B", 8, 4096, 14336))
TOKENS_PER_EXPERT = (8, 32, 128, 512, 2048)
GROUPED = "torch_grouped_mm"
GROUPED_NOTE = (
    "Not predicted: a grouped GEMM (CUTLASS, per-expert offsets) is not the batched GEMM of "
    "equal shapes the row's columns describe; kept beside the torch_bmm row of the same shape. "
)


def timed(torch, fn: Callable[[], object], reps: int, smoke: bool, graph: bool = False) -> float:
    """Median over ROUNDS of the mean time of `reps` back-to-back calls, in seconds: CUDA
    events around the calls on one stream, or (graph) around the replay of a CUDA graph of
    the `reps` calls, which takes the host's launch time out of short kernels; the wall
    clock on the CPU smoke run."""
    if graph and not smoke:
        return graph_time_s(torch, fn, reps)
    for _ in range(2 if smoke else 3):
        fn()
    times = []
    for _ in range(2 if smoke else ROUNDS):
        if smoke:
            start_s = time.perf_counter()
            for _ in range(reps):
                fn()
            times.append((time.perf_counter() - start_s) / reps)
            continue
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / reps)
    return statistics.median(times)


def graph_time_s(torch, fn: Callable[[], object], reps: int) -> float:
    """Median over ROUNDS of one replay of a CUDA graph of `reps` calls, divided by reps:
    the kernels back to back with no host launch gaps (a freed output's memory is reused
    inside the graph's pool, so the graph holds about one output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(ROUNDS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / reps)
    del g
    return statistics.median(times)


def dev(smoke: bool) -> str:
    return "cpu" if smoke else "cuda"


# ---------------------------------------------------------------------------------------
# Decode attention kernels and one decode layer
# ---------------------------------------------------------------------------------------


def dense_cells(shape: tuple) -> dict[str, object]:
    """The schema cells of a dense Llama-shaped model on one GPU (no parallelism)."""
    _, hidden, heads, kv_heads, dim, ffn, _, _ = shape
    return dict(
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=dim,
        ffn_hidden=ffn,
        ffn_kind="swiglu",
        experts=0,
        experts_per_token=0,
        tp=1,
        pp=1,
        dp=1,
    )


def grouped_decode_attention(sdpa, q, k, v):
    """q (b, H, d) against k, v (b, G, L, d): the H/G query heads of each KV head as H/G
    query rows of one attention call, so each KV head is read once."""
    b, heads, d = q.shape
    kv_heads = k.shape[1]
    out = sdpa(q.view(b, kv_heads, heads // kv_heads, d), k, v)
    return out.reshape(b, heads * d)


def per_head_decode_attention(sdpa, q, k, v):
    """q (b, H, d): one query row per head, GQA expanded by the kernel (enable_gqa)."""
    b, heads, d = q.shape
    return sdpa(q.unsqueeze(2), k, v, enable_gqa=True).reshape(b, heads * d)


def setup_family(family: str, heads: int, kv_heads: int) -> str:
    """The setup's DecodeAttention for a measured call: the group-aware call puts a KV
    head's G query heads in one call as G query rows, and PyTorch's flash kernel then runs
    one thread block per (sequence, KV head) over the whole cache (kv_shared_unsplit); with
    one query row per head (G = 1) the same call splits the cache over the SMs (kv_shared:
    the MHA rows run as fast as the per-query-head call, the same tensors)."""
    if family == "kv_shared" and heads > kv_heads:
        return "kv_shared_unsplit"
    return family


def measure_decode_attention(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    rows = []
    shapes = ((32, 8, 128), (64, 8, 128), (32, 32, 128))  # Llama-3.1-8B/70B per GPU, MHA
    grid = [(b, kv) for b in DECODE_BATCH for kv in (1024, 4096, 8192) if b * kv <= 2**20]
    if smoke:
        shapes, grid = ((4, 2, 16),), [(2, 64)]
    for heads, kv_heads, dim in shapes:
        for batch, kv_len in grid:
            q = torch.randn(batch, heads, dim, device=dev(smoke), dtype=torch.bfloat16)
            k, v = (
                torch.randn(batch, kv_heads, kv_len, dim, device=dev(smoke), dtype=torch.bfloat16)
                for _ in range(2)
            )
            kv_bytes = 2 * batch * kv_heads * kv_len * dim * 2
            for family, fn in (
                ("kv_shared", grouped_decode_attention),
                ("kv_per_query_head", per_head_decode_attention),
            ):
                call = lambda fn=fn, q=q, k=k, v=v: fn(sdpa, q, k, v)  # noqa: E731
                t = timed(torch, call, 50, smoke, graph=True)
                rows.append(
                    new_row(
                        "attention_fwd",
                        precision="bf16",
                        heads=heads,
                        kv_heads=kv_heads,
                        head_dim=dim,
                        batch=batch,
                        kv_len=kv_len,
                        usable="0",
                        metric="kernel_time_s",
                        value=repr(t),
                        value_as_published=f"{t * 1e6:.2f} us (decode {heads}/{kv_heads}, "
                        f"{family}, {kv_bytes / t / 1e12:.2f} TB/s of KV)",
                        notes="Not predicted: validate does not model a single attention "
                        "kernel row. Decode attention of one new token per sequence against a "
                        f"contiguous BF16 KV cache through torch SDPA; family {family} "
                        "(gpu_workloads.py says how each is called).",
                        extra_params="library=torch_sdpa;timing=cuda_graph_replay;pass=decode;"
                        f"decode_attention={setup_family(family, heads, kv_heads)}"
                        f";derived_kv_bytes={kv_bytes}",
                    )
                )
            del q, k, v
    return rows


def rope(torch, x, cos, sin):
    """Rotary embedding on the last dim (halves rotated, Llama's layout)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def layer_weights(torch, shape: tuple, smoke: bool) -> dict:
    """One Llama layer's BF16 weights (random, scaled so activations stay finite)."""
    _, hidden, heads, kv_heads, dim, ffn, _, _ = shape
    bf16, where = torch.bfloat16, dev(smoke)

    def weight(n_out: int, n_in: int):
        return torch.randn(n_out, n_in, device=where, dtype=bf16) * (n_in**-0.5)

    return {
        "qkv": weight((heads + 2 * kv_heads) * dim, hidden),
        "o": weight(hidden, heads * dim),
        "gate_up": weight(2 * ffn, hidden),
        "down": weight(hidden, ffn),
        "norm1": torch.ones(hidden, device=where, dtype=bf16),
        "norm2": torch.ones(hidden, device=where, dtype=bf16),
        "q_norm": torch.ones(dim, device=where, dtype=bf16),
        "k_norm": torch.ones(dim, device=where, dtype=bf16),
    }


def make_layer(
    torch,
    shape: tuple,
    batch: int,
    tokens: int,
    kv_len: int,
    family: str,
    smoke: bool,
    mlp: Callable | None = None,
    qk_norm: bool = False,
) -> Callable:
    """One Llama layer as a closure over its own weights and KV cache: a decode step
    (tokens = 1: the new token's K/V written at kv_len - 1, attention over the cache in the
    kernel `family`) or a prefill (tokens = kv_len: the prompt's K/V written to the cache,
    causal attention over the prompt). `mlp` (h -> out) replaces the SwiGLU MLP (an MoE
    layer, gpu_moe.py); `qk_norm`: per-head RMSNorm of q and k before RoPE (Qwen3)."""
    from torch.nn.functional import rms_norm, silu
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    _, hidden, heads, kv_heads, dim, ffn, _, _ = shape
    w = layer_weights(torch, shape, smoke)
    k_cache = torch.randn(batch, kv_heads, kv_len, dim, device=dev(smoke), dtype=torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    angle = torch.rand(tokens, dim, device=dev(smoke), dtype=torch.float32) * math.pi
    cos, sin = angle.cos().to(torch.bfloat16), angle.sin().to(torch.bfloat16)
    decode_attention = {"kv_shared": grouped_decode_attention}.get(
        family, per_head_decode_attention
    )

    def attention(q, k, v):
        """q (b, t, H, d), k and v (b, t, G, d) -> (b * t, H * d); the cache written."""
        q = rope(torch, q, cos[:, None], sin[:, None]).transpose(1, 2)
        k = rope(torch, k, cos[:, None], sin[:, None]).transpose(1, 2)
        k_cache[:, :, kv_len - tokens :].copy_(k)
        v_cache[:, :, kv_len - tokens :].copy_(v.transpose(1, 2))
        if tokens == 1:
            return decode_attention(sdpa, q.squeeze(2), k_cache, v_cache)
        out = sdpa(q, k_cache, v_cache, is_causal=True, enable_gqa=True)
        return out.transpose(1, 2).reshape(batch * tokens, heads * dim)

    def step(x):
        h = rms_norm(x, (hidden,), w["norm1"], 1e-5)
        q, k, v = (h @ w["qkv"].t()).split((heads * dim, kv_heads * dim, kv_heads * dim), -1)
        q, k = q.view(batch, tokens, heads, dim), k.view(batch, tokens, kv_heads, dim)
        if qk_norm:
            q, k = rms_norm(q, (dim,), w["q_norm"], 1e-6), rms_norm(k, (dim,), w["k_norm"], 1e-6)
        a = attention(q, k, v.view(batch, tokens, kv_heads, dim))
        x = x + a @ w["o"].t()
        h = rms_norm(x, (hidden,), w["norm2"], 1e-5)
        if mlp is not None:
            return x + mlp(h)
        gate, up = (h @ w["gate_up"].t()).chunk(2, dim=-1)
        return x + (silu(gate) * up) @ w["down"].t()

    return step


def layers_time_s(torch, layers: list[Callable], x0, smoke: bool) -> float:
    """Time of one layer: a CUDA graph of `layers` (each with its own weights and cache, so
    no layer finds its weights in the L2) replayed, divided by their number."""

    def forward():
        x = x0
        for layer in layers:
            x = layer(x)
        return x

    return timed(torch, forward, 2 if smoke else 10, smoke, graph=True) / len(layers)


LAYER_TEXT = (
    "a Llama layer in plain PyTorch: RMSNorm, fused QKV GEMM, RoPE, KV-cache write, "
    "{attention}, O projection, residual, RMSNorm, fused gate/up GEMM, SiLU x up, down GEMM, "
    "residual; no bias; random weights, a contiguous BF16 KV cache. Timed as a CUDA-graph "
    "replay of {depth} such layers with their own weights and caches, divided by {depth}: no "
    "launch gaps, no weight reuse in L2."
)
DECODE_FAMILY_TEXT = {
    "kv_shared": "group-aware SDPA attention (the G query heads of a KV head as G query "
    "rows; torch's flash kernel has no KV split, so few thread blocks at small batch)",
    "kv_per_query_head": "SDPA attention with enable_gqa (one query row per head, the "
    "group's KV head read by each of its G heads)",
}


@dataclass(frozen=True)
class MlpVariant:
    """Layers whose MLP is not the dense SwiGLU (gpu_moe.py: an MoE layer)."""

    shapes: tuple  # the models measured, gpu_workloads shape tuples
    smoke_shape: tuple  # a tiny one for the CPU smoke run
    make_ffn: Callable  # (torch, shape, smoke) -> (ffn closure h -> out, qk_norm)
    cells: Callable[[tuple], dict]  # shape -> the schema cells beyond dense_cells
    text: str  # appended to the row's notes
    extra: str  # appended to extra_params


def layer_grid(phase: str, variant: MlpVariant | None) -> list[tuple[int, int]]:
    """(batch, kv_len or input_len) of the measured layers."""
    if variant is not None:
        return (
            [(b, 4096) for b in (1, 16, 64, 256)] if phase == "decode" else [(1, 2048), (4, 2048)]
        )
    if phase == "decode":
        return [(b, kv) for b in DECODE_BATCH for kv in DECODE_KV] + [(64, 8192)]
    return [(1, 512), (1, 2048), (4, 2048), (1, 8192), (16, 512)]


def measure_layers(
    torch,
    new_row: Callable[..., dict],
    phase: str,
    family: str,
    smoke: bool,
    variant: MlpVariant | None = None,
) -> list[dict]:
    """layer_decode (phase "decode", attention `family`) or layer_prefill rows, of Llama
    layers or of `variant`'s."""
    rows = []
    shapes = variant.shapes if variant else (LLAMA_8B, LLAMA_70B)
    cases = [(s, b, n) for s in shapes for b, n in layer_grid(phase, variant)]
    if smoke:
        cases = [(variant.smoke_shape if variant else ("tiny", 64, 4, 2, 16, 128, 1000, ""), 2, 32)]
    for shape, batch, length in cases:
        name, hidden, heads, kv_heads, dim, ffn, _, hf = shape
        depth = 1 if smoke else (4 if phase == "decode" else 2)
        tokens = 1 if phase == "decode" else length
        layers = []
        for _ in range(depth):
            mlp, qk_norm = variant.make_ffn(torch, shape, smoke) if variant else (None, False)
            layers.append(
                make_layer(torch, shape, batch, tokens, length, family, smoke, mlp, qk_norm)
            )
        x0 = torch.randn(batch * tokens, hidden, device=dev(smoke), dtype=torch.bfloat16)
        per_layer = layers_time_s(torch, layers, x0, smoke)
        if phase == "decode":
            what = "One decode step (one new token for each of `batch` sequences against a "
            what += "cache of kv_len tokens) of "
            cells = {"kv_len": length}
            attention = DECODE_FAMILY_TEXT[family]
            extra = f"decode_attention={setup_family(family, heads, kv_heads)}"
        else:
            what = "The prefill of `batch` prompts of input_len tokens through "
            cells = {"input_len": length, "output_len": 1}
            # PyTorch's default SDPA backend: cuDNN's sm90 kernels on the H200 (its kernel
            # profile, tests/data/profiles/h200), the setup's default attention_kernel
            attention = "causal SDPA attention (PyTorch's default backend, GQA)"
            extra = "attention_impl=fused"
        rows.append(
            new_row(
                f"layer_{phase}",
                precision="bf16",
                model=f"{name} (one layer)",
                layers=1,
                **dense_cells(shape) | (variant.cells(shape) if variant else {}),
                batch=batch,
                metric="layer_time_s",
                value=repr(per_layer),
                value_as_published=f"{per_layer * 1e6:.2f} us per layer (CUDA graph of "
                f"{depth} layers)",
                notes=what
                + LAYER_TEXT.format(attention=attention, depth=depth)
                + (variant.text if variant else ""),
                extra_params=(f"hf_config={hf};" if hf else "")
                + extra
                + ";library=torch;timing=cuda_graph_replay;eager_activation=1;eager_rope=1"
                + (variant.extra if variant else ""),
                **cells,
            )
        )
        del layers, x0
        if not smoke:
            torch.cuda.empty_cache()
    return rows


def measure_layer_decode(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    return measure_layers(torch, new_row, "decode", "kv_shared", smoke)


def measure_layer_decode_per_head(torch, new_row: Callable[..., dict], smoke: bool = False):
    return measure_layers(torch, new_row, "decode", "kv_per_query_head", smoke)


def measure_layer_prefill(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    return measure_layers(torch, new_row, "prefill", "", smoke)


# ---------------------------------------------------------------------------------------
# MoE expert GEMMs
# ---------------------------------------------------------------------------------------


def grouped_mm(torch, a, w, offsets):
    """torch._grouped_mm of a (tokens, k) against w (experts, n, k): each expert's rows."""
    return torch._grouped_mm(a, w.transpose(-2, -1), offs=offsets, out_dtype=torch.bfloat16)


def expert_gemm_row(
    new_row: Callable[..., dict],
    shape: tuple[int, int, int, int],
    seconds: float,
    what: str,
    notes: str,
    extra: str,
    usable: bool,
) -> dict:
    """A `gemm` row of one call over `shape` = (experts, tokens each, k, n), BF16."""
    experts, m, k, n = shape
    return new_row(
        "gemm",
        precision="bf16",
        batch=experts,
        m=m,
        k=k,
        n=n,
        metric="throughput_flops",
        value=repr(2.0 * experts * m * k * n / seconds),
        value_as_published=f"{seconds * 1e6:.3f} us ({what})",
        flop_convention="2bmnk",
        usable="1" if usable else "0",
        notes=notes,
        extra_params=extra,
    )


def measure_expert_gemms(torch, new_row: Callable[..., dict], smoke: bool = False) -> list:
    rows = []
    moe, tokens = (MOE, TOKENS_PER_EXPERT) if not smoke else ((("tiny", 4, 64, 32),), (16,))
    for model, experts, hidden, ffn in moe:
        for k, n, what in ((hidden, 2 * ffn, "gate+up"), (ffn, hidden, "down")):
            w = torch.randn(experts, n, k, device=dev(smoke), dtype=torch.bfloat16)
            for m in tokens:
                a = torch.randn(experts, m, k, device=dev(smoke), dtype=torch.bfloat16)
                flat = a.view(experts * m, k)
                offsets = torch.arange(1, experts + 1, device=dev(smoke), dtype=torch.int32) * m
                # torch._grouped_mm exists from PyTorch 2.8 (Hopper and later GPUs)
                libraries = (
                    ("torch_bmm", GROUPED) if hasattr(torch, "_grouped_mm") else ("torch_bmm",)
                )
                for library in libraries:
                    if library == "torch_bmm":
                        fn = lambda a=a, w=w: torch.bmm(a, w.transpose(-2, -1))  # noqa: E731
                    else:
                        fn = lambda f=flat, w=w, o=offsets: grouped_mm(torch, f, w, o)  # noqa: E731
                    t = timed(torch, fn, 20, smoke, graph=True)
                    grouped = library == GROUPED
                    rows.append(
                        expert_gemm_row(
                            new_row,
                            (experts, m, k, n),
                            t,
                            f"{library}, {experts} experts x {m} tokens, {model} {what}",
                            (GROUPED_NOTE if grouped else "")
                            + f"MoE expert GEMM of {model} ({what}): {experts} experts, "
                            f"{m} tokens each, in one {library} call; BF16 in and out, "
                            "random normal data.",
                            f"library={library};timing=cuda_graph_replay;op=moe_expert_"
                            f"{what.replace('+', '_')};derived_kernel_time_s={t!r}",
                            usable=not grouped,
                        )
                    )
                del a, flat
            del w
    return rows
